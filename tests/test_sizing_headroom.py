"""Sizing that holds near capacity (issue 31): every option's simulated range meets its objective, its
utilization is shown, the headroom and mean TPOT objectives bind, the wait for a sequence slot behaves as a
queue's wait, and the plan says which objective binds its goodput."""

from __future__ import annotations

import numpy as np
import pytest

from planner import ScenarioError, plan
from planner.physics.memory import plan_memory
from planner.scenario.scenario import Scenario, ServiceObjective, resolve
from planner.serving.operating_point import judge
from planner.serving.replica import replica_model
from planner.serving.serving_modes import size_with_modes
from planner.serving.sizing import size
from planner.serving.slot_wait import slot_wait
from planner.serving.workload import workload_for

# issue 31's buyer: Llama-3.1-70B fp8 for interactive chat, 50 req/s, p90 TTFT <= 1 s and ITL <= 50 ms
ISSUE31 = {
    "model": "llama-3.1-70b", "traffic": {"requests_per_s": 50.0, "prompt_len": 2000, "output_len": 400},
    "slo": {"ttft_ms": 1000.0, "itl_ms": 50.0}, "gpus": ["h100-sxm", "h200", "b200", "mi355x"],
    "weights": ["fp8"],
}
DEFAULT_PLAN = {"model": "llama-3.1-70b", "gpu": "h100-sxm", "tp": 4, "weights": "fp8", "kv_cache": "fp8",
                "context_len": 8192, "prompt_len": 2000, "output_len": 400,
                "load": {"at_goodput": True, "slo": {"ttft_ms": 1000.0, "itl_ms": 50.0, "percentile": 90}}}


@pytest.fixture(scope="module")
def issue31():
    return size_with_modes(ISSUE31)


def test_no_option_signs_a_fleet_its_simulated_range_contradicts(issue31):
    """Issue 31's request: the top options served 90-99% of capacity and the opened B200 plan showed "TTFT
    p90 470 ms met" beside a simulated range of 400-29,555 ms. Now every option's simulated range at the
    objective's percentile (its plan's queue bands) stays within 1 s and 50 ms, every option shows its
    utilization, and the plans of the five cheapest agree and mark the objective met.

    Source: contract: issue 31's "Done when": no sized option's p90 TTFT or ITL simulated range exceeds its
    objective; every option's utilization is shown."""
    options = issue31["options"]
    assert options
    for o in options:
        assert 0.0 < o["utilization"] <= 0.95
        assert o["ttft_ms_simulated_high"] <= 1000.0 * (1 + 1e-4), o
        assert o["itl_ms_simulated_high"] <= 50.0 * (1 + 1e-4), o
    slo = ServiceObjective(ttft_ms=1000.0, itl_ms=50.0)
    for o in options[:5]:
        sv = plan(o["scenario"]).serving
        j = judge(sv.ttft_ms, sv.itl_ms, slo, sv.queue_bands)
        assert j.confirmed is True and sv.queue_bands is not None
        assert sv.queue_bands.load_fraction == pytest.approx(o["utilization"], rel=1e-9)


def test_a_plan_at_91_percent_shows_no_tick():
    """The issue's opened B200 plan (1 x B200 fp8/fp8 at batch 49) at 91% of its capacity: its TTFT meets the
    objective in the fast model but its simulated range does not, so the judgement is met yet not confirmed,
    and the tile says so. At 97% of its capacity (where the issue's 3.125 req/s sat when this was written;
    past the simulated 95%) there is no range to confirm it, and the plan's TTFT includes the wait for one of
    its 49 sequence slots: it misses outright (its fast figure without the wait, the kind the issue's tile
    ticked, still meets it).

    Source: contract: issue 31 ("never show a tick where the simulated range misses")."""
    base = {"model": "llama-3.1-70b", "gpu": "b200", "tp": 1, "weights": "fp8", "kv_cache": "fp8",
            "context_len": 2400, "prompt_len": 2000, "output_len": 400, "batch": 49}
    objective = {"ttft_ms": 1000.0, "itl_ms": 50.0}
    capacity = plan({**base, "load": {"request_rate": 1.0}}).serving.max_request_rate
    for rate, band in ((round(0.91 * capacity, 3), True), (round(0.97 * capacity, 3), False)):
        sv = plan({**base, "load": {"request_rate": rate, "slo": objective}}).serving
        assert sv.queue_bands is not None and sv.queue_bands.load_fraction > 0.9
        j = judge(sv.ttft_ms, sv.itl_ms, ServiceObjective(**objective), sv.queue_bands)
        assert j.ttft_met is band and j.confirmed is False
        assert j.ttft_range_met is (False if band else None)
        assert sv.ttft_without_slot_wait_ms.p90 <= 1000.0
        if not band:
            assert sv.slot_wait_probability > 0.1 and sv.ttft_ms.p90 > sv.ttft_without_slot_wait_ms.p90


