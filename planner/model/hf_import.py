"""Offline import of a Hugging Face `config.json` into a ModelSpec, for the families people deploy.

Multimodal wrappers (gemma3, llama4, mistral3) keep the language model under `text_config`; only it is
counted. Sliding-window layouts come from `layer_types` when the config lists them, else from the family's
pattern. `quantization_config` sets the checkpoint's weight precision and which layers stay in 16 bits.
An unknown `model_type` that carries the standard decoder keys imports as a dense decoder, with a note.
Every number is checked against a physical range; strings are never read as numbers or booleans.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import ValidationError

from planner.core.errors import ScenarioError, from_validation_error, quote
from planner.core.model_shapes import ModelSpec

SUPPORTED_MODEL_TYPES = (
    "llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen3_moe", "gemma2", "deepseek_v3",
    "deepseek_v2", "qwen2_moe", "gemma3", "gemma3_text", "llama4", "llama4_text", "gpt_oss", "phi3",
    "mistral3", "granite", "olmo2", "cohere2", "glm4_moe",
)
# wrappers whose language model is `text_config`
NESTED_TEXT_CONFIG = ("gemma3", "llama4", "mistral3")
STANDARD_KEYS = ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size", "vocab_size")

_TIED_DEFAULT = {"gemma2": True, "gemma3": True, "gemma3_text": True, "cohere2": True}
# local:global layer pattern when the config gives no `layer_types` (every Nth layer is global)
_WINDOW_PATTERN_DEFAULT = {"gemma3": 6, "gemma3_text": 6, "cohere2": 4}
# transformers' config defaults for keys the published config.json omits
_FAMILY_DEFAULTS: dict[str, dict[str, Any]] = {"gemma3_text": {"vocab_size": 262_208}}
MAX_HF_INT = 1_000_000_000  # above any real shape; keeps the arithmetic below in int/float range
WINDOWED_LAYER_TYPES = ("sliding_attention", "chunked_attention")


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


def _optional_list(config: dict[str, Any], key: str, field: str, max_len: int = 10_000) -> list[Any] | None:
    value = config.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or len(value) > max_len:
        raise ScenarioError(f"{field}.{key}", f"must be a list of at most {max_len:,} items")
    return value


def _dict(config: dict[str, Any], key: str, field: str) -> dict[str, Any] | None:
    value = config.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ScenarioError(f"{field}.{key}", "must be a JSON object")
    return value


def _windowed_from_layer_types(config: dict[str, Any], n_layers: int, field: str) -> int | None:
    layer_types = _optional_list(config, "layer_types", field)
    if layer_types is None:
        return None
    if len(layer_types) != n_layers or not all(isinstance(t, str) for t in layer_types):
        raise ScenarioError(
            f"{field}.layer_types", f"must list one attention type (a string) per layer ({n_layers})"
        )
    return sum(1 for t in layer_types if t in WINDOWED_LAYER_TYPES)


def _pattern_windowed(n_layers: int, pattern: int) -> int:
    """Layers i with (i + 1) % pattern != 0 are local: all but n_layers // pattern."""
    return n_layers - n_layers // pattern if pattern > 1 else 0


