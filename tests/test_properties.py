"""Hypothesis properties: monotonicity and invariants over random valid scenarios."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu_catalog import load_catalog
from planner import plan, plan_dict
from planner.core.precision import KV_PRECISIONS, WEIGHT_PRECISIONS, bits_per_value
from planner.hardware.parallelism import valid_tp
from planner.model.presets import load_presets

GPUS = list(load_catalog())
MODELS = list(load_presets())
WEIGHTS = list(WEIGHT_PRECISIONS)
KV = list(KV_PRECISIONS)
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _lacks_native_peak(gpu_id: str, weights: str) -> bool:
    """fp8/fp4 weights on a GPU without that tensor format: the scenario must ask for weight-only bf16."""
    return weights in ("fp8", "fp4") and weights not in load_catalog()[gpu_id].tflops


def _position_limit(model: str) -> int:
    from planner.scenario.scenario import model_position_limit

    return model_position_limit(load_presets()[model]) or 100_000_000


@st.composite
def scenarios(draw):
    gpu = draw(st.sampled_from(GPUS))
    weights = draw(st.sampled_from(WEIGHTS))
    model = draw(st.sampled_from(MODELS))
    # the TPs the engines load for this model (planner.hardware.parallelism.valid_tp)
    tp = draw(st.sampled_from([t for t in (1, 2, 4, 8) if valid_tp(load_presets()[model], t)]))
    # contexts within the model's positions (longer ones are refused: planner.scenario.scenario)
    limit = _position_limit(model)
    prompt = draw(st.integers(1, min(16_000, limit - 1)))
    output = draw(st.integers(1, min(4_000, limit - prompt)))
    extra = draw(st.integers(0, min(16_000, limit - prompt - output)))
    s = {"model": model, "gpu": gpu, "tp": tp, "weights": weights, "kv_cache": draw(st.sampled_from(KV)),
         "prompt_len": prompt, "output_len": output, "context_len": prompt + output + extra}
    if _lacks_native_peak(gpu, weights):
        s["compute"] = "bf16"
    if draw(st.booleans()):
        s["batch"] = draw(st.integers(1, 512))
    if draw(st.booleans()):
        s["efficiency"] = "ideal"
    return s


def _walk_keys(d, prefix=""):
    for k, v in d.items():
        yield prefix + k
        if isinstance(v, dict) and k not in ("decode_breakdown_ms", "prefill_breakdown_ms"):
            yield from _walk_keys(v, prefix + k + ".")


CONTRACT_KEYS = {
    "memory.weights_gb_per_gpu", "memory.kv_bytes_per_token", "memory.kv_bytes_per_token_per_gpu",
    "memory.kv_budget_gb_per_gpu", "memory.max_batch", "memory.fits", "roofline.ridge_flop_per_byte",
    "roofline.decode_ai", "roofline.ridge_crossing_batch", "roofline.regime", "latency.prefill_ms",
    "latency.ttft_ms", "latency.itl_ms", "latency.itl_ms_bound", "throughput.output_tokens_per_s",
    "throughput.output_tokens_per_s_bound", "throughput.tokens_per_s_per_user",
    "cost.usd_per_million_output_tokens",
}


@SETTINGS
@given(scenarios())
def test_every_valid_scenario_yields_every_contract_key(s):
    """Source: contract: every valid scenario yields every contract key and positive latencies."""
    out = plan_dict(s)
    assert set(_walk_keys(out)) >= CONTRACT_KEYS
    assert out["latency"]["itl_ms"] > 0 and out["latency"]["ttft_ms"] > 0


@SETTINGS
@given(scenarios())
def test_realistic_itl_never_below_its_bound(s):
    """Source: invariant: a realistic engine is never faster than the roofline bound."""
    p = plan(s)
    assert p.latency.itl_ms >= p.latency.itl_ms_bound * (1 - 1e-9)
    assert p.latency.prefill_ms >= p.latency.prefill_ms_bound * (1 - 1e-9)
    assert p.throughput.output_tokens_per_s <= p.throughput.output_tokens_per_s_bound * (1 + 1e-9)


@SETTINGS
@given(scenarios(), st.integers(1, 100_000))
def test_max_batch_never_grows_with_context(s, more):
    """Source: invariant: a longer context never fits more sequences."""
    a = plan(s).memory.max_batch
    longer = min(s["context_len"] + more, _position_limit(s["model"]))  # within the model's positions
    b = plan({**s, "context_len": longer}).memory.max_batch
    assert b <= a


@SETTINGS
@given(scenarios(), st.sampled_from(WEIGHTS), st.sampled_from(WEIGHTS))
def test_lower_weight_precision_never_adds_weight_bytes(s, w1, w2):
    """Source: invariant: fewer bits per weight never add weight bytes."""
    hi, lo = sorted((w1, w2), key=bits_per_value, reverse=True)
    s = {**s, "compute": "bf16"}
    assert (
        plan({**s, "weights": lo}).memory.weights_gb_per_gpu
        <= plan({**s, "weights": hi}).memory.weights_gb_per_gpu
    )


@SETTINGS
@given(scenarios(), st.integers(1, 2000), st.integers(1, 2000))
def test_decode_ai_never_falls_as_batch_grows(s, b1, b2):
    """Source: invariant: decode arithmetic intensity never falls as the batch grows."""
    lo, hi = sorted((b1, b2))
    a = plan({**s, "batch": lo}).roofline.decode_ai
    b = plan({**s, "batch": hi}).roofline.decode_ai
    assert b >= a * (1 - 1e-9)


@SETTINGS
@given(scenarios(), st.integers(1, 1000), st.integers(1, 1000))
def test_itl_never_falls_as_batch_grows(s, b1, b2):
    """Source: invariant: a larger batch never decodes faster per step."""
    lo, hi = sorted((b1, b2))
    assert plan({**s, "batch": hi}).latency.itl_ms >= plan({**s, "batch": lo}).latency.itl_ms * (1 - 1e-9)


@SETTINGS
@given(scenarios())
def test_ridge_crossing_is_where_the_regime_flips(s):
    """Source: invariant: the ridge-crossing batch is where the regime flips to compute-bound."""
    p = plan(s)
    crossing = p.roofline.ridge_crossing_batch
    if crossing is not None:
        assert plan({**s, "batch": crossing}).roofline.regime == "compute-bound"
        if crossing > 1:
            assert plan({**s, "batch": crossing - 1}).roofline.regime == "memory-bound"


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["llama-3.1-8b", "llama-3.1-70b", "mixtral-8x7b", "qwen3-32b"]),
       st.floats(0.1, 50.0), st.integers(50, 8000), st.integers(10, 2000),
       st.floats(100.0, 5000.0), st.floats(10.0, 200.0))
def test_sizing_options_always_meet_objectives_and_replan_consistently(model, rps, prompt, output, ttft, itl):
    """Source: invariant: sizing options meet the objectives, cover the traffic and re-plan to the same
    ITL."""
    from planner.serving.sizing import size

    request = {"model": model, "traffic": {"requests_per_s": rps, "prompt_len": prompt, "output_len": output},
               "slo": {"ttft_ms": ttft, "itl_ms": itl}, "gpus": ["h100-sxm", "l40s"], "tp": [1, 4],
               "weights": ["fp8"], "kv_cache": ["fp8"], "max_options": 5}
    result = size(request)
    assert result["feasible"] >= len(result["options"])
    for o in result["options"]:
        assert o["ttft_ms"] <= ttft and o["itl_ms_under_load"] <= itl
        assert o["replicas"] * o["output_tokens_per_s"] >= rps * output * (1 - 1e-9)
        replanned = plan(o["scenario"])  # issue 9: the option's operating point, same serving model
        assert replanned.serving.itl_ms.p90 == pytest.approx(o["itl_ms"], rel=1e-9)
        assert replanned.cost.usd_per_million_output_tokens == pytest.approx(
            o["usd_per_million_output_tokens"], rel=1e-9
        )
    if not result["options"]:
        assert result["infeasible"]


@settings(max_examples=int(os.environ.get("RIDGELINE_E2E_EXAMPLES", "25")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["llama-3.1-8b", "llama-3.1-70b", "mixtral-8x7b"]), st.integers(1, 8000),
       st.integers(1, 2000), st.sampled_from([0.0, 0.5, 1.0, 2.0]), st.sampled_from([0.0, 0.5, 1.0, 2.0]),
       st.sampled_from([0.5, 1.0, 3.0]), st.floats(0.01, 0.98))
def test_e2e_percentiles_searched_once_equal_the_mixture(model, prompt, output, prompt_cv, output_cv,
                                                         arrival_cv, load):
    """Source: invariant: the E2E distribution's parts computed once (distributions.e2e_distribution, issue
    32's speed-up) are the mixture e2e_cdf states, summed in another order: the CDFs agree within 1e-12
    everywhere (a probability, rounding of ~10^4 terms of weight <= 1), and each percentile either within
    1e-9 of the reference's or, where the CDF is flat at that probability (point masses), on the same flat:
    the two searches can only part where the CDF sits within that rounding of the probability."""
    from planner.scenario.scenario import parse_scenario, resolve
    from planner.serving.distributions import (
        PERCENTILES,
        e2e_cdf,
        e2e_distribution,
        latency_percentiles,
        quantile,
    )
    from planner.serving.replica import load_point, replica_model
    from planner.serving.workload import replica_workload

    s = {"model": model, "gpu": "h100-sxm", "tp": 4, "weights": "fp8", "kv_cache": "fp8",
         "prompt_len": prompt, "output_len": output}
    d = resolve(parse_scenario(s))
    mix = parse_scenario({**s, "load": {"request_rate": 1.0, "prompt_len_cv": prompt_cv,
                                        "output_len_cv": output_cv, "arrival_cv": arrival_cv}}).load
    m = replica_model(d, replica_workload(d, prompt, output, 256, mix))
    p = load_point(m, float(m.capacity_per_ms()) * load)
    if not bool(p.stable):
        return
    fast = e2e_distribution(m, p)
    high = float(np.max(m.prefill_work_ms) + p.iteration_ms + p.wait_mean_ms + 1.0
                 + np.max(m.output_tokens) * p.iteration_ms)
    ts = np.linspace(0.0, 2.0 * high, 513)
    assert np.max(np.abs(fast(ts) - e2e_cdf(m, p, ts))) <= 1e-12
    if np.ptp(m.output_tokens) == 0:
        return  # a fixed output length: E2E is TTFT shifted, no E2E search
    probability = np.array(PERCENTILES) / 100.0
    reference = quantile(lambda t: e2e_cdf(m, p, t), probability, max(high, 1e-3))
    e2e = latency_percentiles(m, p)[2]
    for found, expected, prob in zip((e2e.p50, e2e.p90, e2e.p99), reference, probability, strict=True):
        if found == pytest.approx(expected, rel=1e-9, abs=1e-9):
            continue
        # else both lie on a flat of the CDF at the probability (a mixture of point masses: equal-mass length
        # grids make such flats), where every point is that percentile: the mixture stays within its
        # rounding of the probability all along
        lo, hi = sorted((found, expected))
        inside = np.linspace(lo, hi, 9)[1:-1]
        assert np.all(np.abs(e2e_cdf(m, p, inside) - prob) <= 1e-12), (found, expected, prob)
