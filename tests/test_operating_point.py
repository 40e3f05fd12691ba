"""The operating point at the objective (planner.serving.operating_point) and configurations compared at
equal service (planner.contract.equal_service): goodput, its judgement, mean TPOT, the fleet for a traffic."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner import ScenarioError, plan
from planner.contract.equal_service import at_objective, at_rate, compare_at_equal_service, fleet_for
from planner.serving.operating_point import (
    DEFAULT_OBJECTIVE,
    JUDGE_RELATIVE_TOLERANCE,
    judge,
    meets,
)
from planner.serving.sizing import size

BASE = {"model": "llama-3.1-70b", "tp": 4, "weights": "fp8", "kv_cache": "fp8", "context_len": 8192,
        "prompt_len": 2000, "output_len": 400}
GPUS = ("h100-sxm", "h200", "b200")


@pytest.mark.parametrize("gpu", GPUS)
def test_goodput_at_the_objective_is_the_highest_rate_that_meets_it(gpu):
    """The plan at its goodput meets the objective at its percentile; the same replica 0.2% of capacity
    above that rate misses it, and 0.2% below still meets it (the search's resolution is capacity / 48 /
    2^10, about 0.002%).
    Source: invariant: goodput's definition, checked by planning just above and just below."""
    p = plan(at_objective({**BASE, "gpu": gpu}, DEFAULT_OBJECTIVE))
    sv = p.serving
    assert sv.at_goodput and sv.stable and sv.request_rate == pytest.approx(sv.goodput_request_rate, rel=1e-9)
    assert judge(sv.ttft_ms, sv.itl_ms, DEFAULT_OBJECTIVE).met
    step = 0.002 * sv.max_request_rate
    below = plan(
        at_rate(at_objective({**BASE, "gpu": gpu}, DEFAULT_OBJECTIVE), sv.request_rate - step)
    ).serving
    above = plan(
        at_rate(at_objective({**BASE, "gpu": gpu}, DEFAULT_OBJECTIVE), sv.request_rate + step)
    ).serving
    assert judge(below.ttft_ms, below.itl_ms, DEFAULT_OBJECTIVE).met
    assert judge(above.ttft_ms, above.itl_ms, DEFAULT_OBJECTIVE).met is False


def test_mean_tpot_on_one_client_is_one_decode_step():
    """One client (closed loop at concurrency 1, as `vllm bench serve --max-concurrency 1` runs it),
    Llama-3.1-8B bf16 on an H100 with ideal efficiency: the client's request prefills alone, then decodes
    alone, so no other prompt rides its decode steps and TPOT = (E2E - TTFT) / (256 - 1) is one decode step
    at batch 1, which streams the weights: 15,298,207,744 B / 3.35e12 B/s = 4.567 ms within 1% (the
    embedding table it does not read and the KV it does nearly cancel). The client is back as soon as its
    request ends: rate x mean E2E = 1 (Little's law).
    Source: hand: bytes from Llama-3.1-8B's config.json (test_app: 8B bf16 decode step), 3.35 TB/s from
    the NVIDIA H100 SXM datasheet."""
    p = plan({"model": "llama-3.1-8b", "gpu": "h100-sxm", "tp": 1, "weights": "bf16", "kv_cache": "bf16",
              "prompt_len": 1024, "output_len": 256, "efficiency": "ideal", "load": {"concurrency": 1}})
    sv = p.serving
    tpot = sv.tpot_ms
    assert tpot.mean == pytest.approx(15_298_207_744 / 3.35e12 * 1e3, rel=0.01)
    assert tpot.mean == pytest.approx((sv.e2e_ms.mean - sv.ttft_ms.mean) / (256 - 1), rel=1e-9)
    assert tpot.p50 == pytest.approx(tpot.mean, rel=1e-9) and tpot.p99 == pytest.approx(tpot.mean, rel=1e-9)
    assert sv.request_rate * sv.e2e_ms.mean / 1000.0 == pytest.approx(1.0, rel=1e-6)


def test_a_closed_loop_with_more_clients_than_it_runs_is_saturated_not_unstable():
    """gpt-oss-120b on 8 B200s at its max batch (1024 -> 256 tokens): more clients than the replica runs
    below saturation, so the closed loop runs at capacity (the clients bound the queue) and its throughput
    is capacity x 256 output tokens, not "n/a".
    Source: hand: a closed loop's queue is bounded by its clients; tokens/s = rate x output length."""
    # under the production fit: the kernel tables (gpt-oss's default on vLLM) put this closed loop's rate
    # 3e-6 below its capacity, where the saturation flag's edge is
    p = plan({"model": "gpt-oss-120b", "gpu": "b200", "tp": 8, "efficiency": {"kernel_tables": None}})
    sv = p.serving
    assert sv.saturated and not sv.stable
    assert sv.request_rate == pytest.approx(sv.max_request_rate, rel=1e-9)
    assert sv.output_tokens_per_s == pytest.approx(sv.max_request_rate * 256, rel=1e-9)
    assert p.cost.usd_per_million_output_tokens is not None


