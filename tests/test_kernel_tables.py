"""The kernel-table step-time predictor (issue 30, items 1 and 2): provenance of the imported tables, their
interpolation, and the predictor's place behind the one step-time interface."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from planner.contract.planning import plan
from planner.engines.profiles import with_efficiency
from planner.physics.kernel_step import tables_key
from planner.physics.kernel_tables import GEMM_DTYPES, TABLES_DIR, manifest, tables
from planner.physics.latency import decode_step, prefill
from planner.physics.step_predictor import PREDICTORS, predictor_for, predictor_name, with_kernel_tables
from planner.scenario.scenario import parse_scenario, resolve

ROOT = Path(__file__).resolve().parents[1]


def test_every_table_names_its_source_commit_and_license():
    """Source: published: github.com/ai-dynamo/aiconfigurator (Apache-2.0) at the pinned commit of
    tools/import_kernel_tables.py. Every table file is listed with its source paths, GPU, engine and engine
    version; none comes from the end-to-end samples reserved for outside validation; all together stay a
    few MB."""
    m = manifest()
    assert m["license"] == "Apache-2.0" and len(m["commit"]) == 40
    assert "ai-dynamo/aiconfigurator" in m["source_repo"]
    files = {p.name for p in TABLES_DIR.iterdir() if p.suffix == ".npz"}
    assert files == {t["file"] for t in m["tables"].values()}
    for key, t in m["tables"].items():
        assert key == f"{t['gpu']}/{t['engine']}" and t["engine_version"]
        for source in t["sources"]:
            assert "silicon" not in source["path"].lower()
            assert source["path"].startswith("aic-core/src/aiconfigurator_core/systems/data/")
    assert sum(p.stat().st_size for p in TABLES_DIR.iterdir()) < 4e6


def test_a_measured_shape_is_returned_as_measured():
    """Source: published: planner/data/kernel_tables/h200__vllm.npz (AIConfigurator's H200 vLLM GEMM table).
    At a measured (m, n, k) the interpolation returns the measured latency (a log-space interpolation is
    exact at grid points; float32 storage: 1e-5 relative)."""
    t = tables("h200", "vllm")
    raw = t._table("gemm")
    for i in (0, len(raw["m"]) // 3, len(raw["m"]) - 1):
        dtype = GEMM_DTYPES[int(raw["gemm_dtype"][i])]
        got = float(t.gemm_ms(dtype, float(raw["m"][i]), float(raw["n"][i]), float(raw["k"][i])))
        assert got == pytest.approx(float(raw["latency_ms"][i]), rel=1e-5)


def test_a_gemm_beyond_the_table_grows_with_its_tokens():
    """Source: invariant: a GEMM's work is linear in m: past the largest measured m the time scales by m, and
    a GEMM with no tokens costs nothing."""
    t = tables("h100-sxm", "vllm")
    big = float(t.gemm_ms("bfloat16", 16384.0, 8192, 8192))
    assert float(t.gemm_ms("bfloat16", 32768.0, 8192, 8192)) == pytest.approx(2 * big, rel=1e-9)
    assert float(t.gemm_ms("bfloat16", 0.0, 8192, 8192)) == 0.0


MODELS = (("llama-3.1-70b", "h200", 4, "fp8", "vllm"), ("deepseek-r1", "b200", 8, "fp4", "trt-llm"),
          ("llama-3.1-8b", "h100-sxm", 1, "bf16", "sglang"), ("qwen3-30b-a3b", "h200", 1, "bf16", "vllm"))


def _kernel_deployment(model: str, gpu: str, tp: int, weights: str, engine: str):
    d = resolve(parse_scenario({"model": model, "gpu": gpu, "tp": tp, "weights": weights, "kv_cache": "fp8",
                                "engine": engine}))
    eff = with_kernel_tables(d.efficiency, gpu, engine)
    assert eff is not None
    return with_efficiency(d, eff)


@pytest.mark.parametrize("model,gpu,tp,weights,engine", MODELS)
def test_kernel_table_steps_never_beat_the_roofline_and_grow_with_work(model, gpu, tp, weights, engine):
    """Source: datasheet: the roofline. A kernel-table decode step and prefill take at least the pure roofline
    of the same work, and a step takes no less time with more sequences or a longer context (more work)."""
    d = _kernel_deployment(model, gpu, tp, weights, engine)
    batch = np.array([1.0, 4.0, 16.0, 64.0, 256.0])
    step = decode_step(d, batch, 2048.0)
    assert np.all(step.total_ms >= step.bound_ms * (1 - 1e-9))
    assert np.all(np.diff(step.total_ms) >= -1e-9)
    longer = decode_step(d, batch, 8192.0)
    assert np.all(longer.total_ms >= step.total_ms - 1e-9)
    pre = prefill(d, np.array([128.0, 1024.0, 8192.0]))
    assert np.all(pre.total_ms >= pre.bound_ms * (1 - 1e-9))
    assert np.all(np.diff(pre.total_ms) > 0)


def test_the_plan_names_its_predictor():
    """Source: contract: docs/CONTRACT_EXTENSIONS.md (issue 30). A plan says which step-time predictor gave
    its times: the fitted production terms by default, the kernel tables when the efficiency names them,
    the roofline for `efficiency: "ideal"`."""
    base = {"model": "llama-3.1-8b", "gpu": "h100-sxm", "tp": 1, "prompt_len": 1000, "output_len": 200}
    assert plan(parse_scenario(base)).latency.step_predictor == "production"
    kernel = plan(parse_scenario({**base, "efficiency": {"kernel_tables": "h100-sxm/vllm"}}))
    assert kernel.latency.step_predictor == "kernel_tables"
    assert plan(parse_scenario({**base, "efficiency": "ideal"})).latency.step_predictor == "roofline"
    assert set(PREDICTORS) >= {"roofline", "graph", "production", "kernel_tables", "calibration"}


def test_gpus_without_tables_keep_the_fitted_physics():
    """Source: published: planner/data/kernel_tables/manifest.json lists NVIDIA Hopper and Blackwell tables
    only. An AMD GPU (no tables) keeps its fitted terms: no kernel tables, the production predictor."""
    assert tables_key("mi300x", "vllm") is None
    d = resolve(parse_scenario({"model": "llama-3.1-8b", "gpu": "mi300x", "tp": 1}))
    assert with_kernel_tables(d.efficiency, "mi300x", "vllm") is None
    assert predictor_for(d).name == "production" == predictor_name(d.efficiency)


def test_the_manifest_is_what_the_importer_wrote():
    """Source: contract: tools/import_kernel_tables.py. The manifest's commit is the importer's pinned
    commit, so the tables can be regenerated from the named source."""
    from tools.import_kernel_tables import PINNED_COMMIT

    assert json.loads((TABLES_DIR / "manifest.json").read_text())["commit"] == PINNED_COMMIT


def test_the_published_validation_is_that_of_the_shipped_predictor():
    """Source: published: data/reference/serving_runs_published.csv. docs/ACCURACY.md's leave-one-family-out
    headline is generated from data/predictor_residuals.csv: a sample of its rows (one per engine), simulated
    again through the planner with the shipped kernel tables and no host cost, gives the file's raw kernel-sum
    TPOT (the file is rounded to 4 decimals)."""
    import pandas as pd

    from tools.engine_fidelity import RUNS_CSV
    from tools.fit_production_engines import load_runs
    from tools.validate_predictors import OUT, _simulate

    residuals = pd.read_csv(OUT)
    runs_csv = pd.read_csv(RUNS_CSV, low_memory=False)
    sample = residuals[residuals.kernel_tpot_h0.notna() & residuals.run_id.isin(runs_csv.run_id)]
    sample = sample.groupby("engine").head(1)
    assert len(sample) == 3
    runs = {r.row["run_id"]: r for r in load_runs() if r.row["run_id"] in set(sample.run_id)}
    for _, row in sample.iterrows():
        run = runs[row.run_id]
        production = resolve(run.scenario).efficiency
        kernel = with_kernel_tables(production, run.gpu, run.engine)
        assert kernel is not None
        kernel = kernel.model_copy(update={"ttft_overhead_ms": 0.0, "ttft_per_running_ms": 0.0,
                                           "step_overhead_us": 0.0})
        tpot, _ = _simulate(run, kernel)
        assert tpot == pytest.approx(row.kernel_tpot_h0, rel=1e-3), row.run_id
