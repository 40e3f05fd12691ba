"""The disaggregated decode pool's walk (planner.serving.disaggregation): decode workers built cheapest cost
floor first until the KEEP_PER_POOL cheapest found cost less than any floor left, the tighter floor
(planner.serving.decode_bound) computed only where the listed one leaves the walk's order open
(planner.serving.floor_order), each goodput searched only as far as the pool's ranking needs."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

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

    def cost(self, goodput_per_ms: float) -> float:
        return self.price * sharding(self.d).gpus_per_replica / (goodput_per_ms * 1000.0)

    @property
    def cost_lo(self) -> float:
        return self.cost(self.goodput.hi)

    @property
    def cost_hi(self) -> float:
        return self.cost(self.goodput.lo)


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
    visited: list[_DecodeCandidate] = []

    def kth(costs) -> float:
        return sorted(costs)[KEEP_PER_POOL - 1]

    listed = [functools.partial(float, x[0]) for x in candidates] if walk_floors is None else walk_floors
    order = FloorOrder([(x[0], listed[i], i) for i, x in enumerate(candidates)])
    while order.left:
        floor, index = order.pop()
        if floor == math.inf:
            break  # no rate passes on this or any candidate left: none gives a worker
        _, c, d, price, mem, prefill_work = candidates[index]
        if len(visited) >= KEEP_PER_POOL:
            if floor > kth(v.cost_hi for v in visited):
                break
            if floor > kth(v.cost_lo for v in visited):  # close: decide on exact costs
                # only a cost that may be under the floor counts, cheapest first, until the answer is known
                for v in sorted(visited, key=lambda v: v.cost_lo):
                    if not v.cost_lo < floor or floor > kth(v.cost_hi for v in visited):
                        break
                    v.goodput.finish()
                if floor > kth(v.cost_hi for v in visited):
                    break
        built = _decode_model(d, context_len, shape, mem, prefill_work)
        if built is None:
            continue
        goodput = ConfirmedDecodeRate(built[1], built[0], percentile, itl_slo_ms, max_utilization,
                                      tpot_slo_ms)
        if goodput.lo > 0:  # a goodput of 0 gives no worker; above 0 its load point meets the objective
            visited.append(_DecodeCandidate(goodput, d, c.gpu_key, price, built[0], index))
    cutoff = kth(v.cost_hi for v in visited) if len(visited) >= KEEP_PER_POOL else math.inf
    kept = []
    for v in sorted(visited, key=lambda v: v.index):
        if v.cost_lo > cutoff:  # dearer than KEEP_PER_POOL others whatever its exact goodput
            continue
        dw = _decode_worker_at(v.d, v.max_batch, v.goodput.m, v.goodput.finish(), percentile)
        if dw is not None:
            kept.append((v.price * dw.gpus / dw.goodput_per_s, dw, v.gpu_key, v.price))
    return kept
