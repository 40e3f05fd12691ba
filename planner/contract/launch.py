"""Each serving engine's launch command: one mapping per engine (vLLM, SGLang, TensorRT-LLM) from the
scenario's settings to that engine's documented flags (names and value forms:
data/reference/engine_cli_flags.json). Pure text generation: no engine is imported or run."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from planner.scenario.scenario import Scenario

PORTS = {"vllm": 8000, "sglang": 30000, "trt-llm": 8000}
DRAFT_PLACEHOLDER = "YOUR_DRAFT_MODEL_ID"
MAX_RANGE_RATIO = 0.99  # vllm bench accepts a range ratio in [0, 1)

# vLLM --kv-cache-dtype / --dtype values for the scenario's precisions (None: the engine's "auto").
VLLM_KV_DTYPE = {"fp8": "fp8", "bf16": None, "fp16": None}
VLLM_DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
VLLM_BLOCK_SIZES = (1, 8, 16, 32, 64, 128, 256)
SGLANG_KV_DTYPE = {"fp8": "fp8_e4m3", "bf16": None, "fp16": None}
TRTLLM_KV_DTYPE = {"fp8": "fp8", "bf16": None, "fp16": None}
TRTLLM_OPTIONS_FILE = "extra_llm_api_options.yaml"


@dataclass(frozen=True)
class LaunchCommand:
    engine: str
    argv: tuple[str, ...]
    port: int
    files: dict[str, str] = field(default_factory=dict)  # files the command reads, by name
    notes: tuple[str, ...] = ()



def flag_value(x: float) -> str:
    """A float flag value without float noise: 0.9 not 0.9000000000000001."""
    return f"{x:.6g}"


def range_ratio(s: Scenario) -> float:
    # uniform lengths on len * (1 +/- r) have a coefficient of variation r / sqrt(3)
    cv = s.load.prompt_len_cv if s.load is not None else 0.0
    return min(MAX_RANGE_RATIO, cv * math.sqrt(3))


def max_model_len(s: Scenario) -> int:
    """The engine's context limit: as given, else the planned context, else the longest benchmark request."""
    if s.max_model_len is not None:
        return s.max_model_len
    if s.context_len is not None:
        return s.context_len
    return math.ceil((s.prompt_len + s.output_len) * (1 + range_ratio(s)))


def prefix_tokens(s: Scenario) -> int:
    hit = s.load.prefix_cache_hit if s.load is not None else 0.0
    return min(s.prompt_len - 1, round(hit * s.prompt_len)) if hit > 0 else 0


def _weights_notes(s: Scenario, engine: str) -> list[str]:
    if s.weights in ("int8", "int4", "fp4"):
        return [
            f"{s.weights} weights: serve a checkpoint already quantized to {s.weights} (AWQ/GPTQ, W8A8, "
            "NVFP4...); "
            f"{engine} reads the method from its config, so no quantization flag is set"
        ]
    return []


def _running_sequences(s: Scenario, batch: int, notes: list[str]) -> int:
    """vLLM's --max-num-seqs: the sequences the plan runs at once. A `max_num_seqs` above what the KV cache
    holds at the planned context is clipped to the plan's figure: with more, vLLM admits what the plan never
    ran and preempts once the blocks run out (the scheduler oracle measured 877-2,221 preemptions in 20,000
    requests at 90-95% load, issue 32)."""
    if s.max_num_seqs is None:
        return batch
    if s.max_num_seqs > batch:
        notes.append(f"max_num_seqs {s.max_num_seqs} is above the {batch} sequences the KV cache holds at "
                     f"the planned context: --max-num-seqs {batch} as planned, so vLLM won't preempt")
        return batch
    return s.max_num_seqs


def vllm_launch(s: Scenario, hf_id: str, batch: int, moe: bool, port: int = PORTS["vllm"]) -> LaunchCommand:
    """`port`: another than vLLM's default where several instances share a host (a disaggregated fleet)."""
    argv = ["vllm", "serve", hf_id, "--host", "0.0.0.0", "--port", str(port),
            "--tensor-parallel-size", str(s.tp)]
    notes = _weights_notes(s, "vLLM")
    if s.pp > 1:
        argv += ["--pipeline-parallel-size", str(s.pp)]
    if s.ep > 1:
        if moe:
            argv += ["--enable-expert-parallel"]
            if s.ep != s.tp:
                notes.append(
                    f"vLLM shards experts over TP x DP ranks ({s.tp} here), not over a separate ep={s.ep}"
                )
        else:
            notes.append(f"ep={s.ep} is ignored: the model has no experts")
    argv += ["--max-model-len", str(max_model_len(s)),
             "--gpu-memory-utilization", flag_value(s.memory.utilization),
             "--max-num-seqs", str(_running_sequences(s, batch, notes)),
             "--max-num-batched-tokens", str(s.max_num_batched_tokens)]
    if s.block_size in VLLM_BLOCK_SIZES:
        argv += ["--block-size", str(s.block_size)]
    else:
        notes.append(
            f"block_size {s.block_size} is not one vLLM accepts ({', '.join(map(str, VLLM_BLOCK_SIZES))}); "
            "left to the engine"
        )
    if s.weights == "fp8":
        argv += ["--quantization", "fp8"]
    elif s.weights in VLLM_DTYPE:
        argv += ["--dtype", VLLM_DTYPE[s.weights]]
    kv = VLLM_KV_DTYPE.get(s.kv_cache, "unsupported")
    if kv == "unsupported":
        notes.append(f"vLLM has no {s.kv_cache} KV cache; the engine will store it in the model dtype")
    elif kv is not None:
        argv += ["--kv-cache-dtype", kv]
    if prefix_tokens(s):
        argv += ["--enable-prefix-caching"]
    if s.enforce_eager:
        argv += ["--enforce-eager"]
    if s.speculative is not None:
        spec = {"model": DRAFT_PLACEHOLDER, "num_speculative_tokens": s.speculative.draft_tokens}
        argv += ["--speculative-config", json.dumps(spec, separators=(",", ":"))]
        notes.append(f"replace {DRAFT_PLACEHOLDER} with a draft model of about "
                     f"{s.speculative.draft_params / 1e9:.2g}B parameters that shares the target's tokenizer")
    return LaunchCommand("vllm", tuple(argv), port, notes=tuple(notes))


