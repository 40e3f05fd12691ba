"""Sizing: the cheapest fleets that serve a traffic target within TTFT and ITL objectives at a percentile.

Search space: candidate GPUs x TP x weight precision x KV precision (a "family") x a cap on running
sequences per replica (`batch`, vLLM's max_num_seqs, up to the KV cache's max batch). Three steps:
`evaluate_family` (one configuration family through the serving model), `search` (every family) and
`pareto_mask` (the cost-latency frontier).

Load model: the plan's own serving model (planner.serving.serving, stated in README "How the serving model
works"): continuous batching with chunked prefill (`max_num_batched_tokens` 8192), Poisson arrivals,
fixed lengths. Each family's goodput is the highest request rate per replica whose TTFT and ITL at
the objective's percentile (default p90) meet the objectives; a cap on running sequences lowers it to
that cap's capacity where it binds. Replicas = ceil(traffic / goodput); each replica then runs at
traffic / replicas, and the option reports its latency percentiles there.
Cost: $/hour = GPUs x $/GPU-hour (rented, or owned: planner.economics.ownership), and $ per million output
tokens at the traffic actually served: the same figure `plan` gives for the option's `scenario`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from pydantic import ValidationError

from gpu_catalog import load_catalog
from planner.core.deployment import Deployment
from planner.core.errors import ScenarioError
from planner.economics.cost import usd_per_million_tokens
from planner.hardware.parallelism import cheapest_layout_that_fits, sharding, valid_tp
from planner.physics.memory import plan_memory
from planner.scenario.scenario import Scenario, resolve, resolve_model
from planner.serving.confirmed_rate import (
    ConfirmedRate,
    SizingObjective,
    band_high_ratio,
    confirmed_rate,
    why_not,
)
from planner.serving.cost_cutoff import CostCutoff
from planner.serving.floor_order import FloorOrder
from planner.serving.goodput_search import confirmed_bound_per_s, itl_percentiles, trickle_miss
from planner.serving.interference_bound import first_chunk_work_ms
from planner.serving.layout_memo import LayoutMemo, layout_key
from planner.serving.pareto import pareto_mask
from planner.serving.queue_bands import arrival_class, prompt_class
from planner.serving.replica import PrefillWork
from planner.serving.request_bounds import check_work
from planner.serving.serving import (
    Percentiles,
    ReplicaModel,
    latency_percentiles,
    load_point,
    replica_model,
)
from planner.serving.sizing_request import (
    DEFAULT_PERCENTILE,
    MIN_LOAD_SHARE,
    OPTIONS_PER_FAMILY,
    LayoutCandidate,
    SizingRequest,
    _gpu_price,
    gpu_key,
    parse_sizing,
)
from planner.serving.slot_wait import slot_wait, with_slot_wait_percentiles
from planner.serving.sweep import batch_caps
from planner.serving.workload import workload_for


def _families(req: SizingRequest, hints: list[dict[str, Any]] | None = None) -> list[LayoutCandidate]:
    """GPU x tp x pp x ep x weights x KV; ep > 1 only for a MoE model. Without a requested `pp`, each
    GPU and weight precision where no requested layout fits adds its cheapest layout (from `hints`)."""
    gpus = req.gpus if req.gpus is not None else list(load_catalog())
    eps = req.ep if resolve_model(req.model).moe is not None else [e for e in req.ep if e == 1] or [1]
    out = []
    for gpu in gpus:
        key = gpu_key(gpu)
        for tp in req.tp:
            for pp in req.pp:
                for ep in eps:
                    for w in req.weights:
                        for kv in req.kv_cache:
                            out.append(LayoutCandidate(key, gpu, tp, w, kv, pp=pp, ep=ep,
                                                       compute=req.compute))
    if "pp" not in req.model_fields_set:
        by_key = {gpu_key(g): g for g in gpus}
        have = {(f.gpu_key, f.tp, f.pp, f.ep, f.weights) for f in out}
        for hint in hints if hints is not None else fit_hints(req):
            layout = hint["smallest_layout_that_fits"]
            if layout is None or (hint["gpu"], layout["tp"], layout["pp"], layout["ep"],
                                  hint["weights"]) in have:
                continue
            for kv in req.kv_cache:
                out.append(LayoutCandidate(hint["gpu"], by_key[hint["gpu"]], layout["tp"], hint["weights"],
                                           kv, pp=layout["pp"], ep=layout["ep"], compute=req.compute))
    return out


def fit_hints(req: SizingRequest) -> list[dict[str, Any]]:
    """For each GPU and weight precision where even the request's largest TP cannot hold the weights and
    one sequence: the cheapest tp x pp x ep layout that can, across nodes when it must (null if none)."""
    hints = []
    context = req.context_len or req.traffic.prompt_len + req.traffic.output_len
    kv = min(req.kv_cache, key=lambda k: {"int4": 0, "fp8": 1, "int8": 1}.get(k, 2))
    common = {"model": req.model, "kv_cache": kv, "context_len": context,
              "prompt_len": req.traffic.prompt_len,
              "output_len": req.traffic.output_len, "memory": req.memory.model_dump()}
    for gpu in req.gpus if req.gpus is not None else list(load_catalog()):
        for weights in req.weights:
            try:
                d = resolve(Scenario.model_validate({**common, "gpu": gpu, "tp": 1, "weights": weights}))
                widest_tp = max([t for t in req.tp if valid_tp(d.model, t)] or [1])
                widest = resolve(Scenario.model_validate({**common, "gpu": gpu, "weights": weights,
                                                          "tp": widest_tp}))
            except (ScenarioError, ValidationError, ValueError):
                continue
            if plan_memory(widest, context).fits:
                continue
            fit = cheapest_layout_that_fits(d, lambda trial: plan_memory(trial, context).fits)
            layout = None if fit is None else {k: getattr(sharding(fit), k) for k in
                                               ("tp", "pp", "ep", "gpus_per_replica", "nodes_per_replica")}
            hints.append({"gpu": gpu_key(gpu), "weights": weights, "kv_cache": kv,
                          "smallest_layout_that_fits": layout})
    return hints


def _scenario_for(req: SizingRequest, fam: LayoutCandidate, batch: int | None = None) -> dict[str, Any]:
    s: dict[str, Any] = {
        "model": req.model, **fam.scenario_fields(),
        "context_len": req.context_len or req.traffic.prompt_len + req.traffic.output_len,
        "prompt_len": req.traffic.prompt_len, "output_len": req.traffic.output_len,
        "memory": req.memory.model_dump(), "efficiency": req.efficiency,
    }
    if req.usd_per_gpu_hour and fam.gpu_key in req.usd_per_gpu_hour:
        s["usd_per_gpu_hour"] = req.usd_per_gpu_hour[fam.gpu_key]
    if req.traffic.shape():
        s["load"] = req.traffic.shape()
    if batch is not None:
        s["batch"] = int(batch)
    return s


@dataclass
class FamilyResult:
    """One family through the serving model: its options, or why it has none, and how many caps it tried."""

    options: list[dict[str, Any]]
    reason: str | None
    searched: int


def _label(fam: LayoutCandidate) -> str:
    layout = f"tp{fam.tp}" + (f" pp{fam.pp}" if fam.pp > 1 else "") + (f" ep{fam.ep}" if fam.ep > 1 else "")
    return f"{fam.gpu_key} {layout} {fam.weights}/{fam.kv_cache}"


@dataclass
class _Prepared:
    """A family that fits, resolved, with a floor under the cost of any fleet it can give."""

    fam: LayoutCandidate
    base: dict[str, Any]
    scenario: Scenario
    d: Deployment
    max_batch: int
    caps: npt.NDArray[np.int_]
    price: float
    rent: float | None
    own: float | None
    # the cost floor: a bound on it (a bound on the prompt's prefill work) and the floor itself on demand
    floor_bound_usd_per_hour: float
    cost_floor_usd_per_hour: Callable[[], float]
    prefill_work: PrefillWork | None = None  # the layout's prefill work (LayoutMemo.prefill_work)
    trickle_miss: str | None = None  # why no rate meets the objective, where the step table shows it


@functools.lru_cache(maxsize=4096)
def _caps(max_batch: int) -> npt.NDArray[np.int_]:
    """Caps on running sequences searched: the batch grid up to the KV cache's max batch (read-only)."""
    caps = batch_caps(max_batch)
    caps.flags.writeable = False
    return caps


