"""Fuzzing the command line in-process: any input gives a plan whose every figure is finite, or one line
`error: <field>: <reason>` (at most 300 characters) with exit 2. Never a traceback, never exit 70.

Each property starts from a valid input (a random preset, GPU, HF config, sizing request or bench file)
and breaks it in one to three places with values chosen to hurt: huge and tiny numbers, wrong types,
strings with newlines and control characters, unknown keys, nested junk. The CLI's `main()` runs in
this process (no subprocess), so the ~10,000 examples take well under a minute on two cores.
"""

from __future__ import annotations

import io
import json
import math
import os
import random
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu_catalog import load_catalog
from planner.contract.cli import main
from planner.hardware.parallelism import valid_tp
from planner.model.hf_import import SUPPORTED_MODEL_TYPES
from planner.model.presets import load_presets

GPUS = list(load_catalog())
MODELS = list(load_presets())
PRECISIONS = ["fp32", "fp16", "bf16", "fp8", "int8", "int4", "fp4"]
# Examples per property; the sum is what CI runs (>= 10,000 by issue 13).
# RIDGELINE_FUZZ_SCALE=0.1 runs a tenth of them while working on the code.
EXAMPLES = {"plan": 4000, "plan_custom": 2000, "hf": 2400, "size": 1300, "calibrate": 300,
            "size_extremes": 600}
SCALE = float(os.environ.get("RIDGELINE_FUZZ_SCALE", "1"))


def fuzz_settings(name: str):
    return settings(
        max_examples=max(1, round(EXAMPLES[name] * SCALE)), deadline=None, database=None, print_blob=True,
        suppress_health_check=list(HealthCheck),
    )


# ---------------------------------------------------------------------------------------------------
# Values that hurt

EDGE_NUMBERS = [
    0, -1, 1, 2, 3, 5e-324, 1e-300, 1e-9, 0.5, 1.5, 1e9, 2**31, 2**53 + 1, 2**63, 1e300,
    1.7976931348623157e308, -1e9, -5e-324, 10**400, -(10**400), 10**4000, float("nan"), float("inf"),
    float("-inf"),
]
EDGE_TEXT = ["", " ", "\n", "a\nb", "\r\n", "\x00", "\u2028", "\x1b[31mred", "<img src=x onerror=alert(1)>",
             "[link](http://evil.example)", "1", "false", "true", "null", "NaN", "h100-sxm", "llama-3.1-8b",
             "x" * 5000, "é" * 300, "\ud7ff", "🙂"]



def junk(rng: random.Random, depth: int = 0) -> Any:
    """One hurtful JSON value: an edge number, a random number of any size, nasty text, or nested junk."""
    kind = rng.randrange(10 if depth < 3 else 7)
    if kind <= 1:
        return rng.choice(EDGE_NUMBERS)
    if kind == 2:
        return rng.choice(
            [
                rng.randint(-(10**6), 10**6), rng.randint(-(2**70), 2**70), rng.uniform(-1e6, 1e6),
                10.0 ** rng.uniform(-320, 308), -(10.0 ** rng.uniform(-320, 308)),
            ]
        )
    if kind == 3:
        return rng.choice(EDGE_TEXT)
    if kind == 4:
        alphabet = "ab\n\r\t\x00\x7f\u2028\u0085é🙂<>[]()*_`|#!"
        return "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 30)))
    if kind == 5:
        return rng.choice([None, True, False])
    if kind == 6:
        return rng.choice([[], {}, "", 0])
    if kind in (7, 8):
        return [junk(rng, depth + 1) for _ in range(rng.randrange(0, 4))]
    return {
        rng.choice(EDGE_TEXT[:12] + ["bogus", "name"]): junk(rng, depth + 1)
        for _ in range(rng.randrange(0, 4))
    }


def _paths(obj: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix] if prefix else []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.extend(_paths(v, (*prefix, k)))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out.extend(_paths(v, (*prefix, i)))
    return out


