"""The operating point a buyer plans at: the highest load that meets a latency objective (goodput), the
default objective an interactive chat product would accept, the judgement of each latency figure against
it, and the mean time per output token. Pure: the serving model (planner.serving.serving) does the physics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import BaseModel

from planner.core.deployment import Deployment
from planner.scenario.scenario import ServiceObjective
from planner.serving.confirmed_rate import SizingObjective, confirmed_rate
from planner.serving.distributions import PERCENTILES, percentiles_over_rates
from planner.serving.queue_bands import QueueBands
from planner.serving.replica import ReplicaModel, Workload, load_point
from planner.serving.serving import Objective, ServingPoint, serve_model_at_rate
from planner.serving.shared_searches import SharedSearches, tpot_goodput_per_ms

# The default latency objective: what an interactive chat product accepts, at p90.
# Public practice it sits between: MLPerf Inference's Llama-2-70B scenarios hold TTFT p99 <= 2 s and
# TPOT p99 <= 200 ms (server) and TTFT p99 <= 450 ms, TPOT p99 <= 40 ms (interactive)
# (https://mlcommons.org/2024/03/mlperf-llama2-70b/,
# docs.mlcommons.org/inference/benchmarks/language/llama2-70b/).
# A first token within 1 s and 50 ms per token (20 tokens/s, faster than people read) for 9 requests in 10
# is an interactive chat objective, looser than MLPerf's interactive p99 and far tighter than its server one.
DEFAULT_OBJECTIVE = ServiceObjective(ttft_ms=1000.0, itl_ms=50.0, percentile=90)
DEFAULT_OBJECTIVE_SOURCE = ("interactive chat: p90 TTFT <= 1 s, p90 ITL <= 50 ms; between MLPerf Inference "
                            "Llama-2-70B's interactive (TTFT p99 450 ms, TPOT p99 40 ms) and server "
                            "(TTFT p99 2 s, TPOT p99 200 ms) scenarios")
# A quantile is found by bisection (planner.serving.serving.quantile) to ~1e-5 of its value: a figure
# within this share of its bound meets it (the goodput itself sits on the bound).
JUDGE_RELATIVE_TOLERANCE = 1e-4


def objective_of(slo: ServiceObjective) -> Objective:
    return Objective(slo.ttft_ms, slo.itl_ms, slo.percentile)


def serve_at_goodput(
    d: Deployment, w: Workload, slo: Objective, max_population: int | None = None,
    tpot_ms: float | None = None, searches: SharedSearches | None = None,
) -> ServingPoint:
    """Open loop at the replica's goodput: the highest rate whose TTFT and ITL at the objective's
    percentile meet it (serving.goodput_per_ms), and whose mean TPOT meets `tpot_ms` where given. Where even
    a trickle misses it, the replica at a trickle (a millionth of its capacity), so that the page can say by
    how much. `searches`: the replica model's shared searches (its goodput_binding reads them too)."""
    searches = searches if searches is not None else SharedSearches.of(d, w, max_population)
    m = searches.m
    goodput = searches.plan_goodput(slo.percentile, slo.ttft_ms, slo.itl_ms)  # TTFT with the slot wait
    if tpot_ms is not None:
        goodput = min(goodput, searches.tpot_goodput(tpot_ms))
    rate_per_ms = goodput if goodput > 0 else float(m.capacity_per_ms()) * 1e-6
    return serve_model_at_rate(m, rate_per_ms * 1000.0, slo, goodput)


def serve_under_objective(searches: SharedSearches, request_rate_per_s: float,
                          slo: Objective) -> ServingPoint:
    """serve_at_rate under `slo` on a replica model's shared searches (its goodput_binding reads them too)."""
    bounded = slo.ttft_ms is not None or slo.itl_ms is not None  # a goodput only under TTFT or ITL bounds
    goodput = searches.plan_goodput(slo.percentile, slo.ttft_ms, slo.itl_ms) if bounded else None
    return serve_model_at_rate(searches.m, request_rate_per_s, slo, goodput)


@dataclass(frozen=True)
class TimePerOutputToken:
    """Per request TPOT = (E2E - TTFT) / (output tokens - 1), its mean and percentiles over requests."""

    mean: float | None
    p50: float | None
    p99: float | None
    p90: float | None = None  # after p99: positional callers keep their order


