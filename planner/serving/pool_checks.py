"""A disaggregated fleet's pools held to what sizing holds an aggregated replica to (planner.serving.
confirmed_rate, issue 31): the objective met in the fast model with the wait for a sequence slot, and across
the scheduler simulation's range (queue bands' top), within a headroom; each pool's utilization shown.

  * Decode pool: a decode worker runs at most its confirmed rate under the ITL objective (the band's top of
    p_q ITL within the bound, its load within the headroom) at the KV cache's max batch. Its requests hold a
    sequence slot from their first token to their last: near that limit an arriving KV cache waits for a
    slot (planner.serving.slot_wait), and that wait is part of TTFT.
  * The fleet's TTFT at the percentile q: the prefill slot's TTFT (its queue and the prompt) plus the decode
    worker's slot wait, their sum's q-quantile (planner.serving.slot_wait.with_slot_wait), plus the KV
    transfer and the decode worker's first step (its p_q ITL). Its simulated range's top scales the prefill
    TTFT by the TTFT band's high ratio at the prefill slot's load and the first step by the ITL band's at the
    decode worker's load (sums of quantiles: conservative).
  * Prefill workers: the fewest whose slots are within the headroom and whose fleet TTFT meets the objective
    both in the fast model and at the range's top. Where no count can (the decode slot wait alone breaks
    it), the decode pool gets more workers (at most MAX_EXTRA_DECODE) rather than report a miss.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from planner.serving.confirmed_rate import band_high_ratio, utilization_limit
from planner.serving.distributions import quantile
from planner.serving.goodput_search import LoadPoints, itl_percentiles
from planner.serving.queue_bands import arrival_class
from planner.serving.replica import LoadPoint, ReplicaModel, load_point
from planner.serving.slot_wait import SlotChain, with_slot_wait

MAX_EXTRA_DECODE = 8  # decode workers added, one at a time, where their slot wait alone misses TTFT


@dataclass(frozen=True)
class DecodeSide:
    """The decode pool for the traffic: its workers, the load point each runs at and its figures there."""

    workers: int
    point: LoadPoint
    itl_ms: float | None  # p_q ITL, the fast model
    itl_high_ms: float | None  # the simulated range's top (None: no simulated class)
    utilization: float  # a worker's rate over its capacity at the KV cache's max batch
    wait_probability: float  # P(an arriving KV cache waits for a sequence slot)
    wait_mean_ms: float  # that wait's mean, given it happens


def fewest_decode_workers(goodput_per_s: float, requests_per_s: float) -> int:
    """decode_side's workers without `extra` (a pairing's floor prices them before its figures are needed)."""
    return max(1, math.ceil(requests_per_s / goodput_per_s * (1 - 1e-12)))


def decode_side(m: ReplicaModel, max_running: int, goodput_per_s: float, requests_per_s: float,
                percentile: int, extra: int = 0) -> DecodeSide:
    """The fewest decode workers at `goodput_per_s` each (plus `extra`) and their figures."""
    workers = fewest_decode_workers(goodput_per_s, requests_per_s) + extra
    rate_per_ms = requests_per_s / workers / 1000.0
    point = load_point(m, rate_per_ms)
    itl = itl_percentiles(m, point).at(percentile)
    capacity = float(m.capacity_per_ms(float(max_running)))
    load = rate_per_ms / capacity if capacity > 0 else math.inf
    ratio = float(band_high_ratio(m, f"itl_p{percentile}", np.array([load]))[0])
    banded = arrival_class(m.workload.arrival_cv) is not None
    high = itl * ratio if itl is not None and banded and math.isfinite(ratio) else None
    probability, mean = SlotChain(m, max_running).wait(np.array([rate_per_ms]))
    return DecodeSide(workers, point, itl, high, load, float(probability[0]),
                      float(mean[0]) if probability[0] > 0 else 0.0)


@dataclass(frozen=True)
class PrefillSide:
    """The prefill pool for the traffic and the fleet's TTFT at the percentile it gives."""

    workers: int
    point: LoadPoint  # one slot's
    utilization: float  # a slot's rate over its capacity
    ttft_ms: float  # the fleet's: prefill + slot wait (their sum's quantile) + KV transfer + first step
    ttft_high_ms: float | None  # the simulated range's top of it (None: no simulated class)


