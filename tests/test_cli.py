"""The contract's command line, run as a subprocess like a script would."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "planner", *args], input=stdin, capture_output=True, text=True,
                          cwd=ROOT, timeout=60)


def test_plan_from_stdin_prints_every_section(sample_scenario):
    """Source: hand: Llama-3.1-70B fp8 KV, 80 x 2 x 8 x 128 x 1 B = 163,840 B per token; the contract's sections."""
    r = cli("plan", "-", stdin=json.dumps(sample_scenario))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert {"memory", "roofline", "latency", "throughput", "cost"} <= set(out)
    assert out["memory"]["kv_bytes_per_token"] == 163_840  # Llama-3.1-70B, fp8 KV
    assert r.stderr == ""


def test_plan_from_file(tmp_path, sample_scenario):
    """Source: contract: `plan FILE` reads a file."""
    f = tmp_path / "s.json"
    f.write_text(json.dumps(sample_scenario))
    r = cli("plan", str(f))
    assert r.returncode == 0 and json.loads(r.stdout)["tp"] == 4


def test_plan_matches_library(sample_scenario):
    """Source: contract: the CLI prints exactly the library's plan."""
    from planner import plan_dict

    assert json.loads(cli("plan", "-", stdin=json.dumps(sample_scenario)).stdout) == plan_dict(sample_scenario)


BAD = [
    ("not json", "{", "scenario: not valid JSON"),
    ("not an object", "[1, 2]", "scenario: must be a JSON object"),
    ("missing model", '{"gpu": "h100-sxm"}', "model: required field is missing"),
    ("unknown preset", '{"model": "gpt-5", "gpu": "h100-sxm"}', "model: unknown preset 'gpt-5'"),
    ("unknown gpu", '{"model": "llama-3.1-8b", "gpu": "h900"}', "gpu: unknown GPU 'h900'"),
    ("tp zero", '{"model": "llama-3.1-8b", "gpu": "h100-sxm", "tp": 0}', "tp: Input should be greater than or equal to 1"),
    ("tp string", '{"model": "llama-3.1-8b", "gpu": "h100-sxm", "tp": "2"}', "tp: Input should be a valid integer"),
    ("tp float", '{"model": "llama-3.1-8b", "gpu": "h100-sxm", "tp": 2.5}', "tp: Input should be a valid integer"),
    ("bad precision", '{"model": "llama-3.1-8b", "gpu": "h100-sxm", "weights": "int3"}', "weights: Input should be"),
    ("fp8 on A100", '{"model": "llama-3.1-8b", "gpu": "a100-sxm-80gb", "weights": "fp8"}', "weights: NVIDIA A100 SXM4 80GB has no dense fp8 peak"),
    ("utilization > 1", '{"model": "llama-3.1-8b", "gpu": "h100-sxm", "memory": {"utilization": 1.5}}', "memory.utilization:"),
    ("negative reserve", '{"model": "llama-3.1-8b", "gpu": "h100-sxm", "memory": {"reserve_gb": -1}}', "memory.reserve_gb:"),
    ("custom model missing field", '{"model": {"n_layers": 2}, "gpu": "h100-sxm"}', "model.d_model: required field is missing"),
    ("custom gpu without bf16", '{"model": "llama-3.1-8b", "gpu": {"name": "x", "memory_gb": 80, "hbm_tb_s": 3, "tflops": {"fp8": 1}}}', "gpu.tflops: needs a dense 'bf16' peak"),
    ("context too short", '{"model": "llama-3.1-8b", "gpu": "h100-sxm", "context_len": 100, "prompt_len": 200}', "context_len:"),
    ("unknown field", '{"model": "llama-3.1-8b", "gpu": "h100-sxm", "bogus": 1}', "bogus: unknown field"),
    ("efficiency word", '{"model": "llama-3.1-8b", "gpu": "h100-sxm", "efficiency": "fast"}', "efficiency: must be"),
    ("efficiency range", '{"model": "llama-3.1-8b", "gpu": "h100-sxm", "efficiency": {"bandwidth": 2}}', "efficiency.bandwidth:"),
    ("tp above heads", '{"model": "llama-3.2-1b", "gpu": "h100-sxm", "tp": 64}', "tp: cannot exceed"),
    ("model wrong type", '{"model": 5, "gpu": "h100-sxm"}', "model: must be a preset id"),
    ("hf unsupported", '{"model": {"hf_config": {"model_type": "gpt2"}}, "gpu": "h100-sxm"}', "model.hf_config.model_type: 'gpt2' is not supported"),
    ("speculative acceptance", '{"model": "llama-3.1-8b", "gpu": "h100-sxm", "speculative": {"draft_tokens": 4, "acceptance": 1.2, "draft_params": 1e9}}', "speculative.acceptance:"),
    ("negative price", '{"model": "llama-3.1-8b", "gpu": "h100-sxm", "usd_per_gpu_hour": -1}', "usd_per_gpu_hour:"),
]


