#!/usr/bin/env python3
"""Fit each production engine's physics per GPU generation on public closed-loop serving runs (issue 20),
cross-validate it, and write the fitted terms into planner/data/engine_profiles.json (`production`).

    python -m tools.fit_production_engines            # fit, validate, write
    python -m tools.fit_production_engines --dry-run  # fit and validate only

The "graph" physics (our compiled torch steps) stays the floor every plan shows. A production engine runs
fused kernels (FlashInfer / TRT-LLM attention, CUTLASS and DeepGEMM block-scaled fp8, MXFP4/NVFP4 grouped
GEMMs, custom all-reduce), so its per-layer cost, all-reduce latency and weight-streaming efficiency
differ from ours. Those terms are fitted per engine x GPU generation (weight streaming per weight
precision) on the runs of data/reference/serving_runs_published.csv, within physical bounds: no
bandwidth efficiency above BANDWIDTH_CEILING (a plain HBM read reaches 0.87-0.91 of the datasheet) and
no compute efficiency above 1, so no engine is ever planned faster than the GPU's roofline.

Each run is predicted by the closed-loop benchmark client (planner.serving.benchmark_client). Fitting
alternates: a simulation pass gives each run's mean decode batch and how much its prompts' iterations
stretch TPOT over the pure decode step; a fast pass fits the decode terms to TPOT through
latency.decode_step at that batch; then the engine's prefill efficiencies (one scale on the graph physics'
prefill GEMM and attention efficiencies, from a second simulation at half that speed) and its per-request
serving cost (ttft_overhead_ms, ttft_per_running_ms) are fitted on the median TTFTs. Each run is simulated
under its launch's prompt admission (tools.engine_fidelity.scheduler_for). Validation leaves one model out
at a time, then one GPU at a time.

No fitted value sits at a bound (issue 30): a term the runs cannot pin (tools/production_evidence.py), or one
the fit drives to a bound (the runs ask for a value outside its physical range), is held at a stated value
(production_evidence.held_value: measured, published, or the kernel-table predictor's per-step host cost) and
the group refits without it; the record's `held` and `not_fitted` say which and why. TensorRT-LLM's MoE
prefill takes its routed experts from its kernel tables (PREFILL_MOE_FROM_TABLES).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpu_catalog import load_catalog  # noqa: E402
from planner.contract.planning import closed_loop_benchmark  # noqa: E402
from planner.core.deployment import Deployment  # noqa: E402
from planner.core.efficiency import EngineEfficiency  # noqa: E402
from planner.core.errors import ScenarioError  # noqa: E402
from planner.engines.profile_records import architecture_family  # noqa: E402
from planner.engines.profiles import (  # noqa: E402
    PROFILES_PATH,
    gpu_generation,
    physics_values,
    profiles,
    with_efficiency,
)
from planner.physics.latency import decode_step, is_weight_only_4bit  # noqa: E402
from planner.physics.memory import MemoryPlan, plan_memory  # noqa: E402
from planner.physics.step_predictor import with_kernel_tables  # noqa: E402
from planner.scenario.scenario import Scenario, parse_scenario, resolve  # noqa: E402
from tools.engine_fidelity import RUNS_CSV, scenario_for, skip_reason, validation_only  # noqa: E402
from tools.optimize import nelder_mead  # noqa: E402
from tools.production_evidence import (  # noqa: E402
    MIN_EVIDENCE_RUNS,
    at_bound_reason,
    fitted_precisions,
    held_value,
    unfitted_terms,
)

BANDWIDTH_CEILING = 0.95
# (term, low, high). Weight streaming is fitted per weight precision (a run's only sub-16-bit term).
# Bounds are physical: production GEMMs past the ridge reach 50-100% of the dense peak; a kernel launch
# inside a CUDA or HIP graph costs microseconds and a layer runs a few dozen kernels (DeepSeek-R1 on SGLang
# on MI300X spends ~15 of a 21 ms step at concurrency 4 on fixed costs, ~250 us a layer); an NVLink
# all-reduce's latency is a few to tens of microseconds; an engine's per-step CPU work (scheduling,
# sampling, detokenizing) stays under ~2.5 ms.
DECODE_TERMS = (
    ("compute", 0.5, 1.0), ("layer_overhead_us", 0.0, 400.0), ("moe_layer_overhead_us", 0.0, 400.0),
    ("allreduce_latency_us", 0.0, 50.0), ("step_overhead_us", 0.0, 2_500.0),
    # expert parallelism, fitted only where a generation has EP runs: the all-to-all's own latency, and how
    # much of it the engine hides behind compute (1: the other micro-batch's compute hides it all)
    ("alltoall_latency_us", 0.0, 100.0), ("ep_overlap", 0.0, 1.0),
)
WEIGHT_BOUNDS = (0.2, BANDWIDTH_CEILING)
# the efficiency term that streams each weight precision (planner.physics.latency.weight_bandwidth_efficiency)
WEIGHT_TERMS = {
    "bf16": "bandwidth", "fp16": "bandwidth", "fp8": "quantized_bandwidth", "int8": "quantized_bandwidth",
    "fp4": "quantized_bandwidth", "int4": "int4_bandwidth",
}
# 4-bit weights multiplied in 16-bit math (MXFP4 on Hopper, planner.physics.latency.is_weight_only_4bit)
# stream through the weight-only term
WEIGHT_ONLY_4BIT_TERM = "int4_bandwidth"
# Terms a production engine's kernels share with another (tied term -> its source, where a run needs it): its
# weight-only 4-bit GEMMs (Marlin, the MXFP4 MoE kernels of vLLM and TensorRT-LLM on Hopper) dequantize in
# registers and run bf16 tensor-core math at the rate of its other GEMMs, not at the ~30 TFLOP/s of the
# tinygemm kernel the graph physics measured (`int4_compute`). (An fp8 KV cache keeps the physics' read
# efficiency, `kv_quantized_bandwidth`: tied to the bf16 cache's, the in-sample TPOT median error grew in 6 of
# 10 groups, vLLM CDNA3 7.2% -> 8.8%.)
TIED_TERMS: dict[str, tuple[str, Callable[[Deployment], bool]]] = {
    "int4_compute": ("compute", is_weight_only_4bit),
}
SIM_PASSES = 3
# The engine's prefill kernels (its MoE grouped GEMMs and MLA / flash attention at prompt lengths) reach one
# fitted share of what the graph physics measured, the same for its GEMMs and its attention: fitted on TTFT,
# at most what keeps every prefill efficiency at or below the dense peak.
PREFILL_TERMS = ("prefill_compute", "prefill_quantized_compute", "attention_compute")
PREFILL_SCALE_LOW = 0.1
RESIDUALS = ROOT / "data" / "production_residuals.csv"
# Models whose runs the fit leaves out by default (issue 30). gpt-oss-120b's 242 runs (vLLM on H100, H200
# and B200, TensorRT-LLM on H200 and B200; MXFP4 planned weight-only on Hopper) are plannable, but one set of
# fixed costs per engine x generation cannot serve its MoE layers and DeepSeek-R1's or Llama's at once. Fitted
# with them (2026-11-27): 16 of 51 bounded values at a bound (10 of 45 without); DeepSeek-R1 on TensorRT-LLM
# B200 22.8% TPOT median in-sample (11.0% without); TensorRT-LLM H200 p90 28.2% (12.2%); the kernel tables'
# leave-one-family-out TPOT median on TensorRT-LLM 11.0% (6.5%: they borrow the record's all-to-all terms);
# gpt-oss on B200 at 1.37x InferenceX's tokens per MW (1.15x from the kernel tables). gpt-oss stays a family
# outside the records, planned by default from the kernel tables.
DEFAULT_EXCLUDED_MODELS = "gpt-oss-120b"
MIN_GROUP_ROWS = 12
# Engines whose MoE prefill takes the routed experts from their kernel tables (EngineEfficiency
# .prefill_moe_from_tables, issue 30): TensorRT-LLM's DeepSeek-R1 prefill from the tables is 1.6-2.5x the
# fitted physics' on H200 and 1.2-1.9x on B200 (the graph physics' dense prefill rate, scaled on TTFT, ran its
# grouped expert GEMMs at 0.6-0.9 of the peak where the tables measure 0.04-0.28), and the runs' TTFT at
# concurrency <= 8 sided with the tables (docs/ACCURACY.md).
PREFILL_MOE_FROM_TABLES = ("trt-llm",)
# a fitted value within 1% of its range from a bound is "at" it (tests/test_profile_records.py)
AT_BOUND = 0.01


@dataclass
class Run:
    """One published run, resolved once."""

    row: pd.Series
    engine: str
    generation: str
    gpu: str
    model: str
    weights: str
    base: Deployment
    scenario: Scenario  # the run's plan: its closed-loop benchmark is the prediction
    memory: MemoryPlan
    tpot_ms: float  # measured: the mean where published, else the median
    tpot_is_mean: bool
    ttft_median_ms: float
    context: float
    # from the last simulation pass
    mean_batch: float = 1.0
    stretch: float = 1.0
    sim_ttft_median_ms: float = 0.0
    sim_tpot_ms: float = 0.0


@dataclass
class GroupFit:
    engine: str
    generation: str
    terms: dict[str, float] = field(default_factory=dict)
    weights: dict[str, dict[str, float]] = field(default_factory=dict)
    rows: int = 0
    # terms the group's runs cannot pin, and why (tools.production_evidence): they keep the planned value
    not_fitted: dict[str, str] = field(default_factory=dict)
    # the values those terms are held at (decode terms, and 'precision:term' for weight streaming)
    held: dict[str, float] = field(default_factory=dict)
    # the expert all-to-all terms the kernel-table predictor takes (ep_terms_from_tables), and why
    kernel_terms: dict[str, float] = field(default_factory=dict)
    kernel_terms_source: str = ""


def load_runs(path: Path = RUNS_CSV, exclude_models: frozenset[str] = frozenset()) -> list[Run]:
    frame = pd.read_csv(path, low_memory=False)
    frame = frame[~frame.model_preset.isin(exclude_models)]
    catalog = load_catalog()
    gpus = set(catalog)
    runs = []
    for _, row in frame.iterrows():
        if skip_reason(row, gpus) is not None:
            continue
        tpot_mean, tpot_median = row.get("tpot_mean_ms"), row.get("tpot_median_ms")
        has_mean = pd.notna(tpot_mean)
        if not has_mean and pd.isna(tpot_median):
            continue
        try:
            scenario = parse_scenario(scenario_for(row))
            d = resolve(scenario)
        except ScenarioError:
            continue
        # the fit starts from the graph physics and the engine's serving overheads, never from an earlier fit
        d = with_efficiency(
            d,
            EngineEfficiency(
                **{
                    **physics_values(str(row["gpu"])),
                    **profiles()["engines"][scenario.engine].get("overheads", {}),
                    "prefill_moe_from_tables": float(scenario.engine in PREFILL_MOE_FROM_TABLES),
                    "name": scenario.engine,
                }
            ),
        )
        generation = gpu_generation(str(row["gpu"]))
        if generation is None:
            continue
        mem = plan_memory(d, scenario.context_len_resolved)
        if not mem.fits:  # no plan to predict the run with
            continue
        runs.append(Run(row, scenario.engine, generation, str(row["gpu"]), str(row["model_preset"]),
                        str(row["weights"]), d, scenario, mem,
                        float(tpot_mean if has_mean else tpot_median), bool(has_mean),
                        float(row.get("ttft_median_ms", np.nan)), scenario.mean_context))
    return runs


def _efficiency(run: Run, fit: GroupFit | None) -> EngineEfficiency:
    base = run.base.efficiency.model_dump()
    if fit is None:
        return run.base.efficiency
    values = {**base, **held_terms(fit.held, run.weights), **fit.terms, **fit.weights.get(run.weights, {})}
    return EngineEfficiency.model_validate(values)


def held_terms(held: dict[str, float], weights: str | None) -> dict[str, float]:
    """The held values a run in `weights` takes: every decode term's, and its precision's streaming term."""
    out = {k: v for k, v in held.items() if ":" not in k}
    out.update({k.split(":")[1]: v for k, v in held.items() if ":" in k and k.split(":")[0] == weights})
    return out


def simulate(run: Run, fit: GroupFit | None) -> None:
    """One benchmark simulation under `fit`: the run's decode batch and its prompts' stretch of TPOT."""
    d = with_efficiency(run.base, _efficiency(run, fit))
    bench = closed_loop_benchmark(run.scenario, d, run.memory)
    assert bench is not None  # load_runs keeps runs whose model fits
    result = bench[1]
    run.mean_batch = max(result.mean_decode_batch, 1.0)
    pure = float(decode_step(d, run.mean_batch, run.context).total_ms)
    run.sim_tpot_ms = result.tpot_ms.mean if run.tpot_is_mean else result.tpot_ms.p50
    run.stretch = run.sim_tpot_ms / max(pure, 1e-9)
    run.sim_ttft_median_ms = result.ttft_ms.p50


def weight_term(run: Run) -> str:
    """The term that streams the run's weights (planner.physics.latency.weight_bandwidth_efficiency)."""
    return WEIGHT_ONLY_4BIT_TERM if is_weight_only_4bit(run.base) else WEIGHT_TERMS[run.weights]


