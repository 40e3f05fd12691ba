"""The GPUStack performance-lab rows (`gpl-*` of data/reference/serving_runs_published.csv, written by
tools/import_gpustack_lab.py) say what the pages' `vllm bench serve` printouts say, and plan as bursts.

The pages are not stored here: a few rows are compared with figures read off the printouts, and every row is
checked against the laws of the printout itself (its token rates divide into its lengths, every first token
falls inside the run, percentiles are ordered) and of the client (no --max-concurrency: every prompt at once).
"""

from __future__ import annotations

import re

import pandas as pd
import pytest

from planner.model.presets import load_presets
from tools.engine_fidelity import predict
from tools.serving_runs import read_runs_csv

COMMIT = "1f37f1b8bd79c6b424a0cb55c7abd08a5c2132dc"


@pytest.fixture(scope="module")
def rows() -> pd.DataFrame:
    frame = read_runs_csv()
    return frame[frame["run_id"].str.startswith("gpl-")].reset_index(drop=True)


def test_the_import_covers_the_new_families(rows: pd.DataFrame) -> None:
    """Source: published: github:gpustack/gpustack@1f37f1b8 docs/performance-lab/{qwen3-235b-a22b,
    glm-4.5-air,glm-4.x,qwen3-32b,qwen3-14b,gpt-oss-120b,gpt-oss-20b,deepseek-r1}/{h100,h200}.md: 110 runs
    the planner can plan (10 printouts left out: DP attention without a DP size, speculative decoding,
    pipeline parallelism, a command naming another model than its page's, one printout shown twice)."""
    assert len(rows) == 110
    counts = rows.groupby("model_preset").size().to_dict()
    assert counts["qwen3-235b-a22b"] == 14 and counts["glm-4.5-air"] == 14 and counts["glm-4.6"] == 17
    assert set(rows["gpu"]) == {"h100-sxm", "h200"}
    assert set(rows["model_preset"]) <= set(load_presets())
    assert (rows["source"] == "gpustack-performance-lab").all()


def test_every_row_is_pinned_to_its_page_and_printout(rows: pd.DataFrame) -> None:
    """Source: hand: source_ref names the page at the pinned commit, source_run_url the printout's line on
    that page; no two rows share a printout."""
    for ref, url in zip(rows["source_ref"], rows["source_run_url"], strict=True):
        page = ref.split(":", 2)[2]
        assert ref == f"github:gpustack/gpustack@{COMMIT}:{page}"
        blob = rf"https://github\.com/gpustack/gpustack/blob/{COMMIT}/{re.escape(page)}"
        assert re.fullmatch(blob + r"#L\d+", url)
    assert rows["source_run_url"].is_unique


@pytest.mark.parametrize(
    ("run", "expected"),
    [
        # qwen3-235b-a22b/h100.md, baseline `vllm serve Qwen/Qwen3-235B-A22B-Instruct-2507 -tp 8`, 4K input
        ({"model_preset": "qwen3-235b-a22b", "tp": 8, "prompt_len": 4000, "weights": "bf16"},
         {"request_throughput": 5.05, "output_throughput": 931.21, "total_token_throughput": 21113.53,
          "ttft_mean_ms": 47811.58, "ttft_median_ms": 48562.54, "ttft_p99_ms": 93161.32,
          "tpot_mean_ms": 68.94, "tpot_median_ms": 72.58, "tpot_p99_ms": 92.94, "itl_mean_ms": 68.75,
          "num_prompts": 500,
          "concurrency": 500, "output_len": 184}),
        # the same page, optimized `-FP8 -tp 4 --max-num-batched-tokens 16384`, random 32K input
        ({"model_preset": "qwen3-235b-a22b", "tp": 4, "prompt_len": 32000, "weights": "fp8"},
         {"request_throughput": 0.48, "output_throughput": 39.66, "ttft_mean_ms": 103754.50,
          "tpot_mean_ms": 194.60, "tpot_median_ms": 194.50, "num_prompts": 100, "concurrency": 100,
          "output_len": 83, "max_num_batched_tokens": 16384}),
    ],
)
def test_rows_match_the_printouts(rows: pd.DataFrame, run: dict, expected: dict) -> None:
    """Source: published: github:gpustack/gpustack@1f37f1b8 docs/performance-lab/qwen3-235b-a22b/h100.md,
    "Other Benchmark Cases" printouts (8,281 of 100 x 100 tokens generated at 32K: output_len 83)."""
    sel = rows
    for column, value in run.items():
        sel = sel[sel[column] == value]
    assert len(sel) == 1
    for column, value in expected.items():
        assert float(sel.iloc[0][column]) == pytest.approx(value, rel=1e-6), column


