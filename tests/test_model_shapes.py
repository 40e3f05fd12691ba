"""Parameter counts from the architecture, against official totals (within 1% unless noted)."""

from __future__ import annotations

import pytest

from planner.core.model_shapes import ModelSpec, active_params, expected_experts_touched, param_counts
from planner.model.presets import load_presets

PRESETS = load_presets()

# Official totals (model cards / papers), in billions.
OFFICIAL_TOTAL_B = {
    "llama-3.1-8b": 8.03, "llama-3.1-70b": 70.55, "llama-3.1-405b": 405.85, "llama-3.2-1b": 1.24,
    "llama-3.2-3b": 3.21, "mistral-7b": 7.24, "mixtral-8x7b": 46.7, "mixtral-8x22b": 140.6,
    "qwen2.5-7b": 7.61, "qwen2.5-72b": 72.7, "qwen3-8b": 8.19, "qwen3-32b": 32.8, "qwen3-235b-a22b": 235.0,
    "gemma-2-9b": 9.24, "gemma-2-27b": 27.2, "deepseek-v3": 671.0,
    # GLM-4.5 model card / transformers' glm4_moe page: "106 billion total" (Air), "355 billion total"
    # (GLM-4.5, whose architecture GLM-4.6 keeps); ours 106.85B and 352.8B, the MTP layer left out
    "glm-4.5-air": 106.0, "glm-4.6": 355.0,
}


@pytest.mark.parametrize("model_id", sorted(OFFICIAL_TOTAL_B))
def test_total_params_within_1_percent(model_id):
    """Source: model-card: official totals (model cards / papers) in OFFICIAL_TOTAL_B."""
    assert param_counts(PRESETS[model_id]).total / 1e9 == pytest.approx(OFFICIAL_TOTAL_B[model_id], rel=0.01)


def test_at_least_15_presets_each_with_a_source():
    """Source: contract: at least 15 presets, each naming its Hugging Face source."""
    assert len(PRESETS) >= 15
    assert all(spec.source and spec.source.startswith("https://huggingface.co/") for spec in PRESETS.values())


@pytest.mark.parametrize("model_id, active_b, rel", [
    ("mixtral-8x7b", 12.9, 0.01), ("mixtral-8x22b", 39.1, 0.01), ("qwen3-235b-a22b", 22.0, 0.01),
    # "37B activated" is a two-digit figure (+-1.4%); ours counts both embedding tables.
    ("deepseek-v3", 37.0, 0.015),
])
def test_moe_active_params(model_id, active_b, rel):
    """Source: model-card: active parameters as published (Mixtral 12.9B/39.1B, Qwen3 22B, DeepSeek-V3
    37B)."""
    assert active_params(PRESETS[model_id]) / 1e9 == pytest.approx(active_b, rel=rel)


@pytest.mark.parametrize("model_id", ["llama-3.1-8b", "llama-3.1-70b", "qwen3-32b", "gemma-2-27b"])
def test_dense_model_active_equals_total(model_id):
    """A dense model activates every parameter: its active count is its card's total.
    Source: model-card: official totals in OFFICIAL_TOTAL_B (Llama-3.1 8.03B and 70.55B, Qwen3-32B 32.8B,
    Gemma-2-27B 27.2B)."""
    m = PRESETS[model_id]
    assert active_params(m) == param_counts(m).total
    assert active_params(m) / 1e9 == pytest.approx(OFFICIAL_TOTAL_B[model_id], rel=0.01)


def test_tied_embeddings_count_once():
    """Source: hand: untying Llama-3.2-1B's embedding adds one 128,256 x 2,048 table."""
    m = PRESETS["llama-3.2-1b"]
    untied = ModelSpec(**{**m.model_dump(), "tied_embeddings": False})
    assert param_counts(untied).total - param_counts(m).total == 128_256 * 2_048


def test_n_params_override_scales_every_component():
    """An n_params override scales every component alike, so a plan streams the stated count: the seeds'
    Llama-3-70B at 70e9 params in fp16 on 8 GPUs.
    Source: hand: 70e9 x 2 B = 140 GB of weights, / 8 = 17.5 GB per GPU (the seeds' figures, seed item 9)."""
    from planner import plan
    from tests.conftest import SEED_H100, SEED_LLAMA_70B

    m = PRESETS["llama-3.1-70b"]
    scaled = ModelSpec(**{**m.model_dump(), "n_params": 70e9})
    p, q = param_counts(m), param_counts(scaled)
    assert q.total == pytest.approx(70e9)
    assert q.attention / q.total == pytest.approx(p.attention / p.total)
    seed = plan({"model": dict(SEED_LLAMA_70B), "gpu": dict(SEED_H100), "tp": 8, "weights": "fp16"})
    assert seed.memory.weights_gb_per_gpu == pytest.approx(17.5, rel=1e-3)


