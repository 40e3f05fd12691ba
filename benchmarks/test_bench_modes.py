"""Benchmark: the sizing search over tp x pp x ep x precision x GPU x mode (aggregated and disaggregated).
Target (issue 12): at least 5,000 configurations in under 2 s for the whole command, process start and
imports included. Measured on the 2-core dev machine shared by other jobs, wall time varies with load:
CPU time is the fair figure. Since the aggregated search also covers this request's pp x ep (82,326
configurations, was 10,779), the whole command took about 9-10 s CPU with the 25-GPU catalog; the per-request
layout memo and the stepwise goodput search (issue 22) bring it to about 3.8 s CPU in-process, 4.8 s with
process start (2026-11-26, shared 2-core machine, load 1.3-2.7): still above the target for this request.
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
COMMAND = ("import json, sys; from planner.serving.serving_modes import size_with_modes; "
           "r = size_with_modes(json.load(sys.stdin)); print(r['searched'])")


def test_bench_sizing_with_modes(benchmark):
    result = benchmark(size_with_modes, REQUEST)
    assert result["searched"] >= 5000
    assert {o["mode"] for o in result["options"]} <= {"aggregated", "disaggregated"}


def test_bench_sizing_with_modes_whole_command(benchmark):
    def run() -> int:
        out = subprocess.run([sys.executable, "-c", COMMAND], input=json.dumps(REQUEST), capture_output=True,
                             text=True, check=True, cwd=ROOT)
        return int(out.stdout)

    assert benchmark.pedantic(run, rounds=1, iterations=1) >= 5000
