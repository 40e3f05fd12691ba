"""The quiet window's limit under clumped arrivals (gamma inter-arrival times of CV > 1; issue 31): the
largest window y = lambda D(N) at which an ITL percentile of 75 or more can still fall on an iteration that
carries no prompt chunks. planner.serving.interference_bound derives the Poisson limit and the rate bound it
gives; this is the same limit for clumps, whose windows the serving model weighs differently.

Why (planner.serving.distributions._itl_atoms, CV > 1, a load point of the replica model): the no-prompt atom
weighs w_0 = (1 - full share) (1 - carrying), carrying = min(share x chain(ca) / chain(1), 1), where
  * share = mu / (1 + mu), mu = lambda x iteration (the Poisson window's P(N >= 1) at kmax = 1), and iteration
    >= D(N), the decode step at the point's population, so mu >= y;
  * chain(c) = E_c(x) / (E_c(x) + S_c(lambda x after)), E_c = P(N >= 1) of a window at kmax = 1, S_c the gap's
    survival, x = lambda x decode_ms, the point's token step (D(N + 1) x the roofline's stretch >= D(N), so
    x >= y), `after` a prompt-carrying iteration: decode_ms plus the mean extra of the iterations with k >= 1
    arrivals in a window of the iteration, extra_k <= k W (each arrival's first chunk at most its prompt's
    work W), so after <= decode_ms + W E[k | k >= 1] <= decode_ms + W clump(mu), clump = max(mu / P(N >= 1),
    1), the untruncated geometric's mean (truncation at kmax only lowers it).

Every ITL part is centred at decode_ms or above, so the percentile (q >= 0.75) is reached only at t* >=
decode_ms, and t* <= the ITL cap (the objective over the band's least ratio): decode_ms <= cap, x <= a y with
a = cap / D(N). The percentile needs w_0 >= c = 2q - 1 - 1.5e-7 (the erf bound, as in the Poisson case), so
carrying <= 1 - c. With E_ca increasing and S_ca decreasing (their monotone envelopes on the grid), chain(ca)
>= chain_low(y) = E_ca(y) / (E_ca(y) + S_ca(y)); with chain(1) <= 1 that caps share: mu <= mu_max(y) = z / (1
- z), z = (1 - c) / chain_low(y). And chain(1) <= E_1(a y) / (E_1(a y) + S_1(y (a + b clump(mu_max)))), b = W
/ D(N), so carrying >= f = min(share(y) chain_low(y) / that, 1), which must stay <= 1 - c. On a grid cell
[y_i, y_i+1], f is at least its figure with share, chain_low and mu_max at y_i and E_1, S_1 at y_i+1 (clump by
its running maximum): y is at most the high end of the last cell whose bound allows it (none where the grid's
last cell does: very clumped arrivals). A larger a or b only lowers f, so the limit grows with both: each is
read at its grid's next value up, and a cell's low end D_j <= D(N) gives upper bounds a_j = cap / D_j and b_j
= W / D_j.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import numpy.typing as npt

from planner.serving.arrivals import clump_mean, gap_cdf, window_counts
from planner.serving.interference_bound import ERF_ERROR

WINDOWS = np.geomspace(1e-6, 20.0, 2001)  # y = lambda D(N); the gamma series is exact well past 20
CAP_RATIOS = np.concatenate([[1.0], np.geomspace(1.02, 1e4, 39)])  # a = ITL cap / D(N), at least 1
WORK_RATIOS = np.concatenate([[0.0], np.geomspace(1e-3, 1e6, 45)])  # b = W / D(N)


def _envelopes(arrival_cv: float) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(E_ca, S_ca, clump's running maximum) on WINDOWS, as monotone envelopes; None where a series'
    rounding is not all that sets them apart (no bound then)."""
    x, one = WINDOWS, np.ones_like(WINDOWS)
    e_ca = 1.0 - window_counts(one, x, arrival_cv, 1)[..., 0]
    s_ca = 1.0 - gap_cdf(one, x, arrival_cv)
    clump = clump_mean(one, x, arrival_cv)
    # the series' last bits wobble where E is ~1 and S ~1e-14: E's least from the right and S's most,
    # which differ from them by rounding alone
    e_low = np.minimum.accumulate(e_ca[::-1])[::-1]
    s_high = np.maximum.accumulate(s_ca[::-1])[::-1]
    if not (np.all(e_ca - e_low <= 1e-9) and np.all(s_high - s_ca <= 1e-9)):
        return None
    return e_low, s_high, np.maximum.accumulate(clump)


