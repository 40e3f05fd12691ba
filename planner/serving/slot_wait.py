"""An open loop's wait for a sequence slot, which the fast queue model (planner.serving.replica) leaves out.

A replica runs at most `slots` sequences at once (max_num_seqs, or what the KV budget admits). Each request
holds a slot from its first prompt chunk to its last token: its own prefill plus O - 1 iterations of
D(k) / (1 - rho_w) at k running sequences, so k requests finish at mu(k) = k / hold(k). The requests in the
replica are a birth-death chain over k = 0..slots with arrivals at lambda; the iteration lengthens with k,
so the population swings far wider than a Poisson count of the same mean and reaches the limit before its
mean does. Past the limit arrivals queue at the full chain's rate mu(slots): P(wait) = P(k >= slots), the
wait exponential of rate mu(slots) - lambda, scaled by Allen-Cunneen's (ca^2 + cs^2) / 2 for clumped
arrivals and near-fixed holds.

This is the chain of the reverted commit 9bfdc98 (near a KV-limited capacity it brought TTFT p99 from 10-80x
low to within the scheduler simulation: qwen3-30b-a3b on H100 at 90% of capacity, 107 ms planned, 3,422
simulated, 3,895 with the chain). Here it is not part of every load point: the sizing search judges a
replica's objective with it (planner.serving.confirmed_rate), at the few rates it checks.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from planner.serving.distributions import (
    PERCENTILES,
    Percentiles,
    bisect_by_trees,
    e2e_distribution,
    quantile,
    ttft_distribution,
)
from planner.serving.replica import LoadPoint, ReplicaModel, load_point, mean_over_lengths

BLOCKS = 64  # the chain in at most this many blocks of states sharing one departure rate


class SlotChain:
    """The chain of one replica model at `slots` (its rate-free figures computed once); `wait(rates)` gives
    (P(an arrival waits for a slot), that wait's mean in ms given it happens) at each rate."""

    def __init__(self, m: ReplicaModel, slots: int) -> None:
        self.m, self.slots = m, slots
        self.none = slots < 1 or m.decode_steps_per_request <= 0
        if self.none:
            return
        # a request's own prefill at the full replica (its chunks beside `slots` decodes), a bound on it below
        chunk = max(m.workload.max_num_batched_tokens - slots, 1)
        self.step_full = float(np.interp(slots, m.population, m.decode_ms))
        self.own = float(mean_over_lengths(np.ceil(m.computed_tokens / chunk) * self.step_full
                                           + m.prefill_work_ms))
        width = max(slots // BLOCKS, 1)
        k = np.arange(width, slots + 1, width, dtype=float)
        k[-1] = slots
        widths = np.empty_like(k)  # np.diff of [0, k...]: k[0] - 0 is k[0]; the rest as diff subtracts them
        widths[0], widths[1:] = k[0], k[1:] - k[:-1]
        self.k, self.widths = k, widths
        self.step_k = np.interp(k, m.population, m.decode_ms)
        steps = max(m.decode_steps_per_request, 1.0)  # float(np.mean(output_tokens - 1)), kept by the model
        # a fixed output length's variance is 0 (np.var of one finite point)
        self.hold_cv2 = (float(np.var(m.output_tokens)) if len(m.output_tokens) > 1 else 0.0) / steps ** 2

    def wait(self, rate_per_ms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        lam_all = np.atleast_1d(np.asarray(rate_per_ms, dtype=float))
        out_p, out_mean = np.zeros(len(lam_all)), np.zeros(len(lam_all))
        if self.none:
            return out_p, out_mean
        m, slots = self.m, self.slots
        share_all = np.minimum(np.maximum(lam_all * m.mean_prefill_work_ms, 0.0), 1.0 - 1e-9)  # np.clip's
        # Where the full replica drains twice as fast as requests come, the chain's mode is below slots / 2
        # (the hold lengthens with k) and P(k >= slots) under (1/2)^(slots / 2): such rates skip the chain.
        full_hold = self.own + m.decode_steps_per_request * self.step_full / (1.0 - share_all)
        near = ~((slots >= 32) & (lam_all * full_hold < 0.5 * slots))
        if not near.any():
            return out_p, out_mean
        every = bool(near.all())  # then no selection: the same figures, each rate in place
        lam, share = (lam_all, share_all) if every else (lam_all[near], share_all[near])
        step = self.step_k[None, :] / (1.0 - share[:, None])
        mu = self.k[None, :] / (self.own + m.decode_steps_per_request * step)
        widths = self.widths
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            log_w = np.cumsum(widths * (np.log(np.maximum(lam, 1e-300))[:, None] - np.log(mu)), axis=-1)
            top = np.maximum(log_w.max(axis=-1, keepdims=True), 0.0)  # w(0) = 1 is in the sum too
            w = np.exp(log_w - top)
            ratio = lam / mu[:, -1]
            tail = np.where(ratio < 1.0, w[:, -1] / (1.0 - ratio), np.inf)
            total = np.exp(-top[:, 0]) + (widths[:-1] * w[:, :-1]).sum(axis=-1) + tail
            probability = np.where(np.isfinite(tail), tail / total, 1.0)
            if not np.isfinite(probability).all():  # np.nan_to_num returns the finite ones as they are
                probability = np.nan_to_num(probability, nan=0.0)
            mean = np.where(ratio < 1.0, 1.0 / (mu[:, -1] - lam), np.inf) * (
                m.workload.arrival_cv ** 2 + self.hold_cv2) / 2.0
        if every:
            waited = np.where(lam > 0, probability, 0.0)
            return waited, np.where(waited > 0, mean, 0.0)
        out_p[near] = np.where(lam > 0, probability, 0.0)
        out_mean[near] = np.where(out_p[near] > 0, mean, 0.0)
        return out_p, out_mean


def slot_wait(m: ReplicaModel, rate_per_ms: np.ndarray, slots: int) -> tuple[np.ndarray, np.ndarray]:
    """(P(an arrival waits for a slot), that wait's mean in ms given it happens), at each rate."""
    return SlotChain(m, slots).wait(rate_per_ms)


SLOT_POINTS = 8  # equal-mass points of the exponential slot wait
# a wait this unlikely moves no percentile a plan shows (p99 needs 1e-2) and its mean by under a nanosecond
# per second of wait: the figures skip it (the chain's tail gives probabilities down to 1e-90)
NEGLIGIBLE_WAIT = 1e-9


def wait_offsets_ms(mean_ms: float) -> np.ndarray:
    """The slot wait's SLOT_POINTS equal-mass points (ms) of an exponential wait of mean `mean_ms`."""
    u = (np.arange(SLOT_POINTS) + 0.5) / SLOT_POINTS
    return -np.log1p(-u) * mean_ms


def with_slot_wait(cdf: Callable[[Any], np.ndarray], probability: float, mean_ms: float,
                   scale: float = 1.0) -> Callable[[Any], np.ndarray]:
    """t -> P(scale x TTFT + slot wait <= t), from TTFT's `cdf` and the wait (probability, mean given it
    happens): no wait with 1 - P, else the exponential wait at its equal-mass points, the mixture
    planner.serving.confirmed_rate's check evaluates at the bound. `scale`: the simulated range's high ratio
    (the band scales the fast figure), 1 for the fast figure itself."""
    if not probability > NEGLIGIBLE_WAIT:
        return cdf if scale == 1.0 else (lambda t: cdf(np.asarray(t, dtype=float) / scale))
    if not math.isfinite(mean_ms):  # an unbounded wait: those who wait never start
        return lambda t: (1.0 - probability) * cdf(np.asarray(t, dtype=float) / scale)
    offsets = wait_offsets_ms(mean_ms)

    def mixed(t_ms: Any) -> np.ndarray:
        t = np.asarray(t_ms, dtype=float)
        shifted = cdf((t[..., None] - offsets) / scale)
        return (1.0 - probability) * cdf(t / scale) + probability * shifted.mean(axis=-1)
    return mixed


def _waited_ttft_ms(m: ReplicaModel, p: LoadPoint, ttft: Percentiles, probability: float, mean_ms: float,
                    cdf: Callable | None) -> tuple[np.ndarray, np.ndarray, float]:
    """TTFT's PERCENTILES with a slot wait that some request has (NaN where out of reach), which of them are
    within reach, and the quantile search's top (with_slot_wait_percentiles' figures)."""
    q = np.array(PERCENTILES) / 100.0
    reach = q < 1.0 - probability if not math.isfinite(mean_ms) else np.ones(len(q), dtype=bool)
    shown = np.full(len(q), np.nan)
    if not reach.any():
        return shown, reach, 0.0
    # a power of two: the same search grid for figures equal to rounding (the plan's and its chart's)
    top = float(ttft.p99 or 0.0) + (mean_ms if math.isfinite(mean_ms) else 0.0)
    hint = 2.0 ** math.ceil(math.log2(max(top, 1e-3)))
    cdf = cdf if cdf is not None else ttft_distribution(m, p)
    shown[reach] = quantile(with_slot_wait(cdf, probability, mean_ms), q[reach], hint)
    return shown, reach, hint


def _percentiles_of(values: np.ndarray) -> Percentiles:
    return Percentiles(*(float(v) if np.isfinite(v) else None for v in values))


def ttft_with_slot_wait_percentiles(m: ReplicaModel, p: LoadPoint, ttft: Percentiles, probability: float,
                                    mean_ms: float, cdf: Callable | None = None) -> Percentiles:
    """with_slot_wait_percentiles' TTFT alone (`cdf`: ttft_distribution(m, p), when the caller keeps it)."""
    if not probability > NEGLIGIBLE_WAIT:
        return ttft
    return _percentiles_of(_waited_ttft_ms(m, p, ttft, probability, mean_ms, cdf)[0])


def with_slot_wait_percentiles(m: ReplicaModel, p: LoadPoint, ttft: Percentiles, e2e: Percentiles,
                               probability: float, mean_ms: float) -> tuple[Percentiles, Percentiles]:
    """TTFT and E2E percentiles at a scalar load point with the wait for a sequence slot added (the plan's:
    with_slot_wait's mixture, the one sizing judges options with); `ttft` and `e2e` without it (returned as
    they are where no request waits). A percentile the wait puts out of reach (an unbounded wait's mass
    beyond it) is None."""
    if not probability > NEGLIGIBLE_WAIT:
        return ttft, e2e
    shown, reach, hint = _waited_ttft_ms(m, p, ttft, probability, mean_ms, None)
    if not reach.any():
        return Percentiles(None, None, None), Percentiles(None, None, None)
    if np.ptp(m.output_tokens) == 0:  # fixed output length: E2E is TTFT shifted by the decode
        e = shown + float((m.output_tokens[0] - 1.0) * p.iteration_ms)
    else:
        e = np.full(len(shown), np.nan)
        shift = float(np.max(m.output_tokens) * p.iteration_ms)
        e2e_cdf = with_slot_wait(e2e_distribution(m, p), probability, mean_ms)
        e[reach] = quantile(e2e_cdf, np.array(PERCENTILES)[reach] / 100.0, hint + shift)
    return _percentiles_of(shown), _percentiles_of(e)


class RateFigures(Protocol):
    """A replica model's load points and TTFT distributions kept by rate (planner.serving.goodput_search's
    LoadPoints: each the figure the plain call gives)."""

    def point(self, key: object, rate_per_ms: float) -> LoadPoint: ...

    def ttft_distribution(self, key: object, rate_per_ms: float) -> Callable: ...


def plan_slot_wait(m: ReplicaModel, rate_per_ms: float,
                   chain: SlotChain | None = None) -> tuple[float, float]:
    """An open loop's slot wait at its rate, on a replica running at most its workload's `max_running`
    sequences (the plan's running cap, the cap sizing judges): (P(wait), its mean in ms given it happens;
    0 where none waits; inf where the full replica cannot drain the arrivals). `chain`: SlotChain(m,
    max_running), when the caller keeps it."""
    chain = chain if chain is not None else SlotChain(m, int(m.workload.max_running))
    probability, mean = chain.wait(np.array([rate_per_ms]))
    p = float(probability[0])
    return p, float(mean[0]) if p > 0 else 0.0


def within_ttft_with_slot_wait(m: ReplicaModel, rate_per_ms: float, percentile: int, ttft_ms: float,
                               chain: SlotChain | None = None, figures: RateFigures | None = None) -> bool:
    """Whether the plan's TTFT with the slot wait at `rate_per_ms` meets `ttft_ms` at the percentile.
    `chain`, `figures`: the model's slot chain and figures by rate, when the caller keeps them."""
    p = load_point(m, rate_per_ms) if figures is None else figures.point(rate_per_ms, rate_per_ms)
    if not bool(p.stable):
        return False
    probability, mean = plan_slot_wait(m, rate_per_ms, chain)
    ttft = ttft_distribution(m, p) if figures is None else figures.ttft_distribution(rate_per_ms, rate_per_ms)
    cdf = with_slot_wait(ttft, probability, mean)
    return float(cdf(ttft_ms)) >= percentile / 100.0


SLOT_TREE_DEPTH = 5  # bisection steps of goodput_with_slot_wait whose midpoints one call judges


def within_ttft_over_rates(m: ReplicaModel, rates_per_ms: np.ndarray, percentile: int, ttft_ms: float,
                           chain: SlotChain) -> np.ndarray:
    """within_ttft_with_slot_wait at each rate, in one call: the load points elementwise, the chain's wait
    and with_slot_wait's mixture at each rate (its three cases: no wait, an unbounded one, the equal-mass
    points), each rate's sums as its lone call's, so each verdict is the lone call's."""
    rates = np.asarray(rates_per_ms, dtype=float)
    p = load_point(m, rates, elementwise=True)
    probability, mean = chain.wait(rates)
    cdf = ttft_distribution(m, p)
    t = np.full(len(rates), float(ttft_ms))
    with np.errstate(invalid="ignore", over="ignore"):
        fast = cdf(t)
        waits = probability > NEGLIGIBLE_WAIT
        bounded = waits & np.isfinite(mean)
        value = np.where(waits & ~bounded, (1.0 - probability) * fast, fast)
        if bounded.any():
            u = (np.arange(SLOT_POINTS) + 0.5) / SLOT_POINTS
            offsets = -np.log1p(-u)[None, :] * np.where(bounded, mean, 0.0)[:, None]  # wait_offsets_ms's
            shifted = np.stack([cdf(t - offsets[:, j]) for j in range(SLOT_POINTS)], axis=-1)
            value = np.where(bounded, (1.0 - probability) * fast + probability * shifted.mean(axis=-1), value)
    return np.asarray(p.stable, dtype=bool) & (value >= percentile / 100.0)


def goodput_with_slot_wait(m: ReplicaModel, goodput_per_ms: float, percentile: int,
                           ttft_ms: float | None, steps: int = 24, chain: SlotChain | None = None,
                           figures: RateFigures | None = None) -> float:
    """The fast goodput lowered, where the wait for a sequence slot makes TTFT miss its bound there, to the
    highest rate whose TTFT with the wait meets it (bisection below the goodput: the wait grows with the
    rate; the midpoints of SLOT_TREE_DEPTH steps judged in one call, each as alone). Unchanged without a
    TTFT bound or where no request waits at the goodput. `chain`, `figures`: as
    within_ttft_with_slot_wait's."""
    if ttft_ms is None or not goodput_per_ms > 0:
        return goodput_per_ms
    chain = chain if chain is not None else SlotChain(m, int(m.workload.max_running))
    if plan_slot_wait(m, goodput_per_ms, chain)[0] <= NEGLIGIBLE_WAIT or within_ttft_with_slot_wait(
            m, goodput_per_ms, percentile, ttft_ms, chain, figures):
        return goodput_per_ms
    slots = chain
    lo, _ = bisect_by_trees(0.0, goodput_per_ms, steps, SLOT_TREE_DEPTH, lambda _lo, _hi, _depth, mids:
                            within_ttft_over_rates(m, np.array(mids), percentile, ttft_ms, slots))
    return lo
