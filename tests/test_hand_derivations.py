"""Hand derivations for terms whose public checks are too loose to catch a 10% error on their own
(the mutation check in tests/README.md found them): the expert-parallel all-to-all and the serving model's
mean TTFT (vLLM's profiled activation peak and KV budget by hand: tests/test_memory_vllm.py)."""

from __future__ import annotations

import pytest

from planner.hardware.communication import ep_alltoall_ms
from planner.scenario.scenario import parse_scenario, resolve


def test_ep8_dispatch_inside_one_h200_node():
    """Source: hand: DeepSeek-V3 (hidden 7,168, top-8; config.json) at EP 8 on one H200 NVLink node, fp8
    dispatch of 128 tokens per GPU: 128 x 8 x 7,168 x 1 B x the 1.2 busiest-GPU imbalance = 8,808,038 B,
    7/8 of it to the other GPUs over 0.7015 x 450 GB/s (our NCCL measurements' link efficiency, TP 2 and 4
    on 4x H200): 24.414 us; plus the measured 9.475 us latency x log2(8) = 28.425 us: 52.839 us.
    (DeepEP's published table, checked in test_parallelism at 12%, cannot tell a 10% error from the
    model's own 5%.)"""
    d = resolve(parse_scenario({"model": "deepseek-v3", "gpu": "h200", "tp": 1, "ep": 8, "weights": "fp8",
                                "engine": "graph"}))  # the measured NCCL constants, not an engine's own
    assert float(ep_alltoall_ms(d, 128, 1.0)) * 1e3 == pytest.approx(52.839, rel=1e-4)


def test_mean_ttft_at_a_trickle_is_the_prefill_alone():
    """At a trickle (1e-9 requests per ms) the engine is idle when a request comes, so the serving model's
    mean TTFT (before the serving overhead) is the prefill of that prompt alone, within 1% (the mean TTFT sets
    the closed-loop rate through Little's law; no other test pinned it). On the ideal engine an 8,192-token
    Llama-3.1-8B prompt on one H100 takes 147.1406 ms by hand: GEMMs 2 x 8,192 x 6,979,321,856 + 2 x
    525,336,576 FLOPs / 989.4 TFLOP/s = 115.5754 ms, attention 8,192 x 8,193 / 2 x 32 x 16,384 / 989.4e12 =
    17.7828 ms, activations 8,192 x 32 x 88,064 x 2 B / 3.35 TB/s = 13.7824 ms (tests/test_roofline.py); with
    one output token nothing decodes, so the prompt has the whole 8,192-token iteration to itself.

    Source: hand: the ideal prefill arithmetic above."""
    from planner.physics.latency import prefill
    from planner.serving.distributions import mean_ttft_ms
    from planner.serving.replica import Workload, load_point, replica_model

    d = resolve(
        parse_scenario({"model": "llama-3.1-8b", "gpu": "h100-sxm", "prompt_len": 2000, "output_len": 400})
    )
    m = replica_model(d, Workload(prompt_len=2000, output_len=400, max_running=64))
    alone_ms = float(prefill(d, 2000).total_ms)
    assert float(mean_ttft_ms(m, load_point(m, 1e-9))) == pytest.approx(alone_ms, rel=0.01)
    ideal = resolve(parse_scenario({"model": "llama-3.1-8b", "gpu": "h100-sxm", "efficiency": "ideal",
                                    "prompt_len": 8192, "output_len": 1}))
    m = replica_model(ideal, Workload(prompt_len=8192, output_len=1, max_running=64))
    assert float(mean_ttft_ms(m, load_point(m, 1e-9))) == pytest.approx(147.1406, rel=0.01)
