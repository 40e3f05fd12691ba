"""Disaggregated prefill/decode: KV transfer, worker capacities, worker counts, and the mode comparison."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import ScenarioError
from planner.scenario.scenario import parse_scenario, resolve
from planner.serving.disaggregation import decode_worker, kv_transfer_ms, prefill_worker, size_fleet
from planner.serving.serving_modes import size_with_modes

# the serving model used to warn at unstable points (0 x log(inf)); these tests run with warnings as errors
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")


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
    """The prefill worker is the serving model's prefill queue (planner.serving.serving, no decode): one
    prompt's service is S = W + n D(0) / C with W = prefill(P) - D(0) (the extra time a whole prompt adds to
    an empty iteration), n = P = 2,000 prompt tokens and C = 8,192 - 0 the iteration's token budget, so one
    queue's capacity is 1 / (prefill(P) - D(0) (1 - 2000 / 8192)). A dense tp 8 worker is one such queue; a pp
    2 worker two (one prompt per stage); an EP 8 worker with tp 1 eight (one per attention group).

    Source: hand: the derivation above, from planner.serving.serving's documented prefill queue."""
    from planner.physics.latency import decode_step, prefill

    def one_queue_per_s(d):
        d0 = float(decode_step(d, 0.0, 2000.0).total_ms)
        return 1000.0 / (float(prefill(d, 2000).total_ms) - d0 * (1.0 - 2000.0 / 8192.0))

    tp8_d = deployment(model="llama-3.1-70b", gpu="h100-sxm", tp=8)
    tp8 = prefill_worker(tp8_d, 2000)
    assert tp8.slots == 1 and tp8.prompts_per_s == pytest.approx(one_queue_per_s(tp8_d), rel=1e-3)
    pp2_d = deployment(model="llama-3.1-70b", gpu="h100-sxm", tp=4, pp=2)
    pp2 = prefill_worker(pp2_d, 2000)
    assert pp2.slots == 2 and pp2.prompts_per_s == pytest.approx(2 * one_queue_per_s(pp2_d), rel=1e-3)
    ep8_d = deployment(model="deepseek-v3", gpu="h200", tp=1, ep=8, weights="fp8")
    ep8 = prefill_worker(ep8_d, 2000)
    assert ep8.slots == 8 and ep8.gpus == 8
    assert ep8.prompts_per_s == pytest.approx(8 * one_queue_per_s(ep8_d), rel=1e-3)


def test_pools_at_a_trickle_are_the_step_physics():
    """At a trickle the serving model's prefill worker answers in one iteration carrying the whole prompt,
    which lasts exactly prefill(P) (planner.physics.latency.prefill_chunk_work_ms), plus the engine's TTFT
    overhead; the decode worker holds almost no sequences, so a token sees a batch of 1 + Poisson(~0) = 1 and
    its ITL is decode_step(1) at the mean context P + O / 2 = 2,200 (its one computed prompt token adds < 1%).

    Source: hand: the two limits above."""
    from planner.physics.latency import decode_step, prefill
    from planner.serving.disaggregation import TrafficShape
    from planner.serving.distributions import latency_percentiles
    from planner.serving.replica import load_point

    d = deployment(model="llama-3.1-70b", gpu="h100-sxm", tp=4, weights="fp8", kv_cache="fp8")
    shape = TrafficShape(2000, 400)
    p = prefill_worker(d, shape)
    ttft = latency_percentiles(p.model, load_point(p.model, 1e-9))[0]
    assert ttft.p50 == pytest.approx(
        float(prefill(d, 2000).total_ms) + d.efficiency.ttft_overhead_ms, rel=0.01
    )
    dw = decode_worker(d, 2400, shape, 50.0)
    itl = latency_percentiles(dw.model, load_point(dw.model, 1e-9))[1]
    assert itl.p50 == pytest.approx(float(decode_step(d, 1.0, 2200.0).total_ms), rel=0.01)


