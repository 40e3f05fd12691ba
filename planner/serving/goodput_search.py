"""The goodput search one step at a time (planner.serving.serving.goodput_per_ms's grid, then its bisection,
the same calls in the same order), so a fleet search stops refining a family once its costs are settled;
and the TTFT or ITL percentiles alone at a load point."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from planner.core.deployment import Deployment
from planner.serving.clumped_quiet_window import clumped_window_limit
from planner.serving.confirmed_rate import NO_BAND_UTILIZATION, SizingObjective, band_load_limit
from planner.serving.distributions import (
    PERCENTILES,
    Percentiles,
    bisection_midpoints,
    itl_distribution,
    quantile,
    ttft_distribution,
    window_arrivals_bound,
)
from planner.serving.interference_bound import quiet_rate_bound_per_s, quiet_window_limit
from planner.serving.layout_memo import StepTable, bound_steps
from planner.serving.queue_bands import AGREEMENT, LOADS, arrival_class
from planner.serving.replica import LoadPoint, ReplicaModel, load_point
from planner.serving.serving import latency_percentiles, meets_objective
from planner.serving.wait_bound import ttft_wait_rate_bound_per_s

GOODPUT_GRID = 48  # goodput_per_ms's default grid of rates, whose first step goodput_bracket repeats


class LoadPoints:
    """One replica model's load points and TTFT and ITL distributions, each computed on first use: the
    searches of several objectives on one model share them (a prefill worker paired with several decode
    workers, each leaving its own TTFT budget; a plan's goodput, each objective's alone and the relaxed
    one: the figures at a rate are the same whichever objective is tested on them). Each figure is the one
    the plain call gives (the same call, once)."""

    def __init__(self, m: ReplicaModel) -> None:
        self.m = m
        # key -> [the load point, its TTFT distribution, its ITL distribution (None until asked for), whether
        # each rate's figures are its own alone (elementwise)]
        self._points: dict[object, list] = {}
        self._percentiles: dict[object, Percentiles] = {}
        self._grid: tuple[np.ndarray | None] | None = None

    def grid_rates(self) -> np.ndarray | None:
        """_grid_rates(m), kept: every search on the model starts from it."""
        if self._grid is None:
            self._grid = (_grid_rates(self.m),)
        return self._grid[0]

    def _entry(self, key: object, rate_per_ms: float | np.ndarray, elementwise: bool = False) -> list:
        entry = self._points.get(key)
        if entry is None:
            point = load_point(self.m, rate_per_ms, elementwise=elementwise)
            entry = self._points[key] = [point, None, None, elementwise]
        return entry

    def point(self, key: object, rate_per_ms: float | np.ndarray, elementwise: bool = False) -> LoadPoint:
        """The load point at `rate_per_ms`, which `key` names (a float rate, or a name for a grid);
        `elementwise` (on its first use): each rate's figures are its own alone (load_point's)."""
        return self._entry(key, rate_per_ms, elementwise)[0]

    def ttft_distribution(self, key: object, rate_per_ms: float | np.ndarray) -> Callable:
        entry = self._entry(key, rate_per_ms)
        if entry[1] is None:
            entry[1] = ttft_distribution(self.m, entry[0])
        return entry[1]

    def itl_distribution(self, key: object, rate_per_ms: float | np.ndarray) -> Callable:
        entry = self._entry(key, rate_per_ms)
        if entry[2] is None:
            entry[2] = itl_distribution(self.m, entry[0], entry[3])
        return entry[2]

    def ttft_percentiles(self, key: object, rate_per_ms: float) -> Percentiles:
        """ttft_percentiles(m, load_point(m, rate)), from the shared figures (kept: every decode worker that
        leaves the prefill pool the same worker count reads the same)."""
        if key not in self._percentiles:
            point = self.point(key, rate_per_ms)
            cdf = self.ttft_distribution(key, rate_per_ms) if bool(point.stable) else None
            self._percentiles[key] = ttft_percentiles(self.m, point, cdf)
        return self._percentiles[key]

    def meets(self, key: object, rate_per_ms: float | np.ndarray, percentile: int, ttft_ms: float | None,
              itl_ms: float | None) -> np.ndarray:
        """meets_objective(m, load_point(m, rate), percentile, ttft_ms, itl_ms), from the shared figures
        (a distribution is evaluated only where some point may still pass, as there)."""
        ok = np.asarray(self.point(key, rate_per_ms).stable, dtype=bool).copy()
        prob = percentile / 100.0
        if ttft_ms is not None and ok.any():
            ok &= self.ttft_distribution(key, rate_per_ms)(ttft_ms) >= prob
        if itl_ms is not None and ok.any():
            ok &= self.itl_distribution(key, rate_per_ms)(itl_ms) >= prob
        return ok

    def meets_ttft(self, key: object, rate_per_ms: float | np.ndarray, percentile: int,
                   ttft_ms: float) -> np.ndarray:
        """meets_objective(m, load_point(m, rate), percentile, ttft_ms, None), from the shared figures."""
        return self.meets(key, rate_per_ms, percentile, ttft_ms, None)


def _grid_rates(m: ReplicaModel) -> np.ndarray | None:
    """goodput_per_ms's first step: its grid of rates up to capacity (None where the capacity is 0)."""
    cap = float(m.capacity_per_ms())
    if not cap > 0:
        return None
    return cap * np.concatenate([[1e-6], np.linspace(1.0 / GOODPUT_GRID, 1.0, GOODPUT_GRID) * (1.0 - 1e-9)])


