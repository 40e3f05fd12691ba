"""vLLM's KV cache manager, as its start-up log reports it: the KV-cache groups of a hybrid model (full
attention and sliding window), the blocks one request of max_model_len takes in each, and the KV cache tokens
and maximum concurrency it prints from the KV budget (planner.engines.vllm sizes that budget)."""

from __future__ import annotations

import math

from planner.core.model_shapes import ModelSpec
from planner.engines.base import GIB, KvCacheGroup, kv_page_bytes_per_layer

# kv_cache_groups by model object and stage fraction: every memory plan asks twice (ISSUE9: 7,830 calls, 8
# distinct answers). An entry holds its model, so its id is not reused while it stands.
_GROUPS: dict[tuple[int, float], tuple[ModelSpec, tuple[KvCacheGroup, ...]]] = {}


def kv_cache_groups(m: ModelSpec, stage_layer_fraction: float = 1.0) -> tuple[KvCacheGroup, ...]:
    """The KV-cache groups of the busiest pipeline stage (all layers at pp 1)."""
    kept = _GROUPS.get((id(m), stage_layer_fraction))
    if kept is not None and kept[0] is m:
        return kept[1]
    if len(_GROUPS) >= 1024:
        _GROUPS.clear()
    groups = _GROUPS[id(m), stage_layer_fraction] = m, _kv_cache_groups(m, stage_layer_fraction)
    return groups[1]


def _kv_cache_groups(m: ModelSpec, stage_layer_fraction: float) -> tuple[KvCacheGroup, ...]:
    windowed = math.ceil(m.n_windowed_layers * stage_layer_fraction)
    full = math.ceil((m.n_layers - m.n_windowed_layers) * stage_layer_fraction)
    groups = []
    if full:
        groups.append(KvCacheGroup("full_attention", full))
    if windowed:
        groups.append(KvCacheGroup("sliding_window", windowed, m.sliding_window))
    return tuple(groups)


def blocks_per_request(
    group: KvCacheGroup, max_model_len: int, block_size: int, max_num_batched_tokens: int
) -> int:
    """`max_memory_usage_bytes` / page size of a group's spec (FullAttentionSpec, SlidingWindowSpec)."""
    if group.kind == "sliding_window" and group.window is not None:
        tokens = min(group.window - 1 + max_num_batched_tokens, max_model_len)
        return math.ceil(tokens / block_size) + 1
    return math.ceil(max_model_len / block_size)


def kv_cache_layout(groups: tuple[KvCacheGroup, ...]) -> tuple[int, list[tuple[KvCacheGroup, int]]]:
    """Group size in layers and each layer type's number of groups (uniform-page hybrid allocator: the group
    size is the smallest layer count among the types; larger types take several groups)."""
    if len(groups) == 1:
        return groups[0].n_layers, [(groups[0], 1)]
    size = min(g.n_layers for g in groups)
    return size, [(g, math.ceil(g.n_layers / size)) for g in groups]


def kv_tokens_and_concurrency(m: ModelSpec, tp: int, kv_cache: str, kv_budget_gib: float, block_size: int,
                              max_model_len: int, max_num_batched_tokens: int,
                              stage_layer_fraction: float = 1.0) -> tuple[int, int, float, int, float]:
    """num_gpu_blocks, logged KV cache tokens, max concurrency, group size, page bytes per layer."""
    groups = kv_cache_groups(m, stage_layer_fraction)
    page = kv_page_bytes_per_layer(m, tp, kv_cache, block_size)
    size, layout = kv_cache_layout(groups)
    budget_bytes = max(kv_budget_gib, 0.0) * GIB
    num_blocks = int(budget_bytes // page // size)
    n_groups = sum(n for _, n in layout)
    tokens = num_blocks // n_groups * block_size
    per_request = sum(
        n * blocks_per_request(g, max_model_len, block_size, max_num_batched_tokens) for g, n in layout
    )
    concurrency = num_blocks / per_request if per_request else 0.0
    return num_blocks, tokens, concurrency, size, page


def format_log_lines(tokens: int, max_model_len: int, concurrency: float) -> tuple[str, str]:
    """The two lines exactly as vLLM's `_report_kv_cache_config` prints them."""
    return (f"GPU KV cache size: {tokens:,} tokens",
            f"Maximum concurrency for {max_model_len:,} tokens per request: {concurrency:.2f}x")
