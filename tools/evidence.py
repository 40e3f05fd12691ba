"""Evidence for the time model: public measurements (data/reference/measured_published.csv) and our own
device measurements (data/measurements/*.json), each turned into a scenario and a metric to predict.

Every case says whether it is scored, and whether it is held out of the fitting (validation only).
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpu_catalog import get_gpu
from planner import plan
from planner.physics.latency import static_batch_e2e_ms, static_batch_tokens_per_s
from planner.scenario.scenario import parse_scenario, resolve
from planner.serving.load import itl_under_concurrency

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED_CSV = ROOT / "data" / "reference" / "measured_published.csv"
# more public rows of the three engines, same columns (issue 10's engine profiles)
ENGINE_ROWS_CSV = ROOT / "data" / "reference" / "engine_rows_published.csv"
MEASUREMENTS = ROOT / "data" / "measurements"

LLAMA2_7B = {
    "name": "Llama-2-7B", "n_layers": 32, "d_model": 4096, "n_heads": 32, "n_kv_heads": 32, "d_ff": 11008,
    "vocab_size": 32000,
}
LLAMA2_13B = {"name": "Llama-2-13B", "n_layers": 40, "d_model": 5120, "n_heads": 40, "n_kv_heads": 40,
              "d_ff": 13824, "vocab_size": 32000}
LLAMA2_70B = {
    "name": "Llama-2-70B", "n_layers": 80, "d_model": 8192, "n_heads": 64, "n_kv_heads": 8, "d_ff": 28672,
    "vocab_size": 32000,
}
# GPT-J's MLP has two matrices, not three: the override keeps its 6.05B parameters.
GPTJ_6B = {
    "name": "GPT-J-6B", "n_layers": 28, "d_model": 4096, "n_heads": 16, "n_kv_heads": 16, "head_dim": 256,
    "d_ff": 10923, "vocab_size": 50400, "n_params": 6.053e9,
}

SERVED_ENGINES = ("NIM", "vLLM v0.11", "SGLang", "trtllm-serve")
# Engines of 2024-2025 (what "an optimized engine" means today); the fit weighs their rows double.
CURRENT_ENGINES = ("NIM", "vLLM", "SGLang", "TensorRT-LLM v1")  # client-side TTFT includes serving
HOLDOUT_EVERY = 3  # every third scored public row (by CSV order) is held out of the fit
FIT_GPU = "h200"  # device profiles are fitted on H200 rows; every H100 row validates the transfer


@dataclass
class Case:
    case_id: str
    source: str
    engine: str
    scenario: dict[str, Any]
    metric: str  # ttft_ms, prefill_ms, itl_ms, e2e_ms, tokens_per_s_total
    measured: float
    scored: bool = True
    heldout: bool = False
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    weight: float = 1.0  # in the fit's loss


def _model(name: str) -> str | dict:
    n = name.lower()
    if "gpt-j" in n:
        return GPTJ_6B
    if "llama-2-70b" in n or "llama 70b" in n:
        return LLAMA2_70B
    if "llama-2-13b" in n:
        return LLAMA2_13B
    if "llama-2-7b" in n or "llama 7b" in n:
        return LLAMA2_7B
    if "405b" in n:
        return "llama-3.1-405b"
    if "70b" in n:
        return "llama-3.1-70b"
    if "qwen3-8b" in n:
        return "qwen3-8b"
    if "8b" in n:
        return "llama-3.1-8b"
    raise ValueError(name)


def _gpu(name: str) -> str:
    # the GPU named first; notes in parentheses may name others ("A100 80GB (README says 'NVIDIA-H100'...)")
    n = name.lower().split("(")[0]
    if "h200" in n:
        return "h200"
    if "h100" in n:
        return "h100-sxm"
    if "a100" in n:
        return "a100-sxm-80gb"
    if "l40s" in n:
        return "l40s"
    raise ValueError(name)


def _precisions(weights: str, kv: str) -> dict[str, str]:
    w = weights.lower()
    out: dict[str, str] = {}
    if "int8" in w:
        out = {"weights": "int8", "compute": "bf16"}
    elif "float8wo" in w:
        out = {"weights": "fp8", "compute": "bf16"}  # torchao weight-only fp8
    elif w.startswith("fp8"):
        out = {"weights": "fp8"}
    elif "fp16" in w:
        out = {"weights": "fp16"}
    else:
        out = {"weights": "bf16"}
    k = kv.lower()
    out["kv_cache"] = "fp8" if k.startswith("fp8") else ("fp16" if k.startswith("fp16") else "bf16")
    return out


def _length(text: str, default: int) -> int:
    m = re.search(r"\d+", text)
    return int(m.group()) if m else default


def published_cases() -> list[Case]:
    rows = list(csv.DictReader(PUBLISHED_CSV.open())) + list(csv.DictReader(ENGINE_ROWS_CSV.open()))
    cases: list[Case] = []
    scored_index = 0
    for i, r in enumerate(rows):
        engine = r["engine"]
        batch_text = r["batch_or_concurrency"]
        prompt = _length(r["input_len"], 128)
        output = _length(r["output_len"], 128)
        scenario = {"model": _model(r["model"]), "gpu": _gpu(r["gpu"]), "tp": int(r["tp"]),
                    **_precisions(r["precision_weights"], r["precision_kv"]), "prompt_len": prompt,
                    "output_len": output, "context_len": prompt + output}
        metric, value = r["metric"], float(r["value"])
        note, scored = "", True
        concurrent = "concurrency" in batch_text or engine.startswith("NVIDIA NIM")
        if batch_text.startswith("max load"):
            scored, note = False, "max-load throughput: a ceiling (batch unbounded), not scored"
            scenario.pop("batch", None)
        else:
            scenario["batch"] = _length(batch_text, 1)
        if "power-limited" in r["gpu"]:
            scored, note = (
                False, "A100 power-limited to 330 W (gpt-fast README): below datasheet bandwidth, not scored",
            )
        if metric == "output_tok_per_s_per_user":
            metric, value = "itl_ms", 1000.0 / value
        elif metric == "tpot_ms":
            metric = "itl_ms"
        elif metric == "output_tok_per_s_total":
            metric = "tokens_per_s_total"
        elif metric == "e2e_latency_s":
            metric, value = "e2e_ms", value * 1000.0
        if metric == "ttft_ms" and not any(s in engine for s in SERVED_ENGINES):
            metric = "prefill_ms"  # an offline engine's first-token latency is the prefill itself
        case = Case(f"pub{i:02d}", r["source_url_or_repo_path"][:80], engine.split("(")[0].strip(), scenario,
                    metric, value, scored=scored, note=note,
                    extra={"concurrent": concurrent and metric == "itl_ms", "row": i},
                    weight=2.0 if any(e in engine for e in CURRENT_ENGINES) else 1.0)
        if scored:
            case.heldout = scored_index % HOLDOUT_EVERY == HOLDOUT_EVERY - 1
            scored_index += 1
        cases.append(case)
    return cases


def device_cases() -> list[Case]:
    """Our own measurements: tools/measure_gpu.py output. TP shards ran without all-reduces, so their
    scenarios use a GPU object with a link fast enough to make communication vanish."""
    cases: list[Case] = []
    for path in sorted(MEASUREMENTS.glob("*.json")):
        data = json.loads(path.read_text())
        if "decode" not in data or "physics" in path.stem:  # all-reduce runs; the physics set (graph engine)
            continue
        gpu_name = data["meta"]["gpu"]
        gpu_id = "h200" if "H200" in gpu_name else "h100-sxm"
        g = get_gpu(gpu_id).model_dump(
            exclude_none=True, exclude={"id", "sources", "tflops_sparse", "vendor"}
        )
        g["interconnect_gb_s"] = 1e5
        g["name"] = f"{gpu_name} (TP emulated, no all-reduce)"
        tag = path.stem
        fused_run = any(r.get("variant") == "fused" for r in data["decode"])
        for j, r in enumerate(data["decode"]):
            # ITL at exactly `context` cached tokens: mean context = prompt + output / 2
            s = {
                "model": r["model"], "gpu": g, "tp": r["tp_shard"], "weights": r["precision"],
                "kv_cache": "bf16", "batch": r["batch"], "prompt_len": r["context"] - 1, "output_len": 2,
                "context_len": r["context"] + 1,
            }
            if fused_run:
                # engine-class steps of our own: part of the default engine's
                # fit (weight 1 each, like a public
                # row); Llama-3.1-70B TP8 and the batch 8 and 128 rows are held out
                heldout = (r["model"] == "llama-3.1-70b" and r["tp_shard"] == 8) or r["batch"] in (8, 128)
                cases.append(
                    Case(
                        f"{tag}:d{j}", str(path.name), "torch.compile+CUDA graphs", s, "itl_ms", r["ms"],
                        heldout=heldout,
                        extra={"gpu_id": gpu_id, "default_engine": True, "no_allreduce": True},
                    )
                )
                continue
            heldout = gpu_id != FIT_GPU or r["model"] == "qwen3-8b" or r["batch"] in (16, 128)
            cases.append(
                Case(
                    f"{tag}:d{j}", str(path.name), "torch+CUDA graphs", s, "itl_ms", r["ms"], heldout=heldout,
                    extra={"gpu_id": gpu_id},
                )
            )
        for j, r in enumerate(data["prefill"]):
            s = {
                "model": r["model"], "gpu": g, "tp": r["tp_shard"], "weights": r["precision"],
                "kv_cache": "bf16", "prompt_len": r["prompt_len"], "output_len": 1,
            }
            if (
                fused_run
            ):  # engine-class prefill (fused, CUDA graph): default-engine evidence like the decode rows
                heldout = (r["model"] == "llama-3.1-70b" and r["tp_shard"] == 8) or r["prompt_len"] == 512
                cases.append(
                    Case(
                        f"{tag}:p{j}", str(path.name), "torch.compile+CUDA graphs", s, "prefill_ms", r["ms"],
                        heldout=heldout,
                        extra={"gpu_id": gpu_id, "default_engine": True, "no_allreduce": True},
                    )
                )
                continue
            heldout = gpu_id != FIT_GPU or r["model"] == "qwen3-8b" or r["prompt_len"] == 512
            cases.append(Case(f"{tag}:p{j}", str(path.name), "torch eager prefill", s, "prefill_ms", r["ms"],
                              heldout=heldout, extra={"gpu_id": gpu_id}))
    return cases


def predict(case: Case, efficiency: dict[str, Any] | str | None = None) -> float:
    """The planner's figure for this case's metric, under the given efficiency (default engine if None)."""
    s = dict(case.scenario)
    if case.extra.get("no_allreduce"):  # TP shards measured without all-reduces
        base = (
            {}
            if efficiency is None
            else ({"name": efficiency} if isinstance(efficiency, str) else efficiency)
        )
        efficiency = {**base, "allreduce_latency_us": 0.0} if base.get("name") != "ideal" else "ideal"
    if efficiency is not None:
        s["efficiency"] = efficiency
    if case.metric in ("itl_ms", "prefill_ms", "ttft_ms") and not case.extra.get("concurrent"):
        p = plan(s)
        return {"itl_ms": p.latency.itl_ms, "prefill_ms": p.latency.prefill_ms, "ttft_ms": p.latency.ttft_ms}[
            case.metric
        ]
    sc = parse_scenario(s)
    d = resolve(sc)
    if case.metric == "itl_ms":  # continuous batching at a concurrency: prefills interleave with decode
        return float(itl_under_concurrency(d, s["batch"], sc.prompt_len, sc.output_len, sc.load))
    batch = s.get("batch") or 1
    if case.metric == "e2e_ms":
        return static_batch_e2e_ms(d, batch, sc.prompt_len, sc.output_len)
    if case.metric == "tokens_per_s_total":
        if not case.scored and "max-load" in case.note:
            return plan(s).throughput.output_tokens_per_s
        return static_batch_tokens_per_s(d, batch, sc.prompt_len, sc.output_len)
    raise ValueError(case.metric)
