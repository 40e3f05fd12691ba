"""The time model's structure: bounds, breakdowns, TP communication, prefill, speculation, MoE decode."""

from __future__ import annotations

import numpy as np
import pytest

from planner import plan
from planner.hardware.communication import allreduce_ms
from planner.physics.latency import decode_step
from planner.scenario.scenario import parse_scenario, resolve


def _deployment(**overrides):
    base = {"model": "llama-3.1-8b", "gpu": "h100-sxm"}
    return resolve(parse_scenario({**base, **overrides}))


def test_ideal_itl_equals_bound_plus_link_transfer(seed_scenario):
    """Source: hand: the seeds' Llama-3-70B TP8 fp16 at batch 1, ideal engine: weights streamed
    17.239 GB / 3.35 TB/s = 5.1461 ms (test_seed_figures); two all-reduces per layer of one token's
    8,192 x 2 B over 450 GB/s with the ring's 1.75: 2 x 80 x 1.75 x 16,384 / 450e9 s = 0.010194 ms;
    no fixed costs."""
    p = plan({**seed_scenario, "batch": 1})
    assert p.latency.decode_breakdown_ms["communication_ms"] == pytest.approx(0.010194, rel=1e-4)
    assert p.latency.decode_breakdown_ms["overhead_ms"] == 0
    assert p.latency.itl_ms == pytest.approx(5.1461 + 0.010194, rel=2e-4)


def test_allreduce_formula():
    """Source: hand: ring all-reduce time = 2(n-1)/n x bytes / link + latency x log2(n), worked below."""
    # 1 MB over TP 4 at 450 GB/s, efficiency 1, 10 us latency at TP 2: 1.5 MB / 450 GB/s + 10 us x log2(4)
    assert allreduce_ms(1e6, 4, 450.0, 1.0, 10.0) == pytest.approx(1.5e6 / 450e9 * 1e3 + 0.020)
    assert allreduce_ms(1e6, 2, 450.0, 1.0, 10.0) == pytest.approx(1e6 / 450e9 * 1e3 + 0.010)
    assert allreduce_ms(1e6, 1, 450.0, 1.0, 10.0) == 0


# Held-out message sizes and how close one latency + bandwidth line gets to them: NCCL changes
# protocol between 0.5 and 16 MB, which one line cannot follow, so those sizes are not asserted.
def test_allreduce_constants_reproduce_nccl_in_a_cuda_graph():
    """Source: measured: data/measurements/allreduce_{2,4}xh200_nvlink_2026-11-26.json (NCCL 2.28 inside a
    CUDA graph, 4x H200 NVLink, TP 2 and 4) fit the two constants; the older 2x H200 run on another machine
    (allreduce_2xh200_2026-11-26.json) was never fitted. One line (latency x log2 tp + ring volume / bus
    bandwidth) must land within 25% of decode-sized messages (8-128 KB, the latency regime) and within 15% of
    64-256 MB (the bandwidth regime) in all three; NCCL switches protocol in between, which one line cannot
    follow, so 0.5-16 MB is not asserted. A 30% error in either constant fails."""
    import json
    from pathlib import Path

    from planner.engines.profiles import physics_values

    e = physics_values()
    folder = Path(__file__).resolve().parents[1] / "data" / "measurements"
    runs = [(2, "allreduce_2xh200_nvlink_2026-11-26.json"), (4, "allreduce_4xh200_nvlink_2026-11-26.json"),
            (2, "allreduce_2xh200_2026-11-26.json")]
    for tp, name in runs:
        for row in json.loads((folder / name).read_text())["allreduce"]:
            predicted_us = (
                float(allreduce_ms(row["bytes"], tp, 450.0, e["link"], e["allreduce_latency_us"])) * 1e3
            )
            if row["bytes"] <= 131_072:
                assert predicted_us == pytest.approx(row["graph_us"], rel=0.25), (name, row["bytes"])
            elif row["bytes"] >= 67_108_864:
                assert predicted_us == pytest.approx(row["graph_us"], rel=0.15), (name, row["bytes"])