def nudged(rng: random.Random, value: Any) -> Any:
    """A number of the same type at another scale: valid-looking input that may leave a physical range
    or push a formula to overflow (the cases that used to give null figures)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return junk(rng)
    if isinstance(value, int):
        return rng.choice([1, 2, value * 2, max(1, value // 2), 10 ** rng.randint(0, 12), value + 1])
    return rng.choice([value * 10.0 ** rng.uniform(-8, 8), value * rng.uniform(0.5, 2), 1e-3, 1e-6, 1.0])


def mutated(rng: random.Random, base: dict[str, Any], extra_keys: list[str] = ()) -> dict[str, Any]:
    """`base` left valid (one time in five) or broken in one to three places: a number nudged to another
    scale, a value replaced by junk, a key dropped or a key added (a known optional field from
    `extra_keys` or an unknown one)."""
    obj = json.loads(json.dumps(base))
    for _ in range(0 if rng.random() < 0.2 else rng.randint(1, 3)):
        paths = _paths(obj)
        action = rng.choice(["nudge", "nudge", "replace", "replace", "drop", "add"])
        if action == "add" or not paths:
            parents = [()] + [p for p in paths if isinstance(_get(obj, p), dict)]
            parent = _get(obj, rng.choice(parents))
            key = rng.choice(
                [*extra_keys, "bogus", "\n", "x" * 500, "tp\r"] if extra_keys else ["bogus", "\n"]
            )
            parent[key] = junk(rng)
            continue
        path = rng.choice(paths)
        parent = _get(obj, path[:-1])
        if action == "drop" and isinstance(parent, dict):
            del parent[path[-1]]
        elif action == "nudge":
            parent[path[-1]] = nudged(rng, parent[path[-1]])
        else:
            parent[path[-1]] = junk(rng)
    return obj


def _get(obj: Any, path: tuple) -> Any:
    for p in path:
        obj = obj[p]
    return obj


def _dumps(obj: Any) -> str:
    """JSON text of a fuzzed input: NaN/Infinity become the literals the parser must refuse, and integers
    past Python's 4,300-digit limit are written out (the reader must refuse those too)."""
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        return json.dumps(obj)
    finally:
        sys.set_int_max_str_digits(limit)


# ---------------------------------------------------------------------------------------------------
# The check every example passes

def _refuse_constant(name):
    raise AssertionError(f"{name} in the output")


def _all_finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_all_finite(v) for v in value.values())
    if isinstance(value, list):
        return all(_all_finite(v) for v in value)
    return True


# The contract's figures: numbers in every plan (null only where the contract allows it). A null here
# would be an infinity that the JSON writer turned into null: a range we do not check.
CONTRACT_FIGURES = {
    "memory": [
        "weights_gb_per_gpu", "kv_bytes_per_token", "kv_bytes_per_token_per_gpu", "kv_budget_gb_per_gpu",
        "max_batch",
    ],
    "roofline": ["ridge_flop_per_byte", "decode_ai"],
    "latency": ["prefill_ms", "ttft_ms", "itl_ms", "itl_ms_bound"],
    "throughput": ["output_tokens_per_s", "output_tokens_per_s_bound", "tokens_per_s_per_user"],
}


def _check_plan_figures(result: dict) -> None:
    for section, figures in CONTRACT_FIGURES.items():
        for figure in figures:
            value = result[section][figure]
            assert isinstance(value, (int, float)) and not isinstance(value, bool), (section, figure, value)
    # no price, or no sustainable operating point (does not fit, at or above capacity): the contract's null
    if result["cost"]["usd_per_gpu_hour"] is not None and result["serving"]["stable"]:
        assert isinstance(result["cost"]["usd_per_million_output_tokens"], float)


