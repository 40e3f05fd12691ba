"""Engine and benchmark commands from a plan (planner/contract/commands.py), checked against each engine's
documented command line (data/reference/engine_cli_flags.json: names, defaults and accepted values
collected from the engines' docs and argument parsers, sources in the file)."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.contract.commands import (
    ENGINES,
    command_set,
    expected_sheet,
    k8s_manifest,
    launch_script,
    manifest_object,
    render,
)
from planner.contract.planning import plan_dict
from planner.core.errors import ScenarioError

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = json.loads((ROOT / "data" / "reference" / "engine_cli_flags.json").read_text())
# the program words before the first flag, per engine (the rest are positional arguments)
PROGRAM = {"vllm": ("vllm serve", 3), "sglang": ("sglang launch_server", 3), "trt-llm": ("trtllm-serve", 2)}


def flags_of(argv: tuple[str, ...], n_program: int) -> dict[str, list[str]]:
    """Flag -> its values (tokens up to the next flag), after the program words and positionals."""
    out: dict[str, list[str]] = {}
    current = None
    for token in argv[n_program:]:
        if token.startswith("--"):
            current = token
            assert current not in out, f"{current} given twice"
            out[current] = []
        else:
            assert current is not None, f"positional {token!r} after the program words"
            out[current].append(token)
    return out


def check_against_reference(flags: dict[str, list[str]], section: str) -> None:
    documented = REFERENCE[section]["flags"]
    for flag, values in flags.items():
        assert flag in documented, f"{section}: {flag} is not a documented flag"
        spec = documented[flag]
        if spec.get("type") == "bool":
            assert values == [], f"{flag} is a switch, got {values}"
            continue
        assert values, f"{flag} needs a value"
        if "choices" in spec:
            for v in values:
                assert v in [str(c) for c in spec["choices"]], f"{flag} {v} not in {spec['choices']}"
        if spec.get("type") == "int":
            assert int(values[0]) >= 0
        if spec.get("type") == "float":
            value = float(values[0])
            assert math.isfinite(value) and value > 0
            if spec.get("range") == "(0, 1]":
                assert 0 < value <= 1
            if spec.get("range") == "[0, 1)":
                assert 0 <= value < 1
        if spec.get("type") == "json":
            assert set(json.loads(values[0])) <= set(spec["keys"])
        if "allowed" in spec and section == "vllm bench serve" and flag == "--percentile-metrics":
            assert set(values[0].split(",")) <= set(spec["allowed"])
        if flag == "--goodput":
            assert all(v.split(":")[0] in spec["allowed"] and float(v.split(":")[1]) > 0 for v in values)


SECTION = {"vllm": "vllm serve", "sglang": "sglang launch_server", "trt-llm": "trtllm-serve"}


def launch_flags(cs) -> dict[str, list[str]]:
    return flags_of(cs.launch.argv, PROGRAM[cs.engine][1])


def bench_flags(cs) -> dict[str, list[str]]:
    assert cs.bench[:3] == ("vllm", "bench", "serve")
    return flags_of(cs.bench, 3)


# --- every flag documented, for many scenarios ---------------------------------------------------------

loads = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {"request_rate": st.floats(0.05, 50)},
        optional={
            "arrival_cv": st.floats(0.1, 4), "prompt_len_cv": st.floats(0, 1),
            "output_len_cv": st.floats(0, 1), "prefix_cache_hit": st.floats(0, 0.9),
            "max_num_batched_tokens": st.integers(256, 65536),
            "slo": st.fixed_dictionaries(
                {}, optional={"ttft_ms": st.floats(10, 5000), "itl_ms": st.floats(5, 500)}
            ),
        },
    ),
    st.fixed_dictionaries(
        {"concurrency": st.integers(1, 64)},
        optional={"prefix_cache_hit": st.floats(0, 0.9), "max_num_batched_tokens": st.integers(256, 65536)},
    ),
)
scenarios = st.fixed_dictionaries(
    {
        "model": st.sampled_from(["llama-3.1-8b", "qwen3-8b", "mixtral-8x7b", "qwen3-235b-a22b"]),
        "gpu": st.sampled_from(["h100-sxm", "h200"]), "tp": st.sampled_from([1, 2, 4, 8]),
    },
    optional={
        "pp": st.sampled_from([1, 2]), "ep": st.sampled_from([1, 2, 8]),
        "weights": st.sampled_from(["bf16", "fp16", "fp8", "int4"]),
        "kv_cache": st.sampled_from(["bf16", "fp8", "int8"]), "block_size": st.sampled_from([8, 16, 32, 48]),
        "enforce_eager": st.booleans(),
        "memory": st.fixed_dictionaries({"utilization": st.floats(0.5, 0.95)}),
        "prompt_len": st.integers(16, 4000), "output_len": st.integers(1, 2000), "load": loads,
        "speculative": st.fixed_dictionaries(
            {
                "draft_tokens": st.integers(1, 8), "acceptance": st.floats(0, 1),
                "draft_params": st.sampled_from([5e8, 1e9]),
            }
        ),
        "engine": st.sampled_from(["graph", "vllm", "sglang", "trt-llm"]),
    },
).map(lambda d: {k: v for k, v in d.items() if v is not None})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios, st.sampled_from(ENGINES))
def test_every_emitted_flag_is_documented_with_a_documented_value(scenario, engine):
    """Source: docs: each engine's documented CLI (data/reference/engine_cli_flags.json)."""
    try:
        cs = command_set(scenario, engine)
    except ScenarioError:
        return  # a scenario the planner itself refuses (e.g. fp8 where the GPU has no fp8) has no commands
    check_against_reference(launch_flags(cs), SECTION[engine])
    check_against_reference(bench_flags(cs), "vllm bench serve")
    for line in cs.launch.files.get("extra_llm_api_options.yaml", "").splitlines()[1:]:
        key = "kv_cache_config." + line.strip().split(":")[0]
        assert key in REFERENCE["trtllm-serve"]["extra_llm_api_options_keys"], key


