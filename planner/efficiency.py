"""Engine efficiency: the knobs that turn roofline bounds into realistic step times.

`ideal()` is the pure roofline (the seeds' napkin math). `default_engine()` describes an optimized
engine (CUDA graphs, fused kernels, paged KV cache); its values come from the fit in
planner/data/calibration_default.json (see docs/ACCURACY.md for the evidence and error bands).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_CALIBRATION_PATH = Path(__file__).parent / "data" / "calibration_default.json"


class EngineEfficiency(BaseModel):
    """Fractions of datasheet peaks an engine reaches, and the fixed costs a step carries."""

    model_config = ConfigDict(extra="forbid", strict=True)

    bandwidth: float = Field(default=1.0, ge=0.01, le=1, description="weight streaming, fraction of HBM peak")
    quantized_bandwidth: float = Field(default=1.0, ge=0.01, le=1,
                                       description="streaming sub-16-bit weights (dequantizing kernels), fraction of HBM peak")
    compute: float = Field(default=1.0, ge=0.01, le=1, description="decode GEMMs, fraction of dense tensor peak")
    kv_bandwidth: float = Field(default=1.0, ge=0.01, le=1, description="attention KV reads, fraction of HBM peak")
    prefill_compute: float = Field(default=1.0, ge=0.01, le=1, description="prefill GEMMs, fraction of peak")
    attention_compute: float = Field(default=1.0, ge=0.01, le=1, description="prefill attention, fraction of bf16 peak")
    link: float = Field(default=1.0, ge=0.01, le=1, description="all-reduce bus bandwidth, fraction of link peak")
    layer_overhead_us: float = Field(default=0.0, ge=0, le=10_000, description="fixed cost per layer per step")
    step_overhead_us: float = Field(default=0.0, ge=0, le=1_000_000, description="fixed cost per decode step")
    allreduce_latency_us: float = Field(default=0.0, ge=0, le=10_000, description="latency of one all-reduce")
    prefill_overhead_ms: float = Field(default=0.0, ge=0, le=100_000, description="fixed cost per prefill")
    ttft_overhead_ms: float = Field(default=0.0, ge=0, le=100_000, description="serving cost before the first token")
    smoothing: float = Field(default=0.0, ge=0, le=64,
                             description="p of the p-norm joining compute and memory time; 0 means max()")
    name: str = Field(default="custom", max_length=200)


def ideal() -> EngineEfficiency:
    return EngineEfficiency(name="ideal")


@lru_cache(maxsize=1)
def _default_calibration() -> dict:
    return json.loads(DEFAULT_CALIBRATION_PATH.read_text())


def default_engine(gpu_id: str | None = None) -> EngineEfficiency:
    """The default engine, with the per-GPU calibration where one was measured."""
    data = _default_calibration()
    values = dict(data["default"])
    if gpu_id is not None:
        values.update(data.get("per_gpu", {}).get(gpu_id, {}))
    return EngineEfficiency(**values)