def time_per_output_token(point: ServingPoint) -> TimePerOutputToken:
    """TPOT from the serving model's own quantities. The model decodes every request's O - 1 tokens at the
    mean iteration T (E2E = TTFT + (O - 1) T), so each request's (E2E - TTFT) / (O - 1) is T: the
    distribution is a point and mean = p50 = p99 = T. Mean TPOT is the first figure `vllm bench serve`
    prints; pooled ITL (per token) is the other view of the same decode. None where not stable, or with
    one output token (no decode)."""
    if point.tpot_ms is not None:  # a closed-loop benchmark measured it request by request
        return TimePerOutputToken(point.tpot_mean_ms, point.tpot_ms.p50, point.tpot_ms.p99, point.tpot_ms.p90)
    t = point.mean_iteration_ms
    if not point.stable or t is None or point.decode_steps_per_request <= 0:
        return TimePerOutputToken(None, None, None)
    return TimePerOutputToken(t, t, t, t)


def meets(value_ms: float | None, bound_ms: float | None) -> bool | None:
    """Whether a latency figure meets its bound (None when either is absent)."""
    if value_ms is None or bound_ms is None:
        return None
    return value_ms <= bound_ms * (1.0 + JUDGE_RELATIVE_TOLERANCE)


@dataclass(frozen=True)
class Judgement:
    """The objective's percentile of TTFT and ITL, each against its bound (None: no bound or no figure), the
    top of each one's simulated range (queue bands) against it, and mean TPOT against its own bound."""

    percentile: int
    ttft_ms: float | None
    itl_ms: float | None
    ttft_met: bool | None
    itl_met: bool | None
    ttft_range_high_ms: float | None = None  # the simulated range's top (None: no band)
    itl_range_high_ms: float | None = None
    ttft_range_met: bool | None = None
    itl_range_met: bool | None = None
    tpot_ms: float | None = None  # mean TPOT
    tpot_met: bool | None = None

    @property
    def met(self) -> bool | None:
        """The fast model's figures within the objective."""
        marks = [m for m in (self.ttft_met, self.itl_met, self.tpot_met) if m is not None]
        return all(marks) if marks else None

    @property
    def confirmed(self) -> bool | None:
        """Met, and the simulated range's top within the objective too (a tick is shown only then)."""
        marks = [m for m in (self.ttft_met, self.itl_met, self.tpot_met, self.ttft_range_met,
                             self.itl_range_met) if m is not None]
        return all(marks) if marks else None


def judge(ttft_ms, itl_ms, slo: ServiceObjective, bands: QueueBands | None = None,
          tpot_mean_ms: float | None = None) -> Judgement:
    """Judge a plan's serving TTFT and ITL (objects with p50/p90/p99) at the objective's percentile; with the
    plan's queue bands, the simulated range's top too; with its mean TPOT, the TPOT objective."""
    key = f"p{slo.percentile}"
    ttft, itl = getattr(ttft_ms, key), getattr(itl_ms, key)
    ttft_band = getattr(bands, f"ttft_{key}_ms", None) if bands is not None else None
    itl_band = getattr(bands, f"itl_{key}_ms", None) if bands is not None else None
    ttft_high = ttft_band.high if ttft_band is not None else None
    itl_high = itl_band.high if itl_band is not None else None
    return Judgement(slo.percentile, ttft, itl, meets(ttft, slo.ttft_ms), meets(itl, slo.itl_ms),
                     ttft_high, itl_high, meets(ttft_high, slo.ttft_ms), meets(itl_high, slo.itl_ms),
                     tpot_mean_ms, meets(tpot_mean_ms, slo.tpot_ms))


class GoodputBinding(BaseModel):
    """Which objective sets the goodput, why, and what relaxing it would buy (plan field
    serving.goodput_binding)."""

    constraint: Literal["ttft", "itl", "tpot", "capacity"]
    cause: str  # queueing, slots, prefill interruptions, prefill work, decode batch, prefill queue
    goodput_request_rate: float
    bound_ms: float | None  # the binding objective's bound (None: capacity binds)
    value_at_goodput_ms: float | None  # the binding figure at the goodput
    value_just_above_ms: float | None  # and 2% above it (a cliff shows here)
    relaxed_bound_ms: float | None  # the looser bound at which the next constraint (or capacity) binds
    relaxed_goodput_request_rate: float | None  # the goodput there
    next_constraint: str | None  # what binds then
    text: str
    # the highest rate the sizing search would run this replica at: the objective confirmed with the slot
    # wait and across the simulated range (planner.serving.confirmed_rate), and its share of capacity
    confirmed_request_rate: float | None = None
    confirmed_utilization: float | None = None


