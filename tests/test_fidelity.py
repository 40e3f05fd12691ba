"""Fidelity: held-out accuracy may not regress; error bands reach the plan; calibration works end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from planner import plan
from planner.calibration import CalibrationProfile
from planner.calibration_fit import profile_from_vllm_bench
from tools.accuracy_report import evaluate

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "data" / "examples"

@pytest.fixture(scope="module")
def accuracy():
    return evaluate()


def test_held_out_targets_of_the_issue(accuracy):
    """Source: published: held-out rows of measured_published.csv (never in the fit), and measured: our fused
    H100 decode steps (data/measurements), against the issue's targets (ITL within 10%, prefill 15%).
    Enough rows that a median means something (the old recorded-output baseline rested on 1-4)."""
    s = accuracy["summary"]
    assert s["published.itl.heldout"]["n"] >= 5 and s["published.prefill.heldout"]["n"] >= 3
    assert s["published.itl.heldout"]["median"] <= 0.10  # within 10% of measured decode ITL
    assert s["published.prefill.heldout"]["median"] <= 0.15  # within 15% of measured prefill
    assert s["device.itl.heldout"]["median"] <= 0.10
    # the default engine, unfitted, against our own fused (torch.compile + CUDA graphs) H100 decode steps
    assert s["device-fused.itl.heldout"]["median"] <= 0.10


def test_every_public_row_is_in_the_report(accuracy):
    """Source: contract: the accuracy report scores all 60 rows of measured_published.csv."""
    published = [r for r in accuracy["rows"] if r["origin"] == "published"]
    assert len(published) == 60
    assert sum(r["heldout"] for r in published) >= 10
    assert all(r["predicted"] > 0 for r in published)


def test_h100_device_rows_validate_a_profile_fitted_on_h200(accuracy):
    """Source: measured: our H100 decode steps (data/measurements/h100_*), predicted with the profile
    fitted on the H200 runs: median error within 10%."""
    h100 = [r for r in accuracy["rows"] if r["origin"] == "device" and "h100" in r["id"] and r["group"] == "itl"]
    assert h100 and all(r["heldout"] for r in h100)
    errors = sorted(abs(r["error"]) for r in h100)
    assert errors[len(errors) // 2] <= 0.10


def test_default_plan_carries_error_bands(sample_scenario):
    """Source: contract: a default-engine plan carries ITL, TTFT and throughput bands; an ideal plan none.
    (Whether a band contains its own estimate says nothing; the coverage test below checks the band.)"""
    p = plan(sample_scenario)
    assert p.latency.itl_band_ms is not None and p.latency.ttft_band_ms is not None
    assert p.throughput.output_tokens_per_s_band is not None
    assert plan({**sample_scenario, "efficiency": "ideal"}).latency.itl_band_ms is None


def test_itl_band_covers_our_own_fused_h100_measurements(accuracy):
    """Source: measured: our torch.compile + CUDA-graph H100 decode steps (data/measurements), which the
    bands were not built from (they come from public rows). A 10th-90th percentile band claims about 80%
    coverage; it must hold at least half of these measured ITLs around the default engine's prediction."""
    from planner.bands import error_band

    rows = [r for r in accuracy["rows"] if r["origin"] == "device-fused" and r["group"] == "itl" and r["scored"]]
    assert len(rows) >= 10
    inside = 0
    for r in rows:
        band = error_band("itl", r["predicted"])
        inside += band is not None and band.low <= r["measured"] <= band.high
    assert inside / len(rows) >= 0.5, inside / len(rows)


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
    assert other.calibration is None and other.efficiency == "default-engine"


def test_calibrate_cli_end_to_end(tmp_path):
    """Source: contract: `calibrate` prints a profile that `plan` accepts and names (TPOT 7.28 ms back)."""
    r = subprocess.run([sys.executable, "-m", "planner", "calibrate", str(EXAMPLES / "vllm_bench_qwen3_8b_h100.json"),
                        str(EXAMPLES / "qwen3_8b_h100_scenario.json"), "--name", "cli"], capture_output=True,
                       text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 0, r.stderr
    profile = json.loads(r.stdout)
    scenario = json.loads((EXAMPLES / "qwen3_8b_h100_scenario.json").read_text())
    f = tmp_path / "s.json"
    f.write_text(json.dumps({**scenario, "calibration": profile}))
    out = json.loads(subprocess.run([sys.executable, "-m", "planner", "plan", str(f)], capture_output=True, text=True,
                                    cwd=ROOT, timeout=60, check=True).stdout)
    assert out["calibration"] == "cli" and out["latency"]["itl_ms"] == pytest.approx(7.28, rel=0.01)


def test_device_profile_file_is_a_valid_calibration():
    """Source: contract: the committed device profile validates and applies to its GPU."""
    profile = CalibrationProfile.model_validate(json.loads(
        (ROOT / "data" / "calibrations" / "h200_torch_cudagraph.json").read_text()))
    p = plan({"model": "llama-3.1-8b", "gpu": "h200", "calibration": profile.model_dump(exclude_none=True)})
    assert p.calibration == profile.name


@pytest.mark.parametrize("bad, field", [
    ({"median_ttft_ms": 50}, "bench.median_tpot_ms"), ({"median_tpot_ms": -1, "median_ttft_ms": 5}, "bench.median_tpot_ms"),
    ([], "bench"),
])
def test_bad_bench_json_is_named(bad, field):
    """Source: contract: a bad bench file names the field."""
    from planner import ScenarioError

    with pytest.raises(ScenarioError) as err:
        profile_from_vllm_bench(bad, {"model": "qwen3-8b", "gpu": "h100-sxm"})
    assert err.value.field == field


def test_bad_calibration_in_scenario_is_named():
    """Source: contract: a bad calibration in a scenario names the field."""
    from planner import ScenarioError

    with pytest.raises(ScenarioError, match="calibration.efficiency"):
        plan({"model": "qwen3-8b", "gpu": "h100-sxm", "calibration": {"name": "x", "efficiency": {"warp": 2.0}}})
