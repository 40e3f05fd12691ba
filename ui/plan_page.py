"""The Plan view: headline figures, the share link, the charts, the time breakdown and the exports."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import streamlit as st

from gpu_catalog import load_catalog
from planner import Plan, ScenarioError, plan
from planner.contract.chart_data import chart_data
from planner.contract.equal_service import DEFAULT_TRAFFIC_REQUESTS_PER_S, Fleet, fleet_for
from planner.contract.planning import clean_json
from planner.serving.operating_point import DEFAULT_OBJECTIVE
from ui import charts, exports, figures, sizing_page, widget_state
from ui.text import plain
from ui.widget_state import KEEP


@st.cache_data(max_entries=256, show_spinner=False)
def _cached_plan(scenario_json: str) -> Plan:
    return plan(json.loads(scenario_json))


def plan_or_error(scenario: dict[str, Any]) -> tuple[Plan | None, ScenarioError | None]:
    """The plan (cached per scenario across sessions), or the input error that prevents it."""
    try:
        return _cached_plan(json.dumps(scenario, sort_keys=True)), None
    except ScenarioError as err:
        return None, err


@st.cache_data(max_entries=256, show_spinner=False)
def _cached_fleet(scenario_json: str, traffic: float) -> Fleet:
    scenario = json.loads(scenario_json)
    return fleet_for(scenario, traffic, figures.objective_of(scenario) or DEFAULT_OBJECTIVE)


@st.cache_data(max_entries=256, show_spinner=False)
def _chart_specs(scenario_json: str) -> dict[str, dict]:
    """The page's chart specs, per scenario across sessions (a rerun that changes nothing rebuilds none)."""
    return charts.plan_page_specs(chart_data(json.loads(scenario_json), _cached_plan(scenario_json)))


def _load(changes: dict[str, Any], scenario: dict[str, Any]) -> None:
    new = {**scenario, **changes}
    if "gpu" in changes:
        new.pop("usd_per_gpu_hour", None)  # the new GPU's catalog price
    widget_state.queue_scenario(new)


def _what_would_fit(p: Plan, scenario: dict[str, Any]) -> None:
    """Does not fit: say why, then what would, each one click away."""
    m = p.memory
    context = scenario.get("context_len") or int(scenario.get("prompt_len", 1024)) + int(
        scenario.get("output_len", 256)
    )
    st.error(
        f"The weights ({figures.gib(m.weights_gb_per_gpu)} per GPU) and one {context:,}-token "
        f"sequence do not fit in {figures.gib(m.usable_after_reserve_gb)} usable per GPU, so there is no "
        "latency, throughput or cost to show."
    )
    alt = p.fit_alternatives  # the plan's own answer (planner.contract.planning), laid out here
    catalog = load_catalog()
    st.markdown("**What would fit**")
    cols = st.columns(3)
    with cols[0]:
        if alt is not None and alt.smallest_tp:
            st.caption(f"The smallest TP that fits is **{alt.smallest_tp}**.")
            st.button(f"Use TP {alt.smallest_tp}", key="fit_tp", on_click=_load,
                      args=({"tp": alt.smallest_tp}, scenario))
        elif m.smallest_layout_that_fits and m.smallest_layout_that_fits.get("nodes_per_replica", 1) > 1:
            lay = m.smallest_layout_that_fits
            st.caption(f"No TP within one {p.gpu} server fits at this precision. Across "
                       f"{lay['nodes_per_replica']:,} servers: **TP {lay['tp']} x PP {lay['pp']}** "
                       f"({lay['gpus_per_replica']:,} GPUs per replica).")
            st.button(f"Use TP {lay['tp']} x PP {lay['pp']}", key="fit_layout", on_click=_load,
                      args=({"tp": lay["tp"], "pp": lay["pp"]}, scenario))
        else:
            st.caption("No TP fits at this precision: use lower-precision weights or a larger GPU.")
    # the most useful first: the scenario's own KV precision, then fp8 KV; never a wider KV than now (the
    # plan offers only the KV precisions an engine stores)
    kv_order = [str(scenario.get("kv_cache", "bf16")), "fp8"]
    precisions = sorted((c for c in (alt.precisions if alt is not None else []) if c.kv_cache in kv_order),
                        key=lambda c: kv_order.index(c.kv_cache))
    with cols[1]:
        st.caption(f"Precisions that fit at TP {p.tp} (weights/KV):" if precisions
                   else f"No weight/KV precision fits at TP {p.tp}.")
        for choice in precisions[:6]:
            st.button(
                f"{choice.weights} weights, {choice.kv_cache} KV",
                key=f"fit_prec_{choice.weights}_{choice.kv_cache}", on_click=_load,
                args=({"weights": choice.weights, "kv_cache": choice.kv_cache}, scenario),
            )
    gpus = sorted(alt.gpus if alt is not None else [], key=lambda c: c.tp)
    with cols[2]:
        st.caption("Catalog GPUs where it fits:" if gpus else "No catalog GPU holds it at this precision.")
        for choice in gpus[:8]:
            name = catalog[choice.gpu].name if choice.gpu in catalog else choice.gpu
            st.button(f"{name}, TP {choice.tp}", key=f"fit_gpu_{choice.gpu}_{choice.tp}", on_click=_load,
                      args=({"gpu": choice.gpu, "tp": choice.tp}, scenario))


