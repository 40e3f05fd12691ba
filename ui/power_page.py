"""Power & fleets page (issue 24): the plan's power at its operating point, sizing under a power budget
with a cost tier, the cheapest mixed fleet for a length distribution, and context tiers. Each tool runs
only when its button is pressed (the sizing searches take a second or more); its last answer stays shown."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import streamlit as st

from planner import ScenarioError
from planner.contract.context_tiers import context_tiers
from planner.contract.planning import Plan
from planner.contract.power_sizing import size_power
from planner.model.presets import load_presets
from planner.serving.mixed_fleet import mixed_fleet
from ui import shared_scenario
from ui.text import plain
from ui.widget_state import KEEP

TOOLS = ("Power-capped sizing", "Mixed fleet", "Context tiers")
OBJECTIVES = {"min_mw": "Fewest MW for this traffic", "max_goodput": "Most goodput for the budget"}
SOURCES = {"catalog": "catalog (TDP-based, all-in)", "inferencex": "InferenceX's all-in figure"}
CONTEXT_CHOICES = (8192, 32768, 65536, 131072, 262144, 1000000)
# No source: starting values of the mixed-fleet inputs (data/examples/mixed_fleet_bimodal.json's classes, and
# its 20 s TTFT for the long class: a 32,000-token prompt's prefill alone takes seconds)
MIXED_DEFAULTS = {"mf_p1": 128, "mf_o1": 1024, "mf_p2": 32000, "mf_o2": 64, "mf_share": 0.9,
                  "mf_ttft2": 20000.0}
TIERS = {"rent": "Rent (catalog or your prices)", "own": "Own (ownership model)",
         "hyperscaler": "Owning - Hyperscaler (InferenceX)", "neocloud": "Owning - Neocloud (InferenceX)",
         "rental_3yr": "Renting - 3-year (InferenceX)"}


def _power_of_plan(result: Plan | None) -> None:
    st.subheader("This plan's power at its operating point")
    e = result.economics if result is not None else None
    if e is None or e.watts_per_replica is None:
        st.info("The plan has no stable operating point: no power figure (see the Plan view).")
        return
    cols = st.columns(5)
    cols[0].metric("Watts per replica (all-in)", f"{e.watts_per_replica:,.0f} W")
    cols[1].metric("GPU watts per replica", f"{e.gpu_watts_per_replica or 0:,.0f} W")
    cols[2].metric("Joules per output token", f"{e.joules_per_output_token or 0:.3f} J")
    cols[3].metric("Output tokens/s per MW", f"{(e.output_tokens_per_s_per_provisioned_mw or 0) / 1e6:.3f} M")
    cols[4].metric("Energy $ per M output tokens", f"${e.energy_usd_per_million_output_tokens or 0:.4f}")
    st.caption(
        f"Utilization {e.utilization or 0:.0%} of peak on the binding resource; {e.power_model}. "
        f"Electricity \\${e.electricity_usd_per_kwh:g}/kWh (scenario `economics.electricity_usd_per_kwh`)."
    )


SIDEBAR_MODEL = "__sidebar_model__"  # the sidebar's custom model (not a preset)


def _follow_sidebar(prefix: str, wl: dict[str, Any]) -> None:
    """One scenario (issue 31): this tool's model, traffic, objective and lengths are the sidebar's, taken
    again whenever the sidebar changes; its own inputs (GPUs, budget, tier, length classes) stay."""
    if not shared_scenario.changed(f"{prefix}_workload", wl):
        return
    ss = st.session_state
    taken = {
        f"{prefix}_model": wl["model"] if isinstance(wl["model"], str) else SIDEBAR_MODEL,
        f"{prefix}_rps": float(wl["requests_per_s"]), f"{prefix}_ttft": float(wl["slo"]["ttft_ms"]),
        f"{prefix}_itl": float(wl["slo"]["itl_ms"]), f"{prefix}_prompt": int(wl["prompt_len"]),
        f"{prefix}_output": int(wl["output_len"]),
    }
    ss[f"{prefix}_from_sidebar"] = taken  # what the share link leaves out (ui/power_link.py)
    kept = ss.get("power_link_kept") or {}
    for key, value in taken.items():
        ss[key] = kept.pop(key) if key in kept else value  # a link's own value stands the first time


def _common(prefix: str, catalog: dict[str, Any], gpus: list[str]) -> dict[str, Any]:
    """The inputs every tool shares, starting from the sidebar's scenario; the sizing request's common part
    (model, objective, precisions and context as the sidebar has them)."""
    wl = shared_scenario.workload()
    _follow_sidebar(prefix, wl)
    presets = load_presets()
    models = list(presets) + ([SIDEBAR_MODEL] if not isinstance(wl["model"], str) else [])
    c = st.columns([2, 1, 1, 1])  # the model's name whole at 1,024 px
    model = c[0].selectbox(
        "Model", models, key=f"{prefix}_model", **KEEP,
        format_func=lambda k: presets[k].name if k in presets else "the sidebar's custom model",
    )
    rps = c[1].number_input("Requests/s", min_value=0.001, max_value=1e7, key=f"{prefix}_rps", **KEEP,
                            format="%.3f")
    ttft = c[2].number_input("TTFT objective (ms)", min_value=1.0, max_value=1e7, key=f"{prefix}_ttft",
                             **KEEP)
    itl = c[3].number_input("ITL objective (ms)", min_value=0.1, max_value=1e7, key=f"{prefix}_itl", **KEEP)
    st.session_state.setdefault(f"{prefix}_gpus", gpus)  # a share link may have set it (ui/power_link.py)
    chosen = st.multiselect("GPUs", list(catalog), key=f"{prefix}_gpus", **KEEP,
                            format_func=lambda k: catalog[k].name if k in catalog else str(k))
    same = model == wl["model"] or model == SIDEBAR_MODEL
    request: dict[str, Any] = {
        "model": wl["model"] if model == SIDEBAR_MODEL else model,
        "slo": {"ttft_ms": float(ttft), "itl_ms": float(itl), "percentile": int(wl["slo"]["percentile"]),
                **({"tpot_ms": wl["slo"]["tpot_ms"]} if wl["slo"].get("tpot_ms") else {})},
        "gpus": chosen or gpus,
    }
    if same:  # the sidebar's precisions and context belong to its model
        request.update(weights=[wl["weights"]], kv_cache=[wl["kv_cache"]])
        if wl.get("context_len"):
            request["context_len"] = int(wl["context_len"])
    shape = shared_scenario.shape_words(wl.get("shape") or {})
    st.caption(
        f"From the sidebar: {'its model' if same else 'another model'}, "
        + (f"{wl['weights']} weights and {wl['kv_cache']} KV cache, " if same else "")
        + f"objective at p{wl['slo']['percentile']}"
        + (f" with mean TPOT ≤ {wl['slo']['tpot_ms']:g} ms" if wl["slo"].get("tpot_ms") else "")
        + (f", {shape}" if shape else "")
        + "; change the sidebar and these follow."
    )
    return {"request": request, "rps": float(rps), "shape": dict(wl.get("shape") or {})}


def _run(fn: Any, request: dict[str, Any], key: str) -> None:
    """Run a tool; its answer stays in the session (shown until the next run), a refusal is one error line
    and drops the stale answer. The tool runs in a bounded child process at low priority, as the sizing
    search does (ui/search_runner.py, issue 32): in this process it would hold the GIL from every session."""
    from ui.search_runner import run_search

    tool = {size_power: "size-power", mixed_fleet: "mixed-fleet", context_tiers: "context-tiers"}[fn]
    try:
        with st.spinner("Searching configurations…"):
            st.session_state[key] = run_search(json.dumps(request, sort_keys=True), tool)
    except ScenarioError as err:
        st.session_state.pop(key, None)
        st.error(f"**{plain(err.field, 80)}**: {plain(err.reason)}")


def _layout(catalog: dict[str, Any], r: dict[str, Any]) -> str:
    """An option, short: "b200 · TP 8 · fp4/fp8" (catalog id; weights/KV cache)."""
    gpu = r["gpu"] if isinstance(r["gpu"], str) else plain(str(r["gpu"]), 40)
    parts = [gpu, f"TP {r['tp']}"] + [f"{k.upper()} {r[k]}" for k in ("pp", "ep") if (r.get(k) or 1) > 1]
    return " · ".join(parts) + f" · {r['weights']}/{r['kv_cache']}"


def _n(x: Any, fmt: str) -> str:
    return "—" if x is None or (isinstance(x, float) and x != x) else format(x, fmt)


def _usd(x: Any, digits: int = 2) -> str:
    return "—" if x is None else f"${x:,.{digits}f}"


def power_table(rows: list[dict[str, Any]], catalog: dict[str, Any]) -> pd.DataFrame:
    """The power-capped options with labels and rounded units (no code names, no 17-digit floats)."""
    return pd.DataFrame([{
        "Option (weights/KV)": _layout(catalog, r), "GPUs": _n(r.get("gpus_total"), ",.0f"),
        "Provisioned MW": _n(r.get("provisioned_mw"), ",.3f"), "Fleet $/hour": _usd(r.get("usd_per_hour")),
        "$ per M output tokens": _usd(r.get("usd_per_million_output_tokens"), 3),
        "Output tokens/s per MW": _n(r.get("output_tokens_per_s_per_mw"), ",.0f"),
        "Replicas": _n(r.get("replicas"), ",.0f"), "Batch": _n(r.get("batch"), ",.0f"),
        "Goodput (req/s)": _n(r.get("goodput_request_rate"), ",.2f"),
        f"ITL p{r.get('percentile', 90)} (ms)": _n(r.get("itl_ms"), ",.1f"),
    } for r in rows])


def _power_sizing(catalog: dict[str, Any]) -> None:
    common = _common("pw", catalog, ["h100-sxm", "h200", "b200"])
    c = st.columns([1, 1, 2, 1])  # the objective's words whole at 1,024 px
    prompt = c[0].number_input("Prompt tokens", min_value=1, max_value=10_000_000, key="pw_prompt", **KEEP)
    output = c[1].number_input("Output tokens", min_value=1, max_value=10_000_000, key="pw_output", **KEEP)
    objective = c[2].selectbox("Objective", list(OBJECTIVES), key="pw_objective", **KEEP,
                               format_func=OBJECTIVES.get)
    st.session_state.setdefault("pw_budget", 2.0)
    budget = c[3].number_input("Power budget (MW, 0 = none)", min_value=0.0, max_value=100_000.0,
                               key="pw_budget", **KEEP)
    c2 = st.columns(2)
    tier = c2[0].selectbox("Cost tier", list(TIERS), format_func=TIERS.__getitem__, key="pw_tier", **KEEP)
    source = c2[1].selectbox("kW per GPU", list(SOURCES), key="pw_source", **KEEP, format_func=SOURCES.get)
    if st.button("Size under power", key="pw_run") or st.session_state.pop("pw_autorun", False):
        sizing = {**common["request"], "traffic": {"requests_per_s": common["rps"], "prompt_len": int(prompt),
                                                   "output_len": int(output), **common["shape"]}}
        request = {"sizing": sizing,
                   "power": {"objective": objective, "cost_tier": tier, "power_source": source}}
        if budget > 0:
            request["power"]["budget_mw"] = float(budget)
        _run(size_power, request, "pw_result")
    result = st.session_state.get("pw_result")
    if result is None:
        return
    rows = result["results"]
    if not rows:
        st.warning("No option fits: widen the GPUs or the budget.")
        return
    st.dataframe(power_table(rows, catalog), hide_index=True, width="stretch")
    for s in result["skipped"][:5]:
        st.caption(f"skipped {plain(s['candidate'], 80)}: {plain(s['reason'])}")


def pools_table(pools: list[dict[str, Any]], catalog: dict[str, Any]) -> pd.DataFrame:
    """A mixed fleet's pools with labels and rounded units."""
    return pd.DataFrame([{
        "Pool (weights/KV)": _layout(catalog, p), "GPUs": _n(p.get("gpus_total"), ",.0f"),
        "$/hour": _usd(p.get("usd_per_hour")), "Replicas": _n(p.get("replicas"), ",.0f"),
        "Requests/s": _n(p.get("requests_per_s"), ",.2f"),
    } for p in pools])


