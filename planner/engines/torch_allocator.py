"""PyTorch's CUDA caching allocator: the bytes it charges for one tensor. vLLM and SGLang load their weights
through it, and "Model loading took" counts what it charges (measured on an H100, torch 2.11:
tools/measure_allocator_rounding.py, data/measurements/h100_allocator_rounding_2026-11-26.json)."""

from __future__ import annotations

import math

# PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp): kMinBlockSize, kSmallSize,
# kMinLargeAlloc, kRoundLarge
ALLOC_BLOCK_BYTES = 512
ALLOC_SMALL_SIZE_BYTES = 1 << 20
ALLOC_MIN_LARGE_BYTES = 10 << 20
ALLOC_ROUND_LARGE_BYTES = 2 << 20


def allocated_bytes(size: float) -> float:
    """Bytes PyTorch's CUDA caching allocator charges for one tensor (c10/cuda/CUDACachingAllocator.cpp): a
    request of 10 MiB or more gets its own segment rounded up to 2 MiB (kRoundLarge), and the block is split
    off that segment only when more than 1 MiB (kSmallSize) would be left, so a tensor within 1 MiB under a
    2 MiB multiple is charged the whole segment; smaller requests are packed at 512 B. vLLM's "Model loading
    took" reads `torch.cuda.max_memory_allocated`, which counts these block sizes."""
    rounded = math.ceil(size / ALLOC_BLOCK_BYTES) * ALLOC_BLOCK_BYTES
    if size < ALLOC_MIN_LARGE_BYTES:
        return rounded
    segment = math.ceil(size / ALLOC_ROUND_LARGE_BYTES) * ALLOC_ROUND_LARGE_BYTES
    return segment if segment - rounded <= ALLOC_SMALL_SIZE_BYTES else rounded