def _figures(m: ReplicaModel, rates_per_ms: list[float], constraint: str,
             percentile: int) -> list[float | None]:
    """The binding figure at each rate (None where unstable): TTFT or ITL at the percentile (one search over
    the rates: percentiles_over_rates, latency_percentiles' figures), or mean TPOT (the mean
    iteration)."""
    point = load_point(m, np.asarray(rates_per_ms, dtype=float))
    stable = np.asarray(point.stable, dtype=bool)
    out = np.full(len(rates_per_ms), np.nan)
    if constraint == "tpot":
        out[stable] = np.asarray(point.iteration_ms)[stable]
    elif stable.any():
        out[stable] = percentiles_over_rates(m, point, constraint)[PERCENTILES.index(percentile)]
    return [float(v) if np.isfinite(v) else None for v in out]


def _relaxed(searches: SharedSearches, slo: ServiceObjective, binding: str, goodput: float,
             nxt_goodput: float) -> tuple[float | None, float | None]:
    """The looser bound at which the next constraint binds: the binding figure's highest between the
    goodput and the next constraint's goodput (it need not grow monotonically past a cliff), and the goodput
    under the objective with that bound (every other bound kept)."""
    m = searches.m
    rates = goodput + (nxt_goodput - goodput) * np.linspace(0.02, 1.0 - 1e-6, 9)
    figures = [f for f in _figures(m, [float(r) for r in rates], binding, slo.percentile) if f is not None]
    if not figures:
        return None, None
    bound = max(figures)
    looser = slo.model_copy(update={f"{binding}_ms": bound * (1 + 1e-6)})
    relaxed = searches.goodput(looser.percentile, looser.ttft_ms, looser.itl_ms)
    if looser.tpot_ms is not None:
        relaxed = min(relaxed, searches.tpot_goodput(looser.tpot_ms))
    return bound, relaxed


def _cause(searches: SharedSearches, binding: str, goodput: float,
           pct: int) -> tuple[float | None, float | None, str]:
    """The binding figure at the goodput and 2% above it, and why it binds (goodput_binding's causes)."""
    m, w = searches.m, searches.m.workload
    cap = float(m.capacity_per_ms())
    if binding == "capacity":
        slot_limit = float(np.interp(w.max_running, m.population, m.rate_per_ms))
        return None, None, "slots" if slot_limit <= cap * (1 + 1e-9) and slot_limit < \
            m._utilization_limit_per_ms else "prefill queue"
    at, above = _figures(m, [goodput, min(goodput * 1.02, cap * (1 - 1e-9))], binding, pct) if goodput > 0 \
        else (None, None)
    rate = max(goodput, cap * 1e-6)
    point = searches.points.point(rate, rate)  # the search's own where it judged this rate
    if binding == "ttft":
        return at, above, "queueing" if float(point.wait_mean_ms) > 0.5 * float(at or 0.0) else "prefill work"
    figure = above if above is not None else (at or 0.0)
    return at, above, "prefill interruptions" if figure > 1.2 * float(point.decode_ms) else "decode batch"


def _alone(searches: SharedSearches, slo: ServiceObjective, cap: float) -> tuple[dict[str, float], bool]:
    """Each objective's goodput alone (per ms), and whether the slot wait lowers TTFT's (the plan's TTFT
    includes it: planner.serving.slot_wait.goodput_with_slot_wait). The searches share their figures with
    the plan's own goodput search (the whole objective's)."""
    pct = slo.percentile
    alone = {"capacity": cap * (1.0 - 1e-9)}
    slots_lower_ttft = False
    if slo.ttft_ms is not None:
        fast = searches.goodput(pct, slo.ttft_ms, None)  # goodput_per_ms's answer
        alone["ttft"] = searches.with_slot_wait(fast, pct, slo.ttft_ms)
        slots_lower_ttft = alone["ttft"] < fast
    if slo.itl_ms is not None:
        alone["itl"] = searches.goodput(pct, None, slo.itl_ms)
    if slo.tpot_ms is not None:
        alone["tpot"] = searches.tpot_goodput(slo.tpot_ms)
    return alone, slots_lower_ttft


def goodput_binding(d: Deployment, w: Workload, slo: ServiceObjective,
                    max_population: int | None = None) -> GoodputBinding | None:
    """goodput_binding_of the replica model of `d` under `w`."""
    return goodput_binding_of(SharedSearches.of(d, w, max_population), slo)


