"""Sizing page: traffic, objectives, candidate filters and cost mode in; a ranked table, a cost vs
latency scatter with the Pareto frontier, and a way to open any option in the planner."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import streamlit as st

from planner import ScenarioError
from planner.core.precision import KV_PRECISIONS, WEIGHT_PRECISIONS
from planner.economics.ownership import OwnershipCosts, break_even_utilization
from planner.engines.base import ENGINE_LABELS
from planner.model.presets import load_presets
from planner.scenario.scenario import parse_scenario
from planner.serving.serving_modes import decode_worker_scenario, modes_verdict
from planner.serving.sizing_request import DEFAULT_KV, DEFAULT_TP, DEFAULT_WEIGHTS
from ui import charts, shared_scenario, view_links, widget_state
from ui.links import SIZE_PARAM, sizing_request_from_link
from ui.search_runner import prestart, run_search
from ui.sizing_options import gpu_label, no_option_line, options_table, ordered_options, scatter
from ui.text import plain
from ui.widget_state import KEEP

DEFAULT_REQUEST: dict[str, Any] = {
    "model": "llama-3.1-70b", "traffic": {"requests_per_s": 10.0, "prompt_len": 2000, "output_len": 400},
    "slo": {"ttft_ms": 2000.0, "itl_ms": 50.0},
}


_FORM_KEYS = ("model", "traffic", "slo", "gpus", "tp", "weights", "kv_cache", "cost_mode", "ownership",
              "disaggregation", "pp", "ep", "max_utilization")


def _request_from_widgets(catalog) -> dict[str, Any]:
    """The search the form describes; fields the form has no input for (context_len, memory, prices,
    custom GPUs, …) come unchanged from the link's request."""
    ss = st.session_state
    base = ss.get("sz_base") or {}
    req: dict[str, Any] = {k: v for k, v in base.items() if k not in _FORM_KEYS}
    model = base.get("model") if ss["sz_model"] == LINK_MODEL else ss["sz_model"]
    custom_gpus = [g for g in (base.get("gpus") or []) if isinstance(g, dict)]
    req.update(
        {
            "model": model,
            "traffic": {  # the shape (arrival and length CVs), which the form has no input for, kept
                **shared_scenario.traffic_shape(base.get("traffic")),
                "requests_per_s": float(ss["sz_rps"]), "prompt_len": int(ss["sz_prompt"]),
                "output_len": int(ss["sz_output"]),
            },
            "slo": {
                "ttft_ms": float(ss["sz_ttft"]), "itl_ms": float(ss["sz_itl"]),
                "percentile": int(ss["sz_pct"]),
                **({"tpot_ms": float(ss["sz_tpot"])} if float(ss.get("sz_tpot") or 0.0) > 0 else {}),
            },
            "gpus": (list(ss["sz_gpus"]) or ([] if custom_gpus else list(catalog))) + custom_gpus,
            "tp": list(ss["sz_tp"]) or DEFAULT_TP, "weights": list(ss["sz_weights"]) or DEFAULT_WEIGHTS,
            "kv_cache": list(ss["sz_kv"]) or DEFAULT_KV, "cost_mode": ss["sz_cost_mode"],
        }
    )
    if float(ss.get("sz_headroom") or 0.0) > 0:  # 0: the highest load the simulation confirms
        req["max_utilization"] = float(ss["sz_headroom"]) / 100.0
    # serving modes (planner.serving.serving_modes): disaggregated
    # prefill/decode fleets, PP and EP for their pools
    if ss.get("sz_disagg"):
        req["disaggregation"] = True
    if list(ss.get("sz_pp") or [1]) != [1]:
        req["pp"] = list(ss["sz_pp"])
    if list(ss.get("sz_ep") or [1]) != [1]:
        req["ep"] = list(ss["sz_ep"])
    if ss["sz_cost_mode"] == "own":
        req["ownership"] = {
            **(base.get("ownership") or {}),
            "amortization_years": float(ss["sz_years"]), "power_usd_per_kwh": float(ss["sz_kwh"]),
            "pue": float(ss["sz_pue"]), "hosting_usd_per_gpu_month": float(ss["sz_hosting"]),
        }
    return req