@dataclass(frozen=True)
class FreeTerms:
    """What one group fits: its decode terms, and the streaming term of each weight precision it fits."""

    decode: tuple[tuple[str, float, float], ...]
    weights: dict[str, str]  # precision -> term
    # TIED_TERMS some run needs, at the planned value of a source the group does not fit
    tied: dict[str, float]
    not_fitted: dict[str, str]
    held: dict[str, float] = field(default_factory=dict)


def free_terms(runs: list[Run], generation: str,
               pinned_out: dict[str, tuple[str, float | None]] | None = None) -> FreeTerms:
    """The terms the group fits; `pinned_out`: terms a fit drove to a bound, with the reason and the value
    they are held at instead (None: the planned one)."""
    pinned_out = pinned_out or {}
    left = unfitted_terms(runs)
    precisions, left_weights = fitted_precisions(runs)
    terms = {p: weight_term(next(r for r in runs if r.weights == p)) for p in precisions
             if f"{p}:{WEIGHT_TERMS[p]}" not in pinned_out}
    not_fitted = {**left, **{f"{p}:{WEIGHT_TERMS[p]}": why for p, why in left_weights.items()}}
    planned = runs[0].base.efficiency
    held: dict[str, float] = {}
    for term in not_fitted:
        value, source = held_value(term, generation, planned)
        if value is not None:
            held[term] = value
            not_fitted[term] += f"; held at {value:g} ({source})"
    for term, (why, value) in pinned_out.items():
        not_fitted[term] = why
        if value is not None:
            held[term] = value
    tied = {k: float(held.get(source, getattr(planned, source))) for k, (source, needs) in TIED_TERMS.items()
            if any(needs(r.base) for r in runs)}
    decode = tuple(t for t in DECODE_TERMS if t[0] not in left and t[0] not in pinned_out)
    return FreeTerms(decode, terms, tied, not_fitted, held)


