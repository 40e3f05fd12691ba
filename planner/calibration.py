"""Calibration profiles: engine-efficiency overrides measured on a user's own hardware.

A profile comes from `tools/measure_gpu.py` (fitted by `tools/fit_calibration.py`) or from a vLLM
`vllm bench serve` result plus the scenario it ran (`profile_from_vllm_bench`). In a scenario it
overrides the default engine for the GPU it was measured on; the plan names it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from planner.efficiency import EngineEfficiency, default_engine


class CalibrationProfile(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    name: str = Field(min_length=1, max_length=120)
    gpu: str | None = Field(default=None, max_length=120,
                            description="catalog id it was measured on; None applies to any GPU")
    efficiency: dict[str, float] = Field(default_factory=dict)
    source: str | None = Field(default=None, max_length=2000)

    @field_validator("efficiency")
    @classmethod
    def _known_keys_in_range(cls, values: dict[str, float]) -> dict[str, float]:
        known = set(EngineEfficiency.model_fields) - {"name"}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown efficiency key '{unknown[0]}' (known: {', '.join(sorted(known))})")
        EngineEfficiency.model_validate(values)  # ranges
        return values

    def applies_to(self, gpu_id: str | None) -> bool:
        return self.gpu is None or self.gpu == gpu_id

    def efficiency_for(self, gpu_id: str | None) -> EngineEfficiency:
        base = default_engine(gpu_id)
        if not self.applies_to(gpu_id):
            return base
        values = base.model_dump()
        values.update(self.efficiency)
        values["name"] = f"calibration:{self.name}"
        return EngineEfficiency.model_validate(values)


DECODE_EFFICIENCIES = ("bandwidth", "quantized_bandwidth", "kv_bandwidth", "compute", "link")
DECODE_COSTS = ("layer_overhead_us", "step_overhead_us", "allreduce_latency_us")
PREFILL_EFFICIENCIES = ("prefill_compute", "attention_compute")
PREFILL_COSTS = ("prefill_overhead_ms", "ttft_overhead_ms")


def _scaled(values: dict[str, float], slowdown: float, efficiencies, costs) -> dict[str, float]:
    """Every time term x slowdown: efficiencies / slowdown (capped at 1), fixed costs x slowdown."""
    out = dict(values)
    for k in efficiencies:
        out[k] = min(1.0, values[k] / slowdown)
    for k in costs:
        out[k] = values[k] * slowdown
    return out


def _solve(predict, target: float, lo: float = 0.05, hi: float = 20.0) -> float:
    """Slowdown s with predict(s) == target (predict rises with s); bisection in log space."""
    if predict(lo) >= target:
        return lo
    if predict(hi) <= target:
        return hi
    for _ in range(80):
        mid = (lo * hi) ** 0.5
        if predict(mid) < target:
            lo = mid
        else:
            hi = mid
    return (lo * hi) ** 0.5


def profile_from_vllm_bench(bench: Any, scenario: Any, name: str | None = None) -> CalibrationProfile:
    """Fit a profile so the plan reproduces a `vllm bench serve --save-result` run of `scenario`:
    its median TPOT (decode) and median TTFT (prefill and serving), at its max concurrency and mean lengths."""
    from planner.errors import ScenarioError
    from planner.latency import prefill, ttft_ms
    from planner.load import itl_under_concurrency
    from planner.scenario import parse_scenario, resolve

    if not isinstance(bench, dict):
        raise ScenarioError("bench", "must be a JSON object (vllm bench serve --save-result output)")
    for key in ("median_tpot_ms", "median_ttft_ms"):
        value = bench.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise ScenarioError(f"bench.{key}", "missing or not a positive number")
    s = dict(parse_scenario(scenario).model_dump(exclude_none=True))
    s["model"], s["gpu"] = scenario["model"], scenario["gpu"]
    completed = bench.get("completed") or 0
    if completed and bench.get("total_input_tokens") and bench.get("total_output_tokens"):
        s["prompt_len"] = max(1, round(bench["total_input_tokens"] / completed))
        s["output_len"] = max(1, round(bench["total_output_tokens"] / completed))
        s["context_len"] = max(s.get("context_len", 0), s["prompt_len"] + s["output_len"])
    concurrency = bench.get("max_concurrency") or s.get("batch") or 1
    s.pop("calibration", None)
    base_scenario = parse_scenario(s)
    d0 = resolve(base_scenario)
    base = d0.efficiency.model_dump()

    def deployment(values):
        return dataclasses.replace(d0, efficiency=EngineEfficiency.model_validate(values))

    def itl_at(slowdown):
        d = deployment(_scaled(base, slowdown, DECODE_EFFICIENCIES, DECODE_COSTS))
        return itl_under_concurrency(d, int(concurrency), base_scenario.prompt_len, base_scenario.output_len)

    s_itl = _solve(itl_at, float(bench["median_tpot_ms"]))
    decode_fit = _scaled(base, s_itl, DECODE_EFFICIENCIES, DECODE_COSTS)

    def ttft_at(values):
        d = deployment(values)
        return float(ttft_ms(d, float(prefill(d, base_scenario.prompt_len).total_ms)))

    target_ttft = float(bench["median_ttft_ms"])
    predicted_ttft = ttft_at(decode_fit)
    if target_ttft >= predicted_ttft:
        # slower first tokens than the engine model: serving overhead (HTTP, tokenization, scheduling)
        fitted = {**decode_fit, "ttft_overhead_ms": decode_fit["ttft_overhead_ms"] + target_ttft - predicted_ttft}
        s_ttft = 1.0
    else:
        s_ttft = _solve(lambda k: ttft_at(_scaled(decode_fit, k, PREFILL_EFFICIENCIES, PREFILL_COSTS)), target_ttft)
        fitted = _scaled(decode_fit, s_ttft, PREFILL_EFFICIENCIES, PREFILL_COSTS)
    fitted.pop("name", None)
    gpu = scenario["gpu"] if isinstance(scenario["gpu"], str) else None
    return CalibrationProfile(
        name=name or f"vllm-bench-{gpu or 'custom'}",
        gpu=gpu,
        efficiency={k: round(v, 6) for k, v in fitted.items()},
        source=(f"vllm bench serve: median TPOT {bench['median_tpot_ms']:.2f} ms, median TTFT "
                f"{bench['median_ttft_ms']:.1f} ms at concurrency {concurrency}, {base_scenario.prompt_len} in / "
                f"{base_scenario.output_len} out; decode slowdown x{s_itl:.3f}, prefill x{s_ttft:.3f}, serving overhead "
                f"{fitted['ttft_overhead_ms']:.1f} ms vs the default engine"),
    )
