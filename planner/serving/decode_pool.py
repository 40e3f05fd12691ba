"""The disaggregated decode pool's walk (planner.serving.disaggregation): decode workers built cheapest cost
floor first until the KEEP_PER_POOL cheapest found cost less than any floor left, the tighter floor
(planner.serving.decode_bound) computed only where the listed one leaves the walk's order open
(planner.serving.floor_order), each goodput searched only as far as the pool's ranking needs."""

from __future__ import annotations

import bisect
import copy
import functools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from planner.core.deployment import Deployment
from planner.hardware.parallelism import sharding
from planner.physics.memory import MemoryPlan
from planner.serving.disaggregated_workers import (
    ConfirmedDecodeRate,
    TrafficShape,
    _decode_model,
    _decode_worker_at,
)
from planner.serving.fleet_option import Priced
from planner.serving.floor_order import FloorOrder
from planner.serving.replica import PrefillWork
from planner.serving.sizing_request import LayoutCandidate

KEEP_PER_POOL = 8  # best candidates per pool that are paired (cost per unit of work)

# (cost floor, candidate, deployment, $/GPU-hour, memory plan at the context, the layout's prefill work)
DecodeCandidate = tuple[float, LayoutCandidate, Deployment, float, MemoryPlan, PrefillWork | None]


@dataclass
class _DecodeCandidate:
    """A decode candidate whose goodput is searched only as far as the pool's ranking needs: its cost per
    request/s lies in [cost_lo, cost_hi] (equal once the goodput is exact)."""

    goodput: ConfirmedDecodeRate
    d: Deployment
    gpu_key: str
    price: float
    max_batch: int
    index: int  # in the pool's list: the kept workers go back to it
    exact: float | None = None  # the finished goodput, known ahead of the walk's own finishing
    worker: Priced | None = field(default=None, repr=False)
    built: bool = False

    def cost(self, goodput_per_ms: float) -> float:
        return self.price * sharding(self.d).gpus_per_replica / (goodput_per_ms * 1000.0)

    @property
    def cost_lo(self) -> float:
        return self.cost(self.goodput.hi)

    @property
    def cost_hi(self) -> float:
        return self.cost(self.goodput.lo)

    def peek(self) -> float:
        """The finished goodput, the walk's bracket left as it is (the walk's decisions read the bracket)."""
        if self.exact is None:
            self.exact = copy.copy(self.goodput).finish()
        return self.exact

    def finish(self) -> float:
        """ConfirmedDecodeRate.finish (its refinement, once: a peeked figure is the same)."""
        if self.exact is None:
            self.exact = self.goodput.finish()
        self.goodput.lo = self.goodput.hi = self.exact
        return self.exact

    def priced(self, percentile: int) -> Priced | None:
        """The decode worker at the finished goodput and its $/hour per request/s (None: no worker)."""
        if not self.built:
            self.built = True
            dw = _decode_worker_at(self.d, self.max_batch, self.goodput.m, self.peek(), percentile)
            self.worker = None if dw is None else (self.price * dw.gpus / dw.goodput_per_s, dw, self.gpu_key,
                                                   self.price)
        return self.worker


def walk_decode_pool(candidates: list[DecodeCandidate], context_len: int, shape: TrafficShape,
                     itl_slo_ms: float, percentile: int, max_utilization: float | None = None,
                     walk_floors: Sequence[Callable[[], float]] | None = None,
                     tpot_slo_ms: float | None = None) -> list[Priced]:
    """decode_worker for each candidate, cheapest floor first, until the KEEP_PER_POOL cheapest found cost
    less than any floor left; those that can be among the KEEP_PER_POOL cheapest, in the list's order (a
    caller that ranks them by cost keeps it among equal costs). A goodput is searched only as far as the
    comparisons need (its exact value where a comparison is close). `walk_floors`: each candidate's tighter
    floor on demand (at least its listed one, infinite where no rate passes), which orders the walk instead:
    computed only where the listed floor leaves the order open (planner.serving.floor_order)."""
    walk = DecodePoolWalk(candidates, context_len, shape, itl_slo_ms, percentile, max_utilization,
                          walk_floors, tpot_slo_ms)
    walk.advance(math.inf)
    return walk.kept()


def _kth(costs: Iterable[float]) -> float:
    return sorted(costs)[KEEP_PER_POOL - 1]


