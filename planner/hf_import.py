"""Offline import of a Hugging Face `config.json` into a ModelSpec, for the families we model."""

from __future__ import annotations

import math
from typing import Any

from pydantic import ValidationError

from planner.errors import ScenarioError, from_validation_error, quote
from planner.model_shapes import ModelSpec

SUPPORTED_MODEL_TYPES = ("llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen3_moe", "gemma2", "deepseek_v3")

_TIED_DEFAULT = {"gemma2": True}
MAX_HF_INT = 1_000_000_000  # above any real shape; keeps the arithmetic below in int/float range


def _require(config: dict[str, Any], key: str, field: str) -> Any:
    if key not in config or config[key] is None:
        raise ScenarioError(f"{field}.{key}", "required for this model_type but missing")
    value = config[key]
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_HF_INT:
        raise ScenarioError(f"{field}.{key}", f"must be a positive integer up to {MAX_HF_INT:,}")
    return value


def _optional_int(config: dict[str, Any], key: str, field: str, default: Any = None) -> Any:
    """An optional integer setting (0 allowed), or `default` when absent or null."""
    value = config.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_HF_INT:
        raise ScenarioError(f"{field}.{key}", f"must be an integer from 0 to {MAX_HF_INT:,}")
    return value


def _optional_bool(config: dict[str, Any], key: str, field: str, default: bool) -> bool:
    value = config.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):  # "false" is a non-empty string: bool("false") would be True
        raise ScenarioError(f"{field}.{key}", "must be true or false")
    return value


def model_from_hf_config(config: Any, field: str = "model.hf_config") -> ModelSpec:
    if not isinstance(config, dict):
        raise ScenarioError(field, "must be a JSON object (the contents of config.json)")
    model_type = config.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise ScenarioError(f"{field}.model_type",
                            f"{quote(model_type)} is not supported (supported: {', '.join(SUPPORTED_MODEL_TYPES)})")
    n_layers = _require(config, "num_hidden_layers", field)
    d_model = _require(config, "hidden_size", field)
    n_heads = _require(config, "num_attention_heads", field)
    spec: dict[str, Any] = {
        "name": str(config.get("_name_or_path") or config.get("name") or model_type)[:120],
        "n_layers": n_layers,
        "d_model": d_model,
        "n_heads": n_heads,
        "n_kv_heads": _optional_int(config, "num_key_value_heads", field) or n_heads,
        "d_ff": _require(config, "intermediate_size", field),
        "vocab_size": _require(config, "vocab_size", field),
        "tied_embeddings": _optional_bool(config, "tie_word_embeddings", field, _TIED_DEFAULT.get(model_type, False)),
        "source": "Hugging Face config.json (imported)",
    }
    if _optional_int(config, "head_dim", field):
        spec["head_dim"] = config["head_dim"]
    elif d_model % n_heads:
        raise ScenarioError(f"{field}.head_dim", "required when hidden_size is not a multiple of num_attention_heads")

    if config.get("sliding_window") is not None:
        _optional_int(config, "sliding_window", field)
    if model_type == "mistral" and config.get("sliding_window"):
        spec["sliding_window"] = config["sliding_window"]
    if model_type == "qwen2" and config.get("use_sliding_window") and config.get("sliding_window"):
        spec["sliding_window"] = config["sliding_window"]
        max_window_layers = _optional_int(config, "max_window_layers", field, n_layers)
        spec["sliding_window_layers"] = max(0, n_layers - max_window_layers)
    if model_type == "gemma2" and config.get("sliding_window"):
        spec["sliding_window"] = config["sliding_window"]
        spec["sliding_window_layers"] = math.ceil(n_layers / 2)  # even-indexed layers are local
    if model_type == "mixtral":
        spec["moe"] = {"n_experts": _require(config, "num_local_experts", field),
                       "top_k": _require(config, "num_experts_per_tok", field),
                       "d_ff_expert": spec["d_ff"], "n_shared_experts": 0}
    if model_type == "qwen3_moe":
        spec["moe"] = {"n_experts": _require(config, "num_experts", field),
                       "top_k": _require(config, "num_experts_per_tok", field),
                       "d_ff_expert": _require(config, "moe_intermediate_size", field), "n_shared_experts": 0}
    if model_type == "deepseek_v3":
        nope = _require(config, "qk_nope_head_dim", field)
        rope = _require(config, "qk_rope_head_dim", field)
        spec["head_dim"] = nope + rope
        spec["n_kv_heads"] = n_heads  # MLA: every head has its own K/V after up-projection
        spec["moe"] = {"n_experts": _require(config, "n_routed_experts", field),
                       "top_k": _require(config, "num_experts_per_tok", field),
                       "d_ff_expert": _require(config, "moe_intermediate_size", field),
                       "n_shared_experts": _optional_int(config, "n_shared_experts", field, 0),
                       "first_dense_layers": _optional_int(config, "first_k_dense_replace", field, 0)}
        spec["mla"] = {"kv_lora_rank": _require(config, "kv_lora_rank", field), "qk_rope_head_dim": rope,
                       "qk_nope_head_dim": nope, "v_head_dim": _require(config, "v_head_dim", field),
                       "q_lora_rank": _optional_int(config, "q_lora_rank", field) or None}
    try:
        return ModelSpec.model_validate(spec)
    except ValidationError as err:
        raise from_validation_error(err, field) from None
