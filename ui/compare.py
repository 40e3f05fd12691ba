"""What-if comparison: pinned scenarios side by side (every headline figure, differences vs the first
pin) and their batch sweeps overlaid. The pins travel in the link's `compare` parameter."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from planner import ScenarioError, plan
from planner.sweep import batch_sweep
from ui import charts
from ui.figures import headline_rows
from ui.text import plain

NUMERIC_KEYS = {
    "Weights per GPU": ("memory", "weights_gb_per_gpu"), "KV budget per GPU": ("memory", "kv_budget_gb_per_gpu"),
    "Max batch": ("memory", "max_batch"), "Decode FLOP/byte": ("roofline", "decode_ai"),
    "Ridge FLOP/byte": ("roofline", "ridge_flop_per_byte"), "TTFT": ("latency", "ttft_ms"), "ITL": ("latency", "itl_ms"),
    "Tokens/s (replica)": ("throughput", "output_tokens_per_s"),
    "Tokens/s per user": ("throughput", "tokens_per_s_per_user"),
    "$ per M output tokens": ("cost", "usd_per_million_output_tokens"),
}


def label(scenario: dict[str, Any]) -> str:
    model = scenario["model"] if isinstance(scenario["model"], str) else scenario["model"].get("name", "custom")
    gpu = scenario["gpu"] if isinstance(scenario["gpu"], str) else scenario["gpu"].get("name", "custom")
    lengths = f"{scenario.get('prompt_len', 1024)}→{scenario.get('output_len', 256)}"
    return (f"{model} · {gpu} · TP{scenario.get('tp', 1)} · {scenario.get('weights', 'bf16')}/"
            f"{scenario.get('kv_cache', 'bf16')} · {lengths}")


def comparison_table(pins: list[dict[str, Any]]) -> pd.DataFrame:
    """Rows: headline figures; columns: one per pin, then the change vs the first pin."""
    plans = [plan(s) for s in pins]
    labels = _unique([label(s) for s in pins])
    table: dict[str, list[str]] = {}
    for lab, p in zip(labels, plans, strict=True):
        table[lab] = [value for _, value, _ in headline_rows(p)]
    first = plans[0].model_dump()
    for lab, p in list(zip(labels, plans, strict=True))[1:]:
        dumped = p.model_dump()
        diffs = []
        for name, _, _ in headline_rows(plans[0]):
            section, key = NUMERIC_KEYS[name]
            a, b = first[section][key], dumped[section][key]
            diffs.append("—" if not a or a != a or b != b else f"{(b / a - 1) * 100:+.1f}%")
        table[f"Δ {lab}"] = diffs
    return pd.DataFrame(table, index=[r[0] for r in headline_rows(plans[0])])


def _unique(labels: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for lab in labels:
        seen[lab] = seen.get(lab, 0) + 1
        out.append(lab if seen[lab] == 1 else f"{lab} ({seen[lab]})")
    return out


def overlaid_sweeps(pins: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each pin's batch sweep, the batches that fit in memory only, one row per (pin, batch)."""
    rows: list[dict[str, Any]] = []
    for lab, s in zip(_unique([label(s) for s in pins]), pins, strict=True):
        sweep = batch_sweep(s)
        for i in range(len(sweep["batch"])):
            if sweep["fits"][i]:
                rows.append({"scenario": lab, "batch": int(sweep["batch"][i]), "itl_ms": float(sweep["itl_ms"][i]),
                             "output_tokens_per_s": float(sweep["output_tokens_per_s"][i]),
                             "usd_per_million_output_tokens": float(sweep["usd_per_million_output_tokens"][i])})
    return rows


def render(current: dict[str, Any] | None) -> None:
    pins: list[dict[str, Any]] = st.session_state.setdefault("pins", [])
    c1, c2, c3 = st.columns([1, 1, 3])
    if c1.button("Pin current scenario", key="pin_compare", disabled=current is None):
        pins.append(current)
        st.rerun()
    if c2.button("Clear pins", key="clear_pins", disabled=not pins):
        pins.clear()
        st.rerun()
    c3.caption("Pin a scenario, change the inputs, pin again: H100 vs H200 vs B200, bf16 vs fp8, TP 4 vs 8. "
               "The link in the address bar carries the pins.")
    if not pins:
        st.info("No pinned scenarios yet.")
        return
    try:
        # st.dataframe shows pin labels (user text) as plain text; st.table would render them as Markdown
        st.dataframe(comparison_table(pins), width="stretch")
        sweeps = overlaid_sweeps(pins)
    except ScenarioError as err:  # a pin that stopped validating (should not happen: pins are checked)
        st.error(f"A pinned scenario is no longer valid: {plain(err.field, 80)}: {plain(err.reason)}")
        return
    charts.show(charts.overlay(sweeps, "itl_ms", "ITL vs batch (up to each pin's max batch)", "ITL (ms)"))
    charts.show(charts.overlay(sweeps, "output_tokens_per_s", "Output tokens/s per replica vs batch",
                               "output tokens/s", fmt=",.0f"))
    charts.show(charts.overlay(sweeps, "usd_per_million_output_tokens", "$ per million output tokens vs batch",
                               "$ per M output tokens", log_y=True, fmt="$,.3f"))
