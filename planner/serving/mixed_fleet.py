"""Mixed fleets: the cheapest two pools of (possibly) different GPU types and layouts for a length
distribution, with requests routed by prompt length (prompt <= threshold to pool A, else pool B),
against the best single type. After Mélange (Griggs et al., 2024, "Mélange: Cost Efficient Large
Language Model Serving by Exploiting GPU Heterogeneity"): GPU types differ in cost per request by
request length, so a mix can serve a distribution for less than any one type.

Method: the distribution becomes length classes (a histogram as given; a lognormal cut into equal-
probability prompt bins). For each class, the sizing search (planner.serving.sizing.search, its physics
unchanged) gives each candidate family's goodput per replica at that class's lengths. A pool serving a set
of classes needs sum_k(rate_k / goodput_k) replicas, rounded up once for the pool: replicas share
their time between classes in proportion to the load they carry (Mélange's fractional bucket assignment);
a stated approximation of a mixed-length replica. The cheapest split is searched over every threshold
and every pair of families (pure function `cheapest_split`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from planner.core.errors import ScenarioError, from_validation_error
from planner.economics.cost import usd_per_million_tokens
from planner.serving.request_bounds import MAX_FULL_FAMILY_PLANS, check_work
from planner.serving.sizing import families as family_count
from planner.serving.sizing import parse_sizing, search

INFEASIBLE = math.inf


class LengthBin(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    prompt_len: int = Field(ge=1, le=10_000_000)
    output_len: int = Field(ge=1, le=10_000_000)
    weight: float = Field(gt=0, le=1e12)
    # the class's own TTFT objective (a long prompt's prefill alone takes seconds); absent: slo.ttft_ms
    ttft_ms: float | None = Field(default=None, gt=0, le=1e7)


class Lognormal(BaseModel):
    """Prompt and output lengths, each lognormal (median and log-space sigma), independent."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    prompt_median: float = Field(ge=1, le=10_000_000)
    prompt_sigma: float = Field(ge=0, le=5)
    output_median: float = Field(ge=1, le=10_000_000)
    output_sigma: float = Field(ge=0, le=5)
    bins: int = Field(default=6, ge=1, le=32)


