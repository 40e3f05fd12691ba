"""Benchmarks (pytest-benchmark). Targets live here, not in timed assertions:
plan() under 2 ms per plan on the 2-core dev machine. Run: make bench."""

from __future__ import annotations

from planner import plan

SCENARIO = {"model": "llama-3.1-70b", "gpu": "h100-sxm", "tp": 4, "weights": "fp8", "kv_cache": "fp8",
            "context_len": 8192, "prompt_len": 2000, "output_len": 400}


def test_bench_plan(benchmark):
    result = benchmark(plan, SCENARIO)
    assert result.memory.max_batch > 0


def test_bench_plan_moe(benchmark):
    result = benchmark(plan, {**SCENARIO, "model": "deepseek-v3", "gpu": "h200", "tp": 8})
    assert result.model.active_params < result.model.total_params


SIZING = {
    "model": "llama-3.1-70b", "traffic": {"requests_per_s": 10.0, "prompt_len": 2000, "output_len": 400},
    "slo": {"ttft_ms": 2000.0, "itl_ms": 50.0},
}


def test_bench_sizing_whole_catalog(benchmark):
    """Target: a search over >= 5,000 configurations under 0.5 s in-process."""
    from planner.serving.sizing import size

    result = benchmark(size, SIZING)
    assert result["searched"] >= 5000


def test_bench_batch_sweep(benchmark):
    from planner.serving.sweep import batch_sweep

    result = benchmark(batch_sweep, SCENARIO)
    assert len(result["batch"]) > 10


def test_bench_plan_closed_loop_benchmark(benchmark):
    """Target (issue 20): a plan with percentiles under 20 ms, here with the closed-loop benchmark client
    of 64 clients (640 requests simulated) beside the steady-state serving model."""
    result = benchmark(plan, {**SCENARIO, "load": {"concurrency": 64}})
    assert result.serving.benchmark is not None and result.serving.benchmark.tpot_ms.mean > 0


def test_bench_plan_at_the_objective(benchmark):
    """Target: a plan with percentiles under 20 ms at the goodput of the default objective."""
    result = benchmark(
        plan, {**SCENARIO, "load": {"at_goodput": True, "slo": {"ttft_ms": 1000, "itl_ms": 50}}}
    )
    assert result.serving.at_goodput
