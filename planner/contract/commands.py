"""From plan to proof: the engine launch and benchmark commands that reproduce a plan.

One mapping per engine (vLLM, SGLang, TensorRT-LLM) turns the scenario's settings into that engine's
documented flags (names and value forms: data/reference/engine_cli_flags.json); the benchmark is
`vllm bench serve` on the random dataset at the planned lengths and operating point. Also written
here: the launch script, a minimal Kubernetes Deployment and the sheet of figures the benchmark
should print. Pure text generation: no engine is imported or run.
"""

from __future__ import annotations

import json
import math
import shlex
from dataclasses import dataclass, field
from typing import Any

from planner.core.errors import ScenarioError
from planner.engines.base import DEFAULT_ENGINE, SERVING_ENGINES
from planner.hardware.parallelism import effective_ep, validate_parallelism
from planner.model.presets import preset_hf_id
from planner.scenario.scenario import Scenario, parse_scenario, resolve_gpu, resolve_model
from planner.serving.benchmark_client import MIN_PROMPTS, default_num_prompts

ENGINES = SERVING_ENGINES  # the engines a launch command exists for
HEALTH_PATH = "/health"  # all three servers answer GET /health with 200 once ready
PORTS = {"vllm": 8000, "sglang": 30000, "trt-llm": 8000}
MODEL_PLACEHOLDER = "YOUR_MODEL_ID"
DRAFT_PLACEHOLDER = "YOUR_DRAFT_MODEL_ID"
RESULT_FILENAME = "ridgeline_bench.json"
PERCENTILES = (50, 90, 99)
BENCH_SECONDS = 120  # open loop: about two minutes of arrivals at the planned rate
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


@dataclass(frozen=True)
class ExpectedFigure:
    """One line `vllm bench serve` prints, with the plan's value and its error band where one exists."""

    label: str
    result_key: str  # the key in the --save-result JSON
    unit: str
    predicted: float | None
    band_low: float | None = None
    band_high: float | None = None


@dataclass(frozen=True)
class CommandSet:
    engine: str
    model_id: str
    gpus_per_replica: int
    launch: LaunchCommand
    bench: tuple[str, ...]
    expected: tuple[ExpectedFigure, ...]
    notes: tuple[str, ...]


def model_id(scenario: Scenario) -> str | None:
    """The Hugging Face id an engine loads: the preset's, or `_name_or_path` of an imported config."""
    if isinstance(scenario.model, str):
        return preset_hf_id(scenario.model)
    config = scenario.model.get("hf_config")
    if isinstance(config, dict):
        name = config.get("_name_or_path")
        if isinstance(name, str) and 0 < len(name) <= 200 and not name.startswith(("/", ".")):
            return name
    return None


def pick_engine(scenario: Scenario, engine: str | None) -> str:
    if engine is None:
        return scenario.engine if scenario.engine in ENGINES else DEFAULT_ENGINE
    if engine not in ENGINES:
        raise ScenarioError("engine", f"must be one of {', '.join(ENGINES)}")
    return engine


def _fmt(x: float) -> str:
    """A float flag value without float noise: 0.9 not 0.9000000000000001."""
    return f"{x:.6g}"


def _range_ratio(s: Scenario) -> float:
    # uniform lengths on len * (1 +/- r) have a coefficient of variation r / sqrt(3)
    cv = s.load.prompt_len_cv if s.load is not None else 0.0
    return min(MAX_RANGE_RATIO, cv * math.sqrt(3))


def _max_model_len(s: Scenario) -> int:
    """The engine's context limit: as given, else the planned context, else the longest benchmark request."""
    if s.max_model_len is not None:
        return s.max_model_len
    if s.context_len is not None:
        return s.context_len
    return math.ceil((s.prompt_len + s.output_len) * (1 + _range_ratio(s)))


def _prefix_tokens(s: Scenario) -> int:
    hit = s.load.prefix_cache_hit if s.load is not None else 0.0
    return min(s.prompt_len - 1, round(hit * s.prompt_len)) if hit > 0 else 0


def _weights_notes(s: Scenario, engine: str) -> list[str]:
    if s.weights in ("int8", "int4", "fp4"):
        return [f"{s.weights} weights: serve a checkpoint already quantized to {s.weights} (AWQ/GPTQ, W8A8, NVFP4...); "
                f"{engine} reads the method from its config, so no quantization flag is set"]
    return []


