"""A calibration profile fitted from a `vllm bench serve --save-result` run and the scenario it ran.

Separate from planner.physics.calibration (the profile itself) because fitting needs the scenario and the
time model, while the scenario only needs the profile: no import cycle.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from planner.core.efficiency import EngineEfficiency
from planner.core.errors import ScenarioError, from_validation_error
from planner.physics.calibration import CalibrationProfile
from planner.physics.memory import plan_memory
from planner.scenario.scenario import Scenario, parse_scenario, resolve
from planner.serving.distributions import PERCENTILES, quantile, ttft_distribution
from planner.serving.load import itl_under_concurrency, ttft_under_concurrency
from planner.serving.replica import load_point, replica_model
from planner.serving.workload import running_cap, workload_for

DECODE_EFFICIENCIES = ("bandwidth", "quantized_bandwidth", "kv_bandwidth", "compute", "link")
DECODE_COSTS = ("layer_overhead_us", "step_overhead_us", "allreduce_latency_us")
PREFILL_EFFICIENCIES = ("prefill_compute", "attention_compute")
PREFILL_COSTS = ("prefill_overhead_ms", "ttft_overhead_ms")
# An open-loop run's --max-concurrency holds arrivals back (and leaves that wait out of their TTFT) once the
# requests in flight reach it. In flight at a rate below capacity is about Poisson with mean L (Little's law:
# request throughput x mean E2E), so the cap binds more than 1 % of the time when it is below L + 2.33 sqrt(L)
# (the normal 99th percentile). Such a run was held near its cap: it is fitted as the closed loop of
# `max_concurrency` clients, as before. The planner's own command sets the cap at max(2 L, L + 5 sqrt(L)).
CAP_BINDS_SIGMAS = 2.33
# The open-loop fit alternates decode (from TPOT) and prefill (from TTFT) until both settle: each moves the
# other's figure a little (prefill chunks lengthen iterations; slower steps lengthen the queue before a first
# token). It stops when no factor moves by more than OPEN_LOOP_SETTLED, far below the 6 decimals a profile
# keeps, or after OPEN_LOOP_ROUNDS.
OPEN_LOOP_SETTLED = 1e-7
OPEN_LOOP_ROUNDS = 12


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
    # an open-loop run's achieved throughput and mean E2E: the requests in flight, by Little's law
    request_throughput: float | None = Field(default=None, ge=0, le=1e9)
    mean_e2el_ms: float | None = Field(default=None, ge=0, le=1e9)


@dataclasses.dataclass(frozen=True)
class OpenLoopRun:
    """An open-loop `vllm bench serve --request-rate` run: its rate, burstiness (gamma shape; 1 = Poisson),
    the requests it held in flight (Little's law, None when the file lacks throughput or mean E2E) and its
    --max-concurrency (a cap, not the load)."""

    rate: float
    burstiness: float
    in_flight: float | None
    cap: int | None

    @property
    def cap_binds(self) -> bool:
        """Whether the cap held arrivals back more than 1 % of the time (CAP_BINDS_SIGMAS)."""
        if self.cap is None or self.in_flight is None:
            return False
        return self.cap < self.in_flight + CAP_BINDS_SIGMAS * math.sqrt(self.in_flight)


def _finite_positive(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if not math.isfinite(value) or value <= 0:
        return None
    return float(value)


def open_loop_run(bench: Any) -> OpenLoopRun | None:
    """The run as an open loop when it was one (`request_rate` finite: vllm bench serve saves the number, or
    "inf" when every request starts at once), None for a closed loop."""
    if not isinstance(bench, dict):
        return None
    rate = _finite_positive(bench.get("request_rate"))
    if rate is None:
        return None
    burst = _finite_positive(bench.get("burstiness", 1.0)) or 1.0
    throughput = _finite_positive(bench.get("request_throughput"))
    e2e = _finite_positive(bench.get("mean_e2el_ms"))
    in_flight = throughput * e2e / 1000.0 if throughput is not None and e2e is not None else None
    cap = bench.get("max_concurrency")
    cap = cap if isinstance(cap, int) and not isinstance(cap, bool) and cap > 0 else None
    return OpenLoopRun(rate, burst, in_flight, cap)


def fitted_open_loop(bench: Any) -> OpenLoopRun | None:
    """The open loop the fit (and compare-bench) plans a run at: None for a closed loop, or for an open loop
    its cap held (fitted as the closed loop of `max_concurrency` clients instead)."""
    run = open_loop_run(bench)
    return None if run is None or run.cap_binds else run


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


# the run's fields behind the scenario's load at its point (an open loop): an error names the run's field
_RUN_FIELDS = {"load.request_rate": "bench.request_rate", "load.arrival_cv": "bench.burstiness"}


def bench_scenario_error(err: ScenarioError) -> ScenarioError:
    """A scenario error of the run's operating point, named by the run's field where one is behind it."""
    if err.field == "load.arrival_cv":  # arrival CV = 1 / sqrt(burstiness), at most 10 in a scenario
        return ScenarioError("bench.burstiness", "must be at least 0.01 (an arrival CV of at most 10)")
    return ScenarioError(_RUN_FIELDS.get(err.field, f"bench ({err.field})"), err.reason)


def _bench_scenario(b: VllmBenchResult, scenario: Any,
                    run: OpenLoopRun | None = None) -> tuple[Scenario, int]:
    """The scenario at the run's mean lengths (from its token totals), uncalibrated, and the run's
    concurrency; for an open-loop `run`, its `load` at the run's rate and arrival shape (burstiness k: gamma
    gaps with coefficient of variation 1 / sqrt(k))."""
    s = dict(parse_scenario(scenario).model_dump(exclude_none=True))
    s["model"], s["gpu"] = scenario["model"], scenario["gpu"]
    if b.completed and b.total_input_tokens and b.total_output_tokens:
        s["prompt_len"] = max(1, round(b.total_input_tokens / b.completed))
        s["output_len"] = max(1, round(b.total_output_tokens / b.completed))
        s["context_len"] = max(s.get("context_len", 0), s["prompt_len"] + s["output_len"])
    if run is not None:
        load = {k: v for k, v in (s.get("load") or {}).items()
                if k not in ("request_rate", "concurrency", "at_goodput")}
        s["load"] = {**load, "request_rate": run.rate, "arrival_cv": 1.0 / math.sqrt(run.burstiness)}
    concurrency = b.max_concurrency or s.get("batch") or 1
    s.pop("calibration", None)
    try:
        return parse_scenario(s), concurrency
    except ScenarioError as err:  # mean lengths from the bench totals, or its rate, out of range
        raise bench_scenario_error(err) from None


@dataclasses.dataclass(frozen=True)
class _Fit:
    values: dict[str, float]
    decode_slowdown: float
    prefill_slowdown: float


def _prefill_fit(decode_fit: dict[str, float], ttft_at, median_ttft_ms: float) -> _Fit:
    """Prefill on top of a decode fit, from the median TTFT: a slower first token than the engine model is
    serving overhead (HTTP, tokenization, scheduling) added to every TTFT; a faster one scales the prefill
    terms."""
    predicted_ttft = ttft_at(decode_fit)
    if median_ttft_ms >= predicted_ttft:
        overhead = decode_fit["ttft_overhead_ms"] + median_ttft_ms - predicted_ttft
        return _Fit({**decode_fit, "ttft_overhead_ms": overhead}, 1.0, 1.0)
    s_ttft = _solve(lambda k: ttft_at(_scaled(decode_fit, k, PREFILL_EFFICIENCIES, PREFILL_COSTS)),
                    median_ttft_ms)
    return _Fit(_scaled(decode_fit, s_ttft, PREFILL_EFFICIENCIES, PREFILL_COSTS), 1.0, s_ttft)


def _closed_loop_fit(b: VllmBenchResult, sc: Scenario, base: dict[str, float], deployment,
                     concurrency: int) -> _Fit:
    """Decode from the median TPOT (the closed loop's median ITL), then prefill from the median TTFT, at
    `concurrency` clients (planner.serving.load)."""
    def itl_at(slowdown):
        d = deployment(_scaled(base, slowdown, DECODE_EFFICIENCIES, DECODE_COSTS))
        return itl_under_concurrency(d, int(concurrency), sc.prompt_len, sc.output_len, sc.load)

    def ttft_at(values):
        return ttft_under_concurrency(deployment(values), int(concurrency), sc.prompt_len, sc.output_len,
                                      sc.load)

    s_itl = _solve(itl_at, b.median_tpot_ms)
    fit = _prefill_fit(_scaled(base, s_itl, DECODE_EFFICIENCIES, DECODE_COSTS), ttft_at, b.median_ttft_ms)
    return dataclasses.replace(fit, decode_slowdown=s_itl)


def _open_loop_fit(b: VllmBenchResult, sc: Scenario, base: dict[str, float], deployment) -> _Fit:
    """The run as the plan models an open loop (planner.contract.planning.operating_point: the scenario's
    rate, at most the KV cache's max batch running): decode from the median TPOT (the plan's per-request
    TPOT, its `serving.tpot_ms.p50`), prefill from the median TTFT, alternated until both settle (each
    moves the other's figure)."""
    d0 = deployment(base)
    mem = plan_memory(d0, sc.context_len_resolved)  # the fitted terms are times: the memory plan is the same
    cap = running_cap(sc.batch, mem.max_batch)
    rate = sc.load.request_rate if sc.load is not None and sc.load.request_rate is not None else 0.0

    def model_at(values):
        d = deployment(values)
        m = replica_model(d, workload_for(sc, d, cap), mem.max_batch)
        return m, load_point(m, rate / 1000.0)

    # the figures the plan's open loop reports (planner.serving.serving._point), computed alone: the fit
    # needs two medians, not every percentile (E2E's are most of a plan's serving time)
    def tpot_at(values):
        m, p = model_at(values)  # TPOT = the mean iteration (planner.serving.operating_point)
        ok = bool(p.stable) and m.decode_steps_per_request > 0
        return float(p.iteration_ms) if ok else float("inf")

    def ttft_at(values):
        m, p = model_at(values)
        if not bool(p.stable):
            return float("inf")
        first = float(np.max(m.prefill_work_ms) + p.iteration_ms + p.wait_mean_ms + 1.0)
        return float(quantile(ttft_distribution(m, p), np.array(PERCENTILES) / 100.0, first)[0])

    fit = _Fit(dict(base), 1.0, 1.0)
    for _ in range(OPEN_LOOP_ROUNDS):
        # decode over the current prefill fit: the prefill terms (and overhead) stay, decode is rescaled
        prefill_terms = {k: fit.values[k] for k in (*PREFILL_EFFICIENCIES, *PREFILL_COSTS)}

        def tpot_with_decode(s: float, terms: dict[str, float] = prefill_terms) -> float:
            return tpot_at({**_scaled(base, s, DECODE_EFFICIENCIES, DECODE_COSTS), **terms})

        s_dec = _solve(tpot_with_decode, b.median_tpot_ms)
        decode_fit = _scaled(base, s_dec, DECODE_EFFICIENCIES, DECODE_COSTS)
        new = dataclasses.replace(_prefill_fit(decode_fit, ttft_at, b.median_ttft_ms), decode_slowdown=s_dec)
        settled = all(abs(new.values[k] - fit.values[k]) <= OPEN_LOOP_SETTLED * max(abs(fit.values[k]), 1.0)
                      for k in (*DECODE_EFFICIENCIES, *DECODE_COSTS, *PREFILL_EFFICIENCIES, *PREFILL_COSTS)
                      if new.values.get(k) is not None)
        fit = new
        if settled:
            break
    return fit


def _operating_point_text(b: VllmBenchResult, run: OpenLoopRun | None,
                          held: OpenLoopRun | None, concurrency: int) -> str:
    """Where the run was fitted, for the profile's source."""
    if run is None:
        closed = f"at concurrency {concurrency}"
        if held is not None and held.in_flight is not None:
            closed += (f" (an open loop at {held.rate:.4g} req/s held by its --max-concurrency {held.cap}: "
                       f"{held.in_flight:,.1f} requests in flight by Little's law)")
        return closed
    arrivals = "Poisson" if run.burstiness == 1.0 else f"gamma arrivals, burstiness {run.burstiness:.3g}"
    text = f"open loop at {run.rate:.4g} req/s ({arrivals})"
    if run.in_flight is not None:
        text += (f", {run.in_flight:,.1f} requests in flight by Little's law "
                 f"({b.request_throughput:.4g} req/s x {b.mean_e2el_ms:,.0f} ms mean E2E)")
    if run.cap is not None:
        text += f", --max-concurrency {run.cap} only a cap"
    return text


def profile_from_vllm_bench(bench: Any, scenario: Any, name: str | None = None) -> CalibrationProfile:
    """Fit a profile so the plan reproduces a `vllm bench serve --save-result` run of `scenario`: its median
    TPOT (decode) and median TTFT (prefill and serving), at its mean lengths and operating point: a closed
    loop at its max concurrency, or an open loop (`--request-rate`) at its request rate, its
    --max-concurrency only a cap (unless the cap held the run: fitted_open_loop)."""
    b = parse_bench(bench)
    held = open_loop_run(bench)
    run = fitted_open_loop(bench)
    base_scenario, concurrency = _bench_scenario(b, scenario, run)
    d0 = resolve(base_scenario)
    base = d0.efficiency.model_dump()

    def deployment(values):
        return dataclasses.replace(d0, efficiency=EngineEfficiency.model_validate(values))

    try:
        fit = (_open_loop_fit(b, base_scenario, base, deployment) if run is not None
               else _closed_loop_fit(b, base_scenario, base, deployment, concurrency))
        fitted = dict(fit.values)
        fitted.pop("name", None)
        gpu = scenario["gpu"] if isinstance(scenario["gpu"], str) else None
        return CalibrationProfile(
            name=name or f"vllm-bench-{gpu or 'custom'}", gpu=gpu,
            efficiency={k: round(v, 6) for k, v in fitted.items() if v is not None},
            source=(
                f"vllm bench serve: median TPOT {b.median_tpot_ms:.2f} ms, median TTFT "
                f"{b.median_ttft_ms:.1f} ms "
                f"{_operating_point_text(b, run, held, concurrency)}, "
                f"{base_scenario.prompt_len} in / {base_scenario.output_len} out; decode slowdown "
                f"x{fit.decode_slowdown:.3f}, prefill x{fit.prefill_slowdown:.3f}, serving overhead "
                f"{fitted['ttft_overhead_ms']:.1f} ms vs the default engine"
            ),
        )
    except ValidationError as err:  # the fitted engine leaves a physical range (a 100 s serving overhead)
        e = from_validation_error(err, "calibration.efficiency")
        raise ScenarioError(
            "bench", f"these timings need an engine outside its ranges ({e.field}: {e.reason})"
        ) from None
