"""The plan's commands (launch, benchmark, files to download) and a benchmark result set beside the plan.

Layout only: every command, figure and comparison comes from planner.contract.commands /
planner.contract.bench_compare; the pages place these panels.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import pandas as pd
import streamlit as st

from planner.contract.bench_compare import BenchComparison, compare_bench
from planner.contract.commands import (
    ENGINES,
    command_set,
    expected_sheet,
    k8s_manifest,
    launch_script,
    render,
    shell_command,
)
from planner.core.errors import ScenarioError, loads_json
from planner.engines.base import ENGINE_LABELS
from ui.links import scenario_to_query
from ui.text import plain

MAX_BENCH_BYTES = 2_000_000  # a saved result is a few kB (a --save-detailed one with per-request lists, more)


def _expected_frame(cs) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "figure": f"{f.label} ({f.unit})", "result key": f.result_key, "plan": f.predicted,
                "band": f"{f.band_low:,.2f} .. {f.band_high:,.2f}"
                if f.band_low is not None and f.band_high is not None
                else "",
            }
            for f in cs.expected
        ]
    )


def render_commands_panel(scenario: dict[str, Any], plan_json: dict[str, Any] | None = None,
                          key: str = "cmd") -> None:
    """Launch and benchmark commands per engine, the files to download and the figures to expect."""
    default = scenario.get("engine") if scenario.get("engine") in ENGINES else "vllm"
    engine = st.radio("Engine", ENGINES, index=ENGINES.index(default), format_func=ENGINE_LABELS.get,
                      horizontal=True, key=f"{key}_engine", persist_state="session")  # ui/view_links.py
    try:
        cs = command_set(scenario, engine, plan_json)
    except ScenarioError as err:
        st.error(f"No commands: {plain(err.field, 80)}: {plain(err.reason)}")
        return
    st.caption(f"Launch ({cs.gpus_per_replica} GPU(s) per replica); the server answers GET "
               f"http://127.0.0.1:{cs.launch.port}/health once ready")
    for name, text in cs.launch.files.items():
        st.code(text, language="yaml")
        st.caption(f"save the block above as {plain(name)}")
    st.code(shell_command(cs.launch.argv), language="bash")
    st.caption("Benchmark (vLLM's client, any engine's OpenAI-compatible server)")
    st.code(shell_command(cs.bench), language="bash")
    for note in (*cs.launch.notes, *cs.notes):
        st.caption(f"Note: {plain(note, 600)}")
    st.caption("What the benchmark should print")
    st.dataframe(_expected_frame(cs), hide_index=True, width="stretch",
                 column_config={"plan": st.column_config.NumberColumn(format="%.2f")})
    c1, c2, c3, c4 = st.columns(4)
    c1.download_button(
        "Launch + bench script", launch_script(cs), f"ridgeline_{engine}.sh", "text/x-shellscript",
        key=f"{key}_dl_script",
    )
    c2.download_button(
        "Kubernetes manifest", k8s_manifest(cs), f"ridgeline_{engine}.yaml", "application/yaml",
        key=f"{key}_dl_k8s",
    )
    c3.download_button("Expected figures", expected_sheet(cs), "ridgeline_expected.txt", "text/plain",
                       key=f"{key}_dl_expected")
    c4.download_button(
        "Commands JSON", render(cs, "json"), f"ridgeline_{engine}_commands.json", "application/json",
        key=f"{key}_dl_json",
    )


def render_fleet_commands_panel(option: dict[str, Any], request: dict[str, Any],
                                key: str = "fleet_cmd") -> None:
    """A disaggregated option's launch set: its prefill and decode workers, the router between them and the
    benchmark against the router at the fleet's rate (planner.contract.disaggregated_commands)."""
    from planner.contract.disaggregated_commands import (
        ROUTER_HEALTH_PATH,
        ROUTER_PORT,
        disaggregated_command_set,
        disaggregated_commands_text,
        disaggregated_expected_sheet,
        render_disaggregated,
    )

    try:
        c = disaggregated_command_set(option, request)
    except ScenarioError as err:
        st.error(f"No commands: {plain(err.field, 80)}: {plain(err.reason)}")
        return
    for pool in (c.prefill, c.decode):
        st.caption(f"{pool.role.capitalize()} workers: the same command on each of {pool.workers:,} hosts "
                   f"({pool.gpus_per_worker} GPU(s) each), THIS_HOST_IP set to that host's address")
        st.code(shell_command((*(f"{k}={v}" for k, v in pool.env), *pool.launch.argv)), language="bash")
    st.caption(f"Router (vLLM's proxy for disaggregated prefill), once every worker answers GET /health; it "
               f"answers GET http://127.0.0.1:{ROUTER_PORT}{ROUTER_HEALTH_PATH}")
    st.code(shell_command(c.router), language="bash")
    st.caption(f"Benchmark against the router, at the fleet's {c.request_rate:,.4g} requests/s")
    st.code(shell_command(c.bench), language="bash")
    for note in (*c.prefill.launch.notes, *c.notes):
        st.caption(f"Note: {plain(note, 600)}")
    st.caption("What the benchmark should print")
    st.dataframe(_expected_frame(c), hide_index=True, width="stretch",
                 column_config={"plan": st.column_config.NumberColumn(format="%.2f")})
    c1, c2, c3 = st.columns(3)
    c1.download_button("Fleet commands", disaggregated_commands_text(c), "ridgeline_fleet_vllm.txt",
                       "text/plain", key=f"{key}_dl_text")
    c2.download_button("Expected figures", disaggregated_expected_sheet(c), "ridgeline_fleet_expected.txt",
                       "text/plain", key=f"{key}_dl_expected")
    c3.download_button("Commands JSON", render_disaggregated(c, "json"), "ridgeline_fleet_commands.json",
                       "application/json", key=f"{key}_dl_json")


