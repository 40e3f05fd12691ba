"""Physical laws every plan obeys (issue 22), as hypothesis properties over random valid scenarios.

- No plan holds a negative quantity; a deployment that does not fit has a KV budget of 0 and says by how
  much it falls short in `memory.kv_shortfall_gb_per_gpu` (and the waterfall's `kv_shortfall`).
- Prefix caching never lowers capacity: cached tokens are work not done.
- The floor is a floor: `latency.itl_ms` is never below `latency.itl_ms_floor` (efficiency "ideal" included).
- More memory never gives less KV; more HBM bandwidth never makes a decode step or a prefill slower.
- A looser objective never gives less goodput.
- No plan serves beyond the roofline (issue 32): tokens/s and requests/s within the GPUs' compute and the
  passes their HBM bandwidth allows; short outputs and one-token prompts included.
"""

from __future__ import annotations

import math
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu_catalog import load_catalog
from planner import plan_dict
from planner.core.precision import bits_per_value
from planner.engines.base import ENGINES
from planner.model.presets import load_presets
from planner.scenario.scenario import model_position_limit
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


# --- The roofline as a hard floor (issue 32) ------------------------------------------------------------
# Bounds worked from outside the serving model: datasheet peaks and bandwidth (gpu_catalog), the model's
# shape (config.json: vocabulary, width) and its active parameter count. Each is a lower bound on the work
# (only matmul FLOPs, only weight bytes, the embedding and LM head left out), so the throughput it allows
# is an upper bound any plan must stay under; ROOF_REL covers floating-point rounding only.
ROOF_REL = 1e-6


@st.composite
def floor_scenarios(draw):
    """Any valid scenario, with the short outputs (1-8 tokens) and tiny prompts (1 token) the serving model
    once let skip their compute drawn often, at every kind of operating point."""
    s = draw(scenarios())
    prompt = draw(st.one_of(st.just(1), st.integers(1, 16), st.integers(1, 4096), st.just(s["prompt_len"])))
    output = draw(st.one_of(st.just(1), st.integers(1, 8), st.just(s["output_len"])))
    context = prompt + output + draw(st.integers(0, 4096))
    limit = model_position_limit(load_presets()[s["model"]])  # a longer context is refused (issue 31)
    if limit is not None and context > limit:
        prompt = min(prompt, limit - output)
        context = limit
    s.update(prompt_len=prompt, output_len=output, context_len=context,
             engine=draw(st.sampled_from(list(ENGINES))))
    shape = {"arrival_cv": draw(st.sampled_from([0.0, 1.0, 3.0])),
             "prefix_cache_hit": draw(st.sampled_from([0.0, 0.5, 0.95])),
             "prompt_len_cv": draw(st.sampled_from([0.0, 0.0, 1.0])),
             "output_len_cv": draw(st.sampled_from([0.0, 0.0, 1.0])),
             "max_num_batched_tokens": draw(st.sampled_from([8192, 8192, 512, 65536]))}
    point = draw(st.sampled_from(["default", "rate", "huge_rate", "concurrency", "goodput"]))
    if point == "rate":
        s["load"] = {**shape, "request_rate": draw(st.floats(0.01, 1e5))}
    elif point == "huge_rate":
        s["load"] = {**shape, "request_rate": 1e6}
    elif point == "concurrency":
        s["load"] = {**shape, "concurrency": draw(st.integers(1, 100_000))}
    elif point == "goodput":
        s["load"] = {**shape, "at_goodput": True,
                     "slo": {"ttft_ms": draw(st.floats(1.0, 1e5)), "itl_ms": draw(st.floats(1.0, 1e4))}}
    return s


def _roofline_bounds(s: dict, p: dict) -> tuple[float, float, float]:
    """(matmul FLOPs per token, a pass's weight bytes per GPU, GPUs per replica), all lower bounds: every
    token multiplies at least the active parameters less the embedding and LM head (2 FLOPs each), and a
    pass that carries any token reads that token's share of them on each of the tp GPUs."""
    spec = load_presets()[s["model"]]
    vocab_weights = 2.0 * spec.vocab_size * spec.d_model  # the embedding and the LM head, tied or not
    matmul_params = max(p["model"]["active_params"] - vocab_weights, 0.0)
    gpus = float(s.get("tp", 1))
    weight_bytes_per_gpu = matmul_params * bits_per_value(s.get("weights", "bf16")) / 8.0 / gpus
    return 2.0 * matmul_params, weight_bytes_per_gpu, gpus


