"""Disaggregated serving: prefill workers and decode workers, each with its own GPU type and layout.

A request's prompt runs on a prefill worker, its KV cache crosses the scale-out network to a decode
worker (counted in TTFT), and the decode worker generates every output token with no prompt chunks
beside it. Both pools are the plan's serving model (planner.serving.serving), no second copy of its physics:

  * Prefill worker: the serving model of the worker's layout with one output token per request (no
    decode: its prefill queue alone, whose wait grows with the traffic's arrival CV). A worker
    runs `attention_dp` prompts at once (one per attention group under EP) and `pp` more in its pipeline:
    each of these slots is one such queue fed 1 / slots of the worker's prompts. Prefill workers = the
    fewest whose TTFT at the objective's percentile, plus the decode worker's wait for a sequence slot, the
    KV transfer and the decode worker's first step (its ITL at the percentile), meets the TTFT objective in
    the fast model and at the simulated range's top, each slot within the headroom (serving.pool_checks).
  * KV transfer: prompt_len x the model's KV bytes per token (all layers), sent by the prefill worker's
    GPUs that hold it (tp x pp, each its share) to the decode worker's over one NIC each, at
    NETWORK_EFFICIENCY of the slower NIC, plus one network latency. Engines stream it layer by layer
    (NIXL, Mooncake) and hide part of it; it is counted whole here (conservative).
  * Decode worker: the serving model of its layout with the whole prompt already cached (prefix-cache hit
    1: the KV arrives computed; one token is computed, as the engine does); its ITL at a request rate is
    the serving model's decode at the population N = lambda (O - 1) T it then holds, up to the KV cache's
    max batch. Decode workers = ceil(traffic / the highest rate per worker whose ITL at the percentile
    meets the objective at the simulated range's top, within the headroom: its confirmed rate), more where
    their slot wait alone misses TTFT. The prefill:decode ratio is what balances this traffic mix.
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

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from planner.core.deployment import Deployment
from planner.core.errors import ScenarioError
from planner.engines.base import DEFAULT_MAX_NUM_BATCHED_TOKENS
from planner.engines.kv_transfer import KvTransferPath, kv_transfer_path, vendor_key
from planner.hardware.parallelism import sharding
from planner.scenario.scenario import Scenario, resolve
from planner.serving.cheapest_first import build_cheapest_grouped
from planner.serving.confirmed_rate import SizingObjective
from planner.serving.decode_bound import DecodeRateBound
from planner.serving.decode_pool import KEEP_PER_POOL, DecodeCandidate, DecodePoolWalk
from planner.serving.disaggregated_workers import (
    DecodeWorker,
    PrefillWorker,
    TrafficShape,
    decode_worker,
    kv_transfer_ms,
    prefill_worker,
)
from planner.serving.fleet_option import Priced, fleet_option, layout_summary
from planner.serving.floor_order import FloorOrder
from planner.serving.goodput_search import (
    GoodputSearch,
    confirmed_bound_per_s,
)
from planner.serving.layout_memo import LayoutKey, LayoutMemo, StepTable, layout_key
from planner.serving.pool_checks import (
    MAX_EXTRA_DECODE,
    DecodeSide,
    PrefillJudge,
    decode_side,
    fewest_decode_workers,
    fewest_prefill_workers,
)
from planner.serving.sizing_request import LayoutCandidate


@dataclass(frozen=True)
class DisaggregatedFleet:
    prefill: PrefillWorker
    decode: DecodeWorker
    prefill_workers: int
    decode_workers: int
    ttft_ms: float  # at the percentile: prefill queue + prefill + slot wait + KV transfer + first decode step
    itl_ms: float  # at the percentile, at the rate each decode worker runs
    decode_batch: int  # decoding sequences a decode worker holds at that rate
    kv_transfer_ms: float
    prefill_utilization: float
    # issue 31: the simulated range's top (None: no simulated class), the decode pool's load and slot wait
    ttft_simulated_high_ms: float | None = None
    itl_simulated_high_ms: float | None = None
    decode_utilization: float = 0.0
    slot_wait_probability: float = 0.0
    slot_wait_mean_ms: float = 0.0


def decode_fleet(dw: DecodeWorker, requests_per_s: float, percentile: int = 90, extra: int = 0) -> DecodeSide:
    """Decode workers for the traffic (`extra` more than the fewest), the load point each then runs at, its
    ITL at the percentile and the range's top, its utilization and slot wait (planner.serving.pool_checks)."""
    return decode_side(dw.model, dw.max_running, dw.goodput_per_s, requests_per_s, percentile, extra)


