"""Disaggregated serving: prefill workers and decode workers, each with its own GPU type and layout.

A request's prompt runs on a prefill worker, its KV cache crosses the scale-out network to a decode
worker (counted in TTFT), and the decode worker generates every output token with no prefill beside
it, so its ITL is the plan's decode step at its batch (no chunked-prefill interference).

  * Prefill worker: a queue of prompts. A worker runs `attention_dp` prompts at once (one per attention
    group under EP) and `pp` more in its pipeline, each in `prefill_ms`; its capacity is
    attention_dp x pp / prefill_ms. Arrivals are Poisson and prompts take the same time, so the wait is
    an M/D/1 queue's, W = rho S / (2 (1 - rho)) with S the time per prompt slot.
  * KV transfer: prompt_len x the model's KV bytes per token (all layers), sent by the prefill worker's
    GPUs that hold it (tp x pp, each its share) to the decode worker's over one NIC each, at
    NETWORK_EFFICIENCY of the slower NIC, plus one network latency. Engines stream it layer by layer
    (NIXL, Mooncake) and hide part of it; it is counted whole here (conservative).
  * Decode worker: at batch b its ITL is decode_step(b) and it emits b / ITL tokens per second.
  * Worker counts: prefill workers = the fewest whose TTFT (wait + prefill + transfer + first decode
    step + serving overhead) meets the objective; decode workers = ceil(output tokens/s demanded /
    one worker's tokens/s at the largest batch whose ITL meets the objective and whose KV fits).
    The prefill:decode ratio is what balances this traffic mix.
What is not modelled: KV transfer contention with the expert all-to-alls on the same NICs, prefix
caching across workers, the router's queueing, and decode workers' idle slots during bursts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import ValidationError

from planner.communication import NETWORK_EFFICIENCY
from planner.deployment import Deployment
from planner.errors import ScenarioError
from planner.latency import decode_step, prefill, ttft_ms
from planner.memory import kv_bytes_per_token, plan_memory
from planner.parallelism import sharding
from planner.scenario import Scenario, resolve
from planner.sweep import batch_grid

MAX_PREFILL_UTILIZATION = 0.95


def kv_transfer_ms(prefill_d: Deployment, decode_d: Deployment, prompt_len: float) -> float:
    """Time to move one prompt's KV cache from its prefill worker to its decode worker."""
    bytes_total = float(kv_bytes_per_token(prefill_d.model, prefill_d.kv_cache)) * prompt_len
    senders = prefill_d.tp * prefill_d.pp
    receivers = decode_d.tp * decode_d.pp
    nic_gb_s = min(prefill_d.gpu.network_gb_s, decode_d.gpu.network_gb_s)
    links = max(1, min(senders, receivers))
    latency_us = max(prefill_d.gpu.network_latency_us, decode_d.gpu.network_latency_us)
    return bytes_total / (links * NETWORK_EFFICIENCY * nic_gb_s * 1e9) * 1e3 + latency_us / 1e3


def md1_wait_ms(arrival_per_ms, service_ms: float):
    """Mean wait in an M/D/1 queue (Pollaczek-Khinchine, deterministic service)."""
    rho = np.asarray(arrival_per_ms, dtype=float) * service_ms
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(rho < 1, rho * service_ms / (2 * (1 - rho)), np.inf)


@dataclass(frozen=True)
class PrefillWorker:
    deployment: Deployment
    prefill_ms: float
    prompts_per_s: float  # capacity
    gpus: int


def prefill_worker(d: Deployment, prompt_len: int) -> PrefillWorker:
    s = sharding(d)
    t = float(prefill(d, prompt_len, s.attention_dp).total_ms)
    return PrefillWorker(d, t, s.attention_dp * s.pp * 1000.0 / t, s.gpus_per_replica)


@dataclass(frozen=True)
class DecodeWorker:
    deployment: Deployment
    batch: int
    itl_ms: float
    output_tokens_per_s: float
    gpus: int