WATERFALL_LABELS = {
    "device_total": "device total (as the framework sees it)", "framework_total": "framework total",
    "utilization_cap": "x gpu_memory_utilization = the engine's cap", "weights": "- weights as loaded",
    "rotary_tables": "- rotary cos/sin tables (logged with the weights)",
    "allocator_rounding": "- allocator rounding of the weight tensors (logged with the weights)",
    "activation_peak": "- activation peak of the profiling run",
    "non_torch": "- non-torch (NCCL, CUDA context)", "cuda_graphs": "- CUDA-graph pool",
    "reserve_override": "- reserve (memory.reserve_gb override)", "kv_cache": "= KV cache",
    "kv_shortfall": "shortfall: the terms above exceed the cap by",
}


def engine_memory(p: Plan) -> None:
    """vLLM's start-up lines as the operator will see them, and the waterfall they come from (issue 11)."""
    m = p.memory
    if not m.engine_log_lines:
        return
    rules = {"vllm": f"vLLM {m.vllm_version or ''}".strip(), "sglang": "SGLang", "trt-llm": "TensorRT-LLM",
             "graph": "the engine"}.get(m.engine_rules, m.engine_rules)
    st.caption(f"What {rules} should log at start-up for this plan (compare with your own log):")
    st.code("\n".join(m.engine_log_lines), language=None)
    with st.expander("Memory waterfall, term by term (GiB per GPU)"):
        rows = [(WATERFALL_LABELS.get(k, k), v) for k, v in (m.waterfall_gib or {}).items() if v is not None]
        frame = pd.DataFrame({"GiB": [v for _, v in rows]}, index=[k for k, _ in rows])
        st.dataframe(
            frame, width="stretch", column_config={"GiB": st.column_config.NumberColumn(format="%.2f")}
        )
        if m.max_concurrency is not None and m.max_model_len:
            st.caption(
                f"The KV cache holds {m.kv_cache_tokens or 0:,} tokens: {m.max_concurrency:,.1f} sequences "
                "of "
                f"the full {m.max_model_len:,} tokens ({rules} rules)."
            )
        if m.vllm_sampler:
            st.caption(
                f"The activation peak is the profiling run's larger step: the forward of "
                f"{m.max_num_batched_tokens:,} tokens, or the sampler over {m.max_num_seqs:,} rows of logits "
                f"({m.vllm_sampler} top-k/top-p path); lower max_num_seqs to shrink the latter."
            )


def deploy_and_benchmark(
    scenario: dict[str, Any], plan_json: dict[str, Any] | None, key: str = "cmd",
    fleet: dict[str, Any] | None = None,
) -> None:
    """The commands that deploy and benchmark this plan, and a benchmark result set beside it (issue 15).
    Behind toggles: work a reader does not open is not done. `fleet`: the disaggregated option opened from the
    sizing page (sizing_page.opened_fleet), whose whole launch set replaces its decode worker's commands."""
    from ui.commands_panel import render_bench_upload, render_commands_panel, render_fleet_commands_panel

    if fleet is not None:
        if st.toggle("Deploy and benchmark this fleet: prefill and decode workers, router, benchmark at the "
                     "fleet's rate", key=f"{key}_show", **KEEP):
            render_fleet_commands_panel(fleet["option"], fleet["request"], key=f"{key}_fleet")
    elif st.toggle("Deploy and benchmark this plan: engine commands, script, manifest, expected figures",
                   key=f"{key}_show", **KEEP):
        render_commands_panel(scenario, plan_json, key=key)
    # an opened fleet's plan is one decode worker's: a run through the router is compared with the fleet's
    # sheet above, a run of one decode worker at its rate with this plan
    what = "one decode worker's benchmark" if fleet is not None else "a benchmark you ran"
    if st.toggle(f"Compare with {what} (`vllm bench serve --save-result` JSON)", key=f"{key}_bench_show",
                 **KEEP):
        render_bench_upload(scenario, key=f"{key}_bench")