def test_headroom_caps_every_replica_and_costs_at_least_as_much(issue31):
    """A headroom of 60% keeps every replica at or under 60% of its capacity, and a tighter headroom never
    needs a cheaper fleet; a headroom outside (0, 0.95] is refused naming the field.

    Source: invariant: max_utilization bounds utilization; a tighter bound cannot lower the cost."""
    capped = size({**ISSUE31, "max_utilization": 0.6})
    assert capped["options"]
    assert all(o["utilization"] <= 0.6 * (1 + 1e-9) for o in capped["options"])
    assert capped["options"][0]["usd_per_hour"] >= issue31["options"][0]["usd_per_hour"]
    with pytest.raises(ScenarioError) as err:
        size({**ISSUE31, "max_utilization": 1.2})
    assert err.value.field == "max_utilization" and "\n" not in str(err.value)


def test_mean_tpot_objective_binds_sizing_and_the_plan():
    """A mean TPOT bound below what the ITL objective allows: every option's mean TPOT meets it and the fleet
    costs at least as much; a plan at the goodput under it runs at a mean TPOT within it, on the bound
    (where it binds), and names TPOT as the binding objective.

    Source: invariant: mean TPOT (the mean iteration) grows with the rate, so its bound is a goodput limit."""
    loose = size(ISSUE31)["options"][0]
    tight = size({**ISSUE31, "slo": {**ISSUE31["slo"], "tpot_ms": 25.0}})
    assert tight["options"]
    assert all(o["tpot_ms"] <= 25.0 for o in tight["options"])
    assert tight["options"][0]["usd_per_hour"] >= loose["usd_per_hour"]
    scenario = {**DEFAULT_PLAN, "load": {"at_goodput": True, "slo": {**DEFAULT_PLAN["load"]["slo"],
                                                                     "tpot_ms": 20.0}}}
    p = plan(scenario)
    assert p.serving.tpot_ms.mean <= 20.0 * (1 + 1e-6)
    assert p.serving.tpot_ms.mean == pytest.approx(20.0, rel=1e-3)
    assert p.serving.goodput_binding is not None and p.serving.goodput_binding.constraint == "tpot"


def test_the_default_plan_names_its_itl_cliff():
    """The default plan's goodput is set by p90 ITL jumping just above it, because prefill chunks interrupt
    decodes: the binding objective is ITL, through prefill interruptions, the figure 2% above the goodput is
    past the 50 ms bound, and relaxing ITL to the figure where TTFT takes over buys a higher goodput.

    Source: invariant: the binding objective's goodput alone is the plan's goodput; relaxing it never lowers
    it. The cliff is issue 31's finding (15.7 ms at 4.45 req/s, about 110 ms just above)."""
    p = plan(DEFAULT_PLAN)
    b = p.serving.goodput_binding
    assert b is not None
    assert (b.constraint, b.cause) == ("itl", "prefill interruptions")
    assert b.goodput_request_rate == pytest.approx(p.serving.goodput_request_rate, rel=1e-12)
    assert b.value_at_goodput_ms == pytest.approx(p.serving.itl_ms.p90, rel=1e-9)
    assert b.value_just_above_ms > 50.0
    assert b.relaxed_bound_ms > 50.0 and b.relaxed_goodput_request_rate > b.goodput_request_rate
    assert b.next_constraint == "ttft"
    relaxed = plan({**DEFAULT_PLAN, "load": {"at_goodput": True, "slo": {
        "ttft_ms": 1000.0, "itl_ms": b.relaxed_bound_ms * (1 + 1e-6), "percentile": 90}}})
    assert relaxed.serving.goodput_request_rate == pytest.approx(b.relaxed_goodput_request_rate, rel=1e-3)
    # the rate sizing runs this replica at: confirmed at or under the goodput, its load the band's own
    assert 0 < b.confirmed_request_rate <= b.goodput_request_rate * (1 + 1e-9)
    assert b.confirmed_utilization == pytest.approx(b.confirmed_request_rate / p.serving.max_request_rate)


