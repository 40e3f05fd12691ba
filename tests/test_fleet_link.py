"""The opened disaggregated fleet in the share link (issue 31): ui/links.py's `fleet` parameter (the sizing
request and the option's two pools), read back by sizing the request again; a bad value is one warning line
naming the parameter, and the Plan view then shows the single-pool fleet."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from planner.serving.serving_modes import decode_worker_scenario, size_with_modes
from ui.links import FLEET_PARAM, SIZE_PARAM, fleet_from_link, fleet_to_query, scenario_to_query

ROOT = Path(__file__).resolve().parents[1]
# issue 31's case, sized with disaggregated fleets
REQUEST: dict[str, Any] = {
    "model": "llama-3.1-70b", "traffic": {"requests_per_s": 50.0, "prompt_len": 2000, "output_len": 400},
    "slo": {"ttft_ms": 1000.0, "itl_ms": 50.0, "percentile": 90}, "weights": ["fp8"], "kv_cache": ["fp8"],
    "gpus": ["h100-sxm", "h200", "b200", "mi355x", "mi350x", "gaudi3"], "disaggregation": True,
}


@functools.cache
def _fleet() -> tuple[dict[str, Any], dict[str, Any]]:
    """The first disaggregated option whose pools are not on the first one's GPU (a link must name its own
    option, not the cheapest), and its decode worker's scenario."""
    options = [o for o in size_with_modes(REQUEST)["options"] if o["mode"] == "disaggregated"]
    option = next((o for o in options if o["prefill"]["gpu"] != options[0]["prefill"]["gpu"]), options[0])
    return option, decode_worker_scenario(option, REQUEST)


def test_a_fleet_link_names_its_option_and_nothing_else():
    """The parameter carries the request and each pool's GPU, TP, PP, EP and precisions, no figure; read
    back, it gives the same option (same pools, workers, GPUs and $/hour).
    Source: ui: ui/links.py's fleet parameter, documented in docs/CONTRACT_EXTENSIONS.md."""
    option, scenario = _fleet()
    raw = fleet_to_query(REQUEST, option)
    carried = json.loads(raw)
    assert set(carried) == {"request", "prefill", "decode"} and carried["request"] == REQUEST
    assert set(carried["prefill"]) == {"gpu", "tp", "pp", "ep", "weights", "kv_cache"}
    found, problem = fleet_from_link(raw, scenario)
    assert problem is None and found is not None
    got, request, _ = found
    assert request == REQUEST
    for key in ("prefill_workers", "decode_workers", "gpus_total", "usd_per_hour", "ttft_ms", "itl_ms"):
        assert got[key] == option[key], key


@pytest.mark.parametrize("mutate, reason", [
    (lambda raw, s: ("{not json", s), "not valid JSON"),
    (lambda raw, s: ("[1, 2]", s), "must be a JSON object with request, prefill and decode objects"),
    (lambda raw, s: (json.dumps({**json.loads(raw), "request": {**REQUEST, "traffic": {"prompt_len": 1}}}),
                     s), "request: "),
    (lambda raw, s: (json.dumps({**json.loads(raw), "prefill": {**json.loads(raw)["prefill"], "tp": 64}}), s),
     "no disaggregated option of its sizing request has these pools"),
    (lambda raw, s: (raw, {**s, "output_len": 401}), "the linked scenario is not this fleet's decode worker"),
])
def test_a_bad_fleet_parameter_is_one_line_naming_why(mutate, reason):
    """Source: contract: a bad link parameter is dropped with one line saying why (ui/links.py, like every
    other link parameter), and the page falls back to the single-pool fleet."""
    option, scenario = _fleet()
    raw, linked = mutate(fleet_to_query(REQUEST, option), scenario)
    found, problem = fleet_from_link(raw, linked)
    assert found is None and problem is not None
    assert reason in problem and problem.endswith("; the single-pool fleet is shown") and "\n" not in problem


def _app(params: dict[str, str]) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    for k, v in params.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_a_shared_fleet_link_reopens_the_fleet_and_keeps_it_in_the_link():
    """A link with the decode worker's scenario, the sizing request and the `fleet` parameter opens the Plan
    view on that fleet (both pools, as the sizing page opened it), not on the single-pool fleet for the
    sidebar's traffic, and the app's own link keeps the parameter; a bad `fleet` is one warning naming it.
    Source: ui: the share link carries every input of the view (issue 31, "A share link reproduces every
    view")."""
    option, scenario = _fleet()
    params = {**scenario_to_query(scenario), SIZE_PARAM: json.dumps(REQUEST, separators=(",", ":")),
              FLEET_PARAM: fleet_to_query(REQUEST, option)}
    at = _app(params)
    opened = at.session_state["sz_opened_fleet"]
    assert opened["option"]["usd_per_hour"] == option["usd_per_hour"]
    assert opened["option"]["prefill"]["gpu"] == option["prefill"]["gpu"]
    text = " ".join(m.value for m in at.markdown) + " ".join(c.value for c in at.caption)
    assert f"Option {opened['number']}: disaggregated fleet, {option['gpus_total']:,} GPUs" in text
    assert not at.warning
    assert at.query_params[FLEET_PARAM] in (params[FLEET_PARAM], [params[FLEET_PARAM]])
    at.toggle(key="cmd_show").set_value(True).run()  # the Deploy-and-benchmark panel: the fleet's launch set
    assert not at.exception
    codes = [c.value for c in at.code]
    assert any("--prefiller-hosts" in c for c in codes) and any("--kv-transfer-config" in c for c in codes)

    bad = _app({**params, FLEET_PARAM: "{"})
    warnings = [w.value for w in bad.warning]
    assert len(warnings) == 1 and warnings[0].startswith("Link parameter **`fleet`**: `not valid JSON")
    assert FLEET_PARAM not in bad.query_params
