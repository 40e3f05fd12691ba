"""What every serving engine shares: the engine names, the engine defaults, the release table and its one
lookup, the start-up memory result (`EngineMemory`) and the KV page size.

Each engine keeps its own rules in its module (planner/engines/vllm.py, sglang.py, trtllm.py); its efficiency
profile (step overheads fitted on public measurements) is read by planner/engines/profiles.py.

Units: GiB (2^30 bytes), as the engines log them.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Final, Generic, TypeVar

from planner.core.model_shapes import ModelSpec
from planner.core.precision import bytes_per_value

GIB = float(2**30)

# The engine names, one list: the serving engines a plan models (memory rules, launch commands), and the
# "graph" floor (the GPU's own compiled step, no serving stack) a plan shows beside them.
SERVING_ENGINES = ("vllm", "sglang", "trt-llm")
FLOOR_ENGINE = "graph"
ENGINES = (FLOOR_ENGINE, *SERVING_ENGINES)
DEFAULT_ENGINE: Final = "vllm"
ENGINE_LABELS = {"vllm": "vLLM", "sglang": "SGLang", "trt-llm": "TensorRT-LLM", FLOOR_ENGINE: "graph"}

# Engine defaults (vLLM's names; the scenario's defaults read these)
DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192  # vLLM V1's chunked-prefill token budget per iteration (online serving)
DEFAULT_BLOCK_SIZE = 16  # vLLM's default KV-cache block size in tokens

# nvidia-smi total minus torch's mem_get_info total (planner/engines/vllm.py docstring)
DRIVER_RESERVED_GIB = 0.45

T = TypeVar("T")


@dataclass(frozen=True)
class Release(Generic[T]):
    """One row of a release table: from `release` (major, minor, patch) on, the engine's value is `value`."""

    release: tuple[int, int, int]
    value: T
    source: str


def parse_version(version: str) -> tuple[int, int]:
    major, minor, _ = parse_release(version)
    return major, minor


@functools.lru_cache(maxsize=256)  # every memory plan reads several release tables by the same version
def parse_release(version: str) -> tuple[int, int, int]:
    """major, minor, patch (0 when absent or not a number, e.g. "0.6.5.dev" -> (0, 6, 5))."""
    parts = version.split(".")
    patch = parts[2] if len(parts) > 2 and parts[2].isdigit() else "0"
    return int(parts[0]), int(parts[1]), int(patch)


def value_at(table: tuple[Release[T], ...], version: str) -> T:
    """The value of the last row whose release is at or before `version` (rows oldest first; the first row is
    the oldest release the table speaks for, (0, 0, 0) when it covers all)."""
    release = parse_release(version)
    current = table[0].value
    for row in table:
        if row.release <= release:
            current = row.value
    return current


def visible_total_gib(device_memory_gb: float) -> float:
    """What torch.cuda.mem_get_info reports as total: the device-visible memory less the driver's share."""
    return max(device_memory_gb * 1e9 / GIB - DRIVER_RESERVED_GIB, 0.0)


def kv_page_bytes_per_layer(m: ModelSpec, tp: int, kv_cache: str, block_size: int) -> float:
    """One block of one layer on one GPU (K and V, or the MLA latent, replicated across TP)."""
    if m.mla is not None:
        per_token = m.mla.kv_lora_rank + m.mla.qk_rope_head_dim
    else:
        per_token = 2 * max(1, math.ceil(m.n_kv_heads / tp)) * m.head_dim_resolved
    return block_size * per_token * bytes_per_value(kv_cache)


@dataclass(frozen=True)
class KvCacheGroup:
    """Layers that share one block table: full attention, or a sliding window of `window` tokens."""

    kind: str  # "full_attention" | "sliding_window"
    n_layers: int
    window: int | None = None


@dataclass(frozen=True)
class EngineMemory:
    """One GPU's memory as vLLM accounts for it at start-up (GiB)."""

    engine: str
    vllm_version: str
    device_total_gib: float
    visible_total_gib: float
    utilization: float
    requested_gib: float
    weights_gib: float
    activation_peak_gib: float
    non_torch_gib: float
    cuda_graph_gib: float
    reserve_override_gib: float | None
    kv_budget_gib: float
    block_size: int
    max_model_len: int
    max_num_batched_tokens: int
    max_num_seqs: int
    kv_groups: tuple[KvCacheGroup, ...]
    group_size_layers: int
    page_bytes_per_layer: float
    num_gpu_blocks: int
    kv_cache_tokens: int
    max_concurrency: float
    log_lines: tuple[str, ...] = field(default=())
    sampler: str | None = (
        None  # vLLM: the profiling run's top-k/top-p path ("native", "triton", "flashinfer")
    )
    rotary_cache_gib: float = 0.0  # the precomputed rotary tables, loaded with the model (every rank)
    allocator_rounding_gib: float = (
        0.0  # PyTorch's caching allocator's segments beyond the weight tensors' bytes
    )

    @property
    def model_loading_gib(self) -> float:
        """vLLM's "Model loading took X GiB": the weights as loaded, the rotary tables and the allocator's
        rounding of the weight tensors."""
        return self.weights_gib + self.rotary_cache_gib + self.allocator_rounding_gib

    @property
    def overheads_gib(self) -> float:
        """Everything between the utilization cap and the weights+KV: rotary tables, activations, non-torch,
        graphs."""
        if self.reserve_override_gib is not None:
            return self.reserve_override_gib
        return (
            self.rotary_cache_gib
            + self.allocator_rounding_gib
            + self.activation_peak_gib
            + self.non_torch_gib
            + self.cuda_graph_gib
        )
