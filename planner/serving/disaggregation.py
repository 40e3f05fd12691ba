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
What is not modelled: the expert weights that concurrently busy attention groups of an EP prefill worker
share (each slot is timed as the worker's lone prompt: optimistic, up to 1.55x for DeepSeek-V3 EP 8 at
2,000 tokens), KV transfer contention with the expert all-to-alls on the same NICs, prefix caching across
workers, the router's queueing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from pydantic import ValidationError

from planner.core.deployment import Deployment
from planner.core.errors import ScenarioError
from planner.economics.cost import usd_per_million_tokens
from planner.hardware.communication import NETWORK_EFFICIENCY
from planner.hardware.parallelism import sharding
from planner.physics.latency import prefill
from planner.physics.memory import kv_bytes_per_token, plan_memory
from planner.scenario.scenario import Scenario, resolve
from planner.serving.distributions import latency_percentiles
from planner.serving.replica import ReplicaModel, load_point, replica_model
from planner.serving.serving import goodput_per_ms
from planner.serving.sizing import LayoutCandidate, rate_bound_per_s
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


def prefill_worker(d: Deployment, shape: TrafficShape | int) -> PrefillWorker:
    shape = shape if isinstance(shape, TrafficShape) else TrafficShape(int(shape), 1)
    s = sharding(d)
    w = replica_workload(d, shape.prompt_len, 1, 1, replace(shape, output_len_cv=0.0))  # one token out, fixed
    m = replica_model(d, w)
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
    mem = plan_memory(d, context_len)
    if not mem.fits:
        return None
    w = replica_workload(d, shape.prompt_len, shape.output_len, mem.max_batch, shape, prefix_cache_hit=1.0,
                         ttft_overhead_ms=0.0)
    m = replica_model(d, w)
    goodput = goodput_per_ms(m, percentile, None, itl_slo_ms)
    if not goodput > 0:
        return None
    p = load_point(m, goodput)
    itl = latency_percentiles(m, p)[1].at(percentile)
    if itl is None:
        return None
    return DecodeWorker(d, m, mem.max_batch, goodput * 1000.0, max(1, round(float(p.population))), itl,
                        goodput * 1000.0 * float(np.mean(m.output_tokens)), sharding(d).gpus_per_replica)


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


def size_fleet(p: PrefillWorker, dw: DecodeWorker, requests_per_s: float, prompt_len: int, output_len: int,
               ttft_slo_ms: float, percentile: int = 90) -> DisaggregatedFleet | None:
    """Fewest prefill and decode workers for the traffic, or None when no prefill count meets TTFT."""
    transfer = kv_transfer_ms(p.deployment, dw.deployment, prompt_len)
    budget = ttft_slo_ms - transfer - dw.itl_ms  # what the prefill queue and prompt may take
    if not budget > 0:
        return None
    per_slot = goodput_per_ms(p.model, percentile, budget, None) * 1000.0
    if not per_slot > 0:
        return None
    workers = max(1, math.ceil(requests_per_s / (p.slots * per_slot) * (1 - 1e-12)))
    point = load_point(p.model, requests_per_s / (workers * p.slots) / 1000.0)
    ttft = latency_percentiles(p.model, point)[0].at(percentile)
    decode_workers = max(1, math.ceil(requests_per_s / dw.goodput_per_s * (1 - 1e-12)))
    dpoint = load_point(dw.model, requests_per_s / decode_workers / 1000.0)
    itl = latency_percentiles(dw.model, dpoint)[1].at(percentile)
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


Priced = tuple[float, Any, str, float]  # (cost per unit of work, worker, GPU key, $/GPU-hour)


def _prefill_candidates(prefill_pool: Sequence[PoolCandidate], deployment_of: Callable[[PoolCandidate], Any],
                        price_of: Callable[[str, Any], float | None], shape: TrafficShape, prompt_len: int,
                        ttft_slo_ms: float) -> tuple[dict[tuple[str, str], list[Priced]], int]:
    """Prefill workers that fit and serve a lone prompt within the TTFT objective, by (weights, KV) and priced
    per prompt per second; and how many were searched."""
    searched = 0
    prefills: dict[tuple[str, str], list[Priced]] = {}
    for c in prefill_pool:
        d = deployment_of(c)
        price = price_of(c.gpu_key, c.gpu_value)
        if d is None or price is None or not plan_memory(d, prompt_len + 1).fits:
            continue
        searched += 1
        w = prefill_worker(d, shape)
        if w.prefill_ms + d.efficiency.ttft_overhead_ms > ttft_slo_ms:  # even a lone prompt is too slow
            continue
        prefills.setdefault((c.weights, c.kv_cache), []).append(
            (price * w.gpus / w.prompts_per_s, w, c.gpu_key, price)
        )
    return prefills, searched


