"""What-if comparison: pinned scenarios side by side (every headline figure, differences vs the first
pin) and their batch sweeps overlaid. The pins travel in the link's `compare` parameter."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import streamlit as st

from planner import ScenarioError, plan
from planner.contract.equal_service import (
    COMMON_RATE_FRACTION,
    DEFAULT_TRAFFIC_REQUESTS_PER_S,
    at_rate,
    common_rate,
    compare_at_equal_service,
)
from planner.scenario.scenario import ServiceObjective
from planner.serving.operating_point import DEFAULT_OBJECTIVE, judge
from planner.serving.sweep import batch_sweep
from ui import charts
from ui.figures import fmt_time, gib, objective_text
from ui.text import plain


def _ms(x: float | None) -> str:
    return "n/a" if x is None else fmt_time(x)


def _num(x: float | None, fmt: str) -> str:
    return "n/a" if x is None or x != x else format(x, fmt)


# (row, value getter, display) — one fixed list, so every pin has every row ("n/a" where a figure does
# not exist: an unstable replica has no percentiles, a deployment that does not fit no latency)
ROWS: list[tuple[str, Any, Any]] = [
    ("Request rate (req/s per replica)", lambda p: p.serving.request_rate, lambda v: _num(v, ",.2f")),
    ("Capacity (req/s per replica)", lambda p: p.serving.max_request_rate, lambda v: _num(v, ",.2f")),
    ("TTFT p50", lambda p: p.serving.ttft_ms.p50, _ms), ("TTFT p99", lambda p: p.serving.ttft_ms.p99, _ms),
    ("ITL p50", lambda p: p.serving.itl_ms.p50, _ms), ("ITL p99", lambda p: p.serving.itl_ms.p99, _ms),
    ("E2E p99", lambda p: p.serving.e2e_ms.p99, _ms),
    ("Output tokens/s per GPU", lambda p: p.serving.output_tokens_per_s_per_gpu, lambda v: _num(v, ",.0f")),
    (
        "$ per M output tokens", lambda p: p.cost.usd_per_million_output_tokens,
        lambda v: "n/a" if v is None else f"${v:,.3f}",
    ),
    ("Weights per GPU", lambda p: p.memory.weights_gb_per_gpu, gib),
    ("KV budget per GPU", lambda p: p.memory.kv_budget_gb_per_gpu, gib),
    ("Max batch", lambda p: p.memory.max_batch, lambda v: f"{v:,}"),
    ("ITL, decode only at the max batch", lambda p: p.latency.itl_ms if p.memory.fits else None, _ms),
    (
        "$ per M, decode-only bound", lambda p: p.cost.usd_per_million_output_tokens_bound,
        lambda v: "n/a" if v is None else f"${v:,.3f}",
    ),
]
CAPACITY_PROBE_RATE = 1e-3  # req/s: a replica's capacity does not depend on the rate it is asked at
MODES = (
    "At equal service: each pin at its goodput, and the fleet for a traffic target", "At one request rate",
)


def _parts(scenario: dict[str, Any]) -> list[str]:
    model = (
        scenario["model"] if isinstance(scenario["model"], str) else scenario["model"].get("name", "custom")
    )
    gpu = scenario["gpu"] if isinstance(scenario["gpu"], str) else scenario["gpu"].get("name", "custom")
    return [str(model), str(gpu), f"TP{scenario.get('tp', 1)}",
            f"{scenario.get('weights', 'bf16')}/{scenario.get('kv_cache', 'bf16')}",
            f"{scenario.get('prompt_len', 1024)}→{scenario.get('output_len', 256)}"]


def short_labels(pins: list[dict[str, Any]]) -> tuple[list[str], str]:
    """Each pin by what differs between the pins (a narrow table), and what they share."""
    parts = [_parts(s) for s in pins]
    differ = [i for i in range(len(parts[0])) if len({p[i] for p in parts}) > 1] or [1]
    shared = " · ".join(v for i, v in enumerate(parts[0]) if i not in differ)
    return _unique([" · ".join(p[i] for i in differ) for p in parts]), shared


def label(scenario: dict[str, Any]) -> str:
    model = (
        scenario["model"] if isinstance(scenario["model"], str) else scenario["model"].get("name", "custom")
    )
    gpu = scenario["gpu"] if isinstance(scenario["gpu"], str) else scenario["gpu"].get("name", "custom")
    lengths = f"{scenario.get('prompt_len', 1024)}→{scenario.get('output_len', 256)}"
    return (f"{model} · {gpu} · TP{scenario.get('tp', 1)} · {scenario.get('weights', 'bf16')}/"
            f"{scenario.get('kv_cache', 'bf16')} · {lengths}")


def _change(a: Any, b: Any) -> str:
    return "—" if a is None or b is None or not a or a != a or b != b else f"{(b / a - 1) * 100:+.1f}%"


def comparison_table(pins: list[dict[str, Any]], rate: float | None) -> pd.DataFrame:
    """Rows: figures at one common operating point (`rate` req/s per replica, stated in the first row);
    columns: one per pin, then the change vs the first pin (short headers: Δ 2, Δ 3 for pins 2, 3)."""
    plans = [plan(at_rate(s, rate) if rate else s) for s in pins]
    labels = _unique([label(s) for s in pins])
    table: dict[str, list[str]] = {}
    values = [[get(p) if p.memory.fits or name.startswith(("Weights", "KV", "Max")) else None
               for name, get, _ in ROWS] for p in plans]
    for i, (lab, row) in enumerate(zip(labels, values, strict=True)):
        table[f"{i + 1}. {lab}"] = [show(v) for (_, _, show), v in zip(ROWS, row, strict=True)]
    for i, row in list(enumerate(values))[1:]:
        table[f"Δ {i + 1} vs 1"] = [_change(a, b) for a, b in zip(values[0], row, strict=True)]
    return pd.DataFrame(table, index=[name for name, _, _ in ROWS])


def equal_service_table(pins: list[dict[str, Any]], slo: ServiceObjective, traffic: float) -> pd.DataFrame:
    """One row per pin, cheapest first: its goodput under the objective and the latency there, and the fleet
    the traffic needs (planner.contract.equal_service: the sizing search's own function), with the change in
    $/M against the cheapest."""
    rows = compare_at_equal_service(pins, slo, traffic)
    labels, _ = short_labels(pins)
    pct = f"p{slo.percentile}"
    best = min((r.fleet.usd_per_million_output_tokens for r in rows
                if r.fleet.usd_per_million_output_tokens is not None), default=None)
    records = []
    for lab, r in zip(labels, rows, strict=True):
        sv = r.plan.serving if r.plan is not None and r.plan.memory.fits else None
        j = judge(sv.ttft_ms, sv.itl_ms, slo) if sv is not None else None
        f = r.fleet
        records.append({  # the fleet and its $ first: they stay on screen at 1,024 px
            "rank": str(r.rank) if r.rank is not None else "—", "pin": lab,  # one type: Arrow refuses a mix
            "GPUs": f"{f.replicas:,}×{f.gpus // f.replicas:,}" if f.replicas and f.gpus else "—",
            "$/h": _num(f.usd_per_hour, ",.0f"), "$/M": _usd(f.usd_per_million_output_tokens),
            "Δ $/M": _change(best, f.usd_per_million_output_tokens) if best is not None else "—",
            "$/M @goodput": _usd(r.plan.cost.usd_per_million_output_tokens if sv and r.plan else None),
            "goodput req/s": _num(sv.request_rate if sv else None, ",.2f"),
            "tok/s/GPU": _num(sv.output_tokens_per_s_per_gpu if sv else None, ",.0f"),
            f"TTFT {pct}": _ms(j.ttft_ms if j else None), f"ITL {pct}": _ms(j.itl_ms if j else None),
            "TPOT": _ms(sv.tpot_ms.mean if sv else None),
            "_order": r.rank if r.rank is not None else len(rows) + 1,
        })
    frame = pd.DataFrame(records).sort_values("_order", kind="stable").drop(columns="_order")
    return frame.set_index("rank")


def _usd(x: float | None) -> str:
    return "n/a" if x is None or x != x else f"${x:,.3f}"


def _unique(labels: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for lab in labels:
        seen[lab] = seen.get(lab, 0) + 1
        out.append(lab if seen[lab] == 1 else f"{lab} ({seen[lab]})")
    return out


def overlaid_sweeps(pins: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each pin's batch sweep, the batches that fit in memory only, one row per (pin, batch). A pin with no
    price (a custom GPU without usd_per_hour) has no $ figure: its rows carry no
    `usd_per_million_output_tokens` (issue 32: a NaN there broke every chart's JSON in the browser)."""
    rows: list[dict[str, Any]] = []
    for lab, s in zip(_unique([label(s) for s in pins]), pins, strict=True):
        sweep = batch_sweep(s)
        for i in range(len(sweep["batch"])):
            if sweep["fits"][i]:
                row = {
                    "scenario": lab, "batch": int(sweep["batch"][i]), "itl_ms": float(sweep["itl_ms"][i]),
                    "output_tokens_per_s": float(sweep["output_tokens_per_s"][i]),
                }
                usd = float(sweep["usd_per_million_output_tokens"][i])
                if math.isfinite(usd):
                    row["usd_per_million_output_tokens"] = usd
                rows.append(row)
    return rows


def _cost_chart(sweeps: list[dict[str, Any]]) -> None:
    """The $ chart over the priced pins only, with a note naming the pins left out."""
    priced = [r for r in sweeps if "usd_per_million_output_tokens" in r]
    unpriced = sorted({r["scenario"] for r in sweeps} - {r["scenario"] for r in priced})
    if unpriced:
        names = ", ".join(plain(n, 80) for n in unpriced[:6]) + (" …" if len(unpriced) > 6 else "")
        st.caption(f"Left out of the $ chart, no price (give the GPU a $/hour): {names}.")
    if priced:
        charts.show(
            charts.overlay(
                priced, "usd_per_million_output_tokens", "$ per million output tokens vs batch, decode only",
                "$ per M output tokens", log_y=True, fmt="$,.3f",
            )
        )


def _objective(current: dict[str, Any] | None) -> ServiceObjective:
    slo = (current or {}).get("load", {}).get("slo") if current else None
    return ServiceObjective.model_validate(slo) if slo else DEFAULT_OBJECTIVE


def _equal_service(pins: list[dict[str, Any]], current: dict[str, Any] | None) -> bool:
    """Every pin at its own goodput under one objective, and the fleet each needs for the traffic target;
    False where a pin no longer validates."""
    slo = _objective(current)
    traffic = float(st.session_state.get("traffic_rps", DEFAULT_TRAFFIC_REQUESTS_PER_S))
    _, shared = short_labels(pins)
    st.caption(
        f"Every pin ({plain(shared, 200) if shared else 'as labelled'}) at its own goodput under one "
        f"objective ({objective_text(slo)}: the current scenario's, else the default), and the fleet each "
        f"needs for **{traffic:,.4g} req/s** (the traffic target in the sidebar), sized as the sizing page "
        "sizes one configuration: GPUs = replicas × GPUs per replica, $/h and $/M for that traffic, Δ $/M "
        "against the cheapest. A fleet rounds up to whole replicas, so at small traffic the ranking can "
        "differ from $/M at goodput."
    )
    try:
        table = equal_service_table(pins, slo, traffic)
        ranked = [f"{rank}. {plain(row['pin'], 120)} {row['$/M']}/M"
                  for rank, row in table.iterrows() if rank != "—"]
        st.markdown("**Cheapest at equal service:** " + (" · ".join(ranked) if ranked else
                                                         "no pin meets the objective"))
        st.dataframe(table, width="stretch")
    except ScenarioError as err:  # a pin that stopped validating (should not happen: pins are checked)
        st.error(f"A pinned scenario is no longer valid: {plain(err.field, 80)}: {plain(err.reason)}")
        return False
    return True


def _same_rate(pins: list[dict[str, Any]]) -> bool:
    """Every pin at one request rate per replica (by default a share of the lowest capacity); False where a
    pin no longer validates."""
    try:
        # capacities as the table plans the pins, at a request rate: there a pin's `batch` caps the running
        # sequences (with no load it is the closed loop's client count, and capacity is at the max batch)
        base = [plan(at_rate(s, CAPACITY_PROBE_RATE)) for s in pins]
    except ScenarioError as err:
        st.error(f"A pinned scenario is no longer valid: {plain(err.field, 80)}: {plain(err.reason)}")
        return False
    default = common_rate([p.serving.max_request_rate for p in base if p.memory.fits])
    if default is not None:
        ss = st.session_state
        if "cmp_rate" not in ss or ss.get("cmp_pins_seen") != len(pins):
            ss["cmp_rate"] = round(default, 3)
            ss["cmp_pins_seen"] = len(pins)
        rate = st.number_input(
            "Compare every pin at this request rate (req/s per replica)", 0.001, 1e6, key="cmp_rate",
            format="%.3f", help=f"default: {COMMON_RATE_FRACTION:.0%} of the lowest capacity among the pins",
            persist_state="session",  # kept while another view is shown, and so in that view's link
        )
        st.caption(
            f"Every column below is one replica at **{rate:,.3f} req/s**, the same load for all pins "
            f"(the lowest capacity among them is {default / COMMON_RATE_FRACTION:,.2f} req/s). The same "
            "rate is not the same service: a faster GPU idles here; compare at equal service for cost."
        )
    else:
        rate = None
        st.caption("No pin fits in memory: memory figures only.")
    # st.dataframe shows pin labels (user text) as plain text; st.table would render them as Markdown
    st.dataframe(comparison_table(pins, rate), width="stretch")
    return True


def render(current: dict[str, Any] | None) -> None:
    pins: list[dict[str, Any]] = st.session_state.setdefault("pins", [])
    c1, c2, c3 = st.columns([3, 2, 4])  # both buttons' labels whole at 1,024 px
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
    mode = st.radio("Compare", MODES, key="cmp_mode", horizontal=True, label_visibility="collapsed",
                    persist_state="session")
    shown = _equal_service(pins, current) if mode == MODES[0] else _same_rate(pins)
    if not shown:
        return
    sweeps = overlaid_sweeps(pins)
    charts.show(
        charts.overlay(sweeps, "itl_ms", "ITL vs batch, decode only (up to each pin's max batch)", "ITL (ms)")
    )
    charts.show(
        charts.overlay(
            sweeps, "output_tokens_per_s", "Output tokens/s per replica vs batch, decode only",
            "output tokens/s", fmt=",.0f",
        )
    )
    _cost_chart(sweeps)
