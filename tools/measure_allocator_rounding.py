#!/usr/bin/env python3
"""What PyTorch's CUDA caching allocator charges for model weights, on whatever CUDA GPU this runs on.

vLLM's "Model loading took X GiB" is `torch.cuda.max_memory_allocated()` after loading minus before, so it
counts each weight tensor's *block*, not its bytes. This script (1) allocates single tensors of chosen
sizes on an empty cache and records the block each is charged, and (2) replays the weight tensors one TP
rank of a few checkpoints holds, in vLLM's creation order (embedding, then per layer the fused qkv_proj
with its bias, o_proj, gate_up_proj, down_proj and the two RMSNorms, the shared rotary cos/sin table,
then the final norm and the LM head), and reads the same counter vLLM reads. Shapes come from each
checkpoint's config.json at the stated TP; nothing is loaded, `torch.empty` allocates.

    python tools/measure_allocator_rounding.py --out data/measurements/allocator_rounding.json
"""

from __future__ import annotations

import argparse
import json
import os

import torch

# python3 tools/measure_allocator_rounding.py has tools/ on the path; python -m
# tools.measure_allocator_rounding the repository root
try:
    from gpu_timing import device_meta
except ImportError:
    from tools.gpu_timing import device_meta

MIB = 2**20
GIB = 2**30


def qwen_like(hidden: int, layers: int, heads: int, kv_heads: int, head_dim: int, inter: int, vocab: int,
              positions: int, tp: int, qkv_bias: bool) -> list[tuple[int, ...]]:
    """Shapes of one TP rank's weight tensors in vLLM's creation order (Llama / Qwen2 layout, untied head)."""
    q, kv = heads * head_dim // tp, max(1, kv_heads // tp) * head_dim
    rows = -(-vocab // 64) * 64 // tp  # vocabulary padded to 64, split over TP
    shapes: list[tuple[int, ...]] = [(rows, hidden)]
    for layer in range(layers):
        shapes.append((q + 2 * kv, hidden))
        if qkv_bias:
            shapes.append((q + 2 * kv,))
        if layer == 0:
            shapes.append((positions, head_dim))  # the rotary table, built once with the first attention
        shapes += [(hidden, q), (2 * inter // tp, hidden), (hidden, inter // tp), (hidden,), (hidden,)]
    shapes += [(hidden,), (rows, hidden)]
    return shapes


MODELS = {
    # config.json of each checkpoint; "logged": its "Model loading
    # took" in data/reference/vllm_startup_logs.csv
    "Qwen2.5-72B-Instruct TP2": (
        dict(
            hidden=8192, layers=80, heads=64, kv_heads=8, head_dim=128, inter=29568, vocab=152064,
            positions=32768, tp=2, qkv_bias=True,
        ),
        67.80,
    ),
    "Kimi-Dev-72B TP4": (
        dict(
            hidden=8192, layers=80, heads=64, kv_heads=8, head_dim=128, inter=29568, vocab=152064,
            positions=131072, tp=4, qkv_bias=True,
        ),
        34.01,
    ),
    "Qwen2.5-32B-Instruct TP2": (
        dict(
            hidden=5120, layers=64, heads=40, kv_heads=8, head_dim=128, inter=27648, vocab=152064,
            positions=32768, tp=2, qkv_bias=True,
        ),
        30.7098,
    ),
    "Qwen2.5-7B-Instruct TP1": (
        dict(
            hidden=3584, layers=28, heads=28, kv_heads=4, head_dim=128, inter=18944, vocab=152064,
            positions=32768, tp=1, qkv_bias=True,
        ),
        14.25,
    ),
    "Llama-3.1-8B TP1": (
        dict(
            hidden=4096, layers=32, heads=32, kv_heads=8, head_dim=128, inter=14336, vocab=128256,
            positions=131072, tp=1, qkv_bias=False,
        ),
        14.9888,
    ),
}
SINGLE_SIZES_MIB = [8.0, 12.25, 24.5, 31.5, 64.75, 129.5, 231.0, 232.0, 259.0, 519.75]


def single_block_bytes(size_bytes: int) -> int:
    torch.cuda.empty_cache()
    before = torch.cuda.memory_allocated()
    t = torch.empty(size_bytes, dtype=torch.uint8, device="cuda")
    charged = torch.cuda.memory_allocated() - before
    del t
    return charged


def replay(shapes: list[tuple[int, ...]]) -> tuple[int, int]:
    """(bytes of the tensors, what max_memory_allocated rose by), as vLLM's DeviceMemoryProfiler measures."""
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.max_memory_allocated()
    held = [torch.empty(s, dtype=torch.bfloat16, device="cuda") for s in shapes]
    torch.cuda.synchronize()
    charged = torch.cuda.max_memory_allocated() - before
    raw = sum(t.numel() * t.element_size() for t in held)
    del held
    torch.cuda.empty_cache()
    return raw, charged


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    meta = device_meta(
        "bytes PyTorch's CUDA caching allocator charges (memory_allocated / max_memory_allocated deltas)"
    )
    meta["alloc_conf"] = os.environ.get("PYTORCH_CUDA_ALLOC_CONF")
    singles = []
    for mib in SINGLE_SIZES_MIB:
        size = int(mib * MIB)
        charged = single_block_bytes(size)
        singles.append({"size_mib": mib, "charged_mib": charged / MIB})
        print(json.dumps(singles[-1]), flush=True)
    models = []
    for name, (shape_args, logged) in MODELS.items():
        raw, charged = replay(qwen_like(**shape_args))
        models.append({"model": name, "tensor_gib": raw / GIB, "charged_gib": charged / GIB,
                       "rounding_gib": (charged - raw) / GIB, "logged_model_loading_gib": logged})
        print(json.dumps(models[-1]), flush=True)
    print(json.dumps(meta))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"meta": meta, "single_tensors": singles, "weight_replays": models}, f, indent=1)


if __name__ == "__main__":
    main()
