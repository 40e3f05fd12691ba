"""Production engine profiles (issue 20) against public closed-loop serving runs of vLLM, SGLang and
TensorRT-LLM (data/reference/serving_runs_published.csv), and the physical check that no engine is planned
faster than the GPU allows."""

from __future__ import annotations

import csv
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gpu_catalog import load_catalog
from planner.engines.base import ENGINES
from planner.engines.profiles import gpu_generations, profiles
from planner.physics.latency import decode_step, prefill
from planner.scenario.scenario import parse_scenario, resolve
from tools.engine_fidelity import RUNS_CSV, predict
from tools.fit_production_engines import BANDWIDTH_CEILING, PREFILL_TERMS, RESIDUALS

ROOT = Path(__file__).resolve().parents[1]


@cache
def _residuals() -> pd.DataFrame:
    return pd.read_csv(RESIDUALS)


def _errors(split: str, engine: str, gpu: str | None = None) -> np.ndarray:
    r = _residuals()
    sel = r[(r.split == split) & (r.engine == engine) & ((r.gpu == gpu) if gpu else True)]
    return np.abs(sel.pred_tpot_ms / sel.tpot_ms - 1.0).to_numpy()


def test_every_fitted_term_stays_inside_the_hardware():
    """Source: datasheet: the roofline. A fitted engine never streams weights above BANDWIDTH_CEILING of the
    datasheet HBM bandwidth (a plain read reaches 0.87-0.91) nor computes above the dense peak (decode and
    prefill), and its fixed costs are never negative."""
    for engine in ENGINES:
        for generation, fit in profiles()["engines"][engine].get("production", {}).items():
            terms = {**fit["terms"], **{k: v for w in fit["weights"].values() for k, v in w.items()}}
            for name, value in terms.items():
                assert value >= 0, (engine, generation, name)
                if "bandwidth" in name:
                    assert value <= BANDWIDTH_CEILING, (engine, generation, name)
                if name == "compute" or name in PREFILL_TERMS:
                    assert value <= 1.0, (engine, generation, name)


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trt-llm"])
def test_no_engine_is_planned_faster_than_the_roofline(engine):
    """Source: datasheet: the roofline. On every catalog GPU of a fitted generation, a decode step at batch
    1-512 and a prefill of 64-8,192 tokens take at least the pure roofline of the same work (max of FLOPs /
    dense peak and bytes / datasheet bandwidth)."""
    catalog = load_catalog()
    for gpu, generation in gpu_generations().items():
        if gpu not in catalog or generation not in profiles()["engines"][engine].get("production", {}):
            continue
        precision = "fp4" if "fp4" in catalog[gpu].tflops else "fp8"
        for model, tp in (("llama-3.1-70b", 4), ("deepseek-r1", 8)):
            d = resolve(parse_scenario({"model": model, "gpu": gpu, "tp": tp, "weights": precision,
                                        "kv_cache": "fp8", "engine": engine}))
            step = decode_step(d, np.array([1.0, 8.0, 64.0, 512.0]), 2048.0)
            assert np.all(step.total_ms >= step.bound_ms * (1 - 1e-9)), (engine, gpu, model)
            pre = prefill(d, np.array([64.0, 512.0, 8192.0]))
            assert np.all(pre.total_ms >= pre.bound_ms * (1 - 1e-9)), (engine, gpu, model)


def test_the_residuals_are_those_of_the_current_profiles():
    """Source: published: data/reference/serving_runs_published.csv. The published residuals (docs/ACCURACY.md
    is generated from them) must come from the profiles the planner ships: a sample of fitted rows is
    predicted again through the planner and agrees with the file."""
    runs = pd.read_csv(RUNS_CSV, low_memory=False).set_index("run_id")
    fitted = _residuals()[_residuals().split == "fitted"]
    sample = fitted.groupby("engine").head(4)
    for _, r in sample.iterrows():
        p = predict(runs.loc[r.run_id])
        measured_is_mean = not pd.isna(runs.loc[r.run_id, "tpot_mean_ms"])
        value = p.run.tpot_ms.mean if measured_is_mean else p.run.tpot_ms.p50
        assert value == pytest.approx(r.pred_tpot_ms, rel=0.01), r.run_id