def _windowing(
    model_type: str, config: dict[str, Any], n_layers: int, field: str
) -> tuple[int | None, int | None]:
    """(window tokens, windowed layers) for the family, or (None, None) for full attention everywhere."""
    if model_type in ("llama4", "llama4_text"):
        chunk = _optional_int(config, "attention_chunk_size", field)
        if not chunk:
            return None, None
        windowed = _windowed_from_layer_types(config, n_layers, field)
        if windowed is None:
            no_rope = _optional_list(config, "no_rope_layers", field)
            if no_rope:  # 1: a RoPE layer with chunked local attention, 0: a global NoPE layer
                if len(no_rope) != n_layers or not all(
                    v in (0, 1) and not isinstance(v, bool) for v in no_rope
                ):
                    raise ScenarioError(
                        f"{field}.no_rope_layers", f"must list 0 or 1 for each of the {n_layers} layers"
                    )
                windowed = sum(no_rope)
            else:
                interval = _optional_int(config, "no_rope_layer_interval", field, 4) or 4
                windowed = _pattern_windowed(n_layers, interval)
        return chunk, windowed
    window = _optional_int(config, "sliding_window", field)
    if not window:
        return None, None
    from_types = _windowed_from_layer_types(config, n_layers, field)
    if model_type in ("qwen2", "qwen2_moe"):
        if not _optional_bool(config, "use_sliding_window", field, False):
            return None, None
        if from_types is not None:
            return window, from_types
        max_window_layers = _optional_int(config, "max_window_layers", field, n_layers)
        return window, max(0, n_layers - max_window_layers)
    if model_type in (
        "qwen3", "qwen3_moe", "olmo2", "granite", "llama", "deepseek_v2", "deepseek_v3", "glm4_moe",
    ):
        # these families ignore `sliding_window` unless they say so (use_sliding_window)
        if not _optional_bool(config, "use_sliding_window", field, False):
            return None, None
        return window, from_types if from_types is not None else n_layers
    if from_types is not None:
        return window, from_types
    if model_type == "gemma2" or model_type == "gpt_oss":
        return window, math.ceil(n_layers / 2)  # even-indexed layers are local
    if model_type in _WINDOW_PATTERN_DEFAULT:
        pattern = _optional_int(config, "sliding_window_pattern", field, _WINDOW_PATTERN_DEFAULT[model_type])
        return window, _pattern_windowed(n_layers, pattern or 1)
    return window, n_layers  # mistral, mixtral, phi3 and other families: every layer windowed


# quantization_config -> (checkpoint weight precision, note)
def _bits_precision(bits: Any, kind: str, field: str) -> str:
    if isinstance(bits, bool) or not isinstance(bits, int):
        raise ScenarioError(field, "must be an integer number of bits")
    table = {("int", 8): "int8", ("int", 4): "int4", ("float", 8): "fp8", ("float", 4): "fp4"}
    if (kind, bits) not in table:
        raise ScenarioError(field, f"{bits}-bit {kind} weights are not a precision Ridgeline models")
    return table[(kind, bits)]


def _quantization(config: dict[str, Any], field: str) -> tuple[str | None, list[str], list[str]]:
    """(weights precision, modules kept unquantized, notes) from `quantization_config`."""
    q = _dict(config, "quantization_config", field)
    if q is None:
        return None, [], []
    qf = f"{field}.quantization_config"
    method = q.get("quant_method")
    if not isinstance(method, str):
        raise ScenarioError(f"{qf}.quant_method", "must be a string")
    method = method.lower()
    ignore = _optional_list(q, "modules_to_not_convert", qf) or _optional_list(q, "ignore", qf) or []
    ignored = [str(x)[:200] for x in ignore]
    if method in ("fp8", "fbgemm_fp8"):
        return "fp8", ignored, []
    if method == "mxfp4":
        return "fp4", ignored, []
    if method in ("awq", "gptq", "awq_marlin", "gptq_marlin", "auto-round"):
        return _bits_precision(q.get("bits"), "int", f"{qf}.bits"), ignored, []
    if method == "bitsandbytes":
        if _optional_bool(q, "load_in_4bit", qf, False):
            return "int4", ignored, []
        if _optional_bool(q, "load_in_8bit", qf, False):
            return "int8", ignored, []
        raise ScenarioError(qf, "bitsandbytes needs load_in_4bit or load_in_8bit")
    if method == "modelopt":
        algo = str(q.get("quant_algo", "")).upper()
        if algo in ("FP8", "NVFP4"):
            return ("fp8" if algo == "FP8" else "fp4"), ignored, []
        raise ScenarioError(f"{qf}.quant_algo", f"{quote(q.get('quant_algo'))} is not FP8 or NVFP4")
    if method == "compressed-tensors":
        groups = _dict(q, "config_groups", qf) or {}
        for group in groups.values():
            weights = group.get("weights") if isinstance(group, dict) else None
            if isinstance(weights, dict):
                kind = weights.get("type")
                if kind not in ("int", "float"):
                    raise ScenarioError(f"{qf}.config_groups.weights.type", "must be \"int\" or \"float\"")
                return (
                    _bits_precision(weights.get("num_bits"), kind, f"{qf}.config_groups.weights.num_bits"),
                    ignored, [],
                )
        raise ScenarioError(f"{qf}.config_groups", "needs a group with a weights scheme")
    return (
        None, [],
        [f"quantization method {quote(method)} is not modelled: the weights follow the scenario's `weights`"],
    )


