"""The arrival process a replica sees: gamma inter-arrival times of mean 1 / rate and CV `arrival_cv` (1:
Poisson; > 1: clumped). The gap's CDF, the count of arrivals in an iteration window, and GI/M/1's probability
that an arriving prompt waits."""

from __future__ import annotations

import math

import numpy as np

MAX_WINDOW_ARRIVALS = 48
_LOG_FACTORIAL = np.array([math.lgamma(k + 1.0) for k in range(MAX_WINDOW_ARRIVALS + 1)])
WINDOW_ARRIVALS = np.arange(MAX_WINDOW_ARRIVALS + 1, dtype=float)  # the counts k = 0..MAX_WINDOW_ARRIVALS
WINDOW_ARRIVALS.flags.writeable = False
_COUNTS_LESS_ONE = WINDOW_ARRIVALS[1:] - 1.0  # k - 1 on k = 1..MAX_WINDOW_ARRIVALS


def waiting_probability(utilization: np.ndarray, arrival_cv: float) -> np.ndarray:
    """P(an arriving prompt waits) in a GI/M/1 queue with gamma inter-arrival times of CV `arrival_cv`: the
    root sigma in (0, 1) of sigma = A*(mu (1 - sigma)), A*(s) = (1 + theta s)^-k the gamma's Laplace transform
    (k = 1 / ca^2, theta mu = ca^2 / rho). Poisson gives sigma = rho; clumped arrivals (ca > 1) wait far more
    often than rho says (ca 2 at rho 0.1: sigma 0.46), since most of a clump's arrivals land while the one
    before is still in prefill."""
    # np.clip's figures (bounds away from 0: no signed zero for the two to differ on)
    rho = np.minimum(np.maximum(np.asarray(utilization, dtype=float), 1e-12), 1.0 - 1e-12)
    ca2 = float(arrival_cv) ** 2
    if abs(ca2 - 1.0) < 1e-9:
        return rho

    fixed = ca2 < 1e-9  # deterministic arrivals: A*(s) = e^(-s / lambda)
    power = 0.0 if fixed else -1.0 / ca2
    lo, hi = np.zeros_like(rho), np.full_like(rho, 1.0 - 1e-9)
    for _ in range(24):  # sigma - A*(.) is < 0 below the root and > 0 between it and 1 (2^-24: plenty)
        mid = 0.5 * (lo + hi)
        below = mid < (np.exp(-(1.0 - mid) / rho) if fixed else (1.0 + ca2 * (1.0 - mid) / rho) ** power)
        np.copyto(lo, mid, where=below)  # in place: the cell's new ends without two selections
        np.copyto(hi, mid, where=~below)
    return 0.5 * (lo + hi)


def waiting_probabilities(first: np.ndarray, second: np.ndarray,
                          arrival_cv: float) -> tuple[np.ndarray, np.ndarray]:
    """waiting_probability at two utilizations, clumped arrivals' root search run once for both (it is
    elementwise: the same numbers in half the calls)."""
    if abs(float(arrival_cv) ** 2 - 1.0) < 1e-9:  # Poisson: each is its utilization, no search to share
        return waiting_probability(first, arrival_cv), waiting_probability(second, arrival_cv)
    both = (first, second) if np.shape(first) == np.shape(second) else np.broadcast_arrays(first, second)
    roots = waiting_probability(np.stack(both), arrival_cv)
    return roots[0, ...], roots[1, ...]


