"""Calibration from an open-loop run (issue 31, plan to proof): a `vllm bench serve --request-rate R
--max-concurrency cap` result is fitted at its request rate, as the plan models it, its in-flight requests
from Little's law (request throughput x mean E2E) and its --max-concurrency only a cap
(planner/serving/calibration_fit.py); a closed-loop result is fitted as before (tests/test_fidelity.py,
tests/test_commands_bench.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from planner.contract.bench_compare import compare_bench
from planner.contract.commands import command_set
from planner.contract.planning import plan_dict
from planner.scenario.scenario import parse_scenario, resolve
from planner.serving.calibration_fit import (
    DECODE_COSTS,
    DECODE_EFFICIENCIES,
    PREFILL_COSTS,
    PREFILL_EFFICIENCIES,
    fitted_open_loop,
    open_loop_run,
    profile_from_vllm_bench,
)
from tests.test_commands_bench import BENCH, SCENARIO
from tests.test_commands_roundtrip import SCENARIOS as ROUND_TRIP_SCENARIOS


def _open_run(**extra: Any) -> dict[str, Any]:
    """The published Qwen3-8B H100 medians (TPOT 7.28 ms, TTFT 59.01 ms) as if run open loop at 4 req/s,
    gamma arrivals of burstiness 0.25, 3.96 req/s achieved and a mean E2E of 10,000 ms."""
    return {**BENCH, "request_rate": 4.0, "burstiness": 0.25, "request_throughput": 3.96,
            "mean_e2el_ms": 10_000.0, "max_concurrency": 86, **extra}


def test_an_open_loop_run_is_fitted_at_its_rate_and_its_cap_is_only_a_cap():
    """Source: hand: in flight L = 3.96 req/s x 10.000 s = 39.6 (Little's law); the cap binds more than 1 % of
    the time below L + 2.33 sqrt(L) = 39.6 + 2.33 x 6.293 = 54.26. Cap 86 (> 54.26): an open loop at 4
    req/s, arrival CV 1 / sqrt(0.25) = 2.0, no concurrency and no batch in the point compared. Cap 55
    (> 54.26): still open. Cap 54 (< 54.26): the cap held the run, fitted and compared as the closed loop of
    54 clients, as before issue 31. `request_rate` "inf" (vllm bench serve's value without --request-rate):
    a closed loop."""
    run = open_loop_run(_open_run())
    assert run is not None and run.in_flight == pytest.approx(39.6, rel=1e-12)
    assert fitted_open_loop(_open_run()) == run and not run.cap_binds
    assert fitted_open_loop(_open_run(max_concurrency=55)) is not None
    assert fitted_open_loop(_open_run(max_concurrency=54)) is None
    assert open_loop_run({**BENCH, "request_rate": "inf"}) is None

    c = compare_bench(_open_run(), SCENARIO)
    point = c.point_scenario
    assert point["load"]["request_rate"] == 4.0 and point["load"]["arrival_cv"] == pytest.approx(2.0)
    assert "concurrency" not in point["load"] and point.get("batch") == SCENARIO["batch"]
    assert "open loop at 4 req/s" in c.calibration.source
    assert "39.6 requests in flight by Little's law" in c.calibration.source
    assert "--max-concurrency 86 only a cap" in c.calibration.source

    held = compare_bench(_open_run(max_concurrency=54), SCENARIO)
    assert held.point_scenario["batch"] == 54
    assert "request_rate" not in (held.point_scenario.get("load") or {})
    assert ("at concurrency 54 (an open loop at 4 req/s held by its --max-concurrency 54"
            in held.calibration.source)


# Round trip, on the command round trip's two scenarios (the app's default plan at its goodput, where the
# command's rate is the goodput rounded down; a given rate with bursty arrivals, spread lengths and a shared
# prefix). A "true" engine: the default profile with decode terms x `decode` (efficiencies / decode, fixed
# costs x decode), prefill terms x `prefill` and `overhead_ms` more serving overhead: the family the fit
# solves in (a slower first token is overhead, a faster one scaled prefill).
SCENARIOS = {name: ROUND_TRIP_SCENARIOS[name] for name in ("default-at-goodput", "rate-bursty-prefix")}
ENGINES = {"slower-decode-and-overhead": (1.25, 1.0, 40.0), "slower-decode-faster-prefill": (1.2, 0.85, 0.0)}
# The fit inverts the plan to the bisection's 1e-9 and settles its rounds to 1e-7; the true profile is
# rounded to 6 decimals like any profile: at a given rate every term comes back within 1e-4 (a fit off by
# 1 % in either slowdown fails). At the goodput the command's rate is the goodput rounded down to 4 digits
# (<= 0.1 % lower) while the sheet's figures are the plan's at the goodput itself, and a term absorbs that
# rate error with a gain of up to about 2 (prefill compute came back 1.19e-3 off after the roofline floor and
# the scheduler's wait joined the model): within 2e-3, still 5x tighter than the 1 % slowdown it must catch.
REL = {"default-at-goodput": 2e-3, "rate-bursty-prefix": 1e-4}


def _scaled(values: dict[str, float], k: float, efficiencies, costs) -> dict[str, float]:
    """Written here from the profile's meaning, not imported: efficiencies / k (at most 1), costs x k."""
    out = dict(values)
    out.update({e: min(1.0, values[e] / k) for e in efficiencies})
    out.update({c: values[c] * k for c in costs})
    return out


def _flags(argv: tuple[str, ...]) -> dict[str, str]:
    """`vllm bench serve`'s single-valued flags."""
    out, current = {}, None
    for token in argv[3:]:
        if token.startswith("--"):
            current = token
            out[current] = ""
        elif current is not None and not out[current]:
            out[current] = token
    return out


def _synthetic_result(scenario: dict[str, Any], calibration: dict[str, Any]) -> dict[str, Any]:
    """What `vllm bench serve --save-result` would hold if the engine ran exactly as the calibrated plan says:
    every figure of the expected sheet beside the emitted command (the plan's own figures), and the run's
    settings from the command's flags (request_rate, burstiness, max_concurrency; completed = num_prompts
    with the planned lengths). request_throughput and mean_e2el_ms come from the sheet, so Little's law gives
    the plan's in-flight requests."""
    cs = command_set({**scenario, "calibration": calibration}, "vllm")
    flags = _flags(cs.bench)
    n = int(flags["--num-prompts"])
    result: dict[str, Any] = {f.result_key: f.predicted for f in cs.expected if f.predicted is not None}
    result.update(request_rate=float(flags["--request-rate"]),
                  burstiness=float(flags.get("--burstiness", 1)),
                  max_concurrency=int(flags["--max-concurrency"]), completed=n,
                  total_input_tokens=n * scenario["prompt_len"],
                  total_output_tokens=n * scenario["output_len"])
    return result


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", SCENARIOS)
def test_plan_command_synthetic_run_calibrate_recovers_the_profile(name, engine):
    """Plan -> emitted command -> a run made of the plan's own figures -> calibrate gives back the profile
    the plan was made with (every efficiency and fixed cost within REL), and compare-bench's calibrated
    column then lands on the run's median TPOT and TTFT (0.01 %). An invariant, not a measurement: the
    "run" is the planner's own output, so this checks that the open-loop fit inverts the plan at the
    command's operating point (rate, Poisson or gamma arrivals, a cap that does not bind), whatever the
    plan's figures are worth on hardware. The fit as a closed loop at the cap (what `calibrate` did before)
    must miss the plan it was made from by more than 3 % in median TPOT or TTFT (seen: 8-68 %): its clients
    are the cap, max(2 L, L + 5 sqrt(L)), at least twice the requests the open loop holds.
    Source: invariant: the fit is the plan's inverse on the plan's own figures (tolerances: REL)."""
    scenario = SCENARIOS[name]
    decode, prefill, overhead_ms = ENGINES[engine]
    base = resolve(parse_scenario(scenario)).efficiency.model_dump(exclude_none=True)
    base.pop("name", None)
    truth = _scaled(_scaled(base, decode, DECODE_EFFICIENCIES, DECODE_COSTS), prefill, PREFILL_EFFICIENCIES,
                    PREFILL_COSTS)
    truth["ttft_overhead_ms"] += overhead_ms
    truth = {k: round(v, 6) for k, v in truth.items()}
    calibration = {"name": "truth", "gpu": scenario["gpu"], "efficiency": truth}
    run = _synthetic_result(scenario, calibration)
    assert not open_loop_run(run).cap_binds  # the command's cap is far above Little's L

    profile = profile_from_vllm_bench(run, scenario, name="fitted")
    for term in (*DECODE_EFFICIENCIES, *DECODE_COSTS, *PREFILL_EFFICIENCIES, *PREFILL_COSTS):
        assert profile.efficiency[term] == pytest.approx(truth[term], rel=REL[name], abs=1e-6), term
    assert f"decode slowdown x{decode:.3f}" in profile.source

    rows = {r.result_key: r for r in compare_bench(run, scenario).rows}
    for key in ("median_tpot_ms", "median_ttft_ms"):
        assert abs(rows[key].calibrated_error_pct) < 0.01, (key, rows[key])

    # the closed loop at the cap (request_rate "inf"), the fit before issue 31, planned at the run's rate
    closed = profile_from_vllm_bench({**run, "request_rate": "inf"}, scenario)
    load = {k: v for k, v in scenario["load"].items() if k not in ("at_goodput", "slo")}
    at_rate = {**scenario, "load": {**load, "request_rate": run["request_rate"]},
               "calibration": closed.model_dump(exclude_none=True)}
    serving = plan_dict(at_rate)["serving"]
    misses = [abs(serving["tpot_ms"]["p50"] / run["median_tpot_ms"] - 1),
              abs(serving["ttft_ms"]["p50"] / run["median_ttft_ms"] - 1)]
    assert max(misses) > 0.03, misses


@pytest.mark.parametrize("extra, line", [
    ({"request_rate": 2e6}, "error: bench.request_rate: Input should be less than or equal to 1000000"),
    ({"request_rate": 2.0, "burstiness": 1e-4},
     "error: bench.burstiness: must be at least 0.01 (an arrival CV of at most 10)"),
    ({"request_rate": 2.0, "request_throughput": -1.0},
     "error: bench.request_throughput: Input should be greater than or equal to 0"),
    ({"request_rate": 2.0, "mean_e2el_ms": "slow"},
     "error: bench.mean_e2el_ms: Input should be a valid number"),
])
def test_an_open_loop_run_out_of_range_is_one_line_naming_its_field(extra, line):
    """Source: contract: a bad bench field is one line `error: bench.<field>: <reason>`, named by the run's
    own field (not the scenario field it becomes: load.request_rate, load.arrival_cv)."""
    from planner.core.errors import ScenarioError

    for fit in (lambda b: profile_from_vllm_bench(b, SCENARIO), lambda b: compare_bench(b, SCENARIO)):
        with pytest.raises(ScenarioError) as err:
            fit({**BENCH, **extra})
        assert err.value.line() == line
