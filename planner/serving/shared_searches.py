"""One replica model's goodput searches, sharing what they compute: a plan's goodput (with the wait for a
sequence slot), each objective's goodput alone, the relaxed objective's (planner.serving.operating_point's
goodput_binding) and the mean-TPOT goodput. The figures at a rate are the same whichever objective is tested
on them, so each rate's load point and TTFT and ITL distributions are computed once (goodput_search's
LoadPoints: the grid, every midpoint tree and every lone midpoint) and each search reads its verdicts from
them; a search asked twice is answered once. Each answer is the number its plain search gives.
"""

from __future__ import annotations

import numpy as np

from planner.core.deployment import Deployment
from planner.serving.distributions import NO_PERCENTILES, Percentiles, bisect_by_trees
from planner.serving.goodput_search import GoodputSearch, LoadPoints
from planner.serving.replica import ReplicaModel, Workload, replica_model
from planner.serving.slot_wait import (
    SlotChain,
    goodput_with_slot_wait,
    plan_slot_wait,
    ttft_with_slot_wait_percentiles,
)

TREE_DEPTH = 5  # bisection steps whose midpoints one load point over rates judges


def tpot_goodput_per_ms(m: ReplicaModel, tpot_ms: float | None, steps: int = 40,
                        points: LoadPoints | None = None) -> float:
    """The highest rate whose mean TPOT (the mean iteration, time_per_output_token) is within `tpot_ms`: the
    iteration D(N) / (1 - rho_w) grows with the rate, so a grid to capacity, then bisection in the cell
    (capacity where the bound holds throughout; 0 where even a trickle misses it), the midpoints of several
    steps judged at once (the same midpoints, each rate's figures its own: load_point elementwise). `points`:
    the model's shared load points (its grid is the goodput searches' grid)."""
    cap = float(m.capacity_per_ms())
    if tpot_ms is None:
        return cap
    if not cap > 0 or m.decode_steps_per_request <= 0:
        return cap if cap > 0 else 0.0
    rates = cap * np.concatenate([[1e-6], np.linspace(1.0 / 48, 1.0, 48) * (1.0 - 1e-9)])
    shared = points if points is not None and points.m is m else LoadPoints(m)
    ok = np.asarray(shared.point("grid", rates).iteration_ms) <= tpot_ms
    if not ok[0]:
        return 0.0
    if ok.all():
        return float(rates[-1])
    last = int(np.argmin(ok)) - 1
    # the bisection's midpoints TREE_DEPTH steps at a time, each rate's figures its own
    def within(lo: float, hi: float, depth: int, mids: list[float]) -> np.ndarray:
        point = shared.point(("tree", lo, hi, depth), np.array(mids), elementwise=True)
        return np.asarray(point.iteration_ms) <= tpot_ms

    lo, _ = bisect_by_trees(float(rates[last]), float(rates[last + 1]), steps, TREE_DEPTH, within)
    return lo


class SharedSearches:
    """The goodput searches of one replica model (each kept once asked): `goodput` is goodput_per_ms's
    answer, `with_slot_wait` goodput_with_slot_wait's, `tpot_goodput` tpot_goodput_per_ms's."""

    def __init__(self, m: ReplicaModel) -> None:
        self.m = m
        self.points = LoadPoints(m)
        self._chain: SlotChain | None = None
        self._answers: dict[tuple, float] = {}

    @classmethod
    def of(cls, d: Deployment, w: Workload, max_population: int | None = None) -> SharedSearches:
        """The searches of replica_model(d, w, max_population)."""
        return cls(replica_model(d, w, max_population))

    @property
    def chain(self) -> SlotChain:
        """The slot chain at the plan's running cap (planner.serving.slot_wait.plan_slot_wait's)."""
        if self._chain is None:
            self._chain = SlotChain(self.m, int(self.m.workload.max_running))
        return self._chain

    def goodput(self, percentile: int, ttft_ms: float | None, itl_ms: float | None) -> float:
        """goodput_per_ms(m, percentile, ttft_ms, itl_ms): GoodputSearch's steps on the shared figures."""
        key = ("goodput", percentile, ttft_ms, itl_ms)
        if key not in self._answers:
            self._answers[key] = GoodputSearch(self.m, percentile, ttft_ms, itl_ms, points=self.points,
                                               ahead=True).finish()
        return self._answers[key]

    def with_slot_wait(self, goodput_per_ms: float, percentile: int, ttft_ms: float | None) -> float:
        """goodput_with_slot_wait(m, goodput_per_ms, percentile, ttft_ms) on the shared figures."""
        key = ("slot wait", goodput_per_ms, percentile, ttft_ms)
        if key not in self._answers:
            self._answers[key] = goodput_with_slot_wait(self.m, goodput_per_ms, percentile, ttft_ms,
                                                        chain=self.chain, figures=self.points)
        return self._answers[key]

    def plan_goodput(self, percentile: int, ttft_ms: float | None, itl_ms: float | None) -> float:
        """The goodput a plan shows under TTFT and ITL bounds: TTFT with the slot wait (serving._point's)."""
        return self.with_slot_wait(self.goodput(percentile, ttft_ms, itl_ms), percentile, ttft_ms)

    def plan_ttft(self, request_rate_per_s: float) -> Percentiles:
        """The TTFT percentiles an open loop's plan shows at this rate (serving.serve_model_at_rate's: the
        fast model's with the slot wait; None where not stable), without its other figures."""
        rate_per_ms = request_rate_per_s / 1000.0  # as serve_model_at_rate takes it
        point = self.points.point(rate_per_ms, rate_per_ms)
        if not bool(point.stable):
            return NO_PERCENTILES
        fast = self.points.ttft_percentiles(rate_per_ms, rate_per_ms)
        probability, mean = plan_slot_wait(self.m, rate_per_ms, self.chain)
        return ttft_with_slot_wait_percentiles(self.m, point, fast, probability, mean,
                                               self.points.ttft_distribution(rate_per_ms, rate_per_ms))

    def tpot_goodput(self, tpot_ms: float | None) -> float:
        """tpot_goodput_per_ms(m, tpot_ms) on the shared figures."""
        key = ("tpot", tpot_ms)
        if key not in self._answers:
            self._answers[key] = tpot_goodput_per_ms(self.m, tpot_ms, points=self.points)
        return self._answers[key]


__all__ = ["SharedSearches", "tpot_goodput_per_ms"]