def _prefill_workers(p: PrefillWorker, requests_per_s: float, budget_ms: float,
                     percentile: int) -> int | None:
    """Fewest prefill workers whose slots each meet the TTFT budget in the fast model, without the slot wait
    (None when a trickle misses it): a floor under the confirmed count; the goodput's search goes only as
    far as the count needs."""
    def workers(per_slot_per_ms: float) -> int:
        return max(1, math.ceil(requests_per_s / (p.slots * (per_slot_per_ms * 1000.0)) * (1 - 1e-12)))

    goodput = GoodputSearch(p.model, percentile, budget_ms, None, points=p.points)
    if not goodput.lo > 0:
        return None
    while workers(goodput.lo) != workers(goodput.hi):  # an exact goodput closes the bracket
        goodput.step()
    return workers(goodput.lo)


def size_fleet(p: PrefillWorker, dw: DecodeWorker, requests_per_s: float, prompt_len: int, output_len: int,
               ttft_slo_ms: float, percentile: int = 90, decode: DecodeSide | None = None,
               max_utilization: float | None = None) -> DisaggregatedFleet | None:
    """Fewest prefill and decode workers for the traffic whose TTFT and ITL hold confirmed (planner.serving.
    pool_checks), or None when no count does. `decode`: decode_fleet's answer for `dw`, when the caller
    pairs `dw` more than once; where its slot wait alone misses TTFT, decode workers are added."""
    sized = _sized(p, dw, requests_per_s, prompt_len, ttft_slo_ms, percentile, decode, max_utilization)
    return None if sized is None else sized.fleet()


@dataclass(frozen=True)
class _Sized:
    """A fleet's worker counts, its TTFT figures on demand (the sizing computes them only for the options it
    returns: nothing ranks by TTFT)."""

    p: PrefillWorker
    dw: DecodeWorker
    judge: PrefillJudge
    decode: DecodeSide
    prefill_workers: int
    requests_per_s: float
    transfer_ms: float

    @property
    def slot_rate_per_ms(self) -> float:
        return self.requests_per_s / (self.prefill_workers * self.p.slots) / 1000.0

    @property
    def prefill_utilization(self) -> float:
        return self.slot_rate_per_ms / self.judge.capacity

    def fleet(self) -> DisaggregatedFleet:
        decode = self.decode
        pre = self.judge.side(self.prefill_workers, self.slot_rate_per_ms)
        return DisaggregatedFleet(self.p, self.dw, self.prefill_workers, decode.workers, pre.ttft_ms,
                                  decode.itl_ms or math.inf, max(1, round(float(decode.point.population))),
                                  self.transfer_ms, pre.utilization, pre.ttft_high_ms, decode.itl_high_ms,
                                  decode.utilization, decode.wait_probability, decode.wait_mean_ms)


def _sized(p: PrefillWorker, dw: DecodeWorker, requests_per_s: float, prompt_len: int, ttft_slo_ms: float,
           percentile: int, decode: DecodeSide | None,
           max_utilization: float | None) -> _Sized | None:
    """size_fleet's worker counts (its TTFT figures on demand)."""
    transfer = kv_transfer_ms(p.deployment, dw.deployment, prompt_len)
    decode = decode if decode is not None else decode_fleet(dw, requests_per_s, percentile)
    for extra in range(MAX_EXTRA_DECODE + 1):
        if extra:
            decode = decode_fleet(dw, requests_per_s, percentile, extra)
        itl = decode.itl_ms
        budget = ttft_slo_ms - transfer - itl if itl is not None else -1.0  # for the prefill queue and prompt
        fewest = _prefill_workers(p, requests_per_s, budget, percentile) if budget > 0 else None
        if itl is None or fewest is None:
            return None  # a trickle misses it without the slot wait: more decode workers cannot help
        judge = PrefillJudge(p.model, p.points, decode, transfer, ttft_slo_ms, percentile, max_utilization)
        workers = fewest_prefill_workers(judge, p.slots, requests_per_s, fewest)
        if workers is not None:
            return _Sized(p, dw, judge, decode, workers, requests_per_s, transfer)
        if decode.wait_probability <= 0:
            return None  # no slot wait to relieve: more decode workers cannot help
    return None


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
            w = prefill_worker(d, shape, memo.prefill_work(key_of(c), d), memo.prefill_ms(key_of(c), d,
                                                                                     shape.prompt_len))
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
    bound = _prefill_cost_floor(d, shape, price, memo.prefill_work_floor_ms(key, d, shape.prompt_len, cached,
                                                                            alltoall=True))
    return bound, lambda: _prefill_cost_floor(d, shape, price,
                                              memo.prefill_work_ms(key, d, shape.prompt_len, cached))


