"""The sizing page's options: the ranked table (columns every option shares said once), the cost vs latency
scatter with its Pareto frontier, and the order they are shown in."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pandas as pd
import streamlit as st

from ui import charts
from ui.text import plain

# option key -> (header, format); only the keys a result carries, and only those that differ from row to row,
# are shown, in this order. The option's `itl_ms` and `itl_ms_under_load` are one figure (ITL at the
# objective's percentile at the rate each replica runs), so the table shows it once.
COLUMNS: dict[str, tuple[str, str | None]] = {  # the fleet's GPUs and $ early: on screen at 1,024 px
    "mode": ("mode", None), "gpu_name": ("GPU", None), "gpus_total": ("GPUs", "%d"),
    "usd_per_hour": ("fleet $/hour", "$%.2f"),
    "usd_per_million_output_tokens": ("$/M output tokens", "$%.3f"),
    "utilization_pct": ("utilization", "%.0f%%"),  # of capacity: a short header, on screen at 1,024 px
    # a disaggregated fleet's pools (its utilization above is the busier pool's)
    "prefill_utilization_pct": ("prefill pool utilization", "%.0f%%"),
    "decode_utilization_pct": ("decode pool utilization", "%.0f%%"),
    "validated": ("validated GPU", None), "tp": ("TP", "%d"), "weights": ("weights", None),
    "kv_cache": ("KV cache", None), "batch": ("batch", "%d"), "replicas": ("replicas", "%d"),
    "ttft_ms": ("TTFT p{pct} (ms)", "%.0f"),
    "ttft_ms_simulated_high": ("TTFT p{pct} simulated top (ms)", "%.0f"),
    "itl_ms": ("ITL p{pct} (ms)", "%.1f"), "itl_ms_simulated_high": ("ITL p{pct} simulated top (ms)", "%.1f"),
    "tpot_ms": ("mean TPOT (ms)", "%.1f"), "prefill_workers": ("prefill workers", "%d"),
    "decode_workers": ("decode workers", "%d"),
    "output_tokens_per_s": ("output tokens/s per replica", "%.0f"), "pareto": ("Pareto", None),
}


ALWAYS_SHOWN = (
    "gpu_name", "gpus_total", "utilization_pct", "ttft_ms", "ttft_ms_simulated_high", "itl_ms",
    "itl_ms_simulated_high", "usd_per_hour", "usd_per_million_output_tokens",
)


_PY_FORMATS = {
    "%d": "{:,.0f}", "%.0f": "{:,.0f}", "%.1f": "{:,.1f}", "$%.2f": "${:,.2f}", "$%.3f": "${:,.3f}",
    "%.0f%%": "{:,.0f}%",
}


def _cell(value: Any, fmt: str | None) -> str:
    """A cell of a column that is not numeric throughout: formatted text, a dash where the option has none."""
    if value is None or (isinstance(value, float) and value != value):
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if fmt is not None and isinstance(value, (int, float)):
        return _PY_FORMATS[fmt].format(value)
    return str(value)


def options_table(options: list[dict[str, Any]], catalog) -> tuple[pd.DataFrame, dict[str, Any], list[str]]:
    """Human headers, GPU names, 1-based option numbers; only the columns that differ between options, and a
    list of what every option shares ("TP 4", "weights fp8"); values rounded by the column formats."""
    pct = options[0].get("percentile", 90) if options else 90
    rows = []
    for o in options:
        row = {k: v for k, v in o.items() if k not in ("scenario", "prefill", "decode")}
        row["gpu_name"] = gpu_label(o, catalog)
        if o.get("utilization") is not None:
            row["utilization_pct"] = 100.0 * float(o["utilization"])
        if o.get("mode") == "disaggregated":  # its layout lives in the two pools
            row.update(tp=None, weights=f"{o['decode']['weights']}", kv_cache=f"{o['decode']['kv_cache']}",
                       batch=o["decode"].get("batch"), replicas=None, output_tokens_per_s=None)
            for pool in ("prefill", "decode"):
                u = o[pool].get("utilization")
                row[f"{pool}_utilization_pct"] = None if u is None else 100.0 * float(u)
        rows.append(row)
    frame = pd.DataFrame(rows)
    keys = [k for k in COLUMNS if k in frame]
    shared: list[str] = []
    shown: list[str] = []
    for k in keys:
        header = COLUMNS[k][0].format(pct=pct)
        values = [_cell(v, COLUMNS[k][1]) for v in frame[k]]
        if len(options) > 1 and len(set(values)) == 1 and k not in ALWAYS_SHOWN:
            if values[0] != "—" and k != "validated":  # validation gets its own message
                shared.append(f"{header} {values[0]}")
            continue
        shown.append(k)
    out = pd.DataFrame(index=pd.RangeIndex(1, len(frame) + 1, name="option"))
    config: dict[str, Any] = {}
    for k in shown:
        header, fmt = COLUMNS[k][0].format(pct=pct), COLUMNS[k][1]
        col = frame[k]
        numeric = (
            fmt is not None
            and col.map(lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v == v).all()
        )
        if numeric:
            out[header] = col.to_numpy()
            config[header] = st.column_config.NumberColumn(format=fmt)
        else:  # a column some options leave empty (a disaggregated fleet has no TP of its own): text, "—"
            out[header] = [_cell(v, fmt) for v in col]
    return out, config, shared


def gpu_label(o: dict[str, Any], catalog) -> str:
    def name(gpu: Any) -> str:
        return catalog[gpu].name if isinstance(gpu, str) and gpu in catalog else str(gpu)

    if o.get("mode") == "disaggregated":
        pre, dec = o["prefill"], o["decode"]
        return f"prefill {name(pre['gpu'])} TP{pre['tp']} → decode {name(dec['gpu'])} TP{dec['tp']}"
    return name(o.get("gpu"))


def _options_layer(rows: list[dict[str, Any]], costs: list[float], pct: int, y_top: float) -> dict[str, Any]:
    """The options as points: $/hour (log) against ITL, red on the Pareto frontier, shaped by mode."""
    return {
        "data": {"values": rows}, "mark": {"type": "circle", "size": 70, "opacity": 0.85},
        "encoding": {
            "x": charts._log_axis("usd_per_hour", "fleet $ per hour", costs, fmt="$,~s"),
            "y": {"field": "itl_ms", "type": "quantitative", "title": f"ITL p{pct} (ms)",
                  "scale": {"domain": [0, y_top], "nice": False}},
            "color": {"field": "frontier", "type": "nominal", "title": None,
                      "scale": {"domain": ["Pareto frontier", "dominated"], "range": ["#d62728", "#9ecae1"]},
                      "legend": {"orient": "bottom"}},
            "shape": {"field": "mode", "type": "nominal", "title": None, "legend": {"orient": "bottom"}},
            "tooltip": [
                {"field": "option"}, {"field": "mode"}, {"field": "gpu"}, {"field": "tp"},
                {"field": "precision"}, {"field": "replicas"},
                {"field": "usd_per_hour", "format": "$,.2f", "title": "$/hour"},
                {"field": "itl_ms", "format": ",.1f", "title": f"ITL p{pct} (ms)"},
            ],
        },
    }


def scatter(options: list[dict[str, Any]], itl_objective_ms: float, catalog) -> dict[str, Any]:
    """Fleet $/hour against the ITL the objective is checked against (at its percentile, under load)."""
    pct = options[0].get("percentile", 90) if options else 90
    rows = [
        {
            "option": i + 1, "gpu": gpu_label(o, catalog), "mode": o.get("mode") or "aggregated",
            "tp": o.get("tp"),
            "precision": f"{o.get('weights', o.get('decode', {}).get('weights'))}/"
            f"{o.get('kv_cache', o.get('decode', {}).get('kv_cache'))}", "replicas": o.get("replicas"),
            "usd_per_hour": round(float(o["usd_per_hour"]), 4), "itl_ms": round(float(o["itl_ms"]), 3),
            "frontier": "Pareto frontier" if o.get("pareto") else "dominated",
        }
        for i, o in enumerate(options)
    ]
    itls = [r["itl_ms"] for r in rows] + [itl_objective_ms]
    costs = [r["usd_per_hour"] for r in rows]
    spec = charts._base(f"Fleet cost vs ITL p{pct} at the traffic each option serves", 320)
    y_top = max(itls) * 1.08
    objective = [{"itl": itl_objective_ms, "label": f"ITL p{pct} objective {itl_objective_ms:g} ms"}]
    spec["layer"] = [
        _options_layer(rows, costs, pct, y_top),
        {"data": {"values": objective}, "mark": {"type": "rule", "color": "#d62728", "strokeDash": [6, 3]},
         "encoding": {"y": {"field": "itl", "type": "quantitative"}, "tooltip": [{"field": "label"}]}},
        {"data": {"values": objective},
         "mark": {"type": "text", "align": "left", "x": 4, "dy": -7, "color": "#d62728"},
         "encoding": {"y": {"field": "itl", "type": "quantitative"}, "text": {"field": "label"}}},
    ]
    return spec


def ordered_options(options: list[dict[str, Any]], validated_first: bool) -> list[dict[str, Any]]:
    """The planner's ranking (cheapest first); with `validated_first`, options on validated GPUs come first,
    each group keeping that ranking."""
    return sorted(options, key=lambda o: not o.get("validated")) if validated_first else list(options)


def no_option_line(infeasible: list[dict[str, Any]]) -> str:
    """Why no option: the reason most candidates give, with how many (a context beyond the model's positions
    is every GPU's reason: it reads first, not behind a list of hundreds)."""
    counts = Counter(str(i.get("reason")) for i in infeasible)
    if not counts:
        return "No configuration meets the objectives at this traffic."
    reason, n = counts.most_common(1)[0]
    share = ("Every candidate's reason" if n == len(infeasible)
             else f"The most common reason ({n:,} of {len(infeasible):,} candidates)")
    return (f"No configuration meets the objectives at this traffic. {share}: {plain(reason)} (all reasons "
            "by candidate are below).")