def check_cli(argv: list[str], stdin: str = "") -> dict | None:
    out, err = io.StringIO(), io.StringIO()
    rc = main(argv, stdin=io.StringIO(stdin), stdout=out, stderr=err)
    if rc == 0:
        assert err.getvalue() == ""
        result = json.loads(out.getvalue(), parse_constant=_refuse_constant)
        assert _all_finite(result)
        if argv[0] == "plan":
            _check_plan_figures(result)
        return result
    text = err.getvalue()
    assert rc == 2, text  # 70 would be a bug of ours (an internal error)
    assert out.getvalue() == ""
    assert text.endswith("\n") and text.count("\n") == 1, repr(text[:400])
    assert text.startswith("error: ") and len(text) <= 301, repr(text[:400])
    assert text[:-1].isprintable(), repr(text)
    assert "not a finite number" not in text, text  # the CLI's last guard: a range we missed
    return None


# ---------------------------------------------------------------------------------------------------
# Inputs

def scenario(rng: random.Random) -> dict[str, Any]:
    """A valid scenario on a preset and a catalog GPU (some optional fields set)."""
    model, gpu = rng.choice(MODELS), rng.choice(GPUS)
    weights = rng.choice(
        [w for w in PRECISIONS if w not in ("fp8", "fp4") or w in load_catalog()[gpu].tflops]
    )
    s: dict[str, Any] = {"model": model, "gpu": gpu,
                         "tp": rng.choice([t for t in (1, 2, 4, 8) if valid_tp(load_presets()[model], t)]),
                         "weights": weights, "kv_cache": rng.choice(PRECISIONS[:6]),
                         "prompt_len": rng.randint(1, 32_000), "output_len": rng.randint(1, 4_000)}
    if rng.random() < 0.5:
        s["batch"] = rng.randint(1, 1024)
    if rng.random() < 0.3:
        s["memory"] = {"utilization": rng.uniform(0.05, 1.0), "reserve_gb": rng.uniform(0, 20)}
    if rng.random() < 0.3:
        s["efficiency"] = rng.choice(["ideal", "default", {"bandwidth": 0.5, "compute": 0.6, "link": 0.5}])
    if rng.random() < 0.3:
        s["usd_per_gpu_hour"] = rng.uniform(0.01, 50)
    if rng.random() < 0.3:
        s["speculative"] = {
            "draft_tokens": rng.randint(1, 8), "acceptance": rng.random(), "draft_params": 1e9,
        }
    return s


CUSTOM_GPU = {"name": "custom", "memory_gb": 80.0, "hbm_tb_s": 3.35, "tflops": {"bf16": 989.4, "fp8": 1978.9},
              "interconnect_gb_s": 450.0, "usd_per_hour": 2.0, "tdp_w": 700.0}
CUSTOM_MODEL = {
    "name": "custom", "n_layers": 32, "d_model": 4096, "n_heads": 32, "n_kv_heads": 8, "d_ff": 14336,
    "vocab_size": 128256, "head_dim": 128, "n_params": 8e9, "sliding_window": 4096,
    "sliding_window_layers": 16,
    "moe": {"n_experts": 8, "top_k": 2, "d_ff_expert": 14336, "n_shared_experts": 1, "first_dense_layers": 1},
    "mla": {
        "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
        "q_lora_rank": 1536,
    },
}

HF_BASE = {"num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
           "intermediate_size": 14336, "vocab_size": 128256, "head_dim": 128, "tie_word_embeddings": False,
           "sliding_window": 4096, "use_sliding_window": True, "max_window_layers": 28,
           "num_local_experts": 8, "num_experts": 64, "num_experts_per_tok": 2, "moe_intermediate_size": 1408,
           "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "kv_lora_rank": 512,
           "q_lora_rank": 1536, "n_routed_experts": 64, "n_shared_experts": 1, "first_k_dense_replace": 1,
           "_name_or_path": "fuzz/model"}


# Hypothesis drives a seeded generator: one draw per example keeps ~10,000 examples fast (hundreds of
# fine-grained draws per example cost more than the planner). A failure prints the seed to replay it.
seeds = st.randoms(use_true_random=True)