def test_fleet_counts_meet_the_objectives():
    """Decode workers = ceil(10 req/s / one worker's confirmed rate under the p90 ITL objective); prefill
    workers the fewest whose p90 TTFT (queue + prefill, then the KV transfer and the first decode step) meets
    the objective both in the fast model and at the top of the plan's simulated range (queue_bands: the
    prefill TTFT's band at the prefill slot's load, the first step's ITL band at the decode worker's), with
    each slot at most 95% busy: one fewer breaks one of these.

    Source: hand: the two ceilings stated above, each check recomputed from the plan's own queue bands."""
    from planner.serving.disaggregation import TrafficShape
    from planner.serving.distributions import latency_percentiles
    from planner.serving.queue_bands import queue_band
    from planner.serving.replica import load_point

    d = deployment(model="llama-3.1-70b", gpu="h100-sxm", tp=4, weights="fp8", kv_cache="fp8")
    shape = TrafficShape(2000, 400)
    p = prefill_worker(
        deployment(model="llama-3.1-70b", gpu="h100-sxm", tp=1, weights="fp8", kv_cache="fp8"), shape
    )
    dw = decode_worker(d, 2400, shape, 50.0)
    f = size_fleet(p, dw, 10.0, 2000, 400, 2000.0)
    assert f.decode_workers == math.ceil(10.0 / dw.goodput_per_s)
    assert f.ttft_ms <= 2000.0 and f.itl_ms <= 50.0 and 0 < f.prefill_utilization <= 0.95
    assert f.ttft_simulated_high_ms <= 2000.0 * (1 + 1e-9) and f.itl_simulated_high_ms <= 50.0 * (1 + 1e-9)
    assert 0 < f.decode_utilization <= 0.95 and f.slot_wait_probability == 0.0
    assert f.prefill_workers >= 2  # one 1-GPU worker's capacity is below 10 prompts/s of 2,000 tokens

    def top_ms(workers: int) -> float:
        """The fleet's p90 TTFT at the simulated range's top with this many prefill workers (inf: over
        95%)."""
        rate = 10.0 / (workers * p.slots) / 1000.0
        load = rate / float(p.model.capacity_per_ms())
        ttft = latency_percentiles(p.model, load_point(p.model, rate))[0].p90
        band = queue_band("ttft_p90", ttft, load, 1.0, False)
        if band is None:
            return math.inf
        decode_rate = 10.0 / f.decode_workers / 1000.0
        first = queue_band("itl_p90", f.itl_ms, decode_rate / float(dw.model.capacity_per_ms()), 1.0, False)
        return band.high + f.kv_transfer_ms + first.high

    assert top_ms(f.prefill_workers) == pytest.approx(f.ttft_simulated_high_ms, rel=1e-4)
    assert top_ms(f.prefill_workers - 1) > 2000.0


def test_bursty_arrivals_need_at_least_as_many_prefill_workers():
    """The serving model's prefill queue: its wait grows with arrival_cv, so bursty arrivals never need fewer
    prefill workers. By hand, a prefill worker of Llama-3.1-8B bf16 on one H100 (ideal engine) takes an
    8,192-token prompt in one iteration of S = 147.1406 ms (tests/test_roofline.py), one at a time: with a
    TTFT objective it meets up to capacity (100 s), the pool is sized by the headroom alone (each worker at
    most 95% busy, the simulated range's top load), ceil(rate x S / 0.95) workers: ceil(0.775) = 1,
    ceil(3.098) = 4 and ceil(6.196) = 7 at 5, 20 and 40 requests/s.

    Source: hand: a single server's capacity 1 / S, the 95% headroom and the counts above."""
    from planner.serving.disaggregation import TrafficShape

    prefill_d = deployment(model="llama-3.1-70b", gpu="h100-sxm", tp=1, weights="fp8", kv_cache="fp8")
    decode_d = deployment(model="llama-3.1-70b", gpu="h100-sxm", tp=4, weights="fp8", kv_cache="fp8")
    fleets = []
    for cv in (1.0, 3.0):
        shape = TrafficShape(2000, 400, arrival_cv=cv)
        fleets.append(size_fleet(prefill_worker(prefill_d, shape), decode_worker(decode_d, 2400, shape, 50.0),
                                 10.0, 2000, 400, 1000.0))
    poisson, bursty = fleets
    assert bursty.prefill_workers >= poisson.prefill_workers
    assert bursty.prefill_workers > poisson.prefill_workers or bursty.ttft_ms > poisson.ttft_ms
    ideal = deployment(model="llama-3.1-8b", gpu="h100-sxm", efficiency="ideal")
    shape = TrafficShape(8192, 400)
    worker = prefill_worker(ideal, shape)
    assert worker.prompts_per_s == pytest.approx(1000.0 / 147.1406, rel=1e-3)
    for rate, workers in ((5.0, 1), (20.0, 4), (40.0, 7)):
        fleet = size_fleet(worker, decode_worker(ideal, 8592, shape, 50.0), rate, 8192, 400, 100_000.0)
        assert fleet.prefill_workers == workers, rate


