"""What the plan page's charts draw, computed once per scenario: the roofline's ceilings and operating
points, the per-GPU memory stack with its capacity lines, and the batch sweep cut at the max batch.

Pure and UI-free: the app lays these numbers out and computes none of them (issue 14: no physics in
the UI). Every figure comes from the plan or the deployment the plan was made from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from planner.contract.planning import Plan, plan
from planner.scenario.scenario import Scenario, parse_scenario, resolve
from planner.serving.sweep import batch_sweep


@dataclass(frozen=True)
class OperatingPoint:
    """A kernel on the roofline: its arithmetic intensity and the TFLOP/s it reaches per GPU at the
    plan's estimated time (FLOPs of the step / its time)."""

    kernel: str
    ai_flop_per_byte: float
    tflops_per_gpu: float


@dataclass(frozen=True)
class RooflineChart:
    compute_precision: str
    peak_tflops: float
    hbm_tb_s: float
    ridge_flop_per_byte: float
    # the attainable-performance line, as (arithmetic intensity, TFLOP/s) corners: a log-log chart
    # draws the sloped bandwidth roof and the flat compute roof exactly from these three points
    ceiling: list[tuple[float, float]]
    points: list[OperatingPoint]


@dataclass(frozen=True)
class MemoryPart:
    name: str
    gb: float


@dataclass(frozen=True)
class MemoryStack:
    """One GPU's memory: the parts stacked within the engine's cap, and the capacity lines.

    With the engine's accounting (plan.memory.waterfall_gib, vLLM's rules) the unit is GiB, as vLLM's
    log prints it, and the parts are its terms; otherwise GB and the napkin terms (weights, KV, reserve)."""

    parts: list[MemoryPart]
    device_gb: float
    usable_gb: float  # the engine's cap: device (as the framework sees it) x memory utilization
    fits: bool
    unit: str = "GB"
    lines: list[MemoryPart] = field(default_factory=list)  # capacity lines: name and position
    full_length_sequences: float | None = None  # how many sequences of max_model_len the KV cache holds


# --- serving under load (issue 9.6): the frontier and latency vs request rate --------------------

@dataclass(frozen=True)
class ServingSeries:
    """What the serving charts draw for one replica. Rates in requests/s per replica."""

    gpus_per_replica: int
    capacity_rate: float  # saturation rate
    goodput_rate: float | None  # highest rate meeting the objective (None without one)
    slo_percentile: int | None
    slo_ttft_ms: float | None
    slo_itl_ms: float | None
    # frontier: one point per rate from a trickle to just below capacity (the concurrency grows with it)
    frontier: list[dict[str, Any]] = field(default_factory=list)
    # percentiles vs rate: p50, p90, p99 TTFT and ITL (ms) from a trickle to near capacity, and at the goodput
    vs_rate: list[dict[str, Any]] = field(default_factory=list)
    operating_point: dict[str, Any] | None = None


@dataclass(frozen=True)
class ChartData:
    plan: Plan
    roofline: RooflineChart
    memory: MemoryStack
    # batch sweep as columns (lists), past the max batch too: column `fits` says which batches fit
    sweep: dict[str, list[Any]] = field(default_factory=dict)
    max_batch: int = 0
    serving: ServingSeries | None = None


def _achieved_tflops(flops_per_gpu: float, ms: float) -> float:
    return flops_per_gpu / (ms * 1e-3) / 1e12 if ms > 0 else float("nan")


def roofline_chart(p: Plan, peak_tflops: float, hbm_tb_s: float) -> RooflineChart:
    r, lat = p.roofline, p.latency
    ridge = r.ridge_flop_per_byte
    points = [r.decode_ai, r.prefill_ai, ridge]
    lo = 10 ** math.floor(math.log10(max(min(points) / 3, 1e-3)))
    hi = 10 ** math.ceil(math.log10(max(points) * 3))
    return RooflineChart(
        compute_precision=r.compute_precision, peak_tflops=peak_tflops, hbm_tb_s=hbm_tb_s,
        ridge_flop_per_byte=ridge, ceiling=[(lo, lo * hbm_tb_s), (ridge, peak_tflops), (hi, peak_tflops)],
        points=[
            OperatingPoint(
                f"decode step (batch {lat.batch:,})", r.decode_ai,
                _achieved_tflops(r.decode_flops_per_gpu, lat.itl_ms),
            ),
            OperatingPoint(
                "prefill", r.prefill_ai, _achieved_tflops(r.prefill_flops_per_gpu, lat.prefill_ms)
            ),
        ],
    )


_WATERFALL_PARTS = (
    ("weights", "weights"), ("rotary_tables", "rotary tables"), ("allocator_rounding", "allocator rounding"),
    ("activation_peak", "activation peak (profiling run)"), ("non_torch", "non-torch (NCCL, CUDA context)"),
    ("cuda_graphs", "CUDA graphs"), ("reserve_override", "reserve (override)"),
)


