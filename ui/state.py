"""Session start-up from the link, and keeping the link in step with the inputs."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import streamlit as st

from planner.contract.equal_service import DEFAULT_TRAFFIC_REQUESTS_PER_S
from ui import links, power_link, view_links, widget_state

VIEWS = ("Plan", "Compare what-ifs", "Size a fleet", "Power & fleets")
# Link parameters beside the scenario's own (ui/links.py): the sidebar's traffic target, which every fleet
# figure depends on, and the view shown; a link leaves each out at its default.
TRAFFIC_PARAM = "traffic_rps"
VIEW_PARAM = "view"
VIEW_IDS = {"Plan": "plan", "Compare what-ifs": "compare", "Size a fleet": "size", "Power & fleets": "power"}


def _view_and_traffic(params: dict[str, str]) -> list[tuple[str, str]]:
    """Take the traffic target and the view out of the link's parameters into the session; a bad value is
    named, and its default is used."""
    problems: list[tuple[str, str]] = []
    ss = st.session_state
    raw = params.pop(TRAFFIC_PARAM, None)
    if raw is not None:
        low, high = widget_state.WIDGET_BOUNDS["traffic_rps"]
        try:
            value = float(raw)
        except ValueError:
            value = float("nan")
        if low <= value <= high:
            ss["traffic_rps"] = value
        else:
            problems.append((TRAFFIC_PARAM, f"must be a number of requests/s from {low:g} to {high:g}; "
                             f"using the default {DEFAULT_TRAFFIC_REQUESTS_PER_S:g}"))
    raw = params.pop(VIEW_PARAM, None)
    if raw is not None:
        by_id = {v: k for k, v in VIEW_IDS.items()}
        if raw in by_id:
            ss["view"] = by_id[raw]
        else:
            problems.append((VIEW_PARAM, f"must be one of {', '.join(by_id)}; showing the plan"))
    return problems


def init_from_link() -> None:
    """On a session's first run: scenario and pins from the query string, problems remembered.

    A link over links.MAX_LINK_CHARS is refused whole (the default scenario loads, with a message)."""
    if st.session_state.get("initialized"):
        return
    params = {k: st.query_params[k] for k in st.query_params}
    too_long = links.link_too_long(params)
    if too_long:
        params = {}
    shared = _view_and_traffic(params)
    power = params.pop(power_link.PARAM, None)
    shared += view_links.load(params)
    scenario, problems = links.scenario_from_query(params)
    problems += shared + (power_link.load(power) if power is not None else [])
    if too_long:
        problems.insert(0, ("link", f"{too_long}; not loaded, the default scenario is shown"))
    pins: list[dict[str, Any]] = []
    if links.COMPARE_PARAM in params:
        pins, pin_problems = links.comparison_from_query(params[links.COMPARE_PARAM])
        problems += pin_problems
    problems += widget_state.seed_widgets(scenario)
    if params.get(links.SIZE_PARAM):  # named on whatever view the user is on, not only on Size (issue 32)
        _, size_problem = links.sizing_request_from_link(params[links.SIZE_PARAM])
        if size_problem:
            problems.append((links.SIZE_PARAM, f"{size_problem}; the Size view shows its default search"))
    if links.FLEET_PARAM in params:
        problems += _open_linked_fleet(params[links.FLEET_PARAM])
    st.session_state["size_link"] = params.get(links.SIZE_PARAM)
    st.session_state["pins"] = pins
    if "cmp_rate" in st.session_state:  # the link's rate belongs to its pins (ui/compare.py keeps it then)
        st.session_state["cmp_pins_seen"] = len(pins)
    st.session_state["link_problems"] = problems
    # the scenario the link produced: its warnings stay only until the user changes an input
    st.session_state["link_scenario"] = widget_state.read_scenario()
    st.session_state["initialized"] = True


def _open_linked_fleet(raw: str) -> list[tuple[str, str]]:
    """The disaggregated option a link's `fleet` names, opened over its decode worker as the sizing page opens
    it (ui/sizing_page.py); numbered as the sizing table lists it by default (validated GPUs first)."""
    from planner.serving.serving_modes import decode_worker_scenario
    from ui.sizing_options import ordered_options

    found, problem = links.fleet_from_link(raw, widget_state.read_scenario())
    if found is None:
        return [(links.FLEET_PARAM, problem or "not read; the single-pool fleet is shown")]
    option, request, options = found
    st.session_state["sz_opened_fleet"] = {
        "scenario": decode_worker_scenario(option, request), "option": option, "request": request,
        "number": ordered_options(options, True).index(option) + 1}
    return []


def current_link_problems(scenario: dict[str, Any]) -> list[tuple[str, str]]:
    """The link's warnings while the scenario is still the one the link gave; none once the user changed
    it."""
    ss = st.session_state
    if ss.get("link_problems") and scenario != ss.get("link_scenario"):
        ss["link_problems"] = []
    return list(ss.get("link_problems") or [])


def sync_link(scenario: dict[str, Any] | None) -> tuple[str, str | None]:
    """Write the scenario (and pins) into the address bar; return (query string, refusal or None).

    A scenario whose link would exceed links.MAX_LINK_CHARS (a large imported config) is not written
    into the address bar: the refusal says so, and the scenario JSON download still carries it."""
    params = links.scenario_to_query(scenario) if scenario is not None else {}
    pins = st.session_state.get("pins") or []
    if pins:
        params[links.COMPARE_PARAM] = links.comparison_to_query(pins)
    traffic = float(st.session_state.get("traffic_rps", DEFAULT_TRAFFIC_REQUESTS_PER_S))
    if traffic != DEFAULT_TRAFFIC_REQUESTS_PER_S:
        params[TRAFFIC_PARAM] = repr(traffic)
    view = VIEW_IDS.get(st.session_state.get("view", VIEWS[0]), "plan")
    if view != "plan":
        params[VIEW_PARAM] = view
    params.update(view_links.to_query())
    power = power_link.link_value()
    if power is not None:
        params[power_link.PARAM] = power
    if st.session_state.get("sz_request"):
        params[links.SIZE_PARAM] = json.dumps(st.session_state["sz_request"], separators=(",", ":"))
    elif st.session_state.get("size_link"):
        params[links.SIZE_PARAM] = st.session_state["size_link"]
    opened = st.session_state.get("sz_opened_fleet")
    if scenario is not None and opened:
        from ui.sizing_page import opened_fleet

        if opened_fleet(scenario) is not None:  # the Plan view still shows that fleet's decode worker
            params[links.FLEET_PARAM] = links.fleet_to_query(opened["request"], opened["option"])
    too_long = links.link_too_long(params)
    if too_long:
        return "", too_long
    current = {k: st.query_params[k] for k in st.query_params}
    if scenario is not None and current != params:
        st.query_params.from_dict(params)
    return urlencode(params), None