def _prepare(req: SizingRequest, fam: LayoutCandidate,
             memo: LayoutMemo | None = None) -> _Prepared | FamilyResult:
    """Resolve a family and check memory and price; the cost floor prices the fewest replicas the traffic
    could need: a replica's capacity is at most max_batch / ((O - 1) D(max_batch)) (the serving model's
    lambda(N) = N / ((O - 1) D(N) + N E[W]) grows with N and drops E[W] here), goodput at most its
    capacity."""
    t = req.traffic
    memo = memo if memo is not None else LayoutMemo()
    key = layout_key(fam.gpu_value, fam.tp, fam.pp, fam.ep, fam.weights, fam.kv_cache)
    try:
        base = _scenario_for(req, fam)
        scenario = Scenario.model_validate(base)
        d = memo.deployment(key, lambda: resolve(scenario))
    except (ScenarioError, ValidationError) as err:
        reason = f"{err.field}: {err.reason}" if isinstance(err, ScenarioError) else str(err).splitlines()[0]
        return FamilyResult([], reason, 0)
    mem = memo.memory(key, d, scenario.context_len_resolved)
    if not mem.fits:
        gib = mem.weights_gb_per_gpu * 1e9 / 2**30  # GiB, the unit the app shows (issue 31)
        return FamilyResult([], f"weights ({gib:.1f} GiB/GPU) and one sequence do not "
                                f"fit in {d.gpu.name} memory", 0)
    caps = _caps(mem.max_batch)
    rent, own = _gpu_price(req, fam.gpu_key, fam.gpu_value)
    price = own if req.cost_mode == "own" else rent
    if price is None:
        return FamilyResult([], "no price: give usd_per_gpu_hour for this GPU", len(caps))
    cached = t.prompt_len - max(round(t.prompt_len * (1.0 - t.prefix_cache_hit)), 1)
    steps = memo.bound_steps(key, d, mem.max_batch, scenario.mean_context)  # first: it times the empty step

    shape = (float(t.arrival_cv), t.prompt_len_cv > 0 or t.output_len_cv > 0, prompt_class(t.prompt_len))
    empty_ms, budget = memo.empty_iteration_ms(key, d), scenario.max_num_batched_tokens

    def floor(work_ms: float, exact: bool) -> float:  # larger work: higher (`exact`: the prompt's own work)
        chunk_ms = first_chunk_work_ms(work_ms, t.prompt_len - cached, budget, mem.max_batch)
        bound_per_s = confirmed_bound_per_s(d, scenario.mean_context, mem.max_batch, t.output_len, work_ms,
                                            steps, objective_of(req), shape, req.max_utilization,
                                            t.prompt_len_cv == 0, chunk_ms, empty_ms, exact)
        if not bound_per_s:
            return 0.0  # evaluated, so that it says why
        return math.ceil(t.requests_per_s / bound_per_s * (1 - 1e-9)) * sharding(d).gpus_per_replica * price

    return _Prepared(fam, base, scenario, d, mem.max_batch, caps, price, rent, own,
                     floor(memo.prefill_work_floor_ms(key, d, t.prompt_len, cached), False),
                     lambda: floor(memo.prefill_work_ms(key, d, t.prompt_len, cached), True),
                     memo.prefill_work(key, d),
                     trickle_miss(steps, objective_of(req), float(t.arrival_cv), t.output_len))