def goodput_bracket(m: ReplicaModel, percentile: int, ttft_ms: float | None,
                    itl_ms: float | None, points: LoadPoints | None = None) -> tuple[float, float]:
    """[lo, hi] holding goodput_per_ms's answer, from its first step alone (the grid of rates up to
    capacity, the same call on the same rates, so the same verdicts); lo == hi where that step is the
    answer, (0, 0) where it is 0. Its bisection then only moves inside the bracketing cell. `points`: the
    model's shared load points (the grid's figures, whichever objective is tested on them)."""
    shared = points is not None and points.m is m
    rates = points.grid_rates() if points is not None and shared else _grid_rates(m)
    if rates is None:
        return 0.0, 0.0
    if points is not None and shared:
        ok = points.meets("grid", rates, percentile, ttft_ms, itl_ms)
    else:
        ok = meets_objective(m, load_point(m, rates), percentile, ttft_ms, itl_ms)
    if not ok[0]:
        return 0.0, 0.0
    if ok.all():
        return float(rates[-1]), float(rates[-1])
    last = int(np.argmin(ok)) - 1
    return float(rates[last]), float(rates[last + 1])


# Bisection steps one vectorized evaluation decides at once: every midpoint of the next steps' tree (2^depth
# - 1 rates) is judged in one call, and the steps then walk it. finish() knows how many steps remain; a
# lone step() (a fleet search refining as far as its costs need) looks a little ahead.
FINISH_DEPTH = 5
STEP_DEPTH = 2


