"""Benchmarks of the serving model (issue 9 targets, measured here, never asserted as timings):
a plan with percentiles and goodput under 20 ms in-process; a sizing search with goodput over
>= 5,000 configurations under 2 s for the whole CLI command. Run: make bench."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from planner import plan

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = {
    "model": "llama-3.1-70b", "gpu": "h100-sxm", "tp": 4, "weights": "fp8", "kv_cache": "fp8",
    "context_len": 8192, "prompt_len": 2000, "output_len": 400,
    "load": {"request_rate": 4.0, "arrival_cv": 1.5, "slo": {"ttft_ms": 500, "itl_ms": 50, "percentile": 90}},
}
SIZING = {
    "model": "llama-3.1-70b", "traffic": {"requests_per_s": 10.0, "prompt_len": 2000, "output_len": 400},
    "slo": {"ttft_ms": 2000.0, "itl_ms": 50.0, "percentile": 90},
}


def test_bench_plan_with_percentiles_and_goodput(benchmark):
    result = benchmark(plan, SCENARIO)
    assert result.serving.stable and result.serving.ttft_ms.p99 is not None
    assert result.serving.goodput_request_rate is not None


def test_bench_plan_closed_loop_lognormal(benchmark):
    s = {**SCENARIO, "load": {"concurrency": 64, "prompt_len_cv": 1.0, "output_len_cv": 1.0}}
    result = benchmark(plan, s)
    assert result.serving.e2e_ms.p99 is not None


def _size_cli() -> dict:
    r = subprocess.run([sys.executable, "-m", "planner", "size", "-"], input=json.dumps(SIZING), text=True,
                       capture_output=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_bench_sizing_goodput_cli(benchmark):
    """The whole CLI command (interpreter start included) over the whole catalog."""
    out = benchmark.pedantic(_size_cli, rounds=3, iterations=1)
    assert out["searched"] >= 5000 and out["options"]