class DecodePoolWalk:
    """walk_decode_pool's walk, resumable: `advance(c)` walks until every candidate left has a floor above c
    (or the walk ends), so that a caller needing only the workers that cost at most c builds no more;
    `cheapest_upto(c)` names those of the pool's KEEP_PER_POOL cheapest (as ranked by cost, then the list's
    order, among the kept ones) that cost at most c. The walk's decisions are walk_decode_pool's, in its
    order: a paused walk resumed to its end keeps what the whole walk keeps."""

    def __init__(self, candidates: list[DecodeCandidate], context_len: int, shape: TrafficShape,
                 itl_slo_ms: float, percentile: int, max_utilization: float | None = None,
                 walk_floors: Sequence[Callable[[], float]] | None = None,
                 tpot_slo_ms: float | None = None) -> None:
        self.candidates, self.context_len, self.shape = candidates, context_len, shape
        self.objective = (percentile, itl_slo_ms, max_utilization, tpot_slo_ms)
        listed = [functools.partial(float, x[0]) for x in candidates] if walk_floors is None else walk_floors
        self.order = FloorOrder([(x[0], listed[i], i) for i, x in enumerate(candidates)])
        self.visited: list[_DecodeCandidate] = []
        self.ended = False
        self._kept_workers: list[tuple[int, Priced]] | None = None

    def advance(self, usd_per_request_s: float) -> None:
        """Walk on until every candidate left has a floor above `usd_per_request_s` or the walk ends."""
        visited, order = self.visited, self.order
        while order.left and not self.ended:
            if usd_per_request_s < math.inf and order.floors_above(usd_per_request_s):
                return
            floor, index = order.pop()
            if floor == math.inf:
                break  # no rate passes on this or any candidate left: none gives a worker
            if len(visited) >= KEEP_PER_POOL and self._stops_at(floor):
                break
            self._visit(index)
        self.ended = True

    def _stops_at(self, floor: float) -> bool:
        """Whether the KEEP_PER_POOL cheapest visited cost less than `floor` (goodputs finished only where
        the brackets leave it open)."""
        visited = self.visited
        if floor > _kth(v.cost_hi for v in visited):
            return True
        if floor > _kth(v.cost_lo for v in visited):  # close: decide on exact costs
            # only a cost that may be under the floor counts, cheapest first, until the answer is known
            for v in sorted(visited, key=lambda v: v.cost_lo):
                if not v.cost_lo < floor or floor > _kth(v.cost_hi for v in visited):
                    break
                v.finish()
            if floor > _kth(v.cost_hi for v in visited):
                return True
        return False

    def _visit(self, index: int) -> None:
        _, c, d, price, mem, prefill_work = self.candidates[index]
        built = _decode_model(d, self.context_len, self.shape, mem, prefill_work)
        if built is None:
            return
        percentile, itl_slo_ms, max_utilization, tpot_slo_ms = self.objective
        goodput = ConfirmedDecodeRate(built[1], built[0], percentile, itl_slo_ms, max_utilization,
                                      tpot_slo_ms)
        if goodput.lo > 0:  # a goodput of 0 gives no worker; above 0 its load point meets the objective
            self.visited.append(_DecodeCandidate(goodput, d, c.gpu_key, price, built[0], index))

    def kept(self) -> list[Priced]:
        """walk_decode_pool's answer, once the walk has ended."""
        return [worker for _, worker in self._kept()]

    def _kept(self) -> list[tuple[int, Priced]]:
        """(list index, worker) of those that can be among the KEEP_PER_POOL cheapest, in the list's order
        (decided once: finishing goodputs narrows the brackets it reads)."""
        assert self.ended
        if self._kept_workers is None:
            self._kept_workers = self._decide_kept()
        return self._kept_workers

    def _decide_kept(self) -> list[tuple[int, Priced]]:
        visited = self.visited
        cutoff = _kth(v.cost_hi for v in visited) if len(visited) >= KEEP_PER_POOL else math.inf
        kept = []
        for v in sorted(visited, key=lambda v: v.index):
            if v.cost_lo > cutoff:  # dearer than KEEP_PER_POOL others whatever its exact goodput
                continue
            v.finish()
            worker = v.priced(self.objective[0])
            if worker is not None:
                kept.append((v.index, worker))
        return kept

    def cheapest(self) -> list[tuple[int, Priced]]:
        """(rank, worker) of the KEEP_PER_POOL cheapest kept, by cost then the list's order; once ended."""
        ranked = sorted(self._kept(), key=lambda x: x[1][0])[:KEEP_PER_POOL]
        return [(rank, worker) for rank, (_, worker) in enumerate(ranked)]

    def cheapest_upto(self, usd_per_request_s: float) -> list[tuple[int, Priced]] | None:
        """(rank, worker) of those of `cheapest()` that cost at most `usd_per_request_s`, once advanced to it
        (every candidate that costs at most it visited): None where a visited candidate without a worker
        leaves a rank open (the caller ends the walk). Goodputs are made exact (their brackets left as the
        walk reads them) lowest cost bracket first, until KEEP_PER_POOL workers cost less than any left."""
        percentile = self.objective[0]
        exact: list[tuple[float, int, Priced | None]] = []
        worker_costs: list[float] = []
        within = usd_per_request_s
        for v in sorted(self.visited, key=lambda v: v.cost_lo):
            if v.cost_lo > within:
                break  # this and every one left cost more than it, or than KEEP_PER_POOL workers
            worker = v.priced(percentile)
            exact.append((v.cost(v.peek()), v.index, worker))
            if worker is not None:
                bisect.insort(worker_costs, exact[-1][0])
                if len(worker_costs) >= KEEP_PER_POOL:
                    within = min(within, worker_costs[KEEP_PER_POOL - 1])
        exact.sort(key=lambda x: (x[0], x[1]))
        ranked: list[tuple[int, Priced]] = []
        for place, (cost, _, worker) in enumerate(exact):
            if cost > usd_per_request_s or len(ranked) >= KEEP_PER_POOL:
                break
            if worker is None:
                continue
            if place >= KEEP_PER_POOL:
                return None  # cheaper candidates without a worker: the whole walk's ranking decides
            ranked.append((len(ranked), worker))
        return ranked