# transformers' config defaults where published config.json files leave the key out (Gemma3TextConfig)
_POSITIONS_DEFAULT = {"gemma3": 131_072, "gemma3_text": 131_072}


def _fp4_format(config: dict[str, Any]) -> str:
    """MXFP4 (32 values per E8M0 scale) for `quant_method: mxfp4`, NVFP4 (16 per FP8 scale) for the others."""
    q = config.get("quantization_config")
    method = str(q.get("quant_method", "")).lower() if isinstance(q, dict) else ""
    return "mxfp4" if method == "mxfp4" else "nvfp4"


def _fp8_format(config: dict[str, Any]) -> dict[str, Any]:
    """How an fp8 checkpoint scales its weights: "block" with its block size where quantization_config
    gives one (`weight_block_size`, DeepSeek's fine-grained FP8; compressed-tensors' `strategy: block` with
    `block_structure`), else "tensor" (per-tensor or per-channel: ModelOpt FP8, fbgemm_fp8, FP8-dynamic)."""
    q = config.get("quantization_config")
    q = q if isinstance(q, dict) else {}
    block = q.get("weight_block_size")
    groups = q.get("config_groups")
    for group in (groups.values() if isinstance(groups, dict) else []):
        weights = group.get("weights") if isinstance(group, dict) else None
        if isinstance(weights, dict) and str(weights.get("strategy", "")).lower() == "block":
            block = weights.get("block_structure")
    if (isinstance(block, list) and len(block) == 2
            and all(isinstance(b, int) and not isinstance(b, bool) and 1 <= b <= 65_536 for b in block)):
        return {"fp8_format": "block", "fp8_block_size": list(block)}
    return {"fp8_format": "tensor"}


def _rotary_table_rows(model_type: str, config: dict[str, Any], positions: int, field: str) -> list[int]:
    """Rows of each rotary cos/sin table vLLM's `get_rope` precomputes: max_position_embeddings, times the
    factor for linear and dynamic-NTK scaling, original_max_position_embeddings times the factor for YaRN;
    Gemma-3 keeps a local table (rope_local_base_freq, unscaled) beside the global one."""
    scaling = _dict(config, "rope_scaling", field) or {}
    kind = str(scaling.get("rope_type", scaling.get("type", "default"))).lower()
    factor = scaling.get("factor", 1.0)
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 1.0 <= factor <= 1e4:
        factor = 1.0
    rows = positions
    if kind in ("linear", "dynamic"):
        rows = int(positions * factor)
    elif kind in ("yarn", "deepseek_yarn"):
        original = scaling.get("original_max_position_embeddings", positions)
        if isinstance(original, bool) or not isinstance(original, int) or original < 1:
            original = positions
        rows = int(original * factor)
    if model_type in ("gemma3", "gemma3_text"):
        return [positions, rows]
    return [rows]


def _keeps_attention(ignored: list[str]) -> bool:
    return any("attn" in name or "attention" in name for name in ignored)


def _moe_layers(model_type: str, config: dict[str, Any], n_layers: int, field: str) -> int:
    """How many layers carry the MoE block (the rest keep a dense MLP)."""
    if model_type in ("llama4", "llama4_text"):
        moe_layers = _optional_list(config, "moe_layers", field)
        if moe_layers is not None:
            return len(moe_layers)
        step = _optional_int(config, "interleave_moe_layer_step", field, 1) or 1
        return len(range(step - 1, n_layers, step))
    if model_type == "qwen2_moe":
        dense = _optional_list(config, "mlp_only_layers", field) or []
        step = _optional_int(config, "decoder_sparse_step", field, 1) or 1
        return sum(1 for i in range(n_layers) if i not in dense and (i + 1) % step == 0)
    first_dense = _optional_int(config, "first_k_dense_replace", field, 0)
    return max(0, n_layers - first_dense)


def _text_config(config: dict[str, Any], field: str) -> tuple[dict[str, Any], str, str]:
    """The language model's config, its model_type and its field path."""
    outer = config.get("model_type")
    model_type = outer if isinstance(outer, str) else ""
    if model_type in NESTED_TEXT_CONFIG and "text_config" in config:
        text = _dict(config, "text_config", field) or {}
        inner = text.get("model_type")
        return text, inner if isinstance(inner, str) and inner else model_type, f"{field}.text_config"
    return config, model_type, field


