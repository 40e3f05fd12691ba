"""Fidelity: the graph engine reproduces compiled steps it never saw; cross-validated targets; engine
profiles add only serving terms; bands from held-out residuals; calibration works end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from planner import plan
from planner.engines.base import ENGINES
from planner.engines.profile_records import record
from planner.engines.profiles import ENGINE_TERMS, engine_efficiency, profiles
from planner.physics.calibration import CalibrationProfile
from planner.serving.calibration_fit import profile_from_vllm_bench
from tools.accuracy_report import load, summary

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "data" / "examples"
MEASUREMENTS = ROOT / "data" / "measurements"


@pytest.fixture(scope="module")
def accuracy():
    return summary(load())


def _qwen3_rows(kind):
    for name, gpu in (("h100_physics_2026-11-26.json", "h100-sxm"), ("h200_physics_2026-11-26.json", "h200")):
        for r in json.loads((MEASUREMENTS / name).read_text())[kind]:
            if r["shape"] == "qwen3-8b" and r["tp_shard"] == 1:
                yield gpu, r


def test_graph_plan_reproduces_compiled_steps_of_a_shape_never_fitted():
    """Source: measured: Qwen3-8B decode steps and prefills replayed from CUDA graphs on an H100 and an
    H200 (tools/measure_physics.py, data/measurements/*physics*.json); tools/fit_engines.py never fits
    this shape (NEVER_FITTED_SHAPES). A plan with engine "graph" for the qwen3-8b preset (the same
    config.json) at the measured batch and context must land within 12% of every decode step, median
    within 5% (the issue's targets), and within 15% of every prefill of 1,024+ tokens. The run-to-run
    spread of these measurements is under 1% (docs/ACCURACY.md), so the tolerance is the model's; a 10%
    error in the weight bandwidth, the per-layer cost or the KV bandwidth fails the median."""
    assert "qwen3-8b" in profiles()["physics"]["never_fitted_shapes"]
    errors = []
    for gpu, r in _qwen3_rows("decode"):
        p = plan({"model": "qwen3-8b", "gpu": gpu, "engine": "graph", "batch": r["batch"],
                  "prompt_len": r["context"] - 1, "output_len": 2, "context_len": r["context"] + 1})
        errors.append(p.latency.itl_ms / r["ms"] - 1)
        assert p.latency.itl_ms_floor == pytest.approx(p.latency.itl_ms)
    assert len(errors) == 24
    assert max(abs(e) for e in errors) <= 0.12, errors
    assert float(np.median(np.abs(errors))) <= 0.05
    for gpu, r in _qwen3_rows("prefill"):
        if r["prompt_len"] >= 1024:
            p = plan({"model": "qwen3-8b", "gpu": gpu, "engine": "graph", "prompt_len": r["prompt_len"],
                      "output_len": 1})
            assert p.latency.prefill_ms == pytest.approx(r["ms"], rel=0.15), (gpu, r["prompt_len"])


def test_cross_validated_medians_meet_the_issue_targets(accuracy):
    """Source: measured: leave-one-shape-out over 526 decode steps and 234 prefills of 12 shapes on H100
    and H200 (graph engine), and leave-one-row-out over vLLM's public rows (measured_published.csv).
    Targets of issue 10: graph decode ITL median <= 5%, prefill of 1,024+ tokens median <= 8%, vLLM ITL
    median <= 7%. (The worst-row targets are missed on MoE and fp8-KV shapes: docs/ACCURACY.md.)"""
    n, median, _ = accuracy["graph.itl"]
    assert n >= 500 and median <= 0.05
    n, median, _ = accuracy["graph.prefill"]
    assert n >= 200 and median <= 0.08
    n, median, _ = accuracy["vllm.public.itl"]
    assert n >= 4 and median <= 0.07


def test_engine_profiles_share_one_physics_and_fit_only_their_own_terms():
    """Source: contract: issue 10's two layers, with issue 20's production terms: on a GPU generation without
    public runs of an engine (Ampere), the engine is the graph physics plus per-step, per-prefill and
    before-first-token costs; where it has runs (Hopper), it may differ from the graph physics only in the
    terms tools/fit_production_engines.py fits (decode terms, weight streaming, its prefill efficiencies
    fitted on TTFT, serving costs); "graph" adds nothing anywhere."""
    from tools.fit_production_engines import (
        DECODE_TERMS,
        PREFILL_TERMS,
        TIED_TERMS,
        WEIGHT_ONLY_4BIT_TERM,
        WEIGHT_TERMS,
    )

    assert not profiles()["engines"]["graph"].get("overheads")
    assert not profiles()["engines"]["graph"].get("production")
    fitted = {name for name, _, _ in DECODE_TERMS} | set(WEIGHT_TERMS.values()) | set(PREFILL_TERMS) | {
        "ttft_overhead_ms", "ttft_per_running_ms", WEIGHT_ONLY_4BIT_TERM, "prefill_moe_from_tables",
    } | set(TIED_TERMS)
    for gpu, allowed in (("a100-sxm-80gb", set(ENGINE_TERMS)), ("h100-sxm", set(ENGINE_TERMS) | fitted)):
        graph = engine_efficiency("graph", gpu).model_dump()
        for name in ENGINES:
            overheads = profiles()["engines"][name].get("overheads", {})
            assert set(overheads) <= set(ENGINE_TERMS), name
            assert all(v >= 0 for v in overheads.values())
            e = engine_efficiency(name, gpu, "fp8").model_dump()
            differs = {k for k, v in e.items() if k != "name" and v != graph[k]}
            assert differs <= allowed, (name, gpu, differs - allowed)


def test_bands_come_from_held_out_rows_per_engine_and_say_unvalidated(sample_scenario):
    """Source: contract: issue 14 item 2: bands per engine and metric from held-out residuals, rows shown,
    null (the plan says "unvalidated") below 5 rows; TTFT has its own; calibrated or custom plans get
    none; the ideal roofline none."""
    bands = json.loads((ROOT / "planner" / "data" / "error_bands.json").read_text())
    assert bands["engines"]["graph"]["itl"]["n"] >= 500
    graph = plan({**sample_scenario, "engine": "graph"})
    assert graph.latency.itl_band_ms is not None and graph.latency.itl_band_ms.rows >= 500
    assert graph.latency.band_status["itl"].startswith("held-out")
    for name in ENGINES:
        ttft = bands["engines"][name]["ttft"]
        p = plan({**sample_scenario, "engine": name})
        if record(name, sample_scenario["gpu"]) is not None:
            # issue 30: an engine with a profile record on the GPU's generation takes the band of that
            # record's own held-out residuals (tests/test_profile_records.py)
            assert p.latency.ttft_band_ms is not None and p.latency.ttft_band_ms.rows >= 5
            continue
        assert (p.latency.ttft_band_ms is None) == (ttft is None)
        if ttft is None:
            assert p.latency.band_status["ttft"] == "unvalidated"
        else:
            assert ttft["n"] >= 5 and ttft != bands["engines"][name]["prefill"]
    assert plan({**sample_scenario, "efficiency": "ideal"}).latency.itl_band_ms is None
    assert (
        plan({**sample_scenario, "engine": "graph", "efficiency": {"bandwidth": 0.5}}).latency.itl_band_ms
        is None
    )


def test_graph_band_covers_public_compiled_decode_it_never_saw():
    """Source: published: torchao's torch.compile + CUDA-graph Llama-3.1-8B batch-1 decode on an H100
    (measured_published.csv: bf16 7.88 ms, int8 weight-only 5.03 ms, fp8 weight-only 5.60 ms): the graph
    engine, fitted only on our measurements, lands within 15% of the bf16 row, and the 8-bit rows within
    35% (weight-only 8-bit kernels differ from our fp8 GEMMs: the graph physics has no int8 kernel)."""
    base = {"model": "llama-3.1-8b", "gpu": "h100-sxm", "engine": "graph", "batch": 1, "prompt_len": 6,
            "output_len": 200}
    assert plan(base).latency.itl_ms == pytest.approx(7.88, rel=0.15)
    assert plan({**base, "weights": "int8"}).latency.itl_ms == pytest.approx(5.03, rel=0.35)
    assert plan({**base, "weights": "fp8", "compute": "bf16"}).latency.itl_ms == pytest.approx(5.60, rel=0.35)


def test_plan_shows_the_floor_beside_the_estimate():
    """Every plan shows our compiled-step rig's figure (engine "graph", `itl_ms_floor`) beside the engine's
    estimate, equal to it for engine "graph"; production engines' fitted kernels may beat the rig (issue 20)
    but no engine goes below the pure roofline of the same step (`itl_ms_bound`), and the ideal engine is that
    roofline, at the figure a hand derivation gives.
    Source: hand: Llama-3.1-70B bf16, TP 4, batch 16, the default 1,024-token prompt and 256 output tokens
    (mean context 1,024 + 128 = 1,152), on an H100 (3.35 TB/s, NVLink 450 GB/s per direction), ideal
    efficiency: weights 70,553,706,496 x 2 B / 4 = 35,276,853,248 B, less the embedding table that decode
    does not stream (128,256 x 8,192 x 2 B / 4 = 525,336,576 B), plus KV 16 x 1,152 x 81,920 B
    (2 x 80 x 2 KV heads x 128 x 2 B per token per GPU) = 1,509,949,440 B: 36,261,466,112 B / 3.35e12 B/s
    = 10.8243 ms; two all-reduces per layer of 16 x 8,192 x 2 B = 262,144 B, ring volume 2 x 3/4:
    160 x 393,216 B / 450e9 B/s = 0.1398 ms; ITL 10.964 ms."""
    for engine in ENGINES:
        p = plan({"model": "llama-3.1-70b", "gpu": "h100-sxm", "tp": 4, "batch": 16, "engine": engine})
        assert p.latency.itl_ms_bound <= p.latency.itl_ms + 1e-9
        assert p.latency.prefill_ms_bound <= p.latency.prefill_ms + 1e-9
        if engine == "graph":
            assert p.latency.itl_ms_floor == pytest.approx(p.latency.itl_ms, rel=1e-12)
        assert p.latency.engine == engine
    ideal = plan({"model": "llama-3.1-70b", "gpu": "h100-sxm", "tp": 4, "batch": 16, "efficiency": "ideal"})
    graph = plan({"model": "llama-3.1-70b", "gpu": "h100-sxm", "tp": 4, "batch": 16, "engine": "graph"})
    assert ideal.latency.itl_ms < graph.latency.itl_ms  # the ideal roofline is below the measured floor...
    assert (
        ideal.latency.itl_ms_floor == ideal.latency.itl_ms
    )  # ...so an ideal plan's floor is itself (issue 22)
    assert ideal.latency.itl_ms == pytest.approx(10.964, rel=0.001)


def test_engines_cli_lists_every_profile_with_evidence():
    """Source: contract: `python -m planner engines` lists the four profiles, their public rows and the
    physics' measurements."""
    r = subprocess.run([sys.executable, "-m", "planner", "engines"], capture_output=True, text=True, cwd=ROOT,
                       timeout=60, check=True)
    out = json.loads(r.stdout)
    assert [e["engine"] for e in out["engines"]] == list(ENGINES)
    assert sum(e["default"] for e in out["engines"]) == 1
    assert all(e["public_rows"] for e in out["engines"])
    assert any("physics" in m for m in out["physics"]["measurements"])


def test_vllm_bench_calibration_reproduces_the_benchmark():
    """Source: published: GPUStack's vLLM 0.11 Qwen3-8B bf16 run on one H100 (measured_published.csv): the
    profile fitted at concurrency 1 (TPOT 7.28 ms, TTFT 59.01 ms) must reproduce them, and predict the
    concurrency-8 run it never saw (TPOT 7.71 ms) within 6%."""
    bench = json.loads((EXAMPLES / "vllm_bench_qwen3_8b_h100.json").read_text())
    scenario = json.loads((EXAMPLES / "qwen3_8b_h100_scenario.json").read_text())
    profile = profile_from_vllm_bench(bench, scenario, name="test-profile")
    calibrated = plan({**scenario, "calibration": profile.model_dump(exclude_none=True)})
    assert calibrated.latency.itl_ms == pytest.approx(7.28, rel=0.01)
    assert calibrated.latency.ttft_ms == pytest.approx(59.01, rel=0.01)
    assert calibrated.calibration == "test-profile"
    at_8 = plan({**scenario, "batch": 8, "calibration": profile.model_dump(exclude_none=True)})
    assert at_8.latency.itl_ms == pytest.approx(7.71, rel=0.06)
    # a profile measured on one GPU does not change plans for another
    other = plan({**scenario, "gpu": "h200", "calibration": profile.model_dump(exclude_none=True)})
    assert other.calibration is None and other.efficiency == "vllm"


def test_calibrate_cli_end_to_end(tmp_path):
    """`calibrate` prints a valid calibration profile (the schema `python -m planner schema calibration`
    prints) that `plan` accepts and names; planned at concurrency 8 it predicts the run it never saw.
    Source: published: GPUStack's vLLM 0.11 Qwen3-8B bf16 runs on one H100 (measured_published.csv rows
    54-56): fitted at concurrency 1 (TPOT 7.28 ms back within 1%), it must predict the concurrency-8
    median TPOT of 7.71 ms within 6%."""
    import jsonschema

    r = subprocess.run(
        [
            sys.executable, "-m", "planner", "calibrate", str(EXAMPLES / "vllm_bench_qwen3_8b_h100.json"),
            str(EXAMPLES / "qwen3_8b_h100_scenario.json"), "--name", "cli",
        ],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )
    assert r.returncode == 0, r.stderr
    profile = json.loads(r.stdout)
    schema = json.loads(
        subprocess.run(
            [sys.executable, "-m", "planner", "schema", "calibration"], capture_output=True, text=True,
            cwd=ROOT, timeout=60, check=True,
        ).stdout
    )
    jsonschema.validate(profile, schema)
    scenario = json.loads((EXAMPLES / "qwen3_8b_h100_scenario.json").read_text())

    def cli_plan(
        s: dict,
    ) -> dict:  # in a subprocess like calibrate (tools/mutation_check.py patches only this process)
        f = tmp_path / "s.json"
        f.write_text(json.dumps(s))
        return json.loads(
            subprocess.run(
                [sys.executable, "-m", "planner", "plan", str(f)], capture_output=True, text=True, cwd=ROOT,
                timeout=60, check=True,
            ).stdout
        )

    out = cli_plan({**scenario, "calibration": profile})
    assert out["calibration"] == "cli" and out["latency"]["itl_ms"] == pytest.approx(7.28, rel=0.01)
    assert cli_plan({**scenario, "batch": 8, "calibration": profile})["latency"]["itl_ms"] == pytest.approx(
        7.71, rel=0.06
    )


def test_device_profile_file_is_a_valid_calibration():
    """The committed H200 device profile validates, applies to its GPU only, and predicts the decode steps
    of a model it was not fitted on.
    Source: measured: our H200 run (data/measurements/h200_torch_cudagraph_2026-11-26.json: NVIDIA H200,
    driver 580.159.04, torch 2.11.0+cu130, decode steps replayed from CUDA graphs, median of 20): its 12
    Qwen3-8B bf16 steps (batch 1-256, context 512-16,384) are held out of the profile's fit
    (tools/evidence.py); the profile must land within 12% of each and 5% in the median (issue 10's
    targets), so a 10% error in a decode term fails."""
    profile = CalibrationProfile.model_validate(json.loads(
        (ROOT / "data" / "calibrations" / "h200_torch_cudagraph.json").read_text()))
    calibration = profile.model_dump(exclude_none=True)
    p = plan({"model": "llama-3.1-8b", "gpu": "h200", "calibration": calibration})
    assert p.calibration == profile.name
    assert plan({"model": "llama-3.1-8b", "gpu": "h100-sxm", "calibration": calibration}).calibration is None
    run = json.loads((MEASUREMENTS / "h200_torch_cudagraph_2026-11-26.json").read_text())
    errors = []
    for r in run["decode"]:
        if r["model"] == "qwen3-8b" and r["tp_shard"] == 1:
            step = plan({"model": "qwen3-8b", "gpu": "h200", "weights": r["precision"], "kv_cache": "bf16",
                         "batch": r["batch"], "prompt_len": r["context"] - 1, "output_len": 2,
                         "context_len": r["context"] + 1, "calibration": calibration})
            errors.append(step.latency.itl_ms / r["ms"] - 1)
    assert len(errors) == 12
    assert max(abs(e) for e in errors) <= 0.12, errors
    assert float(np.median(np.abs(errors))) <= 0.05