def test_slot_wait_grows_with_the_rate_and_vanishes_at_a_trickle():
    """The wait for a sequence slot: none at a trickle, a probability in [0, 1] that grows with the rate, and
    more of it with fewer slots at the same rate.

    Source: invariant: a birth-death chain's tail mass P(k >= c) grows with the arrival rate and shrinks as c
    grows."""
    s = Scenario.model_validate({"model": "llama-3.1-70b", "gpu": "b200", "tp": 1, "weights": "fp8",
                                 "kv_cache": "fp8", "context_len": 2400, "prompt_len": 2000,
                                 "output_len": 400})
    d = resolve(s)
    top = plan_memory(d, 2400).max_batch
    m = replica_model(d, workload_for(s, d, top), top)
    cap = float(m.capacity_per_ms(49.0))
    rates = cap * np.array([1e-6, 0.5, 0.8, 0.9, 0.95])
    p49, mean49 = slot_wait(m, rates, 49)
    p35, _ = slot_wait(m, rates, 35)
    assert p49[0] == 0.0 and np.all((p49 >= 0) & (p49 <= 1))
    assert np.all(np.diff(p49) >= 0) and p49[-1] > 0.05
    assert np.all(p35[1:] >= p49[1:]) and np.all(mean49 >= 0)


def test_the_sizing_table_shows_every_options_utilization(issue31):
    """The sizing page's table has a utilization column (a share of capacity in percent) and the simulated
    range's top beside TTFT and ITL, for every option, even where all options share a value.

    Source: ui: issue 31 ("Show every option's utilization")."""
    from gpu_catalog import load_catalog
    from ui.sizing_options import options_table

    frame, config, _ = options_table(issue31["options"][:10], load_catalog())
    columns = list(frame.columns)
    assert "utilization" in columns
    assert "TTFT p90 simulated top (ms)" in columns and "ITL p90 simulated top (ms)" in columns
    shown = frame["utilization"].to_numpy()
    expected = [100.0 * o["utilization"] for o in issue31["options"][:10]]
    assert shown == pytest.approx(expected)
    assert all(0 < v <= 95 for v in shown)


def test_slot_wait_of_a_constant_step_is_erlang_c():
    """With a decode step that does not grow with the batch (10 ms at any population), no prefill work and
    two output tokens, each request holds its slot 20 ms (its prompt's iteration and one decode step) at any
    population: the chain is M/M/c with c = 4 slots. At 0.15 requests/ms the offered load is a = 3, and
    Erlang's C formula gives P(wait) = (a^4 / 4! x 4 / (4 - 3)) / (1 + 3 + 4.5 + 4.5 + 13.5) = 13.5 / 26.5 =
    0.50943; the wait's mean given it happens, 1 / (c / 20 ms - lambda) = 1 / (0.2 - 0.15) = 20 ms, halved by
    Allen-Cunneen's (ca^2 + cs^2) / 2 = (1 + 0) / 2 for fixed holds: 10 ms.

    Source: hand: Erlang C for c = 4, a = 3 (numbers above)."""
    from planner.serving.replica import ReplicaModel, Workload

    population = np.arange(0.0, 11.0)
    m = ReplicaModel(Workload(prompt_len=1, output_len=2, max_running=4), np.array([1.0]), np.array([1.0]),
                     np.array([0.0]), np.array([2.0]), population, np.full_like(population, 10.0),
                     population / 20.0, np.zeros_like(population),
                     np.array([0.0]), np.zeros_like(population), 0.0)  # no roofline floor in this chain
    probability, mean = slot_wait(m, np.array([0.15]), 4)
    assert probability[0] == pytest.approx(13.5 / 26.5, rel=1e-9)
    assert mean[0] == pytest.approx(10.0, rel=1e-9)
