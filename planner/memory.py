"""Per-GPU memory: weights, KV cache per token and per sequence, the KV budget and the max batch.

Conventions: GB = 10^9 bytes. Quantized checkpoints keep the embedding and LM head in bf16
(AWQ, GPTQ, ModelOpt FP8/NVFP4 all do), so only the transformer body takes the weight precision.
KV heads shard across TP ranks and replicate when n_kv_heads < tp; an MLA latent cache is replicated
on every rank.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from planner.deployment import Deployment
from planner.model_shapes import ModelSpec, param_counts
from planner.parallelism import sharding
from planner.precision import bytes_per_value

GB = 1e9


def embedding_bytes_per_value(weights: str) -> float:
    """Embedding and LM head stay in bf16 when the body is quantized (fp32 checkpoints keep fp32)."""
    return max(bytes_per_value(weights), 2.0)


def weight_bytes_total(model: ModelSpec, weights: str) -> float:
    p = param_counts(model)
    body = p.body_matmul * bytes_per_value(weights)
    norms = p.norms * embedding_bytes_per_value(weights)
    embeddings = (p.embedding + p.lm_head) * embedding_bytes_per_value(weights)
    return body + norms + embeddings


def weight_bytes_per_gpu(model: ModelSpec, weights: str, tp: int) -> float:
    return weight_bytes_total(model, weights) / tp


def weight_bytes_per_gpu_sharded(d: Deployment) -> float:
    """Weights on the busiest GPU under tp x pp x ep (planner/parallelism.py): per-layer weights of one
    stage, routed experts over the expert shards, the rest over tp; the embedding sits on the first stage
    and the LM head on the last (both on the one stage when pp is 1). Equals weight_bytes_per_gpu at pp=ep=1."""
    s, p = sharding(d), param_counts(d.model)
    w, e = bytes_per_value(d.weights), embedding_bytes_per_value(d.weights)
    layers = ((p.body_matmul - p.expert_params) * w + (p.norms * e)) / d.tp + p.expert_params * w * s.expert_weight_fraction
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


def kv_bytes_per_sequence_per_gpu(model: ModelSpec, kv_cache: str, tp: int, context_len: npt.ArrayLike) -> npt.NDArray[np.float64]:
    per_token_layer = kv_values_per_token_per_layer_per_gpu(model, tp) * bytes_per_value(kv_cache)
    return cached_token_layers(model, context_len) * per_token_layer


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


def plan_memory(d: Deployment, context_len: int) -> MemoryPlan:
    """Per GPU of the busiest pipeline stage; `max_batch` is the replica's concurrent sequences (each
    attention data-parallel group holds its own)."""
    s = sharding(d)
    weights_gb = weight_bytes_per_gpu_sharded(d) / GB
    usable_gb = d.gpu.memory_gb * d.memory_utilization
    kv_budget_gb = usable_gb - d.reserve_gb - weights_gb
    per_seq = float(kv_bytes_per_sequence_per_gpu(d.model, d.kv_cache, d.tp, context_len)) * s.stage_layer_fraction
    max_batch = max(0, math.floor(kv_budget_gb * GB / per_seq)) * s.attention_dp if kv_budget_gb > 0 else 0
    return MemoryPlan(
        weights_gb_per_gpu=weights_gb,
        kv_bytes_per_token=kv_bytes_per_token(d.model, d.kv_cache),
        kv_bytes_per_token_per_gpu=kv_bytes_per_token_per_gpu(d.model, d.kv_cache, d.tp) * s.stage_layer_fraction,
        kv_bytes_per_sequence_per_gpu=per_seq,
        usable_gb_per_gpu=usable_gb,
        reserve_gb=d.reserve_gb,
        kv_budget_gb_per_gpu=kv_budget_gb,
        max_batch=max_batch,
        fits=max_batch >= 1,
        weights_fit=kv_budget_gb > 0,
    )