def at_bounds(fit: GroupFit, free: FreeTerms, generation: str, planned: EngineEfficiency,
              ) -> dict[str, tuple[str, float | None]]:
    """Free terms the fit drove within AT_BOUND of a bound: each with its reason and held value."""
    values = [(n, fit.terms[n], lo, hi) for n, lo, hi in free.decode]
    values += [(f"{p}:{t}", fit.weights[p][t], *WEIGHT_BOUNDS) for p, t in free.weights.items()]
    out: dict[str, tuple[str, float | None]] = {}
    for name, value, lo, hi in values:
        if min(value - lo, hi - value) <= AT_BOUND * (hi - lo):
            side, bound = ("high", hi) if hi - value < value - lo else ("low", lo)
            held, source = held_value(name, generation, planned, side, bound)
            out[name] = (at_bound_reason(bound, side, held, source), held)
    return out


def _unpack(x: np.ndarray, free: FreeTerms) -> GroupFit:
    fit = GroupFit("", "", not_fitted=dict(free.not_fitted), held=dict(free.held))
    values = 1.0 / (
        1.0 + np.exp(-np.clip(np.asarray(x, dtype=float), -50.0, 50.0))
    )  # place inside its bounds
    for (name, lo, hi), v in zip(free.decode, values, strict=False):
        fit.terms[name] = float(lo + (hi - lo) * v)
    for (precision, term), v in zip(free.weights.items(), values[len(free.decode):], strict=True):
        lo, hi = WEIGHT_BOUNDS
        fit.weights[precision] = {term: float(lo + (hi - lo) * v)}
    fit.terms.update({k: fit.terms.get(TIED_TERMS[k][0], v) for k, v in free.tied.items()})
    return fit


