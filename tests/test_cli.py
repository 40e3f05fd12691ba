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