# --- each flag's value is the plan's -------------------------------------------------------------------


def test_vllm_flags_carry_the_scenario_and_plan(sample_scenario):
    """Llama-3.1-70B, TP 4, fp8 weights and KV: vLLM's online fp8 quantization and fp8 KV cache; the
    context limit is the planned context_len; max-num-seqs is the plan's batch.
    Source: docs: vLLM's `vllm serve` flags and defaults.
    """
    cs = command_set(sample_scenario, "vllm")
    f = launch_flags(cs)
    assert cs.launch.argv[:3] == ("vllm", "serve", "meta-llama/Llama-3.1-70B")
    assert f["--tensor-parallel-size"] == ["4"] and "--pipeline-parallel-size" not in f
    assert f["--quantization"] == ["fp8"] and f["--kv-cache-dtype"] == ["fp8"]
    assert f["--max-model-len"] == ["8192"]
    assert f["--gpu-memory-utilization"] == ["0.9"]  # the scenario default, vLLM's documented default too
    assert f["--max-num-seqs"] == [str(plan_dict(sample_scenario)["latency"]["batch"])]
    assert f["--max-num-batched-tokens"] == ["8192"] and f["--block-size"] == ["16"]
    assert (
        "--enforce-eager" not in f and "--enable-prefix-caching" not in f and "--speculative-config" not in f
    )


def test_engine_specific_forms(sample_scenario):
    """fp8 KV is `fp8` in vLLM and TensorRT-LLM, `fp8_e4m3` in SGLang (docs: --kv-cache-dtype fp8_e4m3).
    Source: docs: SGLang and TensorRT-LLM flag spellings.
    """
    s = {**sample_scenario, "pp": 2, "enforce_eager": True, "block_size": 32}
    sg = launch_flags(command_set(s, "sglang"))
    assert sg["--kv-cache-dtype"] == ["fp8_e4m3"] and sg["--tp-size"] == ["4"] and sg["--pp-size"] == ["2"]
    assert (
        sg["--page-size"] == ["32"]
        and sg["--disable-cuda-graph"] == []
        and sg["--context-length"] == ["8192"]
    )
    trt = command_set(s, "trt-llm")
    tf = launch_flags(trt)
    assert tf["--tp_size"] == ["4"] and tf["--pp_size"] == ["2"] and tf["--max_seq_len"] == ["8192"]
    assert 'dtype: "fp8"' in trt.launch.files["extra_llm_api_options.yaml"]
    assert "tokens_per_block: 32" in trt.launch.files["extra_llm_api_options.yaml"]
    vf = launch_flags(command_set(s, "vllm"))
    assert (
        vf["--pipeline-parallel-size"] == ["2"]
        and vf["--enforce-eager"] == []
        and vf["--block-size"] == ["32"]
    )
    assert command_set(s, "vllm").gpus_per_replica == 8  # tp x pp


