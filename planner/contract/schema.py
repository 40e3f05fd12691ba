"""JSON Schemas of the inputs, generated from the pydantic models that validate them.

The scenario and sizing models keep `model` and `gpu` as "id or object" (so they round-trip unchanged);
the schema spells those objects out with ModelSpec, GpuSpec and EngineEfficiency.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from gpu_catalog import GpuSpec
from planner.core.efficiency import EngineEfficiency
from planner.core.model_shapes import ModelSpec
from planner.physics.calibration import CalibrationProfile
from planner.scenario.scenario import Scenario
from planner.serving.sizing_request import SizingRequest

DIALECT = "https://json-schema.org/draft/2020-12/schema"


def _defs(*models: type[BaseModel]) -> dict[str, Any]:
    defs: dict[str, Any] = {}
    for m in models:
        schema = m.model_json_schema(ref_template="#/$defs/{model}")
        defs.update(schema.pop("$defs", {}))
        defs[m.__name__] = schema
    return defs


_MODEL = {"anyOf": [
    {"type": "string", "description": "a preset id (python -m planner models)"},
    {"$ref": "#/$defs/ModelSpec"},
    {"type": "object", "description": "a Hugging Face config.json", "required": ["hf_config"],
     "properties": {"hf_config": {"type": "object"}}, "additionalProperties": False},
]}
_GPU = {"anyOf": [
    {"type": "string", "description": "a catalog id (python -m planner gpus)"}, {"$ref": "#/$defs/GpuSpec"},
]}


def input_schema(kind: str = "scenario") -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a `scenario`, a `sizing` request or a `calibration` profile."""
    if kind == "calibration":
        schema = CalibrationProfile.model_json_schema(ref_template="#/$defs/{model}")
        return {"$schema": DIALECT, **schema}
    if kind == "scenario":
        schema = Scenario.model_json_schema(ref_template="#/$defs/{model}")
        schema["properties"]["gpu"] = {**_GPU, "title": "Gpu"}
    elif kind == "sizing":
        schema = SizingRequest.model_json_schema(ref_template="#/$defs/{model}")
        gpus = schema["properties"]["gpus"]
        gpus["anyOf"] = [{"type": "array", "items": _GPU, "minItems": 1, "maxItems": 100}, {"type": "null"}]
        schema["properties"]["efficiency"] = {"anyOf": [{"enum": ["ideal", "default"]},
                                                        {"$ref": "#/$defs/EngineEfficiency"}]}
    else:
        raise ValueError(f"unknown input kind {kind!r}")
    schema["properties"]["model"] = {**_MODEL, "title": "Model"}
    defs = schema.setdefault("$defs", {})
    defs.update(_defs(ModelSpec, GpuSpec, EngineEfficiency))
    return {"$schema": DIALECT, **schema}
