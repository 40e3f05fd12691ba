"""Model presets, loaded from planner/data/models.toml."""

from __future__ import annotations

import tomllib
from functools import lru_cache
from pathlib import Path

from planner.model_shapes import ModelSpec

PRESETS_PATH = Path(__file__).parent / "data" / "models.toml"


@lru_cache(maxsize=1)
def load_presets() -> dict[str, ModelSpec]:
    raw = tomllib.loads(PRESETS_PATH.read_text())
    return {model_id: ModelSpec(**entry) for model_id, entry in raw.items()}


def preset_ids() -> list[str]:
    return list(load_presets())