def test_trtllm_kv_fraction_is_of_the_memory_left_after_weights():
    """TensorRT-LLM sizes the KV cache as a fraction of the memory free after weights: the planned KV budget
    over (GPU memory - weights) for Llama-3.1-8B bf16 on one H100 (the catalog's 85.52 GB).
    Source: docs: TensorRT-LLM's free_gpu_memory_fraction is of the memory left after weights.
    """
    from gpu_catalog import load_catalog

    s = {"model": "llama-3.1-8b", "gpu": "h100-sxm"}
    mem = plan_dict(s)["memory"]
    want = mem["kv_budget_gb_per_gpu"] / (load_catalog()["h100-sxm"].memory_gb - mem["weights_gb_per_gpu"])
    got = float(launch_flags(command_set(s, "trt-llm"))["--kv_cache_free_gpu_memory_fraction"][0])
    assert got == pytest.approx(want, abs=0.006)
    assert 0.5 < got < 1


def test_moe_expert_parallel_and_dense_models():
    """Source: docs: each engine's expert-parallel flag."""
    moe = {"model": "mixtral-8x7b", "gpu": "h100-sxm", "tp": 2, "ep": 2}
    assert launch_flags(command_set(moe, "vllm"))["--enable-expert-parallel"] == []
    assert launch_flags(command_set(moe, "sglang"))["--ep-size"] == ["2"]
    assert launch_flags(command_set(moe, "trt-llm"))["--ep_size"] == ["2"]
    dense = command_set({"model": "llama-3.1-8b", "gpu": "h100-sxm", "tp": 2, "ep": 2}, "vllm")
    assert "--enable-expert-parallel" not in launch_flags(dense)
    assert any("no experts" in n for n in dense.launch.notes)


def test_quantized_checkpoints_and_unsupported_kv_are_notes_not_flags():
    """A setting vLLM's CLI does not accept becomes a note, never a flag it would refuse: vLLM's documented
    --kv-cache-dtype choices are auto, bfloat16 and the fp8 forms (no int8), its --block-size choices
    1, 8, 16, 32, 64, 128, 256 (no 48), and int4 is no --quantization method (it names the checkpoint
    format instead: awq, gptq, ...).
    Source: docs: vLLM `vllm serve` reference, https://docs.vllm.ai/en/v0.11.2/cli/serve/ (CacheDType,
    BlockSize, QuantizationMethods)."""
    kv_choices = ["auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla"]
    block_choices = ["1", "8", "16", "32", "64", "128", "256"]
    cs = command_set(
        {"model": "llama-3.1-8b", "gpu": "h100-sxm", "weights": "int4", "kv_cache": "int8"}, "vllm"
    )
    f = launch_flags(cs)
    assert "--quantization" not in f and "--kv-cache-dtype" not in f
    assert any("int4" in n for n in cs.launch.notes) and any("int8 KV" in n for n in cs.launch.notes)
    odd = command_set({"model": "llama-3.1-8b", "gpu": "h100-sxm", "block_size": 48}, "vllm")
    assert "--block-size" not in launch_flags(odd) and any("block_size 48" in n for n in odd.launch.notes)
    # the supported forms do become flags, with a documented value
    fine = launch_flags(
        command_set({"model": "llama-3.1-8b", "gpu": "h100-sxm", "kv_cache": "fp8", "block_size": 32}, "vllm")
    )
    assert fine["--kv-cache-dtype"][0] in kv_choices and fine["--block-size"][0] in block_choices


def test_speculative_config_is_vllm_json():
    """Source: docs: vLLM's --speculative-config JSON."""
    s = {"model": "llama-3.1-70b", "gpu": "h100-sxm", "tp": 4, "speculative":
         {"draft_tokens": 4, "acceptance": 0.7, "draft_params": 1e9}}
    spec = json.loads(launch_flags(command_set(s, "vllm"))["--speculative-config"][0])
    assert spec["num_speculative_tokens"] == 4 and spec["model"] == "YOUR_DRAFT_MODEL_ID"


