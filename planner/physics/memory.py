"""Per-GPU memory: weights, KV cache per token and per sequence, the KV budget and the max batch.

Conventions: GB = 10^9 bytes (the engine's own accounting, planner.engines.vllm, works in GiB). Quantized
checkpoints keep the embedding and LM head in bf16 (AWQ, GPTQ, ModelOpt FP8/NVFP4 all do), so only the
transformer body takes the weight precision. KV heads shard across TP ranks and replicate when n_kv_heads <
tp; an MLA latent cache is replicated on every rank.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from planner.core.deployment import Deployment
from planner.core.model_shapes import ModelSpec, dense_bytes_per_value, expert_bytes_per_value, param_counts
from planner.core.precision import bytes_per_value, embedding_bytes_per_value
from planner.engines.base import GIB, SERVING_ENGINES, EngineMemory
from planner.engines.rules import max_batch_for_context, startup_memory
from planner.hardware.parallelism import sharding

GB = 1e9


def weight_bytes_total(model: ModelSpec, weights: str) -> float:
    p = param_counts(model)
    body = ((p.body_matmul - p.expert_params) * dense_bytes_per_value(model, weights)
            + p.expert_params * expert_bytes_per_value(model, weights))
    norms = p.norms * embedding_bytes_per_value(weights)
    embeddings = (p.embedding + p.lm_head) * embedding_bytes_per_value(weights)
    return body + norms + embeddings


def weight_bytes_per_gpu_sharded(d: Deployment) -> float:
    """Weights on the busiest GPU under tp x pp x ep (planner/hardware/parallelism.py): per-layer weights of
    one stage, routed experts over the expert shards, the rest over tp; the embedding sits on the first stage
    and the LM head on the last (both on the one stage when pp is 1)."""
    s, p = sharding(d), d.params
    e = embedding_bytes_per_value(d.weights)
    w_dense, w_expert = dense_bytes_per_value(d.model, d.weights), expert_bytes_per_value(d.model, d.weights)
    layers = (
        (p.body_matmul - p.expert_params) * w_dense + (p.norms * e)
    ) / d.tp + p.expert_params * w_expert * s.expert_weight_fraction
    ends = (p.embedding + p.lm_head) if s.pp == 1 else max(p.embedding, p.lm_head)
    return layers * s.stage_layer_fraction + ends * e / d.tp


def kv_values_per_token_per_layer(model: ModelSpec) -> int:
    """Cached values for one token in one layer (K and V, or the MLA latent + rotary key)."""
    if model.mla is not None:
        return model.mla.kv_lora_rank + model.mla.qk_rope_head_dim
    return 2 * model.n_kv_heads * model.head_dim_resolved


def kv_heads_per_gpu(model: ModelSpec, tp: int) -> int:
    return max(1, math.ceil(model.n_kv_heads / tp))


def kv_values_per_token_per_layer_per_gpu(model: ModelSpec, tp: int) -> int:
    if model.mla is not None:
        return kv_values_per_token_per_layer(model)  # replicated
    return 2 * kv_heads_per_gpu(model, tp) * model.head_dim_resolved


def kv_bytes_per_token(model: ModelSpec, kv_cache: str) -> float:
    return model.n_layers * kv_values_per_token_per_layer(model) * bytes_per_value(kv_cache)


def kv_bytes_per_token_per_gpu(model: ModelSpec, kv_cache: str, tp: int) -> float:
    return model.n_layers * kv_values_per_token_per_layer_per_gpu(model, tp) * bytes_per_value(kv_cache)


def cached_token_layers(model: ModelSpec, context_len: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Sum over layers of the tokens each layer caches: windowed layers hold at most the window.
    Works on numpy arrays of context lengths."""
    context = np.asarray(context_len, dtype=float)
    windowed = model.n_windowed_layers
    full = model.n_layers - windowed
    if windowed == 0:
        return full * context
    return full * context + windowed * np.minimum(context, float(model.sliding_window or 0))


def kv_bytes_per_sequence_per_gpu(
    model: ModelSpec, kv_cache: str, tp: int, context_len: npt.ArrayLike,
    token_layers: npt.NDArray[np.float64] | None = None
) -> npt.NDArray[np.float64]:
    """`token_layers`: cached_token_layers(model, context_len), when the caller holds it."""
    per_token_layer = kv_values_per_token_per_layer_per_gpu(model, tp) * bytes_per_value(kv_cache)
    layers = cached_token_layers(model, context_len) if token_layers is None else token_layers
    return layers * per_token_layer


# Engines whose start-up accounting we model term by term; the others use the napkin rule
# (utilization x memory - reserve - weights) with this reserve unless one is given.
# The napkin rule's reserve per GPU for the profiling peak, non-torch
# memory and graphs: 2.0 GB, a round figure
# at the low end of what public start-up logs print at TP 1 for activation + non-torch (2.1-7.5 GiB over 19
# logs, median 3.05 GiB: data/reference/vllm_startup_logs.csv); the engines' own rules replace it, and an
# explicit memory.reserve_gb overrides both.
NAPKIN_RESERVE_GB = 2.0


