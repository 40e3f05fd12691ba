"""An upper bound on an aggregated replica's confirmed rate from its TTFT objective's queueing tail (issue
31): at the percentile q, an arrival that waits for the prompts ahead must still see its first token in
time, and under clumped arrivals most arrivals of a clump wait, even at a few percent of capacity.

Why (planner.serving.distributions.ttft_distribution, fixed prompt lengths, an open loop: seen = 1): TTFT is a
mixture whose waiting part weighs sigma, GI/M/1's waiting probability at rho_s = lambda E[S_ride] (arrivals.
waiting_probability), and lasts own + frontend + an exponential of mean wait / sigma = (ca^2 + cs^2) / ((ca^2
+ 1)(1 - sigma_full)) E[S_ride], sigma_full the same probability at rho = lambda E[S_full]
(replica.load_point). With fixed prompts cs^2 = 0, and E[S_ride], E[S_full] >= W, the prompt's work; sigma
grows with utilization, so both probabilities are at least s = sigma(lambda W), and the exponential's mean is
at least k W / (1 - s), k = ca^2 / (ca^2 + 1). own = ceil(n / C) D + W >= W and the frontend is >= 0 (its
costs are >= 0). The TTFT verdict (confirmed_rate.Checker) holds only if P(TTFT <= t*) >= q at t* = objective
/ the band's ratio, at most t_max = objective / the band's least ratio; and P(TTFT > t) >= sigma e^{-(t - W)+
/ mean} >= g(s) = s e^{-a (1 - s)}, a = (t_max - W)+ / (k W) (each sigma less the bisection's 3e-8:
SIGMA_TOLERANCE). g grows with s, so s <= s_max, its root at 1 - q; the utilization whose sigma is s_max is
closed: rho = ca^2 (1 - s) / (s^-ca^2 - 1) (Poisson: rho = s). Hence lambda W <= rho(s_max) and lambda <=
rho(s_max) / W. A larger W only lowers it (a falls, so does s_max), so a floor under W gives a looser bound,
as the sizing search's cost floors need. tests/test_interference_bound.py checks the floors against each
family's cheapest fleet.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from planner.serving.confirmed_rate import _ratio_steps
from planner.serving.queue_bands import arrival_class

SIGMA_TOLERANCE = 1e-7  # the bisection's sigma is within 2^-25 of the root: a margin over it


@functools.lru_cache(maxsize=64)
def least_ttft_ratio(percentile: int, arrival_cv: float, variable: bool) -> float:
    """The least ratio of the simulated range's top to the fast TTFT at the percentile, over every tabulated
    load and both prompt classes (1 where the arrivals have no simulated class: no band)."""
    if arrival_class(arrival_cv) is None:
        return 1.0
    ratios = [np.concatenate(_ratio_steps(f"ttft_p{percentile}", arrival_cv, variable, prompts))
              for prompts in ("fits", "long")]
    return float(np.min(np.concatenate(ratios)))


def rho_at_waiting_probability(sigma: float, arrival_cv: float) -> float:
    """The utilization at which GI/M/1 with gamma inter-arrival times of CV `arrival_cv` waits with
    probability `sigma` (arrivals.waiting_probability's inverse)."""
    ca2 = float(arrival_cv) ** 2
    if abs(ca2 - 1.0) < 1e-9:
        return sigma
    if ca2 < 1e-9:  # deterministic arrivals: sigma = e^(-(1 - sigma) / rho)
        return -(1.0 - sigma) / math.log(sigma)
    return ca2 * (1.0 - sigma) / (sigma ** -ca2 - 1.0)


def ttft_wait_rate_bound_per_s(work_ms: float, ttft_ms: float, percentile: int, arrival_cv: float,
                               variable: bool) -> float | None:
    """The highest rate (req/s) at which a replica whose prompts take `work_ms` each can meet p`percentile`
    TTFT of `ttft_ms` with fixed prompt lengths (see the module's docstring); None where it gives none."""
    ca2 = float(arrival_cv) ** 2
    if not (work_ms > 0 and ca2 > 1e-9):  # deterministic arrivals' waits have no exponential floor
        return None
    t_max = ttft_ms / least_ttft_ratio(percentile, float(arrival_cv), variable)
    a = max(t_max - work_ms, 0.0) / (ca2 / (ca2 + 1.0) * work_ms)
    eps, log_tail = SIGMA_TOLERANCE, math.log(1.0 - percentile / 100.0)

    def h(s: float) -> float:  # log g - log(1 - q): increasing and concave on (eps, 1)
        return math.log(s - eps) - a * (1.0 - s + eps) - log_tail

    top = 1.0 - 1e-9
    if h(top) <= 0.0:
        return None
    # Newton on a concave increasing h approaches its root from below, each tangent's zero under the root
    s = top
    for _ in range(50):
        step = h(s) / (1.0 / (s - eps) + a)
        s = max(s - step, 0.5 * (s + eps)) if step > 0 else s - step
        if abs(step) <= 1e-13:
            break
    hi = min(s + 1e-9, top)  # above the root: the iterate is at or under it, within 1e-13
    if h(hi) < 0.0:  # not converged (never seen): bisect between it and the top, which is above the root
        lo, hi = hi, top
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if h(mid) < 0.0 else (lo, mid)
    return rho_at_waiting_probability(hi, arrival_cv) / work_ms * 1000.0 * (1.0 + 1e-9)