def _lower_gamma_regularized(a: float, x: np.ndarray, terms: int = 80,
                             elementwise: bool = False) -> np.ndarray:
    """P(a, x) by its power series x^a e^-x / Gamma(a + 1) sum_n x^n / ((a + 1)...(a + n)); numpy has no
    incomplete gamma, and the windows here keep x below a few tens (the series then converges). The series
    stops once it has converged everywhere; `elementwise`: each element's sum stops where it converges, so
    each is the number it would be alone (an array's figures then match each rate's lone call)."""
    given = np.maximum(np.asarray(x, dtype=float), 0.0)
    # An unstable point's window is infinite: P(a, inf) = 1 exactly. The series runs on finite x only
    # (inf - inf in the log front would be NaN, and numpy would warn); a NaN x stays NaN.
    finite = np.isfinite(given)
    everywhere = bool(finite.all())  # the usual case: the same figures without the selections
    x = given if everywhere else np.where(finite, given, 0.0)
    # the first term, 1 x x / (a + 1), is x / (a + 1) to the bit: the sum starts there
    term = x / (a + 1)
    total = 1.0 + term
    going = np.ones(x.shape, dtype=bool) if elementwise else None
    for n in range(2, terms):
        term = term * x / (a + n)
        total = total + term if going is None else np.where(going, total + term, total)
        if n % 4 == 0:
            if going is None and not (term > 1e-10 * total).any():  # converged everywhere
                break
            if going is not None:
                going &= term > 1e-10 * total
                if not going.any():
                    break
    log_front = a * np.log(np.maximum(x, 1e-300)) - x - math.lgamma(a + 1.0)
    with np.errstate(over="ignore", invalid="ignore"):  # a sum that overflowed is replaced below
        series = np.where(x > 0, np.minimum(np.exp(log_front) * total, 1.0), 0.0)
    # Past ~30 the series' `terms` fall short of its peak (at n ~ x) and it reads P far under 1 (0.52 at
    # x = 80, 6e-5 at 120) or overflows: where it has not converged, 1 - Q(a, x) from Q's continued fraction,
    # which converges there (x > a + 1). Converged elements keep the series' figures to the bit.
    short = ~(term <= 1e-10 * total) & (x > a + 1.0)
    if short.any():
        series = np.where(short, 1.0 - _upper_gamma_regularized(a, np.where(short, x, a + 2.0)), series)
    return series if everywhere else np.where(finite, series, np.where(given == np.inf, 1.0, np.nan))


def _upper_gamma_regularized(a: float, x: np.ndarray, steps: int = 300) -> np.ndarray:
    """Q(a, x) = Gamma(a, x) / Gamma(a) by its continued fraction (modified Lentz), for x > a + 1, where it
    converges: e^-x x^a / Gamma(a) / (x + 1 - a - 1 (1 - a) / (x + 3 - a - 2 (2 - a) / (x + 5 - a - ...)))."""
    tiny = 1e-300
    b = x + 1.0 - a
    c = np.full(np.shape(x), 1.0 / tiny)
    d = 1.0 / b
    h = d
    for i in range(1, steps):
        an = -i * (i - a)
        b = b + 2.0
        d = an * d + b
        d = np.where(np.abs(d) < tiny, tiny, d)
        c = b + an / c
        c = np.where(np.abs(c) < tiny, tiny, c)
        d = 1.0 / d
        delta = d * c
        h = h * delta
        if np.all(np.abs(delta - 1.0) < 1e-15):
            break
    return np.minimum(np.exp(a * np.log(x) - x - math.lgamma(a)) * h, 1.0)


def gap_cdf(rate_per_ms: np.ndarray, t_ms: np.ndarray, arrival_cv: float,
            elementwise: bool = False) -> np.ndarray:
    """P(inter-arrival time <= t) for gamma gaps of mean 1 / rate and CV `arrival_cv` (`elementwise`: as
    _lower_gamma_regularized's)."""
    lam_t = np.asarray(rate_per_ms, dtype=float) * np.asarray(t_ms, dtype=float)
    ca2 = float(arrival_cv) ** 2
    if ca2 < 1e-6:
        return (lam_t >= 1.0).astype(float)
    if abs(ca2 - 1.0) < 1e-9:
        return -np.expm1(-lam_t)
    return _lower_gamma_regularized(1.0 / ca2, lam_t / ca2, elementwise=elementwise)


def window_counts(rate_per_ms: np.ndarray, window_ms: np.ndarray, arrival_cv: float, kmax: int,
                  elementwise: bool = False) -> np.ndarray:
    """P(k prompt arrivals in an iteration window), k = 0..kmax, renormalised. Poisson arrivals: Poisson.
    Gamma inter-arrival times of CV ca > 1 (clumps): P(0) exact for the stationary renewal process, 1 - lambda
    E[min(gap, window)], and the windows that do get arrivals get them in clumps, a geometric count on 1, 2,
    ... keeping the mean lambda x window. `elementwise`: as _lower_gamma_regularized's."""
    ca2 = float(arrival_cv) ** 2
    if ca2 <= 1.0 + 1e-9:
        mu = np.maximum(np.asarray(rate_per_ms * window_ms, dtype=float), 1e-300)[..., None]
        k = WINDOW_ARRIVALS[: kmax + 1]
        # an unstable point's window is infinite: no Poisson count there (NaN, as 0 x log(inf) gave), and
        # log is only ever taken of a finite positive mean
        finite = np.isfinite(mu)
        if finite.all():  # the usual case: the same figures without the two selections
            pk = np.exp(k * np.log(mu) - mu - _LOG_FACTORIAL[: kmax + 1])
        else:
            safe = np.where(finite, mu, 1.0)
            pk = np.where(finite, np.exp(k * np.log(safe) - safe - _LOG_FACTORIAL[: kmax + 1]), np.nan)
        return pk / np.maximum(pk.sum(axis=-1, keepdims=True), 1e-300)
    _, busy, clump = _clumps(rate_per_ms, window_ms, ca2, elementwise)
    if kmax == 1:  # ratio^0 is 1 (NaN included), and x 1 leaves busy / clump as it is
        pk = np.concatenate([1.0 - busy, busy / clump], axis=-1)
    else:  # busy / clump x ratio^(k - 1) on k = 1..kmax (every k there is >= 1)
        ratio = 1.0 - 1.0 / clump
        pk = np.concatenate([1.0 - busy, busy / clump * ratio ** _COUNTS_LESS_ONE[:kmax]], axis=-1)
    return pk / np.maximum(pk.sum(axis=-1, keepdims=True), 1e-300)


