"""Disaggregated prefill/decode: KV transfer, worker capacities, worker counts, and the mode comparison."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import ScenarioError
from planner.disaggregation import decode_worker, kv_transfer_ms, prefill_worker, size_fleet
from planner.scenario import parse_scenario, resolve
from planner.serving_modes import size_with_modes


def deployment(**scenario):
    return resolve(parse_scenario(scenario))


def test_kv_transfer_of_a_2000_token_prompt():
    """Llama-3.1-70B bf16 KV: 80 layers x 2 x 8 heads x 128 x 2 B = 327,680 B per token; 2,000 tokens =
    655.36 MB. A tp 4 prefill worker sends to a tp 2 decode worker over min(4, 2) = 2 NICs of 50 GB/s at
    0.9: 655.36e6 / (2 x 45e9) = 7.282 ms, plus 10 us latency = 7.292 ms.

    Source: hand: the derivation above."""
    p = deployment(model="llama-3.1-70b", gpu="h100-sxm", tp=4)
    d = deployment(model="llama-3.1-70b", gpu="h100-sxm", tp=2)
    assert kv_transfer_ms(p, d, 2000) == pytest.approx(7.2918, rel=1e-4)


def test_mla_transfer_is_small():
    """DeepSeek-V3's MLA cache is (512 + 64) x 61 layers x 1 B (fp8) = 35,136 B per token, 14x less than
    Llama-70B's bf16 GQA cache: 2,000 tokens over one 50 GB/s NIC at 0.9 = 1.562 ms + 10 us.

    Source: hand: the derivation above."""
    p = deployment(model="deepseek-v3", gpu="h200", tp=1, ep=8, weights="fp8", kv_cache="fp8")
    assert kv_transfer_ms(p, p, 2000) == pytest.approx(35136 * 2000 / 45e9 * 1e3 + 0.010, rel=1e-6)


def test_prefill_worker_capacity_follows_its_slots():
    """A dense tp 8 worker runs one prompt at a time; a pp 2 worker two (one per stage); an EP 8 worker
    with tp 1 runs eight at once (one per attention group).

    Source: invariant: capacity = slots / prefill time."""
    tp8 = prefill_worker(deployment(model="llama-3.1-70b", gpu="h100-sxm", tp=8), 2000)
    assert tp8.prompts_per_s == pytest.approx(1000.0 / tp8.prefill_ms)
    pp2 = prefill_worker(deployment(model="llama-3.1-70b", gpu="h100-sxm", tp=4, pp=2), 2000)
    assert pp2.prompts_per_s == pytest.approx(2000.0 / pp2.prefill_ms)
    ep8 = prefill_worker(deployment(model="deepseek-v3", gpu="h200", tp=1, ep=8, weights="fp8"), 2000)
    assert ep8.prompts_per_s == pytest.approx(8000.0 / ep8.prefill_ms) and ep8.gpus == 8


def test_fleet_counts_meet_the_objectives():
    """Decode workers = ceil(10 req/s x 400 tokens / one worker's tokens/s); TTFT within the objective.

    Source: hand: the ceiling stated above."""
    p = prefill_worker(deployment(model="llama-3.1-70b", gpu="h100-sxm", tp=4, weights="fp8"), 2000)
    d = decode_worker(deployment(model="llama-3.1-70b", gpu="h100-sxm", tp=4, weights="fp8"), 2400, 2200, 50.0)
    f = size_fleet(p, d, 10.0, 2000, 400, 2000.0)
    assert f.decode_workers == math.ceil(10.0 * 400 / d.output_tokens_per_s)
    assert f.ttft_ms <= 2000.0 and d.itl_ms <= 50.0 and 0 < f.prefill_utilization < 1


@settings(max_examples=25, deadline=None)
@given(rate=st.floats(0.5, 200.0), more=st.floats(1.0, 4.0))
def test_more_traffic_never_fewer_workers(rate, more):
    """Source: invariant"""
    p = prefill_worker(deployment(model="llama-3.1-8b", gpu="h100-sxm", weights="fp8"), 1000)
    d = decode_worker(deployment(model="llama-3.1-8b", gpu="h100-sxm", weights="fp8"), 1300, 1150, 40.0)
    a = size_fleet(p, d, rate, 1000, 300, 1500.0)
    b = size_fleet(p, d, rate * more, 1000, 300, 1500.0)
    assert a is not None and b is not None
    assert b.prefill_workers >= a.prefill_workers and b.decode_workers >= a.decode_workers


REQUEST = {"model": "llama-3.1-70b", "traffic": {"requests_per_s": 10.0, "prompt_len": 2000, "output_len": 400},
           "slo": {"ttft_ms": 2000.0, "itl_ms": 50.0}, "gpus": ["h100-sxm", "h200"], "weights": ["fp8"],
           "kv_cache": ["fp8"]}


def test_disaggregated_options_with_worker_counts_appear_and_the_verdict_explains():
    """Source: contract: options carry mode, prefill_workers, decode_workers and both configurations;
    assumptions.modes names the winner and why."""
    r = size_with_modes({**REQUEST, "disaggregation": True})
    modes = {o["mode"] for o in r["options"]}
    assert modes == {"aggregated", "disaggregated"}
    dis = next(o for o in r["options"] if o["mode"] == "disaggregated")
    assert dis["prefill_workers"] >= 1 and dis["decode_workers"] >= 1
    assert {"gpu", "tp", "pp", "ep", "gpus_per_worker"} <= set(dis["prefill"]) and "batch" in dis["decode"]
    assert dis["gpus_total"] == (dis["prefill_workers"] * dis["prefill"]["gpus_per_worker"]
                                 + dis["decode_workers"] * dis["decode"]["gpus_per_worker"])
    verdict = r["assumptions"]["modes"]
    cheapest = r["options"][0]
    assert verdict["winner"] == cheapest["mode"] and verdict["why"]
    agg = next(o for o in r["options"] if o["mode"] == "aggregated")
    assert agg["prefill_workers"] is None and agg["decode_workers"] is None


def test_disaggregated_wins_when_prefill_interference_hurts():
    """Long prompts and a tight ITL: aggregated replicas must keep their batch small to leave room for
    the prefills beside decode; split pools let decode run its full batch. The disaggregated fleet is
    cheaper here and the verdict says so.

    Source: invariant: the cheapest option's mode is the declared winner."""
    r = size_with_modes({**REQUEST, "traffic": {"requests_per_s": 20.0, "prompt_len": 8000, "output_len": 300},
                         "context_len": 8400, "disaggregation": True})
    assert r["options"][0]["mode"] == "disaggregated"
    assert r["assumptions"]["modes"]["winner"] == "disaggregated"
    aggregated = [o for o in r["options"] if o["mode"] == "aggregated"]
    assert not aggregated or aggregated[0]["usd_per_hour"] > r["options"][0]["usd_per_hour"]


def test_mixed_gpu_pools_for_moe_with_ep():
    """Source: contract: prefill_gpus and decode_gpus give each pool its own GPU type; ep spreads experts."""
    r = size_with_modes({"model": "deepseek-v3", "traffic": {"requests_per_s": 20.0, "prompt_len": 2000, "output_len": 300},
                         "slo": {"ttft_ms": 3000.0, "itl_ms": 100.0}, "weights": ["fp8"], "kv_cache": ["fp8"],
                         "tp": [1, 8], "ep": [1, 8, 16], "disaggregation": True,
                         "prefill_gpus": ["b200"], "decode_gpus": ["h200"]})
    dis = [o for o in r["options"] if o["mode"] == "disaggregated"]
    assert dis and all(o["prefill"]["gpu"] == "b200" and o["decode"]["gpu"] == "h200" for o in dis)


def test_without_the_flag_the_result_is_the_aggregated_search():
    """Source: contract: `disaggregation` defaults to false; options gain only `mode` and null worker counts."""
    r = size_with_modes(REQUEST)
    assert {o["mode"] for o in r["options"]} == {"aggregated"} and "modes" not in r["assumptions"]


@pytest.mark.parametrize("extra, field", [
    ({"disaggregation": "yes"}, "disaggregation"), ({"pp": [0]}, "pp.0"), ({"ep": [2], "disaggregation": True}, "ep"),
    ({"prefill_gpus": ["nope"], "disaggregation": True}, "prefill_gpus.0"),
])
def test_bad_mode_fields_are_one_line_errors(extra, field):
    """Source: contract: one `field: reason` line."""
    with pytest.raises(ScenarioError) as err:
        size_with_modes({**REQUEST, **extra})
    assert err.value.field == field and "\n" not in str(err.value)


def test_sizing_hints_the_cheapest_layout_across_nodes():
    """405B bf16 with fp8 KV on H100: even tp 8 cannot hold 811.7 GB of weights (101 GB per GPU > 74.97 GB
    usable), so the search says which layout would: 12 GPUs (tp 4 x pp 3, 2 nodes), as the plan's hint.
    fp8 weights fit at tp 8, so no hint for them.

    Source: hand: 811.7 / 8 = 101.5 GB > 85.52 x 0.9 - 2 = 74.97 GB; 12 GPUs hold 68.3 GB each."""
    r = size_with_modes({**REQUEST, "model": "llama-3.1-405b", "gpus": ["h100-sxm"], "weights": ["bf16", "fp8"],
                         "slo": {"ttft_ms": 3000.0, "itl_ms": 80.0}})
    assert r["fit_hints"] == [{"gpu": "h100-sxm", "weights": "bf16", "kv_cache": "fp8", "smallest_layout_that_fits":
                               {"tp": 4, "pp": 3, "ep": 1, "gpus_per_replica": 12, "nodes_per_replica": 2}}]
