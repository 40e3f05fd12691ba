"""The open-loop plan's queue bands (planner/serving/queue_bands.py, fitted by tools/fit_queue_bands.py on
training scenarios of other models) hold the discrete-event simulation's percentiles on the scenarios of
tests/test_serving_oracle.py, none of which the bands were fitted on (held out: whole models and lengths),
including the 13 points where the fast model alone misses issue 9's tolerance (issue 20 item 5)."""

from __future__ import annotations

from functools import cache

import pytest
from serving_oracle import simulate  # tests/ is on the path
from test_serving_oracle import LOADS, SCENARIOS, _setup

from planner.contract.planning import plan
from planner.scenario.scenario import parse_scenario
from planner.serving.queue_bands import LOADS as TABULATED_LOADS
from planner.serving.queue_bands import QUEUE_BANDS_PATH, arrival_class, queue_bands
from planner.serving.serving import serve_at_rate

HELD_OUT_REQUESTS = 20000  # more than the agreement test's 6,000: near capacity its p99 is itself noisy


@cache
def _held_out(name: str, fraction: float):
    d, w, m = _setup(name)
    rate_per_s = fraction * float(m.capacity_per_ms()) * 1000.0
    point = serve_at_rate(d, w, rate_per_s)
    sim = simulate(d, w, rate_per_s, HELD_OUT_REQUESTS, seed=11)
    return point, {f"{name}_p{q}": getattr(sim, name)(q) for name in ("ttft", "itl") for q in (50, 90, 99)}


# Held-out points the band misses (seed 11, 20,000 requests): kept as strict xfails so the gap stays visible.
_ITL_TAIL = ("ITL p99 at 90% of capacity with 2,000-token prompts on 70B TP4 (prompt work 4.5x the decode "
             "step): the simulation's tail is 1.45-1.47x the queue model's, above every training scenario's "
             "1.35-1.40")
_NEAR_BUDGET = ("8,000-token prompts just under the 8,192-token chunk budget: ITL p90 at 50% of capacity 1% "
                "over the band's top (the in-budget training prompts reach 6,000 tokens; longer ones have "
                "bands apart)")
_ITL_TAIL_2K = ("ITL p99 at 90% of capacity on 70B with fixed 2,000-token prompts: 298.6 ms simulated, "
               "1.09x the band's top (273.5 ms), the tail mechanism of the lognormal case (refit 2026-11-27 "
               "after the slot wait and the kernel-table prefill; it was inside before)")
MISSES = {("dense-70b-lognormal", 0.9): _ITL_TAIL, ("dense-8b-long", 0.5): _NEAR_BUDGET,
          ("dense-70b-2k", 0.9): _ITL_TAIL_2K}
HELD_OUT = [pytest.param(n, f, marks=[pytest.mark.xfail(strict=True, reason=MISSES[(n, f)])]
                         if (n, f) in MISSES else [], id=f"{n}@{f:.0%}") for n in SCENARIOS for f in LOADS]


@pytest.mark.parametrize("name, fraction", HELD_OUT)
def test_the_band_holds_the_simulation_on_held_out_scenarios(name, fraction):
    """Source: oracle: tests/serving_oracle.py (vLLM V1's scheduler written from vLLM's source, no code shared
    with the planner; 20,000 requests, a seed the bands were not fitted with) on scenarios whose models the
    bands never saw; every percentile lies inside the plan's band."""
    point, simulated = _held_out(name, fraction)
    bands = point.queue_bands
    assert bands is not None and bands.status == "simulated"
    outside = {}
    for metric, value in simulated.items():
        band = getattr(bands, f"{metric}_ms")
        assert band is not None and band.low <= band.high
        if not band.low <= value <= band.high:
            outside[metric] = f"{value:.1f} not in {band.low:.1f}..{band.high:.1f}"
    assert not outside, outside