def _vllm(s: Scenario, hf_id: str, batch: int, moe: bool) -> LaunchCommand:
    argv = ["vllm", "serve", hf_id, "--host", "0.0.0.0", "--port", str(PORTS["vllm"]),
            "--tensor-parallel-size", str(s.tp)]
    notes = _weights_notes(s, "vLLM")
    if s.pp > 1:
        argv += ["--pipeline-parallel-size", str(s.pp)]
    if s.ep > 1:
        if moe:
            argv += ["--enable-expert-parallel"]
            if s.ep != s.tp:
                notes.append(f"vLLM shards experts over TP x DP ranks ({s.tp} here), not over a separate ep={s.ep}")
        else:
            notes.append(f"ep={s.ep} is ignored: the model has no experts")
    argv += ["--max-model-len", str(_max_model_len(s)),
             "--gpu-memory-utilization", _fmt(s.memory.utilization),
             "--max-num-seqs", str(s.max_num_seqs or batch),
             "--max-num-batched-tokens", str(s.max_num_batched_tokens)]
    if s.block_size in VLLM_BLOCK_SIZES:
        argv += ["--block-size", str(s.block_size)]
    else:
        notes.append(f"block_size {s.block_size} is not one vLLM accepts ({', '.join(map(str, VLLM_BLOCK_SIZES))}); "
                     "left to the engine")
    if s.weights == "fp8":
        argv += ["--quantization", "fp8"]
    elif s.weights in VLLM_DTYPE:
        argv += ["--dtype", VLLM_DTYPE[s.weights]]
    kv = VLLM_KV_DTYPE.get(s.kv_cache, "unsupported")
    if kv == "unsupported":
        notes.append(f"vLLM has no {s.kv_cache} KV cache; the engine will store it in the model dtype")
    elif kv is not None:
        argv += ["--kv-cache-dtype", kv]
    if _prefix_tokens(s):
        argv += ["--enable-prefix-caching"]
    if s.enforce_eager:
        argv += ["--enforce-eager"]
    if s.speculative is not None:
        spec = {"model": DRAFT_PLACEHOLDER, "num_speculative_tokens": s.speculative.draft_tokens}
        argv += ["--speculative-config", json.dumps(spec, separators=(",", ":"))]
        notes.append(f"replace {DRAFT_PLACEHOLDER} with a draft model of about "
                     f"{s.speculative.draft_params / 1e9:.2g}B parameters that shares the target's tokenizer")
    return LaunchCommand("vllm", tuple(argv), PORTS["vllm"], notes=tuple(notes))


def _pp_ep_flags(s: Scenario, moe: bool, pp_flag: str, ep_flag: str, notes: list[str]) -> list[str]:
    """Pipeline and expert-parallel sizes as flags (SGLang and TensorRT-LLM take both as sizes)."""
    argv = [pp_flag, str(s.pp)] if s.pp > 1 else []
    if s.ep > 1:
        if moe:
            argv += [ep_flag, str(s.ep)]
        else:
            notes.append(f"ep={s.ep} is ignored: the model has no experts")
    return argv


def _sglang(s: Scenario, hf_id: str, batch: int, moe: bool) -> LaunchCommand:
    argv = ["python", "-m", "sglang.launch_server", "--model-path", hf_id, "--host", "0.0.0.0",
            "--port", str(PORTS["sglang"]), "--tp-size", str(s.tp)]
    notes = _weights_notes(s, "SGLang")
    argv += _pp_ep_flags(s, moe, "--pp-size", "--ep-size", notes)
    argv += ["--context-length", str(_max_model_len(s)),
             "--mem-fraction-static", _fmt(s.memory.utilization),
             "--max-running-requests", str(batch),
             "--chunked-prefill-size", str(s.max_num_batched_tokens),
             "--page-size", str(s.block_size)]
    notes.append("SGLang's --mem-fraction-static covers weights and the KV pool only (activations come from the rest); "
                 "it is set to the planned memory utilization")
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
        notes.append("speculative decoding: add SGLang's --speculative-algorithm / --speculative-draft-model-path / "
                     f"--speculative-num-draft-tokens for your draft model ({s.speculative.draft_tokens} draft tokens "
                     "planned); not generated because the right algorithm depends on the draft model")
    return LaunchCommand("sglang", tuple(argv), PORTS["sglang"], notes=tuple(notes))