def memory_stack(p: Plan, device_gb: float) -> MemoryStack:
    m = p.memory
    w = {k: float(v) for k, v in (m.waterfall_gib or {}).items() if v is not None}
    if "utilization_cap" in w:
        parts = [MemoryPart(label, w[key]) for key, label in _WATERFALL_PARTS if w.get(key)]
        kv = max(w.get("kv_cache", 0.0), 0.0)
        held = m.max_concurrency
        kv_label = (f"KV cache: {m.kv_cache_tokens:,} tokens" if m.kv_cache_tokens else "KV cache")
        parts.append(MemoryPart(kv_label, kv))
        cap = w["utilization_cap"]
        parts.append(MemoryPart("free", max(cap - sum(x.gb for x in parts), 0.0)))
        lines = [MemoryPart("utilization cap", cap)]
        if "device_total" in w:
            lines.append(MemoryPart("device total", w["device_total"]))
        return MemoryStack(parts=parts, device_gb=w.get("device_total", device_gb), usable_gb=cap,
                           fits=m.fits, unit="GiB", lines=lines, full_length_sequences=held)
    kv = min(m.kv_gb_per_gpu_at_batch, max(m.kv_budget_gb_per_gpu, 0.0))
    free = max(m.usable_gb_per_gpu - m.weights_gb_per_gpu - m.reserve_gb - kv, 0.0)
    parts = [
        MemoryPart("weights", m.weights_gb_per_gpu), MemoryPart(f"KV cache at batch {p.latency.batch:,}", kv),
        MemoryPart("reserve", m.reserve_gb), MemoryPart("free", free),
    ]
    return MemoryStack(
        parts=parts, device_gb=device_gb, usable_gb=m.usable_gb_per_gpu, fits=m.fits,
        lines=[MemoryPart("utilization cap", m.usable_gb_per_gpu), MemoryPart("device", device_gb)],
    )


def chart_data(scenario: Scenario | dict[str, Any], p: Plan | None = None) -> ChartData:
    """Everything the plan page draws for one scenario: one plan (the caller's, when it has made it), one
    deployment, one sweep."""
    if not isinstance(scenario, Scenario):
        scenario = parse_scenario(scenario)
    d = resolve(scenario)
    p = p if p is not None else plan(scenario)
    sweep = batch_sweep(scenario)
    columns = {name: [v.item() for v in values] for name, values in sweep.items()}
    return ChartData(plan=p, roofline=roofline_chart(p, d.gpu.peak_tflops(d.compute), d.gpu.hbm_tb_s),
                     memory=memory_stack(p, d.gpu.memory_gb), sweep=columns, max_batch=p.memory.max_batch,
                     serving=serving_series(scenario, p))




FRONTIER_POINTS = 24
PERCENTILE_POINTS = 48  # one percentile search over all of them: the curve's jumps drawn where they are
PERCENTILE_POINTS_NEAR_CAPACITY = 16


def _latency_vs_rate(m: Any, capacity: float, goodput_rate: float | None) -> list[dict[str, Any]]:
    """TTFT and ITL percentiles against the request rate, fine enough that the goodput marker sits on the
    drawn curve: evenly to 90% of capacity, then denser towards it (latency turns up there), plus the goodput
    rate itself. Only stable rates are drawn."""
    import numpy as np

    from planner.serving.distributions import PERCENTILES, ttft_itl_percentiles_over_rates
    from planner.serving.replica import load_point

    fractions = np.concatenate([np.linspace(0.02, 0.9, PERCENTILE_POINTS - PERCENTILE_POINTS_NEAR_CAPACITY),
                                1.0 - np.geomspace(0.09, 0.004, PERCENTILE_POINTS_NEAR_CAPACITY)])
    if goodput_rate and capacity > 0:
        fractions = np.append(fractions, goodput_rate / capacity)
    rates = capacity * np.unique(fractions)
    points = load_point(m, rates / 1000.0)
    ttft, itl = ttft_itl_percentiles_over_rates(m, points)
    stable = np.asarray(points.stable, dtype=bool)
    _add_slot_wait(m, rates, stable, ttft)
    return [
        {"request_rate": float(rate), **{f"{name}_p{q}_ms": float(values[i, j])
                                         for name, values in (("ttft", ttft), ("itl", itl))
                                         for i, q in enumerate(PERCENTILES)}}
        for j, rate in enumerate(rates[stable])
    ]