def test_the_bands_were_fitted_on_other_models():
    """Source: invariant: held out means no model of the checked scenarios is among the training ones."""
    import json

    training = json.loads(QUEUE_BANDS_PATH.read_text())["training_scenarios"]
    checked = {s["model"] for s, *_ in SCENARIOS.values()}
    assert checked.isdisjoint({s["model"] for s in training.values()})


def test_the_plan_carries_the_bands_in_an_open_loop_only():
    """Source: contract: serving.queue_bands in an open loop (request_rate), null in a closed loop (the
    benchmark is simulated itself); outside the table the status says why and no band is given."""
    base = {"model": "llama-3.1-8b", "gpu": "h100-sxm", "prompt_len": 1000, "output_len": 200}
    capacity = plan(parse_scenario({**base, "load": {"request_rate": 1.0}})).serving.max_request_rate
    open_loop = plan(parse_scenario({**base, "load": {"request_rate": 0.5 * capacity}})).serving
    assert open_loop.queue_bands is not None and open_loop.queue_bands.status == "simulated"
    assert open_loop.queue_bands.ttft_p50_ms is not None
    assert open_loop.queue_bands.ttft_p50_ms.low <= open_loop.ttft_ms.p50 * 1.1
    near = plan(parse_scenario({**base, "load": {"request_rate": 0.97 * capacity}})).serving.queue_bands
    assert near is not None and near.ttft_p50_ms is None and "over the simulated 95%" in near.status
    closed = plan(parse_scenario({**base, "load": {"concurrency": 8}})).serving
    assert closed.queue_bands is None


def test_the_bands_belong_to_this_queue_model():
    """Source: invariant: the bands are ratios to the queue model's figures; the model must still give the
    figures it gave when they were fitted (else refit: python tools/fit_queue_bands.py)."""
    import json
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
    from fit_queue_bands import TRAINING, fast_point

    ref = json.loads(QUEUE_BANDS_PATH.read_text())["reference"]
    fast = fast_point(TRAINING[ref["scenario"]], ref["arrival_cv"], ref["length_cv"], ref["load"])[0]
    assert fast == pytest.approx(ref["fast_ms"], rel=1e-6)


@pytest.mark.parametrize("cv, expected", [(0.5, None), (1.0, "poisson"), (1.49, "poisson"), (2.0, "bursty-2"),
                                          (3.0, "bursty-3"), (3.5, None)])
def test_arrival_classes(cv, expected):
    """Source: hand: the CV ranges each fitted class stands for (fitted at 1, 2 and 3)."""
    assert arrival_class(cv) == expected


def test_between_two_tabulated_loads_the_band_is_their_union():
    """Source: invariant: a load between two tabulated ones gets a band at least as wide as either."""
    estimates = {"ttft_p50": 100.0, "ttft_p90": 150.0, "ttft_p99": 200.0, "itl_p50": 10.0, "itl_p90": 15.0,
                 "itl_p99": 20.0}
    lo, hi = TABULATED_LOADS[3], TABULATED_LOADS[4]
    between = queue_bands(estimates, 0.5 * (lo + hi), 1.0, False).ttft_p50_ms
    for x in (lo, hi):
        edge = queue_bands(estimates, x, 1.0, False).ttft_p50_ms
        assert between is not None and edge is not None
        assert between.low <= edge.low and between.high >= edge.high


if __name__ == "__main__":  # held-out coverage: PYTHONPATH=.:tests python tests/test_queue_bands.py
    for n in SCENARIOS:
        for f in LOADS:
            point, simulated = _held_out(n, f)
            cells = []
            for metric, value in simulated.items():
                band = getattr(point.queue_bands, f"{metric}_ms")
                inside = band is not None and band.low <= value <= band.high
                span = f"{band.low:8.1f}..{band.high:8.1f}" if band is not None else "no band"
                cells.append(f"{metric} {value:8.1f} in {span} {'ok' if inside else 'OUT'}")
            print(f"{n:22s} {f:4.0%} " + " | ".join(cells))