def decode_worker(d: Deployment, context_len: int, mean_context: float, itl_slo_ms: float) -> DecodeWorker | None:
    """The decode worker at its most productive batch whose ITL meets the objective and whose KV fits."""
    mem = plan_memory(d, context_len)
    if not mem.fits:
        return None
    batches = batch_grid(mem.max_batch)
    batches = batches[batches <= mem.max_batch]
    itl = np.asarray(decode_step(d, batches, mean_context).total_ms)
    ok = itl <= itl_slo_ms
    if not ok.any():
        return None
    tput = np.where(ok, batches * 1000.0 / itl, -1.0)
    i = int(np.argmax(tput))
    return DecodeWorker(d, int(batches[i]), float(itl[i]), float(tput[i]), sharding(d).gpus_per_replica)


@dataclass(frozen=True)
class DisaggregatedFleet:
    prefill: PrefillWorker
    decode: DecodeWorker
    prefill_workers: int
    decode_workers: int
    ttft_ms: float
    kv_transfer_ms: float
    prefill_utilization: float


def size_fleet(p: PrefillWorker, dw: DecodeWorker, requests_per_s: float, prompt_len: int, output_len: int,
               ttft_slo_ms: float) -> DisaggregatedFleet | None:
    """Fewest prefill and decode workers for the traffic, or None when no prefill count meets TTFT."""
    transfer = kv_transfer_ms(p.deployment, dw.deployment, prompt_len)
    fixed = ttft_ms(p.deployment, p.prefill_ms) + transfer + dw.itl_ms
    if fixed > ttft_slo_ms:
        return None
    slots = p.prompts_per_s * p.prefill_ms / 1000.0  # prompts a worker runs at once
    lam_per_ms = requests_per_s / 1000.0
    n = max(1, math.ceil(requests_per_s / (p.prompts_per_s * MAX_PREFILL_UTILIZATION)))
    # one slot-queue per concurrently running prompt: arrivals split evenly over n x slots servers
    for workers in range(n, n + 4096):
        wait = float(md1_wait_ms(lam_per_ms / (workers * slots), p.prefill_ms))
        if fixed + wait <= ttft_slo_ms:
            break
    else:
        return None
    decode_workers = max(1, math.ceil(requests_per_s * output_len / dw.output_tokens_per_s))
    return DisaggregatedFleet(p, dw, workers, decode_workers, float(fixed + wait), transfer,
                              requests_per_s / (workers * p.prompts_per_s))


def layout_summary(d: Deployment, gpu_key: str) -> dict[str, Any]:
    s = sharding(d)
    return {"gpu": gpu_key, "tp": s.tp, "pp": s.pp, "ep": s.ep, "weights": d.weights, "kv_cache": d.kv_cache,
            "gpus_per_worker": s.gpus_per_replica, "nodes_per_worker": s.nodes_per_replica}


KEEP_PER_POOL = 8  # best candidates per pool that are paired (cost per unit of work)


@dataclass(frozen=True)
class PoolCandidate:
    gpu_key: str
    gpu_value: str | dict[str, Any]
    tp: int
    pp: int
    ep: int
    weights: str
    kv_cache: str


def _deployment(base: dict[str, Any], c: PoolCandidate) -> Deployment | None:
    try:
        scenario = Scenario.model_validate({**base, "gpu": c.gpu_value, "tp": c.tp, "pp": c.pp, "ep": c.ep,
                                            "weights": c.weights, "kv_cache": c.kv_cache})
        return resolve(scenario)
    except (ScenarioError, ValidationError):
        return None


