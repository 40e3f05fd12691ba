"""A replica at an operating point: an open loop at a rate or a closed loop of clients (`serve_at_rate`,
`serve_at_concurrency`), the highest rate that meets a latency objective (goodput) and the capacity, through
the queue model (planner.serving.replica) and its latency distributions (planner.serving.distributions). A
closed loop (a concurrency c) runs at the rate whose mean number in the system, lambda E[E2E], is c."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from planner.core.deployment import Deployment
from planner.serving.distributions import (
    NO_PERCENTILES,
    QUANTILE_DEPTH,
    Percentiles,
    bisect_by_trees,
    itl_cdf,
    latency_percentiles,
    mean_itl_ms,
    mean_ttft_ms,
    ttft_cdf,
)

# sizing.py still imports these from here: re-exported until its next edit imports them from their home
from planner.serving.distributions import PERCENTILES as PERCENTILES
from planner.serving.distributions import itl_distribution as itl_distribution
from planner.serving.distributions import quantile as quantile
from planner.serving.queue_bands import QueueBands, prompt_class, queue_bands
from planner.serving.replica import LoadPoint, ReplicaModel, Workload, load_point, replica_model
from planner.serving.slot_wait import goodput_with_slot_wait, plan_slot_wait, with_slot_wait_percentiles


def rate_for_concurrency(m: ReplicaModel, concurrency: float, max_running=None) -> tuple[float, bool]:
    """Closed loop: the rate whose mean number in the system, lambda (TTFT + (O - 1) T), is the
    concurrency, and whether the replica holds it below capacity."""
    cap = float(m.capacity_per_ms(max_running))
    if not cap > 0:
        return 0.0, False

    seen = max(concurrency - 1.0, 0.0) / max(concurrency, 1.0)

    def in_system(rates):
        p = load_point(m, rates, max_running, seen)
        n = rates * (mean_ttft_ms(m, p) + m.decode_steps_per_request * p.iteration_ms)
        return np.where(np.isfinite(n) & p.stable, n, np.inf)

    rates = cap * np.concatenate([np.geomspace(1e-6, 0.9, 120), 1.0 - np.geomspace(0.1, 1e-6, 120)])
    counts = in_system(rates)
    above = np.nonzero(counts >= concurrency)[0]
    if len(above) == 0:
        return cap, False  # more clients than the replica holds below saturation: the queue grows
    if above[0] == 0:
        lo, hi = 0.0, float(rates[0])
    else:
        lo, hi = float(rates[above[0] - 1]), float(rates[above[0]])
    # 20 bisection steps (the grid cell is 1/120 of capacity: 2^-20 of it is plenty), the midpoints of
    # three steps judged in one call (in_system is elementwise): the same midpoints, the same answer
    lo, hi = bisect_by_trees(lo, hi, 20, QUANTILE_DEPTH,
                             lambda _lo, _hi, _depth, mids: in_system(np.array(mids)) < concurrency)
    return 0.5 * (lo + hi), True


def meets_objective(m: ReplicaModel, p: LoadPoint, percentile: int, ttft_ms: float | None,
                    itl_ms: float | None) -> np.ndarray:
    """Whether the percentile of TTFT and of ITL at each load point is within the objective."""
    prob = percentile / 100.0
    ok = np.asarray(p.stable, dtype=bool).copy()
    # a distribution is only evaluated where some point may still pass (the verdicts are the same)
    if ttft_ms is not None and ok.any():
        ok &= ttft_cdf(m, p, ttft_ms) >= prob
    if itl_ms is not None and ok.any():
        ok &= itl_cdf(m, p, itl_ms) >= prob
    return ok


def goodput_per_ms(m: ReplicaModel, percentile: int, ttft_ms: float | None, itl_ms: float | None,
                   max_running=None, grid: int = 48, refine: int = 10) -> float:
    """Highest rate that meets the objective at the percentile (0 when even a trickle does not).
    Latency grows with the rate: a grid of rates up to capacity at once, then bisection in the cell."""
    cap = float(m.capacity_per_ms(max_running))
    if not cap > 0:
        return 0.0
    rates = cap * np.concatenate([[1e-6], np.linspace(1.0 / grid, 1.0, grid) * (1.0 - 1e-9)])
    ok = meets_objective(m, load_point(m, rates, max_running), percentile, ttft_ms, itl_ms)
    if not ok[0]:
        return 0.0
    last = int(np.argmin(ok)) - 1 if not ok.all() else len(rates) - 1
    lo, hi = float(rates[last]), float(rates[min(last + 1, len(rates) - 1)])
    if last == len(rates) - 1:
        return lo
    for _ in range(refine):
        mid = 0.5 * (lo + hi)
        if bool(meets_objective(m, load_point(m, mid, max_running), percentile, ttft_ms, itl_ms)):
            lo = mid
        else:
            hi = mid
    return lo


def capacity_and_goodput(m: ReplicaModel, caps, percentile: int, ttft_ms: float | None,
                         itl_ms: float | None) -> tuple[np.ndarray, np.ndarray]:
    """Capacity and goodput (per ms) for each cap on running sequences. Latency at a rate does not depend
    on the cap (only stability does), so a cap's goodput is the uncapped one, limited by its capacity."""
    capacity = np.asarray(m.capacity_per_ms(np.asarray(caps, dtype=float)), dtype=float)
    best = goodput_per_ms(m, percentile, ttft_ms, itl_ms)
    return capacity, np.minimum(best, capacity * (1.0 - 1e-9))


