"""The contract's command line, run as a subprocess like a script would."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "planner", *args], input=stdin, capture_output=True, text=True, cwd=ROOT,
        timeout=60,
    )


@pytest.mark.parametrize("via", ["stdin", "file"])
def test_plan_reads_stdin_or_a_file(via, tmp_path, sample_scenario):
    """`plan -` reads standard input, `plan FILE` a file; both print every section of the contract.

    Source: hand: Llama-3.1-70B's config.json (80 layers, 8 KV heads of 128, hidden 8192, vocab 128,256),
    fp8 KV: 2 x 80 x 8 x 128 x 1 B = 163,840 B per token, 40,960 B per GPU at TP 4 (8 KV heads / 4).
    fp8 weights with the embedding and LM head kept in bf16: 70,553,706,496 params (the card's 70.55B, summed
    from the config: 80 x 855,654,400 per layer + 2 x 128,256 x 8,192 + 8,192), so
    (70,553,706,496 - 2,101,346,304) x 1 B + 2,101,346,304 x 2 B = 72,655,052,800 B, / 4 = 18.164 GB per GPU.
    """
    if via == "stdin":
        r = cli("plan", "-", stdin=json.dumps(sample_scenario))
    else:
        f = tmp_path / "s.json"
        f.write_text(json.dumps(sample_scenario))
        r = cli("plan", str(f))
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    out = json.loads(r.stdout)
    assert {"memory", "roofline", "latency", "throughput", "cost"} <= set(out)
    assert out["tp"] == 4
    assert out["memory"]["kv_bytes_per_token"] == 163_840
    assert out["memory"]["kv_bytes_per_token_per_gpu"] == 40_960
    assert out["memory"]["weights_gb_per_gpu"] == pytest.approx(18.164, rel=0.005)


def test_plan_matches_library(sample_scenario):
    """The CLI prints exactly the library's plan, and its ridge is the datasheet's.

    Source: datasheet: NVIDIA H100 SXM datasheet, FP8 3,958 TFLOP/s with sparsity = 1,978.9 dense, HBM3
    3.35 TB/s: the fp8 ridge is 1,978.9e12 / 3.35e12 = 590.7 FLOP/B (seed item 1's FP8 ridge too)."""
    from planner import plan_dict

    out = json.loads(cli("plan", "--full-precision", "-", stdin=json.dumps(sample_scenario)).stdout)
    assert out == plan_dict(sample_scenario)
    assert out["roofline"]["compute_precision"] == "fp8"
    assert out["roofline"]["ridge_flop_per_byte"] == pytest.approx(590.7, rel=0.001)


def test_plan_rounds_at_output_only(sample_scenario):
    """By default `plan` prints 4 significant digits: the library's full-precision plan rounded once at
    output (planner.contract.rounding), integers and whole-number counts as they are.

    Source: contract: docs/CONTRACT_EXTENSIONS.md "CLI rounding"; 52.2104... GB rounds to 52.21 at 4
    significant digits, 163,840 B per token stays exact."""
    from planner import plan_dict
    from planner.contract.rounding import round_figures

    rounded = json.loads(cli("plan", "-", stdin=json.dumps(sample_scenario)).stdout)
    full = plan_dict(sample_scenario)
    assert rounded == round_figures(full)
    assert rounded["memory"]["kv_bytes_per_token"] == 163_840
    assert rounded["memory"]["max_batch"] == full["memory"]["max_batch"]
    kv = rounded["memory"]["kv_budget_gb_per_gpu"]
    assert len(f"{kv:g}".replace(".", "").lstrip("0")) <= 4
    assert kv == pytest.approx(full["memory"]["kv_budget_gb_per_gpu"], rel=5e-4)


def test_tp_that_splits_no_heads_exits_2_naming_the_nearest_valid():
    """Source: docs: vLLM vllm/config/model.py verify_with_parallel_config ("Total number of attention heads
    must be divisible by tensor parallel size") and linear.py QKVParallelLinear: Llama-3.1-70B has 64
    attention heads and 8 KV heads, so TP 3 loads nowhere; the valid TPs around 3 are 2 and 4 (hand)."""
    r = cli("plan", "-", stdin='{"model": "llama-3.1-70b", "gpu": "h100-sxm", "tp": 3}')
    assert r.returncode == 2 and r.stdout == "" and r.stderr.count("\n") == 1
    assert r.stderr.startswith("error: tp: 3 must divide the model's 64 attention heads and 8 KV heads")
    assert r.stderr.rstrip().endswith("nearest valid 2 or 4")
    r = cli("commands", "-", stdin='{"model": "llama-3.1-70b", "gpu": "h100-sxm", "tp": 3}')
    assert r.returncode == 2 and "--tensor-parallel-size 3" not in r.stdout
    assert r.stderr.startswith("error: tp: ")


def test_gpus_lists_catalog_with_sources():
    """`gpus` lists the catalog, every figure with its source, and prints the datasheets' figures.

    Source: datasheet: NVIDIA H100 datasheet, SXM column (BF16 1,979 and FP8 3,958 TFLOP/s with sparsity,
    dense half: 989.4 and 1,978.9; 3.35 TB/s; NVLink 900 GB/s total = 450 per direction); AMD Instinct
    MI300X data sheet (BF16 1,307.4 dense, FP8 2,614.9; 5.3 TB/s; 192 GB HBM3 = 206.16e9 B read as GiB)."""
    gpus = {g["id"]: g for g in json.loads(cli("gpus").stdout)}
    assert {
        "h100-sxm", "h100-pcie", "h200", "b200", "a100-sxm-80gb", "a100-pcie-40gb", "l40s", "l4", "mi300x",
    } <= set(gpus)
    for g in gpus.values():
        assert set(g["sources"]) >= {"memory_gb", "hbm_tb_s", "tflops"}
    h100, mi300x = gpus["h100-sxm"], gpus["mi300x"]
    assert (h100["tflops"]["bf16"], h100["tflops"]["fp8"], h100["hbm_tb_s"], h100["interconnect_gb_s"]) == (
        pytest.approx(989.4, rel=1e-3), pytest.approx(1978.9, rel=1e-3), 3.35, 450.0)
    assert (mi300x["tflops"]["bf16"], mi300x["tflops"]["fp8"], mi300x["hbm_tb_s"]) == (
        pytest.approx(1307.4, rel=1e-3), pytest.approx(2614.9, rel=1e-3), 5.3)
    assert mi300x["memory_gb"] == pytest.approx(192 * 2**30 / 1e9, rel=1e-3)


def test_models_lists_presets_with_param_counts():
    """Source: model-card: Llama-3.1-405B 405.85B total, Mixtral-8x7B 12.9B active."""
    models = {m["id"]: m for m in json.loads(cli("models").stdout)}
    assert {"llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b"} <= set(models)
    assert models["llama-3.1-405b"]["total_params"] == pytest.approx(405.85e9, rel=0.001)
    assert models["mixtral-8x7b"]["active_params"] == pytest.approx(12.9e9, rel=0.01)


# ---------------------------------------------------------------------------------------------------
# Bad input never crashes: one line `error: <field>: <reason>`, exit 2 (issue 13's reproducers, found by
# fuzzing, among them), run in-process through main().

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
MLA_MODEL = {
    "name": "mla", "n_layers": 4, "d_model": 1024, "n_heads": 8, "n_kv_heads": 8, "d_ff": 4096,
    "vocab_size": 32000,
    "mla": {"kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128},
}
QWEN2_HF = {"model_type": "qwen2", "num_hidden_layers": 28, "hidden_size": 3584, "num_attention_heads": 28,
            "num_key_value_heads": 4, "intermediate_size": 18944, "vocab_size": 152064,
            "use_sliding_window": True, "sliding_window": 4096, "max_window_layers": 28}
SIZING = json.loads((ROOT / "data/examples/llama70b_sizing_owned.json").read_text())
BENCH = json.loads((ROOT / "data/examples/vllm_bench_qwen3_8b_h100.json").read_text())
QWEN3_SCENARIO = str(ROOT / "data/examples/qwen3_8b_h100_scenario.json")
CUSTOM_GPU = {"name": "x", "memory_gb": 80, "hbm_tb_s": 3.35, "tflops": {"bf16": 989}}


def _plan(scenario: dict) -> str:
    return json.dumps(scenario)


def _hf(config: dict) -> str:
    return json.dumps({**LLAMA_8B, "model": {"hf_config": config}})


def _capex(value: str) -> str:
    return json.dumps({**SIZING, "ownership": {"capex_usd_per_gpu": 0}}).replace(
        '"capex_usd_per_gpu": 0', f'"capex_usd_per_gpu": {value}')


def _fixture(name: str) -> dict:
    return json.loads((ROOT / "tests" / "fixtures" / "hf_configs" / f"{name}.json").read_text())


def _gemma3(**text_config) -> str:
    cfg = _fixture("gemma3__gemma-3-27b-it")
    cfg["text_config"].update(text_config)
    return _hf(cfg)


def _custom(**shape) -> str:
    from planner.model.presets import load_presets

    return _plan({**LLAMA_8B, "model": {**load_presets()["llama-3.1-8b"].model_dump(), **shape}})


L8 = '{"model": "llama-3.1-8b", "gpu": "h100-sxm"'  # a valid scenario's start, for raw JSON text
PLAN = ("plan", "-")
# (id, argv, standard input, the line after "error: ")
BAD = [
    ("not json", PLAN, "{", "scenario: not valid JSON"),
    ("not an object", PLAN, "[1, 2]", "scenario: must be a JSON object"),
    ("missing model", PLAN, '{"gpu": "h100-sxm"}', "model: required field is missing"),
    ("unknown preset", PLAN, '{"model": "gpt-5", "gpu": "h100-sxm"}', "model: unknown preset 'gpt-5'"),
    ("unknown gpu", PLAN, '{"model": "llama-3.1-8b", "gpu": "h900"}', "gpu: unknown GPU 'h900'"),
    ("tp zero", PLAN, L8 + ', "tp": 0}', "tp: Input should be greater than or equal to 1"),
    ("tp string", PLAN, L8 + ', "tp": "2"}', "tp: Input should be a valid integer"),
    ("tp float", PLAN, L8 + ', "tp": 2.5}', "tp: Input should be a valid integer"),
    ("bad precision", PLAN, L8 + ', "weights": "int3"}', "weights: Input should be"),
    (
        "fp8 on A100", PLAN, '{"model": "llama-3.1-8b", "gpu": "a100-sxm-80gb", "weights": "fp8"}',
        "weights: NVIDIA A100 SXM4 80GB has no dense fp8 peak",
    ),
    ("utilization > 1", PLAN, L8 + ', "memory": {"utilization": 1.5}}', "memory.utilization:"),
    ("negative reserve", PLAN, L8 + ', "memory": {"reserve_gb": -1}}', "memory.reserve_gb:"),
    (
        "custom model missing field", PLAN, '{"model": {"n_layers": 2}, "gpu": "h100-sxm"}',
        "model.d_model: required field is missing",
    ),
    (
        "custom gpu without bf16", PLAN,
        '{"model": "llama-3.1-8b", '
        '"gpu": {"name": "x", "memory_gb": 80, "hbm_tb_s": 3, "tflops": {"fp8": 1}}}',
        "gpu.tflops: needs a dense 'bf16' peak",
    ),
    ("context too short", PLAN, L8 + ', "context_len": 100, "prompt_len": 200}', "context_len:"),
    ("unknown field", PLAN, L8 + ', "bogus": 1}', "bogus: unknown field"),
    ("efficiency word", PLAN, L8 + ', "efficiency": "fast"}', "efficiency: must be"),
    ("efficiency range", PLAN, L8 + ', "efficiency": {"bandwidth": 2}}', "efficiency.bandwidth:"),
    (
        "tp above heads", PLAN, '{"model": "llama-3.2-1b", "gpu": "h100-sxm", "tp": 64}',
        "tp: 64 cannot exceed the model's 32 attention heads: nearest valid 32",
    ),
    ("model wrong type", PLAN, '{"model": 5, "gpu": "h100-sxm"}', "model: must be a preset id"),
    (
        "hf unsupported", PLAN, '{"model": {"hf_config": {"model_type": "gpt2"}}, "gpu": "h100-sxm"}',
        "model.hf_config.model_type: 'gpt2' is not supported",
    ),
    (
        "speculative acceptance", PLAN,
        L8 + ', "speculative": {"draft_tokens": 4, "acceptance": 1.2, "draft_params": 1e9}}',
        "speculative.acceptance:",
    ),
    ("negative price", PLAN, L8 + ', "usd_per_gpu_hour": -1}', "usd_per_gpu_hour:"),
    (
        "calibration key", PLAN,
        '{"model": "qwen3-8b", "gpu": "h100-sxm", "calibration": {"name": "x", "efficiency": {"warp": 2.0}}}',
        "calibration.efficiency: unknown efficiency key 'warp'",
    ),
    # a custom model's shape must be consistent
    (
        "kv heads above heads", PLAN, _custom(n_kv_heads=64, n_heads=32),
        "model: n_kv_heads cannot exceed n_heads",
    ),
    (
        "heads not a multiple of kv heads", PLAN, _custom(n_kv_heads=5),
        "model: n_heads must be a multiple of n_kv_heads",
    ),
    (
        "top_k above experts", PLAN, _custom(moe={"n_experts": 4, "top_k": 8, "d_ff_expert": 10}),
        "model.moe: top_k cannot exceed n_experts",
    ),
    # a Hugging Face config.json: an unsupported family lists the supported ones; errors name the key, inside
    # text_config too
    (
        "hf family", PLAN, _hf({"model_type": "falcon"}),
        "model.hf_config.model_type: 'falcon' is not supported (supported: llama",
    ),
    (
        "hf missing layers", PLAN, _hf({"model_type": "llama", "hidden_size": 4096}),
        "model.hf_config.num_hidden_layers: required",
    ),
    (
        "hf hidden_size string", PLAN, _hf({**QWEN2_HF, "hidden_size": "4096"}),
        "model.hf_config.hidden_size: must be",
    ),
    ("hf not an object", PLAN, _hf("not a dict"), "model.hf_config: must be a JSON object"),
    (
        "hf experts null", PLAN,
        _hf(
            {
                "model_type": "mixtral", "num_hidden_layers": 32, "hidden_size": 4096,
                "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
                "vocab_size": 32000, "num_local_experts": None, "num_experts_per_tok": 2,
            }
        ),
        "model.hf_config.num_local_experts: required",
    ),
    (
        "hf nested huge layers", PLAN, _gemma3(num_hidden_layers=10**400),
        "model.hf_config.text_config.num_hidden_layers:",
    ),
    (
        "hf nested huge window", PLAN, _gemma3(sliding_window=10**400),
        "model.hf_config.text_config.sliding_window:",
    ),
    (
        "hf nested tie string", PLAN, _gemma3(tie_word_embeddings="false"),
        "model.hf_config.text_config.tie_word_embeddings: must be true or false",
    ),
    (
        "hf nested not an object", PLAN,
        _hf({**_fixture("gemma3__gemma-3-27b-it"), "text_config": "not an object"}),
        "model.hf_config.text_config: must be a JSON object",
    ),
    (
        "hf nested layer_types", PLAN, _gemma3(layer_types=["sliding_attention"] * 3),
        "model.hf_config.text_config.layer_types: must list one attention type",
    ),
    (
        "hf huge MLA rank", PLAN, _hf({**_fixture("deepseek_v2__DeepSeek-V2"), "kv_lora_rank": 10**400}),
        "model.hf_config.kv_lora_rank: must be",
    ),
    # JSON itself: issue 13 (RecursionError before), docs/CONTRACT.md's 100 levels, Python's 4,300-digit
    # int limit (sys.get_int_max_str_digits), NaN and Infinity (not JSON numbers, RFC 8259)
    (
        "nested 100000 deep", PLAN, "[" * 100_000 + "]" * 100_000,
        "scenario: not valid JSON (nested deeper than 100 levels)",
    ),
    (
        "nested 150 deep", PLAN, L8 + ', "x": ' + "[" * 150 + "]" * 150 + "}",
        "scenario: not valid JSON (nested deeper than 100 levels)",
    ),
    (
        "int of 4301 digits", PLAN, L8 + ', "tp": ' + "1" * 4301 + "}",
        "scenario: not valid JSON (an integer literal is too long",
    ),
    *[
        (
            f"{c} literal", PLAN, L8 + f', "usd_per_gpu_hour": {c}}}',
            f"scenario: not valid JSON ({c} is not a number)",
        )
        for c in ("NaN", "Infinity", "-Infinity")
    ],
    # 10**400 overflowed floats (OverflowError before): out of range instead (MLA ranks <= 100,000)
    *[
        (
            f"huge mla {key}", PLAN,
            _plan({**LLAMA_8B, "model": {**MLA_MODEL, "mla": {**MLA_MODEL["mla"], key: 10**400}}}),
            f"model.mla.{key}: Input should be less than or equal to",
        )
        for key in ("kv_lora_rank", "q_lora_rank", "qk_rope_head_dim")
    ],
    (
        "huge sliding window", PLAN,
        _plan({**LLAMA_8B, "model": {**MLA_MODEL, "mla": None, "sliding_window": 10**400}}),
        "model.sliding_window: Input should be less than or equal to",
    ),
    *[
        (f"huge hf {key}", PLAN, _hf({**QWEN2_HF, key: 10**400}), f"model.hf_config.{key}:")
        for key in ("num_hidden_layers", "hidden_size", "vocab_size", "sliding_window", "max_window_layers")
    ],
    (
        "hf max_window_layers string", PLAN, _hf({**QWEN2_HF, "max_window_layers": "1"}),
        "model.hf_config.max_window_layers: must be",
    ),
    # "false" is a non-empty string: bool("false") is True, which would drop the LM head's 545M params
    (
        "hf tie_word_embeddings string", PLAN, _hf({**QWEN2_HF, "tie_word_embeddings": "false"}),
        "model.hf_config.tie_word_embeddings: must be true or false",
    ),
    # 5e-324 used to divide into infinity: null latencies and costs with exit 0. Physical ranges instead
    # (HBM >= 0.01 TB/s, peaks >= 0.1 TFLOP/s, links >= 1 GB/s, efficiencies >= 0.01)
    (
        "denormal hbm", PLAN, _plan({**LLAMA_8B, "tp": 2, "gpu": {**CUSTOM_GPU, "hbm_tb_s": 5e-324}}),
        "gpu.hbm_tb_s",
    ),
    (
        "denormal peak", PLAN,
        _plan({**LLAMA_8B, "tp": 2, "gpu": {**CUSTOM_GPU, "tflops": {"bf16": 5e-324}}}), "gpu.tflops",
    ),
    (
        "denormal link", PLAN,
        _plan({**LLAMA_8B, "tp": 2, "gpu": {**CUSTOM_GPU, "interconnect_gb_s": 5e-324}}),
        "gpu.interconnect_gb_s",
    ),
    *[
        (
            f"denormal {key} efficiency", PLAN, _plan({**LLAMA_8B, "tp": 2, "efficiency": {key: 5e-324}}),
            f"efficiency.{key}",
        )
        for key in ("bandwidth", "compute", "link")
    ],
    ("denormal price", PLAN, _plan({**LLAMA_8B, "tp": 2, "usd_per_gpu_hour": 5e-324}), "usd_per_gpu_hour"),
    # echoed text escaped like a Python repr, so a newline never splits the line; lines <= 300 characters
    (
        "newline in preset", PLAN, _plan({"model": "llama\n-3.1-8b", "gpu": "h100-sxm"}),
        "model: unknown preset 'llama\\n-3.1-8b'",
    ),
    ("newline in field", PLAN, _plan({**LLAMA_8B, "bo\ngus": 1}), "bo\\ngus: unknown field"),
    (
        "newline in precision", PLAN,
        _plan({**LLAMA_8B, "gpu": {**CUSTOM_GPU, "tflops": {"bf16": 900, "f\np8": 1}}}),
        "gpu.tflops: unknown precision 'f\\np8'",
    ),
    (
        "control characters in model_type", PLAN, _hf({"model_type": "gpt\n2\r\x00\u2028"}),
        "model.hf_config.model_type: 'gpt\\n2\\r\\x00\\u2028' is not supported",
    ),
    ("10 MB model_type", PLAN, _hf({"model_type": "x" * 10_000_000}), "model.hf_config.model_type: 'xxxx"),
    (
        "10 MB preset id", PLAN, _plan({**LLAMA_8B, "model": "y\n" * 5_000_000}),
        "model: unknown preset 'y\\ny",
    ),
    ("10 MB gpu id", PLAN, _plan({**LLAMA_8B, "gpu": "y\n" * 5_000_000}), "gpu: unknown GPU 'y\\ny"),
    # sizing: crash writing JSON for Infinity/NaN before, and a
    # negative $/h for -1e9; capex is 0-10,000,000 USD
    (
        "capex Infinity", ("size", "-"), _capex("Infinity"),
        "sizing: not valid JSON (Infinity is not a number)",
    ),
    ("capex NaN", ("size", "-"), _capex("NaN"), "sizing: not valid JSON (NaN is not a number)"),
    ("capex -1e9", ("size", "-"), _capex("-1e9"), "ownership.capex_usd_per_gpu"),
    ("capex 1e300", ("size", "-"), _capex("1e300"), "ownership.capex_usd_per_gpu"),
    (
        "capex map value", ("size", "-"),
        json.dumps({**SIZING, "ownership": {"capex_usd_per_gpu": {"h100-sxm": -1e9}}}),
        "ownership.capex_usd_per_gpu",
    ),
    # calibrate: a pydantic traceback before; TTFT range 0-100,000 ms
    (
        "calibrate TTFT 1e6 ms", ("calibrate", "-", QWEN3_SCENARIO),
        json.dumps({**BENCH, "median_ttft_ms": 1e6}),
        "bench.median_ttft_ms: Input should be less than or equal to 100000",
    ),
    # commands and compare-bench
    ("commands without gpu", ("commands", "-"), '{"model": "qwen3-8b"}', "gpu: required field is missing"),
    (
        "commands unknown engine", ("commands", "-", "--engine", "tgi"), "{}",
        "arguments: argument --engine: invalid choice",
    ),
    (
        "commands unknown format", ("commands", "-", "--format", "pdf"), "{}",
        "arguments: argument --format: invalid choice",
    ),
    ("commands missing file", ("commands", "nope.json"), "", "file: 'nope.json' does not exist"),
    *[
        (f"{name} ({command})", (command, "-", QWEN3_SCENARIO), json.dumps(bench), expected)
        for command in ("compare-bench", "calibrate")
        for name, bench, expected in [
            ("bench empty list", [], "bench: must be a JSON object"),
            (
                "bench without TTFT", {"median_tpot_ms": 7.0},
                "bench.median_ttft_ms: required field is missing",
            ),
            ("bench without TPOT", {"median_ttft_ms": 50}, "bench.median_tpot_ms: required field is missing"),
            (
                "bench negative TPOT", {"median_tpot_ms": -1, "median_ttft_ms": 50},
                "bench.median_tpot_ms: Input should be",
            ),
            ("bench completed a word", {**BENCH, "completed": "many"}, "bench.completed: Input should be"),
            (
                "bench concurrency -2", {**BENCH, "max_concurrency": -2},
                "bench.max_concurrency: Input should be",
            ),
        ]
    ],
    # the comparison reads every saved figure (calibration only TPOT, TTFT and the run's shape)
    (
        "bench ITL a word", ("compare-bench", "-", QWEN3_SCENARIO),
        json.dumps({**BENCH, "median_itl_ms": "x"}), "bench.median_itl_ms:",
    ),
    ("bench not an object", ("compare-bench", "-", QWEN3_SCENARIO), "[1]", "bench: must be a JSON object"),
    (
        "bench TPOT a word", ("compare-bench", "-", QWEN3_SCENARIO),
        '{"median_tpot_ms": "fast", "median_ttft_ms": 5}', "bench.median_tpot_ms:",
    ),
    (
        "bench scenario unknown gpu",
        ("compare-bench", str(ROOT / "data/examples/vllm_bench_qwen3_8b_h100.json"), "-"),
        '{"model": "qwen3-8b", "gpu": "h900"}', "gpu: unknown GPU",
    ),
]


@pytest.mark.parametrize("argv, text, expected", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input_exits_2_with_one_line(argv, text, expected):
    """Each bad input exits 2 with one line `error: <field>: <reason>` (no traceback, at most 300 characters,
    long echoed text cut with "..."); a scenario the app reads (`planner.parse_scenario_json`, then `plan`)
    gives the very same line.

    Source: contract: docs/CONTRACT.md's errors; issue 13's reproducers."""
    from planner import ScenarioError, parse_scenario_json, plan

    line = assert_one_line_error(*cli_inproc(*argv, stdin=text))
    assert line.startswith("error: " + expected), line[:400]
    if len(text) > 1_000_000:
        assert "..." in line
    if argv == PLAN:
        with pytest.raises(ScenarioError) as err:
            plan(parse_scenario_json(text))
        assert err.value.line() == line


def test_missing_file_and_bad_command():
    """Source: contract: a missing file or unknown command exits 2 with one error line (a real process)."""
    r = cli("plan", "/nonexistent/s.json")
    assert r.returncode == 2 and r.stderr.startswith("error: file: ") and r.stdout == ""
    r = cli("frobnicate")
    assert r.returncode == 2 and r.stderr.startswith("error: arguments: ") and r.stdout == ""
    r = cli("plan", "-", stdin='{"model": "llama-3.1-8b", "gpu": "h100-sxm", "tp": 0}')
    assert r.returncode == 2 and r.stdout == "" and r.stderr.count("\n") == 1
    assert r.stderr.startswith("error: tp: Input should be greater than or equal to 1")


def test_sizing_library_call_with_python_infinity_is_refused():
    """A library caller can pass float('inf') without going through JSON: the ranges catch it.

    Source: contract: ranges hold for library callers too (no JSON parser in between)."""
    from planner import ScenarioError
    from planner.serving.sizing import size

    with pytest.raises(ScenarioError, match="ownership.capex_usd_per_gpu"):
        size({**SIZING, "ownership": {"capex_usd_per_gpu": float("inf")}})
    with pytest.raises(ScenarioError, match="usd_per_gpu_hour"):
        size({**SIZING, "usd_per_gpu_hour": {"h100-sxm": float("inf")}})


def test_a_plan_that_does_not_fit_is_still_finite():
    """Llama-3.1-405B in bf16 on one L4: nothing fits, every figure still a finite number (or null).

    Source: hand: Llama-3.1-405B's card, 405.85B params x 2 B = 811.7 GB of weights on one GPU, against
    the L4 datasheet's 24 GB: it cannot fit; KV from its config.json (126 layers, 8 KV heads of 128):
    2 x 126 x 8 x 128 x 2 B = 516,096 B per token."""
    rc, out, err = cli_inproc("plan", "-", stdin=json.dumps({"model": "llama-3.1-405b", "gpu": "l4"}))
    assert rc == 0, err
    assert '"fits": false' in out and "NaN" not in out and "Infinity" not in out
    memory = json.loads(out)["memory"]
    assert memory["weights_gb_per_gpu"] == pytest.approx(811.7, rel=0.002)
    assert memory["kv_bytes_per_token"] == 516_096
    assert memory["weights_fit"] is False


# ---------------------------------------------------------------------------------------------------
# The contract in the repository: schema, examples, help.

EXAMPLES = ROOT / "data" / "examples"


def test_every_example_runs_through_its_command():
    """Each example file is an input of a command and runs to a JSON answer (exit 0).

    Source: hand: Llama-3.1-70B fp8 KV is 2 x 80 layers x 8 KV heads x 128 x 1 B = 163,840 B/token; owned
    options price at the owned $/h."""
    runs = {
        "llama70b_h100_fp8_scenario.json": ("plan",), "qwen3_8b_h100_scenario.json": ("plan",),
        "llama70b_h100_fp8_at_objective.json": ("plan",),
        "llama70b_sizing.json": ("size",), "llama70b_sizing_owned.json": ("size",),
        "vllm_bench_qwen3_8b_h100.json": (
            "calibrate", "{file}", str(EXAMPLES / "qwen3_8b_h100_scenario.json"),
        ),
        # issue 24 (tests/test_power.py checks their answers)
        "gpt_oss_power_sizing.json": ("size-power",), "mixed_fleet_bimodal.json": ("mixed-fleet",),
        "context_tiers_llama8b.json": ("context-tiers",),
    }
    assert {p.name for p in EXAMPLES.glob("*.json")} == set(runs), "a new example needs a run here"
    outputs = {}
    for name, command in runs.items():
        args = (
            [a.format(file=EXAMPLES / name) for a in command]
            if len(command) > 1
            else [*command, str(EXAMPLES / name)]
        )
        rc, out, err = cli_inproc(*args)
        assert rc == 0, (name, err)
        outputs[name] = json.loads(out)
    # each is the documented answer's shape
    assert (
        outputs["llama70b_h100_fp8_scenario.json"]["memory"]["kv_bytes_per_token"] == 163_840
    )  # 2*80*8*128*1 B
    owned = outputs["llama70b_sizing_owned.json"]["options"]
    assert owned and all(o["own_usd_per_gpu_hour"] == o["usd_per_gpu_hour"] for o in owned)
    assert outputs["vllm_bench_qwen3_8b_h100.json"]["gpu"] == "h100-sxm"


SCHEMA_CASES = [  # (schema, document, valid)
    *[
        ("scenario", json.loads((EXAMPLES / name).read_text()), True)
        for name in ("llama70b_h100_fp8_scenario.json", "qwen3_8b_h100_scenario.json")
    ],
    *[
        ("sizing", json.loads((EXAMPLES / name).read_text()), True)
        for name in ("llama70b_sizing.json", "llama70b_sizing_owned.json")
    ],
    ("scenario", {"model": "llama-3.1-8b", "gpu": "h100-sxm", "tp": 0}, False),
    (
        "scenario",
        {
            "model": "llama-3.1-8b",
            "gpu": {"name": "x", "memory_gb": 80, "hbm_tb_s": 0.0001, "tflops": {"bf16": 1}},
        },
        False,
    ),
    ("scenario", {"model": "llama-3.1-8b"}, False),
    ("scenario", {"model": "llama-3.1-8b", "gpu": "h100-sxm", "bogus": 1}, False),
    (
        "sizing",
        {"model": "llama-3.1-8b", "traffic": {"requests_per_s": 1, "prompt_len": 1, "output_len": 1}}, False,
    ),
    ("calibration", {"name": "x", "extra": 1}, False),
]


@pytest.mark.parametrize("kind, document, valid", SCHEMA_CASES)
def test_the_schema_and_the_planner_agree(kind, document, valid):
    """Each example is a valid input of the schema `python -m planner schema` prints; an out-of-range,
    missing or unknown field is invalid there and refused (exit 2) by the planner.

    Source: contract: the schema and the planner agree."""
    import jsonschema

    rc, out, _ = cli_inproc("schema", kind)
    schema = json.loads(out)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert jsonschema.Draft202012Validator(schema).is_valid(document) == valid
    command = {"scenario": "plan", "sizing": "size"}.get(kind)
    if command and not valid:  # the valid examples run in test_every_example_runs_through_its_command
        assert cli_inproc(command, "-", stdin=json.dumps(document))[0] == 2


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
