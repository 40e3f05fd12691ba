"""What the charts draw (planner/contract/chart_data.py) and what would fit (the plan's fit_alternatives
section)."""

from __future__ import annotations

import pytest

from planner import plan
from planner.contract.chart_data import chart_data

# Llama-3.1-8B bf16 on one H100 at 8,192 tokens of context: vLLM's start-up accounting worked term by term in
# tests/test_memory_vllm.py::test_vllm_kv_budget_of_llama_8b_on_h100_term_by_term.
H100_8B = {
    "model": "llama-3.1-8b", "gpu": "h100-sxm", "context_len": 8192, "prompt_len": 2000, "output_len": 400,
}
H100_70B_FP8 = {"model": "llama-3.1-70b", "gpu": "h100-sxm", "tp": 4, "weights": "fp8", "kv_cache": "fp8",
                "context_len": 8192, "prompt_len": 2000, "output_len": 400}


def test_roofline_ceiling_corners_are_the_datasheet_peak_and_bandwidth():
    """H100 SXM: dense fp8 1,978.9 TFLOP/s and 3.35 TB/s HBM3, so the ridge sits at 1978.9 / 3.35 = 590.7
    FLOP/byte and the bandwidth roof at 10 FLOP/byte reaches 33.5 TFLOP/s.
    Source: datasheet: NVIDIA H100 SXM (dense fp8 1,978.9 TFLOP/s, 3.35 TB/s).
    """
    r = chart_data(H100_70B_FP8).roofline
    assert r.peak_tflops == pytest.approx(1978.9)
    assert r.ridge_flop_per_byte == pytest.approx(590.7, abs=0.05)
    (lo_ai, lo_tflops), (ridge_ai, ridge_tflops), (_, flat) = r.ceiling
    assert ridge_ai == pytest.approx(590.7, abs=0.05) and ridge_tflops == pytest.approx(1978.9)
    assert lo_tflops == pytest.approx(lo_ai * 3.35) and flat == pytest.approx(1978.9)


@pytest.mark.parametrize("scenario", [
    H100_70B_FP8, {**H100_70B_FP8, "gpu": "h200", "tp": 2},
    {**H100_70B_FP8, "model": "mixtral-8x7b", "weights": "bf16", "kv_cache": "bf16", "tp": 2},
    {**H100_70B_FP8, "model": "llama-3.1-8b", "tp": 1, "batch": 1},
    {**H100_70B_FP8, "model": "llama-3.1-8b", "tp": 1, "efficiency": "ideal"},
])
def test_operating_points_never_sit_above_the_roof(scenario):
    """A kernel cannot beat the roofline: its FLOPs over its estimated time are at most min(peak, AI x HBM);
    with efficiency 'ideal' the decode step sits on the roof (Williams, Waterman, Patterson 2009). By hand,
    the ideal Llama-3.1-8B decode step at batch 16 and 4,096 cached tokens (mean context 4,000 + 192 / 2) on
    an H100 (tests/test_roofline.py::test_ideal_decode_step_of_a_batch): 16 x (15,009,316,864 + 2,147,483,648)
    = 274,508,808,192 FLOPs over 15,009,316,864 + 16 x 537,001,984 = 23,601,348,608 B is 11.6311 FLOP/B, and
    in
    7.045178 ms it runs at 38.964 TFLOP/s, on the bandwidth roof (11.6311 x 3.35 = 38.964).

    Source: hand: the decode step's FLOPs, bytes and time above."""
    c = chart_data(scenario)
    r = c.roofline
    for point in r.points:
        roof = min(r.peak_tflops, point.ai_flop_per_byte * r.hbm_tb_s)
        assert point.tflops_per_gpu <= roof * (1 + 1e-9)
    if scenario.get("efficiency") == "ideal":
        decode = r.points[0]
        assert decode.tflops_per_gpu == pytest.approx(
            min(r.peak_tflops, decode.ai_flop_per_byte * r.hbm_tb_s), rel=0.05
        )
    hand = chart_data({"model": "llama-3.1-8b", "gpu": "h100-sxm", "efficiency": "ideal", "batch": 16,
                       "prompt_len": 4000, "output_len": 192}).roofline.points[0]
    assert hand.ai_flop_per_byte == pytest.approx(11.6311, rel=1e-4)
    assert hand.tflops_per_gpu == pytest.approx(38.964, rel=1e-4)


