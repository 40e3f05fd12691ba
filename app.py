"""Ridgeline: LLM serving capacity planner. A thin shell over planner/ and the ui/ modules.

    streamlit run app.py
"""

from __future__ import annotations

import json
import time

import pandas as pd
import streamlit as st

from gpu_catalog import load_catalog
from planner import ScenarioError, plan
from planner.planning import clean_json
from planner.sweep import batch_sweep
from ui import charts, compare, exports, figures, inputs, sizing_page, state
from ui.text import plain

_started = time.perf_counter()  # imports are cached after the first run


@st.cache_data(max_entries=64, show_spinner=False)
def _chart_specs(scenario_json: str) -> dict[str, dict]:
    return charts.plan_page_specs(scenario_json)


def _plan_json(result):
    return clean_json(result.model_dump())


st.set_page_config(page_title="Ridgeline — LLM serving capacity planner", page_icon="⛰️", layout="wide")
state.init_from_link()
inputs.apply_queued()
inputs.render_sidebar()

st.title("Ridgeline")
st.caption("Per-GPU memory, max batch, roofline, TTFT/ITL, tokens/s and $ per million tokens for serving an LLM.")
for field, reason in st.session_state.get("link_problems", []):
    st.warning(f"Link parameter `{plain(field, 60)}`: {plain(reason)}")

scenario = inputs.read_scenario()
result, error = None, None
try:
    result = plan(scenario)
except ScenarioError as err:
    error = err
query = state.sync_link(scenario if error is None else None)

tab_plan, tab_compare, tab_size = st.tabs(["Plan", "Compare what-ifs", "Size a fleet"])
with tab_plan:
    if error is not None:
        st.error(f"**{plain(error.field, 80)}**: {plain(error.reason)}")
        st.caption("Fix that input; the rest of the scenario is kept.")
    else:
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
            st.code("?" + query, language=None)
            st.caption("Copy this query string after the app's address (the address bar already holds it).")
        sweep = pd.DataFrame(batch_sweep(scenario))
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
        exports.render(scenario, _plan_json(result), sweep)
with tab_compare:
    compare.render(scenario if error is None else None)
with tab_size:
    sizing_page.render(load_catalog())

# Server-side time of this run, read by tools/bench_app.py (a figure, not an assertion).
st.session_state["_last_run_ms"] = (time.perf_counter() - _started) * 1e3