LINK_MODEL = "__link_model__"


def _seed(req: dict[str, Any], catalog) -> None:
    """Fill the form from a request that parse_sizing accepted (any optional field may be null)."""
    ss = st.session_state
    ss["sz_base"] = req
    ss["sz_model"] = req["model"] if isinstance(req["model"], str) else LINK_MODEL
    traffic, slo = req["traffic"], req["slo"]
    ss["sz_rps"] = float(traffic["requests_per_s"])
    ss["sz_prompt"] = int(traffic["prompt_len"])
    ss["sz_output"] = int(traffic["output_len"])
    ss["sz_ttft"] = float(slo["ttft_ms"])
    ss["sz_itl"] = float(slo["itl_ms"])
    ss["sz_pct"] = int(slo.get("percentile") or 90)
    ss["sz_tpot"] = float(slo.get("tpot_ms") or 0.0)
    ss["sz_headroom"] = float(req.get("max_utilization") or 0.0) * 100.0
    ss["sz_gpus"] = [g for g in (req.get("gpus") or []) if isinstance(g, str) and g in catalog]
    ss["sz_tp"] = list(req.get("tp") or DEFAULT_TP)
    ss["sz_weights"] = list(req.get("weights") or DEFAULT_WEIGHTS)
    ss["sz_kv"] = list(req.get("kv_cache") or DEFAULT_KV)
    ss["sz_cost_mode"] = req.get("cost_mode") or "rent"
    ss["sz_disagg"] = bool(req.get("disaggregation"))
    ss["sz_pp"] = list(req.get("pp") or [1])
    ss["sz_ep"] = list(req.get("ep") or [1])
    own = req.get("ownership") or {}
    defaults = OwnershipCosts()  # planner/data/ownership.toml, with sources
    ss["sz_years"] = float(own.get("amortization_years") or defaults.amortization_years)
    ss["sz_kwh"] = float(own.get("power_usd_per_kwh") or defaults.power_usd_per_kwh)
    ss["sz_pue"] = float(own.get("pue") or defaults.pue)
    ss["sz_hosting"] = float(own.get("hosting_usd_per_gpu_month") or defaults.hosting_usd_per_gpu_month)


def _init(catalog) -> None:
    if st.session_state.get("sz_initialized"):
        return
    req = DEFAULT_REQUEST
    raw = st.session_state.get("size_link")  # captured at session start (ui/state.py)
    if raw:
        candidate, problem = sizing_request_from_link(raw)
        if candidate is None:
            st.session_state["sz_link_problem"] = problem
        else:
            req = candidate
    _seed(req, catalog)
    st.session_state["sz_initialized"] = True
    if raw and "sz_link_problem" not in st.session_state:
        # a link fills the form; the search runs when the user presses the button (issue 32: a link that
        # ran its search on arrival let anyone hand out a minute of the server's CPU per click)
        st.session_state["sz_link_filled"] = True


def _follow_sidebar(catalog) -> None:
    """One scenario (issue 31): the form takes the sidebar's model, precisions, lengths, traffic target and
    objective whenever they change; a shared search link's own request stands until then."""
    ss = st.session_state
    wl = shared_scenario.workload()
    first = "sz_workload" not in ss
    if not shared_scenario.changed("sz_workload", wl):
        return
    if first and ss.get("size_link") and not ss.get("sz_link_problem"):
        return
    _seed(shared_scenario.with_workload(_request_from_widgets(catalog), wl), catalog)


def _options(usual: list[Any], chosen: list[Any]) -> list[Any]:
    return usual + [c for c in chosen if c not in usual]


def _cached_size(request_json: str) -> dict[str, Any]:
    """The search runs on request only, once per distinct request across sessions, in a bounded child
    process at low priority so that it cannot starve other sessions (ui/search_runner.py)."""
    return run_search(request_json)


