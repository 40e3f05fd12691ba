"""plan(scenario) -> Plan: every figure of the contract's plan, from the pure modules."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from pydantic import BaseModel

from gpu_catalog import GpuSpec, load_catalog
from planner.contract.launch import SGLANG_KV_DTYPE, TRTLLM_KV_DTYPE, VLLM_KV_DTYPE
from planner.contract.plan_sections import (
    BenchmarkSection,
    CostSection,
    FitAlternatives,
    GpuChoice,
    LatencyPercentiles,
    LatencySection,
    MemorySection,
    ModelSummary,
    PrecisionChoice,
    RooflineSection,
    ServingSection,
    SpeculativeSection,
    ThroughputSection,
    TpotSummary,
)
from planner.core.deployment import Deployment
from planner.core.precision import KV_PRECISIONS, WEIGHT_PRECISIONS, default_compute_precision
from planner.economics.cost import gpu_price, usd_per_million_output_tokens
from planner.economics.plan_power import EconomicsSection, economics_section
from planner.engines.base import FLOOR_ENGINE
from planner.engines.profiles import engine_efficiency, is_engine_profile, production_terms, with_efficiency
from planner.hardware.parallelism import (
    ParallelismSection,
    cheapest_layout_that_fits,
    parallelism_section,
    parallelism_warnings,
    valid_tps,
)
from planner.physics.bands import UNVALIDATED, Band
from planner.physics.latency import StepTime, decode_step, prefill, ttft_ms
from planner.physics.memory import MemoryPlan, engine_memory_fields, engine_memory_warnings, plan_memory
from planner.physics.record_bands import plan_band
from planner.physics.roofline import ridge_crossing_batch, ridge_flop_per_byte
from planner.physics.speculative import plan_speculative
from planner.physics.step_predictor import predictor_name
from planner.scenario.scenario import Scenario, parse_scenario, resolution_notes, resolve
from planner.serving.benchmark_client import (
    BenchmarkClient,
    BenchmarkRun,
    Summary,
    at_benchmark,
    run_benchmark,
)
from planner.serving.operating_point import (
    GoodputBinding,
    goodput_binding_of,
    serve_at_goodput,
    serve_under_objective,
    time_per_output_token,
)
from planner.serving.scheduler_wait import admitted_sequences
from planner.serving.serving import Objective, ServingPoint, serve_at_concurrency, serve_at_rate
from planner.serving.shared_searches import SharedSearches
from planner.serving.workload import running_cap, workload_for

MAX_TP_SUGGESTION = 64


class Plan(BaseModel):
    memory: MemorySection
    roofline: RooflineSection
    latency: LatencySection
    throughput: ThroughputSection
    cost: CostSection
    speculative: SpeculativeSection | None
    serving: ServingSection
    fit_alternatives: FitAlternatives | None
    model: ModelSummary
    gpu: str
    tp: int
    efficiency: str
    calibration: str | None
    warnings: list[str]
    parallelism: ParallelismSection | None = None
    economics: EconomicsSection | None = None  # issue 24: power at the operating point


def is_default_engine_name(d: Deployment) -> bool:
    return is_engine_profile(d.efficiency)


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


def _price(scenario: Scenario, d: Deployment) -> float:
    price = gpu_price(scenario.usd_per_gpu_hour, d.gpu)
    return float("nan") if price is None else float(price)


def _warnings(scenario: Scenario, d: Deployment, mem: MemoryPlan, batch: int, price: float) -> list[str]:
    warnings: list[str] = (parallelism_warnings(d, scenario.ep) + resolution_notes(scenario, d)
                           + engine_memory_warnings(mem))
    if math.isnan(price):
        warnings.append("no $/GPU-hour: give usd_per_gpu_hour for a custom GPU to get costs")
    gpu_id = scenario.gpu if isinstance(scenario.gpu, str) else None
    if (is_default_engine_name(d) and (d.gpu.vendor or "nvidia") != "nvidia"
            and not production_terms(scenario.engine, gpu_id)):
        warnings.append(
            f"the default engine is calibrated on NVIDIA GPUs and no public runs of {d.gpu.vendor}'s "
            "generation: "
            "its software stacks often reach a lower fraction of peak; calibrate with your own benchmark "
            "before buying"
        )
    if not mem.fits:
        warnings.append(
            "the weights and one sequence do not fit in the KV budget at this TP: no serving figure or "
            "cost is given (latency and throughput are the step physics only); see fit_alternatives"
        )
    elif batch > mem.max_batch:
        warnings.append(f"batch {batch} exceeds the max batch {mem.max_batch} that fits at context "
                        f"{scenario.context_len_resolved}")
    return warnings


def _memory_section(d: Deployment, mem: MemoryPlan, batch: int, context_len: int) -> MemorySection:
    return MemorySection(
        weights_gb_per_gpu=mem.weights_gb_per_gpu, kv_bytes_per_token=mem.kv_bytes_per_token,
        kv_bytes_per_token_per_gpu=mem.kv_bytes_per_token_per_gpu,
        kv_budget_gb_per_gpu=mem.kv_budget_gb_per_gpu, max_batch=mem.max_batch, fits=mem.fits,
        kv_shortfall_gb_per_gpu=mem.kv_shortfall_gb_per_gpu,
        kv_bytes_per_sequence_per_gpu=mem.kv_bytes_per_sequence_per_gpu,
        usable_gb_per_gpu=mem.usable_gb_per_gpu, reserve_gb=mem.reserve_gb,
        kv_gb_per_gpu_at_batch=min(batch, mem.max_batch) * mem.kv_bytes_per_sequence_per_gpu / 1e9,
        weights_fit=mem.weights_fit,
        smallest_tp_that_fits=d.tp if mem.fits else smallest_tp_that_fits(d, context_len),
        smallest_layout_that_fits=None if mem.fits else smallest_layout_that_fits(d, context_len),
        **engine_memory_fields(mem),
    )


def _roofline_section(d: Deployment, step: StepTime, pre: StepTime, mean_ctx: float) -> RooflineSection:
    decode_ai = float(step.work.arithmetic_intensity)
    ridge = ridge_flop_per_byte(d)
    return RooflineSection(
        ridge_flop_per_byte=ridge, decode_ai=decode_ai,
        ridge_crossing_batch=ridge_crossing_batch(d, mean_ctx),
        regime="compute-bound" if decode_ai >= ridge else "memory-bound",
        compute_precision=d.compute, prefill_ai=float(pre.work.arithmetic_intensity),
        decode_flops_per_gpu=float(step.work.flops), decode_bytes_per_gpu=float(step.work.bytes),
        prefill_flops_per_gpu=float(pre.work.flops),
    )


def _latency_section(d: Deployment, step: StepTime, pre: StepTime, batch: int, mean_ctx: float,
                     banded: bool, engine: str = "vllm", floor: Deployment | None = None,
                     prompt_len: int | None = None, gpu_id: str | None = None) -> LatencySection:
    """One request's prefill and the decode step at `batch`, each alone: the step physics, given even
    when the deployment does not fit (memory.fits says so; cost and serving are then null)."""
    itl, prefill_ms = float(step.total_ms), float(pre.total_ms)
    ttft = float(ttft_ms(d, prefill_ms))
    # the band of the profile record the estimate came from (planner.physics.record_bands)
    none: tuple[Band | None, str] = (None, UNVALIDATED)
    kernel = d.efficiency.kernel_tables is not None
    itl_band, itl_status = plan_band("itl", itl, engine, gpu_id, d.model, kernel) if banded else none
    ttft_band, ttft_status = plan_band("ttft", ttft, engine, gpu_id, d.model, kernel) if banded else none
    return LatencySection(
        prefill_ms=prefill_ms, ttft_ms=ttft, itl_ms=itl, itl_ms_bound=float(step.bound_ms),
        prefill_ms_bound=float(pre.bound_ms), batch=batch, mean_context=mean_ctx,
        decode_breakdown_ms=step.breakdown(), prefill_breakdown_ms=pre.breakdown(), itl_band_ms=itl_band,
        ttft_band_ms=ttft_band, engine=engine,
        itl_ms_floor=float(decode_step(floor, batch, mean_ctx).total_ms) if floor is not None else None,
        prefill_ms_floor=float(prefill(floor, prompt_len).total_ms)
        if floor is not None and prompt_len
        else None, band_status={"itl": itl_status, "ttft": ttft_status},
    )


def _throughput_section(step: StepTime, batch: int, banded: bool, engine: str = "vllm",
                        gpu_id: str | None = None) -> ThroughputSection:
    """The decode-only figures at `batch`, prefill ignored: an upper bound of what serving reaches."""
    itl, bound = float(step.total_ms), float(step.bound_ms)
    d = step.deployment
    kernel = d.efficiency.kernel_tables is not None
    band = plan_band("itl", itl, engine, gpu_id, d.model, kernel)[0] if banded else None
    return ThroughputSection(
        output_tokens_per_s=batch * 1000.0 / itl, output_tokens_per_s_bound=batch * 1000.0 / bound,
        tokens_per_s_per_user=1000.0 / itl,
        output_tokens_per_s_band=(
            Band(low=batch * 1000.0 / band.high, high=batch * 1000.0 / band.low, rows=band.rows)
            if band
            else None
        ),
    )


def open_loop_searches(scenario: Scenario, d: Deployment, mem: MemoryPlan) -> SharedSearches | None:
    """An open loop under an objective: its replica model's goodput searches, which its point and its
    goodput binding share (issue 30); None otherwise."""
    load = scenario.load
    if not mem.fits or load is None or load.slo is None or not (load.request_rate or load.at_goodput):
        return None
    cap = running_cap(scenario.batch, mem.max_batch, scenario.max_num_seqs)
    return SharedSearches.of(d, workload_for(scenario, d, cap), mem.max_batch)


def operating_point(scenario: Scenario, d: Deployment, mem: MemoryPlan,
                    bench: tuple[int, BenchmarkRun] | None = None,
                    searches: SharedSearches | None = None) -> ServingPoint | None:
    """The serving model at the scenario's operating point (None when the deployment does not fit); a closed
    loop at `load.concurrency` as its benchmark `bench` reports it (issue 20); an open loop under an
    objective on `searches` (open_loop_searches) where given."""
    if not mem.fits:
        return None
    load = scenario.load
    slo = (Objective(load.slo.ttft_ms, load.slo.itl_ms, load.slo.percentile)
           if load is not None and load.slo is not None else None)
    # the engine runs at most max_num_seqs sequences, however many the KV cache admits (a launch command's
    # --max-num-seqs frees the sampler's memory for KV: its KV cache can admit more than it runs)
    cap = running_cap(scenario.batch, mem.max_batch, scenario.max_num_seqs)
    if load is not None and load.at_goodput and slo is not None:
        tpot = load.slo.tpot_ms if load.slo is not None else None
        return serve_at_goodput(d, workload_for(scenario, d, cap), slo, mem.max_batch, tpot, searches)
    if load is not None and load.request_rate is not None and slo is not None and searches is not None:
        return serve_under_objective(searches, load.request_rate, slo)
    if load is not None and load.request_rate is not None:
        return serve_at_rate(d, workload_for(scenario, d, cap), load.request_rate, slo, mem.max_batch)
    if load is not None and load.concurrency is not None:
        point = serve_at_concurrency(d, workload_for(scenario, d, cap), load.concurrency, slo, mem.max_batch)
        return point if bench is None else at_benchmark(point, bench[1])
    # no load: the closed loop at `batch` (default the max batch), running at most the max batch
    concurrency = scenario.batch if scenario.batch is not None else mem.max_batch
    return serve_at_concurrency(d, workload_for(scenario, d, mem.max_batch), concurrency, None, mem.max_batch)


def _binding(scenario: Scenario, searches: SharedSearches | None) -> GoodputBinding | None:
    """Which objective binds an open loop's goodput, and what relaxing it buys (issue 31), on the searches
    its point ran (an open loop under an objective has them: open_loop_searches)."""
    slo = scenario.load.slo if scenario.load is not None else None
    return goodput_binding_of(searches, slo) if searches is not None and slo is not None else None


def closed_loop_benchmark(scenario: Scenario, d: Deployment,
                          mem: MemoryPlan) -> tuple[int, BenchmarkRun] | None:
    """The closed-loop benchmark at `load.concurrency` (planner.serving.benchmark_client), run once per plan:
    its prompts sent and its report; None without a concurrency or when the deployment does not fit."""
    load = scenario.load
    if load is None or load.concurrency is None or not mem.fits:
        return None
    b = load.benchmark
    low, high = ((b.random_range_ratio, 1.0) if b.range == "below"
                 else (1.0 - b.random_range_ratio, 1.0 + b.random_range_ratio))
    if b.range == "around" and b.random_range_ratio >= 1.0:
        low = 1.0 / max(scenario.prompt_len, scenario.output_len)  # vLLM's [L(1 - r), ...] floor of one token
    # the KV pool admits sequences at the length the engine holds them (planner.serving.scheduler_wait)
    admitted = admitted_sequences(d, mem, scenario.prompt_len, scenario.output_len, (low + high) / 2)
    cap = running_cap(scenario.batch, admitted, scenario.max_num_seqs)
    client = BenchmarkClient(load.concurrency, b.num_prompts, low, high)
    return client.prompts, run_benchmark(d, workload_for(scenario, d, max(cap, 1)), client)


def benchmark_section(bench: tuple[int, BenchmarkRun] | None) -> BenchmarkSection | None:
    if bench is None:
        return None
    prompts, run = bench

    def summary(s: Summary) -> LatencyPercentiles:
        return LatencyPercentiles(p50=s.p50, p90=s.p90, p99=s.p99, mean=s.mean)

    return BenchmarkSection(
        num_prompts=prompts, duration_s=run.duration_s, request_throughput=run.request_throughput,
        output_throughput=run.output_throughput, total_token_throughput=run.total_token_throughput,
        ttft_ms=summary(run.ttft_ms), tpot_ms=summary(run.tpot_ms), itl_ms=summary(run.itl_ms),
        e2e_ms=summary(run.e2e_ms),
    )


def _serving_section(scenario: Scenario, gpus: int, point: ServingPoint | None) -> ServingSection:
    if point is None:
        return ServingSection(
            mode="request_rate"
            if scenario.load is not None and scenario.load.request_rate is not None
            else "concurrency", request_rate=None, concurrency=None, stable=False, max_request_rate=None,
            goodput_request_rate=None, prefill_share=None, output_tokens_per_s=None,
            output_tokens_per_s_per_gpu=None, ttft_ms=LatencyPercentiles(), itl_ms=LatencyPercentiles(),
            e2e_ms=LatencyPercentiles(), total_tokens_per_s_per_gpu=None, decoding_sequences=None,
            max_running=0, max_num_batched_tokens=scenario.max_num_batched_tokens, slo_percentile=None,
        )
    real = point.stable
    served = (
        point.stable or point.saturated
    )  # a saturated closed loop serves at capacity: throughput is known
    tpot = time_per_output_token(point)
    return ServingSection(
        mode=point.mode, request_rate=point.request_rate, concurrency=point.concurrency, stable=point.stable,
        max_request_rate=point.max_request_rate, goodput_request_rate=point.goodput_request_rate,
        prefill_share=point.prefill_share if real else None,
        output_tokens_per_s=point.output_tokens_per_s if served else None,
        output_tokens_per_s_per_gpu=point.output_tokens_per_s / gpus if served else None,
        total_tokens_per_s_per_gpu=point.total_tokens_per_s / gpus if served else None,
        ttft_ms=LatencyPercentiles.of(point.ttft_ms, point.ttft_mean_ms),
        itl_ms=LatencyPercentiles.of(point.itl_ms, point.itl_mean_ms),
        e2e_ms=LatencyPercentiles.of(point.e2e_ms, point.e2e_mean_ms),
        decoding_sequences=point.decoding_sequences if real else None,
        max_running=point.max_running, max_num_batched_tokens=scenario.max_num_batched_tokens,
        slo_percentile=point.slo.percentile if point.slo is not None else None,
        tpot_ms=TpotSummary(mean=tpot.mean, p50=tpot.p50, p90=tpot.p90, p99=tpot.p99),
        at_goodput=bool(scenario.load is not None and scenario.load.at_goodput), saturated=point.saturated,
        queue_bands=point.queue_bands, slot_wait_probability=point.slot_wait_probability,
        slot_wait_mean_ms=point.slot_wait_mean_ms,
        ttft_without_slot_wait_ms=(
            LatencyPercentiles.of(point.ttft_without_slot_wait_ms, point.ttft_mean_ms - (
                point.slot_wait_probability or 0.0) * (point.slot_wait_mean_ms or 0.0))
            if point.ttft_without_slot_wait_ms is not None and point.ttft_mean_ms is not None else None),
    )


def _cost_section(
    gpus: int, step: StepTime, batch: int, price: float, point: ServingPoint | None
) -> CostSection:
    """$/M tokens at the operating point (the replica's whole hour over the tokens it serves), and the
    decode-only figure at `batch` as a bound."""
    bound = (float(usd_per_million_output_tokens(gpus, price, batch * 1000.0 / float(step.total_ms)))
             if point is not None else None)
    at_point = point is not None and (point.stable or point.saturated) and point.output_tokens_per_s > 0
    return CostSection(
        usd_per_million_output_tokens=(
            float(usd_per_million_output_tokens(gpus, price, point.output_tokens_per_s))
            if at_point and point is not None
            else None
        ),
        usd_per_million_total_tokens=(
            float(usd_per_million_output_tokens(gpus, price, point.total_tokens_per_s))
            if at_point and point is not None
            else None
        ),
        usd_per_million_output_tokens_bound=bound, usd_per_gpu_hour=price, usd_per_replica_hour=price * gpus,
    )


def _speculative_section(
    scenario: Scenario, d: Deployment, batch: int, fits: bool
) -> SpeculativeSection | None:
    if scenario.speculative is None or not fits:
        return None
    s = scenario.speculative
    sp = plan_speculative(d, batch, scenario.mean_context, s.draft_tokens, s.acceptance, s.draft_params)
    return SpeculativeSection(tokens_per_round=sp.tokens_per_round, itl_ms=sp.itl_ms, round_ms=sp.round_ms,
                              output_tokens_per_s=batch * 1000.0 / sp.itl_ms)


# KV-cache precisions each engine stores (its --kv-cache-dtype choices, planner.contract.launch): no engine
# has an int8 or int4 KV cache, so none is offered as a way to fit
ENGINE_KV_PRECISIONS = {"vllm": VLLM_KV_DTYPE, "sglang": SGLANG_KV_DTYPE, "trt-llm": TRTLLM_KV_DTYPE}
# Integer weight formats (AWQ/GPTQ int4, W8A8 int8) run on NVIDIA GPUs only: vLLM's quantization
# "Supported Hardware" table (docs.vllm.ai/en/v0.14.0/features/quantization/) marks AWQ, GPTQ, Marlin and
# INT8 (W8A8) unsupported on AMD GPUs and Intel Gaudi
INTEGER_WEIGHTS_VENDORS = ("nvidia",)


def engine_runs_precision(engine: str, gpu: GpuSpec, weights: str, kv_cache: str) -> bool:
    """Whether a serving engine runs these weights and KV cache on this GPU (not only whether they fit)."""
    if default_compute_precision(weights) not in gpu.tflops:
        return False
    if weights in ("int8", "int4") and (gpu.vendor or "nvidia") not in INTEGER_WEIGHTS_VENDORS:
        return False
    return kv_cache in ENGINE_KV_PRECISIONS.get(engine, VLLM_KV_DTYPE)


def smallest_tp_in_node(d: Deployment, context_len: int) -> int | None:
    """The smallest TP that fits within one node (a TP group never spans servers here) and splits the
    model's heads (planner.hardware.parallelism.valid_tp); None when no such TP fits."""
    for tp in valid_tps(d.model):
        if tp > d.gpu.node_gpus:
            return None
        if plan_memory(dataclasses.replace(d, tp=tp), context_len).fits:
            return tp
    return None


def _fit_alternatives(scenario: Scenario, d: Deployment, mem: MemoryPlan) -> FitAlternatives | None:
    """What would fit instead, when this does not: the smallest TP within a node, the precisions the engine
    runs at this TP, other GPUs (each at its smallest TP within a node)."""
    if mem.fits:
        return None
    context_len = scenario.context_len_resolved
    precisions = []
    for weights in WEIGHT_PRECISIONS:
        for kv in KV_PRECISIONS:
            if not engine_runs_precision(d.engine, d.gpu, weights, kv):
                continue
            if plan_memory(dataclasses.replace(d, weights=weights, kv_cache=kv), context_len).fits:
                precisions.append(PrecisionChoice(weights=weights, kv_cache=kv))
    gpus = []
    for gpu_id, gpu in load_catalog().items():
        if gpu_id == scenario.gpu or not engine_runs_precision(d.engine, gpu, d.weights, d.kv_cache):
            continue
        tp = smallest_tp_in_node(dataclasses.replace(d, gpu=gpu), context_len)
        if tp is not None:
            gpus.append(GpuChoice(gpu=gpu_id, tp=tp))
    return FitAlternatives(
        smallest_tp=smallest_tp_in_node(d, context_len), precisions=precisions, gpus=gpus
    )


def plan(scenario: Scenario | dict[str, Any]) -> Plan:
    if not isinstance(scenario, Scenario):
        scenario = parse_scenario(scenario)
    d = resolve(scenario)
    context_len = scenario.context_len_resolved
    mem = plan_memory(d, context_len)
    batch = scenario.batch if scenario.batch is not None else max(1, mem.max_batch)
    step = decode_step(d, batch, scenario.mean_context)
    pre = prefill(d, scenario.prompt_len)
    price = _price(scenario, d)
    profile = scenario.efficiency == "default"  # the engine profile, maybe under a calibration
    bench = closed_loop_benchmark(scenario, d, mem)
    searches = open_loop_searches(scenario, d, mem)  # the point's goodput search and its binding's share
    point = operating_point(scenario, d, mem, bench, searches)
    layout = parallelism_section(d)
    gpus = layout.gpus_per_replica
    counts = d.params
    gpu_id = scenario.gpu if isinstance(scenario.gpu, str) else None
    calibration = scenario.calibration.name if (
        scenario.calibration is not None and scenario.calibration.applies_to(gpu_id) and profile) else None
    # bands only where an engine profile runs as validated: not calibrated, not custom, not ideal
    banded = profile and calibration is None
    # The floor is the fastest the GPU runs this step: the graph engine's measured efficiencies, or the
    # plan's own when it asks for the ideal (100% of peak is below any measured floor, issue 22)
    floor = (
        d if scenario.efficiency == "ideal" else with_efficiency(d, engine_efficiency(FLOOR_ENGINE, gpu_id))
    )
    return Plan(
        memory=_memory_section(d, mem, batch, context_len),
        roofline=_roofline_section(d, step, pre, scenario.mean_context),
        latency=_latency_section(d, step, pre, batch, scenario.mean_context, banded, scenario.engine, floor,
                                 scenario.prompt_len, gpu_id).model_copy(
            update={"step_predictor": predictor_name(d.efficiency, calibration is not None)}),
        throughput=_throughput_section(step, batch, banded, scenario.engine, gpu_id),
        cost=_cost_section(gpus, step, batch, price, point),
        speculative=_speculative_section(scenario, d, batch, mem.fits),
        serving=_serving_section(scenario, gpus, point).model_copy(
            update={"benchmark": benchmark_section(bench),
                    "goodput_binding": _binding(scenario, searches)}),
        fit_alternatives=_fit_alternatives(scenario, d, mem),
        model=ModelSummary(name=d.model.name, total_params=counts.total, active_params=counts.active,
                           non_embedding_params=counts.non_embedding),
        gpu=d.gpu.name, tp=d.tp, efficiency=d.efficiency.name, calibration=calibration,
        warnings=_warnings(scenario, d, mem, batch, price), parallelism=layout,
        economics=_economics(scenario, d, gpus, point),
    )


def _economics(scenario: Scenario, d: Deployment, gpus: int, point: ServingPoint | None) -> EconomicsSection:
    stable = point is not None and point.stable
    return economics_section(
        d, scenario.prompt_len, scenario.mean_context, gpus,
        point.prefill_share if stable and point else None,
        point.decoding_sequences if stable and point else None,
        point.output_tokens_per_s if stable and point else None,
        point.total_tokens_per_s if stable and point else None, scenario.economics,
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


__all__ = ["Plan", "clean_json", "operating_point", "plan", "plan_dict"]
