"""Disaggregated serving: prefill workers and decode workers, each with its own GPU type and layout.

A request's prompt runs on a prefill worker, its KV cache crosses the scale-out network to a decode
worker (counted in TTFT), and the decode worker generates every output token with no prompt chunks
beside it. Both pools are the plan's serving model (planner.serving.serving), no second copy of its physics:

  * Prefill worker: the serving model of the worker's layout with one output token per request (no
    decode: its prefill queue alone, whose wait grows with the traffic's arrival CV). A worker
    runs `attention_dp` prompts at once (one per attention group under EP) and `pp` more in its pipeline:
    each of these slots is one such queue fed 1 / slots of the worker's prompts. Prefill workers = the
    fewest whose TTFT at the objective's percentile, plus the KV transfer and the decode worker's first
    step (its ITL at the percentile), meets the TTFT objective: traffic / (slots x goodput per slot).
  * KV transfer: prompt_len x the model's KV bytes per token (all layers), sent by the prefill worker's
    GPUs that hold it (tp x pp, each its share) to the decode worker's over one NIC each, at
    NETWORK_EFFICIENCY of the slower NIC, plus one network latency. Engines stream it layer by layer
    (NIXL, Mooncake) and hide part of it; it is counted whole here (conservative).
  * Decode worker: the serving model of its layout with the whole prompt already cached (prefix-cache hit
    1: the KV arrives computed; one token is computed, as the engine does); its ITL at a request rate is
    the serving model's decode at the population N = lambda (O - 1) T it then holds, up to the KV cache's
    max batch. Decode workers = ceil(traffic / the highest rate per worker whose ITL at the percentile
    meets the objective). The prefill:decode ratio is what balances this traffic mix.
Pairing: a prefill pool meets a decode pool only on one vendor's accelerators, with the weight and KV
precisions they share, and only where the engine the fleet is planned on documents a KV-transfer path
between them (planner.engines.kv_transfer, planner/data/kv_transfer_paths.toml): no engine moves a KV
cache between two vendors' accelerators in production. Each option names its path (`kv_transfer_path`).
What is not modelled: the expert weights that concurrently busy attention groups of an EP prefill worker
share (each slot is timed as the worker's lone prompt: optimistic, up to 1.55x for DeepSeek-V3 EP 8 at
2,000 tokens), KV transfer contention with the expert all-to-alls on the same NICs, prefix caching across
workers, the router's queueing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from pydantic import ValidationError

from planner.core.deployment import Deployment
from planner.core.errors import ScenarioError
from planner.economics.cost import usd_per_million_tokens
from planner.engines.kv_transfer import KvTransferPath, kv_transfer_path, vendor_key
from planner.hardware.communication import NETWORK_EFFICIENCY
from planner.hardware.parallelism import sharding
from planner.physics.latency import prefill
from planner.physics.memory import MemoryPlan, kv_bytes_per_token, plan_memory
from planner.scenario.scenario import Scenario, resolve
from planner.serving.floor_order import FloorOrder
from planner.serving.goodput_search import GoodputSearch, LoadPoints, itl_percentiles, rate_bound_per_s
from planner.serving.layout_memo import LayoutKey, LayoutMemo, layout_key
from planner.serving.replica import LoadPoint, PrefillWork, ReplicaModel, load_point, replica_model
from planner.serving.serving import goodput_per_ms
from planner.serving.sizing_request import LayoutCandidate
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


def prefill_worker(d: Deployment, shape: TrafficShape | int,
                   prefill_work: PrefillWork | None = None) -> PrefillWorker:
    """`prefill_work`: replica_model's, when the caller keeps the layout's figures."""
    shape = shape if isinstance(shape, TrafficShape) else TrafficShape(int(shape), 1)
    s = sharding(d)
    w = replica_workload(d, shape.prompt_len, 1, 1, replace(shape, output_len_cv=0.0))  # one token out, fixed
    m = replica_model(d, w, prefill_work=prefill_work)
    slots = s.attention_dp * s.pp
    lone = float(prefill(d, shape.prompt_len).total_ms)
    return PrefillWorker(d, m, slots, lone, slots * float(m.capacity_per_ms()) * 1000.0, s.gpus_per_replica)


@dataclass(frozen=True)
class DecodeWorker:
    deployment: Deployment
    model: ReplicaModel
    max_running: int  # the KV cache's max batch (max_num_seqs)
    goodput_per_s: float  # highest request rate per worker whose ITL at the percentile meets the objective
    batch: int  # decoding sequences at that rate
    itl_ms: float  # ITL at the percentile at that rate
    output_tokens_per_s: float  # at that rate
    gpus: int


def decode_worker(d: Deployment, context_len: int, shape: TrafficShape, itl_slo_ms: float,
                  percentile: int = 90) -> DecodeWorker | None:
    """The decode worker at its goodput under the ITL objective (None when nothing fits or meets it)."""
    built = _decode_model(d, context_len, shape)
    if built is None:
        return None
    max_batch, m = built
    return _decode_worker_at(d, max_batch, m, goodput_per_ms(m, percentile, None, itl_slo_ms), percentile)


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
    itl = itl_percentiles(m, p).at(percentile)
    if itl is None:
        return None
    return DecodeWorker(d, m, max_batch, goodput * 1000.0, max(1, round(float(p.population))), itl,
                        goodput * 1000.0 * float(np.mean(m.output_tokens)), sharding(d).gpus_per_replica)


@dataclass
class _DecodeCandidate:
    """A decode candidate whose goodput is searched only as far as the pool's ranking needs: its cost per
    request/s lies in [cost_lo, cost_hi] (equal once the goodput is exact)."""

    goodput: GoodputSearch
    d: Deployment
    gpu_key: str
    price: float
    max_batch: int

    def cost(self, goodput_per_ms: float) -> float:
        return self.price * sharding(self.d).gpus_per_replica / (goodput_per_ms * 1000.0)

    @property
    def cost_lo(self) -> float:
        return self.cost(self.goodput.hi)

    @property
    def cost_hi(self) -> float:
        return self.cost(self.goodput.lo)


# (cost floor, candidate, deployment, $/GPU-hour, memory plan at the context, the layout's prefill work)
DecodeCandidate = tuple[float, LayoutCandidate, Deployment, float, MemoryPlan, PrefillWork | None]


def _decode_pool(candidates: list[DecodeCandidate], context_len: int,
                 shape: TrafficShape, itl_slo_ms: float,
                 percentile: int) -> list[tuple[float, DecodeWorker, str, float]]:
    """decode_worker for each candidate, cheapest floor first, until the KEEP_PER_POOL cheapest found cost
    less than any floor left; those that can be among the KEEP_PER_POOL cheapest, in that order. A goodput
    is searched only as far as the comparisons need (its exact value where a comparison is close)."""
    visited: list[_DecodeCandidate] = []

    def kth(costs) -> float:
        return sorted(costs)[KEEP_PER_POOL - 1]

    for floor, c, d, price, mem, prefill_work in sorted(candidates, key=lambda x: x[0]):
        if len(visited) >= KEEP_PER_POOL:
            if floor > kth(v.cost_hi for v in visited):
                break
            if floor > kth(v.cost_lo for v in visited):  # close: decide on exact costs
                for v in visited:
                    v.goodput.finish()
                if floor > kth(v.cost_hi for v in visited):
                    break
        built = _decode_model(d, context_len, shape, mem, prefill_work)
        if built is None:
            continue
        goodput = GoodputSearch(built[1], percentile, None, itl_slo_ms)
        if goodput.lo > 0:  # a goodput of 0 gives no worker; above 0 its load point meets the objective
            visited.append(_DecodeCandidate(goodput, d, c.gpu_key, price, built[0]))
    cutoff = kth(v.cost_hi for v in visited) if len(visited) >= KEEP_PER_POOL else math.inf
    kept = []
    for v in visited:
        if v.cost_lo > cutoff:  # dearer than KEEP_PER_POOL others whatever its exact goodput
            continue
        dw = _decode_worker_at(v.d, v.max_batch, v.goodput.m, v.goodput.finish(), percentile)
        if dw is not None:
            kept.append((v.price * dw.gpus / dw.goodput_per_s, dw, v.gpu_key, v.price))
    return kept


@dataclass(frozen=True)
class DisaggregatedFleet:
    prefill: PrefillWorker
    decode: DecodeWorker
    prefill_workers: int
    decode_workers: int
    ttft_ms: float  # at the percentile: prefill queue + prefill + KV transfer + first decode step
    itl_ms: float  # at the percentile, at the rate each decode worker runs
    decode_batch: int  # decoding sequences a decode worker holds at that rate
    kv_transfer_ms: float
    prefill_utilization: float


def decode_fleet(dw: DecodeWorker, requests_per_s: float,
                 percentile: int = 90) -> tuple[int, LoadPoint, float | None]:
    """Decode workers for the traffic, the load point each then runs at and its ITL at the percentile."""
    workers = max(1, math.ceil(requests_per_s / dw.goodput_per_s * (1 - 1e-12)))
    point = load_point(dw.model, requests_per_s / workers / 1000.0)
    return workers, point, itl_percentiles(dw.model, point).at(percentile)


def _prefill_workers(p: PrefillWorker, requests_per_s: float, budget_ms: float,
                     percentile: int) -> int | None:
    """Fewest prefill workers whose slots each meet the TTFT budget (None when a trickle misses it); the
    goodput's search goes only as far as the count needs."""
    def workers(per_slot_per_ms: float) -> int:
        return max(1, math.ceil(requests_per_s / (p.slots * (per_slot_per_ms * 1000.0)) * (1 - 1e-12)))

    goodput = GoodputSearch(p.model, percentile, budget_ms, None, points=p.points)
    if not goodput.lo > 0:
        return None
    while workers(goodput.lo) != workers(goodput.hi):  # an exact goodput closes the bracket
        goodput.step()
    return workers(goodput.lo)


