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
from ui.text import plain

TOOLS = ("Power-capped sizing", "Mixed fleet", "Context tiers")
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
        f"Electricity ${e.electricity_usd_per_kwh:g}/kWh (scenario `economics.electricity_usd_per_kwh`)."
    )


def _common(prefix: str, catalog: dict[str, Any], gpus: list[str]) -> dict[str, Any]:
    models = list(load_presets())
    c = st.columns(4)
    model = c[0].selectbox("Model", models, index=models.index("llama-3.1-8b"), key=f"{prefix}_model")
    rps = c[1].number_input("Requests/s", min_value=0.001, max_value=1e6, value=20.0, key=f"{prefix}_rps")
    ttft = c[2].number_input(
        "TTFT objective (ms)", min_value=1.0, max_value=1e6, value=3000.0, key=f"{prefix}_ttft"
    )
    itl = c[3].number_input(
        "ITL objective (ms)", min_value=0.1, max_value=1e5, value=50.0, key=f"{prefix}_itl"
    )
    chosen = st.multiselect("GPUs", list(catalog), default=gpus, key=f"{prefix}_gpus")
    return {"model": model, "rps": float(rps), "slo": {"ttft_ms": float(ttft), "itl_ms": float(itl)},
            "gpus": chosen or gpus}


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


def _power_sizing(catalog: dict[str, Any]) -> None:
    common = _common("pw", catalog, ["h100-sxm", "h200", "b200"])
    c = st.columns(4)
    prompt = c[0].number_input(
        "Prompt tokens", min_value=1, max_value=10_000_000, value=2000, key="pw_prompt"
    )
    output = c[1].number_input("Output tokens", min_value=1, max_value=10_000_000, value=500, key="pw_output")
    objective = c[2].selectbox("Objective", ["min_mw", "max_goodput"], key="pw_objective",
                               format_func=lambda o: {"min_mw": "Fewest MW for this traffic",
                                                      "max_goodput": "Most goodput for the budget"}[o])
    budget = c[3].number_input("Power budget (MW, 0 = none)", min_value=0.0, max_value=100_000.0, value=2.0,
                               key="pw_budget")
    c2 = st.columns(2)
    tier = c2[0].selectbox("Cost tier", list(TIERS), format_func=TIERS.__getitem__, key="pw_tier")
    source = c2[1].selectbox("kW per GPU", ["catalog", "inferencex"], key="pw_source")
    if st.button("Size under power", key="pw_run"):
        request = {"sizing": {"model": common["model"], "gpus": common["gpus"], "slo": common["slo"],
                              "traffic": {"requests_per_s": common["rps"], "prompt_len": int(prompt),
                                          "output_len": int(output)}},
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
    keep = ["label", "replicas", "gpus_total", "provisioned_mw", "output_tokens_per_s_per_mw", "usd_per_hour",
            "usd_per_million_output_tokens", "goodput_request_rate", "itl_ms"]
    st.dataframe(pd.DataFrame([{k: r.get(k) for k in keep} for r in rows]), hide_index=True)
    for s in result["skipped"][:5]:
        st.caption(f"skipped {plain(s['candidate'], 80)}: {plain(s['reason'])}")


def _mixed_fleet(catalog: dict[str, Any]) -> None:
    common = _common("mf", catalog, ["h100-sxm", "h200"])
    st.caption("Two length classes (a bimodal histogram); routing cuts on the prompt length.")
    c = st.columns(5)
    p1 = c[0].number_input("Short prompt", min_value=1, max_value=10_000_000, value=128, key="mf_p1")
    o1 = c[1].number_input("Short output", min_value=1, max_value=10_000_000, value=1024, key="mf_o1")
    p2 = c[2].number_input("Long prompt", min_value=1, max_value=10_000_000, value=32000, key="mf_p2")
    o2 = c[3].number_input("Long output", min_value=1, max_value=10_000_000, value=64, key="mf_o2")
    share = c[4].number_input("Short share", min_value=0.01, max_value=0.99, value=0.9, key="mf_share")
    if st.button("Find the cheapest mix", key="mf_run"):
        request = {"model": common["model"], "requests_per_s": common["rps"], "slo": common["slo"],
                   "gpus": common["gpus"], "lengths": {"histogram": [
                       {"prompt_len": int(p1), "output_len": int(o1), "weight": float(share)},
                       {"prompt_len": int(p2), "output_len": int(o2), "weight": 1.0 - float(share)}]}}
        _run(mixed_fleet, request, "mf_result")
    result = st.session_state.get("mf_result")
    if result is None:
        return
    if result["mixed"] is None:
        st.warning("No GPU serves every length class within the objectives.")
        return
    for name in ("mixed", "best_single"):
        r = result[name]
        st.markdown(
            f"**{'Cheapest mix' if name == 'mixed' else 'Best single type'}**: "
            f"${r['usd_per_hour']:,.2f}/hour, ${r['usd_per_million_output_tokens']:.3f} per M output tokens"
        )
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        k: p[k]
                        for k in (
                            "gpu", "tp", "weights", "kv_cache", "replicas", "gpus_total", "requests_per_s",
                            "usd_per_hour",
                        )
                    }
                    for p in r["pools"]
                ]
            ),
            hide_index=True,
        )
    route = result["mixed"]["route"]
    st.caption(f"Routing: {route['rule'] if route else 'one pool serves every length'}; saving vs the best "
               f"single type {result['saving'] or 0:.1%}.")


def _context_tiers(catalog: dict[str, Any]) -> None:
    common = _common("ct", catalog, ["h100-sxm", "h200"])
    c = st.columns(3)
    prompt = c[0].number_input(
        "Prompt tokens", min_value=1, max_value=10_000_000, value=2000, key="ct_prompt"
    )
    output = c[1].number_input("Output tokens", min_value=1, max_value=10_000_000, value=500, key="ct_output")
    tiers = c[2].multiselect("Maximum contexts", [8192, 32768, 65536, 131072, 262144, 1000000],
                             default=[32768, 131072, 1000000], key="ct_tiers")
    if st.button("Compare context tiers", key="ct_run"):
        request = {"sizing": {"model": common["model"], "gpus": common["gpus"], "slo": common["slo"],
                              "traffic": {"requests_per_s": common["rps"], "prompt_len": int(prompt),
                                          "output_len": int(output)}},
                   "context_lens": [int(t) for t in tiers] or [32768]}
        _run(context_tiers, request, "ct_result")
    result = st.session_state.get("ct_result")
    if result is None:
        return
    st.dataframe(
        pd.DataFrame(
            [
                {
                    "max context": t["context_len"], "GPUs": t["gpus_total"], "$/hour": t["usd_per_hour"],
                    "$ per M output tokens": t["usd_per_million_output_tokens"],
                    "max batch": t.get("max_batch"),
                    "KV GB per sequence per GPU": t.get("kv_gb_per_sequence_per_gpu"),
                    "option": (
                        f"{t['option']['gpu']} tp{t['option']['tp']} "
                        f"{t['option']['weights']}/{t['option']['kv_cache']}"
                        if t["option"]
                        else t.get("reason")
                    ),
                    "x shortest": t["usd_vs_shortest"],
                }
                for t in result["tiers"]
            ]
        ),
        hide_index=True,
    )


def render(catalog: dict[str, Any], result: Plan | None) -> None:
    _power_of_plan(result)
    tool = st.radio("Tool", TOOLS, key="pw_tool", horizontal=True)
    if tool == TOOLS[0]:
        _power_sizing(catalog)
    elif tool == TOOLS[1]:
        _mixed_fleet(catalog)
    else:
        _context_tiers(catalog)
