"""Model presets, loaded from planner/data/models.toml."""

from __future__ import annotations

import tomllib
from functools import lru_cache
from pathlib import Path

from planner.core.model_shapes import ModelSpec

PRESETS_PATH = Path(__file__).parent.parent / "data" / "models.toml"
# Keys of a preset entry that describe where to get the model, not its shape.
_NON_SHAPE_KEYS = ("hf_id",)


@lru_cache(maxsize=1)
def _raw_presets() -> dict[str, dict]:
    return tomllib.loads(PRESETS_PATH.read_text())


@lru_cache(maxsize=1)
def load_presets() -> dict[str, ModelSpec]:
    return {model_id: ModelSpec(**{k: v for k, v in entry.items() if k not in _NON_SHAPE_KEYS})
            for model_id, entry in _raw_presets().items()}


def preset_hf_id(model_id: str) -> str | None:
    """The Hugging Face repository a preset's config comes from (what an engine loads), if known."""
    entry = _raw_presets().get(model_id)
    return entry.get("hf_id") if entry else None