def evaluate_family(req: SizingRequest, fam: LayoutCandidate, lazy: bool = False) -> FamilyResult:
    """Goodput per replica for each cap on running sequences, the replicas the traffic needs, and the
    options at the rate each replica then runs at. `lazy`: options carry ITL only and a private
    `_finish` entry; `_finish(option)` fills TTFT and E2E (size does it for the options it returns)."""
    prep = _prepare(req, fam)
    return prep if isinstance(prep, FamilyResult) else _evaluate(req, prep, lazy)


def _replica_model(prep: _Prepared) -> ReplicaModel:
    w = workload_for(prep.scenario, prep.d, prep.max_batch)
    return replica_model(prep.d, w, max_population=prep.max_batch, prefill_work=prep.prefill_work)


def objective_of(req: SizingRequest) -> SizingObjective:
    return SizingObjective(req.slo.percentile, req.slo.ttft_ms, req.slo.itl_ms, req.slo.tpot_ms)


def _confirmed(req: SizingRequest, prep: _Prepared, m: ReplicaModel,
               above_usd: float = math.inf) -> ConfirmedRate:
    """The family's confirmed rate per replica (planner.serving.confirmed_rate) at its largest cap on running
    sequences: a smaller cap is never faster at the same rate (the same fast-model latencies, a longer wait
    for a slot), so its fleets are dominated by the largest cap's at the same replica count. Refined until
    the fewest replicas are settled, or (`above_usd`) until even the bracket's top rate's fleet costs more:
    then its fleets are never returned, and their cost only needs to stay above."""
    rate, usd_per_replica = req.traffic.requests_per_s, sharding(prep.d).gpus_per_replica * prep.price
    return confirmed_rate(m, int(prep.caps[-1]), objective_of(req), req.max_utilization,
                          lambda lo, hi: _replicas(rate, lo) == _replicas(rate, hi)
                          or _replicas(rate, hi) * usd_per_replica > above_usd)


