"""The Plan view: headline figures, the share link, the charts, the time breakdown and the exports."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import streamlit as st

from planner import Plan, ScenarioError, plan
from planner.planning import clean_json
from ui import charts, exports, figures
from ui.text import plain


@st.cache_data(max_entries=256, show_spinner=False)
def _cached_plan(scenario_json: str) -> Plan:
    return plan(json.loads(scenario_json))


def plan_or_error(scenario: dict[str, Any]) -> tuple[Plan | None, ScenarioError | None]:
    """The plan (cached per scenario across sessions), or the input error that prevents it."""
    try:
        return _cached_plan(json.dumps(scenario, sort_keys=True)), None
    except ScenarioError as err:
        return None, err


@st.cache_data(max_entries=256, show_spinner=False)
def _chart_specs(scenario_json: str) -> dict[str, dict]:
    return charts.plan_page_specs(scenario_json)


def render(scenario: dict[str, Any], result: Plan | None, error: ScenarioError | None, query: str,
           link_refused: str | None) -> None:
    if error is not None or result is None:
        st.error(f"**{plain(getattr(error, 'field', 'scenario'), 80)}**: {plain(getattr(error, 'reason', error))}")
        st.caption("Fix that input; the rest of the scenario is kept.")
        return
    top = st.columns([3, 1])
    params = f"{result.model.total_params / 1e9:,.1f}B params"
    if result.model.active_params < result.model.total_params:
        params += f", {result.model.active_params / 1e9:,.1f}B active per token"
    top[0].markdown(f"**{plain(result.model.name)}** ({params}) on **{result.tp} x {plain(result.gpu)}** · "
                    f"{scenario['weights']} weights · {scenario['kv_cache']} KV · efficiency {plain(result.efficiency)}"
                    + (f" · calibration {plain(result.calibration)}" if result.calibration else ""))
    if top[1].button("Pin for comparison", key="pin_plan"):
        st.session_state.setdefault("pins", []).append(scenario)
        st.rerun()
    figures.render(result, scenario)
    with st.expander("Share this scenario"):
        if link_refused:
            st.warning(f"This scenario's link {link_refused}: the address bar keeps the last shorter one. "
                       "Download the scenario JSON below to share it.")
        else:
            st.code("?" + query, language=None)
            st.caption("Copy this query string after the app's address (the address bar already holds it).")
    specs = _chart_specs(json.dumps(scenario, sort_keys=True))
    charts.show(specs["memory"])
    c1, c2 = st.columns(2)
    charts.show(specs["roofline"], c1)
    charts.show(specs["intensity"], c2)
    charts.show(specs["itl_throughput"])
    charts.show(specs["cost"])
    with st.expander("Time breakdown (ms)"):
        st.dataframe(pd.DataFrame({"decode step": result.latency.decode_breakdown_ms,
                                   "prefill": result.latency.prefill_breakdown_ms}), width="stretch")
    exports.render(scenario, clean_json(result.model_dump()), None)
