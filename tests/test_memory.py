"""Weights and KV cache per GPU: formulas by hand, TP sharding and replication, MLA, windows."""

from __future__ import annotations

import pytest

from planner import plan
from planner.memory import (
    kv_bytes_per_sequence_per_gpu,
    kv_bytes_per_token,
    kv_bytes_per_token_per_gpu,
    weight_bytes_total,
)
from planner.precision import bits_per_value
from planner.presets import load_presets

P = load_presets()


def test_int4_and_fp4_group_scale_convention():
    assert bits_per_value("int4") == 4.125  # group 128, bf16 scale
    assert bits_per_value("fp4") == 4.5  # NVFP4: group 16, fp8 scale
    assert bits_per_value("fp8") == 8


def test_quantized_checkpoints_keep_embeddings_in_bf16():
    m = P["llama-3.1-8b"]
    emb = 2 * m.vocab_size * m.d_model * 2  # embedding + LM head, bf16
    fp8 = weight_bytes_total(m, "fp8")
    bf16 = weight_bytes_total(m, "bf16")
    body = bf16 - emb
    assert fp8 == pytest.approx(body / 2 + emb, rel=1e-3)


def test_kv_heads_shard_then_replicate():
    m = P["llama-3.1-70b"]  # 8 KV heads
    per_token = kv_bytes_per_token(m, "bf16")
    assert kv_bytes_per_token_per_gpu(m, "bf16", 4) == per_token / 4
    assert kv_bytes_per_token_per_gpu(m, "bf16", 8) == per_token / 8
    assert kv_bytes_per_token_per_gpu(m, "bf16", 16) == per_token / 8  # replicated past 8


def test_mla_kv_is_latent_plus_rope_replicated():
    m = P["deepseek-v3"]
    assert kv_bytes_per_token(m, "bf16") == 61 * (512 + 64) * 2  # 70,272 B per token
    assert kv_bytes_per_token_per_gpu(m, "bf16", 8) == kv_bytes_per_token(m, "bf16")
    # against what GQA-style counting of 128 heads x 192 dims would claim: 68x more
    assert 61 * 2 * 128 * 192 * 2 / kv_bytes_per_token(m, "bf16") > 60


def test_sliding_window_caps_windowed_layers():
    m = P["gemma-2-9b"]  # 21 of 42 layers windowed at 4096
    per_layer_token = 2 * 8 * 256 * 2
    at_32k = kv_bytes_per_sequence_per_gpu(m, "bf16", 1, 32768)
    assert at_32k == (21 * 32768 + 21 * 4096) * per_layer_token
    assert kv_bytes_per_sequence_per_gpu(m, "bf16", 1, 2048) == 42 * 2048 * per_layer_token


def test_mistral_window_makes_max_batch_flat_past_the_window():
    base = {"model": "mistral-7b", "gpu": "h100-sxm", "prompt_len": 100, "output_len": 100}
    b8k = plan({**base, "context_len": 8192}).memory.max_batch
    b32k = plan({**base, "context_len": 32768}).memory.max_batch
    assert b8k == b32k


def test_budget_subtracts_reserve_and_utilization():
    p = plan({"model": "llama-3.1-8b", "gpu": "h100-sxm", "memory": {"utilization": 0.9, "reserve_gb": 3.0}})
    assert p.memory.kv_budget_gb_per_gpu == pytest.approx(85.52 * 0.9 - 3.0 - p.memory.weights_gb_per_gpu)


def test_does_not_fit_says_so_and_suggests_tp():
    p = plan({"model": "llama-3.1-405b", "gpu": "h100-sxm", "tp": 1, "weights": "bf16"})
    assert not p.memory.fits and p.memory.max_batch == 0 and not p.memory.weights_fit
    assert p.memory.smallest_tp_that_fits == 16
    assert any("do not fit" in w for w in p.warnings)


def test_fp8_on_h100_fits_405b_on_8_gpus():
    p = plan({"model": "llama-3.1-405b", "gpu": "h100-sxm", "tp": 8, "weights": "fp8", "kv_cache": "fp8"})
    assert p.memory.fits and p.memory.max_batch > 0