def test_bench_at_the_planned_operating_point():
    """Open loop at 2 req/s with arrival CV 2: gamma burstiness k = 1/CV^2 = 0.25; prompt CV 0.3 is a
    uniform range ratio r = 0.3 x sqrt(3) = 0.5196; a 50% prefix hit on 2000-token prompts is 1000 shared
    prefix tokens + 1000 random ones; the SLO's TTFT becomes --goodput ttft:500. The run: two minutes of
    arrivals (240) is fewer than 1,000 requests (10 beyond the p99) or 20 mean E2Es x 2 req/s, so 1,000
    prompts (at E2E
    < 25 s: 20 x 25 s x 2 req/s = 1,000); the cap is max(2 L, L + 5 sqrt(L)) over the requests in flight
    L = 2 req/s x the plan's mean E2E (Little's law).
    Source: hand: gamma burstiness 1/CV^2, uniform range ratio CV x sqrt(3), Little's law, worked in the
    docstring.
    """
    s = {"model": "llama-3.1-70b", "gpu": "h100-sxm", "tp": 4, "prompt_len": 2000, "output_len": 400,
         "load": {"request_rate": 2.0, "arrival_cv": 2.0, "prompt_len_cv": 0.3, "prefix_cache_hit": 0.5,
                  "slo": {"ttft_ms": 500, "itl_ms": 50}}}
    cs = command_set(s, "vllm")
    b = bench_flags(cs)
    assert b["--dataset-name"] == ["random"] and b["--random-output-len"] == ["400"]
    assert int(b["--random-input-len"][0]) + int(b["--random-prefix-len"][0]) == 2000
    assert b["--random-prefix-len"] == ["1000"]
    assert float(b["--burstiness"][0]) == pytest.approx(0.25)
    assert float(b["--random-range-ratio"][0]) == pytest.approx(0.3 * math.sqrt(3), rel=1e-5)
    e2e_s = plan_dict(s)["serving"]["e2e_ms"]["mean"] / 1000.0
    assert e2e_s < 25.0
    in_flight = 2.0 * e2e_s
    assert b["--request-rate"] == ["2"] and b["--num-prompts"] == ["1000"]
    cap = math.ceil(max(2 * in_flight, in_flight + 5 * math.sqrt(in_flight)))
    assert int(b["--max-concurrency"][0]) == cap
    # the ITL objective is no per-request bound: --goodput carries the TTFT bound, a note the ITL one
    assert b["--goodput"] == ["ttft:500"] and any("p90_itl_ms" in n for n in cs.notes)
    assert b["--save-result"] == [] and b["--percentile-metrics"] == ["ttft,tpot,itl,e2el"]
    assert b["--metric-percentiles"] == ["50,90,99"]
    assert launch_flags(cs)["--enable-prefix-caching"] == []
    # with no context_len the engine's limit covers the longest benchmark request
    assert int(launch_flags(cs)["--max-model-len"][0]) >= (2000 + 400) * (1 + 0.3 * math.sqrt(3))


def test_closed_loop_bench_uses_the_concurrency_and_the_openai_backend_for_other_engines():
    """Source: docs: vllm bench serve's backends and flags."""
    s = {"model": "qwen3-8b", "gpu": "h100-sxm", "load": {"concurrency": 16}}
    b = bench_flags(command_set(s, "sglang"))
    assert b["--max-concurrency"] == ["16"] and "--request-rate" not in b
    assert b["--backend"] == ["openai"] and b["--base-url"] == ["http://127.0.0.1:30000"]
    assert bench_flags(command_set(s, "vllm"))["--backend"] == ["vllm"]


def test_engine_defaults_to_the_scenarios():
    """Source: contract: the engine comes from the scenario."""
    assert command_set({"model": "qwen3-8b", "gpu": "h100-sxm", "engine": "sglang"}).engine == "sglang"
    assert command_set({"model": "qwen3-8b", "gpu": "h100-sxm", "engine": "graph"}).engine == "vllm"
    with pytest.raises(ScenarioError) as err:
        command_set({"model": "qwen3-8b", "gpu": "h100-sxm"}, "tgi")
    assert err.value.field == "engine"


def test_custom_model_gets_a_placeholder_or_its_config_name():
    """Source: contract: a custom model gets a placeholder id."""
    from tests.conftest import SEED_LLAMA_70B

    cs = command_set({"model": dict(SEED_LLAMA_70B), "gpu": "h100-sxm", "tp": 4}, "vllm")
    assert cs.launch.argv[2] == "YOUR_MODEL_ID" and any("YOUR_MODEL_ID" in n for n in cs.notes)


