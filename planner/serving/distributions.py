"""Latency distributions of one replica at a load point (planner.serving.replica): TTFT, ITL and E2E as
mixtures, their CDFs, means and percentiles. The model they follow is stated in replica.py's docstring."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np

from planner.serving.arrivals import MAX_WINDOW_ARRIVALS, WINDOW_ARRIVALS, gap_cdf, window_counts
from planner.serving.replica import LoadPoint, ReplicaModel, mean_over_lengths

RESIDUAL_POINTS = 8  # equal-mass points of the uniform rest of the iteration in progress
_RESIDUAL_U = (np.arange(RESIDUAL_POINTS) + 0.5) / RESIDUAL_POINTS  # their positions in the rest
PERCENTILES = (50, 90, 99)


def _normal_cdf(x: np.ndarray) -> np.ndarray:
    """Standard normal CDF (Abramowitz & Stegun 7.1.26 erf, |error| < 1.5e-7); numpy has no erf."""
    z = np.abs(x) / math.sqrt(2.0)
    t = 1.0 / (1.0 + 0.3275911 * z)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    erf = 1.0 - poly * np.exp(-z * z)
    return 0.5 * (1.0 + np.sign(x) * erf)


def _ttft_parts(m: ReplicaModel, p: LoadPoint) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """TTFT as a mixture: own iterations plus, for an arrival that does not wait (1 - P(wait)), the rest of
    the decode-only iteration in progress; for one that waits, an exponential wait (GI/M/1's form; it holds
    the rest of the prompt iteration in progress). Returns the parts' offsets, weights and exponential means
    (0: none), shape (..., LENGTH_GRID * (RESIDUAL_POINTS + 2))."""
    own = np.ceil(m.computed_tokens / p.chunk_tokens[..., None]) * p.decode_ms[..., None] + m.prefill_work_ms
    waits = np.clip(np.asarray(p.wait_probability) * p.seen, 0.0, 1.0)
    busy = 1.0 - np.exp(-p.population * p.seen)  # an arrival finds a decode iteration in progress
    # Prompts arriving between this one and the start of its iteration ride it too (up to the budget),
    # each adding its work: every ms before the iteration starts costs 1 + lambda E[W] (the prefill share).
    fits = np.maximum(p.chunk_tokens / m.mean_computed_tokens - 1.0, 0.0)
    stretch = 1.0 + p.prefill_share * np.minimum(fits, 1.0) * p.seen
    # the parts (waiting, no iteration in progress, RESIDUAL_POINTS rests of one), filled in place
    points = np.shape(p.iteration_ms) + (RESIDUAL_POINTS + 2,)
    residual = np.zeros(points)
    residual[..., 2:] = (p.decode_ms * stretch)[..., None] * _RESIDUAL_U
    weight = np.empty(points)
    weight[..., 0] = waits
    weight[..., 1] = (1.0 - busy) * (1.0 - waits)
    weight[..., 2:] = (busy * (1.0 - waits) / RESIDUAL_POINTS)[..., None]
    with np.errstate(divide="ignore", invalid="ignore"):
        conditional = np.where(waits > 0, p.wait_mean_ms * p.seen / np.maximum(waits, 1e-300), 0.0)
    means = np.zeros(points)
    means[..., 0] = conditional
    parts = own[..., :, None] + residual[..., None, :]
    weights = weight[..., None, :] / len(m.computed_tokens)
    tails = means[..., None, :]
    if weights.shape != parts.shape:  # a length grid: each length gets the same weights and means
        weights, tails = np.broadcast_to(weights, parts.shape), np.broadcast_to(tails, parts.shape)
    shape = parts.shape[:-2] + (-1,)
    frontend = m.workload.ttft_overhead_ms + m.workload.ttft_per_running_ms * p.population * p.seen
    return (parts.reshape(shape) + np.asarray(frontend)[..., None], weights.reshape(shape),
            tails.reshape(shape))


def ttft_distribution(m: ReplicaModel, p: LoadPoint):
    """t -> P(TTFT <= t) at the load point (its parts computed once); t broadcasts against its shape."""
    parts, weights, tails = _ttft_parts(m, p)
    # Only the first part of each length's block (the wait) has an exponential tail (_ttft_parts: every
    # other mean is 0), so only those are evaluated as exponentials; the rest are point masses, x >= 0.
    waits = (Ellipsis, slice(0, None, RESIDUAL_POINTS + 2))
    wait_tails = tails[waits]
    wait_scale = np.maximum(wait_tails, 1e-9)
    waiting = wait_tails > 0

    def cdf(t_ms) -> np.ndarray:
        x = np.asarray(t_ms, dtype=float)[..., None] - parts
        within = (x >= 0).astype(float)
        x_wait = x[waits]
        with np.errstate(over="ignore"):
            inside = np.where(x_wait < 0, 0.0, -np.expm1(-np.maximum(x_wait, 0.0) / wait_scale))
        within[waits] = np.where(waiting, inside, within[waits])
        return np.sum(weights * within, axis=-1)
    return cdf


def ttft_cdf(m: ReplicaModel, p: LoadPoint, t_ms) -> np.ndarray:
    """P(TTFT <= t); `t_ms` broadcasts against the load point's shape."""
    return ttft_distribution(m, p)(t_ms)