def _comparison_frame(c: BenchComparison) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "figure": f"{r.label} ({r.unit})", "predicted": r.predicted, "measured": r.measured,
                "error %": r.error_pct, "calibrated": r.calibrated,
                "calibrated error %": r.calibrated_error_pct,
            }
            for r in c.rows
        ]
    )


def calibrated_link(c: BenchComparison) -> str:
    """The calibrated scenario as the app's share-link query (ui/links.py's encoder)."""
    return "?" + urlencode(scenario_to_query(c.calibrated_scenario))


def render_bench_comparison(
    scenario: dict[str, Any], raw: bytes, name: str = "bench", key: str = "bench"
) -> None:
    """A saved `vllm bench serve` result beside the plan, the fitted calibration and the way to re-plan."""
    if len(raw) > MAX_BENCH_BYTES:
        st.error(f"Benchmark not read: larger than {MAX_BENCH_BYTES:,} bytes")
        return
    try:
        bench = loads_json(raw, "bench", max_bytes=MAX_BENCH_BYTES)
        result = compare_bench(bench, {k: v for k, v in scenario.items() if k != "calibration"},
                               name=f"vllm-bench:{name[:60]}")
    except ScenarioError as err:
        st.error(f"Benchmark not read: {plain(err.field, 80)}: {plain(err.reason)}")
        return
    point = result.point_scenario
    rate = (point.get("load") or {}).get("request_rate")
    st.caption(f"Predicted at the run's operating point: {point['prompt_len']} in / {point['output_len']} out"
               + (f", open loop at {rate:,.4g} requests/s" if rate else
                  f", concurrency {point['batch']}" if point.get("batch") else ""))
    st.dataframe(_comparison_frame(result), hide_index=True, width="stretch",
                 column_config={col: st.column_config.NumberColumn(format="%.2f")
                                for col in ("predicted", "measured", "calibrated")}
                 | {col: st.column_config.NumberColumn(format="%+.1f%%")
                    for col in ("error %", "calibrated error %")})
    st.caption(
        f"Fitted calibration {plain(result.calibration.name)}: {plain(result.calibration.source or '', 600)}"
    )
    c1, c2 = st.columns(2)
    c1.link_button("Open the calibrated plan (new link)", calibrated_link(result))
    if c2.button("Re-plan with this calibration", key=f"{key}_apply"):
        st.session_state["calibration"] = result.calibration.model_dump(exclude_none=True)
        st.rerun()


def render_bench_upload(scenario: dict[str, Any], key: str = "bench") -> None:
    """Upload a `vllm bench serve --save-result` JSON of this scenario and compare it with the plan."""
    upload = st.file_uploader("`vllm bench serve --save-result` JSON of this plan", type=["json"],
                              key=f"{key}_upload", help=f"at most {MAX_BENCH_BYTES:,} bytes")
    if upload is None:
        return
    if upload.size > MAX_BENCH_BYTES:  # checked before the file is read
        st.error(f"Benchmark not read: larger than {MAX_BENCH_BYTES:,} bytes")
        return
    render_bench_comparison(scenario, upload.getvalue(), upload.name, key)
