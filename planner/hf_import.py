"""Offline import of a Hugging Face `config.json` into a ModelSpec, for the families we model."""

from __future__ import annotations

import math
from typing import Any

from pydantic import ValidationError

from planner.errors import ScenarioError, from_validation_error
from planner.model_shapes import ModelSpec

SUPPORTED_MODEL_TYPES = ("llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen3_moe", "gemma2", "deepseek_v3")

_TIED_DEFAULT = {"gemma2": True}


def _require(config: dict[str, Any], key: str, field: str) -> Any:
    if key not in config or config[key] is None:
        raise ScenarioError(f"{field}.{key}", "required for this model_type but missing")
    value = config[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ScenarioError(f"{field}.{key}", "must be a positive integer")
    return value


def model_from_hf_config(config: Any, field: str = "model.hf_config") -> ModelSpec:
    if not isinstance(config, dict):
        raise ScenarioError(field, "must be a JSON object (the contents of config.json)")
    model_type = config.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise ScenarioError(f"{field}.model_type",
                            f"'{model_type}' is not supported (supported: {', '.join(SUPPORTED_MODEL_TYPES)})")
    n_layers = _require(config, "num_hidden_layers", field)
    d_model = _require(config, "hidden_size", field)
    n_heads = _require(config, "num_attention_heads", field)
    spec: dict[str, Any] = {
        "name": str(config.get("_name_or_path") or config.get("name") or model_type)[:120],
        "n_layers": n_layers,
        "d_model": d_model,
        "n_heads": n_heads,
        "n_kv_heads": config.get("num_key_value_heads") or n_heads,
        "d_ff": _require(config, "intermediate_size", field),
        "vocab_size": _require(config, "vocab_size", field),
        "tied_embeddings": bool(config.get("tie_word_embeddings", _TIED_DEFAULT.get(model_type, False))),
        "source": "Hugging Face config.json (imported)",
    }
    if config.get("head_dim"):
        spec["head_dim"] = config["head_dim"]
    elif d_model % n_heads:
        raise ScenarioError(f"{field}.head_dim", "required when hidden_size is not a multiple of num_attention_heads")

    if model_type == "mistral" and config.get("sliding_window"):
        spec["sliding_window"] = config["sliding_window"]
    if model_type == "qwen2" and config.get("use_sliding_window") and config.get("sliding_window"):
        spec["sliding_window"] = config["sliding_window"]
        max_window_layers = config.get("max_window_layers", n_layers)
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
                       "n_shared_experts": config.get("n_shared_experts") or 0,
                       "first_dense_layers": config.get("first_k_dense_replace") or 0}
        spec["mla"] = {"kv_lora_rank": _require(config, "kv_lora_rank", field), "qk_rope_head_dim": rope,
                       "qk_nope_head_dim": nope, "v_head_dim": _require(config, "v_head_dim", field),
                       "q_lora_rank": config.get("q_lora_rank")}
    try:
        return ModelSpec.model_validate(spec)
    except ValidationError as err:
        raise from_validation_error(err, field) from None