def size_fleet(p: PrefillWorker, dw: DecodeWorker, requests_per_s: float, prompt_len: int, output_len: int,
               ttft_slo_ms: float, percentile: int = 90,
               decode: tuple[int, LoadPoint, float | None] | None = None) -> DisaggregatedFleet | None:
    """Fewest prefill and decode workers for the traffic, or None when no prefill count meets TTFT.
    `decode`: the decode side (decode_fleet's answer for `dw`), when the caller pairs `dw` more than once."""
    transfer = kv_transfer_ms(p.deployment, dw.deployment, prompt_len)
    budget = ttft_slo_ms - transfer - dw.itl_ms  # what the prefill queue and prompt may take
    if not budget > 0:
        return None
    workers = _prefill_workers(p, requests_per_s, budget, percentile)
    if workers is None:
        return None
    rate_per_ms = requests_per_s / (workers * p.slots) / 1000.0
    point = p.points.point(rate_per_ms, rate_per_ms)
    ttft = p.points.ttft_percentiles(rate_per_ms, rate_per_ms).at(percentile)
    if decode is None:
        decode = decode_fleet(dw, requests_per_s, percentile)
    decode_workers, dpoint, itl = decode
    if ttft is None or itl is None:
        return None
    return DisaggregatedFleet(p, dw, workers, decode_workers, ttft + transfer + itl, itl,
                              max(1, round(float(dpoint.population))), transfer, float(point.utilization))


