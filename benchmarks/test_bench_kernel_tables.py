"""Benchmarks (pytest-benchmark) of the kernel-table step-time predictor (issue 30). Target: a plan with
percentiles under 20 ms, as with the fitted physics (benchmarks/test_bench_plan.py). Run: make bench."""

from __future__ import annotations

from planner import plan

SCENARIO = {"model": "llama-3.1-70b", "gpu": "h100-sxm", "tp": 4, "weights": "fp8", "kv_cache": "fp8",
            "context_len": 8192, "prompt_len": 2000, "output_len": 400, "load": {"concurrency": 64}}


def test_bench_plan_closed_loop_kernel_tables(benchmark):
    result = benchmark(plan, {**SCENARIO, "efficiency": {"kernel_tables": "h100-sxm/vllm"}})
    assert result.latency.step_predictor == "kernel_tables" and result.serving.benchmark is not None


def test_bench_plan_moe_kernel_tables(benchmark):
    result = benchmark(plan, {**SCENARIO, "model": "deepseek-r1", "gpu": "h200", "tp": 8,
                              "efficiency": {"kernel_tables": "h200/sglang"}, "engine": "sglang"})
    assert result.latency.step_predictor == "kernel_tables"