@settings(max_examples=25, deadline=None)
@given(rate=st.floats(0.5, 200.0), more=st.floats(1.0, 4.0))
def test_more_traffic_never_fewer_workers(rate, more):
    """Source: invariant"""
    from planner.serving.disaggregation import TrafficShape

    shape = TrafficShape(1000, 300)
    p = prefill_worker(deployment(model="llama-3.1-8b", gpu="h100-sxm", weights="fp8"), shape)
    d = decode_worker(deployment(model="llama-3.1-8b", gpu="h100-sxm", weights="fp8"), 1300, shape, 40.0)
    a = size_fleet(p, d, rate, 1000, 300, 1500.0)
    b = size_fleet(p, d, rate * more, 1000, 300, 1500.0)
    assert a is not None and b is not None
    assert b.prefill_workers >= a.prefill_workers and b.decode_workers >= a.decode_workers


REQUEST = {
    "model": "llama-3.1-70b", "traffic": {"requests_per_s": 10.0, "prompt_len": 2000, "output_len": 400},
    "slo": {"ttft_ms": 2000.0, "itl_ms": 50.0}, "gpus": ["h100-sxm", "h200"], "weights": ["fp8"],
    "kv_cache": ["fp8"],
}


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
    """Long prompts and a tight ITL at p99: an 8,000-token prompt nearly fills one 8,192-token iteration, so
    in an aggregated replica every arriving prompt stretches an iteration that all its decoding sequences'
    tokens wait for; at 20 req/s over ~300-token outputs those stretched iterations are far more than 1% of
    a replica's iterations unless it runs far below capacity. Split pools keep prompt chunks off decode
    workers. The disaggregated fleet is cheaper here and the verdict says so (at p90 ITL 50 ms the
    stretched iterations fall in the untested 10% and aggregated replicas win).

    Source: invariant: the cheapest option's mode is the declared winner."""
    r = size_with_modes(
        {
            **REQUEST,
            "traffic": {"requests_per_s": 20.0, "prompt_len": 8000, "output_len": 300},
            "slo": {"ttft_ms": 2000.0, "itl_ms": 30.0, "percentile": 99}, "context_len": 8400,
            "disaggregation": True,
        }
    )
    assert r["options"][0]["mode"] == "disaggregated"
    assert r["assumptions"]["modes"]["winner"] == "disaggregated"
    aggregated = [o for o in r["options"] if o["mode"] == "aggregated"]
    assert not aggregated or aggregated[0]["usd_per_hour"] > r["options"][0]["usd_per_hour"]


def test_mixed_gpu_pools_for_moe_with_ep():
    """Source: contract: prefill_gpus and decode_gpus give each pool its own GPU type; ep spreads experts."""
    r = size_with_modes(
        {
            "model": "deepseek-v3",
            "traffic": {"requests_per_s": 20.0, "prompt_len": 2000, "output_len": 300},
            "slo": {"ttft_ms": 3000.0, "itl_ms": 100.0}, "weights": ["fp8"], "kv_cache": ["fp8"],
            "tp": [1, 8], "ep": [1, 8, 16], "disaggregation": True, "prefill_gpus": ["b200"],
            "decode_gpus": ["h200"],
        }
    )
    dis = [o for o in r["options"] if o["mode"] == "disaggregated"]
    assert dis and all(o["prefill"]["gpu"] == "b200" and o["decode"]["gpu"] == "h200" for o in dis)