def _yaml_scalar(value: Any) -> str:
    return json.dumps(value) if isinstance(value, str) else str(value).lower() if isinstance(value, bool) else str(value)


def _trtllm(s: Scenario, hf_id: str, batch: int, moe: bool, kv_fraction: float) -> LaunchCommand:
    argv = ["trtllm-serve", hf_id, "--backend", "pytorch", "--host", "0.0.0.0", "--port", str(PORTS["trt-llm"]),
            "--tp_size", str(s.tp)]
    notes = _weights_notes(s, "TensorRT-LLM")
    argv += _pp_ep_flags(s, moe, "--pp_size", "--ep_size", notes)
    argv += ["--max_seq_len", str(_max_model_len(s)), "--max_batch_size", str(batch),
             "--max_num_tokens", str(s.max_num_batched_tokens),
             "--kv_cache_free_gpu_memory_fraction", _fmt(kv_fraction)]
    notes.append("TensorRT-LLM's KV fraction is of the memory left after weights: set to the planned KV budget / "
                 "(GPU memory - weights)")
    if s.weights == "fp8":
        notes.append("fp8 weights: serve an FP8 checkpoint (e.g. quantized with NVIDIA ModelOpt); the PyTorch backend "
                     "reads the quantization from it")
    kv_config: dict[str, Any] = {"tokens_per_block": s.block_size, "enable_block_reuse": bool(_prefix_tokens(s))}
    kv = TRTLLM_KV_DTYPE.get(s.kv_cache, "unsupported")
    if kv == "unsupported":
        notes.append(f"TensorRT-LLM has no {s.kv_cache} KV cache here; it will use the model dtype")
    elif kv is not None:
        kv_config["dtype"] = kv
    options = "kv_cache_config:\n" + "".join(f"  {k}: {_yaml_scalar(v)}\n" for k, v in kv_config.items())
    argv += ["--extra_llm_api_options", TRTLLM_OPTIONS_FILE]
    if s.enforce_eager:
        notes.append("enforce_eager: disable CUDA graphs in the extra options file (cuda_graph_config)")
    if s.speculative is not None:
        notes.append(f"speculative decoding: add a speculative_config for your draft model "
                     f"({s.speculative.draft_tokens} draft tokens planned) to {TRTLLM_OPTIONS_FILE}")
    return LaunchCommand("trt-llm", tuple(argv), PORTS["trt-llm"], files={TRTLLM_OPTIONS_FILE: options},
                         notes=tuple(notes))


def _num_prompts(s: Scenario, concurrency: int | None) -> int:
    if s.load is not None and s.load.request_rate is not None:
        return max(MIN_PROMPTS, math.ceil(s.load.request_rate * BENCH_SECONDS))
    if s.load is not None and s.load.benchmark.num_prompts is not None:
        return s.load.benchmark.num_prompts
    return default_num_prompts(concurrency or 1)  # the plan's benchmark section sends the same