def _pp_ep_flags(s: Scenario, moe: bool, pp_flag: str, ep_flag: str, notes: list[str]) -> list[str]:
    """Pipeline and expert-parallel sizes as flags (SGLang and TensorRT-LLM take both as sizes)."""
    argv = [pp_flag, str(s.pp)] if s.pp > 1 else []
    if s.ep > 1:
        if moe:
            argv += [ep_flag, str(s.ep)]
        else:
            notes.append(f"ep={s.ep} is ignored: the model has no experts")
    return argv


def sglang_launch(s: Scenario, hf_id: str, batch: int, moe: bool) -> LaunchCommand:
    argv = ["python", "-m", "sglang.launch_server", "--model-path", hf_id, "--host", "0.0.0.0",
            "--port", str(PORTS["sglang"]), "--tp-size", str(s.tp)]
    notes = _weights_notes(s, "SGLang")
    argv += _pp_ep_flags(s, moe, "--pp-size", "--ep-size", notes)
    argv += ["--context-length", str(max_model_len(s)),
             "--mem-fraction-static", flag_value(s.memory.utilization), "--max-running-requests", str(batch),
             "--chunked-prefill-size", str(s.max_num_batched_tokens),
             "--page-size", str(s.block_size)]
    notes.append(
        "SGLang's --mem-fraction-static covers weights and the KV pool only (activations come from the "
        "rest); "
        "it is set to the planned memory utilization"
    )
    if s.weights == "fp8":
        argv += ["--quantization", "fp8"]
    kv = SGLANG_KV_DTYPE.get(s.kv_cache, "unsupported")
    if kv == "unsupported":
        notes.append(f"SGLang has no {s.kv_cache} KV cache here; it will use the model dtype")
    elif kv is not None:
        argv += ["--kv-cache-dtype", kv]
    if s.enforce_eager:
        argv += ["--disable-cuda-graph"]
    if s.speculative is not None:
        notes.append(
            "speculative decoding: add SGLang's --speculative-algorithm / --speculative-draft-model-path / "
            f"--speculative-num-draft-tokens for your draft model ({s.speculative.draft_tokens} draft tokens "
            "planned); not generated because the right algorithm depends on the draft model"
        )
    return LaunchCommand("sglang", tuple(argv), PORTS["sglang"], notes=tuple(notes))


def yaml_scalar(value: Any) -> str:
    return (
        json.dumps(value)
        if isinstance(value, str)
        else str(value).lower()
        if isinstance(value, bool)
        else str(value)
    )


def trtllm_launch(s: Scenario, hf_id: str, batch: int, moe: bool, kv_fraction: float) -> LaunchCommand:
    argv = [
        "trtllm-serve", hf_id, "--backend", "pytorch", "--host", "0.0.0.0", "--port", str(PORTS["trt-llm"]),
        "--tp_size", str(s.tp),
    ]
    notes = _weights_notes(s, "TensorRT-LLM")
    argv += _pp_ep_flags(s, moe, "--pp_size", "--ep_size", notes)
    argv += ["--max_seq_len", str(max_model_len(s)), "--max_batch_size", str(batch),
             "--max_num_tokens", str(s.max_num_batched_tokens),
             "--kv_cache_free_gpu_memory_fraction", flag_value(kv_fraction)]
    notes.append(
        "TensorRT-LLM's KV fraction is of the memory left after weights: set to the planned KV budget / "
        "(GPU memory - weights)"
    )
    if s.weights == "fp8":
        notes.append(
            "fp8 weights: serve an FP8 checkpoint (e.g. quantized with NVIDIA ModelOpt); the PyTorch backend "
            "reads the quantization from it"
        )
    kv_config: dict[str, Any] = {
        "tokens_per_block": s.block_size, "enable_block_reuse": bool(prefix_tokens(s)),
    }
    kv = TRTLLM_KV_DTYPE.get(s.kv_cache, "unsupported")
    if kv == "unsupported":
        notes.append(f"TensorRT-LLM has no {s.kv_cache} KV cache here; it will use the model dtype")
    elif kv is not None:
        kv_config["dtype"] = kv
    options = "kv_cache_config:\n" + "".join(f"  {k}: {yaml_scalar(v)}\n" for k, v in kv_config.items())
    argv += ["--extra_llm_api_options", TRTLLM_OPTIONS_FILE]
    if s.enforce_eager:
        notes.append("enforce_eager: disable CUDA graphs in the extra options file (cuda_graph_config)")
    if s.speculative is not None:
        notes.append(f"speculative decoding: add a speculative_config for your draft model "
                     f"({s.speculative.draft_tokens} draft tokens planned) to {TRTLLM_OPTIONS_FILE}")
    return LaunchCommand("trt-llm", tuple(argv), PORTS["trt-llm"], files={TRTLLM_OPTIONS_FILE: options},
                         notes=tuple(notes))