def clump_mean(rate_per_ms: np.ndarray, window_ms: np.ndarray, arrival_cv: float) -> np.ndarray:
    """The mean count of a window that has arrivals, max(lambda x window / P(N >= 1), 1), under gamma
    inter-arrival times of CV `arrival_cv` > 1: the geometric clump window_counts draws."""
    return _clumps(rate_per_ms, window_ms, float(arrival_cv) ** 2, False)[2][..., 0]


_CLUMPS_KEPT = 4  # a load point's windows are counted twice (its riders, its ITL): the last few kept
_clumps_kept: dict[tuple, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}


def _clumps(rate_per_ms: np.ndarray, window_ms: np.ndarray, ca2: float,
            elementwise: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """window_counts' clumped figures, shape (..., 1): the mean count lambda x window, P(N >= 1) and the
    mean count of a window that has arrivals. Kept by the inputs' bits (read-only), so the same windows
    asked again get the same arrays without the series."""
    rate, window = np.asarray(rate_per_ms, dtype=float), np.asarray(window_ms, dtype=float)
    key = (ca2, elementwise, rate.shape, window.shape, rate.tobytes(), window.tobytes())
    kept = _clumps_kept.get(key)
    if kept is None:
        kept = _count_clumps(rate, window, ca2, elementwise)
        for a in kept:
            a.flags.writeable = False
        if len(_clumps_kept) >= _CLUMPS_KEPT:  # (clear: atomic, where threads share the dict)
            _clumps_kept.clear()
        _clumps_kept[key] = kept
    return kept


def _count_clumps(rate_per_ms: np.ndarray, window_ms: np.ndarray, ca2: float,
                  elementwise: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    mu = np.maximum(np.asarray(rate_per_ms * window_ms, dtype=float), 1e-300)[..., None]
    shape = 1.0 / ca2
    x = (np.asarray(rate_per_ms, dtype=float) * shape * np.asarray(window_ms, dtype=float))[
        ..., None
    ]  # window / theta
    lower = _lower_gamma_regularized(shape, x, elementwise=elementwise)
    survival = 1.0 - lower
    finite = bool(np.isfinite(mu).all() and np.isfinite(x).all())  # the usual case: nothing to select
    # P(a + 1, x) = P(a, x) - x^a e^-x / Gamma(a + 1); the front is 0 at an infinite window (on finite x only)
    safe_x = x if finite else np.where(np.isfinite(x), x, 0.0)
    front = np.exp(shape * np.log(np.maximum(safe_x, 1e-300)) - safe_x - math.lgamma(shape + 1.0))
    if not finite:
        front = np.where(np.isfinite(x), front, 0.0)
    # E[gap; gap < window] / E[gap], within [0, 1] (np.clip's figures: minimum / maximum keep a -0, which
    # busy, at least 1e-300, never shows)
    below = np.minimum(np.maximum(lower - np.where(x > 0, front, 0.0), 0.0), 1.0)
    # P(N >= 1) = lambda E[min(gap, window)]; 1 in an infinite window (where inf x 0 would be NaN)
    busy = np.minimum(np.maximum((mu if finite else np.where(np.isfinite(mu), mu, 0.0)) * survival + below,
                                 1e-300), 1.0)
    if not finite:
        busy = np.where(np.isfinite(mu), busy, 1.0)
    clump = np.maximum(mu / busy, 1.0)  # mean count of a window that has arrivals
    return mu, busy, clump