# --- expected figures ------------------------------------------------------------------------------------


def test_expected_sheet_matches_the_plan():
    """Closed loop at batch 8, 128 output tokens, with the plan's latency set here to TTFT 100 ms
    (band 80-150) and ITL 10 ms (band 9-12): medians TTFT 100 and TPOT = ITL = 10 ms;
    E2E = 100 + 127 x 10 = 1,370 ms (band 80 + 127 x 9 = 1,223 to 150 + 127 x 12 = 1,674);
    request throughput by Little's law = 8 / 1.370 s = 5.8394 req/s (band 8 / 1.674 = 4.7790 to
    8 / 1.223 = 6.5413); output throughput = 5.8394 x 128 = 747.45 tok/s.
    Source: hand: Little's law and E2E = TTFT + (output - 1) x TPOT, worked in the docstring."""
    from planner.contract.expected_figures import expected_figures
    from planner.scenario.scenario import parse_scenario

    s = {"model": "qwen3-8b", "gpu": "h100-sxm", "batch": 8, "prompt_len": 512, "output_len": 128}
    p = plan_dict(s)
    p = {**p, "serving": None,  # the batch-step path (a serving section takes precedence)
         "latency": {**p["latency"], "ttft_ms": 100.0, "itl_ms": 10.0, "batch": 8,
                     "ttft_band_ms": {"low": 80.0, "high": 150.0, "rows": 5},
                     "itl_band_ms": {"low": 9.0, "high": 12.0, "rows": 6}}}
    fig = {f.result_key: f for f in expected_figures(parse_scenario(s), p)}
    assert fig["median_ttft_ms"].predicted == 100.0 and (fig["median_ttft_ms"].band_low,
                                                         fig["median_ttft_ms"].band_high) == (80.0, 150.0)
    assert fig["median_tpot_ms"].predicted == fig["median_itl_ms"].predicted == 10.0
    assert (fig["median_itl_ms"].band_low, fig["median_itl_ms"].band_high) == (9.0, 12.0)
    e2e = fig["median_e2el_ms"]
    assert (e2e.predicted, e2e.band_low, e2e.band_high) == (pytest.approx(1370.0), pytest.approx(1223.0),
                                                            pytest.approx(1674.0))
    rps = fig["request_throughput"]
    assert (rps.predicted, rps.band_low, rps.band_high) == (pytest.approx(5.8394, rel=1e-4),
                                                            pytest.approx(4.7790, rel=1e-4),
                                                            pytest.approx(6.5413, rel=1e-4))
    assert fig["output_throughput"].predicted == pytest.approx(747.45, rel=1e-4)
    cs = command_set(s)
    sheet = expected_sheet(cs)
    assert "p99_ttft_ms" in sheet
    assert all(f"{f.predicted:,.2f}" in sheet for f in cs.expected if f.predicted is not None)


def test_open_loop_throughput_is_the_arrival_rate():
    """Source: hand: 3 requests/s x 200 tokens = 600 tok/s."""
    s = {"model": "qwen3-8b", "gpu": "h100-sxm", "output_len": 200, "load": {"request_rate": 3.0}}
    fig = {f.result_key: f for f in command_set(s).expected}
    assert fig["request_throughput"].predicted == pytest.approx(3.0)
    assert fig["output_throughput"].predicted == pytest.approx(600.0)


def test_speculative_tpot_and_streamed_itl():
    """With speculation a round emits several tokens: TPOT is per token, the streamed ITL a round. At
    acceptance p = 0.78 with k = 5 draft tokens a round emits E = (1 - p^(k+1)) / (1 - p) = 3.52 tokens, so
    TPOT = round / 3.52.
    Source: seed: seed 001's geometric acceptance, 3.52 tokens/round at p=0.78, k=5 (seed_inconsistencies.md
    item 21 confirms the model)."""
    s = {"model": "llama-3.1-70b", "gpu": "h100-sxm", "tp": 4, "batch": 4,
         "speculative": {"draft_tokens": 5, "acceptance": 0.78, "draft_params": 1e9}}
    spec = plan_dict(s)["speculative"]
    assert spec["tokens_per_round"] == pytest.approx(3.52, abs=0.005)
    fig = {f.result_key: f for f in command_set(s).expected}
    assert (
        fig["median_tpot_ms"].predicted == spec["itl_ms"]
        and fig["median_itl_ms"].predicted == spec["round_ms"]
    )
    assert fig["median_tpot_ms"].predicted == pytest.approx(fig["median_itl_ms"].predicted / 3.52, rel=0.002)