@dataclass(frozen=True)
class Objective:
    """A latency objective at a percentile (either bound may be absent)."""

    ttft_ms: float | None
    itl_ms: float | None
    percentile: int = 90


@dataclass(frozen=True)
class ServingPoint:
    """One replica at an operating point: rates per second, latencies in ms, None where not stable."""

    mode: Literal["concurrency", "request_rate"]  # closed loop or open loop
    request_rate: float
    concurrency: float | None
    stable: bool
    max_request_rate: float
    goodput_request_rate: float | None
    prefill_share: float
    output_tokens_per_s: float
    total_tokens_per_s: float
    decoding_sequences: float
    max_running: int
    ttft_ms: Percentiles
    itl_ms: Percentiles
    e2e_ms: Percentiles
    slo: Objective | None
    # extensions: means beside the percentiles, the mean iteration (every decode step a request sees, on
    # average), decode steps per request, and a closed loop held at capacity by more clients than it runs
    ttft_mean_ms: float | None = None
    itl_mean_ms: float | None = None
    e2e_mean_ms: float | None = None
    mean_iteration_ms: float | None = None
    decode_steps_per_request: float = 0.0
    saturated: bool = False
    # a closed-loop benchmark's own per-request TPOT (planner.serving.benchmark_client.at_benchmark)
    tpot_ms: Percentiles | None = None
    tpot_mean_ms: float | None = None
    # an open loop's percentiles bracketed by the scheduler's simulation (planner.serving.queue_bands)
    queue_bands: QueueBands | None = None
    # an open loop's wait for a sequence slot (planner.serving.slot_wait, in ttft_ms and e2e_ms above):
    # P(an arrival waits), its mean given it does, and TTFT without it (the figure the bands bracket)
    slot_wait_probability: float | None = None
    slot_wait_mean_ms: float | None = None
    ttft_without_slot_wait_ms: Percentiles | None = None


