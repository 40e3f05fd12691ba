"""Hugging Face config.json import, offline, for every supported family (configs embedded here)."""

from __future__ import annotations

import pytest

from planner import ScenarioError, plan
from planner.hf_import import model_from_hf_config
from planner.model_shapes import active_params, param_counts

# Abridged official config.json values (the fields the planner reads), per family.
CONFIGS = {
    "llama-3.1-8b": {"model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
                     "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256,
                     "tie_word_embeddings": False, "head_dim": 128},
    "mistral-7b": {"model_type": "mistral", "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
                   "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 32000, "sliding_window": 4096},
    "mixtral-8x7b": {"model_type": "mixtral", "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
                     "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 32000, "num_local_experts": 8,
                     "num_experts_per_tok": 2},
    "qwen2.5-7b": {"model_type": "qwen2", "num_hidden_layers": 28, "hidden_size": 3584, "num_attention_heads": 28,
                   "num_key_value_heads": 4, "intermediate_size": 18944, "vocab_size": 152064,
                   "tie_word_embeddings": False, "use_sliding_window": False, "sliding_window": 131072},
    "qwen3-32b": {"model_type": "qwen3", "num_hidden_layers": 64, "hidden_size": 5120, "num_attention_heads": 64,
                  "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 25600, "vocab_size": 151936,
                  "tie_word_embeddings": False},
    "qwen3-235b-a22b": {"model_type": "qwen3_moe", "num_hidden_layers": 94, "hidden_size": 4096,
                        "num_attention_heads": 64, "num_key_value_heads": 4, "head_dim": 128, "intermediate_size": 12288,
                        "moe_intermediate_size": 1536, "num_experts": 128, "num_experts_per_tok": 8,
                        "vocab_size": 151936, "tie_word_embeddings": False},
    "gemma-2-9b": {"model_type": "gemma2", "num_hidden_layers": 42, "hidden_size": 3584, "num_attention_heads": 16,
                   "num_key_value_heads": 8, "head_dim": 256, "intermediate_size": 14336, "vocab_size": 256000,
                   "sliding_window": 4096},
    "deepseek-v3": {"model_type": "deepseek_v3", "num_hidden_layers": 61, "hidden_size": 7168,
                    "num_attention_heads": 128, "num_key_value_heads": 128, "intermediate_size": 18432,
                    "moe_intermediate_size": 2048, "n_routed_experts": 256, "n_shared_experts": 1,
                    "num_experts_per_tok": 8, "first_k_dense_replace": 3, "kv_lora_rank": 512, "q_lora_rank": 1536,
                    "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128, "vocab_size": 129280,
                    "tie_word_embeddings": False},
}


@pytest.mark.parametrize("preset", sorted(CONFIGS))
def test_import_matches_the_preset(preset):
    """Source: model-card: the imported config's totals against the official parameter counts (test_model_shapes)."""
    from test_model_shapes import OFFICIAL_TOTAL_B

    from planner.presets import load_presets

    imported = model_from_hf_config(CONFIGS[preset])
    reference = load_presets()[preset]
    assert param_counts(imported).total / 1e9 == pytest.approx(OFFICIAL_TOTAL_B[preset], rel=0.01)
    assert param_counts(imported).total == pytest.approx(param_counts(reference).total, rel=1e-9)
    assert active_params(imported) == pytest.approx(active_params(reference), rel=1e-9)
    assert imported.n_windowed_layers == reference.n_windowed_layers
    assert (imported.mla is None) == (reference.mla is None)


@pytest.mark.parametrize("preset", sorted(CONFIGS))
def test_imported_config_plans_exactly_like_the_preset(preset):
    """Source: invariant: an imported config plans exactly like its preset."""
    base = {"gpu": "h200", "tp": 8, "weights": "fp8", "kv_cache": "fp8", "context_len": 8192, "prompt_len": 2000,
            "output_len": 400}
    a = plan({**base, "model": preset}).model_dump()
    b = plan({**base, "model": {"hf_config": CONFIGS[preset]}}).model_dump()
    a["model"]["name"] = b["model"]["name"] = "-"
    assert a == b


def test_unsupported_family_lists_what_is_supported():
    """Source: contract: an unsupported family names the field and lists the supported ones."""
    with pytest.raises(ScenarioError) as err:
        model_from_hf_config({"model_type": "falcon"})
    assert err.value.field == "model.hf_config.model_type"
    assert "llama" in err.value.reason and "deepseek_v3" in err.value.reason


@pytest.mark.parametrize("config, field", [
    ({"model_type": "llama", "hidden_size": 4096}, "model.hf_config.num_hidden_layers"),
    ({**CONFIGS["llama-3.1-8b"], "hidden_size": "4096"}, "model.hf_config.hidden_size"),
    ("not a dict", "model.hf_config"),
    ({**CONFIGS["mixtral-8x7b"], "num_local_experts": None}, "model.hf_config.num_local_experts"),
])
def test_bad_configs_name_the_field(config, field):
    """Source: contract: a bad config names the field."""
    with pytest.raises(ScenarioError) as err:
        model_from_hf_config(config)
    assert err.value.field == field