def layout_summary(d: Deployment, gpu_key: str) -> dict[str, Any]:
    s = sharding(d)
    return {"gpu": gpu_key, "tp": s.tp, "pp": s.pp, "ep": s.ep, "weights": d.weights, "kv_cache": d.kv_cache,
            "gpus_per_worker": s.gpus_per_replica, "nodes_per_worker": s.nodes_per_replica}


KEEP_PER_POOL = 8  # best candidates per pool that are paired (cost per unit of work)


PoolCandidate = LayoutCandidate  # a prefill or decode worker's configuration


def _deployment(base: dict[str, Any], c: PoolCandidate) -> Deployment | None:
    try:
        scenario = Scenario.model_validate({**base, **c.scenario_fields()})
        return resolve(scenario)
    except (ScenarioError, ValidationError):
        return None


def _prefill_cost_floor(d: Deployment, shape: TrafficShape, price: float, work_ms: float) -> float:
    """A floor under a prefill worker's $/hour per prompt/s (price x GPUs / prompts_per_s): a slot serves a
    prompt in at least its prefill work at the mean prompt (the serving model's service time adds the
    decode share of its iterations, and its mean work over the length grid is at least the work at the
    mean length: planner.serving.goodput_search.rate_bound_per_s's argument), 1 % below for the grid's
    rounding.
    `work_ms`: the prefill work of the mean prompt's computed tokens."""
    s = sharding(d)
    return price * s.gpus_per_replica * 0.99 * work_ms / (s.attention_dp * s.pp * 1000.0)