def test_tp_speedup_falls_short_of_tp_as_published():
    """Source: published: gpt-fast (measured_published.csv), Llama-2-70B bf16 batch 1 on A100: MBU 72% at
    TP2 and 51-53% at TP8, so TP2 -> TP8 speeds decode up 4 x 0.52 / 0.72 = 2.9x, not 4x. The planner's
    TP2 -> TP8 speedup must land in 2.4-3.4 (a model with no per-layer fixed cost gives about 4)."""
    tp2 = plan({"model": "llama-3.1-70b", "gpu": "a100-sxm-80gb", "tp": 2, "batch": 1, "prompt_len": 5,
                "output_len": 200})
    tp8 = plan({"model": "llama-3.1-70b", "gpu": "a100-sxm-80gb", "tp": 8, "batch": 1, "prompt_len": 5,
                "output_len": 200})
    assert 2.4 <= tp2.latency.itl_ms / tp8.latency.itl_ms <= 3.4


def test_prefill_time_grows_slower_than_the_prompt_as_published():
    """Source: published: batch-1 first-token latency at 128 and 2,048 prompt tokens, 7B-class models
    (measured_published.csv): TRT-LLM v0.5 H100 fp8 7 -> 36 ms (x5.1), A100 fp16 16 -> 133 ms (x8.3);
    LMDeploy A100 fp16 22 -> 139 ms (x6.3). A 16x longer prompt costs 5-8x, not 16x: short prompts pay a
    weight read and fixed costs. The planner's ratio must stay in 3-12 on both GPUs: 6.2 on H100 fp8
    (5.3 -> 33 ms, measured on our H100 from 64 tokens up, issue 20); 11.0 on A100 fp16 (13.2 -> 145 ms),
    above the published 8.3 because the A100 was never measured here: its 128-token prefill is one weight
    read plus per-layer kernel costs, below TRT-LLM v0.5's 16 ms, and its 2,048-token prefill carries the
    H100's fitted compute fraction, 9% above the published 133 ms (issue 10's 3-10 window assumed a
    short prompt paid a whole extra weight read, which the H100 short-prompt set refuted); prefill at 8,192
    tokens is compute-bound (prefill AI about 2,100 FLOP/B against the 295 ridge, by hand 2 x 8,192 x P
    FLOPs over 2P weight bytes plus activations)."""
    for gpu, weights in (("h100-sxm", "fp8"), ("a100-sxm-80gb", "bf16")):
        base = {"model": "llama-3.1-8b", "gpu": gpu, "weights": weights, "kv_cache": weights, "output_len": 1}
        # offline first-token latency is the prefill itself (no server in front)
        short = plan({**base, "prompt_len": 128}).latency.prefill_ms
        long = plan({**base, "prompt_len": 2048}).latency.prefill_ms
        assert 3.0 <= long / short <= 12.0, (gpu, long / short)
    p = plan({"model": "llama-3.1-8b", "gpu": "h100-sxm", "prompt_len": 8192, "output_len": 1})
    assert p.roofline.prefill_ai > 5 * p.roofline.ridge_flop_per_byte


def test_moe_decode_bytes_rise_with_batch_toward_all_experts():
    """Source: hand: Mixtral-8x7B's config.json: one expert is 3 x 4,096 x 14,336 x 32 layers, 8 experts
    45,097,156,608 params; attention 1,342,177,280, router 1,048,576, LM head 131,072,000. Batch 1 reads top-2
    of 8 experts: (1,342,177,280 + 1,048,576 + 131,072,000 + 45,097,156,608 / 4) x 2 B = 25,497,174,016 B
    (model card: 12.9B active). At batch 64 almost all 8 experts: 1 - (6/8)^64 = 1 - 1e-8 of them,
    46.57e9 params streamed (model card: 46.7B with the input embedding)."""
    d = _deployment(model="mixtral-8x7b", gpu="h200", weights="bf16")
    w1 = float(decode_step(d, 1, 1000).work.weight_bytes)
    w64 = float(decode_step(d, 64, 1000).work.weight_bytes)
    assert w1 == pytest.approx(25_497_174_016, rel=1e-6)
    all_experts = (1_342_177_280 + 1_048_576 + 131_072_000 + 45_097_156_608) * 2
    assert w64 == pytest.approx(all_experts, rel=1e-3)