def _family(config: dict[str, Any], field: str) -> tuple[bool, list[str]]:
    """Whether config.json's model_type is a family Ridgeline knows; an unknown decoder that gives the
    standard keys imports as a dense one, with a note."""
    outer_type = config.get("model_type")
    if outer_type in SUPPORTED_MODEL_TYPES:
        return True, []
    if not isinstance(outer_type, str) or any(k not in config for k in STANDARD_KEYS):
        raise ScenarioError(
            f"{field}.model_type",
            f"{quote(outer_type)} is not supported (supported: {', '.join(SUPPORTED_MODEL_TYPES)}; "
            f"other decoders import when they give {', '.join(STANDARD_KEYS)})",
        )
    return False, [
        f"model_type {quote(outer_type)} is not a family Ridgeline knows: imported as a dense decoder "
        "from its standard keys (no MoE, MLA or sliding window); check the parameter count"
    ]


def _shape_spec(config: dict[str, Any], text: dict[str, Any], model_type: str, field: str,
                tf: str) -> dict[str, Any]:
    """The dense decoder's shape: layers, width, heads, vocabulary, tied embeddings, head size."""
    outer_type = config.get("model_type")
    n_layers = _require(text, "num_hidden_layers", tf)
    d_model = _require(text, "hidden_size", tf)
    n_heads = _require(text, "num_attention_heads", tf)
    tied_default = _TIED_DEFAULT.get(model_type, _TIED_DEFAULT.get(str(outer_type), False))
    tied = _optional_bool(
        text, "tie_word_embeddings", tf, _optional_bool(config, "tie_word_embeddings", field, tied_default)
    )
    name = config.get("_name_or_path") or config.get("name") or outer_type
    spec: dict[str, Any] = {
        "name": str(name)[:120], "n_layers": n_layers, "d_model": d_model, "n_heads": n_heads,
        "n_kv_heads": _optional_int(text, "num_key_value_heads", tf) or n_heads,
        "vocab_size": _require(text, "vocab_size", tf), "tied_embeddings": tied,
        "source": "Hugging Face config.json (imported)",
    }
    if _optional_int(text, "head_dim", tf):
        spec["head_dim"] = text["head_dim"]
    elif d_model % n_heads:
        raise ScenarioError(
            f"{tf}.head_dim", "required when hidden_size is not a multiple of num_attention_heads"
        )
    return spec


def _qwen_moe(moe_type: str, text: dict[str, Any], n_layers: int, tf: str) -> dict[str, Any]:
    """Qwen MoE: routed experts of moe_intermediate_size; Qwen2-MoE adds a shared expert of a multiple of
    it."""
    d_ff_expert = _require(text, "moe_intermediate_size", tf)
    shared = 0
    if moe_type == "qwen2_moe":
        shared_width = _optional_int(text, "shared_expert_intermediate_size", tf, 0)
        if shared_width % d_ff_expert:
            raise ScenarioError(f"{tf}.shared_expert_intermediate_size",
                                f"must be a multiple of moe_intermediate_size ({d_ff_expert})")
        shared = shared_width // d_ff_expert
    return {
        "n_experts": _require(text, "num_experts", tf), "top_k": _require(text, "num_experts_per_tok", tf),
        "d_ff_expert": d_ff_expert, "n_shared_experts": shared,
        "first_dense_layers": n_layers - _moe_layers(moe_type, text, n_layers, tf),
    }


def _deepseek_moe(moe_type: str, text: dict[str, Any], spec: dict[str, Any], tf: str) -> None:
    """DeepSeek V2/V3 and GLM-4 MoE experts; DeepSeek's multi-head latent attention (MLA)."""
    n_layers, n_heads = spec["n_layers"], spec["n_heads"]
    spec["moe"] = {"n_experts": _require(text, "n_routed_experts", tf),
                   "top_k": _require(text, "num_experts_per_tok", tf),
                   "d_ff_expert": _require(text, "moe_intermediate_size", tf),
                   "n_shared_experts": _optional_int(text, "n_shared_experts", tf, 0),
                   "first_dense_layers": n_layers - _moe_layers(moe_type, text, n_layers, tf)}
    if moe_type != "glm4_moe":  # multi-head latent attention
        nope = _require(text, "qk_nope_head_dim", tf)
        rope = _require(text, "qk_rope_head_dim", tf)
        spec["head_dim"] = nope + rope
        spec["n_kv_heads"] = n_heads  # MLA: every head has its own K/V after up-projection
        spec["mla"] = {"kv_lora_rank": _require(text, "kv_lora_rank", tf), "qk_rope_head_dim": rope,
                       "qk_nope_head_dim": nope, "v_head_dim": _require(text, "v_head_dim", tf),
                       "q_lora_rank": _optional_int(text, "q_lora_rank", tf) or None}


