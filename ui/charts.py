"""Altair charts with tooltips: memory bar, roofline, intensity vs batch, ITL and tokens/s vs batch, cost."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from planner import Plan


def show(chart, container=None) -> None:
    """Render an Altair chart (or its Vega-Lite spec) without Streamlit re-validating it against the
    Vega-Lite JSON schema on every rerun; these charts are built by tested code."""
    import streamlit as st

    spec = chart if isinstance(chart, dict) else chart.to_dict(validate=False)
    (container or st).vega_lite_chart(spec, width="stretch")


def plan_page_specs(scenario_json: str) -> dict[str, dict]:
    """The plan page's five chart specs for one scenario (JSON text, so it can key a cache). Building
    Altair charts is most of a rerun's server time; the app caches this per scenario."""
    import json

    from planner import plan as make_plan
    from planner.scenario import parse_scenario, resolve
    from planner.sweep import batch_sweep

    scenario = json.loads(scenario_json)
    p = make_plan(scenario)
    d = resolve(parse_scenario(scenario))
    sweep = pd.DataFrame(batch_sweep(scenario))
    built = {
        "memory": memory_bar(p),
        "roofline": roofline(p, d.gpu.peak_tflops(d.compute), d.gpu.hbm_tb_s),
        "intensity": intensity_vs_batch(sweep, p),
        "itl_throughput": itl_and_throughput(sweep, p),
        "cost": cost_vs_batch(sweep, p),
    }
    return {name: chart.to_dict(validate=False) for name, chart in built.items()}


def memory_bar(p: Plan) -> alt.Chart:
    m = p.memory
    total = m.usable_gb_per_gpu
    kv = min(m.kv_gb_per_gpu_at_batch, max(m.kv_budget_gb_per_gpu, 0.0))
    free = max(total - m.weights_gb_per_gpu - m.reserve_gb - kv, 0.0)
    df = pd.DataFrame({
        "part": ["weights", f"KV at batch {p.latency.batch}", "reserve", "free"],
        "gb": [m.weights_gb_per_gpu, kv, m.reserve_gb, free],
        "order": [0, 1, 2, 3],
    })
    df["gpu"] = "one GPU"
    # a step height: a fixed total height must also hold the title, axis and legend, and squeezed the bar to 1 px
    return alt.Chart(df, height=alt.Step(48), title="Per-GPU memory (GB, within the utilization limit)").mark_bar().encode(
        x=alt.X("gb:Q", title="GB", stack="zero"),
        y=alt.Y("gpu:N", title=None),
        color=alt.Color("part:N", sort=list(df["part"]), scale=alt.Scale(scheme="tableau10")),
        order=alt.Order("order:Q"),
        tooltip=["part", alt.Tooltip("gb:Q", format=",.2f")],
    )


def roofline(p: Plan, peak_tflops: float, hbm_tb_s: float) -> alt.LayerChart:
    ai = np.logspace(-1, 4.5, 120)
    perf = np.minimum(peak_tflops, ai * hbm_tb_s)
    line = pd.DataFrame({"ai": ai, "tflops": perf})
    decode_achieved = p.roofline.decode_flops_per_gpu / (p.latency.itl_ms * 1e-3) / 1e12
    points = pd.DataFrame({
        "kernel": [f"decode (batch {p.latency.batch})", "prefill"],
        "ai": [p.roofline.decode_ai, p.roofline.prefill_ai],
        "tflops": [decode_achieved, p.roofline.prefill_flops_per_gpu / (p.latency.prefill_ms * 1e-3) / 1e12],
    })
    scale_x = alt.Scale(type="log")
    scale_y = alt.Scale(type="log")
    roof = alt.Chart(line).mark_line(color="gray").encode(
        x=alt.X("ai:Q", scale=scale_x, title="arithmetic intensity (FLOP/byte)"),
        y=alt.Y("tflops:Q", scale=scale_y, title="TFLOP/s per GPU"),
        tooltip=[alt.Tooltip("ai:Q", format=",.1f"), alt.Tooltip("tflops:Q", format=",.1f")])
    ridge = alt.Chart(pd.DataFrame({"ai": [p.roofline.ridge_flop_per_byte]})).mark_rule(strokeDash=[4, 4]).encode(
        x="ai:Q", tooltip=[alt.Tooltip("ai:Q", title="ridge", format=",.1f")])
    dots = alt.Chart(points).mark_point(size=120, filled=True).encode(
        x="ai:Q", y="tflops:Q", color="kernel:N",
        tooltip=["kernel", alt.Tooltip("ai:Q", format=",.1f"), alt.Tooltip("tflops:Q", format=",.1f", title="estimated TFLOP/s")])
    return (roof + ridge + dots).properties(height=300, title=f"Roofline ({p.roofline.compute_precision})")