@pytest.mark.parametrize("label, text, expected", BAD, ids=[b[0] for b in BAD])
def test_bad_scenario_exits_2_with_one_line(label, text, expected):
    """Source: contract: each bad input exits 2 with one `error: <field>: <reason>` line."""
    r = cli("plan", "-", stdin=text)
    assert r.returncode == 2
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("error: ") and expected in lines[0]
    assert "Traceback" not in r.stderr


def test_missing_file_and_bad_command():
    """Source: contract: a missing file or unknown command exits 2 with one error line."""
    r = cli("plan", "/nonexistent/s.json")
    assert r.returncode == 2 and r.stderr.startswith("error: file: ") and r.stdout == ""
    r = cli("frobnicate")
    assert r.returncode == 2 and r.stderr.startswith("error: arguments: ") and r.stdout == ""


def test_gpus_lists_catalog_with_sources():
    """Source: contract: `gpus` lists the catalog with sources."""
    gpus = json.loads(cli("gpus").stdout)
    ids = {g["id"] for g in gpus}
    assert {"h100-sxm", "h100-pcie", "h200", "b200", "a100-sxm-80gb", "a100-pcie-40gb", "l40s", "l4", "mi300x"} <= ids
    for g in gpus:
        assert set(g["sources"]) >= {"memory_gb", "hbm_tb_s", "tflops"}


def test_models_lists_presets_with_param_counts():
    """Source: model-card: Llama-3.1-405B 405.85B total, Mixtral-8x7B 12.9B active."""
    models = {m["id"]: m for m in json.loads(cli("models").stdout)}
    assert {"llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b"} <= set(models)
    assert models["llama-3.1-405b"]["total_params"] == pytest.approx(405.85e9, rel=0.001)
    assert models["mixtral-8x7b"]["active_params"] == pytest.approx(12.9e9, rel=0.01)


# ---------------------------------------------------------------------------------------------------
# Bad input never crashes (issue 13): each reproducer found by fuzzing, run in-process through main().

def cli_inproc(*args: str, stdin: str = "") -> tuple[int, str, str]:
    import io

    from planner.contract.cli import main

    out, err = io.StringIO(), io.StringIO()
    rc = main(list(args), stdin=io.StringIO(stdin), stdout=out, stderr=err)
    return rc, out.getvalue(), err.getvalue()


def assert_one_line_error(rc: int, out: str, err: str, expected: str = "") -> str:
    assert rc == 2, err
    assert out == ""
    assert err.endswith("\n") and err.count("\n") == 1, repr(err[:500])
    line = err[:-1]
    assert line.startswith("error: ") and len(line) <= 300, line[:400]
    assert "Traceback" not in err and "internal" not in line
    assert expected in line, line
    return line


LLAMA_8B = {"model": "llama-3.1-8b", "gpu": "h100-sxm"}
MLA_MODEL = {"name": "mla", "n_layers": 4, "d_model": 1024, "n_heads": 8, "n_kv_heads": 8, "d_ff": 4096,
             "vocab_size": 32000, "mla": {"kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
                                          "v_head_dim": 128}}
QWEN2_HF = {"model_type": "qwen2", "num_hidden_layers": 28, "hidden_size": 3584, "num_attention_heads": 28,
            "num_key_value_heads": 4, "intermediate_size": 18944, "vocab_size": 152064,
            "use_sliding_window": True, "sliding_window": 4096, "max_window_layers": 28}