def _point(
    m: ReplicaModel, mode: Literal["concurrency", "request_rate"], rate_per_ms: float,
    concurrency: float | None, stable: bool, slo: Objective | None, known_goodput_per_ms: float | None = None,
) -> ServingPoint:
    """`known_goodput_per_ms`: goodput_per_ms(m, slo...) where the caller has found it already."""
    seen = 1.0 if concurrency is None else max(concurrency - 1.0, 0.0) / max(concurrency, 1.0)
    p = load_point(m, rate_per_ms, seen=seen)
    # a closed loop with more clients than the replica runs below saturation is not unstable: its queue
    # is bounded by the clients, and it serves at capacity (the latencies grow with the clients)
    saturated = mode == "concurrency" and not stable and rate_per_ms > 0
    stable = stable and bool(p.stable)
    ttft, itl, e2e = latency_percentiles(m, p) if stable else (NO_PERCENTILES,) * 3
    fast_ttft, wait = ttft, (0.0, 0.0)
    if mode == "request_rate" and stable:  # an open loop waits for a sequence slot near its limit: once
        wait = plan_slot_wait(m, rate_per_ms)
        ttft, e2e = with_slot_wait_percentiles(m, p, ttft, e2e, *wait)
    means: tuple[float | None, ...] = (None, None, None, None)
    ttft_mean = float(mean_ttft_ms(m, p)) + wait[0] * wait[1] if stable else 0.0
    if stable:
        iteration = float(p.iteration_ms)
        means = (
            ttft_mean, float(mean_itl_ms(m, p)), ttft_mean + m.decode_steps_per_request * iteration,
            iteration,
        )
    if concurrency is None and stable:
        concurrency = float(rate_per_ms * (ttft_mean + m.decode_steps_per_request * p.iteration_ms))
    goodput = None
    if slo is not None and (slo.ttft_ms is not None or slo.itl_ms is not None):
        if known_goodput_per_ms is None:
            known_goodput_per_ms = goodput_with_slot_wait(  # the TTFT the plan shows includes the wait
                m, goodput_per_ms(m, slo.percentile, slo.ttft_ms, slo.itl_ms), slo.percentile, slo.ttft_ms)
        goodput = float(known_goodput_per_ms) * 1000.0
    rate_s = rate_per_ms * 1000.0
    bands = None
    if mode == "request_rate" and stable:
        w = m.workload
        fast = (("ttft", fast_ttft), ("itl", itl))  # the figures the bands were fitted to (no slot wait)
        bands = queue_bands(
            {f"{name}_p{q}": v.at(q) for name, v in fast for q in (50, 90, 99)},
            rate_per_ms / float(m.capacity_per_ms()), w.arrival_cv,
            w.prompt_len_cv > 0 or w.output_len_cv > 0, prompt_class(w.prompt_len, w.max_num_batched_tokens),
        )
        bands = _with_slot_wait_top(bands, ttft) if wait[0] > 0 else bands
    return ServingPoint(
        mode=mode, request_rate=rate_s, concurrency=concurrency, stable=stable,
        max_request_rate=float(m.capacity_per_ms()) * 1000.0, goodput_request_rate=goodput,
        prefill_share=float(p.prefill_share), output_tokens_per_s=rate_s * float(np.mean(m.output_tokens)),
        total_tokens_per_s=rate_s * float(np.mean(m.output_tokens) + np.mean(m.prompt_tokens)),
        decoding_sequences=float(p.population), max_running=m.workload.max_running,
        ttft_ms=ttft, itl_ms=itl, e2e_ms=e2e, slo=slo, ttft_mean_ms=means[0], itl_mean_ms=means[1],
        e2e_mean_ms=means[2], mean_iteration_ms=means[3], decode_steps_per_request=m.decode_steps_per_request,
        saturated=saturated, queue_bands=bands,
        slot_wait_probability=wait[0] if mode == "request_rate" and stable else None,
        slot_wait_mean_ms=wait[1] if mode == "request_rate" and stable and math.isfinite(wait[1]) else None,
        ttft_without_slot_wait_ms=fast_ttft if mode == "request_rate" and stable else None)


def _with_slot_wait_top(bands: QueueBands, ttft: Percentiles) -> QueueBands:
    """The bands around the fast TTFT, each top raised to the TTFT with the slot wait where that is higher:
    the simulation queues for slots too, and a range whose top sat under the plan's own figure would confirm
    what the figure misses (sizing's confirmation holds both: planner.serving.confirmed_rate)."""
    raised = {}
    for q in (50, 90, 99):
        band, value = getattr(bands, f"ttft_p{q}_ms"), ttft.at(q)
        if band is not None:
            raised[f"ttft_p{q}_ms"] = band.model_copy(
                update={"high": max(band.high, value if value is not None else math.inf)})
    return bands.model_copy(update=raised)


def serve_at_rate(d: Deployment, w: Workload, request_rate_per_s: float, slo: Objective | None = None,
                  max_population: int | None = None) -> ServingPoint:
    """Open loop: requests arrive at `request_rate_per_s` on this replica."""
    return serve_model_at_rate(replica_model(d, w, max_population), request_rate_per_s, slo)


def serve_model_at_rate(m: ReplicaModel, request_rate_per_s: float, slo: Objective | None = None,
                        known_goodput_per_ms: float | None = None) -> ServingPoint:
    """serve_at_rate on a replica model the caller has built (with its goodput_per_ms under `slo`, when
    found already: the plan's goodput is searched once)."""
    return _point(m, "request_rate", request_rate_per_s / 1000.0, None, True, slo, known_goodput_per_ms)


def serve_at_concurrency(d: Deployment, w: Workload, concurrency: float, slo: Objective | None = None,
                         max_population: int | None = None) -> ServingPoint:
    """Closed loop: `concurrency` clients, each sending its next request when the last one ends."""
    m = replica_model(d, w, max_population)
    rate, held = rate_for_concurrency(m, concurrency)
    return _point(m, "concurrency", rate, float(concurrency), held, slo)
