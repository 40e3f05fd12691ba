"""A disaggregated fleet's two kinds of worker (planner.serving.disaggregation says how the fleet is
modelled): the prefill worker (its prefill queue, one per slot), the decode worker (its serving model with
the prompt cached, at its confirmed rate under the ITL objective) and the KV transfer between them."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace

import numpy as np

from planner.core.deployment import Deployment
from planner.hardware.communication import NETWORK_EFFICIENCY
from planner.hardware.parallelism import sharding
from planner.physics.latency import prefill
from planner.physics.memory import MemoryPlan, kv_bytes_per_token, plan_memory
from planner.serving.confirmed_rate import GRID, Checker, SizingObjective, utilization_limit
from planner.serving.goodput_search import LoadPoints, itl_percentiles
from planner.serving.replica import LoadPoint, PrefillWork, ReplicaModel, load_point, replica_model
from planner.serving.workload import replica_workload


def kv_transfer_ms(prefill_d: Deployment, decode_d: Deployment, prompt_len: float) -> float:
    """Time to move one prompt's KV cache from its prefill worker to its decode worker."""
    bytes_total = float(kv_bytes_per_token(prefill_d.model, prefill_d.kv_cache)) * prompt_len
    senders = prefill_d.tp * prefill_d.pp
    receivers = decode_d.tp * decode_d.pp
    nic_gb_s = min(prefill_d.gpu.network_gb_s, decode_d.gpu.network_gb_s)
    links = max(1, min(senders, receivers))
    latency_us = max(prefill_d.gpu.network_latency_us, decode_d.gpu.network_latency_us)
    return bytes_total / (links * NETWORK_EFFICIENCY * nic_gb_s * 1e9) * 1e3 + latency_us / 1e3


@dataclass(frozen=True)
class TrafficShape:
    """The request mix both pools serve (lengths in tokens; CVs as the scenario's `load` gives them)."""

    prompt_len: int
    output_len: int
    arrival_cv: float = 1.0
    prompt_len_cv: float = 0.0
    output_len_cv: float = 0.0
    prefix_cache_hit: float = 0.0


@dataclass(frozen=True)
class PrefillWorker:
    deployment: Deployment
    model: ReplicaModel  # one slot's prefill queue
    slots: int  # prompts in flight at once: attention groups x pipeline stages
    prefill_ms: float  # a lone prompt's prefill (its TTFT at a trickle, overhead excluded)
    prompts_per_s: float  # capacity of the worker
    gpus: int
    # the load points of `model` the TTFT searches of every decode worker it meets share
    points: LoadPoints = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "points", LoadPoints(self.model))


def prefill_worker(d: Deployment, shape: TrafficShape | int, prefill_work: PrefillWork | None = None,
                   lone_ms: float | None = None) -> PrefillWorker:
    """`prefill_work`: replica_model's, and `lone_ms`: prefill(d, prompt_len).total_ms, when the caller keeps
    the layout's figures."""
    shape = shape if isinstance(shape, TrafficShape) else TrafficShape(int(shape), 1)
    s = sharding(d)
    w = replica_workload(d, shape.prompt_len, 1, 1, replace(shape, output_len_cv=0.0))  # one token out, fixed
    m = replica_model(d, w, prefill_work=prefill_work)
    slots = s.attention_dp * s.pp
    lone = float(prefill(d, shape.prompt_len).total_ms) if lone_ms is None else lone_ms
    return PrefillWorker(d, m, slots, lone, slots * float(m.capacity_per_ms()) * 1000.0, s.gpus_per_replica)


@dataclass(frozen=True)
class DecodeWorker:
    deployment: Deployment
    model: ReplicaModel
    max_running: int  # the KV cache's max batch (max_num_seqs)
    goodput_per_s: float  # highest request rate per worker whose ITL at the percentile meets the objective
    batch: int  # decoding sequences at that rate
    output_tokens_per_s: float  # at that rate
    gpus: int
    percentile: int
    point: LoadPoint = field(repr=False, compare=False)  # the serving model's load point at that rate

    @functools.cached_property
    def itl_ms(self) -> float:
        """ITL at the percentile at that rate (on first use: the pool's ranking never reads it; the point is
        stable, so it is a number)."""
        itl = itl_percentiles(self.model, self.point).at(self.percentile)
        assert itl is not None
        return itl