def _assert_within_roofline(s: dict, p: dict, label: str, rate_per_s: float | None, out_tok_s: float | None,
                            prompt_tok_s: float | None) -> None:
    """`rate_per_s` requests/s served by one replica, with `out_tok_s` output and `prompt_tok_s` prompt
    tokens/s:
    - compute: (computed prompt tokens + decode tokens) x FLOPs per token <= tp x peak, the decode tokens
      being the output tokens less each request's first (its prefill makes it);
    - bandwidth: every pass reads the weights once, a pass carries at most max_running decodes and at most
      max_num_batched_tokens tokens, so passes/s >= both token rates over those, and <= HBM / weight bytes.
    """
    if rate_per_s is None or out_tok_s is None or prompt_tok_s is None or rate_per_s <= 0:
        return
    gpu = load_catalog()[s["gpu"]]
    flops_per_token, weight_bytes, gpus = _roofline_bounds(s, p)
    load = s.get("load") or {}
    hit = load.get("prefix_cache_hit", 0.0)
    # each request computes at least max(round(P (1 - hit)), 1) >= P (1 - hit) - 1/2 prompt tokens
    computed_tok_s = max(prompt_tok_s * (1.0 - hit) - 0.5 * rate_per_s, rate_per_s)
    decode_tok_s = max(out_tok_s - rate_per_s, 0.0)
    peak = gpu.tflops[p["roofline"]["compute_precision"]] * 1e12
    used = (computed_tok_s + decode_tok_s) * flops_per_token / (gpus * peak)
    assert used <= 1.0 + ROOF_REL, (label, "compute", used, s, rate_per_s)
    budget = load.get("max_num_batched_tokens", 8192)
    passes_per_s = max(decode_tok_s / p["serving"]["max_running"], (computed_tok_s + decode_tok_s) / budget)
    pass_ms = weight_bytes / (gpu.hbm_tb_s * 1e12) * 1e3
    assert passes_per_s * pass_ms <= 1000.0 * (1.0 + ROOF_REL), (label, "bandwidth", passes_per_s, s)


def check_roofline_law(s: dict) -> None:
    p = plan_dict(s)
    sv = p.get("serving")
    if not sv or sv.get("max_request_rate") is None:
        return  # does not fit: nothing is served
    mean_out = s["output_len"] if not (s.get("load") or {}).get("output_len_cv") else None
    rate = sv["request_rate"]
    out = sv["output_tokens_per_s"]
    prompt = (sv["total_tokens_per_s_per_gpu"] * float(s.get("tp", 1)) - out
              if sv.get("total_tokens_per_s_per_gpu") is not None else None)
    # what the replica serves: a closed loop's rate, or a stable open loop's (an unstable one only offers it)
    if sv["mode"] == "concurrency" or sv["stable"]:
        _assert_within_roofline(s, p, "served", rate, out, prompt)
    # its capacity and goodput, with the same lengths per request
    per_request_out, per_request_prompt = (out / rate, prompt / rate) if rate and prompt is not None else (
        None, None)
    for label in ("max_request_rate", "goodput_request_rate"):
        r = sv.get(label)
        if r and per_request_out is not None:
            _assert_within_roofline(s, p, label, r, r * per_request_out, r * per_request_prompt)
    # every decode step reads the weights once: ITL at least that read where there is a decode
    lat_floor_ms = _roofline_bounds(s, p)[1] / (load_catalog()[s["gpu"]].hbm_tb_s * 1e12) * 1e3
    if s["output_len"] > 1 and mean_out and sv["itl_ms"]["p50"] is not None:
        assert sv["itl_ms"]["p50"] >= lat_floor_ms * (1 - ROOF_REL), (s, sv["itl_ms"])
    if sv["ttft_ms"]["p50"] is not None:
        assert sv["ttft_ms"]["p50"] >= lat_floor_ms * (1 - ROOF_REL), (s, sv["ttft_ms"])


FLOOR_EXAMPLES = int(os.environ.get("RIDGELINE_FLOOR_EXAMPLES", str(max(EXAMPLES, 60))))