def test_json_nested_100000_deep_is_refused_as_json():
    """Source: contract: issue 13 reproducer (RecursionError before); the contract's one-line error, exit 2."""
    rc, out, err = cli_inproc("plan", "-", stdin="[" * 100_000 + "]" * 100_000)
    assert_one_line_error(rc, out, err, "scenario: not valid JSON (nested deeper than 100 levels)")


def test_json_nested_just_past_the_limit_is_refused_too():
    """Source: contract: docs/CONTRACT.md, JSON nested deeper than 100 levels is refused."""
    deep = '{"model": "llama-3.1-8b", "gpu": "h100-sxm", "x": ' + "[" * 150 + "]" * 150 + "}"
    assert_one_line_error(*cli_inproc("plan", "-", stdin=deep), "nested deeper than 100 levels")


def test_integer_literal_of_4301_digits_is_refused_as_json():
    """Source: contract: issue 13 reproducer; Python refuses int literals over 4,300 digits (sys.get_int_max_str_digits)."""
    text = '{"model": "llama-3.1-8b", "gpu": "h100-sxm", "tp": ' + "1" * 4301 + "}"
    assert_one_line_error(*cli_inproc("plan", "-", stdin=text), "an integer literal is too long")


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_literals_are_refused(constant):
    """Source: contract: docs/CONTRACT.md, NaN and Infinity are not JSON numbers (RFC 8259)."""
    text = '{"model": "llama-3.1-8b", "gpu": "h100-sxm", "usd_per_gpu_hour": ' + constant + "}"
    assert_one_line_error(*cli_inproc("plan", "-", stdin=text), f"not valid JSON ({constant} is not a number)")


@pytest.mark.parametrize("where, field", [
    ("kv_lora_rank", "model.mla.kv_lora_rank"), ("q_lora_rank", "model.mla.q_lora_rank"),
    ("qk_rope_head_dim", "model.mla.qk_rope_head_dim"),
])
def test_huge_mla_rank_is_out_of_range(where, field):
    """Source: contract: issue 13 reproducer (OverflowError before): 10**400 is outside the MLA range (<= 100,000)."""
    model = {**MLA_MODEL, "mla": {**MLA_MODEL["mla"], where: 10**400}}
    line = assert_one_line_error(*cli_inproc("plan", "-", stdin=json.dumps({**LLAMA_8B, "model": model})))
    assert line.startswith(f"error: {field}: Input should be less than or equal to")


def test_huge_sliding_window_is_out_of_range():
    """Source: contract: issue 13 reproducer (OverflowError before)."""
    model = {**MLA_MODEL, "mla": None, "sliding_window": 10**400}
    line = assert_one_line_error(*cli_inproc("plan", "-", stdin=json.dumps({**LLAMA_8B, "model": model})))
    assert line.startswith("error: model.sliding_window: Input should be less than or equal to")


@pytest.mark.parametrize("key", ["num_hidden_layers", "hidden_size", "vocab_size", "sliding_window",
                                 "max_window_layers"])
def test_huge_hf_integer_is_out_of_range(key):
    """Source: contract: issue 13 reproducer (OverflowError on num_hidden_layers before)."""
    config = {**QWEN2_HF, key: 10**400}
    line = assert_one_line_error(*cli_inproc("plan", "-", stdin=json.dumps({**LLAMA_8B, "model": {"hf_config": config}})))
    assert line.startswith("error: model.hf_config.")


def test_hf_max_window_layers_as_string_is_named():
    """Source: contract: issue 13 reproducer (TypeError before)."""
    config = {**QWEN2_HF, "max_window_layers": "1"}
    assert_one_line_error(*cli_inproc("plan", "-", stdin=json.dumps({**LLAMA_8B, "model": {"hf_config": config}})),
                          "model.hf_config.max_window_layers: must be")


def test_hf_tie_word_embeddings_as_string_is_refused_not_read_as_true():
    """"false" is a non-empty string: bool("false") is True, which would drop the LM head's 545M params.

    Source: contract: issue 13 reproducer."""
    config = {**QWEN2_HF, "tie_word_embeddings": "false"}
    assert_one_line_error(*cli_inproc("plan", "-", stdin=json.dumps({**LLAMA_8B, "model": {"hf_config": config}})),
                          "model.hf_config.tie_word_embeddings: must be true or false")