def _add_slot_wait(m: Any, rates: Any, stable: Any, ttft: Any) -> None:
    """TTFT percentiles (rows: PERCENTILES; columns: rates per s) with the wait for a sequence slot where
    arrivals wait, as the plan shows them (planner.serving.slot_wait: the chain over every rate at once)."""
    import numpy as np

    from planner.serving.distributions import Percentiles
    from planner.serving.replica import load_point
    from planner.serving.slot_wait import NEGLIGIBLE_WAIT, slot_wait, with_slot_wait_percentiles

    probability, mean = slot_wait(m, np.asarray(rates) / 1000.0, int(m.workload.max_running))  # elementwise
    for j in np.nonzero(np.asarray(stable) & (probability > NEGLIGIBLE_WAIT))[0]:
        fast = Percentiles(*(float(v) for v in ttft[:, j]))
        point = load_point(m, float(rates[j]) / 1000.0)
        waited = with_slot_wait_percentiles(m, point, fast, fast, float(probability[j]), float(mean[j]))[0]
        ttft[:, j] = [np.nan if v is None else v for v in (waited.p50, waited.p90, waited.p99)]


def _meets_with_slot_wait(m: Any, rates_per_ms: Any, meets: Any, percentile: int, ttft_ms: float) -> Any:
    """`meets` where the TTFT with the wait for a sequence slot (the plan's figure) meets `ttft_ms` too."""
    import numpy as np

    from planner.serving.slot_wait import NEGLIGIBLE_WAIT, slot_wait, within_ttft_with_slot_wait

    waits = slot_wait(m, rates_per_ms, int(m.workload.max_running))[0] > NEGLIGIBLE_WAIT  # one chain
    return np.array([bool(ok) and (not w or within_ttft_with_slot_wait(m, float(r), percentile, ttft_ms))
                     for r, ok, w in zip(rates_per_ms, meets, waits, strict=True)])


def serving_series(scenario: Scenario | dict[str, Any], p: Plan | None = None) -> ServingSeries | None:
    """The serving charts' data from the serving model's own functions (planner.serving.serving), vectorized
    over rates where the model allows; None when the deployment does not fit."""
    import numpy as np

    from planner.physics.memory import plan_memory
    from planner.serving.replica import load_point, replica_model
    from planner.serving.serving import meets_objective
    from planner.serving.workload import running_cap, workload_for

    if not isinstance(scenario, Scenario):
        scenario = parse_scenario(scenario)
    d = resolve(scenario)
    mem = plan_memory(d, scenario.context_len_resolved)
    if not mem.fits:
        return None
    p = p if p is not None else plan(scenario)
    gpus = p.parallelism.gpus_per_replica if p.parallelism is not None else d.tp
    running = running_cap(scenario.batch, mem.max_batch, scenario.max_num_seqs)  # the plan's own cap
    m = replica_model(
        d, workload_for(scenario, d, running), max_population=mem.max_batch
    )  # the plan's own grid
    capacity = float(m.capacity_per_ms()) * 1000.0
    slo = scenario.load.slo if scenario.load is not None else None
    mean_output = float(np.mean(m.output_tokens))

    # the grid, plus the goodput rate itself so the shaded region ends exactly there
    extra = [p.serving.goodput_request_rate] if p.serving.goodput_request_rate else []
    rates = np.unique(np.concatenate([capacity * np.geomspace(0.01, 0.97, FRONTIER_POINTS), extra])) / 1000.0
    lp = load_point(m, rates)
    meets = (meets_objective(m, lp, slo.percentile, slo.ttft_ms, slo.itl_ms) if slo is not None
             else np.ones_like(rates, dtype=bool))
    if slo is not None and slo.ttft_ms is not None:  # the TTFT the plan shows has the slot wait
        meets = _meets_with_slot_wait(m, rates, meets, slo.percentile, slo.ttft_ms)
    frontier = [
        {
            "request_rate": float(r * 1000.0),
            "tokens_per_s_per_user": float(1000.0 / it) if it > 0 else None,
            "output_tokens_per_s_per_gpu": float(r * 1000.0 * mean_output / gpus),
            "decoding_sequences": float(n), "meets_objective": bool(ok),
        }
        for r, it, n, ok, st in zip(rates, lp.iteration_ms, lp.population, meets, lp.stable, strict=True)
        if st
    ]

    vs_rate = _latency_vs_rate(m, capacity, p.serving.goodput_request_rate)
    sv = p.serving
    op = None
    if sv.stable and sv.request_rate:
        # the plan's point on the same curve: its rate, and the mean iteration at that rate
        at = load_point(m, np.asarray(sv.request_rate / 1000.0))
        op = {"request_rate": sv.request_rate, "tokens_per_s_per_user": float(1000.0 / at.iteration_ms),
              "output_tokens_per_s_per_gpu": sv.request_rate * mean_output / gpus}
    return ServingSeries(
        gpus_per_replica=int(gpus), capacity_rate=capacity, goodput_rate=sv.goodput_request_rate,
        slo_percentile=slo.percentile if slo is not None else None,
        slo_ttft_ms=slo.ttft_ms if slo is not None else None,
        slo_itl_ms=slo.itl_ms if slo is not None else None, frontier=frontier, vs_rate=vs_rate,
        operating_point=op,
    )


__all__ = [
    "ChartData", "MemoryPart", "MemoryStack", "OperatingPoint", "RooflineChart", "ServingSeries",
    "chart_data", "memory_stack", "roofline_chart", "serving_series",
]