def unserved_classes_line(result: dict[str, Any]) -> str:
    """Why a mixed fleet has no answer, naming the length classes that no candidate serves (goodput 0 on every
    GPU and layout: with the sidebar's 1 s TTFT, a 32,000-token prompt's prefill alone misses it) and what to
    change."""
    table = result.get("goodput_table") or []
    unserved = [c for i, c in enumerate(result.get("classes") or [])
                if not any((row["goodput_request_rate_by_class"][i] or 0.0) > 0 for row in table)]
    if not unserved:
        return "No GPU serves every length class within the objectives."
    named = ", ".join(f"{c['prompt_len']:,}-token prompts" for c in unserved)
    return (f"No GPU and layout searched serves the class of {named} within the objectives: raise that "
            "class's TTFT objective, shorten it, or add larger GPUs.")


def _mixed_fleet(catalog: dict[str, Any]) -> None:
    common = _common("mf", catalog, ["h100-sxm", "h200"])
    st.caption("Two length classes (a bimodal histogram); routing cuts on the prompt length. The short class "
               "keeps the TTFT objective above; the long class has its own.")
    for key, value in MIXED_DEFAULTS.items():
        st.session_state.setdefault(key, value)
    c = st.columns(5)
    p1 = c[0].number_input("Short prompt", min_value=1, max_value=10_000_000, key="mf_p1", **KEEP)
    o1 = c[1].number_input("Short output", min_value=1, max_value=10_000_000, key="mf_o1", **KEEP)
    p2 = c[2].number_input("Long prompt", min_value=1, max_value=10_000_000, key="mf_p2", **KEEP)
    o2 = c[3].number_input("Long output", min_value=1, max_value=10_000_000, key="mf_o2", **KEEP)
    share = c[4].number_input("Short share", min_value=0.01, max_value=0.99, key="mf_share", **KEEP)
    ttft2 = st.columns(5)[2].number_input("Long TTFT objective (ms)", min_value=1.0, max_value=1e7,
                                          key="mf_ttft2", **KEEP)
    if st.button("Find the cheapest mix", key="mf_run") or st.session_state.pop("mf_autorun", False):
        request = {**common["request"], "requests_per_s": common["rps"], "lengths": {"histogram": [
            {"prompt_len": int(p1), "output_len": int(o1), "weight": float(share)},
            {"prompt_len": int(p2), "output_len": int(o2), "weight": 1.0 - float(share),
             "ttft_ms": float(ttft2)}]}}
        request.pop("context_len", None)  # each length class has its own context
        _run(mixed_fleet, request, "mf_result")
    result = st.session_state.get("mf_result")
    if result is None:
        return
    if result["mixed"] is None:
        st.warning(unserved_classes_line(result))
        return
    for name in ("mixed", "best_single"):
        r = result[name]
        st.markdown(
            f"**{'Cheapest mix' if name == 'mixed' else 'Best single type'}**: "
            f"\\${r['usd_per_hour']:,.2f}/hour, "
            f"\\${r['usd_per_million_output_tokens']:.3f} per M output tokens"
        )
        st.dataframe(pools_table(r["pools"], catalog), hide_index=True, width="stretch")
    route = result["mixed"]["route"]
    st.caption(f"Routing: {plain(route['rule']) if route else 'one pool serves every length'}; saving vs "
               f"the best single type {result['saving'] or 0:.1%}.")


