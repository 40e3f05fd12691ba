"""Weights and KV cache per GPU: formulas by hand, TP sharding and replication, MLA, windows."""

from __future__ import annotations

import pytest

from planner import plan
from planner.core.precision import bits_per_value
from planner.model.presets import load_presets
from planner.physics.memory import (
    kv_bytes_per_sequence_per_gpu,
    kv_bytes_per_token,
    kv_bytes_per_token_per_gpu,
    weight_bytes_total,
)

P = load_presets()


def test_int4_and_fp4_group_scale_convention():
    """Source: hand: int4 in groups of 128 with a bf16 scale, 4 + 16/128 = 4.125 bits; NVFP4 in groups of 16
    with an fp8 scale, 4 + 8/16 = 4.5 bits (README's convention; seed item 10)."""
    assert bits_per_value("int4") == 4.125  # group 128, bf16 scale
    assert bits_per_value("fp4") == 4.5  # NVFP4: group 16, fp8 scale
    assert bits_per_value("fp8") == 8


def test_quantized_checkpoints_keep_embeddings_in_bf16():
    """Source: hand: Llama-3.1-8B's config.json (32 layers, d 4096, 32/8 heads x 128, d_ff 14336, vocab
    128256, untied): per layer attention 41,943,040 + MLP 176,160,768 + norms 8,192 = 218,112,000;
    x 32 = 6,979,584,000; two embedding tables 2 x 525,336,576; final norm 4,096: 8,030,261,248 params
    (model card: 8.03B), 16,060,522,496 B in bf16. fp8 body (6,979,321,856 matmul params at 1 B) with the
    embedding tables and norms kept in bf16 (2 x 1,050,939,392 B): 9,081,200,640 B."""
    m = P["llama-3.1-8b"]
    assert weight_bytes_total(m, "bf16") == 16_060_522_496
    assert weight_bytes_total(m, "fp8") == 9_081_200_640


def test_kv_heads_shard_then_replicate():
    """Source: hand: Llama-3.1-70B, 80 layers x 8 KV heads x 128 dims x K and V x 2 B = 327,680 B per token;
    TP 4 holds 2 heads per GPU (81,920 B), TP 8 one (40,960 B), TP 16 still one (replicated)."""
    m = P["llama-3.1-70b"]
    assert kv_bytes_per_token(m, "bf16") == 327_680
    assert kv_bytes_per_token_per_gpu(m, "bf16", 4) == 81_920
    assert kv_bytes_per_token_per_gpu(m, "bf16", 8) == 40_960
    assert kv_bytes_per_token_per_gpu(m, "bf16", 16) == 40_960


def test_mla_kv_is_latent_plus_rope_replicated():
    """Source: hand: DeepSeek-V3's config.json, 61 layers x (kv_lora_rank 512 + qk_rope_head_dim 64) x 2 B
    = 70,272 B per token, the same on every TP rank (the latent is not split by head)."""
    m = P["deepseek-v3"]
    assert kv_bytes_per_token(m, "bf16") == 61 * (512 + 64) * 2  # 70,272 B per token
    assert kv_bytes_per_token_per_gpu(m, "bf16", 8) == kv_bytes_per_token(m, "bf16")
    # against what GQA-style counting of 128 heads x 192 dims would claim: 68x more
    assert 61 * 2 * 128 * 192 * 2 / kv_bytes_per_token(m, "bf16") > 60


def test_sliding_window_caps_windowed_layers():
    """Source: hand: Gemma-2-9B's config.json, 42 layers alternating local (window 4096) and global,
    8 KV heads x 256 dims x K and V x 2 B = 8,192 B per token-layer."""
    m = P["gemma-2-9b"]  # 21 of 42 layers windowed at 4096
    per_layer_token = 2 * 8 * 256 * 2
    at_32k = kv_bytes_per_sequence_per_gpu(m, "bf16", 1, 32768)
    assert at_32k == (21 * 32768 + 21 * 4096) * per_layer_token
    assert kv_bytes_per_sequence_per_gpu(m, "bf16", 1, 2048) == 42 * 2048 * per_layer_token