def intensity_vs_batch(sweep: pd.DataFrame, p: Plan) -> alt.LayerChart:
    base = alt.Chart(sweep).encode(x=alt.X("batch:Q", scale=alt.Scale(type="log"), title="batch"))
    line = base.mark_line(point=True).encode(
        y=alt.Y("decode_ai:Q", scale=alt.Scale(type="log"), title="decode FLOP/byte"),
        tooltip=["batch", alt.Tooltip("decode_ai:Q", format=",.1f")])
    ridge = alt.Chart(pd.DataFrame({"ridge": [p.roofline.ridge_flop_per_byte]})).mark_rule(color="red").encode(
        y="ridge:Q", tooltip=[alt.Tooltip("ridge:Q", format=",.1f")])
    layers = [line, ridge]
    if p.roofline.ridge_crossing_batch:
        layers.append(alt.Chart(pd.DataFrame({"batch": [p.roofline.ridge_crossing_batch]})).mark_rule(
            color="red", strokeDash=[4, 4]).encode(x="batch:Q", tooltip=[alt.Tooltip("batch:Q", title="crossing batch")]))
    return alt.layer(*layers).properties(height=260, title="Decode arithmetic intensity vs batch (red: ridge)")


def _max_batch_rule(p: Plan) -> alt.Chart:
    return alt.Chart(pd.DataFrame({"batch": [max(p.memory.max_batch, 1)]})).mark_rule(strokeDash=[4, 4]).encode(
        x="batch:Q", tooltip=[alt.Tooltip("batch:Q", title="max batch")])


def _long(sweep: pd.DataFrame, columns: dict[str, str], label: str = "scenario") -> pd.DataFrame:
    keep = ["batch", *columns] + ([label] if label in sweep else [])
    df = sweep[keep].melt(id_vars=[c for c in ("batch", label) if c in sweep], var_name="series", value_name="value")
    df["series"] = df["series"].map(columns)
    return df


def itl_and_throughput(sweep: pd.DataFrame, p: Plan) -> alt.HConcatChart:
    itl = _long(sweep, {"itl_ms": "estimate", "itl_ms_bound": "roofline bound"})
    tps = _long(sweep, {"output_tokens_per_s": "estimate", "output_tokens_per_s_bound": "roofline bound"})
    x = alt.X("batch:Q", scale=alt.Scale(type="log"))
    c1 = alt.Chart(itl).mark_line(point=True).encode(
        x=x, y=alt.Y("value:Q", title="ITL (ms)"), strokeDash="series:N", color="series:N",
        tooltip=["batch", "series", alt.Tooltip("value:Q", format=",.2f")])
    c2 = alt.Chart(tps).mark_line(point=True).encode(
        x=x, y=alt.Y("value:Q", title="output tokens/s"), strokeDash="series:N", color="series:N",
        tooltip=["batch", "series", alt.Tooltip("value:Q", format=",.0f")])
    return alt.hconcat((c1 + _max_batch_rule(p)).properties(height=260, title="ITL vs batch (dashed: max batch)"),
                       (c2 + _max_batch_rule(p)).properties(height=260, title="Tokens/s vs batch"))


def cost_vs_batch(sweep: pd.DataFrame, p: Plan) -> alt.LayerChart:
    line = alt.Chart(sweep).mark_line(point=True).encode(
        x=alt.X("batch:Q", scale=alt.Scale(type="log")),
        y=alt.Y("usd_per_million_output_tokens:Q", scale=alt.Scale(type="log"), title="$ per M output tokens"),
        tooltip=["batch", alt.Tooltip("usd_per_million_output_tokens:Q", format=",.3f", title="$/M")])
    return (line + _max_batch_rule(p)).properties(height=260, title="Cost per million output tokens vs batch")


def overlay(sweeps: pd.DataFrame, column: str, title: str, log_y: bool = False) -> alt.Chart:
    """One line per pinned scenario (column `scenario`)."""
    return alt.Chart(sweeps).mark_line(point=True).encode(
        x=alt.X("batch:Q", scale=alt.Scale(type="log")),
        y=alt.Y(f"{column}:Q", title=title, scale=alt.Scale(type="log") if log_y else alt.Undefined),
        color=alt.Color("scenario:N"),
        tooltip=["scenario", "batch", alt.Tooltip(f"{column}:Q", format=",.2f")],
    ).properties(height=260, title=title)