def test_token_rates_divide_into_the_lengths(rows: pd.DataFrame) -> None:
    """Source: hand: output tok/s / req/s = mean output tokens (output_len, rounded), (total - output) tok/s
    / req/s = mean prompt tokens (prompt_len: the random length, or ShareGPT's mean). The printout rounds
    req/s to 2 decimals (0.09 req/s: +-5.6%): that rounding, 1% for re-tokenized random prompts, and the
    half token of output_len's rounding."""
    rate = rows["request_throughput"]
    tolerance = 0.005 / rate + 0.01
    out_mean = rows["output_throughput"] / rate
    in_mean = (rows["total_token_throughput"] - rows["output_throughput"]) / rate
    assert ((out_mean - rows["output_len"]).abs() <= 0.5 + tolerance * rows["output_len"]).all()
    assert ((in_mean - rows["prompt_len"]).abs() <= 0.5 + tolerance * rows["prompt_len"]).all()


def test_bursts_send_every_prompt_at_once_and_first_tokens_fall_inside_the_run(rows: pd.DataFrame) -> None:
    """Source: hand: without --max-concurrency the client sends all num_prompts at t = 0, so concurrency =
    num_prompts; the run lasts num_prompts / req/s, and no first token (p99 TTFT) lies beyond it (5% for
    the rounded req/s). Only the "ShareGPT batch size 4" runs cap the concurrency (at 4)."""
    burst = rows[rows["concurrency"] == rows["num_prompts"]]
    capped = rows[rows["concurrency"] != rows["num_prompts"]]
    assert len(burst) == 106 and set(capped["concurrency"]) == {4}
    assert (rows["request_rate"].astype(str) == "inf").all()
    duration_ms = 1000.0 * rows["num_prompts"] / rows["request_throughput"]
    assert (rows["ttft_p99_ms"] <= 1.05 * duration_ms).all()
    for metric in ("ttft", "tpot", "itl"):
        assert (rows[f"{metric}_median_ms"] <= rows[f"{metric}_p99_ms"] * (1 + 1e-9)).all(), metric


def test_a_burst_of_a_thousand_plans_every_request() -> None:
    """Source: invariant: a burst (concurrency = num_prompts = 1,000, GLM-4.6 FP8 on 8 H200, SGLang TP 4,
    ShareGPT means) is planned request by request: the simulated run holds all 1,000 requests, runs at most
    what the KV pool admits, and its first tokens arrive in order of the waves (mean TTFT far above one
    prefill, below the run's duration)."""
    frame = read_runs_csv()
    row = frame[(frame["run_id"].str.startswith("gpl-")) & (frame["model_preset"] == "glm-4.6")
                & (frame["gpu"] == "h200") & (frame["engine"] == "sglang") & (frame["tp"] == 4)
                & (frame["ep"] == 1) & (frame["num_prompts"] == 1000)].iloc[0]
    p = predict(row)
    assert p.run.requests == 1000
    assert 0 < p.max_running <= 1000
    assert 1000.0 < p.run.ttft_ms.mean < 1000.0 * p.run.duration_s


def test_short_prompts_riding_one_pass_share_its_expert_read() -> None:
    """Source: invariant: prompts riding one MoE pass share its weight read (the rule
    planner.serving.benchmark_client states): Qwen3-235B-A22B bf16 at TP 8 on H100 (the gpl row's
    deployment), 64 prompts of 128 tokens sent at once and prefilled in one iteration of the closed loop cost
    at most 1.5x one 8,192-token prompt alone (the same tokens through the same GEMMs and expert reads;
    attention over 128-token prompts is cheaper, but each pays its own kernels). Before the pass paid its
    experts' read once, 64 prompts summed 1,791 ms against 275 ms; and a pass never beats its roofline."""
    from planner.physics.latency import prefill
    from planner.physics.roofline import weights_read_ms
    from planner.scenario.scenario import parse_scenario, resolve
    from planner.serving.benchmark_client import BenchmarkClient, run_benchmark
    from planner.serving.replica import Workload
    from tools.engine_fidelity import scenario_for

    frame = read_runs_csv()
    row = frame[(frame["run_id"].str.startswith("gpl-")) & (frame["model_preset"] == "qwen3-235b-a22b")
                & (frame["tp"] == 8) & (frame["prompt_len"] == 128)].iloc[0]
    d = resolve(parse_scenario(scenario_for(row)))

    def first_token_ms(prompts: int, prompt_len: int) -> float:
        w = Workload(prompt_len=prompt_len, output_len=2, max_running=256, max_num_batched_tokens=8192)
        return run_benchmark(d, w, BenchmarkClient(prompts, num_prompts=prompts)).ttft_ms.p50

    short, whole = first_token_ms(64, 128), first_token_ms(1, 8192)
    assert whole == pytest.approx(float(prefill(d, [8192.0]).total_ms[0]), rel=1e-9)
    assert short <= 1.5 * whole
    assert short >= float(weights_read_ms(d, 8192.0))