def _evaluate(req: SizingRequest, prep: _Prepared, lazy: bool, m: ReplicaModel | None = None,
              confirmed: ConfirmedRate | None = None, returned_to_usd: float = math.inf) -> FamilyResult:
    """The family's fleets: its largest cap at the fewest replicas the confirmed rate allows, and at the next
    counts (_replica_counts). `m` and `confirmed`, when the caller has them. `returned_to_usd` (lazy): no
    option dearer than this is returned, so its ITL, which only ranks it, is left infinite."""
    t, fam, d, caps, base = req.traffic, prep.fam, prep.d, prep.caps, prep.base
    m = m if m is not None else _replica_model(prep)
    confirmed = confirmed if confirmed is not None else _confirmed(req, prep, m)
    pct = req.slo.percentile
    if not confirmed.lo > 0:
        return FamilyResult([], why_not(m, objective_of(req), confirmed), len(caps))
    price, rent, own = prep.price, prep.rent, prep.own
    layout = sharding(d)
    gpus_per_replica = layout.gpus_per_replica
    demand_tokens_per_s = t.requests_per_s * t.output_len
    cap = int(caps[-1])
    options: list[dict[str, Any]] = []
    for replicas in _replica_counts(t.requests_per_s, confirmed.lo):
        rate_per_ms = t.requests_per_s / replicas / 1000.0
        point = load_point(m, rate_per_ms, cap)
        usd_per_hour = replicas * gpus_per_replica * price
        if lazy:  # ITL ranks the options and draws the frontier; TTFT and E2E wait until returned
            unranked = usd_per_hour > returned_to_usd
            itl = Percentiles(math.inf, math.inf, math.inf) if unranked else itl_percentiles(m, point)
            ttft = e2e = Percentiles(None, None, None)
        else:
            ttft, itl, e2e = latency_percentiles(m, point)
        slo_out: dict[str, Any] = {"ttft_ms": req.slo.ttft_ms, "itl_ms": req.slo.itl_ms, "percentile": pct}
        if req.slo.tpot_ms is not None:
            slo_out["tpot_ms"] = req.slo.tpot_ms
        scenario_out = {**base, "batch": cap, "load": {
            **req.traffic.shape(), "request_rate": rate_per_ms * 1000.0, "slo": slo_out}}
        options.append({
            "gpu": fam.gpu_key, "tp": fam.tp, "weights": fam.weights, "kv_cache": fam.kv_cache,
            "batch": cap, "replicas": replicas, "gpus_total": replicas * gpus_per_replica,
            "pp": fam.pp, "ep": fam.ep, "gpus_per_replica": gpus_per_replica,
            "nodes_per_replica": layout.nodes_per_replica,
            "ttft_ms": ttft.at(pct), "itl_ms": itl.at(pct), "itl_ms_under_load": itl.at(pct),
            "e2e_ms": e2e.at(pct), "percentile": pct,
            "ttft_ms_p50": ttft.p50, "itl_ms_p50": itl.p50,
            "request_rate_per_replica": rate_per_ms * 1000.0,
            "goodput_request_rate": confirmed.lo * 1000.0,
            "confirmed_binding": confirmed.binding,
            "max_request_rate": confirmed.capacity * 1000.0,
            "utilization": rate_per_ms / confirmed.capacity,
            "tpot_ms": float(point.iteration_ms),
            "output_tokens_per_s": rate_per_ms * 1000.0 * t.output_len, "usd_per_hour": usd_per_hour,
            "usd_per_million_output_tokens": usd_per_million_tokens(usd_per_hour, demand_tokens_per_s),
            "usd_per_gpu_hour": price, "rent_usd_per_gpu_hour": rent, "own_usd_per_gpu_hour": own,
            "prefill_share": float(point.prefill_share),
            "scenario": scenario_out,
        })
        options[-1]["_finish"] = (m, point, None if lazy and unranked else itl, cap)
        if not lazy:
            _finish(options[-1])
    return FamilyResult(options, None, len(caps))


