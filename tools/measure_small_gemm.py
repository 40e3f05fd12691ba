#!/usr/bin/env python3
"""Small-m GEMMs replayed from a CUDA graph, the way an engine's decode step runs them (issue 30: an
independent check of the imported kernel tables).

    python3 tools/measure_small_gemm.py     (writes $OUT/small_gemm.json, or ./small_gemm.json)

Needs only PyTorch. For each weight shape (N x K) of DeepSeek-R1 / Llama-3.x-70B layers and m = 1, 4, 16,
64, 256 tokens: bf16 `F.linear`, fp8 per-tensor `torch._scaled_mm` including the activation's cast to fp8,
and block-scaled fp8 (1x128 activation, 128x128 weight scales) where cuBLASLt supports it. Each call is
captured in a CUDA graph over enough weight copies to exceed 256 MiB (every call streams its weights, as in
a model's step), warmed up, then replayed 50 times; the time per call is the mean replay over the copies.
data/measurements/h100_small_gemm_graph_2026-11-27.json was written by this script's logic on one H100 SXM
(torch 2.11, CUDA 13.0); block-scaled fp8 was unsupported there (CUBLAS_STATUS_NOT_SUPPORTED) and is absent.
"""

from __future__ import annotations

import json
import math
import os

import torch
import torch.nn.functional as F

BF16, FP8, DEV = torch.bfloat16, torch.float8_e4m3fn, "cuda"
SHAPES = [(1536, 7168), (576, 7168), (2112, 7168), (4608, 7168), (7168, 2304), (7168, 2048), (8192, 8192),
          (10240, 8192), (57344, 8192), (8192, 28672), (24576, 1536)]
TOKENS = (1, 4, 16, 64, 256)


def graph_ms(fn, replays=50):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    for _ in range(5):
        graph.replay()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        graph.replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / replays


def main():
    rows = []
    for n, k in SHAPES:
        for precision in ("bf16", "fp8", "fp8_block"):
            copies = max(1, math.ceil((256 << 20) / (n * k * (2 if precision == "bf16" else 1))))
            try:
                weights = []
                for _ in range(copies):
                    w = torch.randn(n, k, device=DEV, dtype=BF16) * 0.02
                    if precision == "bf16":
                        weights.append((w, None))
                    elif precision == "fp8":
                        weights.append((w.to(FP8), torch.ones((), device=DEV)))
                    else:
                        scale = torch.ones((math.ceil(n / 128), math.ceil(k / 128)), device=DEV).t()
                        weights.append((w.to(FP8), scale))
                for m in TOKENS:
                    x = torch.randn(m, k, device=DEV, dtype=BF16)
                    x_scale = torch.ones((m, math.ceil(k / 128)), device=DEV)

                    def fn(x=x, x_scale=x_scale, weights=weights, precision=precision):
                        for w, s in weights:
                            if precision == "bf16":
                                F.linear(x, w)
                            else:
                                a_scale = s if precision == "fp8" else x_scale
                                torch._scaled_mm(x.to(FP8), w.t(), scale_a=a_scale, scale_b=s, out_dtype=BF16)

                    ms = graph_ms(fn) / copies
                    rows.append({"precision": precision, "m": m, "n": n, "k": k, "ms": ms, "copies": copies})
                    print(precision, m, n, k, round(ms * 1e3, 2), "us", flush=True)
                del weights
            except Exception as err:  # noqa: BLE001 - a precision the GPU's cuBLASLt lacks is skipped
                print("failed", precision, n, k, str(err)[:150], flush=True)
            torch.cuda.empty_cache()
    out = os.path.join(os.environ.get("OUT", "."), "small_gemm.json")
    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda}
    with open(out, "w") as f:
        json.dump({"meta": meta, "gemm": rows}, f, indent=1)


if __name__ == "__main__":
    main()