class GoodputSearch:
    """goodput_per_ms's search one step at a time (its grid, then its bisection in the bracketing cell,
    the same midpoints in the same order, the same verdicts): the goodput lies in [lo, hi]; once `exact`,
    it is lo. `points`: the model's shared load points, whose figures the searches of other objectives on
    the same model reuse (each rate, grid and midpoint tree computed once); with them, midpoints are judged
    ahead (a tree at once, each midpoint's figures its own alone, so under any arrivals) only where `ahead`
    asks for it (a prefill worker's many budgets share lone midpoints instead)."""

    def __init__(self, m: ReplicaModel, percentile: int, ttft_ms: float | None, itl_ms: float | None,
                 refine: int = 10, points: LoadPoints | None = None, ahead: bool = False) -> None:
        self.m, self.percentile, self.ttft_ms, self.itl_ms = m, percentile, ttft_ms, itl_ms
        self.points = points if points is not None and points.m is m else None
        self.lo, self.hi = goodput_bracket(m, percentile, ttft_ms, itl_ms, self.points)
        self.steps_left = refine if self.lo < self.hi else 0
        self._verdicts: dict[float, bool] = {}  # midpoints judged ahead of their step
        # A vectorized evaluation gives each rate the figures a lone one gets where every figure is
        # elementwise: Poisson or smoother arrivals (a clumped window's series stops when the whole array
        # has converged, unless it is asked to stop each rate's where it converges: the shared points' trees)
        # and one arrival bound for all the rates' ITL windows (_speculate checks it).
        self._ahead = ahead if self.points is not None else m.workload.arrival_cv <= 1.0

    @property
    def exact(self) -> bool:
        return self.steps_left == 0

    def _meets(self, rate_per_ms: float) -> bool:
        if self.points is not None:
            return bool(self.points.meets(rate_per_ms, rate_per_ms, self.percentile, self.ttft_ms,
                                          self.itl_ms))
        return bool(meets_objective(self.m, load_point(self.m, rate_per_ms), self.percentile, self.ttft_ms,
                                    self.itl_ms))

    def _speculate(self, depth: int) -> None:
        """Judge every midpoint the next `depth` steps may take (as step() computes them), in one call."""
        mids = bisection_midpoints(self.lo, self.hi, depth)
        rates = np.array(mids)
        key = ("tree", self.lo, self.hi, depth)
        point = (self.points.point(key, rates, elementwise=True) if self.points is not None
                 else load_point(self.m, rates))
        if self.itl_ms is not None:
            window = np.asarray(point.rate_per_ms * point.iteration_ms, dtype=float)
            cv = self.m.workload.arrival_cv
            if not np.isfinite(window).all() or (window_arrivals_bound(float(window.min()), cv)
                                                  != window_arrivals_bound(float(window.max()), cv)):
                return  # the ITL of these rates together would count arrivals up to another bound
        if self.points is not None:
            ok = self.points.meets(key, rates, self.percentile, self.ttft_ms, self.itl_ms)
        else:
            ok = meets_objective(self.m, point, self.percentile, self.ttft_ms, self.itl_ms)
        self._verdicts.update(zip(mids, (bool(v) for v in ok), strict=True))

    def step(self, depth: int = STEP_DEPTH) -> None:
        mid = 0.5 * (self.lo + self.hi)
        if mid not in self._verdicts and self._ahead and min(depth, self.steps_left) > 1:
            self._speculate(min(depth, self.steps_left))
        if self._verdicts[mid] if mid in self._verdicts else self._meets(mid):
            self.lo = mid
        else:
            self.hi = mid
        self.steps_left -= 1
        if self.steps_left == 0:
            self.hi = self.lo

    def finish(self) -> float:
        while not self.exact:
            self.step(FINISH_DEPTH)
        return self.lo


def itl_percentiles(m: ReplicaModel, point: LoadPoint) -> Percentiles:
    """ITL percentiles alone, bracketed as latency_percentiles brackets them (the same figures)."""
    if not bool(point.stable):
        return latency_percentiles(m, point)[1]
    q = quantile(itl_distribution(m, point), np.array(PERCENTILES) / 100.0, max(float(point.iteration_ms * 2),
                                                                                1e-3))
    return Percentiles(*(float(v) for v in q))


