#!/usr/bin/env python3
"""Accuracy report per engine, per GPU, per precision: docs/ACCURACY.md from data/accuracy_residuals.json.

    python3 tools/fit_engines.py        # fits the profiles, writes the residuals and the bands
    python3 tools/accuracy_report.py    # writes docs/ACCURACY.md

Error = predicted / measured - 1. "Fitted" predicts a row with constants fitted on every row; "held-out"
with constants fitted without it: the graph engine leaves one model shape out (all its TP slices,
precisions, batches, contexts and GPUs), each serving engine leaves one public row out.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.engines.base import ENGINES  # noqa: E402
from planner.engines.profiles import profiles  # noqa: E402
from planner.model.presets import load_presets  # noqa: E402

REPORT = ROOT / "docs" / "ACCURACY.md"
PRODUCTION_RESIDUALS = ROOT / "data" / "production_residuals.csv"
# Issue 20's targets on public closed-loop runs: mean TPOT median and p90 error, TTFT median error.
PRODUCTION_TARGETS = {"tpot_median": 0.10, "tpot_p90": 0.25, "ttft_median": 0.25}
RESIDUALS = ROOT / "data" / "accuracy_residuals.json"
MEASUREMENTS = ROOT / "data" / "measurements"
TARGETS = {"itl": (0.05, 0.12), "prefill": (0.08, 0.15)}
SHORT_TARGET = (
    0.10,
    None,
)  # issue 20: prompts from 64 tokens up, and mixed iterations, within 10% at the median


def load() -> dict:
    return json.loads(RESIDUALS.read_text())


def graph_errors(res: dict) -> list[dict]:
    out = []
    for r in res["rows"]:
        out.append(
            {
                **r,
                "fitted": r["fitted_ms"] / r["measured_ms"] - 1,
                "heldout": r["heldout_ms"] / r["measured_ms"] - 1,
            }
        )
    return out


def iteration_errors(res: dict) -> list[dict]:
    """Mixed iterations and multi-prompt passes (validation only): fitted, held-out, and `separate` (each
    chunk's work as if it rode an empty iteration)."""
    return [
        {
            **r,
            **{
                k: r[f"{k}_ms" if k == "measured" else k] / r["measured_ms"] - 1
                for k in ("fitted", "heldout", "separate")
            },
        }
        for r in res.get("iterations", [])
    ]


def stats(values) -> tuple[int, float, float]:
    a = np.abs(np.asarray(values, dtype=float))
    return (len(a), float(np.median(a)), float(np.max(a))) if len(a) else (0, float("nan"), float("nan"))


def summary(res: dict) -> dict:
    """The figures the issue sets targets on (tests read these)."""
    rows = graph_errors(res)
    dec = [r for r in rows if r["kind"] == "decode"]
    pre = [r for r in rows if r["kind"] == "prefill" and r["prompt_len"] >= 1024]
    every = [r for r in rows if r["kind"] == "prefill"]
    short = [r for r in every if r["prompt_len"] < 1024]
    out = {
        "graph.itl": stats([r["heldout"] for r in dec]),
        "graph.prefill": stats([r["heldout"] for r in pre]),
        "graph.itl.fitted": stats([r["fitted"] for r in dec]),
        "graph.prefill.fitted": stats([r["fitted"] for r in pre]),
        "graph.prefill64": stats([r["heldout"] for r in every]),
        "graph.prefill64.fitted": stats([r["fitted"] for r in every]),
        "graph.prefill_short": stats([r["heldout"] for r in short]),
        "graph.prefill_short.fitted": stats([r["fitted"] for r in short]),
    }
    for kind in ("mixed", "multi"):
        its = [r for r in iteration_errors(res) if r["kind"] == kind]
        out[f"graph.{kind}"] = stats([r["heldout"] for r in its])
        out[f"graph.{kind}.fitted"] = stats([r["fitted"] for r in its])
        out[f"graph.{kind}.separate"] = stats([r["separate"] for r in its])
    for name in ENGINES:
        for group in ("itl", "prefill", "ttft"):
            vals = [r for r in res["engines"][name] if r["group"] == group]
            if vals:
                out[f"{name}.public.{group}"] = stats([r["heldout"] / r["measured"] - 1 for r in vals])
                out[f"{name}.public.{group}.fitted"] = stats([r["fitted"] / r["measured"] - 1 for r in vals])
    return out


def _line(label: str, s: tuple[int, float, float], target=None) -> str:
    n, med, worst = s
    if not target:
        t = ok = ""
    elif target[1] is None:
        t, ok = f"{target[0]:.0%} / -", ("met" if med <= target[0] else "missed")
    else:
        t = f"{target[0]:.0%} / {target[1]:.0%}"
        ok = (
            "met"
            if med <= target[0] and worst <= target[1]
            else ("median met" if med <= target[0] else "missed")
        )
    return f"| {label} | {n} | {med:.1%} | {worst:.1%} | {t} | {ok} |"


def _split_table(title: str, rows: list[dict], key) -> list[str]:
    lines = [
        "",
        f"### {title}",
        "",
        "| group | rows | fitted median | fitted worst | held-out median | held-out worst |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    groups: dict[str, list[dict]] = {}
    for r in rows:
        groups.setdefault(key(r), []).append(r)
    for g in sorted(groups):
        f = stats([r["fitted"] for r in groups[g]])
        h = stats([r["heldout"] for r in groups[g]])
        lines.append(f"| {g} | {f[0]} | {f[1]:.1%} | {f[2]:.1%} | {h[1]:.1%} | {h[2]:.1%} |")
    return lines


def repeat_spread() -> str:
    a = json.loads((MEASUREMENTS / "h100_physics_2026-11-26.json").read_text())
    b = json.loads((MEASUREMENTS / "h100_physics_repeat_2026-11-26.json").read_text())
    out = []
    for kind, keys in (("decode", ("batch", "context")), ("prefill", ("prompt_len",))):

        def k(r, keys=keys):
            return (
                r["shape"],
                r["tp_shard"],
                r["precision"],
                r["kv"],
                r["layers_timed"],
                *(r[x] for x in keys),
            )

        first = {k(r): r["ms"] for r in a[kind]}
        diffs = [abs(r["ms"] / first[k(r)] - 1) for r in b[kind] if k(r) in first]
        out.append(f"{kind}: median {np.median(diffs):.2%}, worst {np.max(diffs):.1%} over {len(diffs)} rows")
    return "; ".join(out)


def scaling_check() -> list[str]:
    lines = []
    for path in sorted(MEASUREMENTS.glob("*physics_2026*.json")):
        if "repeat" in path.stem:
            continue
        data = json.loads(path.read_text())
        for r in data["decode"]:
            if not r.get("check"):
                continue
            scaled = [
                x
                for x in data["decode"]
                if x["shape"] == r["shape"]
                and x["precision"] == r["precision"]
                and x["kv"] == r["kv"]
                and x["layers_timed"] == 8
                and x["batch"] == r["batch"]
                and x["context"] == r["context"]
            ]
            if scaled:
                lines.append(
                    f"| {data['meta']['gpu']} | batch {r['batch']}, context {r['context']} | {r['ms']:.3f} | "
                    f"{scaled[0]['ms']:.3f} | {scaled[0]['ms'] / r['ms'] - 1:+.1%} |"
                )
    return lines


def _bucket(n: int) -> str:
    return next(
        f"{lo:>5}-{hi}"
        for lo, hi in ((64, 128), (256, 384), (512, 768), (1024, 2048), (4096, 32768))
        if n <= hi
    )


def short_prompt_section(res: dict, rows: list[dict]) -> list[str]:
    """Issue 20: prefill from 64 tokens up, several prompts in one pass, and iterations that mix decodes
    with a prompt chunk (tools/measure_short_prefill.py, H100)."""
    every = [r for r in rows if r["kind"] == "prefill"]
    its = iteration_errors(res)
    phys = profiles()["physics"]["efficiency"]
    lines = [
        "",
        "### Short prompts and mixed iterations (issue 20)",
        "",
        "Measured on an H100 80GB HBM3 (2026-11-26, driver 580.159.04, torch 2.11.0+cu130, CUDA 13.0; "
        "`tools/measure_short_prefill.py`, data/measurements/h100_short_prefill_2026-11-26.json): one "
        "prompt of "
        "64-2,048 tokens through 4 layers replayed from a CUDA graph and scaled, for 12 dense shapes "
        "(Llama-3.1-8B "
        "and Llama-3.1-70B as one rank of TP 4 in bf16 and fp8 weights; the other dense shapes of the "
        "physics set "
        "in bf16, two in fp8); several prompts in one pass; and one forward pass carrying N decodes (context "
        "1,024 or 2,048) with a fresh 64/256/512-token prompt chunk. The one-prompt prefills join the fit; "
        "the "
        "multi-prompt passes and mixed iterations only validate. Run-to-run spread (a second run of the "
        "8B/70B "
        f"set): {short_repeat_spread()}.",
        "",
        "A short prompt's GEMMs cost about one weight read: their compute hides under it up to the knee "
        "(`prefill_smoothing`, the p of the p-norm joining a prefill's compute and weight read, now fitted "
        "with these rows and a robust loss). An iteration is planned as the serving model composes it: the "
        "decode step plus each chunk's work (its prefill less the empty iteration's weight read and fixed "
        "costs, so the weights are read once), plus what the chunk's GEMM compute costs once the tokens that "
        "ride with it have filled the read's shadow (`shared_pass_gemm_ms`), plus, with decodes aboard, "
        "the chunk's own attention kernels beside theirs (`chunk_layer_overhead_us`, fitted on the mixed "
        "passes). *Separate* plans each chunk as if it rode an empty iteration, as the serving model's "
        "queue still does (planner/serving/serving.py tabulates a chunk's work once, not per decode batch).",
        "",
        f"Constants: `prefill_smoothing` {phys['prefill_smoothing']:g} (was 1.158 when fitted on 512+ tokens "
        "under a squared loss: near 1 it added a whole weight read to every prefill, the 21-41% "
        "over-prediction at 256-512 tokens), `prefill_layer_overhead_us` "
        f"{phys['prefill_layer_overhead_us']:g}, "
        f"`chunk_layer_overhead_us` {phys.get('chunk_layer_overhead_us', 0):g}.",
    ]
    lines += _split_table(
        "Prefill by prompt length (all shapes, both GPUs)", every, lambda r: _bucket(r["prompt_len"])
    )
    lines += _split_table(
        "Prefill of 64-768 tokens by shape and precision",
        [r for r in every if r["prompt_len"] < 1024],
        lambda r: f"{r['shape']} TP{r['tp']} {r['weights']}",
    )
    lines += [
        "",
        "#### Mixed iterations and multi-prompt passes",
        "",
        "| group | rows | fitted median | fitted worst | held-out median | held-out worst | separate "
        "median |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    groups: dict[str, list[dict]] = {}
    for r in its:
        key = (
            f"mixed: {r['batch']:>2} decodes + {r['chunk_tokens']:>3}-token chunk"
            if r["kind"] == "mixed"
            else f"multi: {r['chunks']:>2} prompts x {r['chunk_tokens']:>3} tokens"
        )
        groups.setdefault(key, []).append(r)
    for g in sorted(groups):
        f, h, sep = (stats([r[k] for r in groups[g]]) for k in ("fitted", "heldout", "separate"))
        lines.append(f"| {g} | {f[0]} | {f[1]:.1%} | {f[2]:.1%} | {h[1]:.1%} | {h[2]:.1%} | {sep[1]:.1%} |")
    lines += [
        "",
        "#### Llama-3.1-8B and 70B (TP 4 rank), one prompt: measured and planned",
        "",
        "| shape | weights | tokens | measured ms | fitted ms | held-out ms | held-out error |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in sorted(
        (
            r
            for r in every
            if "short_prefill" in r.get("source", "")
            and r["tp"] in (1, 4)
            and r["shape"] in ("llama-3.1-8b", "llama-3.1-70b")
        ),
        key=lambda r: (r["shape"], r["weights"], r["prompt_len"]),
    ):
        lines.append(
            f"| {r['shape']} | {r['weights']} | {r['prompt_len']} | {r['measured_ms']:.2f} | "
            f"{r['fitted_ms']:.2f} | {r['heldout_ms']:.2f} | {r['heldout']:+.1%} |"
        )
    return lines


def short_repeat_spread() -> str:
    a = json.loads((MEASUREMENTS / "h100_short_prefill_2026-11-26.json").read_text())
    b = json.loads((MEASUREMENTS / "h100_short_prefill_repeat_2026-11-26.json").read_text())
    out = []
    for kind, keys in (
        ("prefill", ("prompts", "prompt_len")),
        ("mixed", ("batch", "context", "chunk_tokens")),
    ):

        def k(r, keys=keys):
            return (r["shape"], r["tp_shard"], r["precision"], *(r[x] for x in keys))

        first = {k(r): r["ms"] for r in a[kind]}
        diffs = [abs(r["ms"] / first[k(r)] - 1) for r in b[kind] if k(r) in first]
        out.append(f"{kind}: median {np.median(diffs):.2%}, worst {np.max(diffs):.1%} over {len(diffs)} rows")
    return "; ".join(out)


def constants_table(res: dict) -> list[str]:
    data = profiles()["physics"]
    folds = res.get("folds", {})
    lines = [
        "",
        "## Constants (planner/data/engine_profiles.json)",
        "",
        "Every constant of the time model, its value, what it means and what measured it. *Range* is the "
        "spread "
        "of the value over the leave-one-shape-out folds (how much it moves when a whole model shape is "
        "removed); the all-reduce constants come from their own fit.",
        "",
        "| constant | value | range over folds | evidence |",
        "| --- | --- | --- | --- |",
    ]
    for key, value in data["efficiency"].items():
        vals = [f[key] for f in folds.values() if key in f]
        rng = f"{min(vals):g} - {max(vals):g}" if vals else "-"
        lines.append(f"| `{key}` | {value:g} | {rng} | {data['evidence'].get(key, '')} |")
    lines += [
        "",
        "Engine profiles add only serving terms on top (fitted on that engine's public rows):",
        "",
        "| engine | step_overhead_us | prefill_overhead_ms | ttft_overhead_ms | public rows |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name in ENGINES:
        e = profiles()["engines"][name]
        o = e.get("overheads", {})
        lines.append(
            f"| {name} | {o.get('step_overhead_us', 0):g} | {o.get('prefill_overhead_ms', 0):g} | "
            f"{o.get('ttft_overhead_ms', 0):g} | {len(e.get('public_rows', []))} "
            f"({e.get('public_rows_role', '')}) |"
        )
    return lines


def _describe(s: dict) -> str:
    m = s["model"] if isinstance(s["model"], str) else s["model"]["name"]
    g = s["gpu"] if isinstance(s["gpu"], str) else s["gpu"]["name"].split(" (")[0]
    return (
        f"{m}, {g}, TP{s['tp']}, {s['weights']}/{s['kv_cache']}, batch {s.get('batch', '-')}, "
        f"{s['prompt_len']}->{s['output_len']}"
    )


def production_errors() -> list[dict]:
    """Every fitted and held-out prediction of the public serving runs (tools/fit_production_engines.py)."""
    import csv

    if not PRODUCTION_RESIDUALS.exists():
        return []
    with PRODUCTION_RESIDUALS.open() as fh:
        rows = list(csv.DictReader(fh))
    for r in rows:
        r["tpot_err"] = float(r["pred_tpot_ms"]) / float(r["tpot_ms"]) - 1
        ttft = float(r["ttft_median_ms"]) if r["ttft_median_ms"] not in ("", "nan") else float("nan")
        r["ttft_err"] = float(r["pred_ttft_median_ms"]) / ttft - 1 if ttft == ttft else float("nan")
    return rows


def production_summary(rows: list[dict]) -> dict[tuple[str, str, str], dict[str, float]]:
    """(split, engine, gpu or 'all') -> rows, TPOT median and p90 absolute error, TTFT median absolute "
    "error."""
    out: dict[tuple[str, str, str], dict[str, float]] = {}
    keys = {(r["split"], r["engine"], r["gpu"]) for r in rows} | {
        (r["split"], r["engine"], "all") for r in rows
    }
    for split, engine, gpu in keys:
        sel = [r for r in rows if r["split"] == split and r["engine"] == engine and gpu in ("all", r["gpu"])]
        tpot = np.abs([r["tpot_err"] for r in sel])
        ttft = np.abs([r["ttft_err"] for r in sel if r["ttft_err"] == r["ttft_err"]])
        out[(split, engine, gpu)] = {
            "rows": len(sel),
            "tpot_median": float(np.median(tpot)),
            "tpot_p90": float(np.percentile(tpot, 90)),
            "tpot_within_20": float(np.mean(tpot <= 0.2)),
            "ttft_median": float(np.median(ttft)) if len(ttft) else float("nan"),
        }
    return out


def production_section() -> list[str]:
    rows = production_errors()
    if not rows:
        return []
    s = production_summary(rows)
    names = {
        "fitted": "fitted (in-sample)",
        "model_out": "leave one model out",
        "gpu_out": "leave one GPU out",
    }

    def mark(value: float, target: float) -> str:
        return "" if value != value else ("met" if value <= target else "missed")

    lines = [
        "## Production engines on public serving runs (issue 20)",
        "",
        "Each public closed-loop run of data/reference/serving_runs_published.csv (InferenceX / InferenceMAX "
        "`bench serve`-style runs: fixed concurrency, request rate inf, lengths uniform in [0.8 L, L]) "
        "planned "
        "with its engine, GPU, layout, precision, lengths and concurrency, and predicted by the closed-loop "
        "benchmark client (`planner/serving/benchmark_client.py`). Mean TPOT where the run published it, "
        "else "
        "the median; TTFT is the median. Profiles fitted per engine x GPU generation by "
        "`python -m tools.fit_production_engines` (residuals in data/production_residuals.csv). "
        "**Leave one model out** refits an engine's generation without one model and predicts it; **leave "
        "one GPU out** without one GPU of the generation. Targets: TPOT "
        f"{PRODUCTION_TARGETS['tpot_median']:.0%} median and {PRODUCTION_TARGETS['tpot_p90']:.0%} p90, TTFT "
        f"{PRODUCTION_TARGETS['ttft_median']:.0%} median.",
        "",
        "| engine, GPU: split | runs | TPOT median | TPOT p90 | within 20% | TTFT median |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for split in ("fitted", "model_out", "gpu_out"):
        for (sp, engine, gpu), v in sorted(s.items()):
            if sp != split:
                continue
            lines.append(
                f"| {engine}, {'all GPUs' if gpu == 'all' else gpu}: {names[split]} | {v['rows']} | "
                f"{v['tpot_median']:.1%} "
                f"{mark(v['tpot_median'], PRODUCTION_TARGETS['tpot_median'])} | {v['tpot_p90']:.1%} "
                f"{mark(v['tpot_p90'], PRODUCTION_TARGETS['tpot_p90'])} | {v['tpot_within_20']:.0%} | "
                f"{v['ttft_median']:.1%} {mark(v['ttft_median'], PRODUCTION_TARGETS['ttft_median'])} |"
            )
    lines += [
        "",
        "A split is shown only where it can be made: an engine x generation with one model (vLLM: "
        "Llama-3.3-70B; SGLang: DeepSeek-R1) has no model to leave out, one with one GPU no GPU to leave "
        "out. Fitted figures are in-sample.",
    ]
    return lines


PREDICTOR_RESIDUALS = ROOT / "data" / "predictor_residuals.csv"
# Issue 30's targets: leave-one-family-out mean TPOT within 10% at the median and 25% at p90 per engine on
# H100, H200 and B200; TTFT within 20% at the median at low and at high concurrency; gpt-oss-120b on vLLM 10%.
LOFO_TARGETS = {"tpot_median": 0.10, "tpot_p90": 0.25, "ttft_median": 0.20}
TARGET_GPUS = ("h100-sxm", "h200", "b200")


def _abs_err(pred, meas):  # type: ignore[no-untyped-def]
    import pandas as pd

    e = (pd.Series(pred, dtype=float).to_numpy() / pd.Series(meas, dtype=float).to_numpy()) - 1.0
    return np.abs(e[np.isfinite(e)])


def _cell(errors: np.ndarray, target: float | None = None, q: float = 50) -> str:
    if len(errors) == 0:
        return "-"
    value = float(np.percentile(errors, q))
    mark = "" if target is None else (" met" if value <= target else f" missed by {value - target:.1%}")
    return f"{value:.1%}{mark}"


WHY_KERNELS_MISS = """The tables against our own GPUs and the raw kernel sum: AIConfigurator's H100 bf16
GEMM rows are within 1-2% of our CUDA-graph replays at the median (55 shapes, m 1-256, every engine;
data/measurements/h100_small_gemm_graph_2026-11-27.json, tests/test_kernel_tables.py), and a decode step
assembled from the tables is 0.82-0.90 of our compiled PyTorch step at the median (193 steps of 8 shapes per
GPU, H100 and H200): the tables read as milliseconds per call of (m x k) @ (k x n) on one GPU, and the
assembly's layers and counts are a step's. Four interpretation bugs made the sum slower than the engines ran
(14 of 18 groups before): fp4 checkpoints assembled from the fp8 tables (fp4 counts 4.5 bits with its
scales; the 4-bit test was <= 4); the grid levelled up to the running maximum along m, carrying a small-m
kernel path's time onto larger calls; per-tensor fp8 rows that include dynamic activation quantization
(static checkpoints subtract the measured compute_scale, as AIConfigurator's fp8_static query does); vLLM's
block-fp8 rows timed without a CUDA graph by the source's collector (3.1x our replays; SGLang's graph-timed
rows stand in). Six reading fixes followed (DeepSeek-R1 on Blackwell +27-30% and gpt-oss on vLLM -21 to
-24% before): MoE and all-reduce rows from every release the source measured on the GPU (TensorRT-LLM 1.2's
B200 block-fp8 MoE had no split under 16 GPUs, SGLang 0.5.9's is Triton's where the recipes run FlashInfer's
TRT-LLM-gen kernel, vLLM 0.14's 8-GPU H200 all-reduce took 44 us at 512 kB where later releases take 14 us);
GEMMs at the median over the releases (vLLM 0.14's per-tensor fp8 rows alone read 1.29x our H100's cuBLASLt
fp8, the median 1.01x);
FlashInfer's TRT-LLM-gen MoE rows measured under SGLang for TensorRT-LLM and vLLM, which run the same
kernels on Blackwell; a MoE precision measured at the model's own expert shape before another shape scaled
to it, and gpt-oss's MXFP4 experts on fp4 tensor cores with MXFP8 activations (the recipes' kernel); decode
attention at 1-2 KV heads per GPU no slower than its bytes at the rate measured with more heads (vLLM's
H200 1-KV-head rows read 0.7 TB/s, its 8-head rows 3.6 TB/s; the engine's TP8 Llama TPOT is flat from 1.5k
to 5k cached tokens); grid cells past the last measured call extended by work, not copied. Two more for bf16
MoE models (SGLang's Qwen3-235B -31% and GLM-4.6 -34% on B200, vLLM's GLM-4.6 -40% on H200 before): bf16
experts read each engine's default kernel (SGLang's and vLLM's Triton fused MoE; SGLang 0.5.14's FlashInfer
TRT-LLM-gen bf16 rows, the fastest of every release, run only behind a flag: 19.7 us where Triton takes 33 us
for Qwen3-235B's experts at 1 token, TP 8), and experts nobody measured scaled from the shape nearest in
every column, not the first with the same hidden size (GLM-4.6's from Llama-4 Maverick's top-1 experts of
8192). Block-scaled fp8 is the checkpoint's format (`fp8_format`, from its config.json, or the run's
`weights_format`), no longer assumed for MLA models only: the Qwen3, GLM and MiniMax `-FP8` runs read the
block-scaled GEMM and MoE rows (vLLM H100 qwen3-moe -30% -> -23%, TensorRT-LLM H100 qwen3-dense -48% ->
-46%; SGLang's MoE tables hold block-scaled fp8 only, so its MoE rows were already those). The raw sum, with
no fitted term, against the measured TPOT (signed median; + is slower than the engine ran) is now slower in
{slower} of {groups} engine x GPU x family groups; below the engine, the sum
leaves out the per-step host cost (vLLM -13 to -18%: its fitted host cost, 1.0-1.5 ms a step, is that gap).
What remains: DeepSeek-R1 on SGLang B200 ({deepseek_b200}); the SGLang cookbook models (B200: {cookbook}),
whose measured TPOT at concurrency 1 runs past the tables' sum by, per layer, {per_layer}: by hypothesis,
not profiled, kernels the tables do not hold (norms, RoPE, QK-norm, routing, activation) in per-model counts
that no per-step host cost carries across families; and off the tables: the expert
all-to-all of TensorRT-LLM's tp 8 x ep 8 fp4 runs and the prefill stalls of its attention-DP 8k/1k runs."""


COOKBOOK_FAMILIES = (("Qwen3-235B", "qwen3-moe"), ("GLM-4.6", "glm-moe"), ("MiniMax-M2.5", "minimax-moe"))


def _per_layer_gap_us(raw) -> str:  # type: ignore[no-untyped-def]
    """SGLang's measured TPOT at concurrency 1 less the tables' raw sum, per layer (us), by model: the range
    over its runs."""
    presets = load_presets()
    one = raw[(raw.engine == "sglang") & (raw.concurrency == 1)]
    gap = (one.tpot_ms - one.kernel_tpot_h0) * 1000.0 / one.model.map(lambda m: presets[m].n_layers)
    parts = [f"{m} {gap[one.model == m].min():.0f} to {gap[one.model == m].max():.0f} us"
             for m in sorted(one.model.unique(), key=lambda m: float(gap[one.model == m].median()))]
    return ", ".join(parts)


def _default_note(f, family_out) -> str:  # type: ignore[no-untyped-def]
    """What the plan uses by default, with the SGLang figures behind that choice read from the residuals."""
    sgl = f[(f.engine == "sglang") & ~f.burst.astype(bool) & f.kernel_tpot_ms.notna()]
    kernel = sgl.kernel_tpot_ms / sgl.tpot_ms - 1
    prod = sgl.production_tpot_ms / sgl.tpot_ms - 1
    qwen8 = ", ".join(f"{e:+.0%}" for e in kernel[sgl.model == "qwen3-8b"])
    out8 = family_out[(family_out.engine == "sglang") & (family_out.model == "qwen3-8b")]
    prod8 = ", ".join(f"{e:+.0%}" for e in out8.pred_tpot_ms / out8.tpot_ms - 1)
    cook = sgl.run_id.astype(str).str.startswith("sgh-")
    per = [(m, g, float(kernel[cook & (sgl.model == m) & (sgl.gpu == g)].median()),
            float(prod[cook & (sgl.model == m) & (sgl.gpu == g)].median()))
           for (m, g) in sorted(set(zip(sgl.model[cook], sgl.gpu[cook], strict=True)))]
    cookbook = "; ".join(f"{m} on {g}: tables {k:+.0%}, production {p:+.0%}" for m, g, k, p in per)
    return ("What the plan uses by default (planner/physics/step_predictor.py): on vLLM and TensorRT-LLM, "
            "where the kernel tables beat the production fit held out, a model whose family is outside the "
            "engine's production record on an NVIDIA GPU with tables (one node, not MLA) is planned from the "
            "kernel tables, with their own host and frontend costs fitted on every family "
            "(planner/data/kernel_tables/kernel_terms.json) and their leave-one-family-out band; every other "
            "plan keeps the production fit, whose in-sample error on its own families (3-6%) is below the "
            "kernel tables' held-out error there. SGLang keeps the production fit (its record: DeepSeek-R1 "
            f"and Qwen3-8B): on Qwen3-8B's 2 runs the tables held out by family miss TPOT by {qwen8} "
            f"(production with the family left out: {prod8}), and on the SGLang cookbook's "
            f"fixed-concurrency runs (`sgh-*`, validation only, outside the record) by ({cookbook}; "
            f"median signed TPOT error, {int(cook.sum())} runs): the tables read their decode kernels short "
            "(the raw sum table below).")


def _regime_lines(f, t_med: float, t_p90: float, ttft_t: float) -> list[str]:  # type: ignore[no-untyped-def]
    """The per-engine headline split by how the client sent its requests: a fixed number of clients each
    waiting for its answer (InferenceX, InferenceMAX, GPUStack's latency pages), or every prompt at once
    (GPUStack's throughput pages, `--num-prompts N` without `--max-concurrency`: a burst that drains)."""
    if "burst" not in f or not f.burst.astype(bool).any():
        return []
    lines = ["", "The same, split by how the client sent its requests (fixed concurrency: a fixed number of "
             "clients, each sending its next request when its answer ends; burst: every prompt sent at "
             "once and drained, GPUStack's throughput pages, validation only):", "",
             "| engine | requests sent | runs | families | kernel tables LOFO: TPOT median / p90 | "
             "kernel tables LOFO: TTFT median | kernel tables LOFO: TPOT median signed |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    target = f[f.gpu.isin(TARGET_GPUS)]
    for (engine, burst), g in target.groupby([target.engine, target.burst.astype(bool)]):
        kernel = _abs_err(g.kernel_tpot_ms, g.tpot_ms)
        ttft = _abs_err(g.kernel_ttft_ms, g.ttft_median_ms)
        signed = float(np.nanmedian(g.kernel_tpot_ms / g.tpot_ms - 1))
        lines.append(f"| {engine} | {'burst' if burst else 'fixed concurrency'} | {len(g)} | "
                     f"{', '.join(sorted(g.family.unique()))} | {_cell(kernel, t_med)} / "
                     f"{_cell(kernel, t_p90, 90)} | {_cell(ttft, ttft_t)} | {signed:+.0%} |")
    return lines + _burst_step_lines(target)


def _burst_step_lines(target) -> list[str]:  # type: ignore[no-untyped-def]
    """Whether the bursts miss in the step or around it: the production fit's planned ITL median (the step
    at the run's batch) against the measured one, beside its mean TPOT and output tokens/s. Runs whose
    printout has an ITL median under 1 ms (a broken printout) are left out."""
    if "production_itl_median_ms" not in target:
        return []
    b = target[target.burst.astype(bool) & (target.itl_median_ms > 1.0)]
    # ShareGPT's (prompts of ~215 tokens, answers of ~200): the median gap is a decode step
    short = b[(b.prompt_len < 300) & (b.output_len >= 100)]
    if short.empty:
        return []
    itl = short.production_itl_median_ms / short.itl_median_ms - 1
    tpot = short.production_tpot_ms / short.tpot_ms - 1
    tput = short.production_output_tok_s / short.output_tok_s
    duration = b.production_output_tok_s / b.output_tok_s
    return ["", f"Where the bursts miss: on the {len(short)} ShareGPT bursts (prompts of ~215 tokens, "
            "answers of ~200, ~1,000 at once), the production fit's planned ITL median, the decode step at "
            f"the run's batch, is {float(np.median(np.abs(itl))):.0%} from the measured one at the median "
            f"(signed {float(np.median(itl)):+.0%}), while its mean TPOT is {float(np.median(tpot)):+.0%} "
            f"off and its output tokens/s {float(np.median(tput)):.1f}x the measured (all {len(b)} bursts: "
            f"{float(np.median(duration)):.1f}x): the steps are much nearer the plan than the runs, "
            "which did not keep their batches decoding. What the plan leaves out there is around the "
            "steps: the frontend admitting and streaming a thousand chat streams, or KV preemption under "
            "ShareGPT's long tails (the plan admits by the mean lengths); neither is modelled."]


def lofo_section() -> list[str]:
    """Issue 30's headline: leave-one-family-out TPOT and TTFT per engine and GPU "
    "(data/predictor_residuals.csv,
    python -m tools.validate_predictors), beside the shipped production fit and the roofline floor."""
    import pandas as pd

    if not PREDICTOR_RESIDUALS.exists():
        return []
    f = pd.read_csv(PREDICTOR_RESIDUALS)
    prod = pd.read_csv(PRODUCTION_RESIDUALS)
    family_out = prod[prod.split == "model_out"]
    t_med, t_p90, ttft_t = LOFO_TARGETS["tpot_median"], LOFO_TARGETS["tpot_p90"], LOFO_TARGETS["ttft_median"]
    lines = [
        "## Leave one architecture family out (issue 30): the headline",
        "",
        "Generated by `python -m tools.validate_predictors` (data/predictor_residuals.csv) and this "
        "tool. Every "
        "plannable public closed-loop run of data/reference/serving_runs_published.csv is simulated by the "
        "closed-loop benchmark client under each step-time predictor "
        "(planner/physics/step_predictor.py). Mean "
        "TPOT where the run published it, else the median; TTFT is the median (InferenceX/InferenceMAX "
        "publish "
        "both; the median is compared). Families: "
        + ", ".join(f"`{k}`" for k in sorted(f.family.unique())) + ".",
        "",
        "The sizing goodput itself, against MLPerf Inference's SERVER and INTERACTIVE results (Poisson "
        "arrivals, p99 TTFT and TPOT limits; held out, nothing fitted on them): docs/MLPERF.md, "
        "`python -m tools.mlperf_check`.",
        "",
        "- **kernel tables, LOFO**: the engine's measured kernels (AIConfigurator's per-kernel tables, "
        "planner/data/kernel_tables/) summed over the model's layers as measured, plus one fitted term per "
        "engine x GPU generation (per engine where a generation has one family), the per-step host cost; for "
        "TTFT the same host cost in every iteration a prompt waits through, and the frontend's fixed and "
        "per-request cost (fitted against the median TTFT, or the mean where a run published only a mean; "
        "the per-request cost only where the runs it is fitted on span more than one concurrency). All are "
        "fitted on the engine's *other* architecture families: every figure is held out by family. Runs "
        "marked validation only are scored and never fitted on, but for the SGLang cookbook's runs, which "
        "inform the frontend's cost and not the host cost (their decode kernels are the ones the tables "
        "miss: tools/engine_fidelity.FRONTEND_FIT_RUN_IDS). What a "
        "first token waits for is each engine's own loop (planner/serving/scheduler_wait.py): the "
        "iterations in flight, SGLang's prefill-only iterations, TensorRT-LLM's whole-prompt admission and "
        "token budget, admission against the KV pool as the engine allocates it (vLLM and SGLang as tokens "
        "are written, TensorRT-LLM reserved to the end), under each run's launch settings "
        "(tools/engine_fidelity.recipe_for: KV dtype and token budget from InferenceX's scripts).",
        "- **kernel tables x scale, LOFO**: the same with a second fitted term, a scale on the kernels' time "
        "(what the engine's kernels replayed in its CUDA graph take of the same kernels timed alone), to "
        "show how much of the error one factor absorbs, and that it does not transfer between families.",
        "- **production, held out**: the shipped fit (fitted terms per engine x GPU generation) on families "
        "outside its fit: runs of a family no record was fitted on, and its leave-one-model-out refits "
        "(data/production_residuals.csv `model_out`; each model there is its own family).",
        "- **production, in-sample**: the shipped fit on the runs it was fitted on (for scale, not "
        "validation).",
        "- **roofline floor**: the pure roofline (no fitted value at all), for scale.",
        "",
        f"Targets: TPOT {t_med:.0%} at the median and {t_p90:.0%} at p90 per engine on H100, H200 and B200; "
        f"TTFT {ttft_t:.0%} at the median at concurrency <= 8 and >= 64 separately; gpt-oss-120b on vLLM "
        f"{t_med:.0%} at the median.",
        "",
        "| engine, GPU | runs | families | kernel tables LOFO: TPOT median / p90 | production held out: "
        "TPOT median "
        "/ p90 (runs) | production in-sample: TPOT median | roofline floor: TPOT median | TTFT median: "
        "kernel "
        "LOFO / production |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for (engine, gpu), g in f.groupby(["engine", "gpu"]):
        held = family_out[(family_out.engine == engine) & (family_out.gpu == gpu)]
        out_fit = g[~g.production_in_fit]
        prod_held = np.concatenate([_abs_err(held.pred_tpot_ms, held.tpot_ms),
                                    _abs_err(out_fit.production_tpot_ms, out_fit.tpot_ms)])
        in_fit = g[g.production_in_fit]
        kernel = _abs_err(g.kernel_tpot_ms, g.tpot_ms)
        target = gpu in TARGET_GPUS
        lines.append(
            f"| {engine}, {gpu} | {len(g)} | {', '.join(sorted(g.family.unique()))} | "
            f"{_cell(kernel, t_med if target else None)} / {_cell(kernel, t_p90 if target else None, 90)} | "
            f"{_cell(prod_held, t_med if target else None)} / {_cell(prod_held, None, 90)} "
            f"({len(prod_held)}) | "
            f"{_cell(_abs_err(in_fit.production_tpot_ms, in_fit.tpot_ms))} | "
            f"{_cell(_abs_err(g.roofline_tpot_ms, g.tpot_ms))} | "
            f"{_cell(_abs_err(g.kernel_ttft_ms, g.ttft_median_ms))} / "
            f"{_cell(_abs_err(g.production_ttft_ms, g.ttft_median_ms))} |")
    lines += ["", "Per engine on H100, H200 and B200 together (issue 30's first target), one family out:",
              "", "| engine | runs | families | kernel tables LOFO: TPOT median / p90 | kernel tables x "
              "scale LOFO: TPOT median / p90 | production held out: TPOT median / p90 (runs) |",
              "| --- | --- | --- | --- | --- | --- |"]
    for engine, g in f[f.gpu.isin(TARGET_GPUS)].groupby("engine"):
        held = family_out[(family_out.engine == engine) & family_out.gpu.isin(TARGET_GPUS)]
        out_fit = g[~g.production_in_fit]
        prod_held = np.concatenate([_abs_err(held.pred_tpot_ms, held.tpot_ms),
                                    _abs_err(out_fit.production_tpot_ms, out_fit.tpot_ms)])
        kernel = _abs_err(g.kernel_tpot_ms, g.tpot_ms)
        scaled = _abs_err(g.kernel_scaled_tpot_ms, g.tpot_ms)
        lines.append(f"| {engine} | {len(g)} | {', '.join(sorted(g.family.unique()))} | "
                     f"{_cell(kernel, t_med)} / {_cell(kernel, t_p90, 90)} | "
                     f"{_cell(scaled, t_med)} / {_cell(scaled, t_p90, 90)} | "
                     f"{_cell(prod_held, t_med)} / {_cell(prod_held, t_p90, 90)} ({len(prod_held)}) |")
    lines += _regime_lines(f, t_med, t_p90, ttft_t)
    lines += ["", _default_note(f, family_out)]
    lines += ["", "TTFT by concurrency (median absolute error of the median TTFT; fixed-concurrency runs, "
              "bursts apart):", "",
              "| engine | concurrency | runs | kernel tables LOFO | production (in-sample where fitted) | "
              "roofline floor |", "| --- | --- | --- | --- | --- | --- |"]
    bursts = f.burst.astype(bool) if "burst" in f else np.zeros(len(f), dtype=bool)
    for engine, g in f.groupby("engine"):
        fixed = ~bursts[g.index]
        for label, sel in (("<= 8", fixed & (g.concurrency <= 8)), (">= 64", fixed & (g.concurrency >= 64)),
                           ("burst (all prompts at once)", ~fixed)):
            if label.startswith("burst") and not sel.any():
                continue
            h = g[sel]
            kernel_ttft = _abs_err(h.kernel_ttft_ms, h.ttft_median_ms)
            lines.append(f"| {engine} | {label} | {len(h)} | {_cell(kernel_ttft, ttft_t)} | "
                         f"{_cell(_abs_err(h.production_ttft_ms, h.ttft_median_ms), ttft_t)} | "
                         f"{_cell(_abs_err(h.roofline_ttft_ms, h.ttft_median_ms))} |")
    oss = f[(f.model == "gpt-oss-120b") & (f.engine == "vllm")]
    if len(oss):
        lines += ["", "gpt-oss-120b on vLLM (no production record was fitted on it: all held out):",
                  "",
                  "| GPU | runs | kernel tables LOFO TPOT median (signed) | kernel tables x scale LOFO | "
                  "production TPOT median (signed) | "
                  "roofline floor |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for gpu, h in oss.groupby("gpu"):
            signed = float(np.median(h.production_tpot_ms / h.tpot_ms - 1))
            k_signed = float(np.median(h.kernel_tpot_ms / h.tpot_ms - 1))
            lines.append(f"| {gpu} | {len(h)} | {_cell(_abs_err(h.kernel_tpot_ms, h.tpot_ms), t_med)} "
                         f"({k_signed:+.0%}) | "
                         f"{_cell(_abs_err(h.kernel_scaled_tpot_ms, h.tpot_ms), t_med)} | "
                         f"{_cell(_abs_err(h.production_tpot_ms, h.tpot_ms), t_med)} ({signed:+.0%}) | "
                         f"{_cell(_abs_err(h.roofline_tpot_ms, h.tpot_ms))} |")
    raw = f.dropna(subset=["kernel_tpot_h0"])
    signed = raw.groupby(["engine", "gpu", "family"]).apply(
        lambda h: float(np.median(h.kernel_tpot_h0 / h.tpot_ms - 1)), include_groups=False)
    why = " ".join(WHY_KERNELS_MISS.split()).format(
        slower=int((signed > 0).sum()), groups=len(signed),
        deepseek_b200=f"{signed['sglang', 'b200', 'deepseek-mla-moe']:+.0%}",
        cookbook=", ".join(f"{m} {signed['sglang', 'b200', fam]:+.0%}" for m, fam in COOKBOOK_FAMILIES),
        per_layer=_per_layer_gap_us(raw))
    lines += ["", why, "",
              "| engine | GPU | family | runs | raw kernel sum vs measured TPOT |",
              "| --- | --- | --- | --- | --- |"]
    for (engine, gpu, fam), h in raw.groupby(["engine", "gpu", "family"]):
        lines.append(f"| {engine} | {gpu} | {fam} | {len(h)} | "
                     f"{float(np.median(h.kernel_tpot_h0 / h.tpot_ms - 1)):+.0%} |")
    terms = f.dropna(subset=["kernel_host_us"]).groupby(["kernel_fit_group", "family"])[
        ["kernel_host_us", "kernel_scale", "kernel_scaled_host_us"]].first()
    lines += ["", "The kernel-table predictor's fitted terms, by fit and held-out family (kernel-time scale "
              "searched in 0.3-1.5, host cost in 0-5,000 µs; a value at either end is a value at a bound): "
              + "; ".join(f"{group} without {fam}: host {r.kernel_host_us:,.0f} µs (x scale: scale "
                          f"{r.kernel_scale:.2f}, host {r.kernel_scaled_host_us:,.0f} µs)"
                          for (group, fam), r in terms.iterrows()) + ".", ""]
    return lines


def write_report(res: dict) -> str:
    s = summary(res)
    rows = graph_errors(res)
    dec = [r for r in rows if r["kind"] == "decode"]
    pre = [r for r in rows if r["kind"] == "prefill" and r["prompt_len"] >= 1024]
    lines = [
        "# Accuracy report",
        "",
        "Generated by `python3 tools/fit_engines.py && python3 tools/accuracy_report.py`. Error = "
        "predicted / measured "
        "- 1. **Held-out** figures predict rows that were not in the fit: the graph engine leaves one "
        "whole model shape "
        "out at a time (all its TP slices, precisions, batches, contexts and both GPUs) and refits; each "
        "serving engine "
        "leaves one public row out. **Fitted** figures use every row (in-sample).",
        "",
        "Measured on an H100 80GB HBM3 and an H200 (2026-11-26, driver 580.159.04, torch 2.11.0+cu130, "
        "CUDA 13.0): "
        "decode steps and prefills of compiled layers replayed from CUDA graphs, random weights "
        "(`tools/measure_physics.py`, data/measurements/*physics*.json). Run-to-run spread (a second H100 "
        "run of the same "
        f"set): {repeat_spread()}.",
        "",
        *lofo_section(),
        *production_section(),
        "",
        "## Targets (issues 10 and 20)",
        "",
        "| metric | rows | median | worst | target median / worst | |",
        "| --- | --- | --- | --- | --- | --- |",
        _line("graph: decode ITL, held-out shape", s["graph.itl"], TARGETS["itl"]),
        _line("graph: prefill 1,024+ tokens, held-out shape", s["graph.prefill"], TARGETS["prefill"]),
        _line("graph: decode ITL, fitted", s["graph.itl.fitted"]),
        _line("graph: prefill 1,024+, fitted", s["graph.prefill.fitted"]),
        _line("graph: prefill 64+ tokens, held-out shape", s["graph.prefill64"], SHORT_TARGET),
        _line("graph: prefill 64-768 tokens, held-out shape", s["graph.prefill_short"], SHORT_TARGET),
        _line("graph: prefill 64+, fitted", s["graph.prefill64.fitted"]),
        _line("graph: mixed iteration (decodes + chunk), held-out shape", s["graph.mixed"], SHORT_TARGET),
        _line("graph: mixed iteration, fitted", s["graph.mixed.fitted"]),
        _line("graph: several prompts in one pass, held-out shape", s["graph.multi"], SHORT_TARGET),
    ]
    for name in ENGINES:
        for group in ("itl", "prefill", "ttft"):
            key = f"{name}.public.{group}"
            if key in s:
                target = (0.07, None) if group == "itl" and name != "graph" else None
                lines.append(_line(f"{name}: public {group}, held-out row", s[key], target))
    lines += [
        "",
        "Where a target is missed the shapes below say which and why; a band with fewer than 5 held-out rows "
        "is not drawn (the plan says `unvalidated`).",
    ]
    ab = res.get("ablation", {}).get("smoothing")
    if ab:
        lines += [
            "",
            "**Terms that earn their place.** The p-norm joining a decode step's compute and memory time "
            f"(`smoothing`): leave-one-shape-out decode error {ab['with']['median']:.1%} median / "
            f"{ab['with']['worst']:.1%} worst with it, {ab['without (max)']['median']:.1%} / "
            f"{ab['without (max)']['worst']:.1%} with max() instead, so it stays. The round-1 step overhead "
            "(1.27 ms per step) is gone from the physics: a compiled step has none. The serving engines' "
            "public "
            "rows sit at or below our floor, so their step overhead fits at 0: their kernels may stream "
            "weights "
            "faster than the floor's cuBLAS GEMVs and hide their scheduling cost; these rows cannot separate "
            "the two.",
        ]
    lines += [
        "",
        "**Where the worst-row targets fail, and why.** Mixture-of-experts (mixtral-8x7b, qwen3-30b-a3b): "
        "only "
        "two MoE shapes were measured, so leaving one out fits the MoE layer cost on the other, whose "
        "experts "
        "differ (8 large vs 128 small grouped GEMMs). fp8 KV: only Llama-3.1-8B and 70B TP4 ran it, "
        "through our "
        "own Triton kernel; leaving 8B out fits `kv_quantized_bandwidth` on 70B alone. int4 weight-only: "
        "tinygemm at batch 64+ runs at a flat ~30 TFLOP/s; two shapes. Wide-and-shallow d8192 x 8 layers and "
        "the 1B model: the per-layer cost is one constant, while the measured one grows from about 40 us "
        "(d 2048) to about 58 us (d 8192). Prefill worst rows: 1,024-token prompts of small shapes and 32k "
        "prompts (flash attention's efficiency rises with length; one constant).",
    ]
    lines += ["", "## Graph engine (our compiled steps)"]
    lines += _split_table("Decode by model shape", dec, lambda r: f"{r['shape']}")
    lines += _split_table("Decode by GPU", dec, lambda r: r["gpu"])
    lines += _split_table(
        "Decode by weight / KV precision", dec, lambda r: f"{r['weights']} weights, {r['kv']} KV"
    )
    lines += _split_table("Decode by batch", dec, lambda r: f"batch {r['batch']:>3}")
    lines += _split_table("Prefill (1,024+ tokens) by model shape", pre, lambda r: r["shape"])
    lines += _split_table(
        "Prefill (1,024+ tokens) by GPU and precision", pre, lambda r: f"{r['gpu']}, {r['weights']}"
    )
    lines += short_prompt_section(res, rows)
    lines += [
        "",
        "### Scaling check",
        "",
        "Most rows time a few of a model's layers and scale (`layers_timed`); one Llama-3.1-8B with all 32 "
        "layers "
        "in one graph checks that:",
        "",
        "| GPU | point | all 32 layers (ms) | 8 layers x 4 (ms) | difference |",
        "| --- | --- | --- | --- | --- |",
        *scaling_check(),
    ]
    worst = sorted(rows, key=lambda r: -abs(r["heldout"]))[:15]
    lines += [
        "",
        "### Worst held-out rows",
        "",
        "| GPU | shape | TP | weights/KV | batch | context / prompt | measured ms | held-out | fitted |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in worst:
        lines.append(
            f"| {r['gpu']} | {r['shape']} | {r['tp']} | {r['weights']}/{r['kv']} | {r['batch'] or '-'} | "
            f"{r['context'] or r['prompt_len']} | {r['measured_ms']:.3f} | {r['heldout']:+.1%} | "
            f"{r['fitted']:+.1%} |"
        )
    lines += constants_table(res)
    lines += [
        "",
        "## All-reduce (NCCL in a CUDA graph, 4x H200 NVLink)",
        "",
        "| TP | bytes | measured us | predicted us | error |",
        "| --- | --- | --- | --- | --- |",
    ]
    for p in res["allreduce"]:
        lines.append(
            f"| {p['tp']} | {p['bytes']:,} | {p['us']:.1f} | {p['predicted_us']:.1f} | "
            f"{p['predicted_us'] / p['us'] - 1:+.1%} |"
        )
    for name in ENGINES:
        lines += [
            "",
            f"## Engine `{name}`: public rows",
            "",
            profiles()["engines"][name]["description"],
            "",
            "| id | engine | scenario | metric | measured | fitted | held-out | error (held-out) |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for r in res["engines"][name]:
            lines.append(
                f"| {r['id']} | {r['engine_label']} | {_describe(r['scenario'])} | {r['metric']} | "
                f"{r['measured']:,.2f} | {r['fitted']:,.2f} | {r['heldout']:,.2f} | "
                f"{r['heldout'] / r['measured'] - 1:+.1%} |"
            )
    lines += ttft_section()
    lines += ["", *MULTINODE_SECTION]
    return "\n".join(lines) + "\n"


def ttft_section() -> list[str]:
    """Issue 30's TTFT validation (tools/ttft_accuracy.py writes its residuals; this report renders them)."""
    from tools.ttft_accuracy import section_lines

    lines = section_lines()
    return ["", *lines] if lines else []


# Kept in its own file (regenerated by tools/multinode_accuracy.py); this report only links it.
MULTINODE_SECTION = [
    "## Multi-node and disaggregated",
    "",
    "Multi-node TP, pipeline and expert parallelism and disaggregated serving are scored against public "
    "results "
    "(DeepEP's all-to-all table, NVIDIA's Llama-3.1-405B TP-vs-PP post, SGLang/LMSYS large-scale EP on "
    "H100 and "
    "GB200) in [ACCURACY_MULTINODE.md](ACCURACY_MULTINODE.md), with what is and is not modelled.",
]


def main() -> int:
    res = load()
    REPORT.write_text(write_report(res))
    for key, (n, med, worst) in summary(res).items():
        print(f"{key:32s} n={n:4d} median {med:6.1%} worst {worst:6.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
