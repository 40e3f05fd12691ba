"""Configurations compared at equal service: each at its own goodput under one latency objective, and the
fleet each needs for one traffic target, sized by the sizing search's own function for one configuration
(planner.serving.sizing.evaluate_family), so that the plan, the comparison and the sizing page agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from planner.contract.planning import Plan, plan
from planner.core.errors import ScenarioError
from planner.scenario.scenario import Scenario, ServiceObjective, parse_scenario
from planner.serving.sizing import LayoutCandidate, evaluate_family, gpu_key, parse_sizing
from planner.serving.sizing_request import SHAPE_FIELDS

DEFAULT_TRAFFIC_REQUESTS_PER_S = 50.0  # a mid-size chat service: ~4.3 M requests a day
# The sizing request needs both bounds; an objective without one is held to this (the contract's maximum).
NO_BOUND_MS = 1e7
# Comparing at one common request rate (the alternative to equal service): this share of the lowest
# capacity among the configurations, so that every one of them is stable there.
COMMON_RATE_FRACTION = 0.7


def at_objective(scenario: dict[str, Any], slo: ServiceObjective) -> dict[str, Any]:
    """The scenario run at its goodput under `slo` (its traffic shape kept, its operating point replaced)."""
    load = {k: v for k, v in (scenario.get("load") or {}).items()
            if k not in ("request_rate", "concurrency", "slo", "at_goodput")}
    return {**scenario, "load": {**load, "slo": slo.model_dump(exclude_none=True), "at_goodput": True}}


def at_rate(scenario: dict[str, Any], rate: float) -> dict[str, Any]:
    """The scenario at `rate` requests/s per replica (its traffic shape and objective kept)."""
    load = {k: v for k, v in (scenario.get("load") or {}).items()
            if k not in ("request_rate", "concurrency", "at_goodput")}
    return {**scenario, "load": {**load, "request_rate": rate}}


def common_rate(capacities: list[float | None]) -> float | None:
    """One request rate every configuration holds: COMMON_RATE_FRACTION of the lowest capacity."""
    caps = [c for c in capacities if c]
    return COMMON_RATE_FRACTION * min(caps) if caps else None


@dataclass(frozen=True)
class Fleet:
    """What one configuration needs for a traffic target (the sizing search's option), or why it can't."""

    replicas: int | None
    gpus: int | None
    usd_per_hour: float | None
    usd_per_million_output_tokens: float | None
    request_rate_per_replica: float | None
    reason: str | None = None


def fleet_for(scenario: Scenario | dict[str, Any], requests_per_s: float, slo: ServiceObjective) -> Fleet:
    """The fewest replicas of this one configuration that serve `requests_per_s` within `slo`: the sizing
    search's evaluate_family on the scenario's own GPU, layout and precisions (its first option, the
    highest goodput per replica)."""
    s = scenario if isinstance(scenario, Scenario) else parse_scenario(scenario)
    shape = (
        {
            k: getattr(s.load, k)
            for k in SHAPE_FIELDS
            if k in s.load.model_fields_set
        }
        if s.load is not None
        else {}
    )
    key = gpu_key(s.gpu)
    request: dict[str, Any] = {
        "model": s.model, "gpus": [s.gpu], "tp": [s.tp], "pp": [s.pp], "ep": [s.ep], "weights": [s.weights],
        "kv_cache": [s.kv_cache], "memory": s.memory.model_dump(),
        "efficiency": s.efficiency if isinstance(s.efficiency, str) else s.efficiency.model_dump(),
        "traffic": {"requests_per_s": float(requests_per_s), "prompt_len": s.prompt_len,
                    "output_len": s.output_len, **shape},
        "slo": {"ttft_ms": float(slo.ttft_ms or NO_BOUND_MS), "itl_ms": float(slo.itl_ms or NO_BOUND_MS),
                "percentile": slo.percentile}}
    if s.context_len is not None:
        request["context_len"] = s.context_len
    if s.compute is not None:  # the plan's own GEMM precision (e.g. fp4 weights computed in bf16 on Hopper)
        request["compute"] = s.compute
    if s.usd_per_gpu_hour is not None:
        request["usd_per_gpu_hour"] = {key: float(s.usd_per_gpu_hour)}
    req = parse_sizing(request)
    result = evaluate_family(req, LayoutCandidate(key, s.gpu, s.tp, s.weights, s.kv_cache, pp=s.pp, ep=s.ep,
                                                         compute=req.compute))
    if not result.options:
        return Fleet(None, None, None, None, None, result.reason or "no fleet meets the objective")
    o = result.options[0]
    return Fleet(o["replicas"], o["gpus_total"], o["usd_per_hour"], o["usd_per_million_output_tokens"],
                 o["request_rate_per_replica"])


@dataclass(frozen=True)
class AtEqualService:
    """One configuration at its goodput under the shared objective, and its fleet for the traffic."""

    scenario: dict[str, Any]
    plan: Plan | None
    fleet: Fleet
    rank: int | None  # 1 = cheapest $/M for the traffic; None when no fleet meets the objective


def compare_at_equal_service(scenarios: list[dict[str, Any]], slo: ServiceObjective,
                             requests_per_s: float) -> list[AtEqualService]:
    """Each configuration at its own goodput under `slo` and its fleet for `requests_per_s`, in the given
    order, ranked by the fleet's $ per million output tokens (ties: fewer GPUs)."""
    rows: list[tuple[dict[str, Any], Plan | None, Fleet]] = []
    for s in scenarios:
        point = at_objective(s, slo)
        try:
            p = plan(point)
        except ScenarioError as err:
            rows.append((point, None, Fleet(None, None, None, None, None, f"{err.field}: {err.reason}")))
            continue
        fleet = (fleet_for(point, requests_per_s, slo) if p.memory.fits else
                 Fleet(None, None, None, None, None, "does not fit in memory"))
        rows.append((point, p, fleet))
    priced = sorted((i for i, (_, _, f) in enumerate(rows) if f.usd_per_million_output_tokens is not None),
                    key=lambda i: (rows[i][2].usd_per_million_output_tokens, rows[i][2].gpus))
    rank = {i: r + 1 for r, i in enumerate(priced)}
    return [AtEqualService(s, p, f, rank.get(i)) for i, (s, p, f) in enumerate(rows)]


__all__ = [
    "COMMON_RATE_FRACTION", "DEFAULT_TRAFFIC_REQUESTS_PER_S", "AtEqualService", "Fleet", "at_objective",
    "at_rate", "common_rate", "compare_at_equal_service", "fleet_for",
]