def tiers_table(tiers: list[dict[str, Any]], catalog: dict[str, Any]) -> pd.DataFrame:
    """Context tiers with labels and rounded units; memory in GiB."""
    return pd.DataFrame([{
        "Max context (tokens)": f"{t['context_len']:,}", "GPUs": _n(t.get("gpus_total"), ",.0f"),
        "Fleet $/hour": _usd(t.get("usd_per_hour")),
        "$/hour vs shortest": _n(t.get("usd_vs_shortest"), ".2f") + ("x" if t.get("usd_vs_shortest") else ""),
        "$ per M output tokens": _usd(t.get("usd_per_million_output_tokens"), 3),
        "Max batch": _n(t.get("max_batch"), ",.0f"),
        "KV per sequence per GPU": (f"{t['kv_gib_per_sequence_per_gpu']:,.2f} GiB"
                                    if t.get("kv_gib_per_sequence_per_gpu") is not None else "—"),
        "Option (weights/KV)": (_layout(catalog, t["option"]) if t["option"]
                                else plain(t.get("reason") or "", 300)),
    } for t in tiers])


def _context_tiers(catalog: dict[str, Any]) -> None:
    common = _common("ct", catalog, ["h100-sxm", "h200"])
    c = st.columns(3)
    prompt = c[0].number_input("Prompt tokens", min_value=1, max_value=10_000_000, key="ct_prompt", **KEEP)
    output = c[1].number_input("Output tokens", min_value=1, max_value=10_000_000, key="ct_output", **KEEP)
    st.session_state.setdefault("ct_tiers", [32768, 131072])
    tiers = c[2].multiselect("Maximum contexts", list(CONTEXT_CHOICES), key="ct_tiers", **KEEP,
                             format_func=lambda t: f"{t:,}")
    if st.button("Compare context tiers", key="ct_run") or st.session_state.pop("ct_autorun", False):
        sizing = {**common["request"], "traffic": {"requests_per_s": common["rps"], "prompt_len": int(prompt),
                                                   "output_len": int(output), **common["shape"]}}
        sizing.pop("context_len", None)  # each tier sets its own
        request = {"sizing": sizing, "context_lens": [int(t) for t in tiers] or [32768]}
        _run(context_tiers, request, "ct_result")
    result = st.session_state.get("ct_result")
    if result is None:
        return
    st.dataframe(tiers_table(result["tiers"], catalog), hide_index=True, width="stretch")


def render(catalog: dict[str, Any], result: Plan | None) -> None:
    _power_of_plan(result)
    tool = st.radio("Tool", TOOLS, key="pw_tool", **KEEP, horizontal=True)
    if tool == TOOLS[0]:
        _power_sizing(catalog)
    elif tool == TOOLS[1]:
        _mixed_fleet(catalog)
    else:
        _context_tiers(catalog)