@fuzz_settings("plan")
@given(seeds)
def test_plan_any_broken_scenario(rng):
    """Source: invariant: a preset scenario broken in 1-3 places plans to finite figures or fails on one
    line."""
    s = mutated(
        rng, scenario(rng), ["calibration", "load", "pp", "ep", "engine", "context_len", "max_model_len"]
    )
    check_cli(["plan", "-"], _dumps(s))


@fuzz_settings("plan_custom")
@given(seeds)
def test_plan_any_broken_custom_model_and_gpu(rng):
    """Source: invariant: custom model and GPU objects broken in 1-3 places (MLA, MoE, windows, peaks)."""
    model = dict(CUSTOM_MODEL)
    for optional in ("mla", "moe", "sliding_window", "n_params"):
        if rng.random() < 0.5:
            model.pop(optional)
    if "sliding_window" not in model:
        model.pop("sliding_window_layers")
    s = {"model": model, "gpu": dict(CUSTOM_GPU), "tp": rng.choice([1, 2, 8]),
         "prompt_len": rng.randint(1, 8000), "output_len": rng.randint(1, 2000)}
    check_cli(["plan", "-"], _dumps(mutated(rng, s)))


@fuzz_settings("hf")
@given(seeds)
def test_hf_import_any_broken_config(rng):
    """Source: invariant: an HF config.json of each supported family, broken in 1-3 places, through `plan`."""
    config = {"model_type": rng.choice(SUPPORTED_MODEL_TYPES), **HF_BASE}
    broken = mutated(rng, config, ["model_type", "tie_word_embeddings", "max_window_layers"])
    check_cli(["plan", "-"], _dumps({"model": {"hf_config": broken}, "gpu": "h200", "tp": 8, "weights": "fp8",
                                     "prompt_len": 1000, "output_len": 100}))


@fuzz_settings("size")
@given(seeds)
def test_size_any_broken_request(rng):
    """Source: invariant: a small sizing request (rent or own) broken in 1-3 places."""
    req: dict[str, Any] = {
        "model": rng.choice(["llama-3.1-8b", "qwen3-8b", "mixtral-8x7b", "deepseek-v3"]),
        "traffic": {"requests_per_s": rng.uniform(0.01, 100), "prompt_len": rng.randint(1, 8000),
                    "output_len": rng.randint(1, 2000)},
        "slo": {"ttft_ms": rng.uniform(10, 10_000), "itl_ms": rng.uniform(5, 200)},
        "gpus": [rng.choice(GPUS)], "tp": [rng.choice([1, 2, 8])], "weights": ["fp8"], "kv_cache": ["fp8"],
        "max_options": 3, "usd_per_gpu_hour": {"h100-sxm": 2.5}}
    if rng.random() < 0.5:
        req["cost_mode"] = "own"
        req["ownership"] = {"capex_usd_per_gpu": {"h100-sxm": 25000.0}, "amortization_years": 4.0,
                            "power_usd_per_kwh": 0.1, "pue": 1.3, "average_power_fraction": 0.7,
                            "hosting_usd_per_gpu_month": 150.0}
    check_cli(["size", "-"], _dumps(mutated(rng, req, ["cost_mode", "ownership", "efficiency", "memory"])))


BENCH = {"backend": "vllm", "max_concurrency": 1, "completed": 100, "total_input_tokens": 23300,
         "total_output_tokens": 22100, "median_ttft_ms": 59.01, "median_tpot_ms": 7.28}


@fuzz_settings("calibrate")
@given(rng=seeds)
def test_calibrate_any_broken_bench_or_scenario(rng, tmp_path_factory):
    """Source: invariant: a vllm bench result and its scenario, either broken in 1-3 places."""
    scenario = {"model": rng.choice(["qwen3-8b", "llama-3.1-8b"]), "gpu": "h100-sxm",
                "prompt_len": 233, "output_len": 221, "batch": 1}
    bench: dict[str, Any] = dict(BENCH)
    if rng.random() < 0.5:
        bench = mutated(rng, bench, ["median_tpot_ms", "median_ttft_ms", "max_concurrency"])
    else:
        scenario = mutated(rng, scenario)
    # the bench comes on stdin, the scenario from a file (both paths of the reader)
    path = tmp_path_factory.getbasetemp() / "fuzz_scenario.json"
    path.write_text(_dumps(scenario), encoding="utf-8")
    check_cli(["calibrate", "-", str(path)], _dumps(bench))


