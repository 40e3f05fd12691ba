"""Round-2 presets (issue 11) against their model cards, and the checkpoint precision they carry."""

from __future__ import annotations

import pytest

from planner import plan
from planner.core.model_shapes import active_params, param_counts
from planner.model.presets import load_presets

P = load_presets()


@pytest.mark.parametrize("preset, total_b, active_b", [
    ("llama-3.3-70b", 70.6, 70.6), ("llama-4-scout", 109, 17), ("llama-4-maverick", 400, 17),
    ("qwen3-30b-a3b", 30.5, 3.3), ("qwen3-coder-480b-a35b", 480, 35), ("deepseek-r1", 671, 37),
    ("kimi-k2", 1000, 32), ("gemma-3-27b", 27, 27), ("mistral-small-3.1-24b", 24, 24),
    ("gpt-oss-20b", 21, None), ("gpt-oss-120b", 117, None), ("minimax-m2.5", 230, None),
])
def test_preset_parameter_counts_match_the_model_card(preset, total_b, active_b):
    """Source: model-card: published total / active parameters (Llama-4 totals include the vision tower
    we do not count, hence the 3% band; gpt-oss and MiniMax-M2.5 (230B, "10B active") cards count active
    parameters without the embedding and lm_head)."""
    m = P[preset]
    assert param_counts(m).total / 1e9 == pytest.approx(total_b, rel=0.03)
    if active_b is not None:
        assert active_params(m) / 1e9 == pytest.approx(active_b, rel=0.05)


@pytest.mark.parametrize("preset, weights", [
    ("deepseek-r1", "fp8"), ("kimi-k2", "fp8"), ("gpt-oss-120b", "fp4"), ("llama-4-maverick-fp8", "fp8"),
    ("llama-3.3-70b-fp8", "fp8"), ("llama-3.3-70b-awq", "int4"), ("qwen3-30b-a3b-fp8", "fp8"),
    ("qwen3-coder-480b-a35b-fp8", "fp8"), ("llama-3.3-70b", "bf16"), ("minimax-m2.5", "fp8"),
])
def test_checkpoint_precision_is_the_default_weights(preset, weights):
    """Source: model-card: the precision each published checkpoint ships in; the plan uses it unless the
    scenario sets `weights`."""
    p = plan({"model": preset, "gpu": "h200", "tp": 8, "memory": {"reserve_gb": 2}})
    bf16 = plan({"model": preset, "gpu": "h200", "tp": 8, "weights": "bf16", "memory": {"reserve_gb": 2}})
    assert P[preset].checkpoint_weights == weights
    if weights == "bf16":
        assert p.memory.weights_gb_per_gpu == pytest.approx(bf16.memory.weights_gb_per_gpu)
    else:
        assert p.memory.weights_gb_per_gpu < 0.6 * bf16.memory.weights_gb_per_gpu


def test_mxfp4_checkpoint_keeps_attention_in_bf16():
    """Source: hand: gpt-oss-120b's config keeps self_attn unconverted: 36 layers x (2880 x 64 x 64 x 2 +
    2 x 2880 x 8 x 64) = 0.96e9 attention weights (and 36 x 2880 x 128 router weights) at 2 B instead of
    MXFP4's 0.53125 B (4 bits + one E8M0 byte per 32 values) add 1.42 GB over all-fp4 storage."""
    m = P["gpt-oss-120b"]
    from planner.physics.memory import weight_bytes_total

    all_fp4 = weight_bytes_total(m.model_copy(update={"quantized_scope": "all"}), "fp4")
    scoped = weight_bytes_total(m, "fp4")
    attention = 36 * (2880 * 64 * 64 * 2 + 2 * 2880 * 8 * 64)
    router = 36 * 2880 * 128
    assert scoped - all_fp4 == pytest.approx((attention + router) * (2 - 0.53125), rel=1e-6)