def option_scenario(option: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    """The scenario an option plans to: its own, or for a disaggregated fleet its decode worker's
    (planner.serving.serving_modes.decode_worker_scenario)."""
    if option.get("scenario"):
        return option["scenario"]
    return decode_worker_scenario(option, request)


def opened_fleet(scenario: dict[str, Any]) -> dict[str, Any] | None:
    """The disaggregated option last opened from this page, while the Plan view still shows its decode worker
    (any input changed since: None). Keys: scenario, option, request, number."""
    opened = st.session_state.get("sz_opened_fleet")
    if not opened:
        return None
    try:
        same = parse_scenario(opened["scenario"]).model_dump() == parse_scenario(scenario).model_dump()
    except ScenarioError:
        return None
    return opened if same else None


def _met(value: float | None, objective: float, top: float | None = None) -> str:
    """The objective against the fast figure and, where the plan has one, its simulated range's top (no
    "met" where the range misses, issue 31)."""
    if value is None:
        return "not computed"
    if value > objective:
        return "missed"
    held = top is None or top <= objective * (1 + 1e-4)
    return "met" if held else "met, but not across the simulated range"


def _pool_total(p: dict[str, Any]) -> str:
    """A pool's share of a disaggregated option's GPUs and $/hour (planner.serving.disaggregation's)."""
    if p.get("gpus") is None or p.get("usd_per_hour") is None:
        return ""
    gpus = int(p["gpus"])
    return f" The pool: {gpus:,} GPU{'' if gpus == 1 else 's'}, \\${p['usd_per_hour']:,.2f}/hour."


def disaggregated_view(option: dict[str, Any], request: dict[str, Any], catalog, number: int) -> None:
    """A disaggregated option as what it is: a prefill pool, a decode pool, the KV cache between them, and the
    objectives the fleet meets (figures from planner.serving.disaggregation, none computed here)."""
    pre, dec = option["prefill"], option["decode"]
    pct = int(option.get("percentile") or 90)
    slo = request["slo"]

    def gpu(p: dict[str, Any]) -> str:  # a catalog name as is; a custom GPU's name is user text
        return (
            catalog[p["gpu"]].name
            if isinstance(p["gpu"], str) and p["gpu"] in catalog
            else plain(str(p["gpu"]), 80)
        )

    def layout(p: dict[str, Any]) -> str:
        parts = [f"TP {p['tp']}"] + [f"{k.upper()} {p[k]}" for k in ("pp", "ep") if p.get(k, 1) > 1]
        return ", ".join(parts) + f"; weights {p['weights']}, KV cache {p['kv_cache']}"

    def count(n: int, one: str, many: str) -> str:
        return f"{n:,} {one if n == 1 else many}"

    with st.container(border=True):
        st.markdown(
            f"**Option {number}: disaggregated fleet, {count(int(option['gpus_total']), 'GPU', 'GPUs')}, "
            f"\\${option['usd_per_hour']:,.2f}/hour**"
        )
        c1, c2, c3 = st.columns(3)
        with c1:
            st.markdown("**Prefill pool**")
            st.metric("Prefill workers", count(int(option["prefill_workers"]), "worker", "workers"),
                      help="each runs the prompts of its share of the traffic")
            st.caption(f"{count(int(pre['gpus_per_worker']), 'GPU', 'GPUs')} each: {gpu(pre)}, "
                       f"{layout(pre)}. One prompt takes {pre['prefill_ms']:,.0f} ms; the pool is "
                       f"{pre['utilization']:.0%} busy.{_pool_total(pre)}")
        with c2:
            st.markdown("**KV transfer**")
            st.metric("Per request", f"{option['kv_transfer_ms']:,.1f} ms",
                      help="the prompt's KV cache, prefill worker to decode worker over the network, counted "
                           "whole in TTFT (engines stream it layer by layer and hide part of it)")
            path = option.get("kv_transfer_path") or {}
            st.caption(f"{request['traffic']['prompt_len']:,}-token prompt's KV cache, counted in TTFT"
                       + (f"; moved by {ENGINE_LABELS.get(path['engine'], path['engine'])} "
                          f"{path['path']} ({path['transport']}): each worker starts with "
                          f"`{path['launch']}`." if path else "."))
        with c3:
            st.markdown("**Decode pool**")
            st.metric("Decode workers", count(int(option["decode_workers"]), "worker", "workers"))
            st.caption(f"{count(int(dec['gpus_per_worker']), 'GPU', 'GPUs')} each: {gpu(dec)}, "
                       f"{layout(dec)}. Each runs {dec['request_rate_per_worker']:,.3g} requests/s at batch "
                       f"{dec['batch']:,} (confirmed rate {dec['goodput_request_rate']:,.3g} requests/s)"
                       + (f", {dec['utilization']:.0%} busy" if dec.get("utilization") is not None else "")
                       + (f"; a KV cache waits for a sequence slot {dec['slot_wait_probability']:.1%} of the "
                          f"time, {dec['slot_wait_mean_ms']:,.0f} ms on average"
                          if dec.get("slot_wait_probability") else "")
                       + f".{_pool_total(dec)}")
        _fleet_objectives(option, slo, pct)


def _fleet_objectives(option: dict[str, Any], slo: dict[str, Any], pct: int) -> None:
    """A disaggregated fleet's TTFT and ITL against the objective and the simulated range's top."""
    o1, o2 = st.columns(2)
    ttft_top, itl_top = option.get("ttft_ms_simulated_high"), option.get("itl_ms_simulated_high")
    o1.metric(f"TTFT p{pct} (objective {slo['ttft_ms']:,.0f} ms)", f"{option['ttft_ms']:,.0f} ms",
              _met(option.get("ttft_ms"), float(slo["ttft_ms"]), ttft_top), delta_color="off",
              delta_arrow="off",
              help="prefill queue + prefill + the decode worker's wait for a sequence slot + KV "
                   "transfer + the decode worker's first step"
                   + (f"; simulated range's top {ttft_top:,.0f} ms" if ttft_top is not None else ""))
    o2.metric(f"ITL p{pct} (objective {slo['itl_ms']:,.1f} ms)", f"{option['itl_ms']:,.1f} ms",
              _met(option.get("itl_ms"), float(slo["itl_ms"]), itl_top), delta_color="off",
              delta_arrow="off",
              help=f"simulated range's top {itl_top:,.1f} ms" if itl_top is not None else None)
    if ttft_top is not None and itl_top is not None:
        st.caption(f"Simulated range's top at these loads: TTFT p{pct} {ttft_top:,.0f} ms, ITL p{pct} "
                   f"{itl_top:,.1f} ms; the busier pool runs at {option['utilization']:.0%} of its "
                   "capacity.")


def _request_form(catalog, ss: Any, presets: dict[str, Any]) -> bool:
    """The sizing request's inputs; whether the form was submitted."""
    with st.form("sizing"):
        c1, c2, c3 = st.columns(3)
        base_model = (ss.get("sz_base") or {}).get("model")
        models = list(presets) + ([LINK_MODEL] if isinstance(base_model, dict) else [])
        c1.selectbox("Model", models, key="sz_model", **KEEP,
                     format_func=lambda k: presets[k].name if k in presets
                     else f"custom from the link: {str(base_model.get('name', 'custom'))[:60]}")
        c1.number_input("Requests per second", 0.001, 1e7, key="sz_rps", **KEEP, format="%.3f")
        c2.number_input("Prompt tokens", 1, 10_000_000, key="sz_prompt", **KEEP)
        c2.number_input("Output tokens", 1, 10_000_000, key="sz_output", **KEEP)
        c3.number_input("TTFT objective (ms)", 1.0, 1e7, key="sz_ttft", **KEEP)
        c3.number_input("ITL objective (ms)", 0.1, 1e7, key="sz_itl", **KEEP)
        c3.selectbox(
            "Objectives hold at", [50, 90, 99], key="sz_pct", **KEEP, format_func=lambda p: f"p{p}",
            help="the percentile of TTFT and ITL the objectives bound (p90: 9 requests in 10 within them)",
        )
        c1.number_input(
            "Mean TPOT objective (ms; 0: none)", 0.0, 1e7, key="sz_tpot", **KEEP,
            help="time per output token per request, (E2E - TTFT) / (output - 1), averaged over requests: "
                 "`vllm bench serve`'s Mean TPOT; beside the ITL percentile",
        )
        c2.number_input(
            "Headroom: most load per replica (% of capacity; 0: the highest the simulation confirms)",
            0.0, 95.0, key="sz_headroom", **KEEP, format="%.0f",
            help="0: each replica serves up to the highest load at which the scheduler simulation's range "
                 "of TTFT and ITL still meets the objective (at most 95%, the highest load it tabulates); "
                 "a number caps every replica's load below that too",
        )
        _search_space_inputs(catalog, ss)
        return st.form_submit_button("Find the cheapest fleet")


def _search_space_inputs(catalog, ss: Any) -> None:
    """GPUs, layouts, precisions, modes and (when owned) the ownership inputs the search covers."""
    f1, f2 = st.columns(2)
    f1.multiselect("GPUs (empty: whole catalog)", list(catalog), key="sz_gpus", **KEEP,
                   format_func=lambda k: catalog[k].name if k in catalog else str(k))
    # a link may name choices beyond the usual ones (TP 3, fp16): they are offered, not dropped
    f2.multiselect("TP", _options([1, 2, 4, 8, 16], ss["sz_tp"]), key="sz_tp", **KEEP)
    f1.multiselect("Weights", _options(list(WEIGHT_PRECISIONS), ss["sz_weights"]), key="sz_weights", **KEEP)
    f2.multiselect("KV cache", _options(list(KV_PRECISIONS), ss["sz_kv"]), key="sz_kv", **KEEP)
    m1, m2, m3 = st.columns([2, 1, 1])
    m1.checkbox("Also search disaggregated fleets (separate prefill and decode workers)", key="sz_disagg",
                **KEEP,
                help="each option then says its mode, and the page says which mode wins and why")
    m2.multiselect("PP (disaggregated pools)", _options([1, 2, 4, 8], ss["sz_pp"]), key="sz_pp", **KEEP)
    m3.multiselect("EP (MoE, disaggregated pools)", _options([1, 2, 4, 8, 16], ss["sz_ep"]), key="sz_ep",
                   **KEEP)
    if ss["sz_cost_mode"] == "own":  # ownership inputs only where they count
        o1, o2, o3, o4 = st.columns(4)
        o1.number_input("Amortization (years)", 0.5, 30.0, key="sz_years", **KEEP)
        o2.number_input("$ per kWh", 0.0, 10.0, key="sz_kwh", **KEEP, format="%.3f")
        o3.number_input("PUE", 1.0, 5.0, key="sz_pue", **KEEP)
        o4.number_input("Hosting $/GPU-month", 0.0, 1e6, key="sz_hosting", **KEEP)


def _summary(result: dict[str, Any], request: dict[str, Any]) -> None:
    """The objectives, how many configurations were searched and met them, and what the prices are."""
    slo = request["slo"]
    pct = int(slo.get("percentile") or 90)
    tpot = f" and **mean TPOT ≤ {float(slo['tpot_ms']):,.1f} ms**" if slo.get("tpot_ms") else ""
    words = shared_scenario.shape_words(shared_scenario.traffic_shape(request["traffic"]))
    shape = f" ({words})" if words else ""
    headroom = (f"each replica at most {float(request['max_utilization']):.0%} of its capacity"
                if request.get("max_utilization") else
                "each replica up to the highest load at which the simulated range still meets them")
    st.markdown(
        f"Objectives: **TTFT p{pct} ≤ {slo['ttft_ms']:,.0f} ms** and **ITL p{pct} ≤ {slo['itl_ms']:,.1f} "
        f"ms**{tpot}, "
        f"at {request['traffic']['requests_per_s']:,.3g} requests/s{shape}; {headroom}. Searched "
        f"**{result['searched']:,}** configurations; **{result['feasible']:,}** meet "
        + ("all three objectives." if slo.get("tpot_ms") else "both objectives.")
    )
    st.caption(
        "An option meets its objectives in the serving model, with the wait for a sequence slot, and across "
        "the scheduler simulation's range at its load (the plan's \"simulated range\"): the table shows "
        "each option's utilization and the range's top."
    )
    st.caption(
        "Prices are catalog reference prices, several of them estimates. A GPU not marked validated has "
        "no measurement behind its efficiency (the fit of measured GPUs is applied to its datasheet "
        "peaks): check it before buying."
    )


def _verdicts(
    result: dict[str, Any], options: list[dict[str, Any]], request: dict[str, Any], catalog
) -> None:
    """Owning against renting, the winning mode, and whether the options run on validated GPUs."""
    best = result["options"][0]
    if (
        request.get("cost_mode") == "own"
        and best.get("own_usd_per_gpu_hour")
        and best.get("rent_usd_per_gpu_hour")
    ):
        u = break_even_utilization(best["own_usd_per_gpu_hour"], best["rent_usd_per_gpu_hour"])
        st.info(
            f"Cheapest option owned: \\${best['own_usd_per_gpu_hour']:.2f}/GPU-hour vs "
            f"\\${best['rent_usd_per_gpu_hour']:.2f} "
            f"rented; owning wins above {u:.0%} utilization."
        )
    # the verdict over the options in the order the table shows them: the fleet it names is the table's
    modes = modes_verdict(options) if (result.get("assumptions") or {}).get("modes") else None
    if modes:
        winner = modes.get("winner") or "neither mode"
        st.info(f"**{winner.capitalize()} wins.** {plain(modes.get('why', ''), 600)}")
    cheapest = result["options"][0]
    if not any(o.get("validated") for o in options):
        st.warning("None of these options runs on a GPU marked validated in the catalog: their efficiency "
                   "is the measured GPUs' fit applied to datasheet peaks.")
    elif not cheapest.get("validated"):
        st.info(
            f"Cheaper on paper: {gpu_label(cheapest, catalog)} at \\${cheapest['usd_per_hour']:,.2f}/hour, "
            "on GPUs the catalog does not mark validated (no measurement behind their efficiency)."
        )


def _open_option(options: list[dict[str, Any]], request: dict[str, Any], catalog) -> None:
    """Pick an option: open it (or its decode worker) in the planner, or show its commands."""
    ss = st.session_state
    n = len(options)
    for problem in view_links.option_within(n):  # a link's option past this search's
        st.warning(problem)
    pick = st.number_input(f"Open option (1 to {n}) in the planner", 1, n, key="sz_pick", **KEEP)
    chosen = options[int(pick) - 1]
    scenario = option_scenario(chosen, request)
    worker = " (its decode worker)" if chosen.get("mode") == "disaggregated" else ""
    if chosen.get("mode") == "disaggregated":
        disaggregated_view(chosen, request, catalog, int(pick))
    if st.button(f"Open in planner{worker}", key="sz_open"):
        # a disaggregated option opens as its whole fleet over its decode worker's plan (ui/plan_page.py)
        ss["sz_opened_fleet"] = ({"scenario": scenario, "option": chosen, "request": request,
                                  "number": int(pick)} if chosen.get("mode") == "disaggregated" else None)
        widget_state.queue_scenario(scenario)
        widget_state.queue_updates({"view": "Plan"})
        st.session_state["sz_opened"] = int(pick)
        st.rerun()
    if ss.get("sz_opened") is not None:
        st.success(f"Option {ss['sz_opened']} is loaded into the sidebar and the Plan view.")
    fleet = chosen.get("mode") == "disaggregated"  # its whole launch set: both pools, router, benchmark
    whole = " (the whole fleet)" if fleet else ""
    if st.toggle(f"Commands to deploy and benchmark option {int(pick)}{whole}", key="sz_cmd_show", **KEEP):
        from ui.commands_panel import render_commands_panel, render_fleet_commands_panel

        if fleet:
            render_fleet_commands_panel(chosen, request, key="sz_fleet_cmd")
        else:
            render_commands_panel(scenario, key="sz_cmd")


def _options_view(result: dict[str, Any], request: dict[str, Any], catalog) -> None:
    """The options, cheapest first (validated GPUs first when asked), their chart and the one opened."""
    ss = st.session_state
    options = ordered_options(result["options"], ss.get("sz_validated_first", True))
    frame, config, shared = options_table(options[:50], catalog)
    _verdicts(result, options, request, catalog)
    ss.setdefault("sz_validated_first", True)
    st.checkbox(
        "Validated GPUs first", key="sz_validated_first", **KEEP,
        help="validated: the catalog's flag, the planner's physics checked on this GPU or its generation",
    )
    if shared:
        # headers and the planner's own values (precisions, counts, modes): no user text here
        st.caption("Every option: " + "; ".join(shared) + ".")
    st.dataframe(frame, width="stretch", column_config=config)
    charts.show(scatter(options, float(request["slo"]["itl_ms"]), catalog))
    _open_option(options, request, catalog)


def _run_search(req: dict[str, Any], submitted: bool) -> None:
    ss = st.session_state
    if submitted:
        ss.pop("sz_link_filled", None)
        try:
            with st.spinner("Searching configurations…"):
                ss["sz_result"] = _cached_size(json.dumps(req, sort_keys=True))
            ss["sz_error"] = None
        except ScenarioError as err:
            ss["sz_result"], ss["sz_error"] = None, f"{err.field}: {err.reason}"
        ss["sz_request"] = req
    if ss.get("sz_error"):
        st.error(plain(ss["sz_error"]))


def render(catalog) -> None:
    _init(catalog)
    _follow_sidebar(catalog)
    ss = st.session_state
    link_note = st.empty()  # filled below once this run's search has or has not started
    st.radio("Cost", ["rent", "own"], key="sz_cost_mode", **KEEP, horizontal=True,
             help="rent: catalog $/GPU-hour; own: capex amortized + power + hosting")
    submitted = _request_form(catalog, ss, load_presets())
    request = _request_from_widgets(catalog)
    if not submitted:  # a search child prepares the form's request while the user reads it (search_runner)
        prestart(json.dumps(request, sort_keys=True))
    _run_search(request, submitted)
    if ss.get("sz_link_filled"):  # the search a link filled has not run yet
        link_note.info("The link filled in this search: press **Find the cheapest fleet** to run it.")
    result = ss.get("sz_result")
    if not result:
        st.caption(
            "Each option runs as many replicas as the traffic needs at its confirmed rate: the highest "
            "request rate per replica whose TTFT and ITL at the objective's percentile (and mean TPOT, when "
            "given) meet the objectives in the serving model, with the wait for a sequence slot, and across "
            "the scheduler simulation's range, within the headroom. See README, 'How sizing works'."
        )
        return
    request = ss["sz_request"]
    link = json.dumps(request, separators=(",", ":"))
    if st.query_params.get(SIZE_PARAM) != link:
        st.query_params[SIZE_PARAM] = link
    _summary(result, request)
    if not result["options"]:
        st.error(no_option_line(result["infeasible"]))
    else:
        _options_view(result, request, catalog)
    if result["infeasible"]:
        with st.expander(f"Candidates that could not work ({len(result['infeasible'])})"):
            st.dataframe(pd.DataFrame(result["infeasible"]), width="stretch")