def test_without_the_flag_the_result_is_the_aggregated_search():
    """Source: contract: `disaggregation` defaults to false; options gain only `mode` and null worker
    counts."""
    r = size_with_modes(REQUEST)
    assert {o["mode"] for o in r["options"]} == {"aggregated"} and "modes" not in r["assumptions"]


@pytest.mark.parametrize(
    "extra, field",
    [
        ({"disaggregation": "yes"}, "disaggregation"), ({"pp": [0]}, "pp.0"),
        ({"ep": [2], "disaggregation": True}, "ep"),
        ({"prefill_gpus": ["nope"], "disaggregation": True}, "prefill_gpus.0"),
    ],
)
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
    r = size_with_modes(
        {
            **REQUEST,
            "model": "llama-3.1-405b", "gpus": ["h100-sxm"], "weights": ["bf16", "fp8"],
            "slo": {"ttft_ms": 3000.0, "itl_ms": 80.0},
        }
    )
    assert r["fit_hints"] == [
        {
            "gpu": "h100-sxm", "weights": "bf16", "kv_cache": "fp8",
            "smallest_layout_that_fits": {
                "tp": 4, "pp": 3, "ep": 1, "gpus_per_replica": 12, "nodes_per_replica": 2,
            },
        }
    ]


def test_decode_worker_scenario_plans_the_options_decode_pool():
    """A disaggregated option's decode worker, opened as a scenario (planner.serving.serving_modes), plans at
    the rate each worker runs with the prompt's KV already there: its ITL at the objective's percentile is the
    option's own, so it meets the objective the fleet was sized for (not a single-pool plan missing it).
    Source: contract: the option's decode ITL and the plan's serving ITL come from one serving model."""
    from planner import plan_dict
    from planner.serving.serving_modes import decode_worker_scenario, size_with_modes

    request = {
        "model": "llama-3.1-70b", "traffic": {"requests_per_s": 10.0, "prompt_len": 8000, "output_len": 300},
        "slo": {"ttft_ms": 2000.0, "itl_ms": 50.0}, "gpus": ["h100-sxm"], "tp": [2, 4], "weights": ["fp8"],
        "kv_cache": ["fp8"], "disaggregation": True,
    }
    option = next(o for o in size_with_modes(request)["options"] if o["mode"] == "disaggregated")
    scenario = decode_worker_scenario(option, request)
    assert (scenario["gpu"], scenario["tp"]) == (option["decode"]["gpu"], option["decode"]["tp"])
    assert scenario["load"]["prefix_cache_hit"] == 1.0
    serving = plan_dict(scenario)["serving"]
    assert serving["itl_ms"]["p90"] == pytest.approx(option["itl_ms"], rel=1e-6)
    assert serving["itl_ms"]["p90"] <= 50.0
    assert isinstance(option["validated"], bool)
    with pytest.raises(ScenarioError):
        decode_worker_scenario({"mode": "aggregated"}, request)


def test_a_gpu_the_catalog_does_not_hold_is_not_validated():
    """Source: contract: validation is catalog data; a custom GPU object or unknown id has none."""
    from planner.hardware.validated import is_validated

    assert is_validated("my-custom-gpu") is False
    # the catalog's flags (gpu_catalog/gpus.toml, with their evidence): our H100 SXM runs, B200's public
    # serving runs (issue 20); no rows of Gaudi 3 or its generation
    assert is_validated("h100-sxm") is True and is_validated("b200") is True
    assert is_validated("gaudi3") is False


# --- issue 31: deployable pools, one fleet in the banner, the table and the opened plan -------------------

# the issue's case: Llama-3.1-70B fp8, 2,000-token prompts, 400 out, 50 req/s, p90 TTFT <= 1 s, ITL <= 50 ms
ISSUE_31 = {
    "model": "llama-3.1-70b", "traffic": {"requests_per_s": 50.0, "prompt_len": 2000, "output_len": 400},
    "slo": {"ttft_ms": 1000.0, "itl_ms": 50.0, "percentile": 90}, "weights": ["fp8"], "kv_cache": ["fp8"],
    "gpus": ["h100-sxm", "h200", "b200", "mi355x", "mi350x", "gaudi3"], "disaggregation": True,
}