def _decode_workers(decode_pool: Sequence[PoolCandidate], deployment_of: Resolver,
                    key_of: Callable[[PoolCandidate], LayoutKey], price_of: Pricer,
                    memo: LayoutMemo, shape: TrafficShape, context_len: int, itl_slo_ms: float,
                    percentile: int, pairs_with: set[PoolKey], max_utilization: float | None = None,
                    tpot_slo_ms: float | None = None) -> tuple[dict[PoolKey, DecodePool], int]:
    """Decode pools by (weights, KV, vendor), their workers priced per request per second, and how many were
    searched: cheapest bound first, confirmed rates searched until the KEEP_PER_POOL best found cost less per
    request than any bound left (planner.serving.sizing's bound on the confirmed rate, prompt work 0: it is
    cached; walked by planner.serving.decode_bound's tighter one, computed where the first leaves the order
    open), each walked only as far as the pairing needs (DecodePoolWalk). Only for the pools a prefill pool
    can pair with (`pairs_with`)."""
    searched = 0
    bounded: dict[PoolKey, list[tuple[float, DecodeCandidate, Callable[[], float]]]] = {}
    rate_bounds: dict[PoolKey, list[tuple[float | None, float]]] = {}
    objective = SizingObjective(percentile, None, itl_slo_ms)
    banding = (float(shape.arrival_cv), shape.prompt_len_cv > 0 or shape.output_len_cv > 0, "fits")
    tighter = DecodeRateBound(itl_slo_ms, percentile, banding[0], banding[1], shape.prompt_len,
                              max_utilization,  # the workload's budget picks the band's prompt class
                              getattr(shape, "max_num_batched_tokens", DEFAULT_MAX_NUM_BATCHED_TOKENS))
    for c in decode_pool:
        d = deployment_of(c)
        price = price_of(c.gpu_key, c.gpu_value)
        if d is None or price is None:
            continue
        searched += 1
        pool_key = _pool_key(c, d)
        if pool_key not in pairs_with:
            continue
        mem = memo.memory(key_of(c), d, context_len)
        if not mem.fits:
            continue
        context = shape.prompt_len + shape.output_len / 2
        steps = memo.bound_steps(key_of(c), d, mem.max_batch, context)
        bound = confirmed_bound_per_s(d, context, mem.max_batch, shape.output_len, 0.0,
                                      steps, objective, banding, max_utilization)
        if bound is None and shape.output_len > 1:
            continue  # one sequence's step misses ITL already: a token's mean ITL is D(N + 1) >= D(1)
        usd_per_hour = price * sharding(d).gpus_per_replica
        floor = 0.0 if bound is None else usd_per_hour / bound
        walk = (functools.partial(float, floor) if bound is None else
                functools.partial(_walk_floor, tighter, shape.output_len, steps, usd_per_hour, floor))
        bounded.setdefault(pool_key, []).append((floor, (floor, c, d, price, mem,
                                                                memo.prefill_work(key_of(c), d)), walk))
        rate_bounds.setdefault(pool_key, []).append((bound, usd_per_hour))
    pools = {}
    for key, floored in bounded.items():
        floored.sort(key=lambda x: x[0])  # the sizing bound's order: the one kept workers' cost ties keep
        # the bounds above leave the TPOT bound out (ITL alone: still bounds, looser); the walk judges it
        pools[key] = DecodePool(rate_bounds[key], DecodePoolWalk(
            [x[1] for x in floored], context_len, shape, itl_slo_ms, percentile, max_utilization,
            [x[2] for x in floored], tpot_slo_ms))
    return pools, searched


