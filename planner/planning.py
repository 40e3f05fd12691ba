"""plan(scenario) -> Plan: every figure of the contract's plan, from the pure modules."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Literal

from pydantic import BaseModel

from planner.bands import Band, error_band
from planner.cost import usd_per_million_output_tokens
from planner.deployment import Deployment
from planner.latency import decode_step, prefill, ttft_ms
from planner.memory import engine_memory_fields, plan_memory
from planner.parallelism import (
    ParallelismSection,
    cheapest_layout_that_fits,
    parallelism_section,
    parallelism_warnings,
)
from planner.roofline import ridge_crossing_batch, ridge_flop_per_byte
from planner.scenario import Scenario, parse_scenario, resolution_notes, resolve
from planner.speculative import plan_speculative

MAX_TP_SUGGESTION = 64


class ModelSummary(BaseModel):
    name: str
    total_params: float
    active_params: float
    non_embedding_params: float


class MemorySection(BaseModel):
    weights_gb_per_gpu: float
    kv_bytes_per_token: float
    kv_bytes_per_token_per_gpu: float
    kv_budget_gb_per_gpu: float
    max_batch: int
    fits: bool
    # extensions
    kv_bytes_per_sequence_per_gpu: float
    usable_gb_per_gpu: float
    reserve_gb: float
    kv_gb_per_gpu_at_batch: float
    weights_fit: bool
    smallest_tp_that_fits: int | None
    smallest_layout_that_fits: dict[str, int] | None = None  # {tp, pp, ep, gpus_per_replica, nodes_per_replica}
    # extensions (engine memory, planner.engine_memory): waterfall in GiB and vLLM's start-up lines
    engine_rules: str = "napkin"
    vllm_version: str | None = None
    waterfall_gib: dict[str, float | None] | None = None
    kv_cache_tokens: int | None = None
    max_concurrency: float | None = None
    num_gpu_blocks: int | None = None
    engine_log_lines: list[str] = []
    kv_cache_groups: list[dict[str, Any]] = []
    block_size: int | None = None
    max_model_len: int | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None


class RooflineSection(BaseModel):
    ridge_flop_per_byte: float
    decode_ai: float
    ridge_crossing_batch: int | None
    regime: Literal["memory-bound", "compute-bound"]
    # extensions
    compute_precision: str
    prefill_ai: float
    decode_flops_per_gpu: float
    decode_bytes_per_gpu: float
    prefill_flops_per_gpu: float


class LatencySection(BaseModel):
    prefill_ms: float
    ttft_ms: float
    itl_ms: float
    itl_ms_bound: float
    # extensions
    prefill_ms_bound: float
    batch: int
    mean_context: float
    decode_breakdown_ms: dict[str, float]
    prefill_breakdown_ms: dict[str, float]
    itl_band_ms: Band | None
    ttft_band_ms: Band | None


class ThroughputSection(BaseModel):
    output_tokens_per_s: float
    output_tokens_per_s_bound: float
    tokens_per_s_per_user: float
    output_tokens_per_s_band: Band | None


class CostSection(BaseModel):
    usd_per_million_output_tokens: float
    usd_per_gpu_hour: float
    usd_per_replica_hour: float


class SpeculativeSection(BaseModel):
    tokens_per_round: float
    itl_ms: float
    round_ms: float
    output_tokens_per_s: float


class Plan(BaseModel):
    memory: MemorySection
    roofline: RooflineSection
    latency: LatencySection
    throughput: ThroughputSection
    cost: CostSection
    speculative: SpeculativeSection | None
    model: ModelSummary
    gpu: str
    tp: int
    efficiency: str
    calibration: str | None
    warnings: list[str]
    parallelism: ParallelismSection | None = None


def is_default_engine_name(d: Deployment) -> bool:
    return d.efficiency.name == "default-engine"


def smallest_tp_that_fits(d: Deployment, context_len: int) -> int | None:
    tp = 1
    while tp <= min(MAX_TP_SUGGESTION, d.model.n_heads):
        trial = dataclasses.replace(d, tp=tp)
        if plan_memory(trial, context_len).fits:
            return tp
        tp *= 2
    return None


def smallest_layout_that_fits(d: Deployment, context_len: int) -> dict[str, int] | None:
    """The cheapest tp x pp x ep that holds the weights and one sequence, across nodes when it must."""
    fit = cheapest_layout_that_fits(d, lambda trial: plan_memory(trial, context_len).fits)
    if fit is None:
        return None
    s = parallelism_section(fit)
    return {"tp": s.tp, "pp": s.pp, "ep": s.ep, "gpus_per_replica": s.gpus_per_replica,
            "nodes_per_replica": s.nodes_per_replica}


def plan(scenario: Scenario | dict[str, Any]) -> Plan:
    if not isinstance(scenario, Scenario):
        scenario = parse_scenario(scenario)
    d = resolve(scenario)
    context_len = scenario.context_len_resolved
    mem = plan_memory(d, context_len)
    batch = scenario.batch if scenario.batch is not None else max(1, mem.max_batch)
    mean_ctx = scenario.mean_context

    step = decode_step(d, batch, mean_ctx)
    itl = float(step.total_ms)
    itl_bound = float(step.bound_ms)
    work = step.work
    decode_ai = float(work.arithmetic_intensity)
    ridge = ridge_flop_per_byte(d)
    pre = prefill(d, scenario.prompt_len)
    prefill_ms = float(pre.total_ms)
    ttft = float(ttft_ms(d, prefill_ms))

    tokens_per_s = batch * 1000.0 / itl
    price = scenario.usd_per_gpu_hour or d.gpu.usd_per_hour
    layout = parallelism_section(d)
    warnings: list[str] = parallelism_warnings(d, scenario.ep) + resolution_notes(scenario, d)
    if price is None:
        price = float("nan")
        warnings.append("no $/GPU-hour: give usd_per_gpu_hour for a custom GPU to get costs")
    if is_default_engine_name(d) and (d.gpu.vendor or "nvidia") != "nvidia":
        warnings.append(f"the default engine is calibrated on NVIDIA GPUs; {d.gpu.vendor} software stacks often reach a "
                        "lower fraction of peak: calibrate with your own benchmark before buying")
    if not mem.fits:
        warnings.append("the weights and one sequence do not fit in the KV budget at this TP")
    elif batch > mem.max_batch:
        warnings.append(f"batch {batch} exceeds the max batch {mem.max_batch} that fits at context {context_len}")

    spec = None
    if scenario.speculative is not None:
        s = scenario.speculative
        sp = plan_speculative(d, batch, mean_ctx, s.draft_tokens, s.acceptance, s.draft_params)
        spec = SpeculativeSection(tokens_per_round=sp.tokens_per_round, itl_ms=sp.itl_ms, round_ms=sp.round_ms,
                                  output_tokens_per_s=batch * 1000.0 / sp.itl_ms)

    counts = d.params
    is_default_engine = scenario.efficiency == "default"
    itl_band = error_band("itl", itl) if is_default_engine else None
    ttft_band = error_band("ttft", ttft) if is_default_engine else None
    tps_band = (Band(low=batch * 1000.0 / itl_band.high, high=batch * 1000.0 / itl_band.low)
                if itl_band else None)
    calibration = scenario.calibration.name if (
        scenario.calibration is not None and scenario.calibration.applies_to(
            scenario.gpu if isinstance(scenario.gpu, str) else None) and is_default_engine) else None

    return Plan(
        memory=MemorySection(
            weights_gb_per_gpu=mem.weights_gb_per_gpu, kv_bytes_per_token=mem.kv_bytes_per_token,
            kv_bytes_per_token_per_gpu=mem.kv_bytes_per_token_per_gpu,
            kv_budget_gb_per_gpu=mem.kv_budget_gb_per_gpu, max_batch=mem.max_batch, fits=mem.fits,
            kv_bytes_per_sequence_per_gpu=mem.kv_bytes_per_sequence_per_gpu,
            usable_gb_per_gpu=mem.usable_gb_per_gpu, reserve_gb=mem.reserve_gb,
            kv_gb_per_gpu_at_batch=min(batch, mem.max_batch) * mem.kv_bytes_per_sequence_per_gpu / 1e9,
            weights_fit=mem.weights_fit,
            smallest_tp_that_fits=d.tp if mem.fits else smallest_tp_that_fits(d, context_len),
            smallest_layout_that_fits=None if mem.fits else smallest_layout_that_fits(d, context_len),
            **engine_memory_fields(mem),
        ),
        roofline=RooflineSection(
            ridge_flop_per_byte=ridge, decode_ai=decode_ai,
            ridge_crossing_batch=ridge_crossing_batch(d, mean_ctx),
            regime="compute-bound" if decode_ai >= ridge else "memory-bound",
            compute_precision=d.compute, prefill_ai=float(pre.work.arithmetic_intensity),
            decode_flops_per_gpu=float(work.flops), decode_bytes_per_gpu=float(work.bytes),
            prefill_flops_per_gpu=float(pre.work.flops),
        ),
        latency=LatencySection(
            prefill_ms=prefill_ms, ttft_ms=ttft, itl_ms=itl, itl_ms_bound=itl_bound,
            prefill_ms_bound=float(pre.bound_ms), batch=batch, mean_context=mean_ctx,
            decode_breakdown_ms=step.breakdown(), prefill_breakdown_ms=pre.breakdown(),
            itl_band_ms=itl_band, ttft_band_ms=ttft_band,
        ),
        throughput=ThroughputSection(
            output_tokens_per_s=tokens_per_s, output_tokens_per_s_bound=batch * 1000.0 / itl_bound,
            tokens_per_s_per_user=1000.0 / itl, output_tokens_per_s_band=tps_band,
        ),
        cost=CostSection(
            usd_per_million_output_tokens=float(usd_per_million_output_tokens(layout.gpus_per_replica, price,
                                                                              tokens_per_s)),
            usd_per_gpu_hour=price, usd_per_replica_hour=price * layout.gpus_per_replica,
        ),
        speculative=spec,
        model=ModelSummary(name=d.model.name, total_params=counts.total, active_params=counts.active,
                           non_embedding_params=counts.non_embedding),
        gpu=d.gpu.name, tp=d.tp, efficiency=d.efficiency.name, calibration=calibration, warnings=warnings,
        parallelism=layout,
    )


def clean_json(value: Any) -> Any:
    """JSON-ready data: NaN and infinities become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: clean_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_json(v) for v in value]
    return value


def plan_dict(scenario: Scenario | dict[str, Any]) -> dict[str, Any]:
    """The plan as JSON-ready data (NaN becomes null)."""
    return clean_json(plan(scenario).model_dump())


__all__ = ["Plan", "clean_json", "plan", "plan_dict"]
