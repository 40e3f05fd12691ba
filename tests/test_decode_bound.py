"""The disaggregated decode pool's bound on a decode worker's confirmed rate (planner.serving.decode_bound),
which orders and stops the pool's walk: never below the confirmed rate it bounds."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.scenario.scenario import Scenario, resolve
from planner.serving.decode_bound import DecodeRateBound
from planner.serving.disaggregated_workers import ConfirmedDecodeRate, TrafficShape, _decode_model
from planner.serving.layout_memo import bound_steps

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

LAYOUTS = [("llama-3.1-8b", "l40s", 1, 1), ("llama-3.1-8b", "h100-sxm", 1, 1),
           ("llama-3.1-70b", "h100-sxm", 4, 1), ("llama-3.1-70b", "mi300x", 2, 1),
           ("qwen3-235b-a22b", "mi350x", 2, 1), ("qwen3-235b-a22b", "h200", 8, 1),
           ("qwen3-235b-a22b", "b200", 1, 8), ("qwen3-235b-a22b", "h20", 2, 16),
           ("mixtral-8x7b", "a100-sxm-80gb", 2, 1)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layout=st.sampled_from(LAYOUTS), pp=st.sampled_from([1, 2]), weights=st.sampled_from(["fp8", "bf16"]),
       kv=st.sampled_from(["fp8", "bf16"]), prompt=st.integers(64, 12_000), output=st.integers(2, 2_000),
       itl=st.floats(8.0, 200.0), percentile=st.sampled_from([50, 90, 99]),
       arrival_cv=st.sampled_from([0.5, 1.0, 2.0, 3.0, 4.0]), prompt_cv=st.sampled_from([0.0, 0.6]),
       max_utilization=st.sampled_from([None, 0.05, 0.6, 0.82, 0.9]))
def test_decode_rate_bound_is_above_the_confirmed_rate(layout, pp, weights, kv, prompt, output, itl,
                                                       percentile, arrival_cv, prompt_cv, max_utilization):
    """Source: invariant: the decode pool's bound on a decode worker's confirmed rate is at least the
    confirmed rate ConfirmedDecodeRate finds (req/s), and None only where that rate is 0, over drawn decode
    candidates (layout, lengths, ITL objective, percentile, arrival CV inside and outside the simulated
    classes, length CV, headroom): the walk it orders never stops before a cheaper worker."""
    model, gpu, tp, ep = layout
    try:
        d = resolve(Scenario.model_validate({"model": model, "gpu": gpu, "tp": tp, "pp": pp, "ep": ep,
                                             "weights": weights, "kv_cache": kv, "prompt_len": prompt,
                                             "output_len": output}))
    except Exception:
        return  # a layout the model does not resolve on is no candidate
    shape = TrafficShape(prompt, output, arrival_cv, prompt_cv, 0.0)
    built = _decode_model(d, prompt + output, shape)
    if built is None:
        return  # one sequence does not fit: no candidate either
    max_batch, m = built
    exact = ConfirmedDecodeRate(m, max_batch, percentile, itl, max_utilization).finish() * 1000.0
    bound = DecodeRateBound(itl, percentile, arrival_cv, prompt_cv > 0, prompt, max_utilization)
    rate = bound.per_s(output, bound_steps(d, max_batch, prompt + output / 2))
    if rate is None:
        assert exact == 0.0
    else:
        assert exact <= rate