def _replica_counts(requests_per_s: float, confirmed_per_ms: float) -> range:
    """A family's fleets: the fewest replicas, then one or two more while each replica still serves at least
    MIN_LOAD_SHARE of the confirmed rate (a trickle gets one fleet)."""
    fewest = _replicas(requests_per_s, confirmed_per_ms)
    most = min(fewest + OPTIONS_PER_FAMILY - 1,
               math.floor(requests_per_s / (MIN_LOAD_SHARE * confirmed_per_ms * 1000.0) * (1 + 1e-12)))
    return range(fewest, max(most, fewest) + 1)


def _replicas(requests_per_s: float, goodput_per_ms: float) -> int:
    return max(1, math.ceil(requests_per_s / (goodput_per_ms * 1000.0) * (1 - 1e-12)))  # a denormal rate: 1


def _finish(option: dict[str, Any]) -> None:
    """Fill an option's TTFT and E2E percentiles (with the ITL figures it ranked by), the slot wait and the
    simulated range at its rate."""
    m, point, itl, cap = option.pop("_finish")
    pct = option["percentile"]
    ttft, itl, e2e = latency_percentiles(m, point, itl)
    probability, mean = slot_wait(m, np.array([point.rate_per_ms]), cap)
    waited, e2e = with_slot_wait_percentiles(m, point, ttft, e2e, float(probability[0]), float(mean[0]))
    option.update({"ttft_ms": waited.at(pct), "itl_ms": itl.at(pct), "itl_ms_under_load": itl.at(pct),
                   "e2e_ms": e2e.at(pct), "ttft_ms_p50": waited.p50, "itl_ms_p50": itl.p50})
    load = np.array([option["utilization"]])
    ranges: dict[str, float | None] = {}
    banded = arrival_class(m.workload.arrival_cv) is not None  # else no simulated range: null
    for name, fig, least in (("ttft", ttft.at(pct), waited.at(pct) or math.inf), ("itl", itl.at(pct), 0.0)):
        ratio = float(band_high_ratio(m, f"{name}_p{pct}", load)[0])  # TTFT's top holds the slot wait too
        known = banded and fig is not None and math.isfinite(ratio)
        ranges[f"{name}_ms_simulated_high"] = max(fig * ratio, least) if known and fig is not None else None
    option.update(ranges, slot_wait_probability=float(probability[0]),
                  slot_wait_mean_ms=float(mean[0]) if probability[0] > 0 else 0.0)


def prepared_families(req: SizingRequest, hints: list[dict[str, Any]] | None,
                       memo: LayoutMemo | None) -> tuple[list[_Prepared], list[dict[str, str]], int]:
    """Every family resolved and checked for memory and price: (those to evaluate, the infeasible ones with
    their reason, configurations searched so far)."""
    prepared: list[_Prepared] = []
    infeasible: list[dict[str, str]] = []
    searched = 0
    for fam in _families(req, hints):
        prep = _prepare(req, fam, memo)
        if isinstance(prep, FamilyResult):
            searched += prep.searched
            if prep.reason is not None:
                infeasible.append({"candidate": _label(fam), "reason": prep.reason})
        else:
            prepared.append(prep)
    return prepared, infeasible, searched