# --- downloadable files ----------------------------------------------------------------------------------


# each engine's documented default port and health endpoint: vLLM (https://docs.vllm.ai/en/v0.11.2/cli/serve/,
# --port 8000; GET /health), SGLang (https://docs.sglang.io/advanced_features/server_arguments.html, --port
# 30000; GET /health), trtllm-serve (tensorrt_llm/commands/serve.py: --port 8000; GET /health)
DOCUMENTED_PORT = {"vllm": 8000, "sglang": 30000, "trt-llm": 8000}


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("engine", ENGINES)
def test_launch_script_is_valid_bash_and_waits_for_health(engine, sample_scenario):
    """The launch script is valid bash, starts the server on the engine's documented port and polls the
    engine's documented health endpoint before the benchmark runs.
    Source: docs: vLLM, SGLang and trtllm-serve server docs (default port, GET /health), cited above."""
    cs = command_set({**sample_scenario, "load": {"concurrency": 4}}, engine)
    script = launch_script(cs)
    r = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    port = DOCUMENTED_PORT[engine]
    assert launch_flags(cs)["--port"] == [str(port)]
    assert f"curl -sf http://127.0.0.1:{port}/health" in script
    assert script.index("until curl") < script.index("vllm bench serve") or script.index(
        "until curl"
    ) < script.index("vllm \\\n    bench")
    assert "--save-result" in script


def parse_block_yaml(text: str):
    """The block-style YAML subset the manifest uses (mappings, '- ' lists, JSON-quoted or plain scalars)."""
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]

    def scalar(raw: str):
        raw = raw.strip()
        if raw.startswith('"'):
            return json.loads(raw)
        if raw in ("true", "false"):
            return raw == "true"
        try:
            return int(raw)
        except ValueError:
            return float(raw) if raw.replace(".", "", 1).isdigit() else raw

    def block(i: int, indent: int):
        if lines[i].strip().startswith("- "):
            items = []
            while i < len(lines) and lines[i].startswith(" " * indent + "- "):
                rest = lines[i][indent + 2:]
                if ":" in rest and not rest.startswith('"'):
                    lines[i] = " " * (indent + 2) + rest  # the item's first key, at the item's indent
                    item, i = block(i, indent + 2)
                else:
                    item, i = scalar(rest), i + 1
                items.append(item)
            return items, i
        mapping = {}
        while (
            i < len(lines)
            and len(lines[i]) - len(lines[i].lstrip()) == indent
            and not lines[i].lstrip().startswith("- ")
        ):
            key, _, rest = lines[i].strip().partition(":")
            if rest.strip():
                mapping[key], i = scalar(rest), i + 1
            else:
                child_indent = len(lines[i + 1]) - len(lines[i + 1].lstrip())
                mapping[key], i = block(i + 1, child_indent)
        return mapping, i

    return block(0, 0)[0]


@pytest.mark.parametrize("engine", ENGINES)
def test_k8s_manifest_parses_to_the_deployment(engine, sample_scenario):
    """GPU request = tp x pp = 4 x 2 = 8, probes on the engine's documented /health and default port, the
    container runs the launch command.
    Source: docs: vLLM, SGLang and trtllm-serve server docs (default port, GET /health; DOCUMENTED_PORT);
    the NVIDIA device plugin's `nvidia.com/gpu` resource."""
    cs = command_set({**sample_scenario, "pp": 2}, engine)
    docs = k8s_manifest(cs).split("---\n")
    deployment = parse_block_yaml(docs[-1])
    assert deployment == manifest_object(cs)
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 8
    assert container["resources"]["requests"]["nvidia.com/gpu"] == 8
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/health", "port": DOCUMENTED_PORT[engine]}
    assert container["command"][0] == cs.launch.argv[0]
    assert container["env"][0]["valueFrom"]["secretKeyRef"] == {
        "name": "hf-token", "key": "token", "optional": True,
    }
    assert (
        deployment["spec"]["selector"]["matchLabels"] == deployment["spec"]["template"]["metadata"]["labels"]
    )
    if engine == "trt-llm":
        config_map = parse_block_yaml(docs[0])
        assert config_map["kind"] == "ConfigMap"
        assert (
            config_map["data"]["extra_llm_api_options.yaml"] == cs.launch.files["extra_llm_api_options.yaml"]
        )
        assert "/etc/ridgeline/extra_llm_api_options.yaml" in container["command"]


