"""The aggregated checks' shortcuts give the figures of the plain computations they replace (issue 31): the
clumped window counts kept for a second ask, the TTFT CDF evaluating exponentials on the wait parts only,
and the replica model's seeded means."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.serving import arrivals
from planner.serving.arrivals import window_counts
from planner.serving.distributions import _ttft_parts, ttft_distribution
from planner.serving.replica import ReplicaModel, load_point
from tests.test_shared_searches import SCENARIOS
from tests.test_sizing_search_steps import _model

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

WINDOWS = st.lists(st.one_of(st.floats(0.0, 60.0), st.just(math.inf)), min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([1.5, 2.0, 3.0]), WINDOWS, st.sampled_from([1, 2, 9, 48]), st.booleans())
def test_kept_clumps_give_the_computed_counts(cv, windows, kmax, elementwise):
    """Source: invariant: a clumped window count asked again (the kept clump figures, arrivals._clumps) is
    the count computed afresh, to the bit, infinite windows included; and what the caller gets is its own
    (writable), never the kept read-only arrays."""
    rates = np.linspace(0.01, 1.0, len(windows))
    window = np.array(windows)
    arrivals._clumps_kept.clear()
    fresh = window_counts(rates, window, cv, kmax, elementwise)
    for _ in range(2):
        kept = window_counts(rates, window, cv, kmax, elementwise)
        assert np.array_equal(kept, fresh, equal_nan=True)
        assert kept.flags.writeable
    arrivals._clumps_kept.clear()
    assert np.array_equal(window_counts(rates, window, cv, kmax, elementwise), fresh, equal_nan=True)


def _plain_ttft_cdf(m: ReplicaModel, p, t_ms) -> np.ndarray:
    """ttft_distribution's CDF as main 56ae56c wrote it: every part through the exponential's branch."""
    parts, weights, tails = _ttft_parts(m, p)
    scale = np.maximum(tails, 1e-9)
    x = np.asarray(t_ms, dtype=float)[..., None] - parts
    with np.errstate(over="ignore"):
        inside = np.where(x < 0, 0.0, -np.expm1(-np.maximum(x, 0.0) / scale))
    return np.sum(weights * np.where(tails > 0, inside, x >= 0), axis=-1)


@pytest.mark.parametrize("fields", SCENARIOS)
def test_ttft_cdf_on_wait_parts_only_is_the_full_mixture(fields):
    """Source: invariant: only each length block's first TTFT part (the wait) has an exponential tail, so
    the CDF that evaluates the exponential there alone gives the full mixture's numbers, to the bit, at rates
    from a trickle to past capacity (infinite waits) and at a grid of bounds per rate."""
    _, m = _model(fields)
    capacity = float(m.capacity_per_ms())
    rates = capacity * np.array([1e-6, 0.1, 0.5, 0.8, 0.95, 0.999, 1.2])
    p = load_point(m, rates)
    _, _, tails = _ttft_parts(m, p)
    blocks = tails.reshape(tails.shape[:-1] + (-1, tails.shape[-1] // len(m.computed_tokens)))
    assert not blocks[..., 1:].any()  # the premise: no tail outside the wait part
    t = np.outer(np.geomspace(1.0, 1e5, 12), np.ones(len(rates)))
    with np.errstate(invalid="ignore"):
        assert np.array_equal(ttft_distribution(m, p)(t), _plain_ttft_cdf(m, p, t), equal_nan=True)


@pytest.mark.parametrize("fields", SCENARIOS)
def test_seeded_means_are_the_models_own(fields):
    """Source: invariant: the means replica_model seeds into its model are float(np.mean(...)) of the grids
    it keeps, as the cached properties compute them."""
    _, m = _model(fields)
    assert m.decode_steps_per_request == float(np.mean(m.output_tokens - 1.0))
    assert m.mean_prefill_work_ms == float(np.mean(m.prefill_work_ms))
    assert m.mean_computed_tokens == float(np.mean(m.computed_tokens))
    assert m.mean_prefill_floor_ms == float(np.mean(m.prefill_floor_ms))
