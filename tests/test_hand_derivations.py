"""Hand derivations for terms whose public checks are too loose to catch a 10% error on their own
(the mutation check in tests/README.md found them): the expert-parallel all-to-all and vLLM's
profiled activation peak."""

from __future__ import annotations

import pytest

from planner.contract.scenario import parse_scenario, resolve
from planner.hardware.communication import ep_alltoall_ms
from planner.model.presets import load_presets
from planner.physics.engine_memory import activation_peak_gib


def test_ep8_dispatch_inside_one_h200_node():
    """Source: hand: DeepSeek-V3 (hidden 7,168, top-8; config.json) at EP 8 on one H200 NVLink node, fp8
    dispatch of 128 tokens per GPU: 128 x 8 x 7,168 x 1 B x the 1.2 busiest-GPU imbalance = 8,808,038 B,
    7/8 of it to the other GPUs over 0.7015 x 450 GB/s (our NCCL measurements' link efficiency, TP 2 and 4
    on 4x H200): 24.414 us; plus the measured 9.475 us latency x log2(8) = 28.425 us: 52.839 us.
    (DeepEP's published table, checked in test_parallelism at 12%, cannot tell a 10% error from the
    model's own 5%.)"""
    d = resolve(parse_scenario({"model": "deepseek-v3", "gpu": "h200", "tp": 1, "ep": 8, "weights": "fp8"}))
    assert float(ep_alltoall_ms(d, 128, 1.0)) * 1e3 == pytest.approx(52.839, rel=1e-4)


def test_vllm_profiled_activation_peak_of_llama_8b():
    """Source: hand: vLLM's profiling run as planner/physics/engine_memory.py reads vLLM's source: a dummy forward of
    max_num_batched_tokens 8,192 whose widest layer holds the residual and normed input (2 x 4,096) plus the
    MLP's gate_up and activation (3 x 14,336) = 51,200 bf16 values per token: 838,860,800 B; and a sampler
    run over max_num_seqs 1,024 rows of 128,256 float32 logits, twice (logits and probabilities):
    1,050,673,152 B. Together 1,889,533,952 B = 1.759766 GiB."""
    m = load_presets()["llama-3.1-8b"]
    assert activation_peak_gib(m, 1, 8192, 1024) == pytest.approx(1.759766, rel=1e-6)


def test_vllm_kv_budget_of_llama_8b_on_h100_term_by_term():
    """Source: hand: vLLM 0.21's start-up accounting (planner/physics/engine_memory.py, from vLLM's source) for
    Llama-3.1-8B bf16 on one H100 SXM at the defaults. Device 85.52e9 B = 79.646707 GiB, less the driver's
    0.45 GiB (public start-up logs) = 79.196707 visible; x 0.90 = 71.277036 GiB requested. Less: weights
    16,060,522,496 B = 14.957527 GiB; the activation peak 1.759766 GiB (test above); non-torch 0.15 GiB (TP 1);
    CUDA graphs 512 x 51,200 x 2 B = 0.048828 GiB + 0.25 = 0.298828 GiB. KV budget 54.110915 GiB; a block of
    16 tokens x 2 x 8 heads x 128 x 2 B = 65,536 B per layer, x 32 layers = 2 MiB: 27,704 blocks, 443,264
    tokens. A 10% error in any term moves the budget by at least 0.015 GiB (3e-4 of it)."""
    from planner.physics.engine_memory import plan_engine_memory

    d = resolve(parse_scenario({"model": "llama-3.1-8b", "gpu": "h100-sxm"}))
    e = plan_engine_memory(d, 8192, 8192, 16)
    assert e.kv_budget_gib == pytest.approx(54.110915, rel=2e-7)
    assert (e.num_gpu_blocks, e.kv_cache_tokens) == (27_704, 443_264)


def test_mean_ttft_at_a_trickle_is_the_prefill_alone():
    """Source: invariant: at a trickle (1e-9 requests per ms) the engine is idle when a request comes, so the
    serving model's mean TTFT (before the serving overhead) is the prefill of that prompt alone, within 1%
    (the mean TTFT sets the closed-loop rate through Little's law; no other test pinned it)."""
    from planner.physics.latency import prefill
    from planner.serving.serving import Workload, load_point, mean_ttft_ms, replica_model

    d = resolve(parse_scenario({"model": "llama-3.1-8b", "gpu": "h100-sxm", "prompt_len": 2000, "output_len": 400}))
    m = replica_model(d, Workload(prompt_len=2000, output_len=400, max_running=64))
    alone_ms = float(prefill(d, 2000).total_ms)
    assert float(mean_ttft_ms(m, load_point(m, 1e-9))) == pytest.approx(alone_ms, rel=0.01)
