#!/usr/bin/env python3
"""GPU board power against load, on whatever CUDA GPU this runs on: the evidence behind the power model
of planner/economics/power.py (GPU W = idle + (TDP - idle) x u).

Reads nvidia-smi's power.draw every 100 ms while the GPU (1) idles with a CUDA context up, (2) runs a
compute-bound kernel (a bf16 GEMM, prefill-like) and (3) a memory-bound one (a bf16 GEMV over a weight
matrix much larger than L2, decode-like), each continuously and at duty cycles 25/50/75% (bursts of
kernels then sleep, in 20 ms periods, well inside the power sensor's averaging window). Reports the median
draw of each phase, the enforced power limit, and the achieved TFLOP/s and TB/s of the busy kernels.

    python tools/measure_power.py --out data/measurements/h100_power_vs_load.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import threading
import time

import torch

# python3 tools/measure_power.py has tools/ on the path; python -m tools.measure_power the repository root
try:
    from gpu_timing import device_meta
except ImportError:
    from tools.gpu_timing import device_meta

PHASE_S = 6.0
SETTLE_S = 2.0  # the first seconds of a phase are dropped: the sensor averages and the clocks ramp
PERIOD_S = 0.020


def smi(query: str) -> str:
    out = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits", "-i", "0"],
                         capture_output=True, text=True).stdout
    return out.strip().splitlines()[0].strip()


class Sampler:
    """power.draw and the SM clock every 100 ms in a thread, tagged with the phase running."""

    def __init__(self) -> None:
        self.phase = "start"
        self.samples: list[tuple[str, float, float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(ValueError, IndexError):  # a missed reading is skipped
                watts, clock = smi("power.draw,clocks.sm").split(",")
                self.samples.append((self.phase, time.monotonic(), float(watts), float(clock)))
            time.sleep(0.1)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def median(self, phase: str, since: float) -> float:
        return self.stats(phase, since)["median_w"]

    def stats(self, phase: str, since: float) -> dict:
        """The phase's median draw and SM clock over its samples from `since`, and how many there were."""
        rows = [(w, c) for p, t, w, c in self.samples if p == phase and t >= since]
        if not rows:
            return {"median_w": float("nan"), "samples": 0}
        return {"median_w": statistics.median(w for w, _ in rows),
                "sm_clock_mhz": statistics.median(c for _, c in rows), "samples": len(rows)}


def run_phase(sampler: Sampler, name: str, kernel, kernel_s: float, duty: float) -> dict:
    """`kernel` in bursts filling `duty` of each 20 ms period (duty 1: back to back) for PHASE_S seconds."""
    sampler.phase = name
    start = time.monotonic()
    burst = max(1, round(duty * PERIOD_S / kernel_s)) if duty > 0 else 0
    while time.monotonic() - start < PHASE_S:
        t0 = time.monotonic()
        for _ in range(burst):
            kernel()
        torch.cuda.synchronize()
        if duty < 1:
            time.sleep(max(PERIOD_S - (time.monotonic() - t0), 0.0))
    return {
        "phase": name, "duty": duty, "kernels_per_burst": burst,
        "median_w": sampler.median(name, start + SETTLE_S),
    }


def timed_s(kernel, iters: int = 50) -> float:
    kernel()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        kernel()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / iters


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    dev = torch.device("cuda")
    n = 8192
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    c = torch.empty(n, n, device=dev, dtype=torch.bfloat16)
    w = torch.randn(8192, 131072, device=dev, dtype=torch.bfloat16)  # 2 GiB of "weights", far above L2
    x = torch.randn(1, 8192, device=dev, dtype=torch.bfloat16)
    y = torch.empty(1, 131072, device=dev, dtype=torch.bfloat16)

    def gemm() -> None:
        torch.mm(a, b, out=c)

    def gemv() -> None:
        torch.mm(x, w, out=y)

    gemm_s, gemv_s = timed_s(gemm), timed_s(gemv)
    result = {
        **device_meta(
            "board power (nvidia-smi power.draw, 100 ms polling, phase median after 2 s) idle, "
            "bf16 GEMM 8192^3 and bf16 GEMV 1x8192 @ 8192x131072 at duty cycles"
        ),
        "power_limit_w": float(smi("power.limit")),
        "enforced_power_limit_w": float(smi("enforced.power.limit")),
        "gemm_tflop_s": 2 * n**3 / gemm_s / 1e12, "gemv_tb_s": w.numel() * 2 / gemv_s / 1e12,
        "gemm_ms": gemm_s * 1e3, "gemv_ms": gemv_s * 1e3, "phases": [],
    }
    print(json.dumps({k: v for k, v in result.items() if k != "phases"}), flush=True)
    with Sampler() as sampler:
        sampler.phase = "idle"
        start = time.monotonic()
        time.sleep(PHASE_S + 2)
        result["phases"].append(
            {"phase": "idle", "duty": 0.0, "median_w": sampler.median("idle", start + SETTLE_S + 2)}
        )
        for name, kernel, kernel_s in (("gemm", gemm, gemm_s), ("gemv", gemv, gemv_s)):
            for duty in (1.0, 0.75, 0.5, 0.25):
                row = run_phase(sampler, f"{name}_{int(duty * 100)}", kernel, kernel_s, duty)
                print(json.dumps(row), flush=True)
                result["phases"].append(row)
            sampler.phase = f"rest_after_{name}"
            time.sleep(2)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