@pytest.mark.parametrize("load", [{"at_goodput": True}, {"at_goodput": True, "request_rate": 1.0,
                                                         "slo": {"itl_ms": 50.0}}])
def test_at_goodput_needs_an_objective_and_no_other_operating_point(load):
    """Source: contract: one line naming `load` and the reason."""
    with pytest.raises(ScenarioError) as err:
        plan({**BASE, "gpu": "h100-sxm", "load": load})
    assert err.value.field.startswith("load") and "at_goodput" in err.value.reason


@given(st.floats(0.0, 1e6), st.floats(1e-3, 1e6))
def test_a_figure_meets_its_bound_within_the_search_resolution(value, bound):
    """Source: invariant: met iff the figure is at most its bound (to the quantile search's resolution)."""
    assert meets(value, bound) == (value <= bound * (1 + JUDGE_RELATIVE_TOLERANCE))
    assert meets(None, bound) is None and meets(value, None) is None


@pytest.mark.parametrize("traffic", [20.0, 50.0])
def test_fleet_for_one_configuration_is_the_sizing_pages_option(traffic):
    """The fleet the Plan and Compare views show for a traffic is the sizing search's cheapest option for
    that configuration alone, replicas, $/h and $/M; and Compare's ranking is the sizing page's order of
    the three GPUs' cheapest options.
    Source: invariant: one function sizes a configuration (planner.serving.sizing.evaluate_family)."""
    cheapest = {}
    for gpu in GPUS:
        result = size(
            {
                "model": "llama-3.1-70b", "gpus": [gpu], "tp": [4], "weights": ["fp8"], "kv_cache": ["fp8"],
                "context_len": 8192,
                "traffic": {"requests_per_s": traffic, "prompt_len": 2000, "output_len": 400},
                "slo": {"ttft_ms": 1000.0, "itl_ms": 50.0, "percentile": 90},
            }
        )
        cheapest[gpu] = result["options"][0]
        fleet = fleet_for({**BASE, "gpu": gpu}, traffic, DEFAULT_OBJECTIVE)
        assert (fleet.replicas, fleet.gpus) == (cheapest[gpu]["replicas"], cheapest[gpu]["gpus_total"])
        assert fleet.usd_per_hour == pytest.approx(cheapest[gpu]["usd_per_hour"], rel=1e-12)
        assert fleet.usd_per_million_output_tokens == pytest.approx(
            cheapest[gpu]["usd_per_million_output_tokens"], rel=1e-12)
    rows = compare_at_equal_service([{**BASE, "gpu": g} for g in GPUS], DEFAULT_OBJECTIVE, traffic)
    by_rank = [r.scenario["gpu"] for r in sorted(rows, key=lambda r: r.rank)]
    assert by_rank == sorted(GPUS, key=lambda g: (cheapest[g]["usd_per_million_output_tokens"],
                                                  cheapest[g]["gpus_total"]))
    for r in rows:  # each pin at its own goodput under the same objective
        assert r.plan.serving.at_goodput and r.plan.serving.slo_percentile == DEFAULT_OBJECTIVE.percentile


def test_the_latency_curves_sample_the_goodput_so_its_marker_sits_on_them():
    """The latency-vs-rate series holds 40+ rates, denser near capacity, and the goodput rate itself, where
    the objective's percentile is within the objective.
    Source: invariant: the chart draws the marker on a sampled point of its own curve."""
    from planner.contract.chart_data import serving_series

    s = serving_series(at_objective({**BASE, "gpu": "h100-sxm"}, DEFAULT_OBJECTIVE))
    rates = [r["request_rate"] for r in s.vs_rate]
    assert len(rates) >= 40 and rates == sorted(rates)
    near = [r for r in rates if r > 0.9 * s.capacity_rate]
    assert len(near) >= 10  # the last tenth of the range holds a quarter of the points
    at = [r for r in s.vs_rate if r["request_rate"] == s.goodput_rate]
    assert len(at) == 1 and at[0]["itl_p90_ms"] <= 50.0 * (1 + JUDGE_RELATIVE_TOLERANCE)
    assert at[0]["ttft_p90_ms"] <= 1000.0
