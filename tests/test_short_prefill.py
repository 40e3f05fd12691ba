"""Short prompts and mixed iterations on the graph engine (issue 20): prompts from 64 tokens up and
iterations that carry decodes and a prompt chunk together, against compiled steps measured on an H100
(tools/measure_short_prefill.py, data/measurements/h100_short_prefill_2026-11-26.json)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import plan
from planner.physics.latency import (
    decode_step,
    mixed_iteration_ms,
    prefill,
    prefill_chunk_work_ms,
    shared_pass_gemm_ms,
)
from planner.physics.roofline import decode_work, prefill_work
from planner.scenario.scenario import parse_scenario, resolve
from tools.accuracy_report import load, summary

MEASURED = (Path(__file__).resolve().parents[1] / "data" / "measurements"
            / "h100_short_prefill_2026-11-26.json")


@pytest.fixture(scope="module")
def accuracy():
    return summary(load())


@pytest.fixture(scope="module")
def measured():
    return json.loads(MEASURED.read_text())


def test_prefill_from_64_tokens_up_within_10_percent_held_out(accuracy):
    """Source: measured: one-prompt prefills of 64-32,768 tokens of 14 shapes on an H100 and an H200
    (measure_physics.py from 512 tokens, measure_short_prefill.py from 64), each predicted with constants
    fitted without its model shape (leave-one-shape-out, tools/fit_engines.py). Issue 20's target: prompts
    from 64 tokens up within 10% at the median; the 64-768-token rows alone as well (before the refit they
    sat 21-41% above the measurement at 256-512 tokens on Llama-3.1-8B/70B bf16)."""
    n, median, _ = accuracy["graph.prefill64"]
    assert n >= 350 and median <= 0.10
    n, median, _ = accuracy["graph.prefill_short"]
    assert n >= 100 and median <= 0.10
    n, median, _ = accuracy["graph.prefill"]  # issue 10's 1,024+ target still holds
    assert median <= 0.08


def test_mixed_iterations_within_10_percent(accuracy):
    """Source: measured: 168 forward passes carrying 8-64 decodes (context 1,024/2,048) plus a fresh
    64/256/512-token prompt chunk, 12 shape/precision pairs on an H100, planned as the serving model
    composes an iteration (decode step + the chunk's work, one weight read), fitted and with the chunk's
    shape held out. Issue 20's target: within 10% at the median."""
    n, median, _ = accuracy["graph.mixed"]
    assert n >= 150 and median <= 0.10
    n, median, _ = accuracy["graph.mixed.fitted"]
    assert median <= 0.10


def test_several_prompts_in_one_pass_cost_their_tokens_compute(accuracy, measured):
    """Source: measured: 16 prompts of 64 tokens in one Llama-3.1-8B bf16 pass take as long as one prompt
    of 1,024 tokens (23.8 vs 24.8 ms on the H100): the GEMMs run over all the pass's tokens. A pass of
    several prompts, each chunk riding the ones before it, is planned within 10% at the median (held
    out); each chunk planned as if it rode an empty iteration misses by far more (16 x 64: the chunks'
    compute vanished under one weight read)."""
    rows = {(r["shape"], r["precision"], r["prompts"], r["prompt_len"]): r["ms"] for r in measured["prefill"]
            if r["tp_shard"] == 1}
    one_long = rows[("llama-3.1-8b", "bf16", 1, 1024)]
    assert rows[("llama-3.1-8b", "bf16", 16, 64)] == pytest.approx(one_long, rel=0.1)
    n, median, _ = accuracy["graph.multi"]
    assert n >= 40 and median <= 0.10
    assert accuracy["graph.multi.separate"][1] > 2 * median


def test_plan_of_a_256_token_prompt_is_about_one_weight_read(measured):
    """Source: measured: Llama-3.1-8B bf16 on an H100, 256 tokens in 8.92 ms, 64 in 7.25 ms (this file).
    Hand: the 8B's weights, 16.06 GB, take 4.79 ms at the H100's 3.35 TB/s: a 256-token prompt is about
    one weight read plus per-layer kernel costs. The graph plan lands within 10% of both rows, and never
    under the roofline of the same prompt."""
    ms = {r["prompt_len"]: r["ms"] for r in measured["prefill"]
          if r["shape"] == "llama-3.1-8b" and r["precision"] == "bf16" and r["prompts"] == 1}
    for tokens in (64, 256):
        p = plan({"model": "llama-3.1-8b", "gpu": "h100-sxm", "engine": "graph", "prompt_len": tokens,
                  "output_len": 1})
        assert p.latency.prefill_ms == pytest.approx(ms[tokens], rel=0.10), tokens
        assert p.latency.prefill_ms >= 16.06e9 / 3.35e12 * 1e3


def _deployment(engine: str = "graph", model: str = "llama-3.1-8b", weights: str = "bf16", tp: int = 1):
    return resolve(parse_scenario({"model": model, "gpu": "h100-sxm", "engine": engine, "weights": weights,
                                   "compute": "fp8" if weights == "fp8" else "bf16", "tp": tp}))


@settings(max_examples=40, deadline=None)
@given(decodes=st.integers(0, 512), chunk=st.integers(1, 8192), chunks=st.integers(1, 4),
       weights=st.sampled_from(["bf16", "fp8"]))
def test_no_iteration_is_faster_than_its_roofline(decodes, chunk, chunks, weights):
    """Invariant: the graph engine's efficiencies are fractions of the hardware (<= 1), so a prefill, and an
    iteration of decodes and prompt chunks, never takes less than the roofline of its work: all GEMM
    FLOPs at the datasheet peak, or the weights read once plus the KV read, at the datasheet bandwidth.
    The chunk's share of a shared pass is never negative.

    Source: invariant: the roofline of the pass's own work."""
    d = _deployment(weights=weights)
    e = d.efficiency
    assert all(0 < getattr(e, k) <= 1 for k in ("bandwidth", "quantized_bandwidth", "compute", "kv_bandwidth",
                                               "prefill_compute", "prefill_quantized_compute",
                                               "attention_compute"))
    pre = prefill(d, chunk)
    assert float(pre.total_ms) >= float(pre.bound_ms) - 1e-9
    total = float(mixed_iteration_ms(d, decodes, 2048, chunk, chunks))
    work = prefill_work(d, chunks * chunk)
    dec = decode_work(d, decodes, 2048)
    peak = d.gpu.peak_tflops(d.compute) * 1e12
    flops_ms = (float(work.gemm_flops) + float(dec.gemm_flops)) / peak * 1e3
    bytes_ms = (float(work.weight_bytes) + float(dec.kv_bytes)) / (d.gpu.hbm_tb_s * 1e12) * 1e3
    assert total >= max(flops_ms, bytes_ms) - 1e-9
    assert float(shared_pass_gemm_ms(d, chunk, decodes)) >= 0.0


def test_a_chunk_riding_an_empty_iteration_keeps_the_prefill_identity():
    """Hand: with nothing riding, an idle engine's iteration carrying a whole prompt lasts exactly its
    prefill (decode step at batch 0 plus the chunk's work), as before; with 64 decodes riding, the chunk
    costs more than alone (its compute no longer hides under the weight read) but less than its prefill
    (the weights are read once).

    Source: hand: the iteration composition of planner/serving/serving.py's docstring."""
    d = _deployment()
    for tokens in (64.0, 512.0, 4096.0):
        idle = float(decode_step(d, 0, 1).total_ms) + float(prefill_chunk_work_ms(d, tokens))
        assert idle == pytest.approx(float(prefill(d, tokens).total_ms), rel=1e-9)
        alone = float(prefill_chunk_work_ms(d, tokens))
        riding = float(prefill_chunk_work_ms(d, tokens, 0, 64.0))
        assert alone <= riding < float(prefill(d, tokens).total_ms)
    alone_ms = float(prefill(d, 512.0).total_ms)
    assert float(mixed_iteration_ms(d, 0, 1, 512.0)) == pytest.approx(alone_ms, rel=1e-9)


def test_measured_mixed_iteration_reads_the_weights_once(measured):
    """Source: measured: on the H100 every mixed pass (decodes + chunk) took less than the decode step and
    the chunk's prefill measured apart (the weights are read once, not twice) and more than the decode
    step alone; the planner's iteration agrees in both directions for every one of these rows."""
    for r in measured["mixed"]:
        if r["prefill_alone_ms"] is None:
            continue
        assert r["decode_alone_ms"] < r["ms"] < r["decode_alone_ms"] + r["prefill_alone_ms"]
    d = _deployment()
    for n in (8, 64):
        for chunk in (64.0, 512.0):
            total = float(mixed_iteration_ms(d, n, 2048, chunk))
            assert float(decode_step(d, n, 2048).total_ms) < total
            assert total < float(decode_step(d, n, 2048).total_ms) + float(prefill(d, chunk).total_ms)
    assert np.isfinite(total)


def _moe_deployment(weights: str = "bf16"):
    return resolve(parse_scenario({"model": "qwen3-235b-a22b", "gpu": "h100-sxm", "tp": 8, "weights": weights,
                                   "prompt_len": 128, "output_len": 4}))


@settings(max_examples=30, deadline=None)
@given(decodes=st.integers(0, 512), chunk=st.integers(1, 8192), chunks=st.integers(1, 8),
       weights=st.sampled_from(["bf16", "fp8"]))
def test_no_moe_iteration_is_faster_than_its_roofline(decodes, chunk, chunks, weights):
    """Source: invariant: an MoE iteration whose prompt chunks share the pass's expert read (Qwen3-235B-A22B
    at TP 8 on H100) still lasts at least the roofline of its work: all its GEMM FLOPs at the datasheet
    peak, or the weights its tokens touch (each routed expert some token selects, read once) plus the
    decodes' KV, at the datasheet bandwidth."""
    d = _moe_deployment(weights)
    total = float(mixed_iteration_ms(d, decodes, 2048, chunk, chunks))
    work = prefill_work(d, decodes + chunks * chunk)
    dec = decode_work(d, decodes, 2048)
    peak = d.gpu.peak_tflops(d.compute) * 1e12
    flops_ms = (float(prefill_work(d, chunks * chunk).gemm_flops) + float(dec.gemm_flops)) / peak * 1e3
    bytes_ms = (float(work.weight_bytes) + float(dec.kv_bytes)) / (d.gpu.hbm_tb_s * 1e12) * 1e3
    assert total >= max(flops_ms, bytes_ms) - 1e-9


def test_moe_chunks_riding_one_pass_read_its_experts_once():
    """Source: invariant: prompt chunks riding one MoE pass share its expert read (Qwen3-235B-A22B bf16 at
    TP 8 on H100): an idle iteration of one 8,192-token chunk lasts exactly its prefill, and 64 chunks of 128
    tokens (the same tokens through the same GEMMs and experts; a 128-token prompt alone reads nearly every
    expert) cost at most 1.5x that, where summing each chunk's work alone gave 64 x 28 ms = 1.8 s against
    277 ms. A chunk riding 256 decodes adds less than it costs alone (the decodes already read the
    experts)."""
    d = _moe_deployment()
    whole = float(mixed_iteration_ms(d, 0, 1, 8192.0))
    assert whole == pytest.approx(float(prefill(d, 8192.0).total_ms), rel=1e-9)
    assert float(mixed_iteration_ms(d, 0, 1, 128.0, 64)) <= 1.5 * whole
    decodes = float(decode_step(d, 256, 2048).total_ms)
    riding = float(mixed_iteration_ms(d, 256, 2048, 128.0)) - decodes
    assert 0.0 < riding < float(prefill_chunk_work_ms(d, 128.0))
