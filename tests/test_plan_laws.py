"""Physical laws every plan obeys (issue 22), as hypothesis properties over random valid scenarios.

- No plan holds a negative quantity; a deployment that does not fit has a KV budget of 0 and says by how
  much it falls short in `memory.kv_shortfall_gb_per_gpu` (and the waterfall's `kv_shortfall`).
- Prefix caching never lowers capacity: cached tokens are work not done.
- The floor is a floor: `latency.itl_ms` is never below `latency.itl_ms_floor` (efficiency "ideal" included).
- More memory never gives less KV; more HBM bandwidth never makes a decode step or a prefill slower.
- A looser objective never gives less goodput.
"""

from __future__ import annotations

import math
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu_catalog import load_catalog
from planner import plan_dict
from tests.test_properties import scenarios

EXAMPLES = int(os.environ.get("RIDGELINE_LAW_EXAMPLES", "30"))
LAWS = settings(max_examples=EXAMPLES, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
REL = 1e-9  # the same arithmetic on both sides: only rounding may differ

# Figures that are signed by definition (an error or a difference, not an amount).
SIGNED = ("error", "delta", "change", "diff", "saving")


def _negatives(value, path=""):
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, (int, float)):
        if value < 0 and not any(word in path for word in SIGNED):
            yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _negatives(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _negatives(v, f"{path}[{i}]")


@st.composite
def loaded_scenarios(draw):
    """A random valid scenario, half of them at an operating point with a traffic shape."""
    s = draw(scenarios())
    if draw(st.booleans()):
        s["load"] = {"request_rate": draw(st.floats(0.01, 200.0)),
                     "arrival_cv": draw(st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0])),
                     "prefix_cache_hit": draw(st.sampled_from([0.0, 0.25, 0.5, 0.95]))}
    return s


@LAWS
@given(loaded_scenarios())
def test_no_plan_holds_a_negative_quantity(s):
    """Source: invariant: physical monotonicity (issue 22)."""
    p = plan_dict(s)
    assert list(_negatives(p)) == [], s
    m = p["memory"]
    assert m["kv_budget_gb_per_gpu"] >= 0 and m["kv_shortfall_gb_per_gpu"] >= 0
    if m["weights_fit"]:
        assert m["kv_shortfall_gb_per_gpu"] == 0
    else:
        assert m["kv_budget_gb_per_gpu"] == 0 and m["kv_shortfall_gb_per_gpu"] > 0


def test_a_deployment_that_does_not_fit_reports_its_shortfall():
    """Llama-3.1-405B in bf16 on one 24 GB L4: ~811.7 GB of weights per GPU (405e9 x 2 bytes) against ~21 GB
    usable: budget 0, and the shortfall is the weights plus overheads minus the cap, about 797 GB.
    Source: invariant: physical monotonicity (issue 22).
    """
    m = plan_dict({"model": "llama-3.1-405b", "gpu": "l4"})["memory"]
    assert m["kv_budget_gb_per_gpu"] == 0
    assert m["kv_shortfall_gb_per_gpu"] == pytest.approx(
        m["weights_gb_per_gpu"] - m["usable_gb_per_gpu"], rel=0.02
    )
    assert m["waterfall_gib"]["kv_cache"] == 0 and m["waterfall_gib"]["kv_shortfall"] > 700


def _capacity(s, hit):
    load = {**s.get("load", {}), "request_rate": 1.0, "prefix_cache_hit": hit}
    return plan_dict({**s, "load": load})["serving"]["max_request_rate"]