def test_moe_itl_grows_faster_with_batch_than_dense():
    """A dense model streams the same weights at any batch; an MoE streams more experts as the batch grows, so
    its ITL rises faster from batch 1 to 8. By hand, Mixtral-8x7B bf16 on one H200 (4.8 TB/s), ideal engine,
    1,000 cached tokens: batch 1 reads 25,497,174,016 B of weights (test above) and 1,001 x 131,072 B of KV
    (32 layers x 8 KV heads x 128 x K and V x 2 B per token, 1,000 read + 1 written): 5.339245 ms. Batch 8
    touches 8 (1 - (6/8)^8) = 7.19910 of 8 experts: (1,342,177,280 + 1,048,576 + 131,072,000 + 45,097,156,608
    x 7.19910 / 8) x 2 B = 84,113,293,312 B, plus 8 x 131,203,072 B of KV: 17.742275 ms (its GEMMs, 0.68 ms at
    989.4 TFLOP/s, hide under the read), 3.323x batch 1.

    Source: hand: the expert count and bytes above."""
    dense = _deployment(model="llama-3.1-70b", gpu="h200", tp=2)
    moe = _deployment(model="mixtral-8x7b", gpu="h200", tp=2)
    batches = np.array([1, 8])
    d_ratio = np.divide(*decode_step(dense, batches[::-1], 1000).total_ms)
    m_ratio = np.divide(*decode_step(moe, batches[::-1], 1000).total_ms)
    assert m_ratio > d_ratio
    ideal = _deployment(model="mixtral-8x7b", gpu="h200", weights="bf16", efficiency="ideal")
    one, eight = (float(t) for t in decode_step(ideal, batches, 1000).total_ms)
    assert one == pytest.approx(5.339245, rel=1e-5)
    assert eight == pytest.approx(17.742275, rel=1e-5)


def test_speculation_lowers_itl_at_high_acceptance_and_not_at_low():
    """Source: hand: Leviathan et al. 2023, tokens per target pass (1 - p^(k+1)) / (1 - p) = (1 - 0.8^5) / 0.2
    = 3.36 at p = 0.8, k = 4; at p = 0.05 with an 8B draft each round costs more than it yields."""
    base = {"model": "llama-3.1-70b", "gpu": "h100-sxm", "tp": 4, "batch": 1}
    plain = plan(base).latency.itl_ms
    good = plan({**base, "speculative": {"draft_tokens": 4, "acceptance": 0.8, "draft_params": 1e9}})
    bad = plan({**base, "speculative": {"draft_tokens": 8, "acceptance": 0.05, "draft_params": 8e9}})
    assert good.speculative.itl_ms < plain
    assert bad.speculative.itl_ms > plain
    assert good.speculative.tokens_per_round == pytest.approx((1 - 0.8 ** 5) / 0.2)


def test_throughput_and_cost_by_hand(seed_scenario):
    """Source: hand: the seeds' Llama-3-70B TP8 fp16, ideal engine. Batch 1: 5.15630 ms (test above),
    193.94 tok/s. Batch 64: weights 17.239386 GB / 3.35 TB/s = 5.145990 ms (GEMM FLOPs 64 x 2 x 68.96e9 / 8
    / 989.4e12 = 1.1 ms stay under it); KV 64 x (1.5 read + 1 written) x 40,960 B / 3.35 TB/s = 0.001956 ms;
    all-reduces 2 x 80 x 1.75 x 64 x 16,384 B / 450 GB/s = 0.652447 ms: 5.800393 ms, 11,033.73 tok/s.
    At the seed's back-solved $2.70/GPU-hour (item 18): 8 x 2.70 / (tok/s x 3600) x 1e6 = $30.937 per
    million at batch 1 and $0.54379 at batch 64."""
    one = plan({**seed_scenario, "batch": 1, "usd_per_gpu_hour": 2.70})
    assert one.throughput.output_tokens_per_s == pytest.approx(193.94, rel=2e-4)
    assert one.cost.usd_per_million_output_tokens_bound == pytest.approx(30.937, rel=2e-4)
    many = plan({**seed_scenario, "batch": 64, "usd_per_gpu_hour": 2.70})
    assert many.latency.itl_ms == pytest.approx(5.800393, rel=1e-5)
    assert many.throughput.output_tokens_per_s == pytest.approx(11_033.73, rel=1e-5)
    assert many.cost.usd_per_million_output_tokens_bound == pytest.approx(0.54379, rel=1e-4)