# --- CLI ---------------------------------------------------------------------------------------------------


def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "planner", *args], input=stdin, capture_output=True, text=True, cwd=ROOT,
        timeout=60,
    )


@pytest.mark.parametrize("fmt", ["text", "script", "k8s", "json", "expected"])
def test_cli_commands_formats(fmt, sample_scenario):
    """Source: contract: the CLI prints each format; the JSON one round-trips."""
    r = cli("commands", "-", "--engine", "sglang", "--format", fmt, stdin=json.dumps(sample_scenario))
    assert r.returncode == 0 and r.stderr == ""
    cs = command_set(sample_scenario, "sglang")
    assert r.stdout == render(cs, fmt)
    if fmt == "json":  # the JSON rendering round-trips
        out = json.loads(r.stdout)
        assert out["launch"]["argv"][:3] == ["python", "-m", "sglang.launch_server"]
        assert out["bench"]["result_file"] == "ridgeline_bench.json"
        assert {e["result_key"] for e in out["expected"]} >= {
            "median_ttft_ms", "median_tpot_ms", "output_throughput",
        }


def test_every_sizing_option_has_documented_commands():
    """Source: docs: each engine's documented CLI (data/reference/engine_cli_flags.json), for the options of
    data/examples/llama70b_sizing.json; each option's batch is its --max-num-seqs and tp its TP flag."""
    from planner.serving.sizing import size

    options = size(json.loads((ROOT / "data" / "examples" / "llama70b_sizing.json").read_text()))["options"]
    assert options
    for option in options:
        for engine in ENGINES:
            cs = command_set(option["scenario"], engine)
            check_against_reference(launch_flags(cs), SECTION[engine])
        f = launch_flags(command_set(option["scenario"], "vllm"))
        assert f["--max-num-seqs"] == [str(option["scenario"]["batch"])]
        assert f["--tensor-parallel-size"] == [str(option["scenario"]["tp"])]


def test_expected_figures_follow_the_plans_serving_section():
    """Source: hand: with a serving section (values set here), each benchmark line is the section's figure;
    the band is the plan's TTFT or ITL band as factors of its estimate (ttft_band / ttft x value), and
    throughput takes the inverse ITL factors."""
    from planner.contract.expected_figures import expected_figures
    from planner.scenario.scenario import parse_scenario

    s = {"model": "qwen3-8b", "gpu": "h100-sxm", "load": {"request_rate": 2.0}}
    plan = plan_dict(s)
    serving = {"request_rate": 2.0, "output_tokens_per_s": 512.0,
               "ttft_ms": {"p50": 40.0, "p90": 70.0, "p99": 120.0},
               "itl_ms": {"p50": 9.0, "p90": 12.0, "p99": 30.0},
               "e2e_ms": {"p50": 2400.0, "p90": 3000.0, "p99": 4100.0}}
    fig = {f.result_key: f for f in expected_figures(parse_scenario(s), {**plan, "serving": serving})}
    assert fig["request_throughput"].predicted == 2.0 and fig["output_throughput"].predicted == 512.0
    assert [fig[f"{p}_ttft_ms"].predicted for p in ("median", "p90", "p99")] == [40.0, 70.0, 120.0]
    assert [fig[f"{p}_itl_ms"].predicted for p in ("median", "p90", "p99")] == [9.0, 12.0, 30.0]
    assert fig["median_tpot_ms"].predicted == 9.0 and fig["p99_e2el_ms"].predicted == 4100.0
    lat = plan["latency"]
    if lat["ttft_band_ms"] is None:  # the engine's TTFT band is unvalidated (too few held-out rows)
        assert fig["p99_ttft_ms"].band_low is None
    else:
        assert fig["p99_ttft_ms"].band_low == pytest.approx(
            120.0 * lat["ttft_band_ms"]["low"] / lat["ttft_ms"]
        )
    assert fig["median_itl_ms"].band_high == pytest.approx(9.0 * lat["itl_band_ms"]["high"] / lat["itl_ms"])
    assert fig["output_throughput"].band_low == pytest.approx(
        512.0 * lat["itl_ms"] / lat["itl_band_ms"]["high"]
    )
    assert fig["median_e2el_ms"].band_low is None  # the plan has no E2E band
    stable_open = {**serving, "mode": "request_rate", "stable": True}
    fig = {f.result_key: f for f in expected_figures(parse_scenario(s), {**plan, "serving": stable_open})}
    assert fig["request_throughput"].band_low is None  # the arrival rate is given, not predicted