Priced = tuple[float, Any, str, float]  # (cost per unit of work, worker, GPU key, $/GPU-hour)
# the pools that may pair: (weights, KV cache, vendor); a vendor of None (a custom GPU that names none) pairs
# with nothing
PoolKey = tuple[str, str, str | None]


def _pool_key(c: PoolCandidate, d: Deployment) -> PoolKey:
    return c.weights, c.kv_cache, vendor_key(d.gpu.vendor)
Resolver = Callable[[PoolCandidate], Any]
Pricer = Callable[[str, Any], float | None]


def _prefill_pool_workers(prefill_pool: Sequence[PoolCandidate], deployment_of: Resolver,
                          key_of: Callable[[PoolCandidate], LayoutKey], price_of: Pricer,
                          memo: LayoutMemo, shape: TrafficShape, prompt_len: int,
                          ttft_slo_ms: float) -> tuple[dict[PoolKey, list[Priced]], int]:
    """Prefill workers by (weights, KV), priced per prompt per second, and how many were searched: cheapest
    floor first, workers built until the KEEP_PER_POOL best found cost less per prompt than any floor left;
    the kept ones go back to pool order (the pairing's ties keep it)."""
    searched = 0
    cached = shape.prompt_len - max(round(shape.prompt_len * (1.0 - shape.prefix_cache_hit)), 1)
    floored: dict[PoolKey, list[tuple[float, Callable[[], float], tuple[int, PoolCandidate, Deployment,
                                                                        float]]]] = {}
    for i, c in enumerate(prefill_pool):
        d = deployment_of(c)
        price = price_of(c.gpu_key, c.gpu_value)
        if d is None or price is None or not memo.fits(key_of(c), d, prompt_len + 1):
            continue
        searched += 1
        floored.setdefault(_pool_key(c, d), []).append(
            (*_prefill_floors(memo, key_of(c), d, shape, price, cached), (i, c, d, price)))
    prefills: dict[PoolKey, list[Priced]] = {}
    for key, floors in floored.items():
        built: list[tuple[float, int, PrefillWorker, str, float]] = []
        order = FloorOrder(floors)  # cheapest floor first (pool order among equals)
        while order.left:
            if len(built) >= KEEP_PER_POOL and order.floors_above(sorted(b[0] for b in built)[KEEP_PER_POOL
                                                                                                  - 1]):
                break
            i, c, d, price = order.pop()[1]
            w = prefill_worker(d, shape, memo.prefill_work(key_of(c), d))
            if w.prefill_ms + d.efficiency.ttft_overhead_ms > ttft_slo_ms:  # even a lone prompt is too slow
                continue
            built.append((price * w.gpus / w.prompts_per_s, i, w, c.gpu_key, price))
        built.sort(key=lambda b: b[1])
        prefills[key] = [(cost, w, gpu, price) for cost, _, w, gpu, price in built]
    return prefills, searched