@functools.lru_cache(maxsize=16)
def clumped_window_limits(arrival_cv: float, percentile: int) -> npt.NDArray[np.float64] | None:
    """The limit on y at each (a, b) of CAP_RATIOS x WORK_RATIOS (inf: none), or None below p75, for CV <= 1
    (the Poisson limit holds there) or where the envelopes do not hold."""
    q = percentile / 100.0
    envelopes = _envelopes(float(arrival_cv)) if q >= 0.75 and arrival_cv > 1.0 else None
    if envelopes is None:
        return None
    e_ca, s_ca, clump = envelopes
    y, room = WINDOWS, 1.0 - (2.0 * q - 1.0 - ERF_ERROR)
    chain_low = e_ca[:-1] / np.maximum(e_ca[:-1] + s_ca[:-1], 1e-300)
    share = y[:-1] / (1.0 + y[:-1])
    z = room / np.maximum(chain_low, 1e-300)
    with np.errstate(divide="ignore"):
        mu_max = np.where(z < 1.0, z / np.maximum(1.0 - z, 1e-300), math.inf)
    at = np.searchsorted(y, mu_max, side="left")  # the grid's first window at or above mu_max
    clump_max = np.where(at < len(y), clump[np.minimum(at, len(y) - 1)], math.inf)
    # b x clump per b and cell (v = 0: no prompt work, 0 even where clump_max is inf)
    with np.errstate(invalid="ignore"):  # 0 x inf where b = 0 is selected away
        extra = np.where(WORK_RATIOS[:, None] > 0, WORK_RATIOS[:, None] * clump_max[None, :], 0.0)
    limits = np.empty((len(CAP_RATIOS), len(WORK_RATIOS)))
    for i, a in enumerate(CAP_RATIOS):  # one cap at a time: a (b x cells) array, not (a x b x cells)
        e_1 = 1.0 - window_counts(np.ones(len(y) - 1), a * y[1:], 1.0, 1)[..., 0]
        with np.errstate(over="ignore", invalid="ignore"):
            s_1 = np.where(np.isfinite(extra), np.exp(-(a + extra) * y[None, 1:]), 0.0)
        chain_1 = e_1 / np.maximum(e_1 + s_1, 1e-300)
        allowed = np.minimum(share * chain_low / np.maximum(chain_1, 1e-300), 1.0) <= room
        last = np.where(allowed.any(axis=1), y.size - 2 - np.argmax(allowed[:, ::-1], axis=1), -1)
        high_end = y[np.minimum(last + 1, y.size - 1)]
        limits[i] = np.where(last < 0, y[0], np.where(last >= y.size - 2, math.inf, high_end))
    limits.flags.writeable = False
    return limits


def clumped_window_limit(arrival_cv: float, percentile: int, cap_ratio: npt.ArrayLike,
                         work_ratio: npt.ArrayLike) -> np.ndarray:
    """clumped_window_limits at each (a, b) = (ITL cap / D, W / D), each read at its grid's next value up (a
    below 1 read as 1); inf where none holds."""
    limits = clumped_window_limits(float(arrival_cv), percentile)
    a = np.searchsorted(CAP_RATIOS, np.maximum(np.asarray(cap_ratio, dtype=float), 1.0), side="left")
    b = np.searchsorted(WORK_RATIOS, np.asarray(work_ratio, dtype=float), side="left")
    a, b = np.broadcast_arrays(a, b)
    if limits is None:
        return np.full(np.shape(a), math.inf)
    inside = (a < limits.shape[0]) & (b < limits.shape[1])
    return np.where(inside, limits[np.minimum(a, limits.shape[0] - 1), np.minimum(b, limits.shape[1] - 1)],
                    math.inf)