def test_calibrate_with_a_ttft_of_1e6_ms_is_out_of_range(tmp_path):
    """Source: contract: issue 13 reproducer (a pydantic traceback before); TTFT range 0-100,000 ms."""
    bench = json.loads((ROOT / "data/examples/vllm_bench_qwen3_8b_h100.json").read_text())
    f = tmp_path / "bench.json"
    f.write_text(json.dumps({**bench, "median_ttft_ms": 1e6}))
    line = assert_one_line_error(*cli_inproc("calibrate", str(f), str(ROOT / "data/examples/qwen3_8b_h100_scenario.json")))
    assert line.startswith("error: bench.median_ttft_ms: Input should be less than or equal to 100000")


SIZING = json.loads((ROOT / "data/examples/llama70b_sizing_owned.json").read_text())


@pytest.mark.parametrize("capex, expected", [
    ("Infinity", "not valid JSON (Infinity is not a number)"), ("NaN", "not valid JSON (NaN is not a number)"),
    ("-1e9", "ownership.capex_usd_per_gpu"), ("1e300", "ownership.capex_usd_per_gpu"),
])
def test_sizing_ownership_capex_out_of_range(capex, expected):
    """Source: contract: issue 13 reproducers (crash writing JSON for Infinity/NaN, a negative $/h for -1e9)."""
    text = json.dumps({**SIZING, "ownership": {"capex_usd_per_gpu": 0}}).replace(
        '"capex_usd_per_gpu": 0', f'"capex_usd_per_gpu": {capex}')
    assert_one_line_error(*cli_inproc("size", "-", stdin=text), expected)


def test_sizing_ownership_capex_map_value_out_of_range():
    """Source: contract: capex per GPU is 0-10,000,000 USD."""
    req = {**SIZING, "ownership": {"capex_usd_per_gpu": {"h100-sxm": -1e9}}}
    assert_one_line_error(*cli_inproc("size", "-", stdin=json.dumps(req)), "ownership.capex_usd_per_gpu")


def test_sizing_library_call_with_python_infinity_is_refused():
    """A library caller can pass float('inf') without going through JSON: the ranges catch it.

    Source: contract: ranges hold for library callers too (no JSON parser in between)."""
    from planner import ScenarioError
    from planner.serving.sizing import size

    with pytest.raises(ScenarioError, match="ownership.capex_usd_per_gpu"):
        size({**SIZING, "ownership": {"capex_usd_per_gpu": float("inf")}})
    with pytest.raises(ScenarioError, match="usd_per_gpu_hour"):
        size({**SIZING, "usd_per_gpu_hour": {"h100-sxm": float("inf")}})


@pytest.mark.parametrize("patch, field", [
    ({"gpu": {"name": "x", "memory_gb": 80, "hbm_tb_s": 5e-324, "tflops": {"bf16": 989}}}, "gpu.hbm_tb_s"),
    ({"gpu": {"name": "x", "memory_gb": 80, "hbm_tb_s": 3.35, "tflops": {"bf16": 5e-324}}}, "gpu.tflops"),
    ({"gpu": {"name": "x", "memory_gb": 80, "hbm_tb_s": 3.35, "tflops": {"bf16": 989},
              "interconnect_gb_s": 5e-324}}, "gpu.interconnect_gb_s"),
    ({"efficiency": {"bandwidth": 5e-324}}, "efficiency.bandwidth"),
    ({"efficiency": {"compute": 5e-324}}, "efficiency.compute"),
    ({"efficiency": {"link": 5e-324}}, "efficiency.link"),
    ({"usd_per_gpu_hour": 5e-324}, "usd_per_gpu_hour"),
])
def test_denormal_bandwidth_or_efficiency_is_out_of_range_not_a_null_plan(patch, field):
    """5e-324 used to divide into infinity: latencies and costs came out null with exit 0.

    Source: contract: issue 13 reproducer; physical ranges (HBM >= 0.01 TB/s, peaks >= 0.1 TFLOP/s, links >= 1 GB/s, efficiencies >= 0.01)."""
    line = assert_one_line_error(*cli_inproc("plan", "-", stdin=json.dumps({**LLAMA_8B, "tp": 2, **patch})))
    assert line.startswith(f"error: {field}"), line


