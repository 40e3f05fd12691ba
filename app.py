"""Ridgeline: LLM serving capacity planner. A thin shell over planner/ and the ui/ modules.

    streamlit run app.py

Only the view the user picked is computed and drawn (st.tabs would run all three on every rerun).
"""

from __future__ import annotations

import os

# One BLAS thread, set before numpy loads (only where the user has not chosen): the app's arrays are small
# and OpenBLAS's thread pool costs ~0.10 s of CPU per process for nothing (issue 32).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import time

import streamlit as st

from gpu_catalog import load_catalog
from ui import compare, inputs, layout, plan_page, power_page, sizing_page, state, widget_state
from ui.text import plain

_started = time.perf_counter()  # imports are cached after the first run

VIEWS = state.VIEWS

st.set_page_config(page_title="Ridgeline — LLM serving capacity planner", page_icon="⛰️", layout="wide")
layout.apply()
state.init_from_link()
widget_state.apply_queued()
inputs.render_sidebar()

st.title("Ridgeline")
st.caption(
    "Per-GPU memory, max batch, roofline, TTFT/ITL, tokens/s and $ per million tokens for serving an LLM."
)
scenario = widget_state.read_scenario()
for field, reason in state.current_link_problems(scenario):
    st.warning(f"Link parameter **{plain(field, 60)}**: {plain(reason)}")

result, error = plan_page.plan_or_error(scenario)
query, link_refused = state.sync_link(scenario if error is None else None)

if st.session_state.get("view") not in VIEWS:
    st.session_state["view"] = VIEWS[0]
view = st.radio("View", VIEWS, key="view", horizontal=True, label_visibility="collapsed")
if view == "Plan":
    plan_page.render(scenario, result, error, query, link_refused)
elif view == "Compare what-ifs":
    compare.render(scenario if error is None else None)
elif view == "Size a fleet":
    sizing_page.render(load_catalog())
else:
    power_page.render(load_catalog(), result if error is None else None)
state.sync_link(scenario if error is None else None)  # again: drawing a view may set its inputs (a default)

# Server-side time of this run, read by tools/bench_app.py and
# benchmarks/bench_load.py (a figure, not an assertion).
st.session_state["_last_run_ms"] = (time.perf_counter() - _started) * 1e3