def ttft_percentiles(m: ReplicaModel, point: LoadPoint, cdf: Callable | None = None) -> Percentiles:
    """TTFT percentiles alone, bracketed as latency_percentiles brackets them (the same figures). `cdf`:
    ttft_distribution(m, point), when the caller holds it."""
    if not bool(point.stable):
        return latency_percentiles(m, point)[0]
    first = float(np.max(m.prefill_work_ms) + point.iteration_ms + point.wait_mean_ms + 1.0)
    cdf = cdf if cdf is not None else ttft_distribution(m, point)
    q = quantile(cdf, np.array(PERCENTILES) / 100.0, max(first, 1e-3))
    return Percentiles(*(float(v) for v in q))


def rate_bound_per_s(d: Deployment, context: float, max_batch: int, output_len: int, itl_ms: float,
                     work_ms: float, steps: StepTable | None = None) -> float | None:
    """An upper bound on a replica's goodput (req/s), or None where there is none to give. In the serving
    model lambda(N) = N / ((O - 1) D(N) + N E[W]), which grows with N (N / D(N) does); E[W] >= W at the mean
    prompt (`work_ms`: prefill work grows at least linearly with length, so Jensen's inequality); and an ITL
    percentile of 50 or more is at least D(N) (every ITL component is centred at D(N) + its slope + prompt
    work >= D(N)), so the ITL objective caps N where D(N) reaches it. Over a grid of N, the true cap lies
    between the last point within the objective and the next, hence N_next / ((O - 1) D(N_last) + N_next W).
    `steps`: the table of N and D(N) (LayoutMemo.bound_steps), when the caller holds it."""
    if output_len <= 1:
        return None
    population, step_ms = steps if steps is not None else bound_steps(d, max_batch, context)
    within = (step_ms <= itl_ms).nonzero()[0]
    if len(within) == 0:
        return None  # even one sequence misses ITL: evaluated, so that it says why
    last = int(within[-1])
    nxt = min(last + 1, len(population) - 1)
    n = float(population[nxt])
    return 1.01 * n / ((output_len - 1) * float(step_ms[last]) + n * 0.99 * work_ms) * 1000.0


def decode_step_caps_ms(objective: SizingObjective, arrival_cv: float) -> tuple[float, float]:
    """(ITL cap, decode-step cap), ms: the most a decode step may take for the ITL objective to hold
    confirmed, the objective over the band's least ratio (1 + the validated agreement) where the arrivals have
    a simulated class, and for both ITL and mean TPOT (a TPOT is at least the decode step)."""
    itl_cap_ms = objective.itl_ms if objective.itl_ms is not None else math.inf
    if arrival_class(arrival_cv) is not None:
        itl_cap_ms /= 1.0 + AGREEMENT[f"p{objective.percentile}"]
    return itl_cap_ms, min(itl_cap_ms, objective.tpot_ms or math.inf)


def trickle_miss(steps: StepTable, objective: SizingObjective, arrival_cv: float,
                 output_len: int) -> str | None:
    """Why no rate of a replica meets the ITL objective, read off its decode-step table alone, or None where
    the table does not show it. rate_bound_per_s's certificate: an ITL percentile of 50 or more is at least
    the decode step D(N) of the decoding population, and D(N) >= min over N of the table, so where even that
    minimum is over the ITL cap (decode_step_caps_ms: the objective less the simulated range's least
    margin), every rate misses ITL and the family needs no serving model to say so (issue 31: a request with
    a tight ITL objective evaluated thousands of such families one by one, 5.5 s of CPU). Mean TPOT certifies
    nothing here: the serving model's TPOT at a trickle is its mean iteration, which can sit under D(1)
    (hypothesis found one with 2 output tokens)."""
    itl_cap_ms, _ = decode_step_caps_ms(objective, arrival_cv)
    fastest_ms = float(np.min(steps[1]))
    if output_len <= 1 or not fastest_ms > itl_cap_ms:
        return None
    pct, itl_ms = objective.percentile, objective.itl_ms
    margin = "" if itl_cap_ms == itl_ms else (
        f" ({itl_ms:g} ms less the simulated range's {AGREEMENT[f'p{pct}']:.0%} margin)")
    return f"its fastest decode step is {fastest_ms:.1f} ms > {itl_cap_ms:.1f} ms for p{pct} ITL{margin}"


