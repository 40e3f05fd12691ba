"""Back from proof to plan: a `vllm bench serve --save-result` run against the plan that it tests.

Every figure the benchmark saved is set beside the plan's prediction at the run's own operating point
(its mean prompt/output lengths and max concurrency), with the error; the calibration fitted from the
run (planner.serving.calibration_fit.profile_from_vllm_bench) is then applied and the same figures predicted
again, and the calibrated scenario is returned for re-planning.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any

from planner.contract.commands import command_set
from planner.contract.expected_figures import ExpectedFigure
from planner.core.errors import ScenarioError
from planner.physics.calibration import CalibrationProfile
from planner.scenario.scenario import parse_scenario
from planner.serving.calibration_fit import (
    VllmBenchResult,
    bench_scenario_error,
    fitted_open_loop,
    parse_bench,
    profile_from_vllm_bench,
)

MAX_BENCH_KEYS = (
    10_000  # a saved result has ~50 keys (more with --save-detailed lists); refuse absurd objects
)


@dataclass(frozen=True)
class FigureComparison:
    label: str
    result_key: str
    unit: str
    predicted: float | None
    measured: float | None
    calibrated: float | None

    @property
    def error_pct(self) -> float | None:
        """(predicted - measured) / measured, in percent: positive when the plan over-predicts."""
        if self.predicted is None or self.measured is None or self.measured == 0:
            return None
        return (self.predicted - self.measured) / self.measured * 100.0

    @property
    def calibrated_error_pct(self) -> float | None:
        if self.calibrated is None or self.measured is None or self.measured == 0:
            return None
        return (self.calibrated - self.measured) / self.measured * 100.0


@dataclass(frozen=True)
class BenchComparison:
    point_scenario: dict[str, Any]  # the scenario at the run's operating point
    rows: tuple[FigureComparison, ...]
    calibration: CalibrationProfile
    calibrated_scenario: dict[str, Any]  # the user's scenario with the fitted calibration


def _measured(bench: dict[str, Any], key: str) -> float | None:
    value = bench.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ScenarioError(f"bench.{key[:60]}", "must be a finite number")
    return float(value)


def check_bench(bench: Any) -> tuple[dict[str, Any], VllmBenchResult]:
    """The file and the fields the fit reads (validated by calibration_fit.parse_bench); every other
    figure compared must be a finite number when present."""
    parsed = parse_bench(bench)
    if len(bench) > MAX_BENCH_KEYS:
        raise ScenarioError("bench", f"has more than {MAX_BENCH_KEYS} keys; not a vllm bench result")
    return bench, parsed


def open_loop_rate(bench: Any) -> tuple[float, float] | None:
    """(request rate, burstiness) of an open-loop run (`--request-rate` finite: vllm bench serve saves the
    number, or "inf" for a closed loop), None otherwise, and None for an open loop its --max-concurrency held
    (planner.serving.calibration_fit.fitted_open_loop: compared, as it is fitted, as that closed loop)."""
    run = fitted_open_loop(bench)
    return None if run is None else (run.rate, run.burstiness)


def scenario_at_bench_point(bench: Any, scenario: dict[str, Any],
                            open_loop: tuple[float, float] | None = None) -> dict[str, Any]:
    """The scenario as the run exercised it: mean lengths from the token totals, and its operating point: an
    open loop at the run's request rate (`open_loop`, from open_loop_rate; its --max-concurrency is then a
    cap, not the load) or a closed loop with batch = max concurrency (the same operating point
    profile_from_vllm_bench fits at). A scenario at its goodput is moved to the run's point."""
    if open_loop is None and isinstance(bench, dict):
        open_loop = open_loop_rate(bench)
    b = bench if isinstance(bench, VllmBenchResult) else parse_bench(bench)
    point = copy.deepcopy(scenario)
    point.pop("calibration", None)
    if b.completed and b.total_input_tokens and b.total_output_tokens:
        point["prompt_len"] = max(1, round(b.total_input_tokens / b.completed))
        point["output_len"] = max(1, round(b.total_output_tokens / b.completed))
        if point.get("context_len") is not None:
            point["context_len"] = max(point["context_len"], point["prompt_len"] + point["output_len"])
        if point.get("max_model_len") is not None:
            point["max_model_len"] = max(point["max_model_len"], point["prompt_len"] + point["output_len"])
    if open_loop is not None:
        load = {k: v for k, v in (point.get("load") or {}).items()
                if k not in ("request_rate", "concurrency", "at_goodput")}
        point["load"] = {**load, "request_rate": open_loop[0], "arrival_cv": 1.0 / math.sqrt(open_loop[1])}
    elif b.max_concurrency:
        point["batch"] = b.max_concurrency
        if isinstance(point.get("load"), dict):
            point["load"] = {k: v for k, v in point["load"].items()
                             if k not in ("request_rate", "concurrency", "at_goodput")}
            point["load"]["concurrency"] = b.max_concurrency
    try:
        parse_scenario(point)  # the run's point must itself be a valid scenario
    except ScenarioError as err:
        raise bench_scenario_error(err) from None
    return point