def _headline(scenario: dict[str, Any], result: Plan) -> None:
    """What is planned (model, GPUs, precisions, efficiency) and the button that pins it."""
    top = st.columns([2, 1])  # room for the button's label at 1,024 px
    params = f"{result.model.total_params / 1e9:,.1f}B params"
    if result.model.active_params < result.model.total_params:
        params += f", {result.model.active_params / 1e9:,.1f}B active per token"
    # preset and catalog names are ours; a custom model's or GPU's name is user text (a code span)
    model = result.model.name if isinstance(scenario["model"], str) else plain(result.model.name, 120)
    gpu = result.gpu if isinstance(scenario["gpu"], str) else plain(result.gpu, 120)
    top[0].markdown(
        f"**{model}** ({params}) on **{result.tp} x {gpu}** · "
        f"{scenario['weights']} weights · {scenario['kv_cache']} KV · efficiency {plain(result.efficiency)}"
        + (f" · calibration {plain(result.calibration)}" if result.calibration else "")
    )
    if top[1].button("Pin for comparison", key="pin_plan"):
        st.session_state.setdefault("pins", []).append(scenario)
        st.rerun()


def _share_box(query: str, link_refused: str | None) -> None:
    with st.expander("Share this scenario"):
        if link_refused:
            st.warning(f"This scenario's link {link_refused}: the address bar keeps the last shorter one. "
                       "Download the scenario JSON below to share it.")
        else:
            st.code("?" + query, language=None)
            st.caption("Copy this query string after the app's address (the address bar already holds it).")


def _time_breakdown(scenario: dict[str, Any], result: Plan) -> None:
    with st.expander("Where the time goes (ms)"):
        lat = result.latency
        keys = list(dict.fromkeys([*lat.decode_breakdown_ms, *lat.prefill_breakdown_ms]))
        frame = pd.DataFrame(
            {
                f"one decode step at batch {lat.batch:,}": [
                    lat.decode_breakdown_ms.get(k, 0.0) for k in keys
                ],
                f"prefill of {scenario.get('prompt_len', '')} tokens": [
                    lat.prefill_breakdown_ms.get(k, 0.0) for k in keys
                ],
            },
            index=[figures.breakdown_label(k) for k in keys],
        )
        st.dataframe(frame, width="stretch", column_config={c: st.column_config.NumberColumn(format="%.2f")
                                                            for c in frame.columns})


def render(scenario: dict[str, Any], result: Plan | None, error: ScenarioError | None, query: str,
           link_refused: str | None) -> None:
    if error is not None or result is None:
        st.error(
            f"**{plain(getattr(error, 'field', 'scenario'), 80)}**: {plain(getattr(error, 'reason', error))}"
        )
        st.caption("Fix that input; the rest of the scenario is kept.")
        return
    _headline(scenario, result)
    fleet, traffic = None, None
    slo = figures.objective_of(scenario)
    opened = sizing_page.opened_fleet(scenario)  # a disaggregated fleet from the sizing page: both pools
    if opened is not None:
        st.caption(f"Option {opened['number']} of the sizing page, a disaggregated fleet; the plan below is "
                   "one of its decode workers, at the rate each runs (the fleet's TTFT is the option's).")
        sizing_page.disaggregated_view(opened["option"], opened["request"], load_catalog(), opened["number"])
    elif result.memory.fits and slo is not None and (slo.ttft_ms is not None or slo.itl_ms is not None):
        traffic = float(st.session_state.get("traffic_rps", DEFAULT_TRAFFIC_REQUESTS_PER_S))
        fleet = _cached_fleet(json.dumps(scenario, sort_keys=True), traffic)
    figures.render(result, scenario, fleet, traffic)
    binding = result.serving.goodput_binding
    if result.memory.fits and result.serving.stable and binding is not None:
        # the planner's own sentence: objective names and figures, no user text
        st.caption("**What binds the goodput.** " + binding.text)
    if not result.memory.fits:
        _what_would_fit(result, scenario)
    _share_box(query, link_refused)
    specs = _chart_specs(json.dumps(scenario, sort_keys=True))
    if specs.get("frontier"):
        charts.show(specs["frontier"])
        c1, c2 = st.columns(2)
        if specs.get("ttft_vs_rate"):
            charts.show(specs["ttft_vs_rate"], c1)
        if specs.get("itl_vs_rate"):
            charts.show(specs["itl_vs_rate"], c2)
    charts.show(specs["memory"])
    engine_memory(result)
    if not result.memory.fits:  # no chart that implies a working deployment
        exports.render(scenario, clean_json(result.model_dump()), None)
        return
    c1, c2 = st.columns(2)
    charts.show(specs["roofline"], c1)
    charts.show(specs["intensity"], c2)
    c1, c2 = st.columns(2)
    charts.show(specs["itl"], c1)
    charts.show(specs["tokens"], c2)
    charts.show(specs["cost"])
    _time_breakdown(scenario, result)
    plan_json = clean_json(result.model_dump())
    deploy_and_benchmark(scenario, plan_json, fleet=opened)
    exports.render(scenario, plan_json, None)