def confirmed_bound_per_s(d: Deployment, context: float, max_batch: int, output_len: int, work_ms: float,
                          steps: StepTable | None, objective: SizingObjective,
                          shape: tuple[float, bool, str], max_utilization: float | None,
                          fixed_prompts: bool = False, chunk_ms: float | None = None,
                          empty_ms: float | None = None, exact_work: bool = False) -> float | None:
    """An upper bound on a replica's confirmed rate (planner.serving.confirmed_rate), req/s: rate_bound_per_s
    with the decode step capped by the ITL bound over the band's least ratio (1 + the validated agreement)
    and by mean TPOT (at least the decode step), and at most the headroom's share of the bound at the largest
    population, where the headroom is also under the load at which the band's TTFT ratio reaches objective /
    prompt work (every TTFT is at least its prompt's work: `fixed_prompts`, every prompt as long as
    `work_ms`'s). `shape`: (arrival CV, variable lengths, prompt class). `chunk_ms` and `empty_ms` (an
    aggregated replica under Poisson or smoother arrivals with fixed prompts: a lower bound on a prompt's
    first chunk's work, A, and the empty iteration): the ITL bound also counts the prompt chunks riding the
    iterations (planner.serving.interference_bound). `exact_work` (with `empty_ms`; clumped arrivals,
    CV > 1): `work_ms` is the prompt's own work, not a floor under it, so it also bounds a prompt-carrying
    iteration from above, as the quiet window's limit under clumps needs (planner.serving.
    clumped_quiet_window: a larger work loosens that limit, so a floor may not stand in for it)."""
    banded = arrival_class(shape[0]) is not None
    pct = objective.percentile
    itl_cap_ms, decode_cap_ms = decode_step_caps_ms(objective, shape[0])
    bound = rate_bound_per_s(d, context, max_batch, output_len, decode_cap_ms, work_ms, steps)
    top = rate_bound_per_s(d, context, max_batch, output_len, math.inf, work_ms, steps)
    if bound is None or top is None:
        return bound
    if (objective.itl_ms is not None and chunk_ms is not None and empty_ms is not None and fixed_prompts
            and (shape[0] <= 1.0 or exact_work)):
        table = steps if steps is not None else bound_steps(d, max_batch, context)
        window: float | np.ndarray | None
        if shape[0] <= 1.0:
            window = quiet_window_limit(pct)
        else:  # per cell, at its low end (the empty iteration's first)
            low_ms = np.maximum(np.concatenate([[empty_ms], table[1]]), 1e-300)
            window = clumped_window_limit(shape[0], pct, itl_cap_ms / low_ms, work_ms / low_ms)
            window = window if np.isfinite(window).any() else None
        if window is not None:
            chunked_cap_ms = min(itl_cap_ms - chunk_ms, objective.tpot_ms or math.inf)  # D + A within ITL
            chunked = (rate_bound_per_s(d, context, max_batch, output_len, chunked_cap_ms, work_ms, table)
                       if chunked_cap_ms >= float(table[1].min()) else None)  # else none within: None
            quiet = quiet_rate_bound_per_s(table, empty_ms, output_len, window)
            bound = min(bound, max(chunked or 0.0, quiet))
    if fixed_prompts and objective.ttft_ms is not None:
        waiting = ttft_wait_rate_bound_per_s(work_ms, objective.ttft_ms, pct, shape[0], shape[1])
        bound = bound if waiting is None else min(bound, waiting)
    load = max_utilization or (LOADS[-1] if banded else NO_BAND_UTILIZATION)
    if banded and fixed_prompts and work_ms > 0 and objective.ttft_ms is not None:
        load = min(load, band_load_limit(f"ttft_p{pct}", *shape, objective.ttft_ms / work_ms))
    return min(bound, load * top)
