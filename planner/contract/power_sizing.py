"""Sizing under a power envelope and InferenceX's cost tiers, over the sizing search's candidates.

Request (`python -m planner size-power`): {"sizing": <a sizing request>, "power": {...}}. The sizing
request goes to planner.serving.sizing unchanged (its physics and its options); this module only reads
each option's GPUs, goodput and latency and prices them in megawatts and in the chosen cost tier:
- objective "min_mw": the options that serve the traffic, fewest provisioned MW first (then $/hour);
  with `budget_mw`, only those within it.
- objective "max_goodput": for a `budget_mw`, each family's replicas that fit in it
  (floor(budget kW / kW per replica)), and the goodput and output tokens/s they serve, most first.
Cost tiers: "rent" (the sizing request's prices), "own" (the ownership model), or InferenceX's all-in
$/GPU-hour: "hyperscaler", "neocloud", "rental_3yr" (planner/data/power.toml [inferencex], sourced).
Provisioned kW per GPU: the catalog's (or power.py's fallback), or InferenceX's with `power_source`
"inferencex".
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gpu_catalog import load_catalog
from planner.core.errors import ScenarioError, from_validation_error
from planner.economics.cost import usd_per_million_tokens
from planner.economics.power import power_constants, power_spec
from planner.scenario.scenario import resolve_gpu
from planner.serving.request_bounds import MAX_FULL_FAMILY_PLANS, check_work
from planner.serving.sizing import SizingRequest, families, gpu_key, parse_sizing, search

CostTier = Literal["rent", "own", "hyperscaler", "neocloud", "rental_3yr"]
INFERENCEX_TIERS = ("hyperscaler", "neocloud", "rental_3yr")


class PowerSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    objective: Literal["min_mw", "max_goodput"] = "min_mw"
    budget_mw: float | None = Field(default=None, gt=0, le=100_000)
    cost_tier: CostTier = "rent"
    power_source: Literal["catalog", "inferencex"] = "catalog"
    max_results: int = Field(default=20, ge=1, le=10_000)


class PowerSizingRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    sizing: dict[str, Any]
    power: PowerSettings = Field(default_factory=PowerSettings)


def inferencex_gpu(gpu_key: str) -> dict[str, float] | None:
    """InferenceX's constants for a catalog id (power_kw and the three tiers' $/GPU-hour), or None."""
    entry = power_constants()["inferencex"]["gpus"].get(gpu_key)
    return {k: float(v) for k, v in entry.items()} if entry is not None else None


def kw_per_gpu(gpu_value: str | dict[str, Any], gpu_key: str, source: str) -> float | None:
    """All-in provisioned kW of one GPU: InferenceX's figure, or the catalog's (power.py's fallback)."""
    if source == "inferencex":
        entry = inferencex_gpu(gpu_key)
        return entry["power_kw"] if entry is not None else None
    spec, _ = resolve_gpu(gpu_value)
    return power_spec(spec).provisioned_kw_all_in


def tier_usd_per_gpu_hour(option: dict[str, Any], tier: str) -> float | None:
    """$/GPU-hour of an option under a tier: the option's own price for rent/own, InferenceX's otherwise."""
    if tier in ("rent", "own"):
        return float(option["usd_per_gpu_hour"])
    entry = inferencex_gpu(option["gpu"])
    return entry[tier] if entry is not None else None


def parse_power_sizing(data: Any) -> tuple[SizingRequest, PowerSettings]:
    if not isinstance(data, dict):
        raise ScenarioError("request", "must be a JSON object")
    try:
        req = PowerSizingRequest.model_validate(data)
    except ValidationError as err:
        raise from_validation_error(err) from None
    sizing = dict(req.sizing)
    if req.power.cost_tier == "own":
        sizing["cost_mode"] = "own"
    try:
        parsed = parse_sizing(sizing)
    except ScenarioError as err:
        raise ScenarioError(f"sizing.{err.field}", err.reason) from None
    if req.power.objective == "max_goodput" and req.power.budget_mw is None:
        raise ScenarioError("power.budget_mw", "is required for the objective max_goodput")
    return parsed, req.power


def _gpu_values(req: SizingRequest) -> dict[str, str | dict[str, Any]]:
    gpus = req.gpus if req.gpus is not None else list(load_catalog())
    return {gpu_key(g): g for g in gpus}


def price_in_power(
    option: dict[str, Any], kw_gpu: float, tier_price: float, output_len: int
) -> dict[str, Any]:
    """One sizing option in MW and in the tier's $: provisioned MW of its fleet, tokens/s per MW, $/hour."""
    gpus = int(option["gpus_total"])
    mw = gpus * kw_gpu / 1000.0
    tokens = float(option["request_rate_per_replica"]) * option["replicas"] * output_len
    usd_per_hour = gpus * tier_price
    return {
        "provisioned_mw": mw, "output_tokens_per_s_per_mw": tokens / mw, "usd_per_hour": usd_per_hour,
        "usd_per_million_output_tokens": usd_per_million_tokens(usd_per_hour, tokens),
    }


def within_budget(option: dict[str, Any], kw_gpu: float, budget_mw: float, tier_price: float,
                  output_len: int) -> dict[str, Any] | None:
    """The most replicas of an option's family that fit in `budget_mw`, each at the family's goodput."""
    kw_replica = int(option["gpus_per_replica"]) * kw_gpu
    replicas = math.floor(budget_mw * 1000.0 / kw_replica * (1 + 1e-12))
    if replicas < 1:
        return None
    goodput = replicas * float(option["goodput_request_rate"])
    gpus = replicas * int(option["gpus_per_replica"])
    usd_per_hour = gpus * tier_price
    tokens = goodput * output_len
    return {
        "replicas": replicas, "gpus_total": gpus,
        "goodput_request_rate_per_replica": float(option["goodput_request_rate"]),
        "provisioned_mw": gpus * kw_gpu / 1000.0, "goodput_request_rate": goodput,
        "output_tokens_per_s": tokens, "output_tokens_per_s_per_mw": tokens / (gpus * kw_gpu / 1000.0),
        "usd_per_hour": usd_per_hour,
        "usd_per_million_output_tokens": usd_per_million_tokens(usd_per_hour, tokens) if tokens > 0 else None,
    }


def size_power(data: Any) -> dict[str, Any]:
    req, power = parse_power_sizing(data)
    check_work([families(req)], limit=MAX_FULL_FAMILY_PLANS)  # every option is planned (issue 32)
    options, infeasible, searched, _ = search(req.model_copy(update={"max_options": 100_000}))
    values = _gpu_values(req)
    out_len = req.traffic.output_len
    rows: list[dict[str, Any]] = []
    skipped: list[dict[str, str]] = []
    best_by_family: dict[tuple[Any, ...], dict[str, Any]] = {}
    for o in options:
        label = f"{o['gpu']} tp{o['tp']} pp{o['pp']} ep{o['ep']} {o['weights']}/{o['kv_cache']}"
        kw = kw_per_gpu(values[o["gpu"]], o["gpu"], power.power_source)
        price = tier_usd_per_gpu_hour(o, power.cost_tier)
        if kw is None or price is None:
            what = "InferenceX power figure" if kw is None else f"InferenceX {power.cost_tier} price"
            skipped.append({"candidate": label, "reason": f"no {what} for {o['gpu']}"})
            continue
        base = {k: o[k] for k in ("gpu", "tp", "pp", "ep", "weights", "kv_cache", "batch", "gpus_per_replica",
                                  "itl_ms", "percentile", "goodput_request_rate")}
        base.update({"label": label, "kw_per_gpu": kw, "usd_per_gpu_hour": price})
        if power.objective == "min_mw":
            row = {**base, "replicas": o["replicas"], "gpus_total": o["gpus_total"],
                   "scenario": o["scenario"], **price_in_power(o, kw, price, out_len)}
            if power.budget_mw is None or row["provisioned_mw"] <= power.budget_mw * (1 + 1e-12):
                rows.append(row)
        else:
            family = (o["gpu"], o["tp"], o["pp"], o["ep"], o["weights"], o["kv_cache"])
            if (
                family in best_by_family
                and best_by_family[family]["goodput_request_rate"] >= o["goodput_request_rate"]
            ):
                continue
            assert power.budget_mw is not None  # parse_power_sizing requires it for this objective
            fit = within_budget(o, kw, power.budget_mw, price, out_len)
            if fit is not None:
                best_by_family[family] = {**base, **fit}
    if power.objective == "max_goodput":
        rows = sorted(best_by_family.values(), key=lambda r: (-r["goodput_request_rate"], r["usd_per_hour"]))
    else:
        rows.sort(key=lambda r: (r["provisioned_mw"], r["usd_per_hour"]))
    return {
        "objective": power.objective, "budget_mw": power.budget_mw, "cost_tier": power.cost_tier,
        "power_source": power.power_source, "searched": searched, "results": rows[: power.max_results],
        "feasible": len(rows), "infeasible": infeasible, "skipped": skipped,
        "assumptions": {
            "search": "planner.serving.sizing's candidates, goodput and latencies (unchanged)",
            "max_goodput": "replicas = floor(budget kW / (GPUs per replica x kW per GPU)), each at its "
            "family's goodput",
            "kw_per_gpu": (
                "InferenceX all-in kW per GPU"
                if power.power_source == "inferencex"
                else "catalog provisioned_kw_all_in, or 2.471 x TDP where the catalog has none"
            ),
            "cost_tier": power_constants()["inferencex"]["tier_labels"].get(power.cost_tier, power.cost_tier),
            "source": power_constants()["inferencex"]["source"],
        },
    }


def tokens_per_mw_at_interactivity(scenario: dict[str, Any], tps: list[int], itl_ms: float,
                                   kw_per_gpu_all_in: float,
                                   concurrencies: list[int] | None = None) -> dict[str, Any] | None:
    """InferenceX's figure of merit from the plan's serving model: over the given TPs, the closed-loop
    concurrency with the most tokens/s per GPU whose median ITL stays within `itl_ms` (per-user decode
    speed >= 1000 / itl_ms tok/s), and its total and output tokens/s per provisioned MW. `concurrencies`
    restricts the search to a benchmark's own sweep (InferenceX runs 4-128 only: its figure is the best
    of the points it ran, not of every batch the memory holds); None searches every batch that fits."""
    from planner.contract.planning import plan_dict  # the plan assembly: sizing's physics, not a copy

    best: dict[str, Any] | None = None
    for tp in tps:
        base = {**scenario, "tp": tp}
        try:
            max_batch = int(plan_dict({**base, "load": {"concurrency": 1}})["memory"]["max_batch"])
        except ScenarioError:
            continue

        def at(n: int, base: dict[str, Any] = base) -> dict[str, Any] | None:
            p = plan_dict({**base, "load": {"concurrency": n}})
            s = p["serving"]
            return (
                p if s["stable"] and s["itl_ms"]["p50"] is not None and s["itl_ms"]["p50"] <= itl_ms else None
            )

        if max_batch < 1 or at(1) is None:
            continue
        if concurrencies is None:
            lo, hi = 1, max_batch  # ITL grows with concurrency: bisect the last concurrency within the target
            while lo < hi:
                mid = (lo + hi + 1) // 2
                lo, hi = (mid, hi) if at(mid) is not None else (lo, mid - 1)
        else:
            within = [n for n in sorted(concurrencies) if n <= max_batch and at(n) is not None]
            if not within:
                continue
            lo = within[-1]
        p = at(lo)
        assert p is not None
        s = p["serving"]
        row = {"tp": tp, "concurrency": lo, "itl_ms_p50": s["itl_ms"]["p50"],
               "output_tokens_per_s_per_gpu": s["output_tokens_per_s_per_gpu"],
               "total_tokens_per_s_per_gpu": s["total_tokens_per_s_per_gpu"],
               "total_tokens_per_s_per_mw": s["total_tokens_per_s_per_gpu"] / kw_per_gpu_all_in * 1000.0,
               "output_tokens_per_s_per_mw": s["output_tokens_per_s_per_gpu"] / kw_per_gpu_all_in * 1000.0}
        if best is None or row["total_tokens_per_s_per_mw"] > best["total_tokens_per_s_per_mw"]:
            best = row
    return best
