"""One scenario across the views (issue 31): what Size a fleet and Power & fleets take from the sidebar —
model, precisions, lengths, context, the traffic target and its shape (arrival and length CVs, prefix cache
hits), and the objective (its mean TPOT bound included). Each view follows the sidebar whenever these change;
inputs of its own (GPUs searched, budgets, tiers) stay as the user set them."""

from __future__ import annotations

from typing import Any

import streamlit as st

from planner.contract.equal_service import DEFAULT_TRAFFIC_REQUESTS_PER_S
from planner.serving.operating_point import DEFAULT_OBJECTIVE
from planner.serving.sizing_request import SHAPE_FIELDS
from ui import widget_state


def traffic_target() -> float:
    """The sidebar's traffic target (requests/s over all replicas)."""
    return float(st.session_state.get("traffic_rps", DEFAULT_TRAFFIC_REQUESTS_PER_S))


def workload(scenario: dict[str, Any] | None = None) -> dict[str, Any]:
    """The sidebar's model, precisions, lengths, traffic and objective, as the fleet views use them."""
    scenario = scenario if scenario is not None else widget_state.read_scenario()
    load = scenario.get("load") or {}
    slo = load.get("slo") or {}
    tpot = {"tpot_ms": float(slo["tpot_ms"])} if slo.get("tpot_ms") else {}
    return {
        "model": scenario["model"], "weights": scenario.get("weights", "bf16"),
        "kv_cache": scenario.get("kv_cache", "bf16"), "context_len": scenario.get("context_len"),
        "prompt_len": int(scenario.get("prompt_len", 1024)),
        "output_len": int(scenario.get("output_len", 256)),
        "requests_per_s": traffic_target(),
        "slo": {
            "ttft_ms": float(slo.get("ttft_ms") or DEFAULT_OBJECTIVE.ttft_ms or 1000.0),
            "itl_ms": float(slo.get("itl_ms") or DEFAULT_OBJECTIVE.itl_ms or 50.0),
            "percentile": int(slo.get("percentile") or DEFAULT_OBJECTIVE.percentile), **tpot,
        },
        "shape": {k: float(load[k]) for k in SHAPE_FIELDS if load.get(k) is not None},
    }


def with_workload(request: dict[str, Any], wl: dict[str, Any]) -> dict[str, Any]:
    """A sizing request (planner.serving.sizing) carrying the sidebar's workload; its search space (GPUs,
    TPs, modes, cost) kept."""
    out = {**request, "model": wl["model"], "slo": dict(wl["slo"]), "weights": [wl["weights"]],
           "kv_cache": [wl["kv_cache"]],
           "traffic": {"requests_per_s": wl["requests_per_s"], "prompt_len": wl["prompt_len"],
                       "output_len": wl["output_len"], **wl.get("shape", {})}}
    if wl.get("context_len"):
        out["context_len"] = int(wl["context_len"])
    else:
        out.pop("context_len", None)
    return out


def traffic_shape(traffic: dict[str, Any] | None) -> dict[str, Any]:
    """The shape fields of a sizing request's `traffic` (none of them: Poisson arrivals, fixed lengths)."""
    return {k: traffic[k] for k in SHAPE_FIELDS if (traffic or {}).get(k) is not None}


def shape_words(shape: dict[str, Any]) -> str:
    """The shape in words ("" for the default: Poisson arrivals, fixed lengths, no prefix hits)."""
    names = {"arrival_cv": "arrival CV", "prompt_len_cv": "prompt length CV",
             "output_len_cv": "output length CV", "prefix_cache_hit": "prefix cache hits"}
    defaults = {"arrival_cv": 1.0}
    parts = [f"{names[k]} {float(v):g}" for k, v in shape.items() if float(v) != defaults.get(k, 0.0)]
    return ", ".join(parts)


def changed(key: str, wl: dict[str, Any]) -> bool:
    """Whether the sidebar's workload differs from the one view `key` last took (and remember it)."""
    ss = st.session_state
    if ss.get(key) == wl:
        return False
    ss[key] = wl
    return True
