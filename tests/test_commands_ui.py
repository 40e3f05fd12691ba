"""ui/commands_panel.py in Streamlit's AppTest, on a tiny script (the ui helper wires it into app.py)."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qsl

import pytest
from streamlit.testing.v1 import AppTest

from planner import plan_dict
from planner.contract.bench_compare import compare_bench
from planner.contract.commands import command_set, shell_command
from ui.commands_panel import MAX_BENCH_BYTES, calibrated_link
from ui.links import scenario_from_query

ROOT = Path(__file__).resolve().parents[1]
BENCH_PATH = ROOT / "data" / "examples" / "vllm_bench_qwen3_8b_h100.json"
SCENARIO = json.loads((ROOT / "data" / "examples" / "qwen3_8b_h100_scenario.json").read_text())

PANEL = """
import json, sys
sys.path.insert(0, {root!r})
from ui.commands_panel import render_commands_panel
render_commands_panel(json.loads({scenario!r}))
"""

COMPARISON = """
import json, sys
sys.path.insert(0, {root!r})
import streamlit as st
from ui.commands_panel import render_bench_comparison
render_bench_comparison(json.loads({scenario!r}), {raw!r}, "run.json")
st.write("calibration in state:", bool(st.session_state.get("calibration")))
"""


def run(script: str) -> AppTest:
    at = AppTest.from_string(script, default_timeout=60)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


# Each engine's documented flags for the scenario's TP 4 and 8,192-token context (engine_cli_flags.json
# names the pages): vLLM `vllm serve` --tensor-parallel-size / --max-model-len; SGLang `launch_server`
# --tp-size / --context-length; TensorRT-LLM `trtllm-serve` --tp_size / --max_seq_len.
DOCUMENTED = {
    "vllm": ("vllm serve meta-llama/Llama-3.1-70B", "--tensor-parallel-size 4", "--max-model-len 8192"),
    "sglang": (
        "-m sglang.launch_server --model-path meta-llama/Llama-3.1-70B", "--tp-size 4",
        "--context-length 8192",
    ),
    "trt-llm": ("trtllm-serve meta-llama/Llama-3.1-70B", "--tp_size 4", "--max_seq_len 8192"),
}


def _one_line(command: str) -> str:
    return " ".join(command.replace("\\", " ").split()) + " "


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trt-llm"])
def test_panel_shows_each_engines_commands_and_downloads(engine):
    """The panel shows the library's commands, expected figures and four downloads; the launch command
    says Llama-3.1-70B (its Hugging Face id), TP 4 and the 8,192-token context in the engine's documented
    flags (DOCUMENTED above), and the benchmark asks for the scenario's 2,000 -> 400 tokens in
    `vllm bench serve`'s documented --random-input-len / --random-output-len.
    Source: docs: vLLM, SGLang and TensorRT-LLM CLI references (data/reference/engine_cli_flags.json).
    """
    scenario = {"model": "llama-3.1-70b", "gpu": "h100-sxm", "tp": 4, "weights": "fp8", "kv_cache": "fp8",
                "context_len": 8192, "prompt_len": 2000, "output_len": 400}
    at = run(PANEL.format(root=str(ROOT), scenario=json.dumps(scenario)))
    at.radio(key="cmd_engine").set_value(engine).run()
    cs = command_set(scenario, engine)
    codes = [c.value for c in at.code]
    assert shell_command(cs.launch.argv) in codes and shell_command(cs.bench) in codes
    launch = _one_line(shell_command(cs.launch.argv))
    model, tp, context = DOCUMENTED[engine]
    assert model in launch and f" {tp} " in launch and f" {context} " in launch
    bench = _one_line(shell_command(cs.bench))
    assert " --random-input-len 2000 " in bench and " --random-output-len 400 " in bench
    frame = at.dataframe[0].value
    keys = list(frame["result key"])
    assert keys[:2] == ["request_throughput", "output_throughput"] and "median_ttft_ms" in keys
    median_ttft = next(f.predicted for f in cs.expected if f.result_key == "median_ttft_ms")
    assert frame["plan"].iloc[keys.index("median_ttft_ms")] == pytest.approx(median_ttft)
    # four download buttons: script, manifest, expected sheet, commands JSON
    assert len(at.get("download_button")) == 4


def test_panel_reports_a_bad_scenario_in_one_line():
    """Source: ui: one error line for a bad scenario"""
    at = run(PANEL.format(root=str(ROOT), scenario=json.dumps({"model": "qwen3-8b", "gpu": "h900"})))
    assert at.error and "gpu" in at.error[0].value and "unknown GPU" in at.error[0].value


def test_bench_comparison_side_by_side_and_replan():
    """Source: published: GPUStack's measured 59.01 / 7.28 ms shown beside the prediction; ui: re-plan
    button"""
    raw = BENCH_PATH.read_bytes()
    at = run(COMPARISON.format(root=str(ROOT), scenario=json.dumps(SCENARIO), raw=raw))
    frame = at.dataframe[0].value
    want = compare_bench(json.loads(raw), SCENARIO, name="vllm-bench:run.json")
    assert list(frame["figure"]) == [f"{r.label} ({r.unit})" for r in want.rows]
    assert list(frame["measured"]) == [59.01, 7.28]
    assert list(frame["predicted"]) == pytest.approx([r.predicted for r in want.rows])
    at.button(key="bench_apply").click().run()
    assert not at.exception
    assert at.session_state["calibration"]["name"] == "vllm-bench:run.json"


def test_calibrated_link_round_trips_through_the_link_decoder():
    """The calibrated link decodes to the calibrated scenario, and its profile (fitted to GPUStack's
    concurrency-1 run, TPOT 7.28 ms) predicts the TPOT of their concurrency-8 run it never saw, 7.71 ms,
    within 6%, once the decoded scenario is planned at batch 8.
    Source: published: GPUStack performance lab, vLLM 0.11 Qwen3-8B bf16 on one H100 (measured_published.csv).
    """
    c = compare_bench(json.loads(BENCH_PATH.read_bytes()), SCENARIO)
    params = dict(parse_qsl(calibrated_link(c)[1:]))
    decoded, problems = scenario_from_query(params)
    assert problems == []
    assert decoded["calibration"] == c.calibrated_scenario["calibration"]
    assert decoded["model"] == "qwen3-8b" and decoded["batch"] == 1
    assert plan_dict(decoded)["latency"]["itl_ms"] == pytest.approx(7.28, rel=0.01)
    assert plan_dict({**decoded, "batch": 8})["latency"]["itl_ms"] == pytest.approx(7.71, rel=0.06)


@pytest.mark.parametrize("raw,message", [
    (b"{", "not valid JSON"), (b"\xff\xfe", "not valid JSON"),
    (b'{"median_tpot_ms": 7}', "bench.median_ttft_ms"), (b" " * (MAX_BENCH_BYTES + 1), "larger than"),
])
def test_bad_bench_upload_is_one_error(raw, message):
    """Source: ui: one error for bad JSON, a bad field or an oversize file"""
    at = run(COMPARISON.format(root=str(ROOT), scenario=json.dumps(SCENARIO), raw=raw))
    assert len(at.error) == 1 and message in at.error[0].value.replace("\\", "")
    assert not at.dataframe