class LengthDistribution(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    histogram: list[LengthBin] | None = Field(default=None, min_length=1, max_length=64)
    lognormal: Lognormal | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> LengthDistribution:
        if (self.histogram is None) == (self.lognormal is None):
            raise ValueError("give exactly one of 'histogram' and 'lognormal'")
        return self


class MixedFleetRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    model: str | dict[str, Any]
    requests_per_s: float = Field(ge=1e-6, le=1e7)
    lengths: LengthDistribution
    slo: dict[str, Any]
    gpus: list[str | dict[str, Any]] | None = Field(default=None, min_length=1, max_length=100)
    tp: list[int] | None = None
    weights: list[str] | None = None
    kv_cache: list[str] | None = None
    usd_per_gpu_hour: dict[str, float] | None = None
    cost_mode: Literal["rent", "own"] = "rent"


@dataclass(frozen=True)
class LengthClass:
    prompt_len: int
    output_len: int
    share: float  # of the requests
    ttft_ms: float | None = None  # the class's own TTFT objective, else the request's


def lognormal_classes(d: Lognormal) -> list[LengthClass]:
    """`bins` equal-probability prompt bins, each at the prompt length of its middle quantile; the output
    length is independent of the prompt, so every class carries the output's mean exp(mu + sigma^2 / 2)."""
    unit = NormalDist()
    output = max(round(d.output_median * math.exp(d.output_sigma ** 2 / 2.0)), 1)
    out = []
    for i in range(d.bins):
        q = (i + 0.5) / d.bins
        prompt = max(round(d.prompt_median * math.exp(d.prompt_sigma * unit.inv_cdf(q))), 1)
        out.append(LengthClass(prompt, output, 1.0 / d.bins))
    return out


def histogram_classes(bins: list[LengthBin]) -> list[LengthClass]:
    total = sum(b.weight for b in bins)
    return [LengthClass(b.prompt_len, b.output_len, b.weight / total, b.ttft_ms) for b in bins]


def merge_by_prompt(classes: list[LengthClass]) -> list[LengthClass]:
    """Sorted by prompt length (routing cuts on it); equal classes (lengths and objective) merged."""
    merged: dict[tuple[int, int, float | None], float] = {}
    for c in classes:
        key = (c.prompt_len, c.output_len, c.ttft_ms)
        merged[key] = merged.get(key, 0.0) + c.share
    order = sorted(merged, key=lambda k: (k[0], k[1], math.inf if k[2] is None else k[2]))
    return [LengthClass(p, o, merged[p, o, t], t) for p, o, t in order]


def pool_replicas(rates: list[float], goodputs: list[float]) -> float:
    """Replicas a pool needs for these classes: ceil(sum rate_k / goodput_k); inf if one has no goodput."""
    load = 0.0
    for rate, goodput in zip(rates, goodputs, strict=True):
        if rate <= 0:
            continue
        if not goodput > 0:
            return INFEASIBLE
        load += rate / goodput
    return float(math.ceil(load * (1 - 1e-12))) if load > 0 else 0.0


@dataclass(frozen=True)
class Split:
    """Pool A (classes[:threshold_index]) on family a, pool B (the rest) on family b; a = b = single type."""

    threshold_index: int
    family_a: int
    family_b: int
    replicas_a: float
    replicas_b: float
    usd_per_hour: float


def cheapest_split(rates: list[float], goodput: list[list[float]], replica_usd_per_hour: list[float]
                   ) -> tuple[Split | None, Split | None]:
    """(cheapest two-pool split by prompt threshold, cheapest single family). `goodput[f][k]`: family f's
    goodput per replica (req/s) on class k (classes sorted by prompt length); 0 where it cannot serve it."""
    families, k = len(goodput), len(rates)
    single: Split | None = None
    for f in range(families):
        n = pool_replicas(rates, goodput[f])
        cost = n * replica_usd_per_hour[f]
        if math.isfinite(cost) and (single is None or cost < single.usd_per_hour):
            single = Split(k, f, f, n, 0.0, cost)
    best: Split | None = None
    for t in range(1, k):
        for fa in range(families):
            na = pool_replicas(rates[:t], goodput[fa][:t])
            if not math.isfinite(na):
                continue
            for fb in range(families):
                nb = pool_replicas(rates[t:], goodput[fb][t:])
                cost = na * replica_usd_per_hour[fa] + nb * replica_usd_per_hour[fb]
                if math.isfinite(cost) and (best is None or cost < best.usd_per_hour):
                    best = Split(t, fa, fb, na, nb, cost)
    if single is not None and (best is None or single.usd_per_hour <= best.usd_per_hour * (1 + 1e-9)):
        best = single  # no split beats one type
    return best, single


def parse_mixed_fleet(data: Any) -> MixedFleetRequest:
    if not isinstance(data, dict):
        raise ScenarioError("request", "must be a JSON object")
    try:
        return MixedFleetRequest.model_validate(data)
    except ValidationError as err:
        raise from_validation_error(err) from None


def _sizing_for(req: MixedFleetRequest, c: LengthClass) -> dict[str, Any]:
    slo = req.slo if c.ttft_ms is None else {**req.slo, "ttft_ms": c.ttft_ms}
    s: dict[str, Any] = {
        "model": req.model, "slo": slo, "cost_mode": req.cost_mode, "max_options": 100_000,
        "traffic": {
            "requests_per_s": max(req.requests_per_s * c.share, 1e-6), "prompt_len": c.prompt_len,
            "output_len": c.output_len,
        },
    }
    for key in ("gpus", "tp", "weights", "kv_cache", "usd_per_gpu_hour"):
        if getattr(req, key) is not None:
            s[key] = getattr(req, key)
    return s


Family = tuple[Any, ...]  # a configuration: (gpu, tp, pp, ep, weights, kv_cache)


def _goodput_table(req: MixedFleetRequest, classes: list[LengthClass]) -> tuple[dict[Family, dict[str, Any]],
                                                                              dict[Family, list[float]]]:
    """Each configuration the sizing search finds at any class's lengths, and its goodput per class (0 where
    it does not meet the objective at that class)."""
    families: dict[Family, dict[str, Any]] = {}
    table: dict[Family, list[float]] = {}
    for k, c in enumerate(classes):
        try:
            sizing = parse_sizing(_sizing_for(req, c))
        except ScenarioError as err:
            raise ScenarioError(
                f"lengths (class {k}: prompt {c.prompt_len}, output {c.output_len}): {err.field}", err.reason
            ) from None
        if k == 0:  # a search per class over the same lists: the sizing bound on them all (issue 32)
            check_work([family_count(sizing)] * len(classes), limit=MAX_FULL_FAMILY_PLANS)
        options, _, _, _ = search(sizing)
        for o in options:
            key = (o["gpu"], o["tp"], o["pp"], o["ep"], o["weights"], o["kv_cache"])
            if key not in families:
                families[key] = {
                    "gpu": o["gpu"], "tp": o["tp"], "pp": o["pp"], "ep": o["ep"], "weights": o["weights"],
                    "kv_cache": o["kv_cache"], "gpus_per_replica": o["gpus_per_replica"],
                    "usd_per_replica_hour": o["gpus_per_replica"] * o["usd_per_gpu_hour"],
                }
                table[key] = [0.0] * len(classes)
            table[key][k] = max(table[key][k], float(o["goodput_request_rate"]))
    return families, table


def _describe(s: Split | None, families: list[dict[str, Any]], rates: list[float],
              classes: list[LengthClass]) -> dict[str, Any] | None:
    """A split as its pools (replicas, GPUs, $/h, the classes each serves) and its routing rule."""
    if s is None:
        return None

    def pool(f: int, n: float, members: list[int]) -> dict[str, Any]:
        fam = families[f]
        return {**fam, "replicas": int(n), "gpus_total": int(n) * fam["gpus_per_replica"],
                "usd_per_hour": n * fam["usd_per_replica_hour"], "classes": members,
                "requests_per_s": sum(rates[i] for i in members)}

    t = s.threshold_index
    pools = [pool(s.family_a, s.replicas_a, list(range(t)))]
    if t < len(classes):
        pools.append(pool(s.family_b, s.replicas_b, list(range(t, len(classes)))))
    return {"usd_per_hour": s.usd_per_hour, "pools": pools,
            "route": (None if t >= len(classes) else
                      {"prompt_len_threshold": classes[t - 1].prompt_len,
                       "rule": f"prompt_len <= {classes[t - 1].prompt_len} to pool 0, else pool 1"})}


def mixed_fleet(data: Any) -> dict[str, Any]:
    req = parse_mixed_fleet(data)
    lengths = req.lengths
    raw = histogram_classes(lengths.histogram) if lengths.histogram is not None else (
        lognormal_classes(lengths.lognormal) if lengths.lognormal is not None else [])
    classes = merge_by_prompt(raw)
    families, table = _goodput_table(req, classes)
    keys = list(families)
    rates = [req.requests_per_s * c.share for c in classes]
    best, single = cheapest_split(
        rates, [table[f] for f in keys], [families[f]["usd_per_replica_hour"] for f in keys]
    )
    total_tokens = sum(r * c.output_len for r, c in zip(rates, classes, strict=True))
    by_index = [families[f] for f in keys]
    mix, one = _describe(best, by_index, rates, classes), _describe(single, by_index, rates, classes)
    for d in (mix, one):
        if d is not None:
            d["usd_per_million_output_tokens"] = usd_per_million_tokens(d["usd_per_hour"], total_tokens)
    return {
        "classes": [
            {"prompt_len": c.prompt_len, "output_len": c.output_len, "share": c.share, "requests_per_s": r,
             "ttft_ms": c.ttft_ms if c.ttft_ms is not None else req.slo.get("ttft_ms")}
            for c, r in zip(classes, rates, strict=True)
        ],
        "goodput_table": [{**families[f], "goodput_request_rate_by_class": table[f]} for f in keys],
        "mixed": mix, "best_single": one,
        "saving": (
            None
            if mix is None or one is None or one["usd_per_hour"] <= 0
            else 1.0 - mix["usd_per_hour"] / one["usd_per_hour"]
        ),
        "assumptions": {
            "routing": "by prompt length: classes up to the threshold to pool 0, the rest to pool 1",
            "pool_replicas": "ceil(sum over its classes of rate / goodput at that class's lengths) "
            "(Mélange's "
            "fractional assignment; a replica's time shared between classes)",
            "goodput": "planner.serving.sizing's search at each class's lengths (its SLO and percentile; a "
                       "class's own ttft_ms where the histogram gives one)",
        },
    }