@LAWS
@given(scenarios(), st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_prefix_caching_never_lowers_capacity(s, h1, h2):
    """Source: invariant: physical monotonicity (issue 22)."""
    lo, hi = sorted((h1, h2))
    c_lo, c_hi = _capacity(s, lo), _capacity(s, hi)
    if c_lo is None or c_hi is None:  # does not fit: no operating point at any hit rate
        assert c_lo is None and c_hi is None
        return
    assert c_hi >= c_lo * (1 - REL), (s, lo, c_lo, hi, c_hi)


def test_prefix_caching_on_a_sliding_window_model():
    """The reported case: gemma-3-12b (5 of 6 layers in a 1,024-token window) on 2x B200, short prompts,
    where a cached prefix's prefill cost less than the empty step it replaced.
    Source: invariant: physical monotonicity (issue 22).
    """
    s = {
        "model": "gemma-3-12b", "gpu": "b200", "tp": 2, "context_len": 600, "prompt_len": 500,
        "output_len": 100,
    }
    rates = [_capacity(s, h) for h in (0.0, 0.25, 0.5, 0.95)]
    assert rates == sorted(rates)


@LAWS
@given(scenarios())
def test_the_floor_is_a_floor(s):
    """Source: invariant: physical monotonicity (issue 22). The roofline of a step is a floor for every
    engine (issue 20's production engines may beat our compiled-step rig, `itl_ms_floor`, but never the
    roofline); under `efficiency: "ideal"` the plan is that floor."""
    lat = plan_dict(s)["latency"]
    assert lat["itl_ms"] >= lat["itl_ms_bound"] * (1 - REL), s
    if lat.get("prefill_ms_bound") is not None:
        assert lat["prefill_ms"] >= lat["prefill_ms_bound"] * (1 - REL), s
    ideal = plan_dict({**s, "efficiency": "ideal"})["latency"]
    assert ideal["itl_ms"] >= ideal["itl_ms_floor"] * (1 - REL), s


def _custom_gpu(gpu_id: str, **scale: float) -> dict:
    gpu = load_catalog()[gpu_id].model_dump(exclude_none=True, exclude={"id", "sources"})
    for key, factor in scale.items():
        gpu[key] = gpu[key] * factor
    return gpu


@LAWS
@given(scenarios(), st.floats(1.0, 4.0))
def test_more_memory_never_gives_less_kv(s, factor):
    """Source: invariant: physical monotonicity (issue 22)."""
    small = plan_dict({**s, "gpu": _custom_gpu(s["gpu"])})["memory"]
    big = plan_dict({**s, "gpu": _custom_gpu(s["gpu"], memory_gb=factor)})["memory"]
    assert big["kv_budget_gb_per_gpu"] >= small["kv_budget_gb_per_gpu"] * (1 - REL)
    assert big["max_batch"] >= small["max_batch"]


@LAWS
@given(scenarios(), st.floats(1.0, 4.0))
def test_more_bandwidth_never_makes_a_step_slower(s, factor):
    """Source: invariant: physical monotonicity (issue 22)."""
    slow = plan_dict({**s, "gpu": _custom_gpu(s["gpu"])})["latency"]
    fast = plan_dict({**s, "gpu": _custom_gpu(s["gpu"], hbm_tb_s=factor)})["latency"]
    assert fast["itl_ms"] <= slow["itl_ms"] * (1 + REL)
    assert fast["prefill_ms"] <= slow["prefill_ms"] * (1 + REL)


@LAWS
@given(scenarios(), st.floats(1.0, 10.0), st.floats(1.0, 10.0))
def test_a_looser_objective_never_gives_less_goodput(s, ttft_factor, itl_factor):
    """Source: invariant: physical monotonicity (issue 22)."""
    base = plan_dict(s)["latency"]
    if not math.isfinite(base["itl_ms"]):
        return
    slo = {"ttft_ms": base["ttft_ms"] * 3, "itl_ms": base["itl_ms"] * 1.5}
    loose = {"ttft_ms": slo["ttft_ms"] * ttft_factor, "itl_ms": slo["itl_ms"] * itl_factor}

    def goodput(objective):
        serving = plan_dict({**s, "load": {"request_rate": 1.0, "slo": objective}})["serving"]
        return serving["goodput_request_rate"]

    tight, looser = goodput(slo), goodput(loose)
    if tight is None:
        return  # does not fit, or no rate meets even the tight objective's shape
    assert looser is not None and looser >= tight * (1 - 1e-6), (s, slo, tight, loose, looser)
