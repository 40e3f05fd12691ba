"""The quiet window's limit under clumped arrivals (gamma inter-arrival times of CV > 1; issue 31): the
largest window x = lambda D(N) at which an ITL percentile of 75 or more can still fall on an iteration that
carries no prompt chunks. planner.serving.interference_bound derives the Poisson limit and the rate bound it
gives; this is the same limit for clumps, whose windows the serving model weighs differently.

Why (planner.serving.distributions._itl_atoms, CV > 1): the no-prompt atom weighs w_0 = (1 - full share)
(1 - carrying), carrying = min(share x chain(ca) / chain(1), 1), with
  * share = mu / (1 + mu), mu = lambda x iteration >= x (the Poisson window's P(N >= 1) at kmax = 1);
  * chain(c) = E_c / (E_c + S_c(lambda x after)), E_c = P(N >= 1) of a decode step's window at kmax = 1 (a
    function of x alone), S_c the gap's survival, `after` a prompt-carrying iteration: the decode step plus
    the mean extra of the iterations with k >= 1 arrivals, extra_k <= k W (each arrival's first chunk at most
    its prompt's work W), so after <= D + W E[k | k >= 1] <= D + W clump(mu), clump = max(mu / P(N >= 1),
    1), the untruncated geometric's mean (truncation at kmax only lowers it).

The percentile needs w_0 >= c = 2q - 1 - 1.5e-7 (the erf bound, as in the Poisson case), so carrying <= 1 - c.
With chain(1) <= 1 that caps share: mu <= mu_max(x) = y / (1 - y), y = (1 - c) / chain_low(x), where
chain_low(x) = E_ca(x) / (E_ca(x) + S_ca(x)) <= chain(ca) (S_ca(after) <= S_ca(x)); so after <= D (1 + v
clump(mu_max)) with v = W / D. And chain(1) <= E_1(x) / (E_1(x) + S_1(r x)) for r = 1 + v clump(mu_max), so
carrying >= f(x) = min(x / (1 + x) chain_low(x) / that, 1), which must stay <= 1 - c. On a grid cell [x_i,
x_i+1], with E increasing, S decreasing and clump's running maximum (their monotone envelopes on the grid),
f >= its figure with share, chain_low and mu_max at x_i and E_1, S_1 at x_i+1: x is at most the high end of
the last cell whose bound allows it (none where the grid's last cell does: very clumped arrivals). A larger v
only lowers f, so the limit grows with v: a v is read at the grid's next one up.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import numpy.typing as npt

from planner.serving.arrivals import clump_mean, gap_cdf, window_counts
from planner.serving.interference_bound import ERF_ERROR

WINDOWS = np.geomspace(1e-6, 20.0, 4001)  # x = lambda D; the gamma series is exact well past 20
WORK_RATIOS = np.concatenate([[0.0], np.geomspace(1e-3, 1e6, 121)])  # v = W / D


def _envelopes(arrival_cv: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """(E_ca, S_ca, E_1, clump's running maximum) on WINDOWS, as monotone envelopes; None where a series'
    rounding is not all that sets them apart (no bound then)."""
    x, one = WINDOWS, np.ones_like(WINDOWS)
    e_ca = 1.0 - window_counts(one, x, arrival_cv, 1)[..., 0]
    s_ca = 1.0 - gap_cdf(one, x, arrival_cv)
    e_1 = 1.0 - window_counts(one, x, 1.0, 1)[..., 0]
    clump = clump_mean(one, x, arrival_cv)
    # the series' last bits wobble where E is ~1 and S ~1e-14: E's least from the right and S's most,
    # which differ from them by rounding alone
    e_low = np.minimum.accumulate(e_ca[::-1])[::-1]
    s_high = np.maximum.accumulate(s_ca[::-1])[::-1]
    if not (np.all(e_ca - e_low <= 1e-9) and np.all(s_high - s_ca <= 1e-9) and np.all(np.diff(e_1) >= 0)):
        return None
    return e_low, s_high, e_1, np.maximum.accumulate(clump)


@functools.lru_cache(maxsize=16)
def clumped_window_limits(arrival_cv: float, percentile: int) -> npt.NDArray[np.float64] | None:
    """The limit on x at each v of WORK_RATIOS (inf: none), or None below p75, for CV <= 1 (the Poisson
    limit holds there) or where the envelopes do not hold."""
    q = percentile / 100.0
    envelopes = _envelopes(float(arrival_cv)) if q >= 0.75 and arrival_cv > 1.0 else None
    if envelopes is None:
        return None
    e_ca, s_ca, e_1, clump = envelopes
    x, room = WINDOWS, 1.0 - (2.0 * q - 1.0 - ERF_ERROR)
    chain_low = e_ca[:-1] / np.maximum(e_ca[:-1] + s_ca[:-1], 1e-300)
    share = x[:-1] / (1.0 + x[:-1])
    y = room / np.maximum(chain_low, 1e-300)
    with np.errstate(divide="ignore"):
        mu_max = np.where(y < 1.0, y / np.maximum(1.0 - y, 1e-300), math.inf)
    at = np.searchsorted(x, mu_max, side="left")  # the grid's first window at or above mu_max
    clump_max = np.where(at < len(x), clump[np.minimum(at, len(x) - 1)], math.inf)
    # r per v and cell (inf: S_1 = 0; v = 0: no prompt work, r = 1 even where clump_max is inf)
    with np.errstate(invalid="ignore"):  # 0 x inf where v = 0 is selected away
        ratio = 1.0 + np.where(WORK_RATIOS[:, None] > 0, WORK_RATIOS[:, None] * clump_max[None, :], 0.0)
    with np.errstate(over="ignore", invalid="ignore"):
        s_1 = np.where(np.isfinite(ratio), np.exp(-ratio * x[None, 1:]), 0.0)
    chain_1 = e_1[1:] / np.maximum(e_1[1:] + s_1, 1e-300)
    allowed = np.minimum(share * chain_low / np.maximum(chain_1, 1e-300), 1.0) <= room
    last = np.where(allowed.any(axis=1), x.size - 2 - np.argmax(allowed[:, ::-1], axis=1), -1)
    high_end = x[np.minimum(last + 1, x.size - 1)]
    limits = np.where(last < 0, x[0], np.where(last >= x.size - 2, math.inf, high_end))
    limits.flags.writeable = False
    return limits


def clumped_window_limit(arrival_cv: float, percentile: int, work_ratio: npt.ArrayLike) -> np.ndarray:
    """clumped_window_limits at each v = W / D, read at the grid's next v up; inf where none holds."""
    limits = clumped_window_limits(float(arrival_cv), percentile)
    at = np.searchsorted(WORK_RATIOS, np.asarray(work_ratio, dtype=float), side="left")
    if limits is None:
        return np.full(np.shape(at), math.inf)
    return np.where(at < len(limits), limits[np.minimum(at, len(limits) - 1)], math.inf)
