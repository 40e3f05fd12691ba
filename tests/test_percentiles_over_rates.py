"""The latency-vs-rate chart's one percentile search over every rate (planner.serving.distributions.
quantiles_over_points) against the scalar search the plan uses at one rate (latency_percentiles)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.contract.chart_data import serving_series
from planner.physics.memory import plan_memory
from planner.scenario.scenario import parse_scenario, resolve
from planner.serving.distributions import latency_percentiles, quantile, quantiles_over_points
from planner.serving.replica import load_point, replica_model
from planner.serving.slot_wait import plan_slot_wait, with_slot_wait_percentiles
from planner.serving.workload import running_cap, workload_for

# Agreement of two searches that take the same grid and the same midpoints: only the ITL window bound
# differs (the widest window's over all rates against each rate's own), a renormalised tail far below this.
SAME_SEARCH_RELATIVE = 1e-9


def _replica(scenario: dict):
    s = parse_scenario(scenario)
    d = resolve(s)
    mem = plan_memory(d, s.context_len_resolved)
    workload = workload_for(s, d, running_cap(s.batch, mem.max_batch))
    return replica_model(d, workload, max_population=mem.max_batch)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    gpu=st.sampled_from(["h100-sxm", "h200", "l40s", "b200"]),
    model=st.sampled_from(["llama-3.1-8b", "qwen3-30b-a3b", "mixtral-8x7b"]),
    prompt_len=st.integers(64, 8000), output_len=st.integers(2, 2000),
    prompt_len_cv=st.sampled_from([0.0, 0.6]), arrival_cv=st.sampled_from([1.0, 2.5]),
)
def test_every_charted_rate_has_the_plans_own_percentiles(gpu, model, prompt_len, output_len,
                                                          prompt_len_cv, arrival_cv):
    """Each row of the latency-vs-rate chart holds the TTFT and ITL p50/p90/p99 that the plan's scalar search
    gives at that rate (TTFT with the wait for a sequence slot, as the plan shows it), to 1e-9 relative, over
    GPUs, dense and MoE models, fixed and spread prompt lengths and Poisson and clumped arrivals.
    Source: invariant: one model per physical question (the chart and the plan share the distributions)."""
    scenario = {"model": model, "gpu": gpu, "context_len": 16384, "prompt_len": prompt_len,
                "output_len": output_len, "tp": 2 if model == "mixtral-8x7b" else 1,
                "load": {"request_rate": 1.0, "prompt_len_cv": prompt_len_cv, "arrival_cv": arrival_cv}}
    series = serving_series(scenario)
    if series is None:  # the deployment does not fit: nothing is charted
        return
    m = _replica(scenario)
    assert len(series.vs_rate) >= 40
    for row in series.vs_rate[::5]:
        rate_per_ms = row["request_rate"] / 1000.0
        point = load_point(m, np.asarray(rate_per_ms))
        ttft, itl, _ = latency_percentiles(m, point)
        # the plan's TTFT holds the wait for a sequence slot (issue 31), computed as the plan computes it
        waited, _ = with_slot_wait_percentiles(m, load_point(m, rate_per_ms), ttft, ttft,
                                               *plan_slot_wait(m, rate_per_ms))
        for q in (50, 90, 99):
            expected = waited.at(q)
            assert (row[f"ttft_p{q}_ms"] != row[f"ttft_p{q}_ms"] if expected is None
                    else row[f"ttft_p{q}_ms"] == pytest.approx(expected, rel=SAME_SEARCH_RELATIVE))
            assert row[f"itl_p{q}_ms"] == pytest.approx(itl.at(q), rel=SAME_SEARCH_RELATIVE)


def test_quantiles_over_points_are_quantile_at_each_point():
    """Exponential CDFs of means 1, 10 and 1,000 ms (the last needs the grid grown past its first high): each
    column equals quantile() on that CDF alone, bit for bit, and the exact quantile -mean ln(1 - p) to the
    bisection's resolution.
    Source: hand: the exponential quantile -mean ln(1 - p)."""
    means = np.array([1.0, 10.0, 1000.0])
    probability = np.array([0.5, 0.9, 0.99])

    def cdf(t):
        return -np.expm1(-np.asarray(t, dtype=float) / means)

    got = quantiles_over_points(cdf, probability, np.full(3, 5.0))
    for j, mean in enumerate(means):
        alone = quantile(lambda t, mean=mean: -np.expm1(-np.asarray(t, dtype=float) / mean), probability, 5.0)
        assert got[:, j].tolist() == alone.tolist()
        assert got[:, j] == pytest.approx(-mean * np.log1p(-probability), rel=1e-3)
