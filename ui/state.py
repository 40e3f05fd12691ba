"""Session start-up from the link, and keeping the link in step with the inputs."""

from __future__ import annotations

import json
from typing import Any

import streamlit as st

from ui import inputs, links


def init_from_link() -> None:
    """On a session's first run: scenario and pins from the query string, problems remembered."""
    if st.session_state.get("initialized"):
        return
    params = {k: st.query_params[k] for k in st.query_params}
    scenario, problems = links.scenario_from_query(params)
    pins: list[dict[str, Any]] = []
    if links.COMPARE_PARAM in params:
        pins, pin_problems = links.comparison_from_query(params[links.COMPARE_PARAM])
        problems += pin_problems
    inputs.seed_widgets(scenario)
    st.session_state["size_link"] = params.get(links.SIZE_PARAM)
    st.session_state["pins"] = pins
    st.session_state["link_problems"] = problems
    st.session_state["initialized"] = True


def sync_link(scenario: dict[str, Any] | None) -> str:
    """Write the scenario (and pins) into the address bar; return the query string."""
    params = links.scenario_to_query(scenario) if scenario is not None else {}
    pins = st.session_state.get("pins") or []
    if pins:
        params[links.COMPARE_PARAM] = links.comparison_to_query(pins)
    if st.session_state.get("sz_request"):
        params[links.SIZE_PARAM] = json.dumps(st.session_state["sz_request"], separators=(",", ":"))
    elif st.session_state.get("size_link"):
        params[links.SIZE_PARAM] = st.session_state["size_link"]
    current = {k: st.query_params[k] for k in st.query_params}
    if scenario is not None and current != params:
        st.query_params.from_dict(params)
    from urllib.parse import urlencode

    return urlencode(params)
