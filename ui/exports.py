"""Exports and imports: scenario JSON (down and up), plan JSON, batch sweep CSV, calibration profiles."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import streamlit as st

from planner import ScenarioError, parse_scenario, plan_dict
from planner.core.errors import from_validation_error, loads_json
from planner.physics.calibration import CalibrationProfile
from planner.scenario.scenario import resolve
from planner.serving.sweep import batch_sweep
from ui import widget_state
from ui.text import plain

MAX_UPLOAD_BYTES = 1_000_000


def _read_upload(upload, field: str = "file") -> Any:
    """The uploaded JSON through the one safe reader (size before parsing, depth, digits)."""
    if upload.size > MAX_UPLOAD_BYTES:
        raise ScenarioError(field, f"is {upload.size:,} bytes, over the limit of {MAX_UPLOAD_BYTES:,}")
    return loads_json(upload.getvalue(), field, max_bytes=MAX_UPLOAD_BYTES)


def apply_scenario_upload(upload) -> str | None:
    """Validate an uploaded scenario and load it into the inputs; the error text, or None."""
    try:
        data = _read_upload(upload, "scenario")
        resolve(parse_scenario(data))
    except ScenarioError as err:
        return f"{err.field}: {err.reason}"
    widget_state.queue_scenario(data)
    return None


def apply_calibration_upload(upload) -> str | None:
    from pydantic import ValidationError

    try:
        data = _read_upload(upload, "calibration")
        profile = CalibrationProfile.model_validate(data)
    except ScenarioError as err:
        return f"{err.field}: {err.reason}"
    except ValidationError as err:
        e = from_validation_error(err, "calibration")
        return f"{e.field}: {e.reason}"
    st.session_state["calibration"] = profile.model_dump(exclude_none=True)
    return None


def apply_bench_upload(upload, scenario: dict[str, Any]) -> str | None:
    """Fit a calibration profile from a `vllm bench serve --save-result` file and the current scenario."""
    from planner.serving.calibration_fit import profile_from_vllm_bench

    try:
        bench = _read_upload(upload, "bench")
        profile = profile_from_vllm_bench(bench, {k: v for k, v in scenario.items() if k != "calibration"},
                                          name=f"vllm-bench:{upload.name[:60]}")
    except ScenarioError as err:
        return f"{err.field}: {err.reason}"
    st.session_state["calibration"] = profile.model_dump(exclude_none=True)
    return None


def _once(upload, key: str) -> bool:
    """True the first time this uploaded file is seen (uploads persist across reruns)."""
    if upload is None:
        return False
    marker = f"{upload.name}:{upload.size}:{getattr(upload, 'file_id', '')}"
    if st.session_state.get(key) == marker:
        return False
    st.session_state[key] = marker
    return True


def render(scenario: dict[str, Any] | None, plan_json: dict[str, Any] | None = None,
           sweep: pd.DataFrame | None = None) -> None:
    """Downloads reuse the page's plan and sweep when given (no second computation)."""
    c1, c2, c3 = st.columns(3)
    if scenario is not None:
        # the files are made when a button is pressed (deferred), not on every rerun
        frozen = json.loads(json.dumps(scenario))
        c1.download_button("Scenario JSON", lambda: json.dumps(frozen, indent=2), "scenario.json",
                           "application/json", key="dl_scenario", on_click="ignore")
        c2.download_button(
            "Plan JSON", lambda: json.dumps(plan_json or plan_dict(frozen), indent=2), "plan.json",
            "application/json", key="dl_plan", on_click="ignore",
        )
        c3.download_button(
            "Batch sweep CSV",
            lambda: (sweep if sweep is not None else pd.DataFrame(batch_sweep(frozen))).to_csv(index=False),
            "batch_sweep.csv", "text/csv", key="dl_sweep", on_click="ignore",
        )
    u1, u2 = st.columns(2)
    up = u1.file_uploader("Load a scenario JSON", type=["json"], key="up_scenario")
    if _once(up, "up_scenario_seen"):
        error = apply_scenario_upload(up)
        st.session_state["upload_error"] = error
        if error is None:
            st.rerun()
    if st.session_state.get("upload_error"):
        u1.error(f"Scenario not loaded: {plain(st.session_state['upload_error'])}")
    cal = u2.file_uploader("Load a calibration profile JSON", type=["json"], key="up_calibration",
                           help="from tools/fit_calibration.py or `python -m planner calibrate`")
    if _once(cal, "up_calibration_seen"):
        st.session_state["calibration_error"] = apply_calibration_upload(cal)
        if st.session_state["calibration_error"] is None:
            st.rerun()
    if scenario is not None:
        bench = u2.file_uploader("…or fit one from a `vllm bench serve --save-result` JSON of this scenario",
                                 type=["json"], key="up_bench")
        if _once(bench, "up_bench_seen"):
            st.session_state["calibration_error"] = apply_bench_upload(bench, scenario)
            if st.session_state["calibration_error"] is None:
                st.rerun()
    # after both uploaders: an error of either shows on the run that read the file
    if st.session_state.get("calibration_error"):
        u2.error(f"Calibration not loaded: {plain(st.session_state['calibration_error'])}")
    if st.session_state.get("calibration"):
        u2.caption(f"Calibration in use: {plain(st.session_state['calibration'].get('name', ''))}")
        if u2.button("Drop calibration", key="drop_calibration"):
            st.session_state["calibration"] = None
            st.rerun()