@pytest.mark.parametrize("engine,gpu", [("vllm", "h100-sxm"), ("vllm", "h200"), ("vllm", "b200"),
                                        ("sglang", "h200"), ("sglang", "b200"), ("trt-llm", "h200")])
def test_mean_tpot_within_target_on_the_runs_fitted(engine, gpu):
    """Source: published: InferenceX / InferenceMAX runs. Issue 20's target, mean TPOT within 10% at the
    median and 25% at p90 per engine and GPU, on the runs the profile was fitted on (in-sample)."""
    e = _errors("fitted", engine, gpu)
    assert len(e) >= 40
    assert np.median(e) <= 0.10
    assert np.percentile(e, 90) <= 0.25


@pytest.mark.parametrize("gpu", ["h100-sxm", "h200"])
def test_vllm_predicts_a_hopper_gpu_it_was_not_fitted_on(gpu):
    """Source: published: InferenceMAX runs of vLLM. Leaving one Hopper GPU out of the vLLM fit, the other's
    mean TPOT is within 10% at the median and 25% at p90 (held out)."""
    e = _errors("gpu_out", "vllm", gpu)
    assert len(e) >= 40
    assert np.median(e) <= 0.10
    assert np.percentile(e, 90) <= 0.25


@pytest.mark.xfail(
    strict=True,
    reason=(
        "TensorRT-LLM's runs hold two models, Llama-3.3-70B (dense) and DeepSeek-R1 (MLA + 256 experts): "
        "leaving "
        "one out fits the MoE layer cost and the per-layer cost on the other architecture alone, and the "
        "held-out "
        "median TPOT error is ~30% (docs/ACCURACY.md); more public models per engine are needed"
    ),
)
def test_trtllm_predicts_a_model_it_was_not_fitted_on():
    """Source: published: InferenceX / InferenceMAX runs of TensorRT-LLM, one model held out at a time."""
    e = _errors("model_out", "trt-llm")
    assert np.median(e) <= 0.10


def test_the_residuals_file_names_its_columns():
    """Source: contract: the columns of tools/fit_production_engines.py's output: every row names its split
    and run."""
    with RESIDUALS.open() as fh:
        header = next(csv.reader(fh))
    for column in ("split", "engine", "gpu", "model", "run_id", "tpot_ms", "pred_tpot_ms", "ttft_median_ms",
                   "pred_ttft_median_ms"):
        assert column in header


def test_the_engines_listing_shows_each_production_profile_with_its_runs():
    """Source: contract: `python -m planner engines` lists every engine's fitted production terms per GPU
    generation, how many public runs each stands on and the held-out errors; the profiles file is strict JSON
    (a split without TTFT rows records null, not NaN)."""
    import json

    from planner.engines.profiles import PROFILES_PATH, engines_listing

    json.loads(PROFILES_PATH.read_text(), parse_constant=lambda c: pytest.fail(f"{c} in the profiles file"))
    vllm = next(e for e in engines_listing() if e["engine"] == "vllm")
    assert {"hopper", "blackwell"} <= set(vllm["production"])
    assert all(fit["rows"] >= 40 for fit in vllm["production"].values())
    assert "serving_runs_published.csv" in vllm["production_source"]
    assert vllm["production_validation"]["gpu_out"]["rows"] >= 40