@dataclass(frozen=True)
class DecodePool:
    """A decode pool: each candidate's bound on its confirmed rate (req/s; None: none) and $/hour, and the
    pool's walk."""

    rate_bounds: list[tuple[float | None, float]]
    walk: DecodePoolWalk

    def least_usd_per_hour(self, requests_per_s: float) -> float:
        """At most any of its workers' $/hour in a pairing's floor (fewest_decode_workers at a rate at least
        the worker's goodput), 1e-9 under it for the products' rounding."""
        return min(fewest_decode_workers(rate, requests_per_s) * usd_per_hour if rate is not None
                   else usd_per_hour for rate, usd_per_hour in self.rate_bounds) * (1.0 - 1e-9)


Pairing = tuple[float, Callable[[], dict[str, Any] | None]]  # a floor and its fleet's option on demand


class _PoolPairings:
    """A decode pool's pairings with its prefill pool's KEEP_PER_POOL cheapest, listed as the build's floor
    reaches them (cheapest_first.Group, keyed as the joined list orders them: prefill rank, decode rank):
    the decode pool is walked only up to the $/hour per request/s, `reach`, that a pairing at that floor can
    have (DecodePoolWalk.cheapest_upto), growing by at least a quarter each time."""

    def __init__(self, p_sides: list[Priced], pool: DecodePool, requests_per_s: float,
                 pairing: Callable[[Priced, Priced], Pairing]) -> None:
        self.p_sides, self.walk, self.pairing = p_sides, pool.walk, pairing
        self.requests_per_s = requests_per_s
        self.prefill_usd = min(_prefill_floor_usd(p_side, requests_per_s) for p_side in p_sides)
        self.floor = (self.prefill_usd + pool.least_usd_per_hour(requests_per_s)) * (1.0 - 1e-9)
        self.reach = 0.0
        self.paired: set[int] = set()  # decode ranks listed

    def listed(self, floor: float) -> tuple[list[tuple[Any, float, Callable[[], dict[str, Any] | None]]],
                                           float | None]:
        # a pairing's decode workers cost at least the traffic times their $/hour per request/s (1e-12 under
        # it: fewest_decode_workers' margin), so one whose floor is at most `floor` costs at most the reach
        rps = self.requests_per_s
        reach = (max(1.25 * self.reach, (floor / (1.0 - 1e-9) - self.prefill_usd) / rps * (1.0 + 1e-6))
                 if rps > 0 else math.inf)
        rest: float | None = (self.prefill_usd + rps * reach) * (1.0 - 1e-9)
        self.walk.advance(reach if rest is not None and rest > floor else math.inf)
        ranked = self.walk.cheapest_upto(reach) if not self.walk.ended else None
        if ranked is None:  # walked to its end (or a rank is left open): every pairing listed
            self.walk.advance(math.inf)
            ranked, rest = self.walk.cheapest(), None
        self.reach = reach
        new = [(rank, d_side) for rank, d_side in ranked if rank not in self.paired]
        self.paired.update(rank for rank, _ in new)
        return [((i, rank), *self.pairing(p_side, d_side)) for i, p_side in enumerate(self.p_sides)
                for rank, d_side in new], rest


def _walk_floor(bound: DecodeRateBound, output_len: int, steps: StepTable, usd_per_hour: float,
                floor: float) -> float:
    """The decode pool's walk floor: the tighter bound's (planner.serving.decode_bound), at least the sizing
    bound's `floor` (both hold), infinite where no rate passes (no bound, or a bound of 0: no segment of
    loads within the headroom lets one sequence's step meet its cap)."""
    rate = bound.per_s(output_len, steps)
    return math.inf if not rate else max(floor, usd_per_hour / rate)