def _predicted(scenario: dict[str, Any]) -> dict[str, ExpectedFigure]:
    return {f.result_key: f for f in command_set(scenario).expected}


def compare_bench(bench: Any, scenario: Any, name: str | None = None) -> BenchComparison:
    """Predicted vs measured for every figure the run saved, the fitted calibration and the calibrated
    scenario."""
    bench, parsed = check_bench(bench)
    if not isinstance(scenario, dict):
        raise ScenarioError("scenario", "must be a JSON object")
    parse_scenario(scenario)
    point = scenario_at_bench_point(parsed, scenario, open_loop_rate(bench))
    profile = profile_from_vllm_bench(
        bench, {k: v for k, v in scenario.items() if k != "calibration"}, name=name
    )
    calibration = profile.model_dump(exclude_none=True)
    predicted = _predicted(point)
    calibrated = _predicted({**point, "calibration": calibration})
    rows = tuple(
        FigureComparison(f.label, key, f.unit, f.predicted, _measured(bench, key),
                         calibrated[key].predicted)
        for key, f in predicted.items() if key in bench)
    return BenchComparison(point_scenario=point, rows=rows, calibration=profile,
                           calibrated_scenario={**scenario, "calibration": calibration})


def _cell(value: float | None, pct: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.1f}%" if pct else f"{value:,.2f}"


def comparison_text(c: BenchComparison) -> str:
    lines = [f"{'figure':<34}{'predicted':>12}{'measured':>12}{'error':>9}{'calibrated':>12}{'error':>9}"]
    for r in c.rows:
        lines.append(
            f"{r.label + ' (' + r.unit + ')':<34}{_cell(r.predicted):>12}{_cell(r.measured):>12}"
            f"{_cell(r.error_pct, True):>9}{_cell(r.calibrated):>12}{_cell(r.calibrated_error_pct, True):>9}"
        )
    lines.append(
        "error = (predicted - measured) / measured; calibrated = predicted with the fitted calibration"
    )
    lines.append(f"calibration: {c.calibration.name}  ({c.calibration.source})")
    return "\n".join(lines) + "\n"


def comparison_dict(c: BenchComparison) -> dict[str, Any]:
    return {
        "point_scenario": c.point_scenario,
        "figures": [{"figure": r.label, "result_key": r.result_key, "unit": r.unit, "predicted": r.predicted,
                     "measured": r.measured, "error_pct": r.error_pct, "calibrated": r.calibrated,
                     "calibrated_error_pct": r.calibrated_error_pct} for r in c.rows],
        "calibration": c.calibration.model_dump(exclude_none=True),
        "calibrated_scenario": c.calibrated_scenario,
    }