def _names(free: FreeTerms) -> list[str]:
    return [n for n, _, _ in free.decode] + [f"{p}:{t}" for p, t in free.weights.items()]


def ep_terms_from_tables(runs: list[Run], engine: str) -> dict[str, tuple[str, float | None]]:
    """The expert all-to-all's latency and overlap, pinned where the kernel tables see everything else: on
    the group's expert-parallel runs on GPUs with tables, the kernel-table predictor's decode step (its
    measured kernels, its host cost) at each run's simulated batch, with these two terms fitted to TPOT (L1
    in log space). The record keeps them for the kernel-table predictor (`kernel_table_terms`, issue 30: the
    end-to-end runs fit only what the tables cannot see). Its own production terms keep theirs: held at
    these, TensorRT-LLM Hopper's in-sample TPOT median went 2.9% -> 6.0% and SGLang Blackwell's 4.5% ->
    11.1% (their other terms absorb what the physics misses), while the overlap the production fit finds
    drifts along a flat direction (TensorRT-LLM B200 0.28 -> 0.97 between two refits) and, borrowed, cost
    the kernel-table predictor's TensorRT-LLM B200 TPOT 7.0% -> 11.5% held out by family."""
    ep = [r for r in runs if r.base.ep > 1 and r.base.model.moe is not None]
    deployments = []
    for r in ep:
        kt = with_kernel_tables(r.base.efficiency, r.gpu, engine)
        if kt is not None:
            deployments.append((r, with_efficiency(r.base, kt)))
    if len(deployments) < MIN_EVIDENCE_RUNS:
        return {}
    lo_hi = {name: (lo, hi) for name, lo, hi in DECODE_TERMS}
    (a_lo, a_hi), (o_lo, o_hi) = lo_hi["alltoall_latency_us"], lo_hi["ep_overlap"]

    def unpack(x: np.ndarray) -> tuple[float, float]:
        v = 1.0 / (1.0 + np.exp(-np.clip(x, -50.0, 50.0)))
        return float(a_lo + (a_hi - a_lo) * v[0]), float(o_lo + (o_hi - o_lo) * v[1])

    def loss(x: np.ndarray) -> float:
        latency, overlap = unpack(x)
        update = {"alltoall_latency_us": latency, "ep_overlap": overlap}
        errs = []
        for r, d in deployments:
            step = decode_step(with_efficiency(d, d.efficiency.model_copy(update=update)), [r.mean_batch],
                               [r.context])
            errs.append(np.log(float(step.total_ms[0]) * r.stretch / r.tpot_ms))
        return float(np.mean(np.abs(errs)))

    x, _ = nelder_mead(loss, np.zeros(2), step=1.0, iters=120)
    latency, overlap = unpack(x)
    why = (f"fitted on the kernel-table predictor's TPOT of {len(deployments)} expert-parallel runs (the "
           f"tables supply every other kernel; mean |log error| {loss(x):.3f})")
    return {"alltoall_latency_us": (why, latency), "ep_overlap": (why, overlap)}