def disaggregated_options(base_scenario: dict[str, Any], prefill_pool: Sequence[PoolCandidate],
                          decode_pool: Sequence[PoolCandidate], requests_per_s: float, prompt_len: int,
                          output_len: int, context_len: int, ttft_slo_ms: float, itl_slo_ms: float,
                          price_of: Callable[[str, Any], float | None], shape: TrafficShape | None = None,
                          percentile: int = 90, memo: LayoutMemo | None = None,
                          max_utilization: float | None = None, finish_first: int | None = None,
                          tpot_slo_ms: float | None = None) -> tuple[list[dict[str, Any]], int]:
    """Cheapest disaggregated fleets (prefill and decode pools may use different GPUs and layouts of one
    vendor; they share the weight and KV precision so the KV cache transfers as is, over the engine's
    documented path). Returns (options, searched).
    `memo`: per-layout figures shared with the request's aggregated search (same model and settings);
    `max_utilization`: the headroom, each pool's share of its capacity at most (serving.pool_checks);
    `finish_first`: only the first this many options (cheapest first) carry their TTFT figures (nothing ranks
    by them: a caller that returns no more leaves the rest's None), all when None; a pairing whose floor is
    above the `finish_first`-th cheapest option is not built at all (planner.serving.cheapest_first)."""
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
                                          context_len, itl_slo_ms, percentile, set(paths), max_utilization,
                                          tpot_slo_ms)
    decode_sides: dict[int, DecodeSide] = {}

    def side_of(dw: DecodeWorker) -> DecodeSide:  # every prefill candidate meets the same decode fleet
        if id(dw) not in decode_sides:
            decode_sides[id(dw)] = decode_fleet(dw, requests_per_s, percentile)
        return decode_sides[id(dw)]

    def pair(p_side: Priced, d_side: Priced, path: KvTransferPath) -> Pairing:
        return _pairing(p_side, d_side, functools.partial(side_of, d_side[1]), path, requests_per_s,
                        prompt_len, output_len, ttft_slo_ms, percentile, max_utilization)
    groups = [_PoolPairings(sorted(prefills[key], key=lambda x: x[0])[:KEEP_PER_POOL], decodes[key],
                            requests_per_s, functools.partial(pair, path=path))
              for key, path in paths.items() if key in decodes]
    keep = finish_first or KEEP_PER_POOL * KEEP_PER_POOL * len(groups) + 1
    options = build_cheapest_grouped(groups, keep, lambda o: o["usd_per_hour"])
    return _finished(options, finish_first), searched_p + searched_d


def _pairing(p_side: Priced, d_side: Priced, decode: Callable[[], DecodeSide], path: KvTransferPath,
             requests_per_s: float, prompt_len: int, output_len: int, ttft_slo_ms: float, percentile: int,
             max_utilization: float | None) -> tuple[float, Callable[[], dict[str, Any] | None]]:
    """A pairing of the pools: a floor under its fleet's $/hour (its decode workers, and the fewest prefill
    workers their capacity allows: pool_checks.fewest_prefill_workers never goes below its headroom's count)
    and the fleet's option on demand (None where no count meets the objectives). `decode`: the decode side
    (decode_fleet), asked only when the fleet is built: the floor needs its count of workers alone."""
    pw, dw = p_side[1], d_side[1]
    decode_workers = fewest_decode_workers(dw.goodput_per_s, requests_per_s)  # decode_fleet's, without extra
    floor = _prefill_floor_usd(p_side, requests_per_s) + decode_workers * dw.gpus * d_side[3]

    def build() -> dict[str, Any] | None:
        sized = _sized(pw, dw, requests_per_s, prompt_len, ttft_slo_ms, percentile, decode(), max_utilization)
        return None if sized is None else fleet_option(sized, p_side, d_side, requests_per_s, output_len,
                                                  percentile, path)
    return floor, build


def _prefill_floor_usd(p_side: Priced, requests_per_s: float) -> float:
    """A pairing's floor's prefill part: the fewest prefill workers their capacity allows, their $/hour."""
    pw = p_side[1]
    prefill_workers = math.ceil(requests_per_s / pw.prompts_per_s * (1 - 1e-9)) if pw.prompts_per_s > 0 else 1
    return max(prefill_workers, 1) * pw.gpus * p_side[3]


def _finished(options: list[dict[str, Any]], first: int | None) -> list[dict[str, Any]]:
    """The options cheapest first, the first `first` (all: None) with their TTFT figures filled."""
    options.sort(key=lambda o: (o["usd_per_hour"], o["itl_ms"]))
    for i, option in enumerate(options):
        finish = option.pop("_finish")
        if first is None or i < first:
            finish()
    return options


__all__ = ["PoolCandidate", "disaggregated_options", "DecodeWorker", "DisaggregatedFleet", "PrefillWorker",
           "decode_worker", "kv_transfer_ms",
           "decode_fleet",
           "TrafficShape", "layout_summary", "prefill_worker", "size_fleet"]
