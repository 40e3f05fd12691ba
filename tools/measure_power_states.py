"""Board power of one GPU in three states, for the catalog's idle_power_w and the power model's load points:
idle (CUDA context up, nothing running), an HBM-bound copy loop (the shape of decode) and a bf16 GEMM loop
(the shape of prefill). nvidia-smi's power.draw is sampled every 100 ms in each state after a settling time.

Run on a CUDA machine with PyTorch: python tools/measure_power_states.py OUT.json
(data/measurements/h100_power_states_2026-11-26.json and h200_power_states_2026-11-26.json.)
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import threading
import time

import torch
from gpu_timing import device_meta, log

SETTLE_S = 5.0
SAMPLE_S = 15.0


def query(field: str) -> str:
    return subprocess.run(["nvidia-smi", "-i", "0", f"--query-gpu={field}", "--format=csv,noheader,nounits"],
                          capture_output=True, text=True).stdout.strip()


def sample_while(work) -> dict:
    """Run `work` in a loop on a thread for SETTLE_S + SAMPLE_S s; sample power over the last SAMPLE_S."""
    stop = threading.Event()

    def loop():
        while not stop.is_set():
            work()
            torch.cuda.synchronize()

    t = threading.Thread(target=loop)
    t.start()
    time.sleep(SETTLE_S)
    samples = []
    end = time.time() + SAMPLE_S
    while time.time() < end:
        samples.append(float(query("power.draw")))
        time.sleep(0.1)
    stop.set()
    t.join()
    samples.sort()
    return {"median_w": statistics.median(samples), "p10_w": samples[len(samples) // 10],
            "p90_w": samples[(9 * len(samples)) // 10], "n": len(samples),
            "sm_clock_mhz_after": query("clocks.sm")}


def main(path: str) -> None:
    torch.cuda.init()
    _ = torch.zeros(1, device="cuda")
    result = {**device_meta("nvidia-smi power.draw every 100 ms for 15 s after 5 s settling, per state"),
              "power_limit_w": query("power.limit")}
    log("idle")
    result["idle"] = sample_while(lambda: time.sleep(0.05))
    src = torch.empty(2 * 1024**3, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    log("hbm copy")
    result["hbm_copy_2gib"] = sample_while(lambda: dst.copy_(src))
    a = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    log("gemm")
    result["bf16_gemm_8192"] = sample_while(lambda: [torch.mm(a, b) for _ in range(20)])
    log("idle after")
    result["idle_after_load"] = sample_while(lambda: time.sleep(0.05))
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    log(json.dumps(result, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