def fit_group(runs: list[Run], engine: str, generation: str, kernel_ep: bool = False) -> GroupFit:
    """`kernel_ep`: also pin the expert all-to-all terms the kernel-table predictor takes
    (ep_terms_from_tables; the shipped fit, not its cross-validation)."""
    best = GroupFit(engine, generation)
    prefill_terms: dict[str, float] = {}
    for r in runs:
        simulate(r, None)
    kernel_terms: dict[str, tuple[str, float | None]] = {}
    if kernel_ep and "ep_overlap" not in unfitted_terms(runs):
        kernel_terms = ep_terms_from_tables(runs, engine)
    pinned_out: dict[str, tuple[str, float | None]] = {}
    free = free_terms(runs, generation, pinned_out)
    x0 = np.zeros(len(free.decode) + len(free.weights))
    for _ in range(SIM_PASSES):
        measured = np.log([r.tpot_ms for r in runs])
        # every model weighs the same in the fit, however many runs it has
        per_model: dict[str, int] = {}
        for r in runs:
            per_model[r.model] = per_model.get(r.model, 0) + 1
        weight = np.array([1.0 / per_model[r.model] for r in runs])
        weight /= weight.sum()

        # runs of one deployment differ only in batch and context: one vectorized decode_step each
        by_layout: dict[tuple, list[int]] = {}
        for i, r in enumerate(runs):
            key = (r.model, r.gpu, r.base.tp, r.base.ep, r.weights, r.base.kv_cache)
            by_layout.setdefault(key, []).append(i)
        layouts = [(runs[idx[0]], np.array(idx), np.array([runs[i].mean_batch for i in idx]),
                    np.array([runs[i].context for i in idx]), np.array([runs[i].stretch for i in idx]))
                   for idx in by_layout.values()]

        def loss(x: np.ndarray, free: FreeTerms, measured: np.ndarray = measured, weight: np.ndarray = weight,
                 layouts: list = layouts) -> float:
            fit = _unpack(x, free)
            predicted = np.empty(len(runs))
            for first, idx, batch, context, stretch in layouts:
                d = with_efficiency(first.base, _efficiency(first, fit))
                predicted[idx] = np.asarray(decode_step(d, batch, context).total_ms) * stretch
            # L1 in log space: the median run, not the worst, sets the terms
            return float(np.sum(weight * np.abs(np.log(predicted) - measured)))

        # a term the fit drives to a bound is not pinned by the runs: it is held at its stated value and
        # the others refit without it, until no free term sits at a bound
        while True:
            if len(x0):
                x0, _ = nelder_mead(lambda x, free=free: loss(x, free), x0, step=1.0, iters=400)
            best = _unpack(x0, free)
            hit = at_bounds(best, free, generation, runs[0].base.efficiency)
            if not hit:
                break
            kept = dict(zip(_names(free), x0, strict=True))
            pinned_out.update(hit)
            free = free_terms(runs, generation, pinned_out)
            x0 = np.array([kept[n] for n in _names(free)], dtype=float)
        best.engine, best.generation = engine, generation
        best.terms.update(prefill_terms)
        for r in runs:
            simulate(r, best)
        prefill_terms = fit_prefill_scale(runs, best)
        best.terms.update(prefill_terms)
    for r in runs:  # TPOT's stretch and TTFT under the engine's prefill as fitted
        simulate(r, best)
    # The frontend's serving cost: what TTFT still lacks (HTTP, tokenization, scheduling), a fixed part and
    # a part per request in flight (a closed loop's arrival finds the other concurrency - 1), fitted L1.
    timed = [r for r in runs if np.isfinite(r.ttft_median_ms)]
    if timed:
        gaps = np.array([r.ttft_median_ms - (r.sim_ttft_median_ms - r.base.efficiency.ttft_overhead_ms)
                         for r in timed])
        others = np.array([float(r.row["concurrency"]) - 1.0 for r in timed])
        measured_ttft = np.array([r.ttft_median_ms for r in timed])

        def ttft_loss(z: np.ndarray) -> float:
            fixed, per = np.exp(z)
            predicted = np.maximum(measured_ttft - gaps + fixed + per * others, 1e-6)
            return float(np.mean(np.abs(np.log(predicted / measured_ttft))))

        z, _ = nelder_mead(ttft_loss, np.log([max(float(np.median(gaps)), 1.0), 0.1]), step=1.0, iters=300)
        best.terms["ttft_overhead_ms"], best.terms["ttft_per_running_ms"] = (float(v) for v in np.exp(z))
    best.rows = len(runs)
    best.kernel_terms = {k: v for k, (_, v) in kernel_terms.items() if v is not None}
    best.kernel_terms_source = next(iter(kernel_terms.values()))[0] if kernel_terms else ""
    return best


