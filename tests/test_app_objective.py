"""The Plan view at the objective and Compare at equal service, in the app (AppTest)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from planner import plan_dict
from planner.contract.equal_service import DEFAULT_TRAFFIC_REQUESTS_PER_S, fleet_for
from planner.serving.operating_point import DEFAULT_OBJECTIVE
from planner.serving.sizing import size
from ui.figures import fmt_ms, fmt_time
from ui.links import DEFAULT_SCENARIO, scenario_to_query

APP = Path(__file__).resolve().parents[1] / "app.py"
GPUS = ("h100-sxm", "h200", "b200")


def run_app(params: dict[str, str] | None = None) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=90)
    for k, v in (params or {}).items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def test_default_plan_is_at_the_default_objective_and_judges_it():
    """The default page plans Llama-3.1-70B fp8 on 4 H100s at its goodput under p90 TTFT <= 1 s, p90 ITL
    <= 50 ms; its p90 tiles say met, with the figures the plan gives, and the mean TPOT beside them.
    Source: ui: the page shows the plan's own figures; the objective is MLPerf-informed (operating_point)."""
    at = run_app()
    m = metrics(at)
    p = plan_dict(DEFAULT_SCENARIO)["serving"]
    assert DEFAULT_SCENARIO["load"] == {
        "at_goodput": True, "slo": DEFAULT_OBJECTIVE.model_dump(exclude_none=True),
    }
    assert m["Goodput per replica"] == f"{p['goodput_request_rate']:,.2f} req/s"
    assert m["TTFT p90"] == fmt_time(p["ttft_ms"]["p90"]) + " ✓ met"
    assert m["ITL p90"] == fmt_time(p["itl_ms"]["p90"]) + " ✓ met"
    assert m["Mean TPOT"] == fmt_time(p["tpot_ms"]["mean"])
    assert "TTFT p50 / p99" not in m  # the objective's percentile, not p50 / p99
    fleet = fleet_for(DEFAULT_SCENARIO, DEFAULT_TRAFFIC_REQUESTS_PER_S, DEFAULT_OBJECTIVE)
    assert m[f"GPUs for {DEFAULT_TRAFFIC_REQUESTS_PER_S:,.4g} req/s"] == f"{fleet.gpus:,}"


def test_a_rate_above_the_goodput_is_marked_missed():
    """A rate halfway between the goodput and capacity (goodput 4.44, capacity 6.66 req/s on this replica)
    misses the p90 ITL objective, and the tile says so.
    Source: ui: the tile judges the plan's own p90 against the objective."""
    serving = plan_dict(DEFAULT_SCENARIO)["serving"]
    halfway = (serving["goodput_request_rate"] + serving["max_request_rate"]) / 2
    load = {
        "request_rate": round(halfway, 3), "slo": {"ttft_ms": 1000.0, "itl_ms": 50.0, "percentile": 90},
    }
    at = run_app({**scenario_to_query(DEFAULT_SCENARIO), "load": json.dumps(load)})
    p = plan_dict({**DEFAULT_SCENARIO, "load": load})["serving"]
    assert p["stable"] and p["itl_ms"]["p90"] > 50.0
    assert metrics(at)["ITL p90"] == fmt_time(p["itl_ms"]["p90"]) + " ✗ missed"


def test_compare_ranks_pins_at_equal_service_as_the_sizing_page_does():
    """Three pins (H100, H200, B200; Llama-3.1-70B fp8 TP 4), each at its own goodput: the table's order is
    the order of the sizing search's cheapest option per GPU for the same traffic, and its $/M are those
    options' figures.
    Source: invariant: Compare and the sizing page size a configuration with one function."""
    pins = [{**DEFAULT_SCENARIO, "gpu": g} for g in GPUS]
    at = run_app({**scenario_to_query(DEFAULT_SCENARIO), "compare": json.dumps(pins)})
    at.radio(key="view").set_value("Compare what-ifs").run()
    assert not at.exception
    table = at.dataframe[0].value
    cheapest = {}
    for g in GPUS:
        result = size(
            {
                "model": "llama-3.1-70b", "gpus": [g], "tp": [4], "weights": ["fp8"], "kv_cache": ["fp8"],
                "context_len": 8192,
                "traffic": {
                    "requests_per_s": DEFAULT_TRAFFIC_REQUESTS_PER_S, "prompt_len": 2000, "output_len": 400,
                },
                "slo": {"ttft_ms": 1000.0, "itl_ms": 50.0, "percentile": 90},
            }
        )
        cheapest[g] = result["options"][0]["usd_per_million_output_tokens"]
    assert list(table["pin"]) == sorted(GPUS, key=cheapest.__getitem__)
    assert [float(v.lstrip("$")) for v in table["$/M"]] == pytest.approx(sorted(cheapest.values()), abs=6e-4)
    assert list(table.index) == ["1", "2", "3"]  # one type with the "—" of an unranked pin (Arrow)
    assert any("Cheapest at equal service" in md.value for md in at.markdown)


def test_the_plan_page_gives_the_simulated_range_of_an_open_loop():
    """The default page (an open loop at the goodput) states where the scheduler's simulation puts its
    percentiles: the plan's serving.queue_bands, p90 included (the objective's percentile).
    Source: ui: the caption repeats the plan's own bands (planner/serving/queue_bands.py)."""
    at = run_app()
    bands = plan_dict(DEFAULT_SCENARIO)["serving"]["queue_bands"]
    assert bands["status"] == "simulated"
    captions = [c.value for c in at.caption if c.value.startswith("Simulated range at")]
    assert len(captions) == 1
    p90 = bands["ttft_p90_ms"]
    assert f"p90 {fmt_ms(p90['low'])} to {fmt_ms(p90['high'])}" in captions[0]
    assert f"{bands['load_fraction']:.0%} of capacity" in captions[0]