def decode_worker(d: Deployment, context_len: int, shape: TrafficShape, itl_slo_ms: float,
                  percentile: int = 90, max_utilization: float | None = None,
                  tpot_slo_ms: float | None = None) -> DecodeWorker | None:
    """The decode worker at its confirmed rate under the ITL objective and the mean TPOT bound where given
    (None when nothing fits or meets them): planner.serving.confirmed_rate's, the simulated range's top
    within the objective, within the headroom."""
    built = _decode_model(d, context_len, shape)
    if built is None:
        return None
    max_batch, m = built
    rate = ConfirmedDecodeRate(m, max_batch, percentile, itl_slo_ms, max_utilization, tpot_slo_ms).finish()
    return _decode_worker_at(d, max_batch, m, rate, percentile)


class ConfirmedDecodeRate:
    """A decode worker's confirmed rate per ms (planner.serving.confirmed_rate at the KV cache's max batch,
    the ITL objective alone: the slot wait is TTFT's, judged with the prefill pool), searched only as far as
    the decode pool's ranking needs: after confirmed_rate's grid it lies in [lo, hi]; finish() takes
    confirmed_rate's refinement (the same rates, the same answer)."""

    def __init__(self, m: ReplicaModel, slots: int, percentile: int, itl_slo_ms: float,
                 max_utilization: float | None, tpot_slo_ms: float | None = None) -> None:
        self.m = m
        # a mean TPOT bound holds the decode worker too (issue 31: 32 of 144 disaggregated options decoded
        # at 30.3-31.8 ms against 25 ms); the slot wait is TTFT's, judged with the prefill pool
        self.check = Checker(m, slots, SizingObjective(percentile, None, itl_slo_ms, tpot_slo_ms),
                             utilization_limit(m, max_utilization))
        capacity = self.check.capacity
        self.lo = self.hi = 0.0
        if not capacity > 0:
            return
        top = min(self.check.limit * capacity, capacity * (1.0 - 1e-9))
        rates = np.concatenate([[capacity * 1e-6], top * np.arange(1, GRID + 1) / GRID])
        bad = np.nonzero(~self.check.verdicts(rates).ok)[0]
        if len(bad) == 0:
            self.lo = self.hi = top
        elif bad[0] > 0:
            self.lo, self.hi = float(rates[bad[0] - 1]), float(rates[bad[0]])

    def finish(self) -> float:
        if self.lo < self.hi:  # confirmed_rate's one refinement of the first failing cell
            rates = self.lo + (self.hi - self.lo) * np.arange(1, GRID) / GRID
            bad = np.nonzero(~self.check.verdicts(rates).ok)[0]
            if len(bad) == 0:
                self.lo = float(rates[-1])
            elif bad[0] > 0:
                self.lo = float(rates[bad[0] - 1])
            self.hi = self.lo
        return self.lo


def _decode_model(d: Deployment, context_len: int, shape: TrafficShape, mem: MemoryPlan | None = None,
                  prefill_work: PrefillWork | None = None) -> tuple[int, ReplicaModel] | None:
    """(max batch, serving model) of a decode worker, None when one sequence does not fit. `mem` (its plan at
    `context_len`) and `prefill_work` (replica_model's): when the caller keeps them."""
    mem = mem if mem is not None else plan_memory(d, context_len)
    if not mem.fits:
        return None
    w = replica_workload(d, shape.prompt_len, shape.output_len, mem.max_batch, shape, prefix_cache_hit=1.0,
                         ttft_overhead_ms=0.0)
    return mem.max_batch, replica_model(d, w, prefill_work=prefill_work)


def _decode_worker_at(d: Deployment, max_batch: int, m: ReplicaModel, goodput: float,
                      percentile: int) -> DecodeWorker | None:
    if not goodput > 0:
        return None
    p = load_point(m, goodput)
    if not bool(p.stable):  # no ITL percentiles (distributions.latency_percentiles): none meets the objective
        return None
    return DecodeWorker(d, m, max_batch, goodput * 1000.0, max(1, round(float(p.population))),
                        goodput * 1000.0 * float(np.mean(m.output_tokens)), sharding(d).gpus_per_replica,
                        percentile, p)