class PrefillJudge:
    """Whether a prefill slot's rate keeps the fleet's TTFT within the objective (fast and at the range's top)
    and the slot within the headroom, given the decode side and the KV transfer."""

    def __init__(self, m: ReplicaModel, points: LoadPoints, decode: DecodeSide, transfer_ms: float,
                 ttft_slo_ms: float, percentile: int, max_utilization: float | None) -> None:
        self.m, self.points, self.decode, self.percentile = m, points, decode, percentile
        self.capacity = float(m.capacity_per_ms())
        self.limit = utilization_limit(m, max_utilization)
        self.banded = arrival_class(m.workload.arrival_cv) is not None
        itl = decode.itl_ms if decode.itl_ms is not None else math.inf
        high = decode.itl_high_ms if decode.itl_high_ms is not None else itl
        self.after_fast_ms = transfer_ms + itl  # what follows the prefill and the slot wait
        self.after_high_ms = transfer_ms + high
        self.ttft_slo_ms = ttft_slo_ms

    def _distributions(self, rate_per_ms: float):
        """(fast cdf, simulated top's cdf or None, load) of prefill + slot wait at a slot's rate."""
        d = self.decode
        cdf = self.points.ttft_distribution(rate_per_ms, rate_per_ms)
        load = rate_per_ms / self.capacity
        fast = with_slot_wait(cdf, d.wait_probability, d.wait_mean_ms)
        if not self.banded:
            return fast, None, load
        ratio = float(band_high_ratio(self.m, f"ttft_p{self.percentile}", np.array([load]))[0])
        if not math.isfinite(ratio):
            return fast, None, load
        return fast, with_slot_wait(cdf, d.wait_probability, d.wait_mean_ms, ratio), load

    def holds(self, rate_per_ms: float) -> bool:
        if not rate_per_ms / self.capacity <= self.limit * (1.0 + 1e-12):
            return False
        if not bool(self.points.point(rate_per_ms, rate_per_ms).stable):
            return False
        q = self.percentile / 100.0
        if self.decode.wait_probability <= 0:  # the fast figure scaled by the band's ratio: one cdf call
            cdf = self.points.ttft_distribution(rate_per_ms, rate_per_ms)
            if not self.banded:
                return float(cdf(self.ttft_slo_ms - self.after_fast_ms)) >= q
            ratio = float(band_high_ratio(self.m, f"ttft_p{self.percentile}",
                                          np.array([rate_per_ms / self.capacity]))[0])
            # the range's top (ratio >= 1, a later first step) meets it only if the fast figure does
            return math.isfinite(ratio) and float(cdf((self.ttft_slo_ms - self.after_high_ms) / ratio)) >= q
        fast, high, _ = self._distributions(rate_per_ms)
        if float(fast(self.ttft_slo_ms - self.after_fast_ms)) < q:
            return False
        top = self.ttft_slo_ms - self.after_high_ms
        return not self.banded or (high is not None and float(high(top)) >= q)

    def side(self, workers: int, rate_per_ms: float) -> PrefillSide:
        """The fleet's figures with `workers` prefill workers, each slot at `rate_per_ms`."""
        q = self.percentile / 100.0
        point = self.points.point(rate_per_ms, rate_per_ms)
        load = rate_per_ms / self.capacity
        waits = self.decode.wait_probability > 0
        if waits:
            fast, high, _ = self._distributions(rate_per_ms)
            hint = float(np.max(self.m.prefill_work_ms) + point.iteration_ms + point.wait_mean_ms + 1.0)
            prefill = float(quantile(fast, [q], max(hint + self.decode.wait_mean_ms, 1e-3))[0])
        else:  # the prefill's own percentile, as the shared load points give it
            prefill = self.points.ttft_percentiles(rate_per_ms, rate_per_ms).at(self.percentile) or math.inf
        top = None
        if self.banded:
            ratio = float(band_high_ratio(self.m, f"ttft_p{self.percentile}", np.array([load]))[0])
            if waits and high is not None:
                top = float(quantile(high, [q], max(prefill * ratio, 1e-3))[0]) + self.after_high_ms
            elif not waits and math.isfinite(ratio):  # a scaled figure's quantile is the scaled quantile
                top = prefill * ratio + self.after_high_ms
        return PrefillSide(workers, point, load, prefill + self.after_fast_ms, top)


def fewest_prefill_workers(judge: PrefillJudge, slots: int, requests_per_s: float, fewest: int) -> int | None:
    """The fewest prefill workers (at least `fewest`: the fast model's count without the slot wait, a floor)
    whose slots all hold (PrefillJudge.holds); None where even a trickle per slot fails."""
    def rate(workers: int) -> float:
        return requests_per_s / (workers * slots) / 1000.0

    if judge.capacity > 0:  # the headroom alone needs this many: a second floor
        fewest = max(fewest, math.ceil(requests_per_s / (slots * judge.limit * judge.capacity * 1000.0)
                                       * (1 - 1e-12)))
    if judge.holds(rate(fewest)):
        return fewest
    if not judge.holds(judge.capacity * 1e-6):
        return None
    failing, step = fewest, max(1, fewest // 8)
    while not judge.holds(rate(failing + step)):  # growing steps, then bisection: few judgements
        failing += step
        step *= 2
    passing = failing + step
    while passing - failing > 1:
        mid = (failing + passing) // 2
        if judge.holds(rate(mid)):
            passing = mid
        else:
            failing = mid
    return passing