@pytest.mark.parametrize("scenario, field", [
    ({"model": "llama\n-3.1-8b", "gpu": "h100-sxm"}, "model: unknown preset 'llama\\n-3.1-8b'"),
    ({**LLAMA_8B, "bo\ngus": 1}, "bo\\ngus: unknown field"),
    ({**LLAMA_8B, "gpu": {"name": "x", "memory_gb": 80, "hbm_tb_s": 3, "tflops": {"bf16": 900, "f\np8": 1}}},
     "unknown precision 'f\\np8'"),
    ({**LLAMA_8B, "model": {"hf_config": {"model_type": "gpt\n2\r\x00\u2028"}}},
     "model.hf_config.model_type: 'gpt\\n2\\r\\x00\\u2028' is not supported"),
])
def test_newlines_in_echoed_text_never_split_the_line(scenario, field):
    """Source: contract: issue 13 reproducers; echoed text escaped like a Python repr."""
    assert_one_line_error(*cli_inproc("plan", "-", stdin=json.dumps(scenario)), field)


def test_10_mb_model_type_gives_a_short_line():
    """Source: contract: issue 13 reproducer (a 10 MB error line before); lines <= 300 characters."""
    scenario = {**LLAMA_8B, "model": {"hf_config": {"model_type": "x" * 10_000_000}}}
    line = assert_one_line_error(*cli_inproc("plan", "-", stdin=json.dumps(scenario)),
                                 "model.hf_config.model_type: 'xxxx")
    assert "..." in line


def test_10_mb_preset_id_and_gpu_id_give_a_short_line():
    """Source: contract: lines <= 300 characters whatever the echoed text."""
    for field in ("model", "gpu"):
        assert_one_line_error(*cli_inproc("plan", "-", stdin=json.dumps({**LLAMA_8B, field: "y\n" * 5_000_000})),
                              f"{field}: unknown")


def test_a_plan_that_does_not_fit_is_still_finite():
    """Llama-3.1-405B in bf16 on one L4: nothing fits, every figure still a finite number (or null).

    Source: contract: every figure of a plan is finite (or null where the contract allows)."""
    rc, out, err = cli_inproc("plan", "-", stdin=json.dumps({"model": "llama-3.1-405b", "gpu": "l4"}))
    assert rc == 0, err
    assert '"fits": false' in out and "NaN" not in out and "Infinity" not in out


# ---------------------------------------------------------------------------------------------------
# The contract in the repository: schema, examples, help.

EXAMPLES = ROOT / "data" / "examples"


def test_every_example_runs_through_its_command():
    """Each example file is an input of a command and runs to a JSON answer (exit 0).

    Source: hand: Llama-3.1-70B fp8 KV is 2 x 80 layers x 8 KV heads x 128 x 1 B = 163,840 B/token; owned options price at the owned $/h."""
    runs = {
        "llama70b_h100_fp8_scenario.json": ("plan",), "qwen3_8b_h100_scenario.json": ("plan",),
        "llama70b_sizing.json": ("size",), "llama70b_sizing_owned.json": ("size",),
        "vllm_bench_qwen3_8b_h100.json": ("calibrate", "{file}", str(EXAMPLES / "qwen3_8b_h100_scenario.json")),
    }
    assert {p.name for p in EXAMPLES.glob("*.json")} == set(runs), "a new example needs a run here"
    outputs = {}
    for name, command in runs.items():
        args = [a.format(file=EXAMPLES / name) for a in command] if len(command) > 1 else [*command, str(EXAMPLES / name)]
        rc, out, err = cli_inproc(*args)
        assert rc == 0, (name, err)
        outputs[name] = json.loads(out)
    # each is the documented answer's shape
    assert outputs["llama70b_h100_fp8_scenario.json"]["memory"]["kv_bytes_per_token"] == 163_840  # 2*80*8*128*1 B
    owned = outputs["llama70b_sizing_owned.json"]["options"]
    assert owned and all(o["own_usd_per_gpu_hour"] == o["usd_per_gpu_hour"] for o in owned)
    assert outputs["vllm_bench_qwen3_8b_h100.json"]["gpu"] == "h100-sxm"