def test_mistral_window_makes_max_batch_flat_past_the_window():
    """Source: model-card: Mistral-7B v0.1 attends over a 4,096-token sliding window in every layer, so a
    sequence caches at most 4,096 tokens and the max batch is the same at 8k and 32k contexts (napkin rule,
    explicit reserve)."""
    base = {"model": "mistral-7b", "gpu": "h100-sxm", "prompt_len": 100, "output_len": 100,
            "memory": {"reserve_gb": 2.0}}
    b8k = plan({**base, "context_len": 8192}).memory.max_batch
    b32k = plan({**base, "context_len": 32768}).memory.max_batch
    assert b8k == b32k


def test_vllm_window_holds_window_plus_one_chunk():
    """Source: hand: vLLM vllm/v1/kv_cache_interface.py SlidingWindowSpec.max_memory_usage_bytes: a
    request holds min(W - 1 + max_num_batched_tokens, L) tokens plus one block; with W 4096 and 8192
    batched tokens that is ceil(12,287 / 16) + 1 = 769 blocks, flat past 12,287 tokens."""
    base = {"model": "mistral-7b", "gpu": "h100-sxm", "prompt_len": 100, "output_len": 100}
    b16k = plan({**base, "context_len": 16384}).memory
    b32k = plan({**base, "context_len": 32768}).memory
    b8k = plan({**base, "context_len": 8192}).memory
    assert b16k.max_batch == b32k.max_batch
    assert b8k.max_batch > b16k.max_batch
    assert b16k.max_batch == b16k.num_gpu_blocks // (-(-12287 // 16) + 1)  # 769 blocks per request


def test_budget_subtracts_reserve_and_utilization():
    """Source: hand: an H100 80GB reports 81,559 MiB = 85.52e9 B (nvidia-smi); x 0.9 utilization
    = 76.968 GB, less the 3 GB reserve and Llama-3.1-8B's 16.0605 GB of bf16 weights = 57.9075 GB."""
    p = plan({"model": "llama-3.1-8b", "gpu": "h100-sxm", "memory": {"utilization": 0.9, "reserve_gb": 3.0}})
    assert p.memory.kv_budget_gb_per_gpu == pytest.approx(57.9075, rel=1e-5)


def test_does_not_fit_says_so_and_suggests_tp():
    """Source: hand: Llama-3.1-405B in bf16 is 811.7 GB; an H100's usable 85.52 x 0.9 - 2 = 74.97 GB holds
    neither 811.7/8 = 101.5 GB (TP 8) but does hold 811.7/16 = 50.7 GB (TP 16)."""
    p = plan({"model": "llama-3.1-405b", "gpu": "h100-sxm", "tp": 1, "weights": "bf16"})
    assert not p.memory.fits and p.memory.max_batch == 0 and not p.memory.weights_fit
    assert p.memory.smallest_tp_that_fits == 16
    assert any("do not fit" in w for w in p.warnings)


def test_fp8_on_h100_fits_405b_on_8_gpus():
    """Source: hand: 405B with an fp8 body and bf16 embeddings is 410.06 GB, 51.26 GB per GPU at TP 8,
    under the 74.97 GB usable, leaving 23.7 GB of KV budget. As vLLM loads it, the RMSNorm weights,
    (2 x 126 + 1) x 16,384 x 2 B = 8.29 MB, are replicated on every rank, not split:
    (410.06 - 0.00829) / 8 + 0.00829 = 51.2648 GB."""
    p = plan({"model": "llama-3.1-405b", "gpu": "h100-sxm", "tp": 8, "weights": "fp8", "kv_cache": "fp8"})
    assert p.memory.fits and p.memory.max_batch > 0
    assert p.memory.weights_gb_per_gpu == pytest.approx((410.06 - 0.00829) / 8 + 0.00829, rel=2e-5)
