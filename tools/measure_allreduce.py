#!/usr/bin/env python3
"""Measure tensor-parallel all-reduce cost on this machine's GPUs (NCCL through torch.distributed):
latency and bus bandwidth for message sizes from decode (a few KB) to prefill (hundreds of MB).

    python3 tools/measure_allreduce.py --out allreduce.json      # uses every visible GPU (needs >= 2)

Bus bandwidth = 2 (n-1)/n x bytes / time (NCCL's definition). Each size: 20 warm-ups, then the median of
100 all-reduces timed one by one with CUDA events, also inside a CUDA graph (how engines replay decode).
Keeps the machine's NCCL settings (NVLink multicast stays off where the host disables it).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

# python3 tools/measure_allreduce.py has tools/ on the path; python -m
# tools.measure_allreduce the repository root
try:
    from gpu_timing import event_times_ms
except ImportError:
    from tools.gpu_timing import event_times_ms

SIZES = [4096 * 2 * k for k in (1, 4, 16, 64, 256)] + [2 ** p for p in (22, 24, 26, 28)]


def _time(fn, iters=100):
    """Median microseconds of fn(), each call timed on its own with CUDA events."""
    return statistics.median([ms * 1e3 for ms in event_times_ms(fn, iters)])


def worker(rank, world, out, port):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ["MASTER_PORT"] = str(port)
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world)
    rows = []
    for size in SIZES:
        x = torch.randn(size // 2, device="cuda", dtype=torch.bfloat16)
        for _ in range(20):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        eager_us = _time(lambda x=x: dist.all_reduce(x))
        graph_us = None
        try:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    dist.all_reduce(x)
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for _ in range(10):
                    dist.all_reduce(x)
            graph_us = _time(g.replay, iters=30) / 10
        except Exception as err:  # graphs of NCCL calls need a recent NCCL; eager numbers still stand
            graph_us = f"failed: {type(err).__name__}"
        factor = 2 * (world - 1) / world
        rows.append({"bytes": size, "eager_us": eager_us, "graph_us": graph_us,
                     "bus_gb_s_eager": factor * size / (eager_us * 1e-6) / 1e9})
        if rank == 0:
            print(
                f"{size:>11,d} B  eager {eager_us:8.1f} us  graph "
                f"{graph_us if isinstance(graph_us, str) else f'{graph_us:8.1f}'} us"
                f"  bus {rows[-1]['bus_gb_s_eager']:7.1f} GB/s", flush=True,
            )
    if rank == 0:
        meta = {
            "gpus": [torch.cuda.get_device_name(i) for i in range(world)], "world_size": world,
            "torch": torch.__version__, "nccl": ".".join(map(str, torch.cuda.nccl.version())),
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "env": {k: v for k, v in os.environ.items() if k.startswith(("NCCL_", "TORCH_SYMM", "NVSHMEM"))},
        }
        with open(out, "w") as f:
            json.dump({"meta": meta, "allreduce": rows}, f, indent=1)
    dist.barrier()
    # destroy_process_group() hung after CUDA-graph-captured collectives on 2x H200
    # (2026-11-26, driver 580.159.04, torch 2.11.0+cu130);
    # the results are written, so leave without tearing NCCL down.
    os._exit(0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="allreduce.json")
    ap.add_argument("--port", type=int, default=29511)
    args = ap.parse_args()
    world = torch.cuda.device_count()
    if world < 2:
        raise SystemExit("error: needs at least 2 GPUs")
    mp.spawn(worker, args=(world, args.out, args.port), nprocs=world, join=True)


if __name__ == "__main__":
    main()