@settings(max_examples=FLOOR_EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(floor_scenarios())
def test_no_plan_serves_beyond_the_roofline(s):
    """Source: invariant: the roofline (issue 32): served tokens/s and requests/s, the capacity and the
    goodput never exceed what the GPUs' peak FLOP/s and their HBM bandwidth allow, each pass reading the
    weights once; worked from datasheet peaks and config.json shapes, not from the serving model.
    RIDGELINE_FLOOR_EXAMPLES=10000 runs the 10,000-scenario check (CI runs fewer)."""
    check_roofline_law(s)


@pytest.mark.parametrize(("prompt", "output"), [(1, 1), (128, 1), (128, 8), (1, 2), (1, 8)])
def test_the_reported_short_requests_stay_under_the_roofline(prompt, output):
    """Source: hand: issue 32's reproducers on Llama-3.1-8B bf16, one H100 SXM (989.4 TFLOP/s dense bf16,
    datasheet). A 1-token prompt with 1 output token is one token through 6.98e9 matmul weights a layer stack
    (32 x 218.1e6, config.json) plus the 4096 x 128,256 LM head: 2 x (6.979e9 + 0.525e9) = 15.0 GFLOP, so at
    most 989.4e12 / 15.0e9 = 65,900 requests/s, where the plan said 780,800; 128 tokens and 1 out are
    2 x (128 x 6.979e9 + 0.525e9) = 1.788 TFLOP, at most 553 requests/s (the plan said 8,877)."""
    s = {"model": "llama-3.1-8b", "gpu": "h100-sxm", "prompt_len": prompt, "output_len": output}
    check_roofline_law(s)
    check_roofline_law({**s, "load": {"request_rate": 1e6}})
    sv = plan_dict(s)["serving"]
    layer = 32 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336)
    flops = 2.0 * (prompt * layer + 4096 * 128256) + 2.0 * (output - 1) * (layer + 4096 * 128256)
    assert sv["request_rate"] <= 989.4e12 / flops * (1 + ROOF_REL)
    assert sv["max_request_rate"] <= 989.4e12 / flops * (1 + ROOF_REL)


@settings(max_examples=max(EXAMPLES // 3, 8), deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["llama-3.1-8b", "qwen3-32b", "mixtral-8x7b"]), st.sampled_from(["h100-sxm", "l40s"]),
       st.integers(1, 256), st.integers(1, 8), st.floats(1.0, 1e6))
def test_sizing_never_plans_a_replica_beyond_the_roofline(model, gpu, prompt, output, rps):
    """Source: invariant: the roofline (issue 32), on the Sizing path: each option's replica serves its
    share of the traffic within the compute and bandwidth bounds above, and re-planned alone (its scenario,
    the Plan and Compare path) within them too."""
    from planner.serving.sizing import size

    result = size({"model": model, "gpus": [gpu], "tp": [1, 2], "weights": ["fp8"], "kv_cache": ["fp8"],
                   "traffic": {"requests_per_s": rps, "prompt_len": prompt, "output_len": output},
                   "slo": {"ttft_ms": 1e5, "itl_ms": 1e4}, "max_options": 3})
    for o in result["options"]:
        scenario = o["scenario"]
        p = plan_dict(scenario)
        r = o["request_rate_per_replica"]
        _assert_within_roofline(scenario, p, "sizing", r, r * output, r * prompt)
        check_roofline_law(scenario)


def test_a_closed_loop_reports_the_running_cap_its_benchmark_ran():
    """Source: invariant: the roofline (issue 32), on the case the 10,000-scenario run found: Llama-3.1-8B
    fp32 on one H100, 1-token prompts and 7-token outputs, 149 clients. The memory holds 74 sequences at the
    full 2,081-token context, but vLLM allocates KV as tokens are written, so its benchmark runs all 149 at
    once; the plan reported the served rate of 149 running with a cap of 74, which put its passes 0.6% past
    the bandwidth roofline. The plan now reports the cap its benchmark ran, and the law holds."""
    s = {"model": "llama-3.1-8b", "gpu": "h100-sxm", "tp": 1, "weights": "fp32", "kv_cache": "fp32",
         "prompt_len": 1, "output_len": 7, "context_len": 2081, "engine": "vllm",
         "load": {"max_num_batched_tokens": 8192, "concurrency": 149}}
    check_roofline_law(s)
    sv = plan_dict(s)["serving"]
    assert plan_dict(s)["memory"]["max_batch"] < sv["max_running"] == 149 and sv["saturated"] is False