# ---------------------------------------------------------------------------------------------------
# Sizing at the ends of every documented range (issue 32), and the crafted inputs of issue 32

SIZE_RANGES = {"requests_per_s": (1e-6, 1e7), "prompt_len": (1, 10_000_000), "output_len": (1, 10_000_000),
               "ttft_ms": (1e-3, 1e7), "itl_ms": (1e-3, 1e7)}
UNPRICED_GPU = {"name": "no price", "memory_gb": 80.0, "hbm_tb_s": 3.35,
                "tflops": {"bf16": 989.4, "fp8": 1978.9}}
PARETO_CRASH = {"model": "llama-3.1-8b",
                "traffic": {"requests_per_s": 1e7, "prompt_len": 1, "output_len": 1_000_000},
                "slo": {"ttft_ms": 1000, "itl_ms": 100}, "gpus": ["h100-sxm"]}


def _extreme(rng: random.Random, field: str) -> float:
    """The range's ends, a value next to them, or a log-uniform value inside (ints stay ints)."""
    lo, hi = SIZE_RANGES[field]
    value = rng.choice([lo, hi, lo * 1.5, hi / 1.5, math.exp(rng.uniform(math.log(lo), math.log(hi)))])
    return max(lo, min(hi, round(value))) if isinstance(lo, int) else value


@fuzz_settings("size_extremes")
@given(seeds)
def test_size_at_the_ends_of_every_range(rng):
    """Source: invariant: rates up to the cap, lengths of 1 and of the maximum, objectives at both ends, on
    catalog GPUs and an unpriced custom one, aggregated or disaggregated: options or one line, never exit 70
    (issue 32: 1e7 req/s with 1,000,000 output tokens crashed the Pareto mask)."""
    t = {k: _extreme(rng, k) for k in ("requests_per_s", "prompt_len", "output_len")}
    req: dict[str, Any] = {
        "model": rng.choice(["llama-3.1-8b", "mixtral-8x7b", "llama-3.1-70b"]), "traffic": t,
        "slo": {"ttft_ms": _extreme(rng, "ttft_ms"), "itl_ms": _extreme(rng, "itl_ms"),
                "percentile": rng.choice([50, 90, 99])},
        "gpus": rng.sample(GPUS, rng.randint(1, 2)) + ([UNPRICED_GPU] if rng.random() < 0.3 else []),
        "tp": rng.sample([1, 2, 4, 8], rng.randint(1, 2)), "weights": [rng.choice(["fp8", "bf16", "int4"])],
        "kv_cache": ["fp8"], "max_options": rng.choice([1, 5, 1000]),
    }
    if rng.random() < 0.3:
        req["disaggregation"] = True
    check_cli(["size", "-"], _dumps(req))


def test_the_crash_input_of_issue_32_sizes():
    """Source: contract: docs/CONTRACT_EXTENSIONS.md, "Bounded sizing requests" and issue 31's context limit:
    issue 32's request (1e7 req/s, 1,000,000 output tokens; before: TypeError in pareto_mask, exit 70) is
    answered without a traceback, every family refused with Llama-3.1-8B's 131,072-token limit named; the same
    request at 131,000 output tokens (within the limit, at billions of replicas) gives options, each with its
    latency figures."""
    result = check_cli(["size", "-"], json.dumps(PARETO_CRASH))
    assert result is not None and not result["options"] and result["infeasible"]
    assert all("131,072" in str(row) for row in result["infeasible"])
    within = {**PARETO_CRASH, "traffic": {**PARETO_CRASH["traffic"], "output_len": 131_000}}
    result = check_cli(["size", "-"], json.dumps(within))
    assert result is not None and result["options"]
    assert all(isinstance(o["itl_ms"], float) and isinstance(o["ttft_ms"], float) for o in result["options"])