def _mlp_spec(moe_type: str | None, text: dict[str, Any], spec: dict[str, Any], tf: str) -> None:
    """The MLP: d_ff, and for a mixture of experts its experts (per family's config keys)."""
    n_layers = spec["n_layers"]
    if moe_type in ("llama4", "llama4_text"):
        n_moe = _moe_layers(moe_type, text, n_layers, tf)
        spec["d_ff"] = _optional_int(text, "intermediate_size_mlp", tf) or _require(
            text, "intermediate_size", tf
        )
        spec["moe"] = {"n_experts": _require(text, "num_local_experts", tf),
                       "top_k": _require(text, "num_experts_per_tok", tf),
                       "d_ff_expert": _require(text, "intermediate_size", tf), "n_shared_experts": 1,
                       "first_dense_layers": n_layers - n_moe}
        return
    spec["d_ff"] = _require(text, "intermediate_size", tf)
    if moe_type in ("gpt_oss", "mixtral"):
        n_experts = _require(text, "num_local_experts", tf)
        if moe_type == "gpt_oss":  # gpt-oss may name it experts_per_token
            top_k = _require(
                {"num_experts_per_tok": text.get("num_experts_per_tok", text.get("experts_per_token"))},
                "num_experts_per_tok", tf,
            )
        else:
            top_k = _require(text, "num_experts_per_tok", tf)
        spec["moe"] = {
            "n_experts": n_experts, "top_k": top_k, "d_ff_expert": spec["d_ff"], "n_shared_experts": 0,
        }
    elif moe_type in ("qwen3_moe", "qwen2_moe"):
        spec["moe"] = _qwen_moe(moe_type, text, n_layers, tf)
    elif moe_type in ("deepseek_v2", "deepseek_v3", "glm4_moe"):
        _deepseek_moe(moe_type, text, spec, tf)


def _checkpoint_spec(config: dict[str, Any], text: dict[str, Any], field: str, tf: str,
                     spec: dict[str, Any]) -> list[str]:
    """The checkpoint's quantization (weights, FP4 format, which layers it covers); returns its notes."""
    weights, ignored, notes = _quantization(config, field)
    if weights is None and text is not config:
        weights, ignored, notes = _quantization(text, tf)
    quantized = config if _dict(config, "quantization_config", field) else text
    if weights == "fp4":
        spec["fp4_format"] = _fp4_format(quantized)
    if weights == "fp8":
        spec.update(_fp8_format(quantized))
    if weights is not None:
        spec["checkpoint_weights"] = weights
        if spec.get("moe") and _keeps_attention(ignored):
            spec["quantized_scope"] = "routed_experts"
    return notes


def model_from_hf_config(config: Any, field: str = "model.hf_config") -> ModelSpec:
    if not isinstance(config, dict):
        raise ScenarioError(field, "must be a JSON object (the contents of config.json)")
    known, notes = _family(config, field)
    text, model_type, tf = _text_config(config, field)
    if model_type in _FAMILY_DEFAULTS:
        text = {**_FAMILY_DEFAULTS[model_type], **{k: v for k, v in text.items() if v is not None}}
    spec = _shape_spec(config, text, model_type, field, tf)
    n_layers = spec["n_layers"]
    if known:
        window, windowed = _windowing(model_type, text, n_layers, tf)
        if window:
            spec["sliding_window"] = window
            spec["sliding_window_layers"] = windowed
    _mlp_spec(model_type if known else None, text, spec, tf)
    positions = _optional_int(text, "max_position_embeddings", tf) or _POSITIONS_DEFAULT.get(model_type)
    if positions:
        spec["max_position_embeddings"] = positions
        rows = _rotary_table_rows(model_type, text, positions, tf)
        if rows != [positions]:
            spec["rotary_cache_positions"] = rows
    notes += _checkpoint_spec(config, text, field, tf, spec)
    if notes:
        spec["import_notes"] = notes
    try:
        return ModelSpec.model_validate(spec)
    except ValidationError as err:
        raise from_validation_error(err, tf) from None
