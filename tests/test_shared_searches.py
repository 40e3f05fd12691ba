"""A plan's goodput searches on one replica model's shared figures (issue 30) give the numbers of their plain
searches: the plan's goodput, each objective's alone, the slot wait's and mean TPOT's, in any order; and an
array evaluated elementwise gives each rate the figures it gets alone, under clumped arrivals too."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.serving.arrivals import _lower_gamma_regularized, window_counts
from planner.serving.distributions import itl_distribution, ttft_distribution
from planner.serving.operating_point import goodput_binding_of
from planner.serving.replica import load_point
from planner.serving.serving import goodput_per_ms
from planner.serving.shared_searches import SharedSearches, tpot_goodput_per_ms
from planner.serving.slot_wait import (
    NEGLIGIBLE_WAIT,
    goodput_with_slot_wait,
    plan_slot_wait,
    within_ttft_with_slot_wait,
)
from tests.test_sizing_search_steps import _model

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

SCENARIOS = [
    {"model": "llama-3.1-70b", "gpu": "h100-sxm", "tp": 4, "weights": "fp8", "kv_cache": "fp8",
     "load": {"arrival_cv": 1.5}},
    {"model": "llama-3.1-8b", "gpu": "l40s", "tp": 1, "weights": "bf16", "kv_cache": "bf16",
     "load": {"arrival_cv": 2.0, "prompt_len_cv": 0.5, "output_len_cv": 1.0}},
    {"model": "qwen3-30b-a3b", "gpu": "h100-sxm", "tp": 1, "weights": "bf16", "kv_cache": "bf16",
     "batch": 64},
]
OBJECTIVES = [(500.0, 50.0), (2000.0, 30.0), (None, 40.0), (300.0, None)]


@pytest.mark.parametrize("fields", SCENARIOS)
def test_shared_searches_give_the_plain_searches_numbers(fields):
    """Source: invariant: a search on the shared figures reads the verdicts its plain search computes (each
    rate's figures, the grid's, a midpoint tree's each as alone), so goodput_per_ms, goodput_with_slot_wait
    and tpot_goodput_per_ms give the same numbers, whichever searches ran before on the same model."""
    _, m = _model(fields)
    searches = SharedSearches(m)
    for percentile in (50, 90, 99):
        for ttft_ms, itl_ms in OBJECTIVES:
            exact = goodput_per_ms(m, percentile, ttft_ms, itl_ms)
            assert searches.goodput(percentile, ttft_ms, itl_ms) == exact
            assert searches.with_slot_wait(exact, percentile, ttft_ms) == goodput_with_slot_wait(
                m, exact, percentile, ttft_ms)
    for tpot_ms in (20.0, 40.0, 80.0):
        assert searches.tpot_goodput(tpot_ms) == tpot_goodput_per_ms(m, tpot_ms)


@pytest.mark.parametrize("fields", SCENARIOS)
def test_binding_on_fresh_and_used_searches_is_the_same(fields):
    """Source: invariant: goodput_binding_of reads only figures each search would compute alone, so it is
    the same on a model whose searches ran before (the plan's own) as on fresh ones."""
    from planner.scenario.scenario import ServiceObjective

    _, m = _model(fields)
    for slo in (ServiceObjective(ttft_ms=500.0, itl_ms=50.0), ServiceObjective(ttft_ms=2000.0, itl_ms=30.0,
                                                                               percentile=99, tpot_ms=40.0)):
        used = SharedSearches(m)
        used.plan_goodput(slo.percentile, slo.ttft_ms, slo.itl_ms)
        used.goodput(50, 100.0, 20.0)
        assert goodput_binding_of(used, slo) == goodput_binding_of(SharedSearches(m), slo)


@settings(max_examples=60, deadline=None)
@given(st.floats(0.05, 1.0), st.lists(st.floats(0.0, 40.0), min_size=1, max_size=12))
def test_elementwise_series_is_each_rates_own(shape, xs):
    """Source: invariant: the incomplete gamma's series stopped at each element's own convergence gives each
    element the number its lone call gives (the whole-array stop does not: it adds terms to elements that
    converged first)."""
    x = np.array(xs)
    alone = np.array([_lower_gamma_regularized(shape, np.asarray(v)) for v in x])
    assert np.array_equal(_lower_gamma_regularized(shape, x, elementwise=True), alone)
    cv = 1.0 / np.sqrt(shape)
    counts = window_counts(x, np.full_like(x, 1.0), cv, 20, elementwise=True)
    for i, v in enumerate(x):
        assert np.array_equal(counts[i], window_counts(np.asarray(v), np.asarray(1.0), cv, 20))


@pytest.mark.parametrize("fields", SCENARIOS[:2])
def test_elementwise_load_points_are_each_rates_own(fields):
    """Source: invariant: load_point and itl_distribution evaluated elementwise over rates (one arrival bound
    for all their windows) give each rate the figures of its lone call, under clumped arrivals (CV 1.5, 2)."""
    _, m = _model(fields)
    cap = float(m.capacity_per_ms())
    rates = cap * np.linspace(0.30, 0.34, 7)
    together = load_point(m, rates, elementwise=True)
    ttft = ttft_distribution(m, together)(np.full(len(rates), 400.0))
    itl = itl_distribution(m, together, elementwise=True)(np.full(len(rates), 40.0))
    for i, r in enumerate(rates):
        alone = load_point(m, float(r))
        assert float(together.wait_mean_ms[i]) == float(alone.wait_mean_ms)
        assert float(together.iteration_ms[i]) == float(alone.iteration_ms)
        assert float(ttft[i]) == float(ttft_distribution(m, alone)(400.0))
        assert float(itl[i]) == float(itl_distribution(m, alone)(40.0))


def _tpot_goodput_step_by_step(m, tpot_ms: float, steps: int = 40) -> float:
    """tpot_goodput_per_ms as one load point a step: the grid, then the bisection's lone midpoints."""
    cap = float(m.capacity_per_ms())
    rates = cap * np.concatenate([[1e-6], np.linspace(1.0 / 48, 1.0, 48) * (1.0 - 1e-9)])
    ok = np.asarray(load_point(m, rates).iteration_ms) <= tpot_ms
    if not ok[0] or ok.all():
        return 0.0 if not ok[0] else float(rates[-1])
    last = int(np.argmin(ok)) - 1
    lo, hi = float(rates[last]), float(rates[last + 1])
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if float(load_point(m, mid).iteration_ms) <= tpot_ms else (lo, mid)
    return lo


@pytest.mark.parametrize("fields", SCENARIOS)
def test_tpot_goodput_judged_a_tree_at_once_is_step_by_step(fields):
    """Source: invariant: tpot_goodput_per_ms judges its bisection's midpoints several steps at once, each
    rate's mean iteration its own, so it ends on the lone steps' number."""
    _, m = _model(fields)
    for tpot_ms in (15.0, 25.0, 40.0, 80.0):
        assert tpot_goodput_per_ms(m, tpot_ms) == _tpot_goodput_step_by_step(m, tpot_ms)


def _slot_goodput_step_by_step(m, goodput: float, percentile: int, ttft_ms: float, steps: int = 24) -> float:
    """goodput_with_slot_wait as one rate a step (within_ttft_with_slot_wait at each lone midpoint)."""
    if plan_slot_wait(m, goodput)[0] <= NEGLIGIBLE_WAIT or within_ttft_with_slot_wait(m, goodput, percentile,
                                                                                      ttft_ms):
        return goodput
    lo, hi = 0.0, goodput
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if within_ttft_with_slot_wait(m, mid, percentile, ttft_ms) else (lo, mid)
    return lo


SLOT_BOUND = [
    {"model": "qwen3-30b-a3b", "gpu": "h100-sxm", "tp": 1, "weights": "bf16", "kv_cache": "bf16",
     "load": {"arrival_cv": cv, "prompt_len_cv": 0.5, "output_len_cv": 1.0}} for cv in (0.5, 1.0, 2.0)
]


@pytest.mark.parametrize("fields", SLOT_BOUND)
def test_slot_wait_goodput_judged_a_tree_at_once_is_step_by_step(fields):
    """Source: invariant: goodput_with_slot_wait judges several bisection steps' midpoints in one call, each
    rate's load point, slot wait and mixture its own, so it ends on the lone steps' number; the slot wait
    lowers the goodput in some of these cases (a KV-limited MoE replica at 256 slots), so the walk is
    exercised."""
    _, m = _model(fields)
    lowered = 0
    for percentile in (50, 90, 99):
        for ttft_ms in (300.0, 1000.0, 3000.0, 10000.0):
            fast = goodput_per_ms(m, percentile, ttft_ms, None)
            got = goodput_with_slot_wait(m, fast, percentile, ttft_ms)
            assert got == _slot_goodput_step_by_step(m, fast, percentile, ttft_ms)
            lowered += got < fast
    assert lowered > 0
