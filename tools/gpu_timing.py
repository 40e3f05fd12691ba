"""CUDA timing shared by the measurement scripts (tools/measure_gpu.py, tools/measure_physics.py,
tools/measure_allreduce.py): kernels timed one by one with CUDA events, CUDA-graph replays, the HBM bandwidth
ceiling, and the device metadata every measurement file names (also measure_sampler_peak.py and
measure_allocator_rounding.py). Needs a CUDA machine with PyTorch; the scripts import it from their own
folder."""

from __future__ import annotations

import datetime
import statistics
import subprocess

import torch


def device_meta(what: str) -> dict:
    """What a measurement names: the GPU, driver, torch, CUDA, the UTC date, and what was measured."""
    driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                            capture_output=True, text=True).stdout.strip().splitlines()
    return {
        "gpu": torch.cuda.get_device_name(0), "driver": driver[0] if driver else None,
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "date_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"), "what": what,
    }


def log(*args):
    print(*args, flush=True)


def event_times_ms(fn, iters):
    """fn() run `iters` times, each timed with its own pair of CUDA events, in ms (no warm-up here)."""
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return times


def time_cuda(fn, warmup=3, iters=15):
    """Median, min and max milliseconds of fn() over iters after `warmup` calls, timed with CUDA events."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = event_times_ms(fn, iters)
    return statistics.median(times), min(times), max(times)


def capture_graph(fn, warmup=2):
    """fn captured in a CUDA graph, after `warmup` calls on a side stream (what engines with CUDA graphs
    replay)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph


def time_graph(fn, warmup=2, iters=20, replay_warmup=3):
    """Capture fn in a CUDA graph and time its replays (what engines with CUDA graphs run): median, min and
    max milliseconds of `iters` replays after `replay_warmup` of them."""
    graph = capture_graph(fn, warmup)
    result = time_cuda(graph.replay, warmup=replay_warmup, iters=iters)
    del graph
    return result


def graph_median_ms(fn, warmup=2, iters=20):
    """Median replay milliseconds of fn captured in a CUDA graph, the replays warmed up twice
    (tools/measure_physics.py's timing)."""
    return time_graph(fn, warmup, iters, replay_warmup=2)[0]


def measure_bandwidth(gib=4, release=True):
    """Achievable HBM bandwidth: a device-to-device copy (read + write) and a read-only reduction of `gib`
    GiB of bf16; `release` frees the buffers and the allocator's cache afterwards."""
    n = int(gib * (1 << 30) // 2)
    a = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    b = torch.empty_like(a)
    copy_ms = time_cuda(lambda: b.copy_(a), iters=20)[0]
    read_ms = time_cuda(lambda: torch.sum(a, dtype=torch.float32), iters=20)[0]
    if release:
        del a, b
        torch.cuda.empty_cache()
    return {
        "bytes": 2 * n,
        "copy_tb_s": 2 * (2 * n) / (copy_ms * 1e-3) / 1e12,  # bytes read + written
        "read_tb_s": (2 * n) / (read_ms * 1e-3) / 1e12,
    }