def window_arrivals_bound(top: float, arrival_cv: float) -> int:
    """The most prompt arrivals _itl_atoms counts in an iteration window when the widest window of its load
    points holds `top` arrivals on average (its count's distribution is renormalised over 0..this)."""
    dispersion = max(arrival_cv ** 2, 1.0)
    return min(MAX_WINDOW_ARRIVALS,
               int(math.ceil(top + 8.0 * math.sqrt(top * dispersion) + 8.0 * dispersion)))


def _itl_atoms(m: ReplicaModel, p: LoadPoint, elementwise: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Extra time an iteration's prompt chunks add, and the share of tokens that see it."""
    n = m.computed_tokens
    per_token = m.prefill_work_ms / n
    chunk = p.chunk_tokens[..., None]
    first = np.minimum(n, chunk)
    continuations = np.maximum(np.ceil(n / chunk) - 1.0, 0.0)  # full chunks after the first
    window = p.rate_per_ms * p.iteration_ms
    full_share = np.minimum(1.0, window * mean_over_lengths(continuations))
    full_extra = mean_over_lengths(chunk * per_token)
    # prompts arriving during the previous iteration: Poisson count, their first chunks together
    widest = max(float(np.asarray(window).max()), 0.0) if np.size(window) else 0.0  # np.max(initial=0)'s
    kmax = window_arrivals_bound(widest, m.workload.arrival_cv)
    pk = window_counts(p.rate_per_ms, p.iteration_ms, m.workload.arrival_cv, kmax, elementwise)
    k = WINDOW_ARRIVALS[: kmax + 1]
    mean_first_tokens = mean_over_lengths(first, keepdims=True)
    mean_first_work = mean_over_lengths(first * per_token, keepdims=True)
    tokens_k = np.minimum(k * mean_first_tokens, chunk)
    extra_k = tokens_k * mean_first_work / np.maximum(mean_first_tokens, 1e-12)
    one = first * per_token  # a single arrival: its own prompt's first chunk
    # Which iterations carry prompts under clumped arrivals: a two-state chain. After a decode-only
    # iteration (window D) the next carries prompts with the window's P(N >= 1); after one carrying
    # prompts (window D + W, W their extra time), with P(next gap < D + W), the inter-arrival CDF: clumps
    # chain prompt-carrying iterations. The chain's ratio to its Poisson self scales the Poisson window's
    # share, so Poisson arrivals keep the window count and the model is continuous in `arrival_cv`.
    if m.workload.arrival_cv > 1.0:
        rate = np.asarray(p.rate_per_ms, dtype=float)
        some = np.maximum(pk[..., 1:].sum(axis=-1), 1e-300)
        after_prompts = p.decode_ms + (pk[..., 1:] * extra_k[..., 1:]).sum(axis=-1) / some

        def chain(cv: float) -> np.ndarray:
            enter = 1.0 - window_counts(rate, p.decode_ms, cv, 1, elementwise)[..., 0]
            return enter / np.maximum(enter + 1.0 - gap_cdf(rate, after_prompts, cv, elementwise), 1e-300)

        poisson_share = 1.0 - window_counts(rate, p.iteration_ms, 1.0, 1)[..., 0]
        carrying = np.minimum(
            poisson_share * chain(m.workload.arrival_cv) / np.maximum(chain(1.0), 1e-300), 1.0
        )
        pk = np.concatenate(
            [(1.0 - carrying)[..., None], pk[..., 1:] * (carrying / some)[..., None]], axis=-1
        )
    atoms = np.concatenate([full_extra[..., None], extra_k[..., :1], one, extra_k[..., 2:]], axis=-1)
    rest = 1 - full_share[..., None]
    alone = rest * (pk[..., 1:2] / one.shape[-1])
    weights = np.concatenate([full_share[..., None], rest * pk[..., :1],
                              alone if alone.shape == one.shape else np.broadcast_to(alone, one.shape),
                              rest * pk[..., 2:]], axis=-1)
    return atoms, weights


def itl_distribution(m: ReplicaModel, p: LoadPoint, elementwise: bool = False):
    """t -> P(ITL <= t), pooled over tokens, at the load point (its atoms computed once). `elementwise`: each
    point of an array gets the figures it gets alone, where its window's arrival bound is the array's
    (arrivals.window_counts; the caller checks the bound: window_arrivals_bound)."""
    atoms, weights = _itl_atoms(m, p, elementwise)
    mean = p.decode_ms[..., None] + atoms
    spread = np.maximum(p.decode_spread_ms[..., None], 1e-6 * mean)

    def cdf(t_ms) -> np.ndarray:
        t = np.asarray(t_ms, dtype=float)[..., None]
        return np.sum(weights * _normal_cdf((t - mean) / spread), axis=-1)
    return cdf


def itl_cdf(m: ReplicaModel, p: LoadPoint, t_ms) -> np.ndarray:
    return itl_distribution(m, p)(t_ms)


def e2e_cdf(m: ReplicaModel, p: LoadPoint, t_ms) -> np.ndarray:
    """P(E2E <= t): TTFT plus (O - 1) mean iterations, over the output-length grid (the mixture as stated;
    latency_percentiles searches e2e_distribution, the same mixture with its parts computed once)."""
    decode = (m.output_tokens - 1.0) * p.iteration_ms[..., None]
    t = np.asarray(t_ms, dtype=float)[..., None] - decode
    return np.mean(ttft_cdf(m, _expand_point(p), t), axis=-1)


def e2e_distribution(m: ReplicaModel, p: LoadPoint):
    """t -> P(E2E <= t) at a scalar load point: e2e_cdf's mixture (each TTFT part shifted by each output
    length's decode, equal weights), its parts computed once. Most parts are point masses (a lone prompt's
    own iterations plus a residual point): sorted once, their CDF at t is a cumulative weight found by
    binary search; only the exponential (waiting) parts are evaluated at each t. The same sum as e2e_cdf's
    in another order: equal to it within 1e-12 (tests/test_properties.py)."""
    parts, weights, tails = _ttft_parts(m, p)
    decode = (m.output_tokens - 1.0) * float(p.iteration_ms)
    offsets = (parts[None, :] + decode[:, None]).ravel()
    mass = np.broadcast_to(weights[None, :] / len(decode), (len(decode), len(weights))).ravel()
    scale = np.broadcast_to(tails[None, :], (len(decode), len(tails))).ravel()
    atom = scale <= 0
    order = np.argsort(offsets[atom], kind="stable")
    atom_at = offsets[atom][order]
    atom_cumulative = np.concatenate([[0.0], np.cumsum(mass[atom][order])])
    wait_at, wait_mass, wait_scale = offsets[~atom], mass[~atom], scale[~atom]

    def cdf(t_ms) -> np.ndarray:
        t = np.asarray(t_ms, dtype=float)
        below = atom_cumulative[np.searchsorted(atom_at, t, side="right")]
        if not len(wait_at):
            return below
        x = t[..., None] - wait_at
        with np.errstate(over="ignore"):
            waited = np.where(x < 0, 0.0, -np.expm1(-np.maximum(x, 0.0) / wait_scale))
        return below + np.sum(wait_mass * waited, axis=-1)
    return cdf


def _map_point(p: LoadPoint, each) -> LoadPoint:
    """A load point with `each` applied to every field."""
    return LoadPoint(**{f.name: each(getattr(p, f.name)) for f in fields(p)})


def _expand_point(p: LoadPoint) -> LoadPoint:
    return _map_point(p, lambda v: np.asarray(v)[..., None])


def bisection_midpoints(lo: float, hi: float, depth: int) -> list[float]:
    """Every midpoint the next `depth` steps of a bisection of [lo, hi] may take, as each step computes it
    (0.5 (lo + hi)), in level order: node i's cells are 2 i + 1, (lo, mid), and 2 i + 2, (mid, hi)."""
    mids: list[float] = []
    cells = [(lo, hi)]
    for _ in range(depth):
        level = [0.5 * (a + b) for a, b in cells]
        cells = [cell for (a, b), mid in zip(cells, level, strict=True) for cell in ((a, mid), (mid, b))]
        mids += level
    return mids


def walk_bisection_tree(lo: float, hi: float, mids: list[float], above, depth: int) -> tuple[float, float]:
    """The `depth` steps of a bisection of [lo, hi] that bisection_midpoints(lo, hi, depth)'s `mids` foresaw:
    `above[i]`: whether the answer lies above mids[i] (the step keeps (mid, hi)). The same cell as the steps
    taken one at a time."""
    node = 0
    for _ in range(depth):
        if above[node]:
            lo, node = mids[node], 2 * node + 2
        else:
            hi, node = mids[node], 2 * node + 1
    return lo, hi


def bisect_by_trees(lo: float, hi: float, steps: int, depth: int, above) -> tuple[float, float]:
    """`steps` bisection steps of [lo, hi], the midpoints of `depth` steps judged in one call:
    `above(lo, hi, depth, mids)` says for each midpoint whether the answer lies above it (elementwise, so
    each midpoint's verdict is its own). Returns the final cell."""
    done = 0
    while done < steps:
        d = min(depth, steps - done)
        mids = bisection_midpoints(lo, hi, d)
        lo, hi = walk_bisection_tree(lo, hi, mids, above(lo, hi, d, mids), d)
        done += d
    return lo, hi


QUANTILE_DEPTH = 3  # bisection steps of quantile() whose midpoints one cdf call judges


def quantile(cdf, probability, high_ms, grid: int = 32, refine: int = 14) -> np.ndarray:
    """The t where the monotone cdf(t) reaches each `probability`: a grid on [0, high] (grown until it covers
    them), then bisection inside the bracketing cell. `cdf` is elementwise in t (every distribution here
    is), so the midpoints of several steps are judged in one call and the steps then walk them: the same
    midpoints, the same values, the same answer as one call a step."""
    prob = np.atleast_1d(np.asarray(probability, dtype=float))
    high = float(high_ms)
    for _ in range(30):
        ts = np.linspace(0.0, high, grid + 1)
        values = cdf(ts)
        if values[-1] >= prob.max():
            break
        high *= 4.0
    cell = np.clip(np.searchsorted(values, prob), 1, grid)
    lo, hi = [float(t) for t in ts[cell - 1]], [float(t) for t in ts[cell]]
    done = 0
    while done < refine:
        depth = min(QUANTILE_DEPTH, refine - done)
        trees = [bisection_midpoints(a, b, depth) for a, b in zip(lo, hi, strict=True)]
        below = cdf(np.array([mid for tree in trees for mid in tree])).reshape(len(trees), -1) < prob[:, None]
        for j, tree in enumerate(trees):
            lo[j], hi[j] = walk_bisection_tree(lo[j], hi[j], tree, below[j], depth)
        done += depth
    return 0.5 * (np.array(lo) + np.array(hi))


def quantiles_over_points(cdf, probability, high_ms, grid: int = 32, refine: int = 14) -> np.ndarray:
    """quantile() at R load points at once: `cdf` maps t of shape (Q, R) (or (G, R)) to the same shape, row r
    at point r; `high_ms` has shape (R,). Each point walks the grid and bisection quantile() walks (the same
    grid, the same midpoints 0.5 (lo + hi)), so each column is quantile()'s answer at that point: (Q, R)."""
    prob = np.atleast_1d(np.asarray(probability, dtype=float))
    high = np.asarray(high_ms, dtype=float).copy()
    for _ in range(30):
        ts = np.linspace(0.0, high, grid + 1)  # (grid + 1, R): one grid per point
        values = cdf(ts)
        covered = values[-1] >= prob.max()
        if covered.all():
            break
        high = np.where(covered, high, high * 4.0)  # a covered point keeps its grid: quantile() stops there
    # searchsorted on each point's monotone grid: the count of grid values below the probability
    cell = np.clip((values[None, :, :] < prob[:, None, None]).sum(axis=1), 1, grid)
    column = np.arange(values.shape[1])[None, :]
    lo, hi = ts[cell - 1, column], ts[cell, column]
    for _ in range(refine):
        mid = 0.5 * (lo + hi)
        below = cdf(mid) < prob[:, None]
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return 0.5 * (lo + hi)


def _stable_points(p: LoadPoint) -> LoadPoint:
    """The stable points of a load point over rates (1-d arrays; scalar fields stay as they are)."""
    keep = np.asarray(p.stable, dtype=bool)
    return _map_point(p, lambda v: np.asarray(v)[keep] if np.ndim(v) else v)


def percentiles_over_rates(m: ReplicaModel, p: LoadPoint, metric: str) -> np.ndarray:
    """TTFT or ITL (`metric`) percentiles (PERCENTILES) at every stable point of a load point over rates, in
    one search (latency_percentiles' figures, a point at a time; the ITL window bound is the widest
    window's, so a point's ITL matches its own to the renormalised tail, well under 1e-6): (Q, R) over the
    stable points in order."""
    s = _stable_points(p)
    probability = np.array(PERCENTILES) / 100.0
    if metric == "ttft":
        first = np.max(m.prefill_work_ms) + s.iteration_ms + s.wait_mean_ms + 1.0
        return quantiles_over_points(ttft_distribution(m, s), probability, np.maximum(first, 1e-3))
    return quantiles_over_points(itl_distribution(m, s), probability, np.maximum(s.iteration_ms * 2, 1e-3))


def ttft_itl_percentiles_over_rates(m: ReplicaModel, p: LoadPoint) -> tuple[np.ndarray, np.ndarray]:
    """TTFT and ITL percentiles_over_rates: (TTFT, ITL), each (Q, R) over the stable points in order."""
    return percentiles_over_rates(m, p, "ttft"), percentiles_over_rates(m, p, "itl")


@dataclass(frozen=True)
class Percentiles:
    p50: float | None
    p90: float | None
    p99: float | None

    def at(self, percentile: int) -> float | None:
        return {50: self.p50, 90: self.p90, 99: self.p99}[percentile]


NO_PERCENTILES = Percentiles(None, None, None)


def _percentiles(cdf, high: float) -> Percentiles:
    q = quantile(cdf, np.array(PERCENTILES) / 100.0, max(high, 1e-3))
    return Percentiles(*(float(v) for v in q))


def latency_percentiles(m: ReplicaModel, p: LoadPoint,
                        itl: Percentiles | None = None) -> tuple[Percentiles, Percentiles, Percentiles]:
    """TTFT, ITL and E2E percentiles at a scalar load point (None where it is not stable). `itl`: the ITL
    percentiles at this point, when the caller has them (planner.serving.goodput_search.itl_percentiles)."""
    if not bool(p.stable):
        return NO_PERCENTILES, NO_PERCENTILES, NO_PERCENTILES
    first = float(np.max(m.prefill_work_ms) + p.iteration_ms + p.wait_mean_ms + 1.0)
    ttft = _percentiles(ttft_distribution(m, p), first)
    if itl is None:
        itl = _percentiles(itl_distribution(m, p), float(p.iteration_ms * 2))
    if np.ptp(m.output_tokens) == 0:  # fixed output length: E2E is TTFT shifted by the decode
        shift = float((m.output_tokens[0] - 1.0) * p.iteration_ms)
        e2e = Percentiles(*(v + shift for v in (ttft.p50, ttft.p90, ttft.p99)))  # type: ignore[operator]
    else:
        e2e = _percentiles(e2e_distribution(m, p), first + float(np.max(m.output_tokens) * p.iteration_ms))
    return ttft, itl, e2e


def mean_ttft_ms(m: ReplicaModel, p: LoadPoint) -> np.ndarray:
    parts, weights, tails = _ttft_parts(m, p)
    return np.sum((parts + tails) * weights, axis=-1)


def mean_itl_ms(m: ReplicaModel, p: LoadPoint) -> np.ndarray:
    """Mean ITL pooled over tokens: the mixture itl_distribution draws, each component at D + its atom."""
    atoms, weights = _itl_atoms(m, p)
    return p.decode_ms + np.sum(weights * atoms, axis=-1) / np.maximum(np.sum(weights, axis=-1), 1e-300)