def _search_family(req: SizingRequest, prep: _Prepared, lazy: bool, defer: bool, rows: list[dict[str, Any]],
                   infeasible: list[dict[str, str]], pending: list, above_usd: float) -> list[float]:
    """One family of `search`: its rows (deferred ones, ITL unranked, go to `pending`) and their $/hour;
    `above_usd`: the max_options-th cheapest $/hour found so far (_confirmed). A family whose step table
    already shows that no rate meets the objective (goodput_search.trickle_miss) says so unplanned."""
    if prep.trickle_miss is not None:
        infeasible.append({"candidate": _label(prep.fam), "reason": prep.trickle_miss})
        return []
    m = _replica_model(prep)
    confirmed = _confirmed(req, prep, m, above_usd)
    if defer and lazy and confirmed.lo > 0:  # the fleet costs are settled; ITL waits until it ranks
        gpus = sharding(prep.d).gpus_per_replica
        costs = [n * gpus * prep.price for n in _replica_counts(req.traffic.requests_per_s, confirmed.lo)]
        pending.append((prep, m, confirmed, len(costs), len(rows)))
        rows.extend({"usd_per_hour": usd, "itl_ms": math.inf} for usd in costs)
        return costs
    result = _evaluate(req, prep, lazy, m, confirmed)
    rows.extend(result.options)
    if result.reason is not None:
        infeasible.append({"candidate": _label(prep.fam), "reason": result.reason})
    return [o["usd_per_hour"] for o in result.options]


def search(req: SizingRequest, hints: list[dict[str, Any]] | None = None, lazy: bool = False,
           prune: bool = False, defer: bool = False, memo: LayoutMemo | None = None,
           shown_below: Callable[[], float] | None = None
           ) -> tuple[list[dict[str, Any]], list[dict[str, str]], int, int]:
    """Every family: (options, infeasible families with their reason, configurations searched, families
    pruned). `prune`: families go cheapest cost floor first, and one whose floor is above the
    `max_options`-th cheapest option found so far is skipped: every fleet it gives costs more than every
    option returned, so the returned options and their Pareto flags are the same as without pruning (a
    family's exact floor is computed only where its bound leaves its turn open: planner.serving.floor_order).
    `defer` (with `lazy`; for a caller that returns the `max_options` cheapest rows by $/hour then ITL): a
    family's goodput is searched only as far as its fleet costs need, and the family is finished (exact
    goodput, ITL) only when one of its fleets is among the `max_options` cheapest; the others' rows carry
    their $/hour alone and an infinite ITL, and rank past every returned row. `memo`: per-layout figures
    shared with another search of the request; `shown_below`: planner.serving.cost_cutoff."""
    rows: list[dict[str, Any]] = []
    kept = memo.take_families(hints) if memo is not None else None  # prepared ahead (serving_modes)
    prepared, infeasible, searched = kept if kept is not None else prepared_families(req, hints, memo)
    searched += sum(len(prep.caps) for prep in prepared)
    pruned = 0
    order = FloorOrder([(p.floor_bound_usd_per_hour, p.cost_floor_usd_per_hour, p) if prune else
                        (0.0, lambda: 0.0, p) for p in prepared])  # without pruning: list order
    cutoff = CostCutoff(req.max_options, shown_below() if shown_below is not None else math.inf)
    pending: list[tuple[_Prepared, ReplicaModel, ConfirmedRate, int, int]] = []  # deferred, with its rows
    while order.left:
        above = cutoff.usd_per_hour
        if prune and above < math.inf and order.floors_above(above):
            pruned = order.left  # every family left costs more than the options found: none changes them
            break
        for usd in _search_family(req, order.pop()[1], lazy, defer, rows, infeasible, pending, above):
            cutoff.add(usd)
    if pending:
        usd_all = sorted(r["usd_per_hour"] for r in rows)
        last_returned = usd_all[req.max_options - 1] if len(usd_all) > req.max_options else math.inf
        for prep, m, confirmed, n, first in pending:
            if min(r["usd_per_hour"] for r in rows[first:first + n]) <= last_returned:
                result = _evaluate(req, prep, lazy, m, confirmed, last_returned)
                assert [o["usd_per_hour"] for o in result.options] == [r["usd_per_hour"] for r in
                                                                        rows[first:first + n]]
                rows[first:first + n] = result.options
    return rows, infeasible, searched, pruned


