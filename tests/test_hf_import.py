"""Hugging Face config.json import, offline, for every supported family (configs embedded here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import ScenarioError, plan
from planner.core.model_shapes import ModelSpec, active_params, param_counts
from planner.model.hf_import import SUPPORTED_MODEL_TYPES, model_from_hf_config

# Abridged official config.json values (the fields the planner reads), per family.
CONFIGS = {
    "llama-3.1-8b": {
        "model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
        "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256,
        "tie_word_embeddings": False, "head_dim": 128, "max_position_embeddings": 131072,
        "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192},
    },
    "mistral-7b": {
        "model_type": "mistral", "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
        "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 32000, "sliding_window": 4096,
        "max_position_embeddings": 32768,
    },
    "mixtral-8x7b": {
        "model_type": "mixtral", "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
        "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 32000, "num_local_experts": 8,
        "num_experts_per_tok": 2, "max_position_embeddings": 32768,
    },
    "qwen2.5-7b": {
        "model_type": "qwen2", "num_hidden_layers": 28, "hidden_size": 3584, "num_attention_heads": 28,
        "num_key_value_heads": 4, "intermediate_size": 18944, "vocab_size": 152064,
        "tie_word_embeddings": False, "use_sliding_window": False, "sliding_window": 131072,
        "max_position_embeddings": 131072,
    },
    "qwen3-32b": {
        "model_type": "qwen3", "num_hidden_layers": 64, "hidden_size": 5120, "num_attention_heads": 64,
        "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 25600, "vocab_size": 151936,
        "tie_word_embeddings": False, "max_position_embeddings": 40960,
    },
    "qwen3-235b-a22b": {
        "model_type": "qwen3_moe", "num_hidden_layers": 94, "hidden_size": 4096, "num_attention_heads": 64,
        "num_key_value_heads": 4, "head_dim": 128, "intermediate_size": 12288, "moe_intermediate_size": 1536,
        "num_experts": 128, "num_experts_per_tok": 8, "vocab_size": 151936, "tie_word_embeddings": False,
        "max_position_embeddings": 40960,
    },
    "gemma-2-9b": {
        "model_type": "gemma2", "num_hidden_layers": 42, "hidden_size": 3584, "num_attention_heads": 16,
        "num_key_value_heads": 8, "head_dim": 256, "intermediate_size": 14336, "vocab_size": 256000,
        "sliding_window": 4096, "max_position_embeddings": 8192,
    },
    "deepseek-v3": {
        "model_type": "deepseek_v3", "num_hidden_layers": 61, "hidden_size": 7168, "num_attention_heads": 128,
        "num_key_value_heads": 128, "intermediate_size": 18432, "moe_intermediate_size": 2048,
        "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8, "first_k_dense_replace": 3,
        "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
        "v_head_dim": 128, "vocab_size": 129280, "tie_word_embeddings": False,
        "max_position_embeddings": 163840,
        "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096},
    },
}


@pytest.mark.parametrize("preset", sorted(CONFIGS))
def test_import_matches_the_preset(preset):
    """Source: model-card: the imported config's totals against the official parameter counts
    (test_model_shapes)."""
    from test_model_shapes import OFFICIAL_TOTAL_B

    from planner.model.presets import load_presets

    imported = model_from_hf_config(CONFIGS[preset])
    reference = load_presets()[preset]
    assert param_counts(imported).total / 1e9 == pytest.approx(OFFICIAL_TOTAL_B[preset], rel=0.01)
    assert param_counts(imported).total == pytest.approx(param_counts(reference).total, rel=1e-9)
    assert active_params(imported) == pytest.approx(active_params(reference), rel=1e-9)
    assert imported.n_windowed_layers == reference.n_windowed_layers
    assert (imported.mla is None) == (reference.mla is None)


# KV bytes per token in fp8 (1 B), from each config.json: 2 (K and V) x layers x KV heads x head_dim,
# head_dim = hidden / heads where the config gives none; per GPU at TP 8 the KV heads split 8 ways, or
# each GPU keeps one where there are fewer than 8; MLA caches one latent (kv_lora_rank + qk_rope_head_dim)
# per layer, the same on every GPU.
KV_FP8 = {
    "llama-3.1-8b": (2 * 32 * 8 * 128, 2 * 32 * 1 * 128),  # 65,536 B; 8,192 per GPU
    "mistral-7b": (2 * 32 * 8 * 128, 2 * 32 * 1 * 128),  # 4096 / 32 = 128; 65,536 B; 8,192
    "mixtral-8x7b": (2 * 32 * 8 * 128, 2 * 32 * 1 * 128),  # 65,536 B; 8,192
    "qwen2.5-7b": (2 * 28 * 4 * 128, 2 * 28 * 1 * 128),  # 3584 / 28 = 128; 28,672 B; 4 KV heads < 8: 7,168
    "qwen3-32b": (2 * 64 * 8 * 128, 2 * 64 * 1 * 128),  # 131,072 B; 16,384
    "qwen3-235b-a22b": (2 * 94 * 4 * 128, 2 * 94 * 1 * 128),  # 96,256 B; 24,064
    "gemma-2-9b": (2 * 42 * 8 * 256, 2 * 42 * 1 * 256),  # 172,032 B; 21,504
    "deepseek-v3": (61 * (512 + 64), 61 * (512 + 64)),  # MLA: 35,136 B on every GPU
}


@pytest.mark.parametrize("preset", sorted(CONFIGS))
def test_imported_config_plans_exactly_like_the_preset(preset):
    """An imported config plans exactly like its preset, and its KV bytes per token are the config's.
    Source: hand: KV bytes per token from each config.json's shape (KV_FP8, worked beside each entry)."""
    # TP 8 where the engines load it; Qwen2.5-7B's 28 heads take TP 4
    # (one of its 4 KV heads per GPU either way)
    tp = 4 if preset == "qwen2.5-7b" else 8
    base = {
        "gpu": "h200", "tp": tp, "weights": "fp8", "kv_cache": "fp8", "context_len": 8192, "prompt_len": 2000,
        "output_len": 400,
    }
    a = plan({**base, "model": preset}).model_dump()
    b = plan({**base, "model": {"hf_config": CONFIGS[preset]}}).model_dump()
    a["model"]["name"] = b["model"]["name"] = "-"
    assert a == b
    assert (b["memory"]["kv_bytes_per_token"], b["memory"]["kv_bytes_per_token_per_gpu"]) == KV_FP8[preset]


