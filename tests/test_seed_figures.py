"""The seeds' correct worked examples, reproduced with efficiency "ideal" (pure roofline).

Figures and their corrections: ../shared/seeds and ../shared/reference/seed_inconsistencies.md.
"""

from __future__ import annotations

import pytest

from planner import plan
from planner.communication import ring_allreduce_volume_factor
from planner.speculative import tokens_per_round


def test_llama70b_tp8_fp16_memory(seed_scenario):
    p = plan(seed_scenario)
    assert p.memory.weights_gb_per_gpu == pytest.approx(17.5, rel=1e-9)  # 70e9 * 2 B / 8
    assert p.memory.kv_budget_gb_per_gpu == pytest.approx(62.5, rel=1e-9)  # 80 - 17.5
    assert p.memory.kv_bytes_per_token == 327_680  # 2 x 80 x 8 x 128 x 2 B (item 8: not 1.3 MB)
    assert p.memory.kv_bytes_per_token_per_gpu == 40_960  # one KV head per GPU at TP 8
    assert p.memory.max_batch == 372  # 62.5 GB / (4096 x 40,960 B)


def test_int4_weights_int8_kv_max_batch_about_900(seed_scenario):
    # Seed: 4.4 GB/GPU and 901 at exactly 4 bits. We store int4 at 4.125 bits (group 128, bf16 scales)
    # and keep embeddings/LM head in bf16, as AWQ/GPTQ checkpoints do: 4.9 GB/GPU and 895 sequences.
    p = plan({**seed_scenario, "weights": "int4", "kv_cache": "int8"})
    assert p.memory.weights_gb_per_gpu == pytest.approx(4.9, abs=0.05)
    assert 880 <= p.memory.max_batch <= 901


def test_batch1_itl_bound_about_5_2_ms(seed_scenario):
    # 17.5 GB / 3.35 TB/s = 5.22 ms in the seed; the planner does not stream the input embedding
    # table (a lookup) but adds the KV reads, landing at 5.15 ms.
    p = plan({**seed_scenario, "batch": 1})
    assert p.latency.itl_ms_bound == pytest.approx(5.2, abs=0.1)
    assert p.throughput.tokens_per_s_per_user == pytest.approx(191.4, rel=0.03)


def test_h100_ridge_points(seed_scenario):
    assert plan(seed_scenario).roofline.ridge_flop_per_byte == pytest.approx(295.2, rel=1e-3)
    fp8 = plan({**seed_scenario, "weights": "fp8"})
    assert fp8.roofline.ridge_flop_per_byte == pytest.approx(590.7, rel=1e-3)


@pytest.mark.parametrize("gpu_id, ridge", [("a100-sxm-80gb", 153.0), ("h100-pcie", 378.0), ("b200", 281.25),
                                           ("a100-sxm-40gb", 200.6)])
def test_catalog_ridges_match_corrected_seed_values(gpu_id, ridge):
    p = plan({"model": "llama-3.1-8b", "gpu": gpu_id})
    assert p.roofline.ridge_flop_per_byte == pytest.approx(ridge, rel=2e-3)


@pytest.mark.parametrize("batch, ai", [(1, 1.0), (8, 8.0), (32, 32.0), (256, 256.0)])
def test_decode_ai_is_batch_in_bf16_not_twice_it(seed_scenario, batch, ai):
    # Item 13: seed 004's 2/16/64/300+ counts FLOPs per parameter, not per byte.
    p = plan({**seed_scenario, "batch": batch})
    assert p.roofline.decode_ai == pytest.approx(ai, rel=0.01)
    assert p.roofline.regime == "memory-bound"  # 256 < 295.2: not compute-bound yet


def test_whole_model_ridge_crossing_about_296(seed_scenario):
    assert plan(seed_scenario).roofline.ridge_crossing_batch == pytest.approx(296, abs=2)


def test_long_context_never_crosses_the_ridge(seed_scenario):
    # Item 23: KV reads grow with batch as fast as FLOPs do, so at 32k tokens AI saturates below the ridge.
    p = plan({**seed_scenario, "context_len": 32768, "prompt_len": 30000, "output_len": 2000})
    assert p.roofline.ridge_crossing_batch is None


def test_kv_reads_add_31_percent_at_batch_32_4096(seed_scenario):
    # Item 23: at batch 32 and 4096-token contexts KV reads add 42.9 GB per step to 140 GB of weights.
    whole = {**seed_scenario, "tp": 1, "gpu": {**seed_scenario["gpu"], "memory_gb": 800.0},
             "context_len": 4096, "prompt_len": 4095, "output_len": 1, "batch": 32}
    p = plan(whole)
    kv_gb = 32 * 4095.5 * 327_680 / 1e9
    assert kv_gb == pytest.approx(42.9, rel=0.01)
    weight_bytes = p.roofline.decode_bytes_per_gpu - kv_gb * 1e9 - 32 * 327_680
    assert kv_gb * 1e9 / weight_bytes == pytest.approx(0.31, abs=0.01)


def test_speculative_tokens_per_round():
    assert tokens_per_round(5, 0.78) == pytest.approx(3.52, abs=0.005)
    assert tokens_per_round(4, 0.25) == pytest.approx(1.33, abs=0.005)  # item 21


def test_low_acceptance_still_reads_fewer_target_weights_per_token():
    # Item 21: at p=0.25, k=4, target reads per token are 1/1.33 = 0.75 of plain decoding.
    assert 1 / tokens_per_round(4, 0.25) == pytest.approx(0.75, abs=0.005)


def test_ring_allreduce_factor_tp8():
    assert ring_allreduce_volume_factor(8) == pytest.approx(1.75)  # item 22, not 2
    assert 16_384 * 2 * ring_allreduce_volume_factor(8) / 1e3 == pytest.approx(57.3, abs=0.1)


def test_cost_back_solves_config_a_price():
    # Item 18: 8 GPUs, 50 tok/s, $0.12 per 1k tokens implies $2.70 per GPU-hour.
    from planner.cost import usd_per_million_output_tokens

    assert usd_per_million_output_tokens(8, 2.70, 50.0) == pytest.approx(120.0, rel=1e-9)


def test_paged_attention_and_int8_kv_multiply_to_4_8x():
    # Item 20: 2-4x times 2x is 4-8x, not 8-16x. The planner's KV bytes halve from bf16 to int8.
    from planner.memory import kv_bytes_per_token
    from planner.presets import load_presets

    m = load_presets()["llama-3.1-70b"]
    assert kv_bytes_per_token(m, "bf16") / kv_bytes_per_token(m, "int8") == pytest.approx(2.0)
