"""A calibration profile fitted from a `vllm bench serve --save-result` run and the scenario it ran.

Separate from planner.physics.calibration (the profile itself) because fitting needs the scenario and the
time model, while the scenario only needs the profile: no import cycle.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from planner.core.efficiency import EngineEfficiency
from planner.core.errors import ScenarioError, from_validation_error
from planner.physics.calibration import CalibrationProfile
from planner.scenario.scenario import Scenario, parse_scenario, resolve
from planner.serving.load import itl_under_concurrency, ttft_under_concurrency

DECODE_EFFICIENCIES = ("bandwidth", "quantized_bandwidth", "kv_bandwidth", "compute", "link")
DECODE_COSTS = ("layer_overhead_us", "step_overhead_us", "allreduce_latency_us")
PREFILL_EFFICIENCIES = ("prefill_compute", "attention_compute")
PREFILL_COSTS = ("prefill_overhead_ms", "ttft_overhead_ms")


class VllmBenchResult(BaseModel):
    """The fields of a `vllm bench serve --save-result` file that the fit reads (others are ignored).
    Ranges: a TPOT over 10 s or a TTFT over 100 s is not a serving benchmark (and the fitted serving
    overhead is bounded at 100 s)."""

    model_config = ConfigDict(extra="ignore", strict=True, allow_inf_nan=False)

    median_tpot_ms: float = Field(gt=0, le=10_000)
    median_ttft_ms: float = Field(gt=0, le=100_000)
    max_concurrency: int | None = Field(default=None, ge=1, le=1_000_000)
    completed: int | None = Field(default=None, ge=0, le=1_000_000_000)
    total_input_tokens: int | None = Field(default=None, ge=0, le=10**15)
    total_output_tokens: int | None = Field(default=None, ge=0, le=10**15)


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
    while hi / lo > 1 + 1e-9:  # ~33 halvings of log(hi/lo): far below the 6 decimals a profile keeps
        mid = (lo * hi) ** 0.5
        if predict(mid) < target:
            lo = mid
        else:
            hi = mid
    return (lo * hi) ** 0.5


def parse_bench(bench: Any) -> VllmBenchResult:
    if not isinstance(bench, dict):
        raise ScenarioError("bench", "must be a JSON object (vllm bench serve --save-result output)")
    try:
        return VllmBenchResult.model_validate(bench)
    except ValidationError as err:
        raise from_validation_error(err, "bench") from None


def _bench_scenario(b: VllmBenchResult, scenario: Any) -> tuple[Scenario, int]:
    """The scenario at the run's mean lengths (from its token totals), uncalibrated, and the run's
    concurrency."""
    s = dict(parse_scenario(scenario).model_dump(exclude_none=True))
    s["model"], s["gpu"] = scenario["model"], scenario["gpu"]
    if b.completed and b.total_input_tokens and b.total_output_tokens:
        s["prompt_len"] = max(1, round(b.total_input_tokens / b.completed))
        s["output_len"] = max(1, round(b.total_output_tokens / b.completed))
        s["context_len"] = max(s.get("context_len", 0), s["prompt_len"] + s["output_len"])
    concurrency = b.max_concurrency or s.get("batch") or 1
    s.pop("calibration", None)
    try:
        return parse_scenario(s), concurrency
    except ScenarioError as err:  # mean lengths from the bench totals out of range
        raise ScenarioError(f"bench ({err.field})", err.reason) from None


def profile_from_vllm_bench(bench: Any, scenario: Any, name: str | None = None) -> CalibrationProfile:
    """Fit a profile so the plan reproduces a `vllm bench serve --save-result` run of `scenario`: its median
    TPOT (decode) and median TTFT (prefill and serving), at its max concurrency and mean lengths."""
    b = parse_bench(bench)
    base_scenario, concurrency = _bench_scenario(b, scenario)
    d0 = resolve(base_scenario)
    base = d0.efficiency.model_dump()

    def deployment(values):
        return dataclasses.replace(d0, efficiency=EngineEfficiency.model_validate(values))

    def itl_at(slowdown):
        d = deployment(_scaled(base, slowdown, DECODE_EFFICIENCIES, DECODE_COSTS))
        return itl_under_concurrency(d, int(concurrency), base_scenario.prompt_len, base_scenario.output_len,
                                     base_scenario.load)

    def ttft_at(values):
        d = deployment(values)
        return ttft_under_concurrency(d, int(concurrency), base_scenario.prompt_len, base_scenario.output_len,
                                      base_scenario.load)

    try:
        s_itl = _solve(itl_at, b.median_tpot_ms)
        decode_fit = _scaled(base, s_itl, DECODE_EFFICIENCIES, DECODE_COSTS)
        predicted_ttft = ttft_at(decode_fit)
        if b.median_ttft_ms >= predicted_ttft:
            # slower first tokens than the engine model: serving overhead (HTTP, tokenization, scheduling)
            fitted = {**decode_fit,
                      "ttft_overhead_ms": decode_fit["ttft_overhead_ms"] + b.median_ttft_ms - predicted_ttft}
            s_ttft = 1.0
        else:
            s_ttft = _solve(lambda k: ttft_at(_scaled(decode_fit, k, PREFILL_EFFICIENCIES, PREFILL_COSTS)),
                            b.median_ttft_ms)
            fitted = _scaled(decode_fit, s_ttft, PREFILL_EFFICIENCIES, PREFILL_COSTS)
        fitted.pop("name", None)
        gpu = scenario["gpu"] if isinstance(scenario["gpu"], str) else None
        return CalibrationProfile(
            name=name or f"vllm-bench-{gpu or 'custom'}", gpu=gpu,
            efficiency={k: round(v, 6) for k, v in fitted.items() if v is not None},
            source=(
                f"vllm bench serve: median TPOT {b.median_tpot_ms:.2f} ms, median TTFT "
                f"{b.median_ttft_ms:.1f} ms at concurrency {concurrency}, {base_scenario.prompt_len} in / "
                f"{base_scenario.output_len} out; decode slowdown x{s_itl:.3f}, prefill x{s_ttft:.3f}, "
                f"serving overhead {fitted['ttft_overhead_ms']:.1f} ms vs the default engine"
            ),
        )
    except ValidationError as err:  # the fitted engine leaves a physical range (a 100 s serving overhead)
        e = from_validation_error(err, "calibration.efficiency")
        raise ScenarioError(
            "bench", f"these timings need an engine outside its ranges ({e.field}: {e.reason})"
        ) from None
