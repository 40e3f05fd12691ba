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
every load up to the headroom (max_utilization, else NO_BAND_UTILIZATION): min(limit T, RB(itl)).
tests/test_decode_bound.py checks it against ConfirmedDecodeRate over drawn decode candidates.
"""

from __future__ import annotations

import numpy as np

from planner.engines.base import DEFAULT_MAX_NUM_BATCHED_TOKENS
from planner.serving.confirmed_rate import GRID, NO_BAND_UTILIZATION, _ratio_steps
from planner.serving.layout_memo import StepTable
from planner.serving.queue_bands import LOADS, arrival_class, prompt_class

# the exact-load argument needs the first grid's step under the gap between tabulated loads
assert LOADS[-1] / GRID < min(b - a for a, b in zip(LOADS, LOADS[1:], strict=False))
_LOADS = np.array(LOADS)


class DecodeRateBound:
    """An upper bound (req/s) on the confirmed rate of any decode worker of one request (the ITL objective
    alone: the module's docstring says why it holds). What does not depend on the worker (the caps on the
    decode step each segment of loads allows, the headroom) is worked out once.
    `variable`: lengths vary (a CV above 0); `prompt_len` and `max_num_batched_tokens`: the workload's, which
    pick the band's prompt class."""

    def __init__(self, itl_ms: float, percentile: int, arrival_cv: float, variable: bool, prompt_len: float,
                 max_utilization: float | None,
                 max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS) -> None:
        self.banded = arrival_class(arrival_cv) is not None
        if not self.banded:  # ratio 1 up to the headroom: [no cap, the objective]
            self.limit = max_utilization if max_utilization is not None else NO_BAND_UTILIZATION
            self.caps_ms = np.array([np.inf, itl_ms])
            return
        self.limit = min(max_utilization, LOADS[-1]) if max_utilization is not None else LOADS[-1]
        at, below = _ratio_steps(f"itl_p{percentile}", float(arrival_cv), variable,
                                 prompt_class(prompt_len, max_num_batched_tokens))
        within = self.limit * (1.0 + 1e-12)
        # segment i: loads in (LOADS[i - 1], LOADS[i]] (the first: up to LOADS[0]), where within the headroom
        self.segments = np.concatenate([[True], _LOADS[:-1] < within])
        # the tabulated load itself is within the headroom (every load up to the first has its ratio)
        self.on_load = np.concatenate([[True], _LOADS[1:] / (1.0 + 1e-9) <= within])
        self.upper = np.minimum(_LOADS, within)
        with np.errstate(divide="ignore"):
            # [no cap, the least ratio's, each load's own, each open interval's]
            self.caps_ms = np.concatenate([[np.inf, itl_ms / min(at.min(), below.min())], itl_ms / at,
                                           itl_ms / below])

    def per_s(self, output_len: int, steps: StepTable) -> float | None:
        """The bound for a worker whose decode step table (LayoutMemo.bound_steps at its max batch and the
        mean context) is `steps`; None where even one sequence's step misses the objective over the least
        ratio (no rate passes)."""
        if output_len <= 1:
            return None
        return self._combined(_step_capped_rates(steps, output_len, self.caps_ms))

    def _combined(self, rates: np.ndarray) -> float | None:
        """The bound from the rate at each cap ([no cap, the least ratio's, then the loads' and the open
        intervals': the module's docstring's segments)."""
        top = rates[0]
        if not rates[1] > 0:
            return None
        if not self.banded:
            return float(min(self.limit * (1.0 + 1e-12) * top, rates[1]))
        n = len(LOADS)
        on, below = rates[2:2 + n], rates[2 + n:].copy()
        below[0] = 0.0  # loads up to LOADS[0] have at[0] alone
        gap = (1.0 + 1e-9) * (below + self.limit * top / GRID)
        gap[0] = np.inf
        rate = np.maximum(below, np.where(self.on_load, np.minimum(on, gap), 0.0))
        return float(np.max(np.where(self.segments, np.minimum(self.upper * top, rate), 0.0)))


def _step_capped_rates(steps: StepTable, output_len: int, caps_ms: np.ndarray) -> np.ndarray:
    """goodput_search.rate_bound_per_s at each cap on the decode step (prompt work 0; 0 where no population
    is within the cap): N_next / ((O - 1) D(N_last)), N_last the last population of the table within the
    cap, N_next the one after it, 1 % above."""
    population, step_ms = steps
    within = step_ms[None, :] <= caps_ms[:, None]
    last = len(step_ms) - 1 - np.argmax(within[:, ::-1], axis=1)
    nxt = np.minimum(last + 1, len(step_ms) - 1)
    rates = 1.01 * population[nxt] / ((output_len - 1) * step_ms[last]) * 1000.0
    return np.where(within.any(axis=1), rates, 0.0)