@pytest.mark.parametrize("kind, example", [
    ("scenario", "llama70b_h100_fp8_scenario.json"), ("scenario", "qwen3_8b_h100_scenario.json"),
    ("sizing", "llama70b_sizing.json"), ("sizing", "llama70b_sizing_owned.json"),
])
def test_examples_validate_against_the_generated_schema(kind, example):
    """Source: contract: each example is a valid input of the schema `python -m planner schema` prints."""
    import jsonschema

    rc, out, _ = cli_inproc("schema", kind)
    schema = json.loads(out)
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(json.loads((EXAMPLES / example).read_text()), schema)


@pytest.mark.parametrize("kind, bad", [
    ("scenario", {"model": "llama-3.1-8b", "gpu": "h100-sxm", "tp": 0}),
    ("scenario", {"model": "llama-3.1-8b", "gpu": {"name": "x", "memory_gb": 80, "hbm_tb_s": 0.0001, "tflops": {"bf16": 1}}}),
    ("scenario", {"model": "llama-3.1-8b"}),
    ("scenario", {"model": "llama-3.1-8b", "gpu": "h100-sxm", "bogus": 1}),
    ("sizing", {"model": "llama-3.1-8b", "traffic": {"requests_per_s": 1, "prompt_len": 1, "output_len": 1}}),
    ("calibration", {"name": "x", "extra": 1}),
])
def test_the_schema_refuses_what_the_planner_refuses(kind, bad):
    """Source: contract: the schema and the planner agree on out-of-range, missing and unknown fields."""
    import jsonschema

    schema = json.loads(cli_inproc("schema", kind)[1])
    assert not jsonschema.Draft202012Validator(schema).is_valid(bad)
    command = {"scenario": "plan", "sizing": "size"}.get(kind)
    if command:
        assert cli_inproc(command, "-", stdin=json.dumps(bad))[0] == 2


def test_the_calibrate_output_validates_against_the_calibration_schema():
    """Source: contract: calibrate's output is a valid calibration profile."""
    import jsonschema

    rc, out, _ = cli_inproc("calibrate", str(EXAMPLES / "vllm_bench_qwen3_8b_h100.json"),
                            str(EXAMPLES / "qwen3_8b_h100_scenario.json"))
    jsonschema.validate(json.loads(out), json.loads(cli_inproc("schema", "calibration")[1]))


@pytest.mark.parametrize("command, names", [
    ("plan", ["scenario", "example", "data/examples/", "python -m planner plan"]),
    ("size", ["sizing request", "example", "data/examples/", "python -m planner size"]),
    ("calibrate", ["vllm bench serve --save-result", "example", "data/examples/"]),
    ("schema", ["JSON Schema", "example"]),
    ("commands", ["scenario", "example", "data/examples/", "python -m planner commands"]),
    ("compare-bench", ["vllm bench serve --save-result", "example", "data/examples/"]),
])
def test_help_names_the_input_and_shows_an_example(command, names, capsys):
    """Source: contract: issue 13 item 2, `--help` names the input format and shows an example that exists."""
    rc, out, err = cli_inproc(command, "--help")
    help_text = capsys.readouterr().out  # argparse prints help on sys.stdout
    assert rc == 0
    for name in names:
        assert name in help_text, name
    # every example the help names exists
    import re

    for path in re.findall(r"data/examples/[\w.]+\.json", help_text):
        assert (ROOT / path).is_file(), path


@pytest.mark.parametrize("text, expected", [
    ("[" * 100_000 + "]" * 100_000, "scenario: not valid JSON (nested deeper than 100 levels)"),
    ('{"model": "llama-3.1-8b", "gpu": "h100-sxm", "usd_per_gpu_hour": Infinity}', "Infinity is not a number"),
    ('{"model": "llama-3.1-8b", "gpu": "h100-sxm", "tp": ' + "7" * 4301 + "}", "an integer literal is too long"),
])
def test_library_json_reader_refuses_what_the_cli_refuses(text, expected):
    """Source: contract: `planner.parse_scenario_json` (the app's reader of pasted or uploaded scenarios) and
    the CLI share one JSON reader, so the issue-13 reproducers give the same one-line error there."""
    from planner import ScenarioError, parse_scenario_json

    with pytest.raises(ScenarioError) as err:
        parse_scenario_json(text)
    assert expected in err.value.line() and "\n" not in err.value.line()