def test_each_run_is_predicted_under_its_launch_scheduler():
    """Source: docs: InferenceX's single-node launch scripts (SemiAnalysisAI/InferenceX benchmarks/, 2025-10
    to 2026-06): SGLang on B200/B300 polls for requests every 10 decode iterations, 30 from concurrency 16
    (--scheduler-recv-interval); on AMD GPUs it runs 4 decodes per poll (--num-continuous-decode-steps);
    TensorRT-LLM with attention DP holds prompts until every rank has one (timeout 60 iterations; 22 arrivals
    for 8 ranks, as its router sends each to the rank a completion freed), and its
    Llama-3.3-70B 1k/1k recipes below TP 8 batch-wait 20 iterations or 0.9 x 16,384 tokens; every vLLM
    recipe (`70b_*`, `gptoss_fp4_*`, read at 2025-10-21) sets `async-scheduling: true`. H200 SGLang and
    other sources hold nothing."""
    from tools.engine_fidelity import scheduler_for

    runs = pd.read_csv(RUNS_CSV, low_memory=False)
    single = runs[(runs.disaggregated != True) & (runs.multinode != True)]  # noqa: E712

    def first(**match):
        sel = single
        for k, v in match.items():
            sel = sel[sel[k] == v]
        return scheduler_for(sel.iloc[0])

    assert first(engine="sglang", gpu="b200", concurrency=4) == {"recv_interval_steps": 10}
    assert first(engine="sglang", gpu="b200", concurrency=64) == {"recv_interval_steps": 30}
    assert first(engine="sglang", gpu="mi300x") == {"recv_interval_steps": 4}
    assert first(engine="sglang", gpu="h200") == {}
    assert first(engine="trt-llm", gpu="h200", dp_attention=True) == {"prefill_wait_steps": 60,
                                                                      "prefill_wait_prompts": 22}
    assert first(engine="trt-llm", model_preset="llama-3.3-70b", tp=2, prompt_len=1024, output_len=1024) == {
        "prefill_wait_steps": 20, "prefill_wait_tokens": 14745}
    assert first(engine="trt-llm", model_preset="llama-3.3-70b", tp=8) == {}
    assert first(engine="vllm", source="inferencemax-v1-export") == {"async_scheduling": True}
    assert first(engine="vllm", source="inferencemax-agg") == {"async_scheduling": True}
    assert first(engine="vllm", source="gpustack-performance-lab") == {}


def test_each_run_plans_its_own_checkpoints_fp8_scaling():
    """Source: published: data/reference/serving_runs_published.csv `weights_format` (fp8-block for the
    `-FP8` checkpoints, 128x128 blocks; fp8-tensor for NVIDIA's ModelOpt FP8 Llama). A run of a block-fp8
    checkpoint plans block-scaled fp8 even where its preset's own checkpoint is bf16 (Qwen3-32B-FP8,
    GLM-4.6-FP8); a run whose preset already says so (DeepSeek-R1, MiniMax-M2.5), a per-tensor run of a
    per-tensor preset, or a run without the column keeps the preset's id."""
    from tools.engine_fidelity import model_for, scenario_for

    runs = pd.read_csv(RUNS_CSV, low_memory=False)

    def first(**match):
        sel = runs
        for k, v in match.items():
            sel = sel[sel[k] == v]
        return sel.iloc[0]

    qwen = first(model_hf_id="Qwen/Qwen3-32B-FP8", engine="trt-llm")
    model = model_for(qwen)
    assert isinstance(model, dict) and (model["fp8_format"], model["fp8_block_size"]) == ("block", [128, 128])
    assert resolve(parse_scenario(scenario_for(qwen))).model.fp8_block_scaled
    glm = first(model_hf_id="zai-org/GLM-4.6-FP8", gpu="h200")
    assert resolve(parse_scenario(scenario_for(glm))).model.fp8_format == "block"
    assert model_for(first(model_preset="deepseek-r1", weights_format="fp8-block", engine="sglang")) == (
        "deepseek-r1")
    assert model_for(first(model_preset="minimax-m2.5")) == "minimax-m2.5"
    assert model_for(first(model_hf_id="nvidia/Llama-3.3-70B-Instruct-FP8", gpu="h200")) == "llama-3.3-70b"
    assert model_for(first(model_hf_id="Qwen/Qwen3-8B-FP8")) == "qwen3-8b"