def test_every_preset_names_the_repository_its_config_comes_from():
    """Source: invariant: each preset's `source` is the config.json URL on huggingface.co; its hf_id (what
    `vllm serve` loads) is that repository (two fields of models.toml agree: no outside figure)."""
    import re

    from planner.model.presets import load_presets, preset_hf_id

    for model_id, spec in load_presets().items():
        repo = re.match(r"https://huggingface.co/([^/]+/[^/]+)/", spec.source or "")
        if repo is None:
            continue
        assert preset_hf_id(model_id) == repo.group(1), (
            f'{model_id}: add hf_id = "{repo.group(1)}" (the repository of its source) in '
            "planner/data/models.toml"
        )


@pytest.mark.parametrize("engine", ENGINES)
def test_a_plan_at_its_goodput_is_benchmarked_open_loop_at_that_rate(engine):
    """Issue 31: the default plan (Llama-3.1-70B fp8 on 4 H100s at its goodput under p90 TTFT 1 s, ITL 50 ms)
    was benchmarked with `--max-concurrency 155 --num-prompts 1550` and no rate, which sends every request
    at once. Its benchmark is now open loop at the goodput rounded down to 4 significant digits (never above
    it), every flag documented; a cap above the requests in flight; SGLang's and TensorRT-LLM's own clients
    named at the same rate.
    Source: docs: vllm bench serve flags (data/reference/engine_cli_flags.json); sglang.bench_serving and
    tensorrt_llm.serve.scripts.benchmark_serving take --request-rate, --max-concurrency, --num-prompts."""
    s = {"model": "llama-3.1-70b", "gpu": "h100-sxm", "tp": 4, "weights": "fp8", "kv_cache": "fp8",
         "context_len": 8192, "prompt_len": 2000, "output_len": 400,
         "load": {"at_goodput": True, "slo": {"ttft_ms": 1000, "itl_ms": 50, "percentile": 90}}}
    cs = command_set(s, engine)
    b = bench_flags(cs)
    check_against_reference(b, "vllm bench serve")
    goodput = plan_dict(s)["serving"]["request_rate"]
    rate = float(b["--request-rate"][0])
    assert rate <= goodput and rate == pytest.approx(goodput, rel=1e-3) and len(b["--request-rate"][0]) <= 5
    assert int(b["--max-concurrency"][0]) < 155 and int(b["--num-prompts"][0]) >= 1000
    if engine != "vllm":
        client = {"sglang": "sglang.bench_serving",
                  "trt-llm": "tensorrt_llm.serve.scripts.benchmark_serving"}[engine]
        assert any(client in n and f"--request-rate {b['--request-rate'][0]}" in n for n in cs.notes)


def test_max_num_seqs_above_the_kv_cache_is_launched_as_the_plan_runs():
    """Source: invariant: the engine must run the sequences the plan runs. Llama-3.1-70B fp8 on 4x H100 holds
    155 sequences at its planned context (the plan's memory.max_batch); a scenario asking max_num_seqs 1,024
    is planned at 155, so vLLM is launched with --max-num-seqs 155 and a note says why (with 1,024 it would
    admit sequences the plan never ran and preempt: the scheduler oracle's finding, issue 32). A smaller
    max_num_seqs is passed as given."""
    scenario = json.loads((ROOT / "data" / "examples" / "llama70b_h100_fp8_scenario.json").read_text())
    plan = plan_dict({**scenario, "max_num_seqs": 1024})
    cs = command_set({**scenario, "max_num_seqs": 1024}, "vllm", plan)
    flags = flags_of(cs.launch.argv, PROGRAM["vllm"][1])
    assert flags["--max-num-seqs"] == [str(plan["latency"]["batch"])] == [str(plan["memory"]["max_batch"])]
    assert any("max_num_seqs 1024" in note and "preempt" in note for note in cs.launch.notes)
    small = command_set({**scenario, "max_num_seqs": 32}, "vllm")
    assert flags_of(small.launch.argv, PROGRAM["vllm"][1])["--max-num-seqs"] == ["32"]