def _decode_candidates(decode_pool: Sequence[PoolCandidate], deployment_of: Callable[[PoolCandidate], Any],
                       price_of: Callable[[str, Any], float | None], shape: TrafficShape, context_len: int,
                       itl_slo_ms: float, percentile: int) -> tuple[dict[tuple[str, str], list[Priced]], int]:
    """Decode workers by (weights, KV), priced per request per second at their goodput; and how many were
    searched. Cheapest goodput bound first, goodput searched until the KEEP_PER_POOL best found cost less per
    request than any bound left (planner.serving.sizing's bound, prompt work 0: it is cached)."""
    searched = 0
    bounded: dict[tuple[str, str], list[tuple[float, PoolCandidate, Deployment, float]]] = {}
    for c in decode_pool:
        d = deployment_of(c)
        price = price_of(c.gpu_key, c.gpu_value)
        if d is None or price is None:
            continue
        searched += 1
        mem = plan_memory(d, context_len)
        if not mem.fits:
            continue
        bound = rate_bound_per_s(d, shape.prompt_len + shape.output_len / 2, mem.max_batch, shape.output_len,
                                 itl_slo_ms, 0.0)
        floor = 0.0 if bound is None else price * sharding(d).gpus_per_replica / bound
        bounded.setdefault((c.weights, c.kv_cache), []).append((floor, c, d, price))
    decodes: dict[tuple[str, str], list[Priced]] = {}
    for key, candidates in bounded.items():
        kept: list[Priced] = []
        for floor, c, d, price in sorted(candidates, key=lambda x: x[0]):
            if len(kept) >= KEEP_PER_POOL and floor > sorted(k[0] for k in kept)[KEEP_PER_POOL - 1]:
                break
            dw = decode_worker(d, context_len, shape, itl_slo_ms, percentile)
            if dw is not None:
                kept.append((price * dw.gpus / dw.goodput_per_s, dw, c.gpu_key, price))
        decodes[key] = kept
    return decodes, searched


def _option(fleet: DisaggregatedFleet, prefill: Priced, decode: Priced, requests_per_s: float,
            output_len: int, percentile: int) -> dict[str, Any]:
    """One disaggregated fleet as a sizing option (the contract's option fields)."""
    _, pw, p_key, p_price = prefill
    _, dw, d_key, d_price = decode
    gpus_p, gpus_d = fleet.prefill_workers * pw.gpus, fleet.decode_workers * dw.gpus
    usd = gpus_p * p_price + gpus_d * d_price
    return {
        "mode": "disaggregated", "prefill_workers": fleet.prefill_workers,
        "decode_workers": fleet.decode_workers,
        "prefill_decode_ratio": fleet.prefill_workers / fleet.decode_workers,
        "prefill": {
            **layout_summary(pw.deployment, p_key),
            "prefill_ms": pw.prefill_ms, "prompts_per_s_per_worker": pw.prompts_per_s,
            "utilization": fleet.prefill_utilization, "usd_per_gpu_hour": p_price,
        },
        "decode": {
            **layout_summary(dw.deployment, d_key),
            "batch": fleet.decode_batch, "itl_ms": fleet.itl_ms, "max_running": dw.max_running,
            "goodput_request_rate": dw.goodput_per_s,
            "request_rate_per_worker": requests_per_s / fleet.decode_workers,
            "output_tokens_per_s_per_worker": dw.output_tokens_per_s, "usd_per_gpu_hour": d_price,
        },
        "gpus_total": gpus_p + gpus_d, "ttft_ms": fleet.ttft_ms, "itl_ms": fleet.itl_ms,
        "percentile": percentile, "kv_transfer_ms": fleet.kv_transfer_ms, "usd_per_hour": usd,
        "usd_per_million_output_tokens": usd_per_million_tokens(usd, requests_per_s * output_len),
    }


def disaggregated_options(base_scenario: dict[str, Any], prefill_pool: Sequence[PoolCandidate],
                          decode_pool: Sequence[PoolCandidate], requests_per_s: float, prompt_len: int,
                          output_len: int, context_len: int, ttft_slo_ms: float, itl_slo_ms: float,
                          price_of: Callable[[str, Any], float | None], shape: TrafficShape | None = None,
                          percentile: int = 90) -> tuple[list[dict[str, Any]], int]:
    """Cheapest disaggregated fleets (prefill and decode pools may use different GPUs and layouts; they share
    the weight and KV precision so the KV cache transfers as is). Returns (options, searched)."""
    shape = shape or TrafficShape(prompt_len, output_len)
    resolved: dict[tuple, Deployment | None] = {}

    def deployment_of(c: PoolCandidate) -> Deployment | None:
        key = (c.gpu_key, c.tp, c.pp, c.ep, c.weights, c.kv_cache)
        if key not in resolved:  # the two pools usually share candidates: resolve each once
            resolved[key] = _deployment(base_scenario, c)
        return resolved[key]

    prefills, searched_p = _prefill_candidates(
        prefill_pool, deployment_of, price_of, shape, prompt_len, ttft_slo_ms
    )
    decodes, searched_d = _decode_candidates(
        decode_pool, deployment_of, price_of, shape, context_len, itl_slo_ms, percentile
    )
    options = []
    for key, pre in prefills.items():
        for p_worker in sorted(pre, key=lambda x: x[0])[:KEEP_PER_POOL]:
            for d_worker in sorted(decodes.get(key, []), key=lambda x: x[0])[:KEEP_PER_POOL]:
                fleet = size_fleet(
                    p_worker[1], d_worker[1], requests_per_s, prompt_len, output_len, ttft_slo_ms, percentile
                )
                if fleet is not None:
                    options.append(_option(fleet, p_worker, d_worker, requests_per_s, output_len, percentile))
    options.sort(key=lambda o: (o["usd_per_hour"], o["itl_ms"]))
    return options, searched_p + searched_d


__all__ = [
    "PoolCandidate", "disaggregated_options", "DecodeWorker", "DisaggregatedFleet", "PrefillWorker",
    "decode_worker", "kv_transfer_ms", "TrafficShape", "layout_summary", "prefill_worker", "size_fleet",
]
