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
    """Target (issue 30): a plan with percentiles under 20 ms. This open loop at 4 req/s (bursty arrivals, an
    objective) also names the constraint that binds its goodput and what relaxing it buys (issue 31's
    `serving.goodput_binding`: each objective's goodput alone, a relaxed search, the confirmed rate).
    2026-11-27, 20:03 UTC, load 0.9, median of 27+ rounds: 32.9 ms at the start of the day's work (4e25aaa),
    35.9 ms after the slot wait joined the plan (737c905), missed; then ~48 ms under cProfile, 33 ms of it the
    binding's four goodput searches. Since the plan's goodput search and the binding's share one replica
    model's figures (planner.serving.shared_searches: each rate's load point and distributions computed once
    for every objective, a bisection's midpoints judged a tree at once, each rate's figures its own alone):
    2026-11-27, 20:52 UTC, load 2.3-2.6 on 2 shared cores, 30+ rounds, main 5e266e5 and this change run
    alternately: fastest round 34.6 -> 12.5 ms, median 48.3 -> 12.7 ms (met); 32,559 -> 11,099 Python calls
    a plan under cProfile, the binding 68% -> 54% of its time. The plan at the objective
    (data/examples/llama70b_h100_fp8_at_objective.json, 18.0 ms at 20:03): 17.3 -> 10.5-10.9 ms CPU-time
    median; this scenario at its objective's goodput 35.4 -> 13.7 ms; the closed loop at 64 clients 8.7 ms
    fastest round either way (5.3 ms median at 20:03, load 0.9)."""
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
