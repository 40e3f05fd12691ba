"""The highest request rate a sized replica may serve: where its objective holds not only in the fast queue
model but also with the wait for a sequence slot (planner.serving.slot_wait) and across the scheduler
simulation's range (planner.serving.queue_bands, the plan's "simulated range"), within a headroom.

At a rate lambda on a replica of capacity C (the plan's own capacity at its cap on running sequences), with
u = lambda / C, the objective's percentile q is confirmed when
  * TTFT: the fast model's p_q times the band's high ratio at u is within the bound (the simulated range's
    top meets it), and the fast TTFT plus the slot wait (P(wait) of an exponential wait) meets it at q;
  * ITL: the fast p_q times the band's high ratio at u is within the bound;
  * mean TPOT (the mean iteration, planner.serving.operating_point.time_per_output_token): within its bound;
  * u is within the headroom: `max_utilization` when given, else the highest load the simulation
    tabulates (95%; above it the plan shows no range, so nothing there can be confirmed). Where the arrival
    CV is outside the simulated classes there is no range: the fast model and the slot wait alone, held to
    NO_BAND_UTILIZATION.
The band's ratio is a step in u (queue_bands' union of neighbouring tabulated loads), so the rate is the first
failure on a grid of loads refined twice (the highest rate below which every rate checked holds), not a
bisection that could land above a failing step.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from planner.serving.distributions import itl_distribution, latency_percentiles, ttft_distribution
from planner.serving.queue_bands import LOADS, arrival_class, prompt_class, queue_band
from planner.serving.replica import ReplicaModel, load_point
from planner.serving.slot_wait import SLOT_POINTS, SlotChain

NO_BAND_UTILIZATION = 0.85  # the stated cap where no simulated range exists (arrival CV outside 0.75-3.5)
GRID = 48  # loads per refinement; one resolves the rate to 1/2,304 of capacity, two to 1/110,592
_LOADS = np.array(LOADS)
# the slot wait's equal-mass points: log(1 - u) at each (slot_wait.wait_offsets_ms's, negated)
_SLOT_LOG_SURVIVAL = np.log1p(-(np.arange(SLOT_POINTS) + 0.5) / SLOT_POINTS)[:, None]


@dataclass(frozen=True)
class SizingObjective:
    """What a sized replica is held to: TTFT and ITL at a percentile, mean TPOT (any may be absent)."""

    percentile: int
    ttft_ms: float | None
    itl_ms: float | None
    tpot_ms: float | None = None


@functools.lru_cache(maxsize=256)
def _ratio_steps(metric: str, arrival_cv: float, variable: bool,
                 prompts: str) -> tuple[np.ndarray, np.ndarray]:
    """queue_band's high ratio (band top / fast figure) at each tabulated load alone and on each open interval
    below it (the union of both ends): (at_load, below_load), each indexed as LOADS."""
    at = np.array([_high(metric, x, arrival_cv, variable, prompts) for x in LOADS])
    below = np.array([at[0]] + [_high(metric, 0.5 * (a + b), arrival_cv, variable, prompts)
                                for a, b in zip(LOADS, LOADS[1:], strict=False)])
    return at, below


def band_load_limit(metric: str, arrival_cv: float, variable: bool, prompts: str, max_ratio: float) -> float:
    """The highest load (share of capacity) up to which the band's high ratio of `metric` stays within
    `max_ratio` (a supremum: the tabulated load where it first exceeds it, or the open interval's start),
    so a figure at least `objective / max_ratio` everywhere keeps every confirmed load under it."""
    at, below = _ratio_steps(metric, arrival_cv, variable, prompts)
    if at[0] > max_ratio:
        return 0.0
    for i in range(1, len(LOADS)):
        if below[i] > max_ratio:
            return LOADS[i - 1]
        if at[i] > max_ratio:
            return LOADS[i]
    return LOADS[-1]


def _high(metric: str, load: float, arrival_cv: float, variable: bool, prompts: str) -> float:
    band = queue_band(metric, 1.0, load, arrival_cv, variable, prompts)
    return math.inf if band is None else float(band.high)


def band_high_ratio(m: ReplicaModel, metric: str, load: np.ndarray) -> np.ndarray:
    """The simulated range's top over the fast figure of `metric` (e.g. ttft_p90) at each load (share of
    capacity): the same ratio queue_bands gives the plan; infinite above the tabulated loads; 1 where the
    arrival CV has no simulated class."""
    w = m.workload
    if arrival_class(w.arrival_cv) is None:
        return np.ones_like(load)
    at, below = _ratio_steps(metric, float(w.arrival_cv), w.prompt_len_cv > 0 or w.output_len_cv > 0,
                             prompt_class(w.prompt_len, w.max_num_batched_tokens))
    i = np.minimum(np.searchsorted(_LOADS, load), len(_LOADS) - 1)
    exact = (np.abs(_LOADS[i] - load) <= 1e-9 * np.abs(load)) | (load <= _LOADS[0])
    ratio = np.where(exact, at[i], below[i])
    return np.where(load > _LOADS[-1], math.inf, ratio)


def utilization_limit(m: ReplicaModel, max_utilization: float | None) -> float:
    """The headroom: the share of capacity a replica may serve at most."""
    top = LOADS[-1] if arrival_class(m.workload.arrival_cv) is not None else NO_BAND_UTILIZATION
    return top if max_utilization is None else min(max_utilization, LOADS[-1])


@dataclass(frozen=True)
class Verdicts:
    """Each check at each rate (True: holds)."""

    headroom: np.ndarray
    ttft_band: np.ndarray
    ttft_slots: np.ndarray
    itl_band: np.ndarray
    tpot: np.ndarray

    @property
    def ok(self) -> np.ndarray:
        return self.headroom & self.ttft_band & self.ttft_slots & self.itl_band & self.tpot

    def first_failure(self, i: int) -> str:
        """The check that fails at rate index i, the first in the order a buyer relaxes them."""
        for name in ("headroom", "tpot", "ttft_slots", "ttft_band", "itl_band"):
            if not bool(getattr(self, name)[i]):
                return name
        return "none"


class Checker:
    """The checks of one replica model at `slots` under an objective and a headroom `limit`; what does not
    depend on the rate is worked out once."""

    def __init__(self, m: ReplicaModel, slots: int, objective: SizingObjective, limit: float) -> None:
        self.m, self.slots, self.objective, self.limit = m, slots, objective, limit
        self.capacity_at_slots = m.capacity_per_ms(float(slots))
        self.capacity = float(self.capacity_at_slots)
        # the slot wait is TTFT's: a decode worker's checks (ITL alone) never ask for it
        self.chain = SlotChain(m, slots) if objective.ttft_ms is not None else None
        pct = objective.percentile
        w = m.workload
        self.banded = arrival_class(w.arrival_cv) is not None
        if self.banded:
            shape = (float(w.arrival_cv), w.prompt_len_cv > 0 or w.output_len_cv > 0,
                     prompt_class(w.prompt_len, w.max_num_batched_tokens))
            self.ttft_steps = _ratio_steps(f"ttft_p{pct}", *shape)
            self.itl_steps = _ratio_steps(f"itl_p{pct}", *shape)

    @staticmethod
    def _steps_at(load: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Where each load falls among the tabulated ones (as _ratio reads it): the index, whether the load
        is that tabulated load, whether it is above them all."""
        i = np.minimum(np.searchsorted(_LOADS, load), len(_LOADS) - 1)
        exact = (np.abs(_LOADS[i] - load) <= 1e-9 * np.abs(load)) | (load <= _LOADS[0])
        return i, exact, load > _LOADS[-1]

    def _ratio(self, steps: tuple[np.ndarray, np.ndarray], load: np.ndarray,
               at_steps: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> np.ndarray:
        if not self.banded:
            return np.ones_like(load)
        at, below = steps
        i, exact, over = at_steps if at_steps is not None else self._steps_at(load)
        return np.where(over, math.inf, np.where(exact, at[i], below[i]))

    def verdicts(self, rates_per_ms: np.ndarray) -> Verdicts:
        """The checks at each rate."""
        m, objective = self.m, self.objective
        rates = np.atleast_1d(np.asarray(rates_per_ms, dtype=float))
        load = rates / self.capacity if self.capacity > 0 else np.full_like(rates, math.inf)
        p = load_point(m, rates, float(self.slots), capacity_per_ms=self.capacity_at_slots)
        ok = np.asarray(p.stable, dtype=bool) & (load <= self.limit * (1.0 + 1e-12))
        at_steps = self._steps_at(load) if self.banded else None  # both bands read the same steps
        q = objective.percentile / 100.0
        ttft_band = ttft_slots = itl_band = tpot = ok
        if objective.tpot_ms is not None:
            tpot = ok & (np.asarray(p.iteration_ms) <= objective.tpot_ms)
        if objective.ttft_ms is not None and ok.any():
            bound = objective.ttft_ms
            assert self.chain is not None
            probability, mean = self.chain.wait(rates)
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = self._ratio(self.ttft_steps, load, at_steps) if self.banded else np.ones_like(load)
                banded = np.where(np.isfinite(ratio), bound / ratio, -1.0)
            waiting = bool((probability > 0).any())
            at = [banded]
            if waiting:  # the bound itself, and less each of the slot wait's equal-mass points
                at.append(np.full(len(rates), bound))
                at.extend(bound + _SLOT_LOG_SURVIVAL * np.where(np.isfinite(mean), mean, 1e30)[None, :])
            cdf = ttft_distribution(m, p)(np.stack(at))
            ttft_band = ok & (cdf[0] >= q)
            if waiting:  # without a wait the band's check (ratio >= 1) implies the bound's
                within = (1.0 - probability) * cdf[1] + probability * cdf[2:].mean(axis=0)
                ttft_slots = ok & (within >= q)
        if objective.itl_ms is not None and (ttft_band & ttft_slots & tpot).any():
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = self._ratio(self.itl_steps, load, at_steps) if self.banded else np.ones_like(load)
                banded = np.where(np.isfinite(ratio), objective.itl_ms / ratio, -1.0)
            itl_band = ok & (itl_distribution(m, p)(banded) >= q)
        elif objective.itl_ms is not None:
            itl_band = np.zeros_like(ok)  # not evaluated: every rate fails an earlier check
        return Verdicts(ok, ttft_band, ttft_slots, itl_band, tpot)


def verdicts(m: ReplicaModel, rates_per_ms: np.ndarray, slots: int, objective: SizingObjective,
             limit: float) -> Verdicts:
    """The checks at each rate on a replica running at most `slots` sequences."""
    return Checker(m, slots, objective, limit).verdicts(rates_per_ms)


@dataclass(frozen=True)
class ConfirmedRate:
    """The confirmed rate lies in [lo, hi] (per ms; lo == hi once exact); `binding`: the check that stops it
    (headroom, tpot, ttft_slots, ttft_band, itl_band; "none" where the headroom's top itself holds)."""

    lo: float
    hi: float
    capacity: float
    binding: str


def confirmed_rate(m: ReplicaModel, slots: int, objective: SizingObjective, max_utilization: float | None,
                   settled: Callable[[float, float], bool] | None = None) -> ConfirmedRate:
    """The highest rate (per ms) below which every rate checked meets `objective` confirmed (verdicts), on a
    grid of GRID loads up to the headroom, refined in the first failing cell twice, or (`settled`) until
    `settled(lo, hi)` says the bracket [lo, hi] is enough (at most three refinements); lo is the answer."""
    limit = utilization_limit(m, max_utilization)
    check = Checker(m, slots, objective, limit)
    capacity = check.capacity
    if not capacity > 0:
        return ConfirmedRate(0.0, 0.0, capacity, "headroom")
    top = min(limit * capacity, capacity * (1.0 - 1e-9))
    rates = np.concatenate([[capacity * 1e-6], top * np.arange(1, GRID + 1) / GRID])
    v = check.verdicts(rates)
    bad = np.nonzero(~v.ok)[0]
    if len(bad) == 0:
        return ConfirmedRate(top, top, capacity, "headroom")
    first = int(bad[0])
    binding = v.first_failure(first)
    if first == 0:
        return ConfirmedRate(0.0, 0.0, capacity, binding)
    lo, hi = float(rates[first - 1]), float(rates[first])
    for depth in range(3):
        if (settled(lo, hi) if settled is not None else depth == 1):
            break
        rates = lo + (hi - lo) * np.arange(1, GRID) / GRID  # hi fails already
        v = check.verdicts(rates)
        bad = np.nonzero(~v.ok)[0]
        if len(bad) == 0:
            lo = float(rates[-1])
            continue
        first = int(bad[0])
        binding = v.first_failure(first)
        lo, hi = (float(rates[first - 1]) if first > 0 else lo), float(rates[first])
    return ConfirmedRate(lo, hi, capacity, binding)


_WHY = {"ttft_band": "the simulated range of p{pct} TTFT misses {ttft:g} ms",
        "ttft_slots": "p{pct} TTFT with the wait for a sequence slot misses {ttft:g} ms",
        "itl_band": "the simulated range of p{pct} ITL misses {itl:g} ms",
        "tpot": "mean TPOT misses {tpot:g} ms", "headroom": "the replica is not stable"}


def why_not(m: ReplicaModel, objective: SizingObjective, confirmed: ConfirmedRate | None = None) -> str:
    """Why even a trickle of traffic misses the objectives: the percentiles of one request alone, or the
    check that a trickle fails (the simulated range, the slot wait, mean TPOT)."""
    pct = objective.percentile
    point = load_point(m, float(m.capacity_per_ms()) * 1e-6)
    ttft, itl, _ = latency_percentiles(m, point)
    why = []
    itl_at, ttft_at = itl.at(pct), ttft.at(pct)
    if itl_at is not None and objective.itl_ms is not None and itl_at > objective.itl_ms:
        why.append(f"p{pct} ITL at a trickle is {itl_at:.1f} ms > {objective.itl_ms:g} ms")
    if ttft_at is not None and objective.ttft_ms is not None and ttft_at > objective.ttft_ms:
        why.append(f"p{pct} TTFT at a trickle is {ttft_at:.0f} ms > {objective.ttft_ms:g} ms")
    tpot = objective.tpot_ms
    if tpot is not None and bool(point.stable) and float(point.iteration_ms) > tpot:
        why.append(f"mean TPOT at a trickle is {float(point.iteration_ms):.1f} ms > {tpot:g} ms")
    if not why and confirmed is not None and confirmed.binding in _WHY:
        why.append(_WHY[confirmed.binding].format(pct=pct, ttft=objective.ttft_ms or 0.0,
                                                  itl=objective.itl_ms or 0.0, tpot=tpot or 0.0)
                   + " at a trickle")
    return "; ".join(why) or "no request rate meets both objectives"