def test_pools_pair_within_one_vendor_over_a_documented_kv_path():
    """No engine documents moving a KV cache between two vendors' accelerators (vLLM's NixlConnector guide,
    SGLang's PD disaggregation page, TensorRT-LLM's cache transceiver: each between workers of one platform),
    so every disaggregated option of the issue's case runs both pools on one vendor (B200 prefill with MI350X
    decode was option 1 before), and names the engine's path for that vendor: vLLM (the engine sizing plans
    with) moves it with NixlConnector on NVIDIA, AMD and Intel Gaudi alike.
    Source: docs: docs.vllm.ai features/nixl_connector_usage (ROCm: RIXL + UCX), docs.vllm.ai/projects/gaudi
    installation ('Plugin Deployment with NIXL'); vendors from gpu_catalog/gpus.toml."""
    from gpu_catalog import load_catalog

    catalog = load_catalog()
    r = size_with_modes(ISSUE_31)
    dis = [o for o in r["options"] if o["mode"] == "disaggregated"]
    assert dis
    for o in dis:
        vendor = catalog[o["prefill"]["gpu"]].vendor
        assert catalog[o["decode"]["gpu"]].vendor == vendor, (o["prefill"]["gpu"], o["decode"]["gpu"])
        path = o["kv_transfer_path"]
        assert (path["vendor"], path["engine"]) == (vendor, "vllm") and "NixlConnector" in path["path"]
        assert path["source"].startswith("https://")


def test_a_custom_gpu_that_names_no_vendor_gets_no_disaggregated_pool():
    """Source: contract: a GPU object without `vendor` cannot be matched to a documented KV-transfer path, so
    it pairs with nothing (its aggregated options stay)."""
    from gpu_catalog import custom_gpu_template

    custom = custom_gpu_template("h100-sxm", "my accelerator")
    assert "vendor" not in custom
    r = size_with_modes({**REQUEST, "gpus": [custom], "disaggregation": True})
    assert r["options"] and {o["mode"] for o in r["options"]} == {"aggregated"}


def test_each_pool_carries_its_gpus_and_dollars_which_sum_to_the_option():
    """A pool's GPUs are its workers x GPUs per worker and its $/hour those GPUs at its GPU's price; the two
    pools sum to the option's GPUs and $/hour (the figures the banner and the opened fleet show). B200 at the
    catalog's $4.99 per GPU-hour (Lambda Cloud's 8x B200 listing): 10 one-GPU workers cost $49.90/h.
    Source: hand: workers x GPUs per worker x $/GPU-hour, worked above for B200."""
    r = size_with_modes(ISSUE_31)
    dis = [o for o in r["options"] if o["mode"] == "disaggregated"]
    for o in dis:
        pre, dec = o["prefill"], o["decode"]
        for pool, workers in ((pre, o["prefill_workers"]), (dec, o["decode_workers"])):
            assert pool["workers"] == workers and pool["gpus"] == workers * pool["gpus_per_worker"]
            assert pool["usd_per_hour"] == pytest.approx(pool["gpus"] * pool["usd_per_gpu_hour"], rel=1e-12)
        assert pre["gpus"] + dec["gpus"] == o["gpus_total"]
        assert pre["usd_per_hour"] + dec["usd_per_hour"] == pytest.approx(o["usd_per_hour"], rel=1e-12)
    b200 = [p for o in dis for p in (o["prefill"], o["decode"]) if p["gpu"] == "b200"]
    assert b200 and all(p["usd_per_hour"] == pytest.approx(4.99 * p["gpus"]) for p in b200)