def test_custom_price_overrides_catalog(sample_scenario, seed_scenario):
    """Cost is linear in the price, and a given price replaces the catalog's. By hand on the seeds'
    Llama-3-70B TP8 fp16, ideal engine, batch 1: 193.94 tok/s (test_throughput_and_cost_by_hand), so at a
    given $5.40 per GPU-hour 8 x 5.40 / (193.94 x 3600) x 1e6 = $61.875 per million output tokens.

    Source: hand: the cost per million tokens above."""
    a = plan(sample_scenario).cost.usd_per_million_output_tokens
    b = plan({**sample_scenario, "usd_per_gpu_hour": 2 * 2.99}).cost.usd_per_million_output_tokens
    assert b == pytest.approx(2 * a)
    seed = plan({**seed_scenario, "batch": 1, "usd_per_gpu_hour": 5.40})
    assert seed.cost.usd_per_million_output_tokens_bound == pytest.approx(61.875, rel=2e-4)


def test_partial_efficiency_object_keeps_default_engine_for_the_rest(sample_scenario):
    """Source: contract: an efficiency object fills the fields it leaves out from the default engine."""
    base = plan(sample_scenario)
    tweaked = plan({**sample_scenario, "efficiency": {"layer_overhead_us": 0.0}})
    assert tweaked.efficiency == "custom"
    default_overhead = base.latency.decode_breakdown_ms["overhead_ms"]
    assert tweaked.latency.decode_breakdown_ms["gemm_ms"] == pytest.approx(
        base.latency.decode_breakdown_ms["gemm_ms"]
    )
    assert tweaked.latency.decode_breakdown_ms["overhead_ms"] < default_overhead


def test_non_nvidia_gpu_plans_warn_about_calibration():
    """Source: contract: plans on other vendors' GPUs warn that the default engine is NVIDIA-calibrated,
    unless public runs of that generation were fitted (issue 20: vLLM on CDNA3 has them, Gaudi 3 none)."""
    assert any("calibrated on NVIDIA" in w for w in plan({"model": "llama-3.1-8b", "gpu": "gaudi3"}).warnings)
    for gpu in ("mi300x", "h100-sxm"):
        warnings = plan({"model": "llama-3.1-8b", "gpu": gpu}).warnings
        assert not any("calibrated on NVIDIA" in w for w in warnings)


@pytest.mark.parametrize("scenario, low, high", [
    # data/reference/measured_published.md, batch-1 MBU: 16-bit TP1 0.65-0.75 (A100, H100; vLLM Qwen3-8B 67%)
    ({"model": "llama-3.1-8b", "gpu": "h100-sxm", "tp": 1, "weights": "bf16"}, 0.55, 0.80),
    # 8-bit weights at batch 1: 0.43-0.65 (NIM 70B fp8 TP2: 56-58%)
    ({"model": "llama-3.1-70b", "gpu": "h100-sxm", "tp": 2, "weights": "fp8"}, 0.43, 0.65),
    # TP4: 0.55-0.65 on A100, 0.40 on H100 (Databricks); vLLM CI 70B TP4 on H200 at batch 8: 45%
    ({"model": "llama-3.1-70b", "gpu": "h200", "tp": 4, "weights": "bf16"}, 0.40, 0.65),
    # TP8: 0.40-0.53 on 70B (gpt-fast Llama-2-70B bf16 TP8 on A100: 51-53%)
    ({"model": "llama-3.1-70b", "gpu": "a100-sxm-80gb", "tp": 8, "weights": "bf16"}, 0.40, 0.53),
])
def test_default_batch1_decode_bandwidth_utilization_is_in_the_published_range(scenario, low, high):
    """Source: published: data/reference/measured_published.md, batch-1 MBU ranges per precision and TP."""
    from gpu_catalog import get_gpu

    p = plan({**scenario, "batch": 1, "prompt_len": 128, "output_len": 128})
    weight_bytes = p.roofline.decode_bytes_per_gpu  # at batch 1 and a short context, almost all weights
    mbu = weight_bytes / (p.latency.itl_ms * 1e-3) / (get_gpu(scenario["gpu"]).hbm_tb_s * 1e12)
    assert low <= mbu <= high, mbu
