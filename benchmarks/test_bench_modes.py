"""Benchmark: the sizing search over tp x pp x ep x precision x GPU x mode (aggregated and disaggregated).
Target (issue 12): at least 5,000 configurations in under 2 s for the whole command, process start and
imports included; issue 22 asks the same of this 82,326-configuration request. Wall time varies with the load
of the shared 2-core dev machine: CPU time is the fair figure. The request took about 9-10 s CPU with the
25-GPU catalog before the per-request layout memo, the stepwise goodput search and the cost floors (issue
22). Measured 2026-11-26 on the idle 2-core machine (load under 0.5): 1.37-1.45 s CPU in-process (warm),
1.46-1.56 s for the first request of a process; the whole command `python -m planner size` 1.48-1.55 s wall
(1.57-1.64 s CPU), of which about 0.25 s is process start and imports.
No timing is asserted; `make bench` times it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from planner.serving.serving_modes import size_with_modes

ROOT = Path(__file__).resolve().parents[1]
REQUEST = {
    "model": "qwen3-235b-a22b", "traffic": {"requests_per_s": 20.0, "prompt_len": 2000, "output_len": 400},
    "slo": {"ttft_ms": 2000.0, "itl_ms": 60.0}, "tp": [1, 2, 4, 8], "pp": [1, 2], "ep": [1, 8, 16],
    "weights": ["bf16", "fp8", "int4"], "kv_cache": ["bf16", "fp8"], "disaggregation": True,
}


def test_bench_sizing_with_modes(benchmark):
    result = benchmark(size_with_modes, REQUEST)
    assert result["searched"] >= 5000
    assert {o["mode"] for o in result["options"]} <= {"aggregated", "disaggregated"}


def test_bench_sizing_with_modes_whole_command(benchmark):
    def run() -> int:
        out = subprocess.run([sys.executable, "-m", "planner", "size", "-"], input=json.dumps(REQUEST),
                             capture_output=True, text=True, check=True, cwd=ROOT)
        return int(json.loads(out.stdout)["searched"])

    assert benchmark.pedantic(run, rounds=1, iterations=1) >= 5000
