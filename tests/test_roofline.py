"""FLOPs, bytes and times of one decode step and one prefill, by hand from Llama-3.1-8B's config.json.

Llama-3.1-8B (model card config): 32 layers, d_model 4,096, 32 query / 8 KV heads of 128, d_ff 14,336,
vocab 128,256, untied. Matmul weights one token multiplies through: per layer attention 41,943,040 +
MLP 176,160,768 = 218,103,808; x 32 = 6,979,321,856; plus the LM head 525,336,576: 7,504,658,432.
(The input embedding is a lookup: no FLOPs, and only one row is read.) KV per token: 2 x 32 x 8 x 128
x 2 B = 131,072 B. An H100 SXM: 989.4 dense bf16 TFLOP/s, 3.35 TB/s (datasheet).
"""

from __future__ import annotations

import pytest

from planner import plan
from planner.physics.latency import decode_step, prefill
from planner.physics.roofline import decode_work, prefill_work
from planner.scenario.scenario import parse_scenario, resolve

MATMUL_PARAMS = 7_504_658_432
HEAD_PARAMS = 525_336_576
KV_BYTES_PER_TOKEN = 131_072


def _ideal(**overrides):
    return resolve(
        parse_scenario({"model": "llama-3.1-8b", "gpu": "h100-sxm", "efficiency": "ideal", **overrides})
    )


def test_decode_gemm_flops_and_weight_bytes():
    """Source: hand: 2 FLOPs per matmul weight per token, 2 x 7,504,658,432 = 15,009,316,864 at batch 1 and
    16x that at batch 16; the bf16 weights are read once per step whatever the batch: 7,504,658,432 x 2 B."""
    d = _ideal()
    one, sixteen = decode_work(d, 1, 4096), decode_work(d, 16, 4096)
    assert float(one.gemm_flops) == pytest.approx(2 * MATMUL_PARAMS, rel=1e-9)
    assert float(sixteen.gemm_flops) == pytest.approx(16 * 2 * MATMUL_PARAMS, rel=1e-9)
    assert (
        float(one.weight_bytes) == float(sixteen.weight_bytes) == pytest.approx(2 * MATMUL_PARAMS, rel=1e-9)
    )


def test_decode_attention_flops_and_kv_bytes():
    """Source: hand: one query token against 4,096 cached tokens, per layer per head QK^T and PV each
    2 x 128 FLOPs per cached token: 4 x 128 x 32 heads x 32 layers x 4,096 = 2,147,483,648 FLOPs; TP 4 splits
    the heads: a quarter per GPU. KV reads 4,096 x 131,072 B plus the new token's write: 537,001,984 B per
    sequence; TP 4 holds 2 of 8 KV heads per GPU: a quarter."""
    one = decode_work(_ideal(), 1, 4096)
    assert float(one.attention_flops) == pytest.approx(2_147_483_648, rel=1e-9)
    assert float(one.kv_bytes) == pytest.approx(4097 * KV_BYTES_PER_TOKEN, rel=1e-9)
    tp4 = decode_work(_ideal(tp=4), 8, 4096)
    assert float(tp4.attention_flops) == pytest.approx(8 * 2_147_483_648 / 4, rel=1e-9)
    assert float(tp4.kv_bytes) == pytest.approx(8 * 4097 * KV_BYTES_PER_TOKEN / 4, rel=1e-9)


def test_prefill_flops_and_bytes():
    """Source: hand: a 2,048-token prompt: GEMMs 2 x 2,048 x 6,979,321,856 for the body plus the LM head
    for the last token only, 2 x 525,336,576: 28,588,352,995,328 FLOPs. Causal attention computes
    2,048 x 2,049 / 2 = 2,098,176 (query, key) pairs per layer at 4 x 32 x 128 FLOPs each, x 32 layers:
    1,100,048,498,688 FLOPs. It writes 2,048 x 131,072 = 268,435,456 B of KV and reads the weights once."""
    w = prefill_work(_ideal(), 2048)
    assert float(w.gemm_flops) == pytest.approx(28_588_352_995_328, rel=1e-9)
    assert float(w.attention_flops) == pytest.approx(1_100_048_498_688, rel=1e-9)
    assert float(w.kv_bytes) == pytest.approx(268_435_456, rel=1e-9)
    assert float(w.weight_bytes) == pytest.approx(2 * MATMUL_PARAMS, rel=1e-9)


def test_prefill_activation_bytes_follow_the_stated_convention():
    """Source: hand: planner/physics/roofline.py's convention, each GEMM's input and output pass through HBM
    in bf16: per token and layer 6 x 4,096 (residual stream, norms) + 2 x (4,096 + 2 x 1,024) (QKV in/out) + 2
    x 4,096 (attention out) + 3 x 14,336 (MLP) = 88,064 values; 2,048 tokens x 32 layers x 2 B =
    11,542,724,608 B."""
    w = prefill_work(_ideal(), 2048)
    assert float(w.activation_bytes) == pytest.approx(11_542_724_608, rel=1e-9)