def _prefill_floors(memo: LayoutMemo, key: LayoutKey, d: Deployment, shape: TrafficShape, price: float,
                    cached: int) -> tuple[float, Callable[[], float]]:
    """A prefill candidate's cost floor: a bound on it (from a bound on the prompt's prefill work; the floor
    grows with the work) and the floor itself on demand."""
    bound = _prefill_cost_floor(d, shape, price, memo.prefill_work_floor_ms(key, d, shape.prompt_len, cached))
    return bound, lambda: _prefill_cost_floor(d, shape, price,
                                              memo.prefill_work_ms(key, d, shape.prompt_len, cached))


def _decode_workers(decode_pool: Sequence[PoolCandidate], deployment_of: Resolver,
                    key_of: Callable[[PoolCandidate], LayoutKey], price_of: Pricer,
                    memo: LayoutMemo, shape: TrafficShape, context_len: int, itl_slo_ms: float,
                    percentile: int, pairs_with: set[PoolKey]) -> tuple[dict[PoolKey, list[Priced]], int]:
    """Decode workers by (weights, KV, vendor), priced per request per second, and how many were searched:
    cheapest goodput bound first, goodput searched until the KEEP_PER_POOL best found cost less per request
    than any bound left (planner.serving.sizing's bound, prompt work 0: it is cached). Only for the pools a
    prefill pool can pair with (`pairs_with`)."""
    searched = 0
    bounded: dict[PoolKey, list[DecodeCandidate]] = {}
    for c in decode_pool:
        d = deployment_of(c)
        price = price_of(c.gpu_key, c.gpu_value)
        if d is None or price is None:
            continue
        searched += 1
        if _pool_key(c, d) not in pairs_with:
            continue
        mem = memo.memory(key_of(c), d, context_len)
        if not mem.fits:
            continue
        context = shape.prompt_len + shape.output_len / 2
        bound = rate_bound_per_s(d, context, mem.max_batch, shape.output_len, itl_slo_ms, 0.0,
                                 memo.bound_steps(key_of(c), d, mem.max_batch, context))
        floor = 0.0 if bound is None else price * sharding(d).gpus_per_replica / bound
        bounded.setdefault(_pool_key(c, d), []).append((floor, c, d, price, mem,
                                                                memo.prefill_work(key_of(c), d)))
    return {key: _decode_pool(candidates, context_len, shape, itl_slo_ms, percentile)
            for key, candidates in bounded.items()}, searched


def _option(fleet: DisaggregatedFleet, prefill: Priced, decode: Priced, requests_per_s: float,
            output_len: int, percentile: int, path: KvTransferPath) -> dict[str, Any]:
    """One disaggregated fleet as a sizing option (the contract's option fields). Each pool carries its GPU
    count and $/hour, which sum to the option's `gpus_total` and `usd_per_hour`: the banner, the table and
    the opened fleet all read these."""
    _, pw, p_key, p_price = prefill
    _, dw, d_key, d_price = decode
    gpus_p, gpus_d = fleet.prefill_workers * pw.gpus, fleet.decode_workers * dw.gpus
    usd_p, usd_d = gpus_p * p_price, gpus_d * d_price
    usd = usd_p + usd_d
    return {
        "mode": "disaggregated", "prefill_workers": fleet.prefill_workers,
        "decode_workers": fleet.decode_workers,
        "prefill_decode_ratio": fleet.prefill_workers / fleet.decode_workers,
        "prefill": {**layout_summary(pw.deployment, p_key), "prefill_ms": pw.prefill_ms,
                    "prompts_per_s_per_worker": pw.prompts_per_s,
                    "utilization": fleet.prefill_utilization, "usd_per_gpu_hour": p_price,
                    "workers": fleet.prefill_workers, "gpus": gpus_p, "usd_per_hour": usd_p},
        "decode": {**layout_summary(dw.deployment, d_key), "batch": fleet.decode_batch,
                   "itl_ms": fleet.itl_ms,
                   "max_running": dw.max_running, "goodput_request_rate": dw.goodput_per_s,
                   "request_rate_per_worker": requests_per_s / fleet.decode_workers,
                   "output_tokens_per_s_per_worker": dw.output_tokens_per_s,
                   "usd_per_gpu_hour": d_price,
                   "workers": fleet.decode_workers, "gpus": gpus_d, "usd_per_hour": usd_d},
        "gpus_total": gpus_p + gpus_d, "ttft_ms": fleet.ttft_ms, "itl_ms": fleet.itl_ms,
        "percentile": percentile,
        "kv_transfer_ms": fleet.kv_transfer_ms, "kv_transfer_path": path.as_dict(),
        "usd_per_hour": usd,
        "usd_per_million_output_tokens": usd_per_million_tokens(usd, requests_per_s * output_len),
    }