def bench_argv(s: Scenario, engine: str, hf_id: str, batch: int) -> tuple[tuple[str, ...], list[str]]:
    """`vllm bench serve` at the planned lengths and operating point; returns (argv, notes)."""
    notes: list[str] = []
    prefix = _prefix_tokens(s)
    argv = ["vllm", "bench", "serve", "--backend", "vllm" if engine == "vllm" else "openai",
            "--base-url", f"http://127.0.0.1:{PORTS[engine]}", "--model", hf_id,
            "--dataset-name", "random", "--random-input-len", str(s.prompt_len - prefix),
            "--random-output-len", str(s.output_len)]
    if prefix:
        argv += ["--random-prefix-len", str(prefix)]
        notes.append(f"{prefix} shared prefix tokens + {s.prompt_len - prefix} random tokens per prompt reproduce the "
                     "planned prefix-cache hit rate")
    bench = s.load.benchmark if s.load is not None else None
    if bench is not None and bench.random_range_ratio < 1.0:
        # the plan's benchmark client draws the same lengths (vllm bench serve: [L(1 - r), L(1 + r)])
        ratio = bench.random_range_ratio if bench.range == "around" else (1.0 - bench.random_range_ratio) / 2
        argv += ["--random-range-ratio", _fmt(ratio)]
        if bench.range == "below":
            notes.append("vllm bench serve draws lengths around L, not in [r L, L] as benchmark_serving.py "
                         f"does: --random-range-ratio {_fmt(ratio)} keeps the spread, its mean is L, not (1 + r) L / 2")
    elif _range_ratio(s) > 0:
        argv += ["--random-range-ratio", _fmt(_range_ratio(s))]
        if s.load is not None and s.load.output_len_cv != s.load.prompt_len_cv:
            notes.append("vllm bench serve applies one range ratio to prompt and output lengths; it follows prompt_len_cv")
    concurrency: int | None = None
    if s.load is not None and s.load.request_rate is not None:
        argv += ["--request-rate", _fmt(s.load.request_rate)]
        if s.load.arrival_cv != 1.0:
            if s.load.arrival_cv > 0:
                # gamma inter-arrivals with shape k have a coefficient of variation 1 / sqrt(k)
                argv += ["--burstiness", _fmt(1.0 / s.load.arrival_cv ** 2)]
            else:
                notes.append("arrival_cv 0 (evenly spaced arrivals) has no vllm bench equivalent; Poisson is used")
    else:
        concurrency = s.load.concurrency if s.load is not None and s.load.concurrency is not None else batch
        argv += ["--max-concurrency", str(concurrency)]
    argv += ["--num-prompts", str(_num_prompts(s, concurrency)), "--ignore-eos",
             "--percentile-metrics", "ttft,tpot,itl,e2el",
             "--metric-percentiles", ",".join(map(str, PERCENTILES))]
    slo = s.load.slo if s.load is not None else None
    if slo is not None and (slo.ttft_ms or slo.itl_ms):
        argv += ["--goodput"] + ([f"ttft:{_fmt(slo.ttft_ms)}"] if slo.ttft_ms else []) + (
            [f"tpot:{_fmt(slo.itl_ms)}"] if slo.itl_ms else [])
    argv += ["--save-result", "--result-filename", RESULT_FILENAME]
    return tuple(argv), notes


Span = tuple[float, float] | None  # a figure's (low, high) band, or None


def _band(band: Any) -> Span:
    if isinstance(band, dict) and band.get("low") is not None and band.get("high") is not None:
        return float(band["low"]), float(band["high"])
    return None


def _figure(label: str, key: str, unit: str, value: float | None, band: Span = None) -> ExpectedFigure:
    return ExpectedFigure(label, key, unit, value, *(band if band is not None else (None, None)))


def _relative(band: Span, estimate: float) -> tuple[float, float] | None:
    """A plan band as factors of its estimate (error bands are the estimate over fixed residual quantiles)."""
    return (band[0] / estimate, band[1] / estimate) if band is not None and estimate > 0 else None


def _times(value: float | None, factors: tuple[float, float] | None) -> Span:
    return (value * factors[0], value * factors[1]) if value is not None and factors is not None else None