def test_ideal_prefill_time_of_a_long_prompt():
    """Source: hand: 8,192 tokens, ideal engine (each term at its roofline). GEMMs 2 x 8,192 x 6,979,321,856
    + 2 x 525,336,576 = 114,350,259,961,856 FLOPs / 989.4 TFLOP/s = 115.5754 ms (weights, 4.5 ms, hide
    under it); attention 8,192 x 8,193 / 2 x 32 x 16,384 = 17,594,333,528,064 FLOPs / 989.4 = 17.7828 ms;
    activations 8,192 x 32 x 88,064 x 2 B = 46,170,898,432 B / 3.35 TB/s = 13.7824 ms: 147.1406 ms."""
    t = prefill(_ideal(), 8192)
    parts = t.breakdown()
    assert parts["gemm_ms"] == pytest.approx(115.5754, rel=1e-5)
    assert parts["attention_ms"] == pytest.approx(17.7828, rel=1e-5)
    assert parts["activations_ms"] == pytest.approx(13.7824, rel=1e-5)
    assert float(t.total_ms) == pytest.approx(147.1406, rel=1e-5)
    assert plan({"model": "llama-3.1-8b", "gpu": "h100-sxm", "efficiency": "ideal", "prompt_len": 8192,
                 "output_len": 1}).latency.ttft_ms == pytest.approx(147.1406, rel=1e-5)


def test_ideal_decode_step_of_a_batch():
    """Source: hand: batch 16 at 4,096 cached tokens, ideal engine: GEMMs 16 x 15,009,316,864 FLOPs
    / 989.4e12 = 0.2427 ms under the weight read 15,009,316,864 B / 3.35e12 = 4.480393 ms; attention
    16 x 2,147,483,648 FLOPs / 989.4e12 = 0.0347 ms under its KV read 16 x 537,001,984 B / 3.35e12
    = 2.564785 ms: ITL 7.045178 ms."""
    step = decode_step(_ideal(), 16, 4096)
    assert float(step.total_ms) == pytest.approx(4.480393 + 2.564785, rel=1e-6)


def test_tp4_all_reduce_time_with_the_measured_constants():
    """Source: measured: the link efficiency 0.7015 and 9.475 us latency at TP 2 come from our NCCL runs at
    TP 2 and 4 on 4x H200 NVLink (data/measurements/allreduce_*xh200_nvlink_*.json, tools/fit_engines.py).
    By hand for Llama-3.1-70B TP 4 at batch 1: each of 2 x 80 all-reduces moves 1.5 x 8,192 x 2 B over
    0.7015 x 450 GB/s (0.0000778 ms) and waits 9.475 us x log2(4) = 0.01895 ms: 160 x 0.0190278 = 3.04446
    ms."""
    d = resolve(parse_scenario({"model": "llama-3.1-70b", "gpu": "h100-sxm", "tp": 4, "engine": "graph"}))
    assert decode_step(d, 1, 1000).breakdown()["communication_ms"] == pytest.approx(3.04446, rel=1e-5)


def test_decode_flops_per_token_of_a_70b_model():
    """Source: seed: item 24, one 70B token is 2P = 140 GFLOP (not "a few hundred"). The planner counts
    the input embedding as a lookup: 2 x (70e9 - 1.042456e9) = 137.915 GFLOP, plus attention over 1.5
    cached tokens (80 x 4 x 64 x 128 x 1.5 = 3.9 MFLOP)."""
    from tests.conftest import SEED_H100, SEED_LLAMA_70B

    p = plan({"model": dict(SEED_LLAMA_70B), "gpu": {**SEED_H100, "memory_gb": 800.0}, "efficiency": "ideal",
              "prompt_len": 1, "output_len": 1, "batch": 1})
    assert p.roofline.decode_flops_per_gpu == pytest.approx(137.915e9 + 3.9e6, rel=2e-5)
    assert p.roofline.decode_flops_per_gpu == pytest.approx(140e9, rel=0.02)


def test_real_llama_70b_weights_per_gpu_at_tp8():
    """Source: seed: item 9, the real Llama-3-70B architecture has 70.55B parameters: 141.1 GB in bf16,
    17.64 GB per GPU at TP 8 (the seeds' 17.5 uses 70e9)."""
    p = plan({"model": "llama-3.1-70b", "gpu": "h100-sxm", "tp": 8})
    assert p.memory.weights_gb_per_gpu == pytest.approx(17.64, rel=1e-3)


def test_batch1_mfu_cannot_exceed_a_third_of_a_percent():
    """Source: seed: item 17, with AI about 1 at batch 1, MFU = MBU x AI / ridge <= 1/295 = 0.34% on H100
    bf16 (the seed's 2-8% claims break the roofline)."""
    p = plan({"model": "llama-3.1-8b", "gpu": "h100-sxm", "batch": 1})
    mfu = p.roofline.decode_flops_per_gpu / (p.latency.itl_ms * 1e-3) / 989.4e12
    assert 0 < mfu <= 0.0034


def test_speculative_draft_step_by_hand():
    """Source: hand: a 1e9-parameter bf16 draft beside Llama-3.1-70B at TP 4 on H100, ideal engine: at batch 1
    it streams 1e9 x 2 B / 4 = 0.5 GB per GPU in 0.5e9 / 3.35e12 s = 0.149254 ms; at batch 2,048 its
    GEMMs, 2 x 1e9 x 2,048 / 4 = 1.024e12 FLOPs at 989.4 TFLOP/s = 1.034971 ms, outweigh the read."""
    from planner.physics.speculative import draft_step_ms

    d = resolve(parse_scenario({"model": "llama-3.1-70b", "gpu": "h100-sxm", "tp": 4, "efficiency": "ideal"}))
    assert float(draft_step_ms(d, 1e9, 1)) == pytest.approx(0.149254, rel=1e-5)
    assert float(draft_step_ms(d, 1e9, 2048)) == pytest.approx(1.034971, rel=1e-5)