def goodput_binding_of(searches: SharedSearches, slo: ServiceObjective) -> GoodputBinding | None:
    """Each objective's goodput alone (TTFT, ITL at the percentile, mean TPOT; capacity); the lowest binds.
    Its cause: TTFT by queueing (the prefill queue's wait is most of it) or the prompt's own prefill work; ITL
    or TPOT by prefill interruptions (prompt chunks in the iterations a token waits on; a cliff: the figure
    jumps just above the goodput) or the decode batch itself; capacity by the slots (max_num_seqs or the KV
    budget) or the prefill queue. Relaxing: the bound at which the next constraint binds, and that goodput.
    `searches`: the replica model's goodput searches (the plan's own among them: planning's
    open_loop_searches)."""
    if slo.ttft_ms is None and slo.itl_ms is None and slo.tpot_ms is None:
        return None
    m = searches.m
    cap = float(m.capacity_per_ms())
    if not cap > 0:
        return None
    pct = slo.percentile
    alone, slots_lower_ttft = _alone(searches, slo, cap)
    order = sorted(alone, key=lambda k: (alone[k], k != "capacity"))
    binding = order[0]
    if binding != "capacity" and alone[binding] >= alone["capacity"] * (1 - 1e-6):
        binding = "capacity"  # an objective that holds to capacity does not bind
    goodput = alone[binding]
    bound = {"ttft": slo.ttft_ms, "itl": slo.itl_ms, "tpot": slo.tpot_ms}.get(binding)
    if binding == "ttft" and slots_lower_ttft:  # the wait for a sequence slot sets it: the plan's figures
        at, above = (searches.plan_ttft(r * 1000.0).at(pct)
                     for r in (goodput, min(goodput * 1.02, cap * (1 - 1e-9))))
        cause = "slots"
    else:
        at, above, cause = _cause(searches, binding, goodput, pct)
    others = [k for k in order if k != binding]
    nxt = others[0] if others else None
    relaxed_goodput = alone[nxt] if nxt is not None else None
    relaxed_bound = None
    if binding != "capacity" and relaxed_goodput is not None and relaxed_goodput > goodput * (1 + 1e-3):
        relaxed_bound, relaxed_goodput = _relaxed(searches, slo, binding, goodput, relaxed_goodput)
    else:
        relaxed_goodput = None
    names = {"ttft": f"p{pct} TTFT", "itl": f"p{pct} ITL", "tpot": "mean TPOT", "capacity": "capacity"}
    if binding == "capacity":
        text = f"Goodput {goodput * 1000:.3g} req/s is the capacity ({cause} bind): no objective binds."
    else:
        cliff = (f"; it jumps to {above:,.1f} ms just above" if above is not None and at is not None
                 and above > 1.5 * at else "")
        text = (f"{names[binding]} binds the goodput ({goodput * 1000:.3g} req/s) through {cause}: "
                f"{at or 0.0:,.1f} ms at the goodput against {bound:g} ms{cliff}.")
        if relaxed_bound is not None and relaxed_goodput is not None and nxt is not None:
            text += (f" Relaxed to {relaxed_bound:,.0f} ms it would buy {relaxed_goodput * 1000:.3g} req/s "
                     f"per replica (then {names[nxt]} binds).")
    confirmed = confirmed_rate(m, int(m.workload.max_running), SizingObjective(pct, slo.ttft_ms, slo.itl_ms,
                                                                      slo.tpot_ms), None)
    if confirmed.lo > 0:
        text += (f" The simulated range confirms the objective up to {confirmed.lo * 1000:.3g} req/s per "
                 f"replica ({confirmed.lo / cap:.0%} of capacity): the sizing page sizes fleets there.")
    return GoodputBinding(
        constraint=binding,  # type: ignore[arg-type]
        cause=cause, goodput_request_rate=goodput * 1000.0, bound_ms=bound, value_at_goodput_ms=at,
        value_just_above_ms=above, relaxed_bound_ms=relaxed_bound,
        relaxed_goodput_request_rate=relaxed_goodput * 1000.0 if relaxed_goodput is not None else None,
        next_constraint=nxt if relaxed_bound is not None else None, text=text,
        confirmed_request_rate=confirmed.lo * 1000.0 if confirmed.lo > 0 else None,
        confirmed_utilization=confirmed.lo / cap if confirmed.lo > 0 else None)


__all__ = [
    "DEFAULT_OBJECTIVE", "DEFAULT_OBJECTIVE_SOURCE", "GoodputBinding", "Judgement", "TimePerOutputToken",
    "goodput_binding", "goodput_binding_of", "judge", "meets", "objective_of", "serve_at_goodput",
    "serve_under_objective", "time_per_output_token", "tpot_goodput_per_ms",
]