def _pct(section: Any, key: str, p: int) -> float | None:
    pcts = section.get(key) if isinstance(section, dict) else None
    value = pcts.get(f"p{p}") if isinstance(pcts, dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _benchmark_figures(bench: dict[str, Any]) -> tuple[ExpectedFigure, ...]:
    """A closed loop at load.concurrency: the plan's benchmark section is what the run reports, under the
    same definitions (TPOT per request, ITL pooled over tokens, throughputs over the run)."""
    def number(value: Any) -> float | None:
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    out = [_figure("Request throughput", "request_throughput", "req/s", number(bench.get("request_throughput"))),
           _figure("Output token throughput", "output_throughput", "tok/s", number(bench.get("output_throughput")))]
    for key, label, result in (("ttft_ms", "TTFT", "ttft"), ("tpot_ms", "TPOT", "tpot"), ("itl_ms", "ITL", "itl"),
                               ("e2e_ms", "E2EL", "e2el")):
        out.append(_figure(f"Mean {label}", f"mean_{result}_ms", "ms", number((bench.get(key) or {}).get("mean"))))
        for p in PERCENTILES:
            name = "Median" if p == 50 else f"P{p}"
            out.append(_figure(f"{name} {label}", f"{'median' if p == 50 else f'p{p}'}_{result}_ms", "ms",
                               _pct(bench, key, p)))
    return tuple(out)


def _serving_figures(s: Scenario, plan_json: dict[str, Any], serving: dict[str, Any]) -> tuple[ExpectedFigure, ...]:
    """From the plan's `serving` section (the replica at its operating point): throughputs and the
    TTFT / ITL / E2E percentiles. Bands: the plan's TTFT and ITL bands carried over as factors of their
    estimates; throughput takes the inverse of the ITL factors. TPOT's median is the ITL median; with
    speculative decoding TPOT and ITL are the speculative section's per-token and per-round times."""
    lat = plan_json["latency"]
    bench = serving.get("benchmark")
    if isinstance(bench, dict) and not plan_json.get("speculative"):
        return _benchmark_figures(bench)
    ttft_f = _relative(_band(lat.get("ttft_band_ms")), float(lat["ttft_ms"]))
    itl_f = _relative(_band(lat.get("itl_band_ms")), float(lat["itl_ms"]))
    tput_f = (1 / itl_f[1], 1 / itl_f[0]) if itl_f is not None else None
    if serving.get("mode") == "request_rate" and serving.get("stable"):
        tput_f = None  # an open loop below saturation completes what arrives: the rate is given, not predicted
    rate = serving.get("request_rate")
    tokens = serving.get("output_tokens_per_s")
    rate = float(rate) if isinstance(rate, (int, float)) else None
    tokens = float(tokens) if isinstance(tokens, (int, float)) else None
    spec = plan_json.get("speculative")
    itl50 = _pct(serving, "itl_ms", 50)
    tpot, itl = (float(spec["itl_ms"]), float(spec["round_ms"])) if spec else (itl50, itl50)
    spec_f = None if spec else itl_f
    out = [
        _figure("Request throughput", "request_throughput", "req/s", rate, _times(rate, tput_f)),
        _figure("Output token throughput", "output_throughput", "tok/s", tokens, _times(tokens, tput_f)),
    ]
    for key, label, result, factors in (("ttft_ms", "TTFT", "ttft", ttft_f), ("itl_ms", "ITL", "itl", spec_f),
                                        ("e2e_ms", "E2EL", "e2el", None)):
        for p in PERCENTILES:
            value = _pct(serving, key, p)
            if key == "itl_ms" and p == 50:
                out.append(_figure("Median TPOT", "median_tpot_ms", "ms", tpot, _times(tpot, spec_f)))
                value = itl
            name = "Median" if p == 50 else f"P{p}"
            out.append(_figure(f"{name} {label}", f"{'median' if p == 50 else f'p{p}'}_{result}_ms", "ms", value,
                               _times(value, factors)))
    return tuple(out)


def expected_figures(s: Scenario, plan_json: dict[str, Any]) -> tuple[ExpectedFigure, ...]:
    """What `vllm bench serve` should print for this plan, from the plan's own figures (no recomputation).

    With a `serving` section (the plan at its operating point) its figures are used. Without one, the
    batch-step figures stand for the medians of a closed loop at that batch: TPOT is the decode step
    time (ITL); with speculative decoding a step emits several tokens, so TPOT is the per-token time and
    the streamed ITL is the round time. E2E = TTFT + (output_len - 1) x TPOT. Request throughput is the
    arrival rate in an open loop (below saturation) and batch / E2E in a closed loop (Little's law)."""
    serving = plan_json.get("serving")
    if isinstance(serving, dict) and _pct(serving, "ttft_ms", 50) is not None:
        return _serving_figures(s, plan_json, serving)
    lat, thr = plan_json["latency"], plan_json["throughput"]
    spec = plan_json.get("speculative")
    ttft = float(lat["ttft_ms"])
    ttft_band = _band(lat.get("ttft_band_ms"))
    tpot_band: Span = None
    if spec:
        tpot, itl, tokens_per_s = float(spec["itl_ms"]), float(spec["round_ms"]), float(spec["output_tokens_per_s"])
    else:
        tpot = itl = float(lat["itl_ms"])
        tpot_band = _band(lat.get("itl_band_ms"))
        tokens_per_s = float(thr["output_tokens_per_s"])
    steps = s.output_len - 1
    e2e = ttft + steps * tpot
    e2e_band: Span = ((ttft_band[0] + steps * tpot_band[0], ttft_band[1] + steps * tpot_band[1])
                      if ttft_band is not None and tpot_band is not None else None)
    rps_band: Span = None
    if s.load is not None and s.load.request_rate is not None:
        # open loop below saturation: every arriving request completes, so throughput is the arrival rate
        requests_per_s = min(tokens_per_s / s.output_len, s.load.request_rate)
    else:
        # closed loop (Little's law): `batch` requests in flight, each lasting one E2E
        batch = int(lat["batch"])
        requests_per_s = batch * 1000.0 / e2e
        if e2e_band is not None:
            rps_band = (batch * 1000.0 / e2e_band[1], batch * 1000.0 / e2e_band[0])
    tokens_band: Span = (rps_band[0] * s.output_len, rps_band[1] * s.output_len) if rps_band is not None else None
    out = [
        _figure("Request throughput", "request_throughput", "req/s", requests_per_s, rps_band),
        _figure("Output token throughput", "output_throughput", "tok/s", requests_per_s * s.output_len, tokens_band),
        _figure("Median TTFT", "median_ttft_ms", "ms", ttft, ttft_band),
        _figure("Median TPOT", "median_tpot_ms", "ms", tpot, tpot_band),
        _figure("Median ITL", "median_itl_ms", "ms", itl, tpot_band),
        _figure("Median E2EL", "median_e2el_ms", "ms", e2e, e2e_band),
    ]
    for key, label in (("ttft", "TTFT"), ("itl", "ITL"), ("e2el", "E2EL")):
        out += [_figure(f"P{p} {label}", f"p{p}_{key}_ms", "ms", None) for p in PERCENTILES[1:]]
    return tuple(out)


def command_set(scenario: Scenario | dict[str, Any], engine: str | None = None,
                plan_json: dict[str, Any] | None = None) -> CommandSet:
    """Launch and benchmark commands for a scenario; `plan_json` is its plan when the caller has it."""
    s = scenario if isinstance(scenario, Scenario) else parse_scenario(scenario)
    name = pick_engine(s, engine)
    from planner.contract.planning import plan_dict

    if plan_json is None:
        plan_json = plan_dict(s)
    expected_plan = plan_json
    if s.load is not None and s.load.concurrency is not None and s.batch is None and not plan_json.get("serving"):
        # a closed loop runs `concurrency` sequences at once: its medians are the plan's at that batch
        expected_plan = plan_dict(s.model_copy(update={"batch": s.load.concurrency}))
    model = resolve_model(s.model)
    # the plan checked the layout for the scenario's engine; the commands may be for another one
    validate_parallelism(model, s.tp, s.pp, effective_ep(model, s.ep), name)
    hf_id = model_id(s)
    notes: list[str] = []
    if hf_id is None:
        hf_id = MODEL_PLACEHOLDER
        notes.append(f"the model has no known Hugging Face id: replace {MODEL_PLACEHOLDER} with it")
    if s.engine == "graph":
        notes.append("the scenario's engine is 'graph' (no serving engine); the commands use vLLM")
    batch = int(plan_json["latency"]["batch"])
    moe = model.moe is not None
    if name == "vllm":
        launch = _vllm(s, hf_id, batch, moe)
    elif name == "sglang":
        launch = _sglang(s, hf_id, batch, moe)
    else:
        gpu, _ = resolve_gpu(s.gpu)
        mem = plan_json["memory"]
        free_gb = gpu.memory_gb - float(mem["weights_gb_per_gpu"])
        fraction = min(1.0, max(0.01, float(mem["kv_budget_gb_per_gpu"]) / free_gb)) if free_gb > 0 else 0.01
        launch = _trtllm(s, hf_id, batch, moe, round(fraction, 2))
    bench, bench_notes = bench_argv(s, name, hf_id, batch)
    # EP groups wider than TP add GPUs per stage: the plan's layout counts them (planner.hardware.parallelism)
    gpus = int((plan_json.get("parallelism") or {}).get("gpus_per_replica") or s.tp * s.pp)
    if gpus > 8:
        notes.append(f"{gpus} GPUs per replica span more than one 8-GPU node: the single-pod manifest needs a "
                     "multi-node launcher (e.g. LeaderWorkerSet) instead")
    return CommandSet(engine=name, model_id=hf_id, gpus_per_replica=gpus, launch=launch, bench=bench,
                      expected=expected_figures(s, expected_plan), notes=tuple(notes + bench_notes))


def shell_command(argv: tuple[str, ...] | list[str]) -> str:
    """A copy-paste command line: the program and its positional arguments first, then each flag with
    its value(s) on its own continued line."""
    parts: list[str] = []
    for token in argv:
        quoted = shlex.quote(token)
        if token.startswith("-") and parts and not token.lstrip("-").replace(".", "").isdigit():
            parts.append(quoted)
        elif parts:
            parts[-1] += " " + quoted
        else:
            parts.append(quoted)
    return " \\\n    ".join(parts)


def _band_text(f: ExpectedFigure) -> str:
    return f"{f.band_low:,.2f} .. {f.band_high:,.2f}" if f.band_low is not None and f.band_high is not None else ""


def expected_sheet(cs: CommandSet) -> str:
    """The figures the benchmark should print, in its own words, with the plan's band."""
    lines = [f"Expected `vllm bench serve` figures ({cs.engine}, {cs.model_id})",
             f"{'figure':<34}{'result key':<20}{'plan':>12}  band (10th-90th pct of past error)"]
    for f in cs.expected:
        value = f"{f.predicted:,.2f}" if f.predicted is not None else "-"
        lines.append(f"{f.label + ' (' + f.unit + ')':<34}{f.result_key:<20}{value:>12}  {_band_text(f)}")
    lines.append("'-': the plan has no figure for it (yet); compare the rest line by line.")
    return "\n".join(lines) + "\n"


def launch_script(cs: CommandSet) -> str:
    """Bash: start the server, wait for /health, run the benchmark, stop the server."""
    launch = cs.launch
    files = "".join(f"cat > {shlex.quote(name)} <<'RIDGELINE_EOF'\n{text}RIDGELINE_EOF\n\n"
                    for name, text in launch.files.items())
    notes = "".join(f"# note: {n}\n" for n in (*launch.notes, *cs.notes))
    return (
        "#!/usr/bin/env bash\n"
        f"# Ridgeline: launch {cs.engine} with the planned settings, wait until it is healthy, benchmark it.\n"
        f"# Needs {cs.gpus_per_replica} GPU(s) and `vllm` installed for the benchmark client; gated models\n"
        "# (e.g. meta-llama) need HF_TOKEN set in the environment.\n"
        f"{notes}"
        "set -euo pipefail\n\n"
        f"{files}"
        f"{shell_command(launch.argv)} &\n"
        "SERVER_PID=$!\n"
        "trap 'kill $SERVER_PID 2>/dev/null || true' EXIT\n\n"
        f"echo 'waiting for http://127.0.0.1:{launch.port}{HEALTH_PATH} ...'\n"
        f"until curl -sf http://127.0.0.1:{launch.port}{HEALTH_PATH} > /dev/null; do\n"
        "  kill -0 $SERVER_PID 2>/dev/null || { echo 'server exited before becoming healthy' >&2; exit 1; }\n"
        "  sleep 5\n"
        "done\n\n"
        f"{shell_command(cs.bench)}\n\n"
        f"echo 'result: {RESULT_FILENAME} (compare: python -m planner compare-bench {RESULT_FILENAME} scenario.json)'\n"
    )


def _yaml(value: Any, indent: int = 0) -> str:
    """Block-style YAML for dicts, lists and scalars (strings JSON-quoted, so any text stays one scalar)."""
    pad = " " * indent
    if isinstance(value, dict):
        out = ""
        for k, v in value.items():
            if isinstance(v, (dict, list)) and v:
                out += f"{pad}{k}:\n{_yaml(v, indent + 2)}"
            else:
                out += f"{pad}{k}: {_yaml_scalar(v) if not isinstance(v, (dict, list)) else json.dumps(v)}\n"
        return out
    out = ""
    for item in value:
        if isinstance(item, dict) and item:
            body = _yaml(item, indent + 2)
            out += f"{pad}- {body[indent + 2:]}"
        else:
            out += f"{pad}- {_yaml_scalar(item)}\n"
    return out


def manifest_object(cs: CommandSet, name: str = "ridgeline-llm") -> dict[str, Any]:
    """The Deployment as data: one replica, the planned GPUs, probes on the engine's health path."""
    launch = cs.launch
    probe = {"httpGet": {"path": HEALTH_PATH, "port": launch.port}}
    volumes: list[dict[str, Any]] = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
    mounts: list[dict[str, Any]] = [{"name": "dshm", "mountPath": "/dev/shm"}]  # NCCL needs shared memory
    command = list(launch.argv)
    if launch.files:
        volumes.append({"name": "engine-options", "configMap": {"name": f"{name}-options"}})
        mounts.append({"name": "engine-options", "mountPath": "/etc/ridgeline"})
        command = [f"/etc/ridgeline/{t}" if t in launch.files else t for t in command]
    container = {
        "name": "engine",
        "image": {"vllm": "vllm/vllm-openai:latest", "sglang": "lmsysorg/sglang:latest",
                  "trt-llm": "nvcr.io/nvidia/tensorrt-llm/release:latest"}[cs.engine],
        "command": command,
        "ports": [{"containerPort": launch.port}],
        # gated repositories (e.g. meta-llama) need a Hugging Face token: secret `hf-token`, key `token`
        "env": [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token",
                                                                    "optional": True}}}],
        "resources": {"limits": {"nvidia.com/gpu": cs.gpus_per_replica},
                      "requests": {"nvidia.com/gpu": cs.gpus_per_replica}},
        # weights load before /health answers: readiness waits, liveness starts late
        "readinessProbe": {**probe, "initialDelaySeconds": 60, "periodSeconds": 10, "failureThreshold": 90},
        "livenessProbe": {**probe, "initialDelaySeconds": 900, "periodSeconds": 30, "failureThreshold": 5},
        "volumeMounts": mounts,
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                         "spec": {"containers": [container], "volumes": volumes}},
        },
    }