def test_the_verdict_names_the_options_it_compares_in_the_order_shown():
    """The verdict compares the first aggregated and the first disaggregated option of the list it is given
    and names them by number; reordered (validated GPUs first, as the page shows them), it names the
    reordered list's options and their $/hour, never a fleet the table does not show first.
    Source: contract: assumptions.modes and planner.serving.serving_modes.modes_verdict."""
    from planner.serving.serving_modes import modes_verdict

    r = size_with_modes(ISSUE_31)
    options = r["options"]
    verdict = r["assumptions"]["modes"]
    for mode in ("aggregated", "disaggregated"):
        n = verdict[f"{mode}_option"]
        assert options[n - 1]["mode"] == mode
        assert all(o["mode"] != mode for o in options[: n - 1])
        assert f"${options[n - 1]['usd_per_hour']:.2f}/h" in verdict["why"]
    reordered = sorted(options, key=lambda o: not o.get("validated"))
    again = modes_verdict(reordered)
    dis = reordered[again["disaggregated_option"] - 1]
    assert dis["mode"] == "disaggregated" and f"option {again['disaggregated_option']}" in again["why"]
    if again["winner"] == "disaggregated":
        assert f"{dis['gpus_total']} GPUs at ${dis['usd_per_hour']:.2f}/h" in again["why"]
        assert f"on {dis['prefill']['gpu']} TP{dis['prefill']['tp']}" in again["why"]


def test_banner_table_and_opened_plan_are_one_fleet():
    """The sizing page over the issue's case: the banner names the table's option numbers and $/hour (the
    order shown, validated GPUs first); opening a disaggregated option shows both pools with their GPUs and
    $/hour, the same figures as its table row, and no single-pool fleet for the sidebar's traffic.
    Source: ui: the sizing page and the Plan view."""
    import json

    from streamlit.testing.v1 import AppTest

    from tests.test_app import APP, TIMEOUT, press_find

    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.query_params["size"] = json.dumps(ISSUE_31)
    at.run()
    at.radio(key="view").set_value("Size a fleet").run(timeout=TIMEOUT)
    press_find(at)  # a sizing link only fills the form (issue 32)
    assert not at.exception
    table = at.dataframe[0].value
    shown = sorted(at.session_state["sz_result"]["options"], key=lambda o: not o.get("validated"))
    banner = next(i.value for i in at.info if "wins." in i.value)
    n = next(i + 1 for i, o in enumerate(shown) if o["mode"] == "disaggregated")
    option = shown[n - 1]
    assert table.loc[n, "fleet $/hour"] == pytest.approx(option["usd_per_hour"])
    assert f"option {n}" in banner and f"${option['usd_per_hour']:.2f}/h" in banner
    at.number_input(key="sz_pick").set_value(n).run()
    at.button(key="sz_open").click().run()
    assert not at.exception
    text = " ".join(e.value for kind in ("markdown", "caption") for e in at.get(kind))
    for pool in (option["prefill"], option["decode"]):
        assert f"The pool: {pool['gpus']:,} GPU" in text and f"\\${pool['usd_per_hour']:,.2f}/hour" in text
    total = f"{option['gpus_total']:,} GPUs, \\${option['usd_per_hour']:,.2f}/hour"
    header = f"Option {n}: disaggregated fleet, {total}"
    assert header in text
    labels = [m.label for m in at.metric]
    assert not any(label.startswith("GPUs for ") for label in labels)  # no decode-worker-only fleet


def test_every_kv_transfer_path_names_its_engine_vendor_and_document():
    """Source: docs: planner/data/kv_transfer_paths.toml, each row's engine documentation (vLLM, SGLang,
    TensorRT-LLM, AMD ROCm, vLLM for Intel Gaudi pages named in its `source`)."""
    from gpu_catalog import load_catalog
    from planner.engines.base import SERVING_ENGINES
    from planner.engines.kv_transfer import kv_transfer_path, kv_transfer_paths

    vendors = {g.vendor for g in load_catalog().values()}
    rows = kv_transfer_paths()
    assert {(p.vendor, p.engine) for p in rows} >= {("nvidia", e) for e in SERVING_ENGINES} | {
        ("amd", "vllm"), ("amd", "sglang"), ("intel", "vllm")}
    for p in rows:
        assert p.vendor in vendors and p.engine in SERVING_ENGINES and p.source.startswith("https://")
    assert kv_transfer_path("amd", "trt-llm") is None  # TensorRT-LLM runs on NVIDIA GPUs only
    assert kv_transfer_path("NVIDIA", "graph") == kv_transfer_path("nvidia", "vllm")  # served by the default
    assert kv_transfer_path(None, "vllm") is None
