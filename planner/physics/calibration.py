"""Calibration profiles: engine-efficiency overrides measured on a user's own hardware.

A profile comes from `tools/measure_gpu.py` (fitted by `tools/fit_calibration.py`) or from a vLLM
`vllm bench serve` result plus the scenario it ran (planner.serving.calibration_fit). In a scenario it
overrides the default engine for the GPU it was measured on; the plan names it. This module only
describes a profile, so the scenario can hold one without importing the fitting code (no cycle).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from planner.core.efficiency import EngineEfficiency
from planner.core.errors import quote
from planner.engines.profiles import default_engine


class CalibrationProfile(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    name: str = Field(min_length=1, max_length=120)
    gpu: str | None = Field(default=None, max_length=120,
                            description="catalog id it was measured on; None applies to any GPU")
    efficiency: dict[str, float] = Field(default_factory=dict, max_length=64)
    source: str | None = Field(default=None, max_length=2000)

    @field_validator("efficiency")
    @classmethod
    def _known_keys_in_range(cls, values: dict[str, float]) -> dict[str, float]:
        known = set(EngineEfficiency.model_fields) - {"name"}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(
                f"unknown efficiency key {quote(unknown[0])} (known: {', '.join(sorted(known))})"
            )
        try:
            EngineEfficiency.model_validate(values)  # ranges
        except ValidationError as err:
            first = err.errors(include_url=False)[0]
            raise ValueError(f"{'.'.join(map(str, first['loc']))}: {first['msg']}") from None
        return values

    def applies_to(self, gpu_id: str | None) -> bool:
        return self.gpu is None or self.gpu == gpu_id

    def efficiency_for(self, gpu_id: str | None, base: EngineEfficiency | None = None) -> EngineEfficiency:
        """The profile over `base` (the scenario's engine profile; the default engine if None)."""
        base = base if base is not None else default_engine(gpu_id)
        if not self.applies_to(gpu_id):
            return base
        values = base.model_dump()
        values.update(self.efficiency)
        values["name"] = f"calibration:{self.name}"
        return EngineEfficiency.model_validate(values)