def k8s_manifest(cs: CommandSet, name: str = "ridgeline-llm") -> str:
    docs = []
    if cs.launch.files:
        config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-options"},
                      "data": dict(cs.launch.files)}
        docs.append(_yaml(config_map))
    docs.append(_yaml(manifest_object(cs, name)))
    header = f"# Ridgeline: {cs.engine} serving {cs.model_id} on {cs.gpus_per_replica} GPU(s) per replica.\n"
    return header + "---\n".join(docs)


def command_set_dict(cs: CommandSet) -> dict[str, Any]:
    return {
        "engine": cs.engine, "model_id": cs.model_id, "gpus_per_replica": cs.gpus_per_replica,
        "launch": {"argv": list(cs.launch.argv), "command": shlex.join(cs.launch.argv), "port": cs.launch.port,
                   "health_path": HEALTH_PATH, "files": dict(cs.launch.files), "notes": list(cs.launch.notes)},
        "bench": {"argv": list(cs.bench), "command": shlex.join(cs.bench), "result_file": RESULT_FILENAME},
        "expected": [{"figure": f.label, "result_key": f.result_key, "unit": f.unit, "predicted": f.predicted,
                      "band": ({"low": f.band_low, "high": f.band_high} if f.band_low is not None else None)}
                     for f in cs.expected],
        "notes": list(cs.notes),
    }


def commands_text(cs: CommandSet) -> str:
    files = "".join(f"# {name}\n{text}\n" for name, text in cs.launch.files.items())
    notes = "".join(f"# note: {n}\n" for n in (*cs.launch.notes, *cs.notes))
    return (f"# launch ({cs.engine}, {cs.gpus_per_replica} GPU(s))\n{files}{shell_command(cs.launch.argv)}\n\n"
            f"# benchmark (after GET http://127.0.0.1:{cs.launch.port}{HEALTH_PATH} answers 200)\n"
            f"{shell_command(cs.bench)}\n{notes}")


FORMATS = ("text", "script", "k8s", "json", "expected")


def render(cs: CommandSet, fmt: str) -> str:
    if fmt == "text":
        return commands_text(cs)
    if fmt == "script":
        return launch_script(cs)
    if fmt == "k8s":
        return k8s_manifest(cs)
    if fmt == "expected":
        return expected_sheet(cs)
    if fmt == "json":
        from planner.contract.planning import clean_json

        return json.dumps(clean_json(command_set_dict(cs)), indent=2, allow_nan=False) + "\n"
    raise ScenarioError("format", f"must be one of {', '.join(FORMATS)}")