# --- real config.json files, one per family (tests/fixtures/hf_configs, sources in SOURCES.md) --------

FIXTURES = Path(__file__).parent / "fixtures" / "hf_configs"


def fixture(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


@pytest.mark.parametrize("name, preset", [
    ("deepseek_v3__DeepSeek-V3", "deepseek-v3"), ("gemma3__gemma-3-27b-it", "gemma-3-27b"),
    ("llama4__Llama-4-Scout-17B-16E-Instruct", "llama-4-scout"), ("gpt_oss__gpt-oss-120b", "gpt-oss-120b"),
    ("mistral3__Mistral-Small-3.1-24B-Instruct-2503", "mistral-small-3.1-24b"),
])
def test_real_config_imports_as_its_preset(name, preset):
    """Source: model-card: each checkpoint's config.json against the preset written from the same
    config (models.toml): same parameter count, active parameters, windowed layers and MLA."""
    from planner.model.presets import load_presets

    imported = model_from_hf_config(fixture(name))
    reference = load_presets()[preset]
    assert param_counts(imported).total == pytest.approx(param_counts(reference).total, rel=1e-9)
    assert active_params(imported) == pytest.approx(active_params(reference), rel=1e-9)
    assert imported.n_windowed_layers == reference.n_windowed_layers
    assert imported.sliding_window == reference.sliding_window
    assert (imported.mla is None) == (reference.mla is None)


@pytest.mark.parametrize("name, total_b, active_b, rel, active_without_embeddings", [
    ("deepseek_v2__DeepSeek-V2", 236, 21, 0.03, False), ("glm4_moe__GLM-4.5-Air", 106, 12, 0.03, True),
    ("qwen2_moe__Qwen1.5-MoE-A2.7B", 14.3, 2.7, 0.03, False),
    ("phi3__Phi-3-mini-4k-instruct", 3.8, 3.8, 0.03, False), ("olmo2__OLMo-2-1124-7B", 7.3, 7.3, 0.03, False),
    ("granite__granite-3.1-8b-instruct", 8.1, 8.1, 0.03, False),
    ("cohere2__c4ai-command-r7b-12-2024", 8.0, 8.0, 0.03, False),
])
def test_real_config_parameter_counts_match_the_model_card(
    name, total_b, active_b, rel, active_without_embeddings
):
    """Source: model-card: published total / activated parameters (DeepSeek-V2 236B/21B, GLM-4.5-Air
    106B/12B, Qwen1.5-MoE-A2.7B 14.3B/2.7B, Phi-3-mini 3.8B, OLMo-2 7B 7.3B, Granite-3.1 8B 8.1B,
    Command R7B 8B); the main model only (MTP/next-n layers are not counted). GLM's card counts active
    parameters without the embedding and output tables."""
    m = model_from_hf_config(fixture(name))
    p = param_counts(m)
    assert p.total / 1e9 == pytest.approx(total_b, rel=rel)
    active = active_params(m) - ((p.embedding + p.lm_head) if active_without_embeddings else 0.0)
    assert active / 1e9 == pytest.approx(active_b, rel=rel)


def test_qwen2_moe_shared_expert_is_four_expert_widths():
    """Source: hand: shared_expert_intermediate_size 5632 / moe_intermediate_size 1408 = 4 experts' width."""
    m = model_from_hf_config(fixture("qwen2_moe__Qwen1.5-MoE-A2.7B"))
    assert m.moe.n_shared_experts == 4 and m.moe.n_experts == 60 and m.moe.first_dense_layers == 0


@pytest.mark.parametrize("name, window, windowed", [
    ("gemma3__gemma-3-27b-it", 1024, 52),  # pattern 6: layers 5, 11, ..., 59 global -> 62 - 10
    ("gpt_oss__gpt-oss-120b", 128, 18),  # layer_types alternate sliding / full
    ("cohere2__c4ai-command-r7b-12-2024", 4096, 24),  # pattern 4: every 4th layer global
    ("llama4__Llama-4-Scout-17B-16E-Instruct", 8192, 36),  # chunked attention on 3 of 4 layers
    ("phi3__Phi-3-mini-4k-instruct", 2047, 32),
    ("mistral3__Mistral-Small-3.1-24B-Instruct-2503", None, 0),  # sliding_window null
    ("qwen2_moe__Qwen1.5-MoE-A2.7B", None, 0),  # use_sliding_window false
])
def test_sliding_window_layouts(name, window, windowed):
    """Source: model-card: each family's attention layout as its config.json states it (layer_types,
    sliding_window_pattern, attention_chunk_size with no_rope_layers' default of every 4th layer global)."""
    m = model_from_hf_config(fixture(name))
    assert m.sliding_window == window and m.n_windowed_layers == windowed


@pytest.mark.parametrize("name, weights, scope", [
    ("gpt_oss__gpt-oss-120b", "fp4", "routed_experts"), ("deepseek_v3__DeepSeek-V3", "fp8", None),
    ("qwen2_awq__Qwen2.5-7B-Instruct-AWQ", "int4", None),
    ("qwen2_gptq_int8__Qwen2.5-7B-Instruct-GPTQ-Int8", "int8", None),
    ("llama_compressed_tensors_fp8__Llama-3.1-8B-Instruct-FP8", "fp8", None),
    ("llama_bnb_4bit__Llama-3.1-8B-Instruct-bnb-4bit", "int4", None),
])
def test_quantization_config_sets_the_checkpoint_precision(name, weights, scope):
    """Source: model-card: quantization_config of each checkpoint (mxfp4 keeping attention, router,
    embeddings and head unconverted; block FP8; AWQ 4-bit; GPTQ 8-bit; compressed-tensors float 8-bit;
    bitsandbytes load_in_4bit)."""
    m = model_from_hf_config(fixture(name))
    assert m.checkpoint_weights == weights and m.quantized_scope == scope


@pytest.mark.parametrize("name,fmt,block", [
    ("deepseek_v3__DeepSeek-V3", "block", [128, 128]),
    ("llama_compressed_tensors_fp8__Llama-3.1-8B-Instruct-FP8", "tensor", None),
    ("gpt_oss__gpt-oss-120b", None, None),
])
def test_quantization_config_sets_the_fp8_scaling_format(name, fmt, block):
    """Source: model-card: quantization_config of each checkpoint: DeepSeek-V3's `quant_method: fp8` with
    `weight_block_size: [128, 128]` (block-scaled), RedHatAI's compressed-tensors FP8 (channel-wise weights,
    dynamic per-token activations: no block), gpt-oss's MXFP4 (no fp8 at all)."""
    m = model_from_hf_config(fixture(name))
    assert (m.fp8_format, m.fp8_block_size) == (fmt, block)


def test_compressed_tensors_block_strategy_is_block_scaled():
    """Source: docs: compressed-tensors' FP8_BLOCK scheme (llm-compressor's `scheme="FP8_BLOCK"`) writes
    weights `strategy: "block"` with `block_structure: [128, 128]`; the import reads it as block-scaled, and a
    block size without a block format is refused naming the field."""
    config = fixture("llama_compressed_tensors_fp8__Llama-3.1-8B-Instruct-FP8")
    weights = config["quantization_config"]["config_groups"]["group_0"]["weights"]
    weights.update({"strategy": "block", "block_structure": [128, 128]})
    m = model_from_hf_config(config)
    assert (m.checkpoint_weights, m.fp8_format, m.fp8_block_size) == ("fp8", "block", [128, 128])
    with pytest.raises(ValueError, match="fp8_block_size"):
        ModelSpec(**{**m.model_dump(exclude_none=True), "fp8_format": "tensor"})


def test_gpt_oss_plans_with_its_mxfp4_experts_and_bf16_attention():
    """Source: hand: gpt-oss-120b keeps attention, router, norms, embedding and head in bf16 and stores its 36
    x 128 x 3 x 2,880 x 2,880 = 114,661,785,600 expert weights in MXFP4, 4 bits + one E8M0 byte per 32 values
    = 4.25 bits: 60,914,073,600 B. The rest, 36 x (2,880 x 64 x 64 x 2 + 2 x 2,880 x 8 x 64) attention + 36 x
    2,880 x 128 router + 36 x 2 x 2,880 + 2,880 norms + 2 x 201,088 x 2,880 tables = 2,127,263,040 values x 2
    B = 4,254,526,080 B. Together 65,168,599,680 B (the checkpoint's files hold 65.2 GB, biases included);
    without a `weights` key the plan takes the checkpoint's fp4 and computes in bf16 (H100 has no fp4)."""
    p = plan(
        {
            "model": {"hf_config": fixture("gpt_oss__gpt-oss-120b")}, "gpu": "h100-sxm",
            "memory": {"reserve_gb": 2},
        }
    )
    assert model_from_hf_config(fixture("gpt_oss__gpt-oss-120b")).fp4_format == "mxfp4"
    assert p.memory.weights_gb_per_gpu == pytest.approx(65.168599680, rel=1e-9)
    assert p.roofline.compute_precision == "bf16"
    assert any("checkpoint's native precision" in w for w in p.warnings)


def test_explicit_weights_override_the_checkpoint():
    """A scenario's `weights` is what gets planned: DeepSeek-V3 in bf16 instead of its block-fp8 checkpoint.
    Source: hand: DeepSeek-V3's config.json sums to 671.03B params (the card's 671B, MTP layer not counted);
    in bf16 671.03e9 x 2 B / 8 GPUs = 167.76 GB per GPU, more than an H200's 141 GB; in the checkpoint's fp8
    with the embedding and head (2 x 129,280 x 7,168 = 1.853e9) kept in bf16, (671.03e9 + 1.853e9) x 1 B / 8
    = 84.11 GB per GPU."""
    cfg = fixture("deepseek_v3__DeepSeek-V3")
    p = plan({"model": {"hf_config": cfg}, "gpu": "h200", "tp": 8, "weights": "bf16"})
    assert not any("checkpoint's native precision" in w for w in p.warnings)
    assert p.memory.weights_gb_per_gpu == pytest.approx(167.76, rel=0.002)
    assert not p.memory.weights_fit
    native = plan({"model": {"hf_config": cfg}, "gpu": "h200", "tp": 8})
    assert native.memory.weights_gb_per_gpu == pytest.approx(84.11, rel=0.002)


def test_unknown_model_type_with_standard_keys_imports_with_a_note():
    """An unknown decoder with the standard keys imports, reads them right, and the plan says so.
    Source: hand: OLMo-2-1124-7B's config.json read as a standard decoder: 32 layers x (4 x 4096^2
    attention + 3 x 4096 x 11,008 MLP) + 2 x 100,352 x 4,096 untied embeddings = 7,298,088,960 params
    (the card's 7.3B), norms aside."""
    cfg = {**fixture("olmo2__OLMo-2-1124-7B"), "model_type": "brand_new_decoder"}
    m = model_from_hf_config(cfg)
    assert m.import_notes and "brand_new_decoder" in m.import_notes[0]
    assert param_counts(m).total == pytest.approx(7_298_088_960, rel=0.001)
    p = plan({"model": {"hf_config": cfg}, "gpu": "h100-sxm"})
    assert any("not a family Ridgeline knows" in w for w in p.warnings)


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(
            [
                "num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads",
                "intermediate_size", "vocab_size", "head_dim", "sliding_window", "tie_word_embeddings",
                "layer_types", "text_config", "quantization_config", "num_local_experts",
                "num_experts_per_tok", "attention_chunk_size",
            ]
        ),
        st.one_of(
            st.integers(-5, 10**12), st.text(max_size=5), st.booleans(), st.none(),
            st.lists(st.text(max_size=3), max_size=3),
            st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
        ),
    ),
    st.sampled_from(SUPPORTED_MODEL_TYPES + ("unknown_decoder",)),
)
def test_any_config_imports_or_names_one_field(config, model_type):
    """Source: invariant: any JSON object either imports as a valid ModelSpec or raises one ScenarioError."""
    try:
        m = model_from_hf_config({**config, "model_type": model_type})
    except ScenarioError as err:
        assert err.field.startswith("model.hf_config") and "\n" not in err.reason
    else:
        assert param_counts(m).total > 0