@dataclass(frozen=True)
class MemoryPlan:
    weights_gb_per_gpu: float
    kv_bytes_per_token: float
    kv_bytes_per_token_per_gpu: float
    kv_bytes_per_sequence_per_gpu: float
    usable_gb_per_gpu: float
    reserve_gb: float
    kv_budget_gb_per_gpu: float
    max_batch: int
    fits: bool
    weights_fit: bool
    engine: EngineMemory | None = None  # vLLM's accounting when its rules apply
    # What the weights and overheads exceed the cap by when they do not fit (the KV budget is then 0, never
    # negative: a budget is an amount of memory)
    kv_shortfall_gb_per_gpu: float = 0.0


def uses_engine_rules(d: Deployment) -> bool:
    """vLLM's rules apply unless a reserve is given (it overrides the modelled overheads) or the engine
    is not one we model."""
    return d.reserve_gb is None and d.engine in SERVING_ENGINES


def plan_memory(d: Deployment, context_len: int) -> MemoryPlan:
    """Per GPU of the busiest pipeline stage; `max_batch` is the replica's concurrent sequences (each
    attention data-parallel group holds its own)."""
    s = sharding(d)
    per_seq = (
        float(kv_bytes_per_sequence_per_gpu(d.model, d.kv_cache, d.tp, context_len)) * s.stage_layer_fraction
    )
    if uses_engine_rules(d):
        e = startup_memory(d, context_len)
        weights_gb = e.weights_gib * GIB / GB
        usable_gb = e.requested_gib * GIB / GB
        reserve_gb = e.overheads_gib * GIB / GB
        kv_budget_gb = e.kv_budget_gib * GIB / GB
        max_batch = max_batch_for_context(e, context_len) * s.attention_dp if kv_budget_gb > 0 else 0
    else:
        e = None
        weights_gb = weight_bytes_per_gpu_sharded(d) / GB
        usable_gb = d.gpu.memory_gb * d.memory_utilization
        reserve_gb = d.reserve_gb if d.reserve_gb is not None else NAPKIN_RESERVE_GB
        kv_budget_gb = usable_gb - reserve_gb - weights_gb
        max_batch = (
            max(0, math.floor(kv_budget_gb * GB / per_seq)) * s.attention_dp if kv_budget_gb > 0 else 0
        )
    return MemoryPlan(
        weights_gb_per_gpu=weights_gb, kv_bytes_per_token=kv_bytes_per_token(d.model, d.kv_cache),
        kv_bytes_per_token_per_gpu=kv_bytes_per_token_per_gpu(d.model, d.kv_cache, d.tp)
        * s.stage_layer_fraction,
        kv_bytes_per_sequence_per_gpu=per_seq, usable_gb_per_gpu=usable_gb, reserve_gb=reserve_gb,
        kv_budget_gb_per_gpu=max(kv_budget_gb, 0.0), max_batch=max_batch, fits=max_batch >= 1,
        weights_fit=kv_budget_gb > 0, engine=e, kv_shortfall_gb_per_gpu=max(-kv_budget_gb, 0.0),
    )


def engine_memory_fields(mem: MemoryPlan) -> dict:
    """The plan's engine-memory keys (memory section): the waterfall in GiB, vLLM's two start-up lines,
    the block pool. Napkin plans say so and leave the engine figures null."""
    e = mem.engine
    if e is None:
        return {
            "engine_rules": "napkin", "vllm_version": None, "vllm_sampler": None, "waterfall_gib": None,
            "kv_cache_tokens": None, "max_concurrency": None, "num_gpu_blocks": None, "engine_log_lines": [],
            "kv_cache_groups": [],
        }
    waterfall = {
        "device_total": e.device_total_gib, "framework_total": e.visible_total_gib,
        "utilization_cap": e.requested_gib, "weights": e.weights_gib, "rotary_tables": e.rotary_cache_gib,
        "allocator_rounding": e.allocator_rounding_gib, "activation_peak": e.activation_peak_gib,
        "non_torch": e.non_torch_gib, "cuda_graphs": e.cuda_graph_gib,
        "reserve_override": e.reserve_override_gib, "kv_cache": max(e.kv_budget_gib, 0.0),
        "kv_shortfall": max(
            -e.kv_budget_gib, 0.0
        ),  # what the terms above exceed the cap by (0 when they fit)
    }
    return {
        "engine_rules": e.engine, "vllm_version": e.vllm_version or None, "vllm_sampler": e.sampler,
        "waterfall_gib": waterfall, "kv_cache_tokens": e.kv_cache_tokens,
        "max_concurrency": e.max_concurrency, "num_gpu_blocks": e.num_gpu_blocks,
        "engine_log_lines": list(e.log_lines),
        "kv_cache_groups": [
            {"kind": g.kind, "n_layers": g.n_layers, "window": g.window} for g in e.kv_groups
        ],
        "block_size": e.block_size, "max_model_len": e.max_model_len,
        "max_num_batched_tokens": e.max_num_batched_tokens, "max_num_seqs": e.max_num_seqs,
    }


def engine_memory_warnings(mem: MemoryPlan) -> list[str]:
    """vLLM refuses to start when one max_model_len request does not fit the KV cache
    (kv_cache_utils `_check_enough_kv_cache_memory`); say so in its own words."""
    e = mem.engine
    if e is None or e.engine != "vllm" or e.kv_budget_gib <= 0 or e.max_concurrency >= 1:
        return []
    return [
        f"vLLM would not start: one {e.max_model_len:,}-token request needs more KV cache than the "
        f"{e.kv_budget_gib:.2f} GiB available (max concurrency {e.max_concurrency:.2f}x); lower "
        "max_model_len, "
        "raise memory.utilization or add GPUs"
    ]