def _ttft_fit(timed: list[Run], prefill_ms: np.ndarray, high: float) -> tuple[float, float, float]:
    """The frontend's serving cost (fixed, per other request in flight) and the prefill's scale that fit the
    median TTFTs best (L1 in log space), each run's TTFT being what the simulation gave less its serving cost
    and its prefill part `prefill_ms`, that part scaled by 1 / scale."""
    base = np.array([r.sim_ttft_median_ms - r.base.efficiency.ttft_overhead_ms for r in timed]) - prefill_ms
    others = np.array([float(r.row["concurrency"]) - 1.0 for r in timed])
    measured = np.array([r.ttft_median_ms for r in timed])

    def unpack(z: np.ndarray) -> tuple[float, float, float]:
        scale = PREFILL_SCALE_LOW + (high - PREFILL_SCALE_LOW) / (1.0 + np.exp(-np.clip(z[2], -50.0, 50.0)))
        return float(np.exp(z[0])), float(np.exp(z[1])), float(scale)

    def loss(z: np.ndarray) -> float:
        fixed, per, scale = unpack(z)
        predicted = np.maximum(base + prefill_ms / scale + fixed + per * others, 1e-6)
        return float(np.mean(np.abs(np.log(predicted / measured))))

    gaps = measured - base - prefill_ms
    z, _ = nelder_mead(loss, np.array([np.log(max(float(np.median(gaps)), 1.0)), np.log(0.1), 0.0]),
                       step=1.0, iters=400)
    return unpack(z)


def fit_prefill_scale(runs: list[Run], fit: GroupFit) -> dict[str, float]:
    """The prefill efficiencies that fit the runs' median TTFTs: a second simulation at half the current
    prefill efficiency gives each run's prefill-bound part of TTFT (what doubles when the prefill runs at
    half speed); the scale, fitted with the serving costs on them, multiplies the current efficiencies."""
    timed = [r for r in runs if np.isfinite(r.ttft_median_ms)]
    if not timed:
        return {}
    current = {t: float(getattr(_efficiency(timed[0], fit), t)) for t in PREFILL_TERMS}
    at_speed = np.array([r.sim_ttft_median_ms for r in timed])
    slow = GroupFit(fit.engine, fit.generation, {**fit.terms, **{t: v / 2 for t, v in current.items()}},
                    fit.weights, held=fit.held)
    for r in timed:
        simulate(r, slow)
    prefill_ms = np.array([r.sim_ttft_median_ms for r in timed]) - at_speed
    for r, value in zip(timed, at_speed, strict=True):
        r.sim_ttft_median_ms = float(value)
    high = 1.0 / max(current.values())
    _, _, scale = _ttft_fit(timed, np.maximum(prefill_ms, 0.0), high)
    return {t: max(v * min(scale, high), 0.02) for t, v in current.items()}


def predict(runs: list[Run], fit: GroupFit | None) -> pd.DataFrame:
    out = []
    for r in runs:
        simulate(r, fit)
        out.append({"engine": r.engine, "generation": r.generation, "gpu": r.gpu, "model": r.model,
                    "weights": r.weights, "concurrency": int(r.row["concurrency"]),
                    "prompt_len": int(r.row["prompt_len"]), "output_len": int(r.row["output_len"]),
                    "tpot_ms": r.tpot_ms, "pred_tpot_ms": r.sim_tpot_ms, "ttft_median_ms": r.ttft_median_ms,
                    "pred_ttft_median_ms": r.sim_ttft_median_ms, "run_id": r.row["run_id"]})
    return pd.DataFrame(out)


def groups(runs: list[Run]) -> dict[tuple[str, str], list[Run]]:
    out: dict[tuple[str, str], list[Run]] = {}
    for r in runs:
        out.setdefault((r.engine, r.generation), []).append(r)
    return out