def test_memory_stack_fills_the_engine_cap_below_the_device_total():
    """The stack (weights, rotary tables, activations, non-torch, graphs, KV, free) adds up to the utilization
    cap, which is 0.9 of what the framework sees and below the device total; every part is non-negative. For
    Llama-3.1-8B bf16 on one H100 the stack draws the plan's own waterfall, term for term (the terms are
    checked against vLLM's start-up logs in tests/test_memory_vllm.py), and its anchors come from outside the
    code: the device total is nvidia-smi's 81,559 MiB on an H100 SXM (README) = 79.647 GiB; the weights are
    the checkpoint's 8,030,261,248 parameters (Hugging Face safetensors metadata) x 2 B = 14.9575 GiB; the
    rotary table is 131,072 positions (config.json) x 128 x 2 B = 0.03125 GiB.

    Source: hand: the anchors above (nvidia-smi, the checkpoint's parameter count, config.json)."""
    c = chart_data(H100_70B_FP8)
    m = c.memory
    assert sum(p.gb for p in m.parts) == pytest.approx(m.usable_gb, rel=1e-9)
    assert m.usable_gb < m.device_gb
    assert all(p.gb >= 0 for p in m.parts)
    assert [line.name for line in m.lines] == ["utilization cap", "device total"]
    small = chart_data(H100_8B).memory
    w = plan(H100_8B).memory.waterfall_gib
    assert w is not None
    assert small.device_gb == pytest.approx(81_559 / 1024, abs=1e-3)  # 85.52e9 B in the catalog: 3 decimals
    assert small.usable_gb == pytest.approx(0.90 * w["framework_total"], rel=1e-12)
    terms = ("weights", "rotary_tables", "activation_peak", "non_torch", "cuda_graphs", "kv_cache")
    assert [p.gb for p in small.parts] == pytest.approx([w[k] for k in terms] + [0.0], abs=1e-9)
    assert small.parts[0].gb == pytest.approx(8_030_261_248 * 2 / 2**30, rel=1e-9)
    assert small.parts[1].gb == pytest.approx(131_072 * 128 * 2 / 2**30, rel=1e-12)


def test_sweep_marks_the_batches_past_the_max_batch():
    """A batch fits exactly when it is at most the max batch. Llama-3.1-8B bf16 on one H100 at 8,192 tokens of
    context: vLLM's KV cache holds 27,368 blocks of 16 tokens (tests/test_memory_vllm.py, by hand), a
    sequence takes 8,192 / 16 = 512 of them, so 27,368 / 512 = 53.5: 53 sequences fit, 54 do not.

    Source: hand: the block arithmetic above."""
    c = chart_data(H100_70B_FP8)
    for batch, fits in zip(c.sweep["batch"], c.sweep["fits"], strict=True):
        assert fits == (batch <= c.max_batch)
    assert c.max_batch in c.sweep["batch"]
    small = chart_data(H100_8B)
    assert small.max_batch == 53
    assert all(
        fits == (batch <= 53) for batch, fits in zip(small.sweep["batch"], small.sweep["fits"], strict=True)
    )


def test_what_would_fit_for_405b_bf16_on_h100_tp8():
    """Llama-3.1-405B bf16: 405.9e9 x 2 B = 811.8 GB. H100 (80 GB x 0.9 - 2 GB ~ 70 GB per GPU): TP 8 gives
    101.5 GB per GPU (no), TP 16 50.7 GB (yes, but beyond an 8-GPU server: not offered). At TP 8: fp8
    weights 50.7 GB fit, bf16 none. In bf16 an H200 (141 x 0.9 - 2 = 124.9 GB), a B200 (180 GB) and an
    MI300X (192 GB) need TP 8 (TP 4: 203 GB each), an MI325X (256 x 0.9 - 2 = 228 GB) holds TP 4, an A100
    80 GB needs TP 16, beyond its 8-GPU server: not offered.
    Source: hand: the arithmetic above (parameter count from the Llama 3.1 405B model card).
    """
    scenario = {"model": "llama-3.1-405b", "gpu": "h100-sxm", "tp": 8, "weights": "bf16", "kv_cache": "bf16"}
    alt = plan(scenario).fit_alternatives
    assert alt is not None and alt.smallest_tp is None
    pairs = {(c.weights, c.kv_cache) for c in alt.precisions}
    assert ("fp8", "bf16") in pairs and all(w != "bf16" for w, _ in pairs)
    tp_by_gpu = {c.gpu: c.tp for c in alt.gpus}
    assert {k: tp_by_gpu.get(k) for k in ("h200", "b200", "mi300x", "mi325x", "a100-sxm-80gb")} == {
        "h200": 8, "b200": 8, "mi300x": 8, "mi325x": 4, "a100-sxm-80gb": None}



def test_serving_charts_use_the_plans_own_replica_model():
    """The serving charts and the plan are one model (issue 9): with `batch` below the max batch, the chart's
    capacity is the plan's, and a point of the p99-vs-rate curve plans (at its rate) to the same p99 TTFT and
    ITL. The capacity it draws for a prefill-only replica (Llama-3.1-8B bf16 on one H100, ideal engine,
    8,192-token prompts filling one iteration, one output token) is one request per S = 147.1406 ms (the ideal
    prefill by hand, tests/test_roofline.py): 6.79621 requests/s.

    Source: hand: a single server's capacity 1 / S, S by hand."""
    from planner.contract.chart_data import serving_series

    s = {**H100_70B_FP8, "batch": 64, "load": {"request_rate": 2.0}}
    series = serving_series(s, plan(s))
    assert series is not None
    assert series.capacity_rate == pytest.approx(plan(s).serving.max_request_rate, rel=1e-9)
    point = series.vs_rate[len(series.vs_rate) // 2]
    at = plan({**s, "load": {"request_rate": point["request_rate"]}}).serving
    assert point["ttft_p99_ms"] == pytest.approx(at.ttft_ms.p99, rel=1e-6)
    assert point["itl_p99_ms"] == pytest.approx(at.itl_ms.p99, rel=1e-6)
    md1 = {
        "model": "llama-3.1-8b", "gpu": "h100-sxm", "efficiency": "ideal", "prompt_len": 8192,
        "output_len": 1, "load": {"request_rate": 1.0},
    }
    md1_series = serving_series(md1, plan(md1))
    assert md1_series is not None and md1_series.capacity_rate == pytest.approx(1000.0 / 147.1406, rel=1e-3)