def test_gqa_attention_params_by_hand():
    """Source: hand: Llama-3.1-8B attention per layer, worked in the comment."""
    # Llama-3.1-8B layer: q 4096x4096, k and v 4096x1024 each, o 4096x4096 = 41,943,040
    from planner.core.model_shapes import attention_params_per_layer

    assert attention_params_per_layer(PRESETS["llama-3.1-8b"]) == 41_943_040


def test_experts_touched_rises_toward_all_experts():
    """Source: hand: E[experts touched] = E (1 - (1 - k/E)^b): k at batch 1, about all 8 of Mixtral's at
    64."""
    assert expected_experts_touched(8, 2, 1) == pytest.approx(2.0)
    assert expected_experts_touched(256, 8, 1) == pytest.approx(8.0)
    assert expected_experts_touched(8, 2, 64) == pytest.approx(8.0, rel=1e-6)
    touched = [expected_experts_touched(256, 8, b) for b in (1, 4, 16, 64, 256)]
    assert touched == sorted(touched) and touched[-1] < 256


@pytest.mark.parametrize("model_id, active_b", [("glm-4.5-air", 12.0), ("glm-4.6", 32.0)])
def test_glm_active_params_without_embeddings(model_id, active_b):
    """Source: model-card: GLM-4.5's card gives 12B active (Air) and 32B active (GLM-4.5 / 4.6), two-digit
    figures (+-4% for 12B): ours less the input and output embedding tables (1.24B and 1.55B), which the
    card's active count leaves out."""
    spec = PRESETS[model_id]
    embeddings = 2 * spec.vocab_size * spec.d_model
    assert (active_params(spec) - embeddings) / 1e9 == pytest.approx(active_b, rel=0.04)


def test_block_scaled_fp8_presets_are_those_whose_checkpoint_says_so():
    """Source: model-card: each checkpoint's config.json quantization_config (`quant_method: fp8`,
    `weight_block_size: [128, 128]`: DeepSeek-V3, DeepSeek-R1, Kimi-K2-Instruct, MiniMax-M2.5,
    Qwen3-30B-A3B-FP8, Qwen3-Coder-480B-A35B-Instruct-FP8; the bf16 Qwen3-30B-A3B and Qwen3-Coder presets
    name those FP8 releases). Presets naming no fp8 checkpoint keep the per-tensor default; a block size
    comes only with block scales."""
    block = {k for k, m in PRESETS.items() if m.fp8_format == "block"}
    assert block == {"deepseek-v3", "deepseek-r1", "kimi-k2", "minimax-m2.5", "qwen3-30b-a3b-fp8",
                     "qwen3-coder-480b-a35b-fp8", "qwen3-30b-a3b", "qwen3-coder-480b-a35b"}
    assert all(PRESETS[k].fp8_block_size == [128, 128] for k in block)
    others = [m for k, m in PRESETS.items() if k not in block]
    assert all(m.fp8_format is None and m.fp8_block_size is None for m in others)


def test_an_mla_model_that_does_not_say_reads_block_scaled_fp8():
    """Source: contract: docs/CONTRACT_EXTENSIONS.md (`model.fp8_format`): absent, an MLA model reads block
    scales, as every MLA model did before the key (every public MLA fp8 checkpoint, DeepSeek-V3/R1's and
    Kimi-K2's, is block-scaled), and any other model per-tensor scales; a stated format wins."""
    r1 = PRESETS["deepseek-r1"].model_dump(exclude_none=True)
    r1.pop("fp8_format"), r1.pop("fp8_block_size")
    unsaid = ModelSpec(**r1)
    assert unsaid.fp8_format is None and unsaid.fp8_block_scaled
    assert not ModelSpec(**{**r1, "fp8_format": "tensor"}).fp8_block_scaled
    assert PRESETS["deepseek-v2-lite"].fp8_block_scaled
    assert not PRESETS["llama-3.1-70b"].fp8_block_scaled and not PRESETS["qwen3-235b-a22b"].fp8_block_scaled
