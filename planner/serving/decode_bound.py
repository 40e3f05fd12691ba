"""An upper bound on a decode worker's confirmed rate (planner.serving.disaggregated_workers.
ConfirmedDecodeRate) that follows the simulated range's ITL ratio load by load: the disaggregated decode pool
orders and stops its walk by it (planner.serving.disaggregation), so the tighter it is, the fewer decode
models are built. The sizing search's bound (planner.serving.goodput_search.confirmed_bound_per_s) takes the
band's least ratio at every load; here a rate is held to the ratio of the load it runs at.

Why it holds. A rate r passes ConfirmedDecodeRate's check only where its load u = r / C (C the worker's
capacity at its max batch) is within the headroom, u <= limit (1 + 1e-12), and its ITL percentile meets the
objective over the band's high ratio at u: p_q ITL <= itl / ratio(u). The ITL percentile (q >= 50) is at least
the decode step D(N) at the population N the rate holds (goodput_search.rate_bound_per_s), so
D(N(r)) <= itl / ratio(u), and N(r) and D(N) grow with r: r <= RB(itl / ratio(u)), RB the rate bound at that
cap on the step (rate_bound_per_s, prompt work 0: at most the model's rate, whose prompt work is >= 0).
ratio(u) is a step in u (confirmed_rate.Checker): at[0] up to LOADS[0]; on (LOADS[i-1], LOADS[i]) it is
below[i], within 1e-9 under LOADS[i] itself at[i]; infinite above the last load. And C <= T, the rate bound
with no cap on the step at the max batch (the rate at N = max batch, which the capacity never passes).
So the confirmed rate r*, which passes, lies in one segment i, u* in (LOADS[i-1], LOADS[i]], and
  * r* <= min(LOADS[i], limit (1 + 1e-12)) T;
  * off the tabulated load itself, r* <= RB(itl / below[i]);
  * on it (u* >= LOADS[i] / (1 + 1e-9)), r* <= RB(itl / at[i]), and also
    r* <= (1 + 1e-9) (RB(itl / below[i]) + limit T / GRID): the search's first grid of rates, top k / GRID
    (top <= limit C), passed every rate up to r* (ConfirmedDecodeRate keeps the highest rate below which
    every rate checked holds; its refinements stay inside the first failing cell). Its last rate g under
    the tabulated load's 1e-9 band is below r*, so it passed; the next is not under the band, so g's load
    is within limit / GRID <= 0.95 / 48 < 0.05 (the narrowest gap between LOADS) under it: inside the open
    interval, so g <= RB(itl / below[i]), and r* <= LOADS[i] C <= (1 + 1e-9) (g + top / GRID).
The bound is the largest of the segments'. Where the arrival CV has no simulated class the ratio is 1 at
every load up to the headroom (NO_BAND_UTILIZATION): min(limit T, RB(itl)).
"""

from __future__ import annotations

import math

from planner.core.deployment import Deployment
from planner.engines.base import DEFAULT_MAX_NUM_BATCHED_TOKENS
from planner.serving.confirmed_rate import GRID, NO_BAND_UTILIZATION, _ratio_steps
from planner.serving.goodput_search import rate_bound_per_s
from planner.serving.layout_memo import StepTable
from planner.serving.queue_bands import LOADS, arrival_class, prompt_class

# the exact-load argument needs the first grid's step under the gap between tabulated loads
assert LOADS[-1] / GRID < min(b - a for a, b in zip(LOADS, LOADS[1:], strict=False))


def decode_rate_bound_per_s(d: Deployment, context: float, max_batch: int, output_len: int, steps: StepTable,
                            itl_ms: float, percentile: int, arrival_cv: float, variable: bool,
                            prompt_len: float, max_utilization: float | None,
                            max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS) -> float | None:
    """An upper bound (req/s) on a decode worker's confirmed rate under the ITL objective alone, or None
    where even one sequence's step misses the objective over the least ratio (no rate passes: the module's
    docstring says why it holds). `steps`: LayoutMemo.bound_steps at the max batch and `context`;
    `variable`: lengths vary (a CV above 0)."""
    def rb(cap_ms: float) -> float:
        bound = rate_bound_per_s(d, context, max_batch, output_len, cap_ms, 0.0, steps)
        return 0.0 if bound is None else bound

    top = rate_bound_per_s(d, context, max_batch, output_len, math.inf, 0.0, steps)
    if top is None:
        return None
    if arrival_class(arrival_cv) is None:
        if rate_bound_per_s(d, context, max_batch, output_len, itl_ms, 0.0, steps) is None:
            return None
        return min((max_utilization or NO_BAND_UTILIZATION) * top, rb(itl_ms))
    limit = min(max_utilization, LOADS[-1]) if max_utilization is not None else LOADS[-1]
    at, below = _ratio_steps(f"itl_p{percentile}", float(arrival_cv), variable,
                             prompt_class(prompt_len, max_num_batched_tokens))
    if rate_bound_per_s(d, context, max_batch, output_len, itl_ms / min(at.min(), below.min()), 0.0,
                        steps) is None:
        return None
    within = limit * (1.0 + 1e-12)
    best = 0.0
    best = min(min(LOADS[0], within) * top, rb(itl_ms / float(at[0])))  # up to the first load: at[0]
    for i in range(1, len(LOADS)):
        if not LOADS[i - 1] < within:
            break  # the segment lies above the headroom
        rate = open_rate = rb(itl_ms / float(below[i]))
        if LOADS[i] / (1.0 + 1e-9) <= within:  # the tabulated load itself is within the headroom
            rate = max(rate, min(rb(itl_ms / float(at[i])), (1.0 + 1e-9) * (open_rate + limit * top / GRID)))
        best = max(best, min(min(LOADS[i], within) * top, rate))
    return best