def disaggregated_options(base_scenario: dict[str, Any], prefill_pool: Sequence[PoolCandidate],
                          decode_pool: Sequence[PoolCandidate], requests_per_s: float, prompt_len: int,
                          output_len: int, context_len: int, ttft_slo_ms: float, itl_slo_ms: float,
                          price_of: Callable[[str, Any], float | None]) -> tuple[list[dict[str, Any]], int]:
    """Cheapest disaggregated fleets (prefill and decode pools may use different GPUs and layouts; they
    share the weight and KV precision so the KV cache transfers as is). Returns (options, searched)."""
    mean_context = prompt_len + output_len / 2
    searched = 0
    resolved: dict[tuple, Deployment | None] = {}

    def deployment_of(c: PoolCandidate) -> Deployment | None:
        key = (c.gpu_key, c.tp, c.pp, c.ep, c.weights, c.kv_cache)
        if key not in resolved:  # the two pools usually share candidates: resolve each once
            resolved[key] = _deployment(base_scenario, c)
        return resolved[key]

    prefills: dict[tuple[str, str], list[tuple[float, PrefillWorker, str, float]]] = {}
    for c in prefill_pool:
        d = deployment_of(c)
        price = price_of(c.gpu_key, c.gpu_value)
        if d is None or price is None or not plan_memory(d, prompt_len + 1).fits:
            continue
        searched += 1
        w = prefill_worker(d, prompt_len)
        if ttft_ms(d, w.prefill_ms) > ttft_slo_ms:
            continue
        prefills.setdefault((c.weights, c.kv_cache), []).append((price * w.gpus / w.prompts_per_s, w, c.gpu_key, price))
    decodes: dict[tuple[str, str], list[tuple[float, DecodeWorker, str, float]]] = {}
    for c in decode_pool:
        d = deployment_of(c)
        price = price_of(c.gpu_key, c.gpu_value)
        if d is None or price is None:
            continue
        dw = decode_worker(d, context_len, mean_context, itl_slo_ms)
        searched += 1
        if dw is None:
            continue
        decodes.setdefault((c.weights, c.kv_cache), []).append(
            (price * dw.gpus / dw.output_tokens_per_s, dw, c.gpu_key, price))
    options = []
    demand_tokens_per_s = requests_per_s * output_len
    for key, pre in prefills.items():
        for _, pw, p_key, p_price in sorted(pre, key=lambda x: x[0])[:KEEP_PER_POOL]:
            for _, dw, d_key, d_price in sorted(decodes.get(key, []), key=lambda x: x[0])[:KEEP_PER_POOL]:
                fleet = size_fleet(pw, dw, requests_per_s, prompt_len, output_len, ttft_slo_ms)
                if fleet is None:
                    continue
                gpus_p, gpus_d = fleet.prefill_workers * pw.gpus, fleet.decode_workers * dw.gpus
                usd = gpus_p * p_price + gpus_d * d_price
                options.append({
                    "mode": "disaggregated", "prefill_workers": fleet.prefill_workers,
                    "decode_workers": fleet.decode_workers,
                    "prefill_decode_ratio": fleet.prefill_workers / fleet.decode_workers,
                    "prefill": {**layout_summary(pw.deployment, p_key), "prefill_ms": pw.prefill_ms,
                                "prompts_per_s_per_worker": pw.prompts_per_s,
                                "utilization": fleet.prefill_utilization, "usd_per_gpu_hour": p_price},
                    "decode": {**layout_summary(dw.deployment, d_key), "batch": dw.batch, "itl_ms": dw.itl_ms,
                               "output_tokens_per_s_per_worker": dw.output_tokens_per_s, "usd_per_gpu_hour": d_price},
                    "gpus_total": gpus_p + gpus_d, "ttft_ms": fleet.ttft_ms, "itl_ms": dw.itl_ms,
                    "kv_transfer_ms": fleet.kv_transfer_ms, "usd_per_hour": usd,
                    "usd_per_million_output_tokens": usd / (demand_tokens_per_s * 3600.0) * 1e6,
                })
    options.sort(key=lambda o: (o["usd_per_hour"], o["itl_ms"]))
    return options, searched


__all__ = ["PoolCandidate", "disaggregated_options", "DecodeWorker", "DisaggregatedFleet", "PrefillWorker", "decode_worker", "kv_transfer_ms",
           "layout_summary", "md1_wait_ms", "prefill_worker", "size_fleet"]
