"""SGLang's start-up memory: its KV pool from `mem_fraction_static` (one token per slot). It loads
weights as vLLM does (the same tensors, rotary tables and PyTorch allocator), so it reads those rules from
planner/engines/vllm.py."""

from __future__ import annotations

import math
from functools import partial

from planner.core.deployment import Deployment
from planner.core.model_shapes import ModelSpec
from planner.engines.base import GIB, EngineMemory, KvCacheGroup, kv_page_bytes_per_layer, visible_total_gib
from planner.engines.profiles import engine_efficiency
from planner.engines.vllm import (
    allocator_rounding_gib_per_gpu,
    rotary_cache_gib,
    weights_gib_per_gpu,
)
from planner.hardware.parallelism import sharding

NAME = "sglang"

# This engine's step-time profile, efficiency_profile(gpu_id=None): the graph physics plus its fitted serving
# overheads (planner/data/engine_profiles.json, read by planner/engines/profiles.py).
efficiency_profile = partial(engine_efficiency, NAME)

# --- SGLang (sglang/srt/model_executor/model_runner.py `profile_max_num_token`) ---------------------------
#   rest_memory = available_gpu_memory - total_gpu_memory x (1 - mem_fraction_static)
#   max_total_num_tokens = rest_memory x 2^30 // cell_size
# `total_gpu_memory` is the free memory once the distributed environment is up (before the weights),
# `available_gpu_memory` the free memory after loading them. So the KV pool is
#   (framework total - start-up memory) x mem_fraction_static - weights,
# one token per slot (page size 1), cell_size = kv heads per GPU x head_dim x layers x 2 x dtype bytes (MLA:
# (kv_lora_rank + rope dim) x layers x dtype bytes). Activations and CUDA graphs live in the (1 - fraction)
# share. The scenario's `memory.utilization` is read as `mem_fraction_static`.
SGLANG_STARTUP_GIB_TP1 = 0.5  # CUDA context and cuBLAS handles before the weights (an estimate)
SGLANG_STARTUP_GIB_TP_GT1 = 1.5  # + NCCL communicators and custom all-reduce buffers (an estimate)


def sglang_startup_gib(tp: int) -> float:
    return SGLANG_STARTUP_GIB_TP1 if tp == 1 else SGLANG_STARTUP_GIB_TP_GT1


def sglang_cell_bytes(m: ModelSpec, tp: int, kv_cache: str, stage_layer_fraction: float = 1.0) -> float:
    layers = math.ceil(m.n_layers * stage_layer_fraction)
    return kv_page_bytes_per_layer(m, tp, kv_cache, 1) * layers


def format_sglang_log_line(tokens: int, k_gib: float, v_gib: float) -> str:
    """SGLang's `KV Cache is allocated` line (its "GB" are GiB: bytes / 2^30)."""
    return f"KV Cache is allocated. #tokens: {tokens}, K size: {k_gib:.2f} GB, V size: {v_gib:.2f} GB"


def plan_sglang_memory(d: Deployment, max_model_len: int) -> EngineMemory:
    m = d.model
    fraction = sharding(d).stage_layer_fraction
    visible = visible_total_gib(d.gpu.memory_gb)
    mfs = d.memory_utilization
    startup = sglang_startup_gib(d.tp)
    weights = weights_gib_per_gpu(d)
    rotary = rotary_cache_gib(
        m, d.weights
    )  # SGLang builds the same tables (its rotary code is vLLM's), loaded with the model
    rounding = allocator_rounding_gib_per_gpu(
        d
    )  # and allocates its weights through the same PyTorch allocator
    budget = (visible - startup) * mfs - weights - rotary - rounding
    cell = sglang_cell_bytes(m, d.tp, d.kv_cache, fraction)
    tokens = max(0, int(budget * GIB // cell)) if budget > 0 else 0
    half = tokens * cell / GIB / (1 if m.mla is not None else 2)
    line = format_sglang_log_line(tokens, half, 0.0 if m.mla is not None else half)
    return EngineMemory(
        engine="sglang", vllm_version="", device_total_gib=d.gpu.memory_gb * 1e9 / GIB,
        visible_total_gib=visible, utilization=mfs, requested_gib=visible * mfs, weights_gib=weights,
        activation_peak_gib=0.0, non_torch_gib=startup * mfs, cuda_graph_gib=0.0, reserve_override_gib=None,
        kv_budget_gib=budget, block_size=1, max_model_len=max_model_len,
        max_num_batched_tokens=d.max_num_batched_tokens, max_num_seqs=0,
        kv_groups=(KvCacheGroup("full_attention", math.ceil(m.n_layers * fraction)),), group_size_layers=1,
        page_bytes_per_layer=kv_page_bytes_per_layer(m, d.tp, d.kv_cache, 1), num_gpu_blocks=tokens,
        kv_cache_tokens=tokens, max_concurrency=tokens / max_model_len if max_model_len else 0.0,
        log_lines=(line,), rotary_cache_gib=rotary, allocator_rounding_gib=rounding,
    )


def startup_memory(d: Deployment, context_len: int) -> EngineMemory:
    return plan_sglang_memory(d, d.max_model_len or context_len)


def max_batch_for_context(e: EngineMemory, context_len: int) -> int:
    """Sequences of `context_len` tokens the pool holds (one token a slot)."""
    return e.kv_cache_tokens // context_len
