"""What a first token waits for (planner.serving.scheduler_wait): admission against the KV pool as each
engine allocates it, and the launch settings the public runs are planned with (tools.engine_fidelity)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.engines.rules import max_batch_for_context
from planner.physics.memory import plan_memory
from planner.scenario.scenario import SchedulerSettings, parse_scenario, resolve
from planner.serving.scheduler_wait import NONE, admitted_sequences, engine_scheduling, launched_scheduling
from tools.engine_fidelity import recipe_for

SCENARIO = {"model": "llama-3.3-70b", "gpu": "h200", "tp": 2, "weights": "fp8", "prompt_len": 1024,
            "output_len": 8192}


def _plan(engine: str):
    scenario = parse_scenario({**SCENARIO, "engine": engine})
    d = resolve(scenario)
    return d, plan_memory(d, scenario.context_len_resolved)


def test_on_demand_engines_admit_at_the_current_length():
    """Source: docs: vLLM V1 allocates a request's KV blocks as its tokens are written
    (vllm/v1/core/sched/scheduler.py, `KVCacheManager.allocate_slots` for the tokens scheduled this step;
    a running request that finds no free block preempts the newest): in a closed loop of 1,024-token prompts
    and 8,192-token outputs the pool holds each sequence at 1,024 + 8,192 / 2 = 5,120 tokens on average, so
    it admits what the pool holds at 5,120 tokens, not at the 9,216 tokens of a finished sequence."""
    d, mem = _plan("vllm")
    assert engine_scheduling("vllm").kv_on_demand
    admitted = admitted_sequences(d, mem, 1024, 8192)
    assert admitted == max_batch_for_context(mem.engine, 5120)
    assert admitted > mem.max_batch  # the full-context count is what a reservation to the end would admit


def test_trt_llm_reserves_to_the_end():
    """Source: docs: TensorRT-LLM's default capacity scheduler is `CapacitySchedulerPolicy.
    GUARANTEED_NO_EVICT` (tensorrt_llm/llmapi/llm_args.py, `SchedulerConfig.capacity_scheduler_policy`): a
    request is admitted only with blocks for its prompt and all of its `max_tokens`. With lengths drawn
    uniformly in [0.8 L, L] (mean 0.9 L) it holds 0.9 x (1,024 + 8,192) = 8,294.4 -> 8,295 tokens."""
    d, mem = _plan("trt-llm")
    assert not engine_scheduling("trt-llm").kv_on_demand
    assert admitted_sequences(d, mem, 1024, 8192) == mem.max_batch  # full context: the plan's own count
    assert admitted_sequences(d, mem, 1024, 8192, 0.9) == max(max_batch_for_context(mem.engine, 8295),
                                                              mem.max_batch)


def test_vllm_async_scheduling_misses_one_iteration_more():
    """Source: docs: vLLM V1 with `--async-scheduling` runs `EngineCore.step_with_batch_queue` with a batch
    queue of 2 (vllm/v1/engine/core.py: the next batch is scheduled before the current one's output is
    processed), so a request reaching a busy engine misses the iteration in flight and the one already
    formed, as SGLang's and TensorRT-LLM's overlap schedulers do by default; without it, one. InferenceX's
    vLLM recipes set `async-scheduling: true` (SemiAnalysisAI/InferenceX `benchmarks/70b_*`,
    `gptoss_fp4_*`, 2025-10-21); vLLM turned it on by default in 0.14 (InferenceX perf-changelog.yaml)."""
    on = SchedulerSettings(async_scheduling=True)
    assert engine_scheduling("vllm").missed_iterations == 1
    assert launched_scheduling("vllm", SchedulerSettings()) == engine_scheduling("vllm")
    assert launched_scheduling("vllm", on).missed_iterations == 2
    assert launched_scheduling("vllm", on).chunked_prefill  # only the wait changes
    for engine in ("sglang", "trt-llm"):  # already an overlap scheduler: nothing more is formed ahead
        assert launched_scheduling(engine, on) == engine_scheduling(engine)
    assert launched_scheduling("graph", on) is NONE  # the graph floor waits for nothing


@settings(max_examples=25, deadline=None)
@given(prompt=st.integers(16, 16384), output=st.integers(1, 16384), scale=st.floats(0.5, 1.0),
       engine=st.sampled_from(["vllm", "sglang", "trt-llm"]))
def test_admission_never_below_the_full_context_count(prompt, output, scale, engine):
    """Source: invariant: sequences held at a length no longer than their full context take no more of the
    pool, so the pool admits at least the plan's sequences at full context (`max_batch`), and allocating on
    demand admits at least as many as reserving to the end would."""
    d, mem = _plan(engine)
    admitted = admitted_sequences(d, mem, prompt, output, scale)
    assert admitted >= mem.max_batch
    if engine_scheduling(engine).kv_on_demand and mem.engine is not None:
        reserved = max_batch_for_context(mem.engine, max(math.ceil(scale * (prompt + output)), 1))
        assert admitted >= reserved


def _row(**fields) -> pd.Series:
    base = {"source": "inferencex", "engine": "sglang", "gpu": "b200", "weights": "fp4",
            "model_preset": "deepseek-r1", "tp": 8, "concurrency": 64, "prompt_len": 1024, "output_len": 1024,
            "date": "2026-02-01"}
    return pd.Series({**base, **fields})


def test_launch_settings_of_the_public_runs():
    """Source: published: SemiAnalysisAI/InferenceX launch scripts: `dsr1_fp4_b200.sh` (2026-01-05 to
    02-08) `--mem-fraction-static 0.85 --kv-cache-dtype fp8_e4m3 --chunked-prefill-size 16384` (no
    --max-prefill-tokens: SGLang's default 16384); `dsr1_fp8_h200.sh` `--chunked-prefill-size 32768
    --max-prefill-tokens 32768 --mem-fraction-static 0.82`, no KV dtype; `70b_fp8_h200_slurm.sh`
    (2025-09-27) `kv-cache-dtype: fp8`, `max-num-batched-tokens: 8192`; `70b_fp8_h200_trt_slurm.sh`
    (2025-09-18) `kv_cache_config: dtype: fp8`, `--max_num_tokens 16384`, no memory fraction.
    GPUStack's rows record their own settings: nothing is added."""
    assert recipe_for(_row()) == {"kv_cache": "fp8", "max_num_batched_tokens": 16384,
                                  "memory_utilization": 0.85}
    assert recipe_for(_row(gpu="h200", weights="fp8")) == {"max_num_batched_tokens": 32768,
                                                           "memory_utilization": 0.82}
    llama = {"model_preset": "llama-3.3-70b", "gpu": "h200", "weights": "fp8",
             "source": "inferencemax-v1-export", "tp": 2}
    assert recipe_for(_row(engine="vllm", **llama)) == {"kv_cache": "fp8", "max_num_batched_tokens": 8192}
    assert recipe_for(_row(engine="trt-llm", **llama)) == {"kv_cache": "fp8", "max_num_batched_tokens": 16384}
    assert recipe_for(_row(source="gpustack-performance-lab")) == {}


def test_amd_launch_scripts_set_an_fp8_kv_cache_from_their_dates():
    """Source: published: SemiAnalysisAI/InferenceX launch scripts: `70b_fp8_mi3{00,25,55}x_slurm.sh` and
    `70b_fp4_mi355x_slurm.sh` at ac1998a50 (the InferenceMAX v1 export's, 2025-10-20) `--kv-cache-dtype=fp8
    --max-num-batched-tokens=131072 --gpu-memory-utilization=0.94`; SGLang DeepSeek-R1 adds `--kv-cache-dtype
    fp8_e4m3` on MI355X FP4 in 332fec529 (committed 2025-12-17 UTC), MI300X in 32772c579 and MI325X in
    e9b6e0fde (2026-01-23 UTC), MI355X FP8 in 9d39c92ee (2026-03-05); earlier runs kept the model's dtype."""
    llama = {"engine": "vllm", "model_preset": "llama-3.3-70b", "weights": "fp8",
             "source": "inferencemax-v1-export", "date": "2025-10-21"}
    for gpu in ("mi300x", "mi325x", "mi355x"):
        assert recipe_for(_row(gpu=gpu, **llama)) == {"kv_cache": "fp8", "max_num_batched_tokens": 131072,
                                                      "memory_utilization": 0.94}
    for gpu, weights, first in (("mi355x", "fp4", "2025-12-17"), ("mi300x", "fp8", "2026-01-23"),
                                ("mi325x", "fp8", "2026-01-23"), ("mi355x", "fp8", "2026-03-05")):
        before = recipe_for(_row(gpu=gpu, weights=weights, date="2025-12-15"))
        assert "kv_cache" not in before
        assert recipe_for(_row(gpu=gpu, weights=weights, date=first))["kv_cache"] == "fp8"
        assert recipe_for(_row(gpu=gpu, weights=weights, date=first)) == {**before, "kv_cache": "fp8"}


def test_attention_dp_balance_waits_for_a_prompt_on_every_rank():
    """Source: docs: TensorRT-LLM's attention-DP balance (tensorrt_llm/_torch/pyexecutor: the scheduler holds
    context requests "to ensure all ranks have context requests", up to `timeout_iters`) and its request
    router (`_balance_requests_across_ranks`: a new request goes to a rank below the expected active count,
    the one a completion freed): arrivals land on random ranks, and covering all of them is the coupon
    collector's n x H(n), checked against a seeded simulation of random arrivals (1% of 20,000 trials)."""
    from planner.serving.scheduler_wait import prompts_until_every_rank_has_one

    assert prompts_until_every_rank_has_one(1) == 1
    assert prompts_until_every_rank_has_one(8) == 22
    rng = np.random.default_rng(0)
    draws = []
    for _ in range(20000):
        seen, n = set(), 0
        while len(seen) < 8:
            seen.add(int(rng.integers(8)))
            n += 1
        draws.append(n)
    assert np.mean(draws) == pytest.approx(8 * sum(1 / k for k in range(1, 9)), rel=0.01)
