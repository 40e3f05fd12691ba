"""An MoE prefill's routed experts from the engine's kernel tables (issue 30: TensorRT-LLM's production
prefill of DeepSeek-R1 ran its grouped expert GEMMs at the dense prefill rate, 2.1-2.5x faster than its
tables on H200)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.engines.profiles import engine_efficiency, with_efficiency
from planner.physics.kernel_step import routed_moe_ms, tables_key
from planner.physics.latency import prefill, prefill_floor_ms
from planner.physics.step_predictor import with_kernel_tables
from planner.scenario.scenario import parse_scenario, resolve


def _deployment(model: str, gpu: str, tp: int, weights: str, engine: str, from_tables: bool, ep: int = 1):
    d = resolve(parse_scenario({"model": model, "gpu": gpu, "tp": tp, "ep": ep, "weights": weights,
                                "kv_cache": "fp8", "engine": engine}))
    share = float(from_tables)
    e = engine_efficiency(engine, gpu, weights).model_copy(update={"prefill_moe_from_tables": share})
    return with_efficiency(d, e)


def test_a_dense_model_or_a_gpu_without_tables_keeps_its_prefill():
    """Source: invariant: the flag moves only routed experts that some table measured. Llama-3.3-70B (no
    experts) on H200 and DeepSeek-R1 on MI355X (no tables) prefill exactly as without it."""
    lengths = np.array([256.0, 1024.0, 8192.0])
    for args in (("llama-3.3-70b", "h200", 8, "fp8", "trt-llm"),
                 ("deepseek-r1", "mi355x", 8, "fp8", "sglang")):
        on, off = _deployment(*args, True), _deployment(*args, False)
        assert np.array_equal(prefill(on, lengths).total_ms, prefill(off, lengths).total_ms), args


@pytest.mark.parametrize("gpu,tp,ep,weights", [("h200", 8, 1, "fp8"), ("h200", 8, 8, "fp8"),
                                               ("b200", 4, 4, "fp4"), ("b200", 8, 1, "fp8")])
def test_the_routed_experts_take_the_tables_time_and_the_prefill_follows_its_tables(gpu, tp, ep, weights):
    """Source: published: the engine's kernel tables (planner/data/kernel_tables/, TensorRT-LLM). With the
    flag, DeepSeek-R1's prefill is its other GEMMs and attention as before plus the tables' routed experts
    (every MoE layer), so it moves with them: against the whole prefill assembled from the tables, it lies
    within 0.65-1.35x at 1k and 8k tokens and no farther than without the flag (0.40-0.90x on H200 TP 8,
    2026-11-27), and it never
    drops below its work's roofline or below prefill_floor_ms."""
    lengths = np.array([1024.0, 8192.0])
    on = _deployment("deepseek-r1", gpu, tp, weights, "trt-llm", True, ep)
    step = prefill(on, lengths)
    assert np.all(step.total_ms >= step.bound_ms * (1 - 1e-9))
    for s, total in zip(lengths, step.total_ms, strict=True):
        assert prefill_floor_ms(on, float(s)) <= total
    key = tables_key(gpu, "trt-llm")
    assert key is not None
    assert np.all(step.gemm_ms >= routed_moe_ms(on, key, lengths))
    tables_eff = with_kernel_tables(on.efficiency, gpu, "trt-llm")
    assert tables_eff is not None
    kernels = prefill(with_efficiency(on, tables_eff), lengths).total_ms
    ratio = step.total_ms / kernels
    off_d = _deployment("deepseek-r1", gpu, tp, weights, "trt-llm", False, ep)
    off = prefill(off_d, lengths).total_ms / kernels
    assert np.all((ratio > 0.65) & (ratio < 1.35)), ratio
    assert np.all(np.abs(np.log(ratio)) <= np.abs(np.log(off)) + 0.05), (ratio, off)


@settings(max_examples=25, deadline=None)
@given(st.floats(min_value=16.0, max_value=32_768.0), st.floats(min_value=1.0, max_value=4.0))
def test_an_moe_prefill_from_the_tables_grows_with_its_prompt(length, factor):
    """Source: invariant: a longer prompt is more work: DeepSeek-R1's prefill on TensorRT-LLM H200 (TP 8) with
    its routed experts from the tables takes no less time for a longer prompt."""
    on = _deployment("deepseek-r1", "h200", 8, "fp8", "trt-llm", True)
    short, long_ = prefill(on, np.array([length, length * factor])).total_ms
    assert long_ >= short * (1 - 1e-9)