def hostile_request(max_options: int) -> dict[str, Any]:
    """Issue 32's 22 KB link: 100 custom GPUs x tp 1-8 x 5 weight x 5 KV precisions = 20,000 families (the
    cap)."""
    gpus = [{**UNPRICED_GPU, "name": f"gpu {i}", "memory_gb": 80.0 + i / 10, "usd_per_hour": 2.0 + i / 100}
            for i in range(100)]
    five = ["fp16", "bf16", "fp8", "int8", "int4"]
    traffic = {"requests_per_s": 10.0, "prompt_len": 2000, "output_len": 400}
    return {"model": "llama-3.1-8b", "traffic": traffic, "slo": {"ttft_ms": 2000.0, "itl_ms": 50.0},
            "gpus": gpus, "tp": [1, 2, 3, 4, 5, 6, 7, 8],
            "weights": five, "kv_cache": five, "max_options": max_options}


def test_the_22kb_link_of_issue_32_is_refused_for_its_output():
    """Source: contract: docs/CONTRACT_EXTENSIONS.md, "Bounded sizing requests": max_options 100,000 wrote
    55 MB of JSON; over the 1,000-option limit it is one line naming the field and the limit."""
    out, err = io.StringIO(), io.StringIO()
    text = json.dumps(hostile_request(100_000))
    assert main(["size", "-"], stdin=io.StringIO(text), stdout=out, stderr=err) == 2
    assert err.getvalue().startswith(
        "error: max_options: 100,000 options written out is over the limit of 1,000"
    )


@pytest.mark.parametrize(
    "text", ['{"model": "a", "model": "b"}', '{"traffic": {"prompt_len": 1, "prompt_len": 2}}']
)
def test_a_duplicate_key_is_named(text):
    """Source: contract: docs/CONTRACT_EXTENSIONS.md, "Command line and input ranges" (issue 32)."""
    for command in ("size", "plan"):
        out, err = io.StringIO(), io.StringIO()
        assert main([command, "-"], stdin=io.StringIO(text), stdout=out, stderr=err) == 2
        line = err.getvalue()
        assert "duplicate key" in line and ("'model'" in line or "'prompt_len'" in line)


def _refused(command: str, request: dict[str, Any]) -> str:
    out, err = io.StringIO(), io.StringIO()
    assert main([command, "-"], stdin=io.StringIO(json.dumps(request)), stdout=out, stderr=err) == 2
    assert out.getvalue() == "" and err.getvalue().count("\n") == 1
    return err.getvalue()


def test_the_other_sizing_commands_are_bounded_too():
    """Source: contract: docs/CONTRACT_EXTENSIONS.md, "Bounded sizing requests" (issue 32): size-power and
    mixed-fleet plan every option of every family (4,000 families at most, 20 custom GPUs x 8 x 5 x 5 =
    4,000 per search); context-tiers runs one sizing search per context (20,000 in all)."""
    sizing = hostile_request(1000)
    sizing.pop("max_options")
    power = {"objective": "min_mw", "cost_tier": "neocloud", "power_source": "catalog"}
    line = _refused("size-power", {"sizing": sizing, "power": power})
    assert "needs 20,000 configuration-family plans" in line and "over the limit of 4,000" in line
    twenty = {**sizing, "gpus": sizing["gpus"][:20]}
    mixed = {k: twenty[k] for k in ("model", "slo", "gpus", "tp", "weights", "kv_cache")}
    bins = [{"prompt_len": p, "output_len": p // 10, "weight": 1} for p in (100, 900)]
    mixed.update(requests_per_s=10, lengths={"histogram": bins})
    assert "needs 8,000 configuration-family plans" in _refused("mixed-fleet", mixed)
    tiers = {"sizing": twenty, "context_lens": [4096, 8192, 16384, 32768, 65536, 131072]}
    assert "needs 24,000 configuration-family plans" in _refused("context-tiers", tiers)
