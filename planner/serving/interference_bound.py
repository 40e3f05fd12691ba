"""An upper bound on an aggregated replica's confirmed rate that counts the prompt chunks riding its
iterations (issue 31): the ITL objective at the percentile q holds at a rate lambda only if the decode step
plus a prompt's first chunk is within it, or if so few prompts arrive per iteration that most iterations
carry none.

Why (planner.serving.distributions.itl_distribution, Poisson arrivals, fixed prompt lengths): the ITL is a
mixture over tokens of normal parts sum_j w_j Phi((t - mu_j) / s_j), each centred at mu_j = D + a_j where D is
the load point's decode step (a token's, D(N + 1) >= D(N) for a decode step that grows with N, stretched
>= 1 where the roofline floor binds) and a_j the extra time the iteration's prompt chunks add. The part
without prompts (a_0 = 0) weighs w_0 = (1 - full share) p_0 <= p_0, the renormalised P(no arrival in the
window mu = lambda x mean iteration); every other atom is at least A, a prompt's first chunk's work (its own
first chunk, k >= 2 arrivals' chunks together, a full chunk: each carries at least min(n, chunk) of the n
computed tokens at W / n each, and chunk >= budget - max batch). The verdict (confirmed_rate.Checker) holds
at lambda only if the CDF at t* = objective / ratio (ratio >= the band's least, so t* <= `itl_cap_ms`)
reaches q. If t* < D + A every part but the first is at most 1/2 there (the erf approximation errs by
< 1.5e-7, so each at most 1/2 + 7.5e-8), hence CDF(t*) <= 1/2 + w_0 / 2 + 7.5e-8, and q needs
p_0 >= c = 2q - 1 - 1.5e-7. For mu <= 1 the renormalisation over k <= kmax (kmax >= 9 there:
distributions.window_arrivals_bound) divides e^-mu by at least 1 - P(K >= 9) >= 1 - mu^9 / 9! >= 1 - 2.8e-6,
so p_0 >= c needs mu <= MU = -ln(c (1 - 2.8e-6)) (< 1 for q >= 0.75); for mu > 1, p_0 < 0.42 < c (Chebyshev
below kmax = min(48, mu + 8 sqrt(mu) + 8); e^-mu / pmf(min(48, floor(mu))) past 32). So a confirmed rate is
either (i) one whose decode step is within itl_cap - A (rate_bound_per_s at that cap), or (ii) one whose
window lambda x D(N) <= lambda x iteration is at most MU. In the serving model lambda(N) <= N / ((O - 1) D(N))
(prompt work >= 0); with D nondecreasing and N / D(N) growing in N (the assumptions of
goodput_search.rate_bound_per_s), on a cell [N_j, N_j+1] of the decode-step table lambda <= min(N_j+1 / ((O -
1) D(N_j+1)), MU / D(N_j)), the cell below N = 1 starting at the empty iteration D(0); 1 % over the largest
for the interpolation between the table's grid and the replica model's, as rate_bound_per_s allows.
tests/test_interference_bound.py draws requests and checks the floor it gives against each family's
cheapest fleet."""

from __future__ import annotations

import functools
import math

import numpy as np
import numpy.typing as npt

from planner.serving.layout_memo import StepTable

ERF_ERROR = 1.5e-7  # |error| of distributions._normal_cdf's erf (Abramowitz & Stegun 7.1.26)
TRUNCATION = 2.8e-6  # P(K >= 9) for a Poisson count of mean <= 1: at most 1 / 9!


@functools.lru_cache(maxsize=8)
def quiet_window_limit(percentile: int) -> float | None:
    """MU: the largest mean prompt arrivals per iteration at which the ITL percentile can still fall on an
    iteration without prompts (None below p75, where no such limit holds)."""
    q = percentile / 100.0
    if q < 0.75:
        return None
    return -math.log((2.0 * q - 1.0 - ERF_ERROR) * (1.0 - TRUNCATION))


def quiet_rate_bound_per_s(steps: StepTable, empty_ms: float, output_len: int,
                           window_limit: float | npt.NDArray[np.float64]) -> float:
    """Case (ii): the highest rate (req/s) whose window lambda x D(N) stays within `window_limit`, over the
    decode-step table (populations, step ms) and the empty iteration. `window_limit`: one for every cell, or
    one per cell (the empty iteration's first, then each step's as a cell's low end)."""
    population, step_ms = steps
    served = population / ((output_len - 1) * step_ms)  # lambda at each cell's high end
    if isinstance(window_limit, float):  # one limit for every cell: no array of them to build
        quiet = window_limit / np.maximum(step_ms, 1e-300)  # MU / D at each cell's low end, the next cell's
        first_limit = window_limit
    else:
        quiet = window_limit[1:] / np.maximum(step_ms, 1e-300)
        first_limit = float(window_limit[0])
    first = min(float(served[0]), first_limit / max(empty_ms, 1e-300))  # the cell from the empty iteration
    best = max(first, float(np.minimum(served[1:], quiet[:-1]).max())) if len(step_ms) > 1 else first
    return 1.01 * best * 1000.0


def first_chunk_work_ms(work_ms: float, computed_tokens: int, batched_tokens: int, max_batch: int) -> float:
    """A lower bound on the work of a prompt's first chunk, A: min(n, chunk) / n of the prompt's work, the
    chunk at least the budget less the most sequences decoding."""
    chunk = max(batched_tokens - max_batch, 1)
    return work_ms * min(1.0, chunk / max(computed_tokens, 1))