def cross_validate(runs: list[Run], key: str) -> pd.DataFrame:
    """Leave one value of `key` (model or gpu) out within each engine x generation, refit, predict it."""
    parts = []
    for (engine, generation), members in groups(runs).items():
        values = sorted({getattr(r, key) for r in members})
        if len(values) < 2:
            continue
        for held in values:
            train = [r for r in members if getattr(r, key) != held]
            test = [r for r in members if getattr(r, key) == held]
            if len(train) < MIN_GROUP_ROWS:
                continue
            fit = fit_group(train, engine, generation)
            frame = predict(test, fit)
            frame["held_out"] = f"{key}={held}"
            parts.append(frame)
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def summary(frame: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    f = frame.assign(tpot_err=frame.pred_tpot_ms / frame.tpot_ms - 1.0,
                     ttft_err=frame.pred_ttft_median_ms / frame.ttft_median_ms - 1.0)
    g = f.groupby(by)
    return pd.DataFrame(
        {
            "rows": g.size(), "tpot_median_abs": g.tpot_err.apply(lambda e: float(np.median(np.abs(e)))),
            "tpot_p90_abs": g.tpot_err.apply(lambda e: float(np.percentile(np.abs(e), 90))),
            "tpot_within_20pct": g.tpot_err.apply(lambda e: int(np.sum(np.abs(e) <= 0.2))),
            "ttft_median_abs": g.ttft_err.apply(
                lambda e: float(np.median(np.abs(e.dropna()))) if e.notna().any() else np.nan
            ),
        }
    )


def _json_ready(row: dict[str, Any]) -> dict[str, Any]:
    """JSON has no NaN: a figure a split cannot give (no TTFT rows) is null."""
    return {k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in row.items()}


MIN_BAND_ROWS = 5


def _quantiles(frame: pd.DataFrame, split: str) -> dict[str, dict[str, Any] | None]:
    """10th/90th percentiles of TPOT's and TTFT's residuals (predicted / measured - 1) in `frame`."""
    out: dict[str, dict[str, Any] | None] = {}
    for metric, pred, meas in (("tpot", "pred_tpot_ms", "tpot_ms"), ("ttft", "pred_ttft_median_ms",
                                                                       "ttft_median_ms")):
        e = (frame[pred] / frame[meas] - 1.0).replace([np.inf, -np.inf], np.nan).dropna()
        out[metric] = (None if len(e) < MIN_BAND_ROWS else
                       {"q10": round(float(np.percentile(e, 10)), 4),
                        "q90": round(float(np.percentile(e, 90)), 4), "n": int(len(e)), "split": split})
    return out


def profile_records(residuals: pd.DataFrame) -> dict[tuple[str, str], dict[str, Any]]:
    """Each engine x generation's record (issue 30): what its terms were fitted on, and the held-out bands of
    that same fit: `band` (one GPU left out within the group, else one model), `lofo_band` (one architecture
    family left out, over the engine's groups; every engine's where the engine has too few), never narrower
    than `band`."""
    fitted = residuals[residuals.split == "fitted"].assign(family=lambda f: f.model.map(architecture_family))
    held = residuals[residuals.split != "fitted"]
    family_out = residuals[residuals.split == "model_out"]
    out = {}
    for (engine, generation), g in fitted.groupby(["engine", "generation"]):
        mine = held[(held.engine == engine) & (held.generation == generation)]
        band: dict[str, Any] = {}
        engine_gpu_out = held[(held.engine == engine) & (held.split == "gpu_out")]
        for q in (_quantiles(mine[mine.split == "gpu_out"], "gpu_out"),
                  _quantiles(mine[mine.split == "model_out"], "model_out"),
                  # a group of one GPU and one family: the engine's other groups' GPU-out residuals
                  _quantiles(engine_gpu_out, "gpu_out, this engine")):
            for metric, value in q.items():
                if band.get(metric) is None and value is not None:
                    band[metric] = value
        lofo = _quantiles(family_out[family_out.engine == engine], "family_out, this engine")
        every = _quantiles(family_out, "family_out, every engine")
        lofo_band = {}
        for metric in ("tpot", "ttft"):
            chosen = lofo.get(metric) or every.get(metric)
            inner = band.get(metric)
            if chosen is not None and inner is not None:
                chosen = {**chosen, "q10": min(chosen["q10"], inner["q10"]),
                          "q90": max(chosen["q90"], inner["q90"])}
            lofo_band[metric] = chosen
        out[(engine, generation)] = {
            "fitted_on": {"models": sorted(g.model.unique()), "families": sorted(g.family.unique()),
                          "gpus": sorted(g.gpu.unique()), "weights": sorted(g.weights.unique()),
                          "runs": int(len(g)),
                          "source": "data/reference/serving_runs_published.csv"},
            "band": {m: band.get(m) for m in ("tpot", "ttft")}, "lofo_band": lofo_band,
        }
    return out


def write_records(residuals: pd.DataFrame) -> None:
    data = json.loads(PROFILES_PATH.read_text())
    for (engine, generation), rec in profile_records(residuals).items():
        entry = data["engines"][engine].get("production", {}).get(generation)
        if entry is not None:
            entry.update(rec)
    PROFILES_PATH.write_text(json.dumps(data, indent=2) + "\n")


def write_profiles(fits: list[GroupFit], validation: dict[str, Any]) -> None:
    data = json.loads(PROFILES_PATH.read_text())
    for engine in {f.engine for f in fits}:
        entry = data["engines"][engine]
        entry["production"] = {
            f.generation: {
                "terms": {k: round(v, 4) for k, v in f.terms.items()},
                "weights": {p: {k: round(v, 4) for k, v in t.items()} for p, t in f.weights.items()},
                "rows": f.rows,
                # issue 30: what the runs cannot pin keeps its planned value; tied terms follow their source
                "not_fitted": f.not_fitted,
                "held": {k: round(v, 4) for k, v in f.held.items()},
                **({"prefill_moe_from_tables": True} if engine in PREFILL_MOE_FROM_TABLES else {}),
                **({"kernel_table_terms": {k: round(v, 4) for k, v in f.kernel_terms.items()},
                    "kernel_table_terms_source": f.kernel_terms_source} if f.kernel_terms else {}),
                **({"tied": {k: source for k, (source, _) in TIED_TERMS.items() if k in f.terms}}
                   if any(k in f.terms for k in TIED_TERMS) else {}),
            }
            for f in fits
            if f.engine == engine
        }
        entry["production_validation"] = validation.get(engine, {})
    data["production_sources"] = ("data/reference/serving_runs_published.csv (public closed-loop runs; "
                                  "tools/fit_production_engines.py)")
    PROFILES_PATH.write_text(json.dumps(data, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--records-only", action="store_true",
                        help="rebuild each record's fitted-on list and bands from the residuals, no refit")
    parser.add_argument("--runs", type=Path, default=RUNS_CSV)
    parser.add_argument("--exclude-models", default=DEFAULT_EXCLUDED_MODELS,
                        help="comma-separated model presets whose runs the fit leaves out ('' for none)")
    parser.add_argument(
        "--residuals", type=Path, default=RESIDUALS,
        help="every fitted and held-out prediction (CSV; docs/ACCURACY.md is generated from it)",
    )
    args = parser.parse_args(argv)
    if args.records_only:
        write_records(pd.read_csv(args.residuals))
        return 0
    runs = load_runs(args.runs, frozenset(m for m in args.exclude_models.split(",") if m))
    # GPUStack's lab rows and every burst are validation only (tools.engine_fidelity.validation_only):
    # tools.validate_predictors (which reads them through load_runs) and tools.ttft_accuracy score them
    runs = [r for r in runs if not validation_only(r.row)]
    fits = [fit_group(members, e, g, kernel_ep=True) for (e, g), members in sorted(groups(runs).items())
            if len(members) >= MIN_GROUP_ROWS]
    by_key = {(f.engine, f.generation): f for f in fits}
    fitted = pd.concat([predict(m, by_key.get(k)) for k, m in groups(runs).items()], ignore_index=True)
    model_out = cross_validate(runs, "model")
    gpu_out = cross_validate(runs, "gpu")
    with pd.option_context("display.width", 200, "display.float_format", "{:.3f}".format):
        for title, frame in (
            ("fitted", fitted), ("leave one model out", model_out), ("leave one GPU out", gpu_out),
        ):
            if len(frame):
                print(f"== {title}")
                print(summary(frame, ["engine", "gpu"]).to_string())
                print(summary(frame, ["engine"]).to_string())
    for f in fits:
        print(f.engine, f.generation, f.rows, {k: round(v, 3) for k, v in f.terms.items()}, f.weights)
        for term, why in f.not_fitted.items():
            print(f"    not fitted: {term}: {why}")
    if args.residuals and not args.dry_run:
        frames = [fitted.assign(split="fitted", held_out="")]
        frames += [
            f.assign(split=name) for name, f in (("model_out", model_out), ("gpu_out", gpu_out)) if len(f)
        ]
        pd.concat(frames, ignore_index=True).round(4).to_csv(args.residuals, index=False)
    if not args.dry_run:
        validation = {}
        for engine in {f.engine for f in fits}:
            validation[engine] = {
                name: _json_ready(summary(frame[frame.engine == engine], ["engine"]).iloc[0].to_dict())
                for name, frame in (("fitted", fitted), ("model_out", model_out), ("gpu_out", gpu_out))
                if len(frame) and (frame.engine == engine).any()}
        write_profiles(fits, validation)
        write_records(pd.read_csv(args.residuals))
    return 0


if __name__ == "__main__":
    sys.exit(main())
