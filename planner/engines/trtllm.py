"""TensorRT-LLM's start-up memory: its paged KV cache from `free_gpu_memory_fraction` of what is left
after the engine and its runtime buffers. Weights, activations and non-torch memory follow vLLM's rules
(planner/engines/vllm.py): TensorRT-LLM's own are not modelled apart."""

from __future__ import annotations

import math
from functools import partial

from planner.core.deployment import Deployment
from planner.engines.base import GIB, EngineMemory, KvCacheGroup, kv_page_bytes_per_layer, visible_total_gib
from planner.engines.profiles import engine_efficiency
from planner.engines.vllm import activation_peak_gib, default_max_num_seqs, non_torch_gib, weights_gib_per_gpu
from planner.hardware.parallelism import sharding

NAME = "trt-llm"

# This engine's step-time profile, efficiency_profile(gpu_id=None): the graph physics plus its fitted serving
# overheads (planner/data/engine_profiles.json, read by planner/engines/profiles.py).
efficiency_profile = partial(engine_efficiency, NAME)


# --- TensorRT-LLM (cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp
# `getMaxNumTokens` / pyexecutor) ----------
#   maxTokens = freeGpuMemoryFraction x (free memory + pool free) / cache bytes per token
# measured after the engine (weights) and the runtime buffers (activations, decoder) are allocated, and
# logged as "Memory usage when calculating max tokens in paged kv cache: total: T GiB, available: A GiB" and
# "[MemUsageChange] Allocated K GiB for max tokens in paged KV cache (N)". The scenario's
# `memory.utilization` is read as `free_gpu_memory_fraction`; blocks hold `block_size` tokens.
def format_trtllm_log_lines(
    total_gib: float, available_gib: float, kv_gib: float, tokens: int
) -> tuple[str, str]:
    return (f"Memory usage when calculating max tokens in paged kv cache: total: {total_gib:.2f} GiB, "
            f"available: {available_gib:.2f} GiB",
            f"[MemUsageChange] Allocated {kv_gib:.2f} GiB for max tokens in paged KV cache ({tokens}).")


def plan_trtllm_memory(d: Deployment, max_model_len: int, max_num_seqs: int | None = None) -> EngineMemory:
    m = d.model
    fraction = sharding(d).stage_layer_fraction
    visible = visible_total_gib(d.gpu.memory_gb)
    seqs = max_num_seqs if max_num_seqs is not None else default_max_num_seqs(visible, d.gpu.name)
    weights = weights_gib_per_gpu(d)
    activation = activation_peak_gib(
        m, d.tp, d.max_num_batched_tokens, seqs, "flashinfer"
    )  # sorts no vocabulary
    non_torch = non_torch_gib(d.tp)
    available = max(visible - weights - activation - non_torch, 0.0)
    budget = available * d.memory_utilization
    page = kv_page_bytes_per_layer(m, d.tp, d.kv_cache, d.block_size) * math.ceil(m.n_layers * fraction)
    blocks = int(budget * GIB // page) if budget > 0 else 0
    tokens = blocks * d.block_size
    return EngineMemory(
        engine="trt-llm", vllm_version="", device_total_gib=d.gpu.memory_gb * 1e9 / GIB,
        visible_total_gib=visible, utilization=d.memory_utilization,
        requested_gib=visible - (1 - d.memory_utilization) * available, weights_gib=weights,
        activation_peak_gib=activation, non_torch_gib=non_torch, cuda_graph_gib=0.0,
        reserve_override_gib=None, kv_budget_gib=budget, block_size=d.block_size, max_model_len=max_model_len,
        max_num_batched_tokens=d.max_num_batched_tokens, max_num_seqs=seqs,
        kv_groups=(KvCacheGroup("full_attention", math.ceil(m.n_layers * fraction)),),
        group_size_layers=math.ceil(m.n_layers * fraction),
        page_bytes_per_layer=kv_page_bytes_per_layer(m, d.tp, d.kv_cache, d.block_size),
        num_gpu_blocks=blocks, kv_cache_tokens=tokens,
        max_concurrency=tokens / max_model_len if max_model_len else 0.0,
        log_lines=format_trtllm_log_lines(visible, available, blocks * page / GIB, tokens),
    )


def startup_memory(d: Deployment, context_len: int) -> EngineMemory:
    return plan_trtllm_memory(d, d.max_model_len or context_len, d.max_num_seqs)


def max_batch_for_context(e: EngineMemory, context_len: int) -> int:
    """Sequences of `context_len` tokens the paged cache holds (blocks are whole)."""
    return e.num_gpu_blocks // math.ceil(context_len / e.block_size)