def families(req: SizingRequest, gpus: list[Any] | None = None) -> int:
    """Configuration families a search over these candidate lists plans (the work bound's unit)."""
    n_gpus = len(gpus if gpus is not None else (req.gpus if req.gpus is not None else load_catalog()))
    return n_gpus * len(req.tp) * len(req.pp) * len(req.ep) * len(req.weights) * len(req.kv_cache)


def size(data: Any, memo: LayoutMemo | None = None, finish: bool = True,
         shown_below: Callable[[], float] | None = None) -> dict[str, Any]:
    """The sizing search (`memo`: per-layout figures shared with the request's disaggregated search).
    `finish` False: the caller fills the options it shows (_finish) and drops the others' `_finish`."""
    req = data if isinstance(data, SizingRequest) else parse_sizing(data)
    if not isinstance(data, SizingRequest):
        check_work([families(req)], req.max_options)  # size_with_modes checks its modes too
    hints = fit_hints(req)
    rows, infeasible, searched, pruned = search(req, hints, lazy=True, prune=True, defer=True, memo=memo,
                                               shown_below=shown_below)
    rows = [r for r in rows if r["itl_ms"] is not None]  # None: not stable at its rate: no option (issue 32)
    rows.sort(key=lambda r: (r["usd_per_hour"], r["itl_ms"]))
    if rows:
        mask = pareto_mask(np.array([r["usd_per_hour"] for r in rows]), np.array([r["itl_ms"] for r in rows]))
        for r, on in zip(rows, mask, strict=True):
            r["pareto"] = bool(on)
    options = rows[: req.max_options]
    for r in options if finish else []:
        _finish(r)
    for r in rows[req.max_options:]:  # not returned: drop the model the finish step would have used
        r.pop("_finish", None)
    return {
        "searched": searched,
        "feasible": len(rows),
        "pruned": pruned,
        "options": options,
        "infeasible": infeasible,
        "fit_hints": hints,
        "assumptions": {
            "objectives": f"TTFT and ITL at p{req.slo.percentile} "
                          f"(slo.percentile; default p{DEFAULT_PERCENTILE})"
                          + (f", mean TPOT <= {req.slo.tpot_ms:g} ms" if req.slo.tpot_ms is not None else ""),
            "headroom": (f"each replica serves at most {req.max_utilization:.0%} of its capacity"
                         if req.max_utilization is not None else
                         "each replica serves up to the highest load at which the objective holds confirmed "
                         "(max_utilization: null; at most 95%, 85% where the arrival CV has no simulated "
                         "range)"),
            "confirmed": "an option's rate per replica meets the objective in the serving model, with the "
                         "wait for a sequence slot (max_num_seqs or the KV budget), and across the scheduler "
                         "simulation's range at its load (the plan's queue bands): goodput_request_rate is "
                         "that confirmed rate; replicas = ceil(traffic / it)",
            "serving_model": "the plan's serving model: continuous batching with chunked prefill "
                             "(max_num_batched_tokens 8192), Poisson arrivals unless traffic.arrival_cv, "
                             "fixed lengths unless traffic.prompt_len_cv / output_len_cv",
            "queue": "G/G/1 prefill queue per replica (planner.serving.serving's wait, growing with "
                     "traffic.arrival_cv), ITL from decode and prefill-carrying iterations",
            "cost_mode": req.cost_mode,
            "engine": "production engine profiles where public runs of the GPU's generation were fitted "
                      "(docs/ACCURACY.md); other GPUs assume the same fraction of peak (calibrate them)",
            "prices": "catalog reference prices; several are estimates "
                      "(see `python -m planner gpus` sources)"},
    }