def disaggregated_options(base_scenario: dict[str, Any], prefill_pool: Sequence[PoolCandidate],
                          decode_pool: Sequence[PoolCandidate], requests_per_s: float, prompt_len: int,
                          output_len: int, context_len: int, ttft_slo_ms: float, itl_slo_ms: float,
                          price_of: Callable[[str, Any], float | None], shape: TrafficShape | None = None,
                          percentile: int = 90,
                          memo: LayoutMemo | None = None) -> tuple[list[dict[str, Any]], int]:
    """Cheapest disaggregated fleets (prefill and decode pools may use different GPUs and layouts of one
    vendor; they share the weight and KV precision so the KV cache transfers as is, over the engine's
    documented path). Returns (options, searched).
    `memo`: per-layout figures shared with the request's aggregated search (same model and settings)."""
    shape = shape or TrafficShape(prompt_len, output_len)
    resolved: dict[tuple, Deployment | None] = {}
    memo = memo if memo is not None else LayoutMemo()

    keys: dict[int, LayoutKey] = {}  # by the candidate's id: a custom GPU's dict makes it unhashable

    def key_of(c: PoolCandidate) -> LayoutKey:  # asked a dozen times a candidate: built once
        if id(c) not in keys:
            keys[id(c)] = layout_key(c.gpu_value, c.tp, c.pp, c.ep, c.weights, c.kv_cache)
        return keys[id(c)]

    def deployment_of(c: PoolCandidate) -> Deployment | None:
        key = key_of(c)
        if key not in resolved:  # the two pools usually share candidates: resolve each once
            resolved[key] = memo.known_deployment(key) or _deployment(base_scenario, c)
        return resolved[key]

    prefills, searched_p = _prefill_pool_workers(prefill_pool, deployment_of, key_of, price_of, memo, shape,
                                                 prompt_len, ttft_slo_ms)
    # one vendor's pools, on an engine with a documented KV-transfer path between them
    paths: dict[PoolKey, KvTransferPath] = {}
    for key, pre in prefills.items():
        path = kv_transfer_path(key[2], pre[0][1].deployment.engine) if pre else None
        if path is not None:
            paths[key] = path
    decodes, searched_d = _decode_workers(decode_pool, deployment_of, key_of, price_of, memo, shape,
                                          context_len, itl_slo_ms, percentile, set(paths))
    options = []
    decode_side: dict[int, tuple[int, LoadPoint, float | None]] = {}
    for key, path in paths.items():
        pre = prefills[key]
        for p_side in sorted(pre, key=lambda x: x[0])[:KEEP_PER_POOL]:
            for d_side in sorted(decodes.get(key, []), key=lambda x: x[0])[:KEEP_PER_POOL]:
                dw = d_side[1]
                if id(dw) not in decode_side:  # every prefill candidate meets the same decode fleet
                    decode_side[id(dw)] = decode_fleet(dw, requests_per_s, percentile)
                fleet = size_fleet(p_side[1], dw, requests_per_s, prompt_len, output_len, ttft_slo_ms,
                                   percentile, decode_side[id(dw)])
                if fleet is not None:
                    options.append(_option(fleet, p_side, d_side, requests_per_s, output_len, percentile,
                                           path))
    options.sort(key=lambda o: (o["usd_per_hour"], o["itl_ms"]))
    return options, searched_p + searched_d


__all__ = ["PoolCandidate", "disaggregated_options", "DecodeWorker", "DisaggregatedFleet", "PrefillWorker",
           "decode_worker", "kv_transfer_ms",
           "decode_fleet",
           "TrafficShape", "layout_summary", "prefill_worker", "size_fleet"]
