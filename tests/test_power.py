"""Issue 24: power at the operating point, power-capped sizing with cost tiers, mixed fleets routed by
length, context tiers, and InferenceX's tokens per provisioned MW for gpt-oss-120b."""

from __future__ import annotations

import dataclasses
import io
import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu_catalog import GpuSpec, get_gpu
from planner import ScenarioError, plan_dict
from planner.contract.cli import main
from planner.contract.context_tiers import context_tiers
from planner.contract.power_sizing import size_power, tokens_per_mw_at_interactivity
from planner.economics.plan_power import step_power
from planner.economics.power import (
    ALL_IN_KW_PER_TDP_KW,
    DEFAULT_ELECTRICITY_USD_PER_KWH,
    PowerSpec,
    energy_usd_per_million_tokens,
    gpu_power_w,
    joules_per_token,
    operating_power_w,
    operating_utilization,
    power_constants,
    power_spec,
    provisioned_kw,
    replica_power_w,
    site_power_w,
    step_gpu_power_w,
    step_utilization,
    tokens_per_s_per_provisioned_mw,
)
from planner.physics.latency import decode_step, prefill
from planner.scenario.scenario import parse_scenario, resolve
from planner.serving.mixed_fleet import (
    Lognormal,
    cheapest_split,
    lognormal_classes,
    mixed_fleet,
    pool_replicas,
)

EXAMPLES = Path(__file__).resolve().parents[1] / "data" / "examples"
# An H100 SXM with InferenceX's all-in figure: TDP 700 W (NVIDIA datasheet), idle 70 W (the 10% fallback),
# 1.73 kW all-in (InferenceX constants.ts).
H100 = PowerSpec(tdp_w=700.0, idle_power_w=70.0, provisioned_kw_all_in=1.73, origin={})


# --- the power model, by hand -------------------------------------------------------------------

def test_gpu_power_is_idle_plus_the_busy_share_of_the_span_to_tdp():
    """Source: hand: 70 + (700 - 70) x 0.5 = 385 W; u = 0 gives idle, u = 1 TDP, u > 1 is clipped."""
    assert gpu_power_w(H100, 0.5) == pytest.approx(385.0)
    assert gpu_power_w(H100, 0.0) == pytest.approx(70.0)
    assert gpu_power_w(H100, 1.0) == pytest.approx(700.0)
    assert gpu_power_w(H100, 3.0) == pytest.approx(700.0)
    assert replica_power_w(385.0, 4) == pytest.approx(1540.0)


def test_step_power_adds_hbm_traffic_and_tensor_core_load_by_hand():
    """Source: hand: 121 W per TB/s and compute slope 2.23 (power.toml): 2.0 TB/s and 10% of the dense peak
    draw 70 + 242 + 630 x 2.23 x 0.1 = 452.49 W; 3.0 TB/s at 30% is 70 + 363 + 421.47 = 854.47 W, capped at
    the 700 W limit; nothing moving draws idle. A replica 60% of its time in prefill at 700 W and 40% in
    decode at 452.49 W draws 600.996 W."""
    assert step_gpu_power_w(H100, 2.0, 0.1) == pytest.approx(452.49)
    assert step_gpu_power_w(H100, 3.0, 0.3) == pytest.approx(700.0)
    assert step_gpu_power_w(H100, 0.0, 0.0) == pytest.approx(70.0)
    assert operating_power_w(0.6, 700.0, 452.49) == pytest.approx(600.996)


def _serving_power_points() -> list[tuple[str, dict]]:
    folder = Path(__file__).resolve().parents[1] / "data" / "measurements"
    files = {"h100-sxm": ["h100_power_serving_2026-11-27.json", "h100_power_serving_repeat_2026-11-27.json"],
             "h200": ["h200_power_serving_2026-11-27.json"]}
    return [(gpu, p) for gpu, names in files.items() for name in names
            for p in json.loads((folder / name).read_text())["points"]]


@pytest.mark.parametrize("gpu", ["h100-sxm", "h200"])
def test_board_power_within_15_percent_of_a_serving_decode_sweep(gpu):
    """Source: measured: NVIDIA H100 80GB HBM3 (two runs) and NVIDIA H200, driver 580.159.04, torch
    2.11.0+cu130, 700 W limit, 2026-11-27 (data/measurements/h*_power_serving_2026-11-27.json,
    tools/measure_power_serving.py): board power of real decode steps (Llama-3.1-8B TP 1 at batch 1-256,
    contexts 1k and 4k; a Llama-3.1-70B TP-4 rank at batch 1-256, context 2k) replayed back to back from
    CUDA graphs, and of 1k-8k-token prefills. The plan's watts for each step (the planner's own `graph` step
    of that shape, batch and context; the rank's all-reduce left out, as the measured rank ran none) are
    within 15% of the measured draw at every batch (issue 31's bar; the previous rule was 26-53% low at
    batch 64-256), and prefill within 5% (it ran at the power limit)."""
    deployments: dict[str, object] = {}
    checked = 0
    for point_gpu, p in _serving_power_points():
        if point_gpu != gpu:
            continue
        if p["shape"] not in deployments:
            model, tp = ("llama-3.1-8b", 1) if p["shape"].startswith("llama-3.1-8b") else ("llama-3.1-70b", 4)
            deployments[p["shape"]] = resolve(parse_scenario(
                {"model": model, "gpu": gpu, "tp": tp, "weights": "bf16", "kv_cache": "bf16",
                 "engine": "graph", "prompt_len": 1024, "output_len": 128}))
        d = deployments[p["shape"]]
        if p["kind"] == "decode":
            step = decode_step(d, float(p["batch"]), float(p["context"]))
        else:
            step = prefill(d, p["tokens"])
        step = dataclasses.replace(step, communication_ms=0.0)
        watts = step_power(d, step).gpu_w
        assert watts == pytest.approx(p["median_w"], rel=0.15 if p["kind"] == "decode" else 0.05), p
        checked += 1
    assert checked >= 23


def _held_out(gpu: str, shape: str) -> list[dict]:
    from tools.fit_power import held_out_points  # the tool that prints these figures computes them

    return [r for r in held_out_points() if (r["gpu"], r["shape"]) == (gpu, shape)]


@pytest.mark.parametrize("gpu", ["h100-sxm", "h200"])
@pytest.mark.parametrize("shape", ["qwen3-32b-tp2-rank", "llama-3.1-70b-tp4-rank-fp8"])
def test_board_power_within_15_percent_on_shapes_never_fitted(gpu, shape):
    """Source: measured: NVIDIA H100 80GB HBM3 and NVIDIA H200, driver 580.159.04, torch 2.11.0+cu130, CUDA
    13.0, 700 W limit, 2026-11-28 (data/measurements/h*_power_heldout_2026-11-28.json,
    tools/measure_power_serving.py --plan held-out): shapes the power rule was never fitted on, a Qwen3-32B
    rank at TP 2 (bf16, 16 of 64 layers) and the Llama-3.1-70B TP-4 rank with fp8 weights (per-tensor scales),
    decode at batch 1-256 (context 2,048) and 1k/4k-token prefills replayed from CUDA graphs. The shipped
    rule, unfitted, on the planner's own `graph` step: decode within 15% at every batch (H100 worst -6.2%,
    H200 worst +13.7%, fp8 at batch 64), prefill within 5% (at the power limit)."""
    rows = _held_out(gpu, shape)
    assert len(rows) == 8
    for r in rows:
        tolerance = 0.15 if r["kind"] == "decode" else 0.05
        assert r["plan_w"] == pytest.approx(r["measured_w"], rel=tolerance), r


MOE_POWER_GAP = ("MoE decode draws 13-30% more than the rule reads: the rule counts the experts' useful "
                 "FLOPs. The padded tiles explain most of it but not all (tests/test_power_moe_tiles.py, "
                 "2026-11-28): counting the rows of each kernel's own tile reads torch._grouped_mm (64 rows) "
                 "within 15% on both GPUs, yet a Triton grouped GEMM at BLOCK_M 16/64/128 misses at 17 of 72 "
                 "points before the rule's cap at the power limit (H100 tile 16 -26.1% at batch 256, tile "
                 "128 +19.4% at batch 32; H200 tile 128 +26.3% at batch 128), so the planner keeps the "
                 "useful FLOPs")


@pytest.mark.xfail(strict=True, reason=MOE_POWER_GAP)
@pytest.mark.parametrize("gpu", ["h100-sxm", "h200"])
def test_board_power_within_15_percent_on_a_mixture_of_experts(gpu):
    """Source: measured: the same runs, Qwen3-30B-A3B at TP 1 (24 of 48 layers; 128 experts, top 8, a fixed
    random routing, torch._grouped_mm): decode at batch 1-256 (context 1,024) reads 303-613 W on the H100
    and 295-685 W on the H200, where the rule says 223-472 W and 239-599 W (-22.9% to -29.8%, -12.5% to
    -19.3%); the planner's step time is the measured one within 4% on the H100. Prefill is within 2.5%. The
    draw depends on the experts' kernel: the same MoE with one cuBLAS GEMM per expert ran 5-56 ms steps at
    230-297 W, the grouped GEMM again 3.6-19 ms at 311-631 W (data/measurements/
    h100_power_moe_kernels_2026-11-28.json; within 3% of the first run)."""
    for r in _held_out(gpu, "qwen3-30b-a3b-tp1"):
        assert r["plan_w"] == pytest.approx(r["measured_w"], rel=0.15), r


def test_power_model_reproduces_the_h100_power_vs_load_measurement():
    """Source: measured: H100 SXM, driver 580.159.04, torch 2.11, 2026-11-26
    (data/measurements/h100_power_vs_load_2026-11-26.json): board power at 25-100% duty of a bf16 GEMM
    (0.79 of peak) and a bf16 GEMV (3.08 TB/s), idle 117.8 W. The rule was fitted on decode steps a day
    later, not on these kernels, so this is a held-out check: each phase's median is reproduced within 20%
    (worst: the GEMM at 50% duty, 632 W against 542 W, +16.6%: a lone GEMM in 20 ms bursts with idle gaps
    is not a serving step; the GEMV phases are 4-7% low, the full-duty GEMM at the limit), and the full-duty
    GEMV stays well under TDP."""
    data = json.loads((Path(__file__).resolve().parents[1] / "data" / "measurements"
                       / "h100_power_vs_load_2026-11-26.json").read_text())
    phases = {p["phase"]: p for p in data["phases"]}
    spec = PowerSpec(tdp_w=data["enforced_power_limit_w"], idle_power_w=phases["idle"]["median_w"],
                     provisioned_kw_all_in=1.73, origin={})
    checked = 0
    for name, p in phases.items():
        if name == "idle":
            continue
        kernel = name.split("_")[0]
        if kernel == "gemv":
            predicted = step_gpu_power_w(spec, p["duty"] * data["gemv_tb_s"], 0.0)
        else:  # H100 SXM datasheet dense bf16 peak 989.4 TFLOP/s
            predicted = step_gpu_power_w(spec, 0.0, p["duty"] * data["gemm_tflop_s"] / 989.4)
        assert predicted == pytest.approx(p["median_w"], rel=0.20), name
        checked += 1
    assert checked == 8
    assert (
        phases["gemv_100"]["median_w"] < 0.8 * data["enforced_power_limit_w"]
    )  # decode-like: well under TDP


def test_utilization_is_bound_over_step_time_weighted_by_phase_time():
    """Source: hand: a 6 ms bound in a 10 ms step is 0.6; 25% of the time in prefill at 0.9 and 75% in
    decode at 0.5 is 0.25 x 0.9 + 0.75 x 0.5 = 0.6."""
    assert step_utilization(6.0, 10.0) == pytest.approx(0.6)
    assert step_utilization(12.0, 10.0) == 1.0
    assert step_utilization(1.0, 0.0) == 0.0
    assert operating_utilization(0.25, 0.9, 0.5) == pytest.approx(0.6)


def test_site_power_joules_per_mw_and_energy_cost_by_hand():
    """Source: hand: 385 W of GPU x 1730 / 700 = 951.5 W all-in; at 1,000 tokens/s that is 0.9515 J per
    token; InferenceX's H100 figure 0.9 M tokens/s per MW at 1.73 kW is 1,557 tokens/s per GPU; 1 kW at
    1,000 tokens/s spends 1,000 s = 0.2778 kWh on a million tokens, x $0.081 = $0.0225."""
    site = site_power_w(H100, 385.0)
    assert site == pytest.approx(951.5)
    assert joules_per_token(site, 1000.0) == pytest.approx(0.9515)
    assert joules_per_token(site, 0.0) is None
    assert provisioned_kw(H100, 8) == pytest.approx(13.84)
    assert tokens_per_s_per_provisioned_mw(1557.0, 1.73) == pytest.approx(0.9e6)
    assert energy_usd_per_million_tokens(1000.0, 1000.0, 0.081) == pytest.approx(0.0225)
    assert energy_usd_per_million_tokens(1000.0, 0.0, 0.081) is None


def test_power_spec_reads_catalog_figures_and_falls_back_with_a_stated_origin():
    """Source: docs: the catalog's B200 (gpu_catalog: 1000 W TDP, InferenceX's 2.17 kW all-in) is read as
    given; a custom GPU without the figures takes 0.174 x TDP idle (the catalog's measured H100 idle
    121.6 / 700) and TDP x 10.2 kW / (8 x 0.7 kW) x PUE 1.3 = 2.368 x TDP all-in (the catalog's rule)."""
    b200 = power_spec(get_gpu("b200"))
    assert (b200.tdp_w, b200.provisioned_kw_all_in) == (1000.0, 2.17)
    assert b200.origin["provisioned_kw_all_in"] == "catalog"
    bare = power_spec(GpuSpec(name="custom", memory_gb=48, hbm_tb_s=1.0, tflops={"bf16": 300.0}, tdp_w=400.0))
    assert bare.idle_power_w == pytest.approx(0.174 * 400.0)
    assert bare.provisioned_kw_all_in == pytest.approx(0.4 * 10.2 / 5.6 * 1.3)
    assert pytest.approx(2.368, abs=1e-3) == ALL_IN_KW_PER_TDP_KW
    assert "fallback" in bare.origin["idle_power_w"]


@given(u=st.floats(-10, 10, allow_nan=False), v=st.floats(-10, 10, allow_nan=False),
       idle=st.floats(0, 1000), span=st.floats(0, 2000))
def test_gpu_power_stays_between_idle_and_tdp_and_grows_with_utilization(u, v, idle, span):
    """Source: invariant: the draw is within [idle, TDP] and monotone in utilization."""
    spec = PowerSpec(tdp_w=idle + span, idle_power_w=idle, provisioned_kw_all_in=1.0, origin={})
    lo, hi = sorted((u, v))
    assert idle - 1e-9 <= gpu_power_w(spec, lo) <= gpu_power_w(spec, hi) <= idle + span + 1e-9


# --- the plan's economics section ----------------------------------------------------------------

def _example_plan(**extra):
    scenario = json.loads((EXAMPLES / "llama70b_h100_fp8_scenario.json").read_text())
    return plan_dict({**scenario, **extra})


def test_plan_economics_follows_from_its_serving_point():
    """Source: hand: the section's figures from the plan's own serving section and the model's formulas:
    each phase draws idle + 121 W per TB/s of its HBM traffic + (TDP - idle) x 2.23 x its compute
    utilization, capped at TDP, time-weighted by the prefill share over 4 GPUs; site W = GPU W x all-in kW /
    TDP kW; J/token = site W / output tokens/s; tokens per MW = output tokens/s / (4 GPUs x kW); energy $ =
    kW x hours per M tokens x price; the default price is the ownership model's $0.10/kWh (EIA's US
    industrial average rounded up)."""
    p = _example_plan()
    e, s, r = p["economics"], p["serving"], p["roofline"]
    spec = power_spec(get_gpu("h100-sxm"))
    assert e["electricity_usd_per_kwh"] == DEFAULT_ELECTRICITY_USD_PER_KWH == 0.10
    assert 0 < e["utilization"] <= 1
    assert r["prefill_ai"] > r["ridge_flop_per_byte"] and r["regime"] == "memory-bound"
    span = spec.tdp_w - spec.idle_power_w
    prefill_w = min(spec.tdp_w, spec.idle_power_w + 121 * e["prefill_hbm_tb_s"]
                    + span * 2.23 * e["prefill_compute_utilization"])
    decode_w = min(spec.tdp_w, spec.idle_power_w + 121 * e["decode_hbm_tb_s"]
                   + span * 2.23 * e["decode_compute_utilization"])
    # HBM traffic within the datasheet's 3.35 TB/s; the tensor cores within their peak
    assert 0 < e["decode_hbm_tb_s"] <= 3.35 and 0 <= e["decode_compute_utilization"] <= 1
    share = s["prefill_share"]
    assert e["gpu_watts_per_replica"] == pytest.approx(4 * (share * prefill_w + (1 - share) * decode_w))
    assert e["watts_per_replica"] == pytest.approx(
        e["gpu_watts_per_replica"] * spec.provisioned_kw_all_in * 1000 / spec.tdp_w
    )
    assert e["joules_per_output_token"] == pytest.approx(e["watts_per_replica"] / s["output_tokens_per_s"])
    assert e["output_tokens_per_s_per_provisioned_mw"] == pytest.approx(
        s["output_tokens_per_s"] / (4 * spec.provisioned_kw_all_in / 1000))
    assert e["energy_usd_per_million_output_tokens"] == pytest.approx(
        e["watts_per_replica"] / 1000 * 1e6 / s["output_tokens_per_s"] / 3600 * 0.10)
    # prefill utilization is the latency section's bound over its estimate (the same step, another path)
    assert e["prefill_utilization"] == pytest.approx(
        p["latency"]["prefill_ms_bound"] / p["latency"]["prefill_ms"]
    )


def test_plan_energy_cost_scales_with_the_electricity_price_and_refuses_a_bad_one():
    """Source: hand: energy cost is linear in $/kWh (0.20 / 0.10); a negative price names its field."""
    base = _example_plan()["economics"]["energy_usd_per_million_output_tokens"]
    dear = _example_plan(economics={"electricity_usd_per_kwh": 0.20})["economics"]
    assert dear["energy_usd_per_million_output_tokens"] == pytest.approx(base * 0.20 / 0.10)
    with pytest.raises(ScenarioError) as err:
        _example_plan(economics={"electricity_usd_per_kwh": -1})
    assert err.value.field == "economics.electricity_usd_per_kwh"


def test_plan_without_a_stable_point_gives_no_power_figure():
    """Source: invariant: a deployment that does not fit has no operating point, hence no watts."""
    p = plan_dict({"model": "llama-3.1-70b", "gpu": "l4", "tp": 1})
    assert p["economics"]["watts_per_replica"] is None and p["economics"]["joules_per_output_token"] is None


# --- sizing under power, with cost tiers ---------------------------------------------------------

def _gpt_oss_sizing(**power):
    return {
        "sizing": {
            "model": "gpt-oss-120b", "traffic": {"requests_per_s": 2, "prompt_len": 1024, "output_len": 8192},
            "slo": {"ttft_ms": 5000, "itl_ms": 11.1, "percentile": 50}, "gpus": ["b200"], "tp": [1, 2],
            "weights": ["fp4"], "kv_cache": ["fp8"],
        },
        "power": power,
    }


def test_most_goodput_for_a_budget_fits_floor_of_budget_over_replica_kw():
    """Source: hand: InferenceX constants (B200 2.17 kW, neocloud $2.34/GPU-hour): 1 MW holds floor(1000 /
    2.17) = 460 one-GPU replicas or floor(1000 / 4.34) = 230 two-GPU ones; $/hour = GPUs x
    2.34."""
    r = size_power(_gpt_oss_sizing(objective="max_goodput", budget_mw=1, cost_tier="neocloud",
                                   power_source="inferencex"))
    by_tp = {row["tp"]: row for row in r["results"]}
    assert by_tp[1]["replicas"] == 460 and by_tp[2]["replicas"] == 230
    assert by_tp[1]["usd_per_hour"] == pytest.approx(460 * 2.34)
    assert by_tp[1]["provisioned_mw"] == pytest.approx(460 * 2.17 / 1000)
    for row in r["results"]:
        assert row["provisioned_mw"] <= 1.0 + 1e-9
        assert row["goodput_request_rate"] == pytest.approx(
            row["replicas"] * row["goodput_request_rate_per_replica"]
        )
        assert row["output_tokens_per_s"] == pytest.approx(row["goodput_request_rate"] * 8192)
    rates = [row["goodput_request_rate"] for row in r["results"]]
    assert rates == sorted(rates, reverse=True)


def test_fewest_mw_ranks_fleets_by_provisioned_power_within_the_budget():
    """Source: hand: provisioned MW = GPUs x 2.17 kW / 1000; the 3-year rental tier is $2.90/GPU-hour
    (InferenceX costr for B200); a budget below the smallest fleet leaves nothing."""
    r = size_power(_gpt_oss_sizing(objective="min_mw", cost_tier="rental_3yr", power_source="inferencex"))
    mws = [row["provisioned_mw"] for row in r["results"]]
    assert mws == sorted(mws) and mws
    for row in r["results"]:
        assert row["provisioned_mw"] == pytest.approx(row["gpus_total"] * 2.17 / 1000)
        assert row["usd_per_hour"] == pytest.approx(row["gpus_total"] * 2.90)
    tight = size_power(_gpt_oss_sizing(objective="min_mw", budget_mw=0.001, power_source="inferencex"))
    assert tight["results"] == []


def test_power_sizing_bad_inputs_name_their_field():
    """Source: invariant: each bad input is one ScenarioError naming the field."""
    with pytest.raises(ScenarioError) as err:
        size_power(_gpt_oss_sizing(objective="max_goodput"))
    assert err.value.field == "power.budget_mw"
    with pytest.raises(ScenarioError) as err:
        size_power({"sizing": {"traffic": {}}, "power": {}})
    assert err.value.field.startswith("sizing.")
    with pytest.raises(ScenarioError) as err:
        size_power(_gpt_oss_sizing(cost_tier="spot"))
    assert err.value.field == "power.cost_tier"


def test_inferencex_tiers_are_the_published_constants():
    """Source: published: SemiAnalysisAI/InferenceX-app packages/app/src/lib/constants.ts @ 77ca49a
    (GPU_SPECS)."""
    gpus = power_constants()["inferencex"]["gpus"]
    assert gpus["h100-sxm"] == {"power_kw": 1.73, "hyperscaler": 1.30, "neocloud": 1.69, "rental_3yr": 1.30}
    assert gpus["b200"]["power_kw"] == 2.17 and gpus["mi355x"]["power_kw"] == 2.65



def test_the_catalog_and_the_inferencex_table_give_one_kw_per_gpu():
    """Source: published: InferenceX GPU_SPECS power constants, held twice (the catalog's
    provisioned_kw_all_in, which cites them, and planner/data/power.toml's InferenceX table, which the
    `inferencex` power source reads): the two copies must not drift apart."""
    table = power_constants()["inferencex"]["gpus"]
    assert len(table) == 7
    for gpu_id, entry in table.items():
        spec = get_gpu(gpu_id)
        assert spec.provisioned_kw_all_in == entry["power_kw"], gpu_id
        assert "InferenceX" in spec.sources["provisioned_kw_all_in"], gpu_id

# --- mixed fleets --------------------------------------------------------------------------------

def test_cheapest_split_on_a_bimodal_distribution_worked_by_hand():
    """Source: hand: 100 req/s, 80 short and 20 long. GPU A ($1/h): 10 short or 1 long req/s per replica;
    GPU B ($3/h): 15 short or 6 long. Single A: ceil(80/10 + 20/1) = 28 replicas = $28/h; single B:
    ceil(80/15 + 20/6) = ceil(8.67) = 9 = $27/h (best single). Mix: short on A ceil(8) = $8, long on B
    ceil(3.33) = 4 x $3 = $12: $20/h, 26% below the best single type."""
    rates = [80.0, 20.0]
    goodput = [[10.0, 1.0], [15.0, 6.0]]
    best, single = cheapest_split(rates, goodput, [1.0, 3.0])
    assert single is not None and best is not None
    assert (single.family_a, single.replicas_a, single.usd_per_hour) == (1, 9.0, pytest.approx(27.0))
    assert (best.threshold_index, best.family_a, best.family_b) == (1, 0, 1)
    assert (best.replicas_a, best.replicas_b, best.usd_per_hour) == (8.0, 4.0, pytest.approx(20.0))


def test_pool_replicas_and_a_class_no_family_serves():
    """Source: hand: 5/2 + 3/4 = 3.25 -> 4 replicas; a class with no goodput makes the pool impossible."""
    assert pool_replicas([5.0, 3.0], [2.0, 4.0]) == 4.0
    assert math.isinf(pool_replicas([5.0, 3.0], [2.0, 0.0]))
    best, single = cheapest_split([5.0, 3.0], [[2.0, 0.0], [0.0, 4.0]], [1.0, 1.0])
    assert single is None and best is not None and best.usd_per_hour == pytest.approx(3.0 + 1.0)


def test_lognormal_classes_by_hand():
    """Source: hand: one bin sits at the median prompt; the output carries its mean
    median x exp(sigma^2 / 2) = 200 x exp(0.5) = 329.7 -> 330; two bins sit at the 25% and 75%
    quantiles: 1000 x exp(+-0.6745) = 509 and 1963."""
    one = lognormal_classes(
        Lognormal(prompt_median=1000, prompt_sigma=1.0, output_median=200, output_sigma=1.0, bins=1)
    )
    assert (one[0].prompt_len, one[0].output_len, one[0].share) == (1000, 330, 1.0)
    two = lognormal_classes(
        Lognormal(prompt_median=1000, prompt_sigma=1.0, output_median=200, output_sigma=0, bins=2)
    )
    assert [c.prompt_len for c in two] == [509, 1963]


def test_mixed_fleet_example_routes_short_to_h200_and_long_to_h100():
    """Source: hand: from the goodput table the sizing search gives: Llama-3.1-70B fp8, 900 req/s of
    128 -> 1024 tokens (decode-bound: H200's 4.8 TB/s at $3.40 beats H100's 3.35 at $2.99 per request)
    and 100 req/s of 32k -> 64 (prefill-bound: same FLOPs, H100 cheaper). The mix's cost is
    ceil(900 / g_H200,short) x $6.80 + ceil(100 / g_H100,long) x $5.98 and below every single type."""
    r = mixed_fleet(json.loads((EXAMPLES / "mixed_fleet_bimodal.json").read_text()))
    mix, single = r["mixed"], r["best_single"]
    assert [(p["gpu"], p["classes"]) for p in mix["pools"]] == [("h200", [0]), ("h100-sxm", [1])]
    g = {(f["gpu"], f["tp"]): f["goodput_request_rate_by_class"] for f in r["goodput_table"]}
    by_hand = math.ceil(900 / g[("h200", 2)][0]) * 6.80 + math.ceil(100 / g[("h100-sxm", 2)][1]) * 5.98
    assert mix["usd_per_hour"] == pytest.approx(by_hand)
    assert mix["usd_per_hour"] < single["usd_per_hour"]
    assert mix["route"]["prompt_len_threshold"] == 128
    assert r["saving"] == pytest.approx(1 - mix["usd_per_hour"] / single["usd_per_hour"])


def test_a_length_class_may_carry_its_own_ttft_objective():
    """A class's own ttft_ms is the objective its goodput is searched under, the others keep slo.ttft_ms: at a
    1 s TTFT no GPU serves 32,000-token prompts on Llama-3.1-70B, so the fleet has no answer; with 20 s for
    that class alone it has one, its long class's goodputs are the example's (same lengths, same 20 s), and
    its short class's those of the same search at 1 s (issue 31: per-class TTFT for a mixed fleet).
    Source: contract: docs/CONTRACT_EXTENSIONS.md, mixed fleets (lengths.histogram[].ttft_ms)."""
    example = json.loads((EXAMPLES / "mixed_fleet_bimodal.json").read_text())
    tight = {**example, "slo": {**example["slo"], "ttft_ms": 1000}}
    at_one_s = mixed_fleet(tight)
    assert at_one_s["mixed"] is None
    short, long = example["lengths"]["histogram"]
    bins = [dict(short), {**long, "ttft_ms": 20000}]
    r = mixed_fleet({**tight, "lengths": {"histogram": bins}})
    assert r["mixed"] is not None and [c["ttft_ms"] for c in r["classes"]] == [1000, 20000]
    reference = {(f["gpu"], f["tp"]): f["goodput_request_rate_by_class"]
                 for f in mixed_fleet(example)["goodput_table"]}
    alone = {(f["gpu"], f["tp"]): f["goodput_request_rate_by_class"] for f in at_one_s["goodput_table"]}
    for f in r["goodput_table"]:
        key = (f["gpu"], f["tp"])
        assert f["goodput_request_rate_by_class"][1] == reference[key][1]
        assert f["goodput_request_rate_by_class"][0] == alone.get(key, [0.0])[0]
    with pytest.raises(ScenarioError) as err:
        mixed_fleet({**tight, "lengths": {"histogram": [{**bins[1], "ttft_ms": -1}]}})
    assert err.value.field == "lengths.histogram.0.ttft_ms"


def test_mixed_fleet_bad_inputs_name_their_field():
    """Source: invariant: one distribution kind, named on error."""
    base = json.loads((EXAMPLES / "mixed_fleet_bimodal.json").read_text())
    with pytest.raises(ScenarioError) as err:
        mixed_fleet({**base, "lengths": {}})
    assert err.value.field == "lengths"
    with pytest.raises(ScenarioError) as err:
        mixed_fleet({**base, "lengths": {"histogram": [{"prompt_len": 0, "output_len": 1, "weight": 1}]}})
    assert err.value.field.startswith("lengths.histogram.0.prompt_len")


# --- context tiers -------------------------------------------------------------------------------

def test_context_tiers_kv_per_sequence_and_cost_grow_with_the_tier():
    """Source: hand: Llama-3.1-8B's KV per token in fp8 is 32 layers x 8 KV heads x 128 x 2 (K, V) x 1 byte =
    65,536 B, so one sequence of 32,768 tokens holds 2.147 GB (over TP GPUs each); the same traffic at a
    longer max context never costs less (invariant). The 1,000,000-token tier is beyond the model's
    max_position_embeddings of 131,072 (its config.json): refused with that limit named (issue 31)."""
    req = json.loads((EXAMPLES / "context_tiers_llama8b.json").read_text())
    req["sizing"]["kv_cache"] = ["fp8"]
    r = context_tiers(req)
    assert [t["context_len"] for t in r["tiers"]] == [32768, 131072, 1000000]
    tiers, beyond = r["tiers"][:2], r["tiers"][2]
    assert not beyond["feasible"] and "131,072" in beyond["reason"] and beyond["option"] is None
    for t in tiers:
        assert t["kv_gb_per_sequence_per_gpu"] * t["option"]["tp"] == pytest.approx(
            65536 * t["context_len"] / 1e9
        )
    costs = [t["usd_per_hour"] for t in tiers]
    assert costs == sorted(costs) and costs[-1] > costs[0]
    assert tiers[0]["usd_vs_shortest"] == 1.0


def test_context_tiers_refuse_a_bad_tier():
    """Source: invariant: a context shorter than prompt + output names its tier."""
    req = json.loads((EXAMPLES / "context_tiers_llama8b.json").read_text())
    with pytest.raises(ScenarioError) as err:
        context_tiers({**req, "context_lens": [1000]})
    assert err.value.field == "context_lens.0"


# --- CLI -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("command,example", [("size-power", "gpt_oss_power_sizing.json"),
                                             ("mixed-fleet", "mixed_fleet_bimodal.json"),
                                             ("context-tiers", "context_tiers_llama8b.json")])
def test_cli_runs_each_issue24_command_from_its_example(command, example):
    """Source: invariant: each command prints JSON and exits 0 on its example; a bad file is one line, exit
    2."""
    out, err = io.StringIO(), io.StringIO()
    assert main([command, str(EXAMPLES / example)], stdout=out, stderr=err) == 0, err.getvalue()
    assert json.loads(out.getvalue())
    out, err = io.StringIO(), io.StringIO()
    assert main([command, "-"], stdin=io.StringIO("[]"), stdout=out, stderr=err) == 2
    assert (
        out.getvalue() == ""
        and err.getvalue().count("\n") == 1
        and err.getvalue().startswith("error: request")
    )


# --- done when: InferenceX's tokens/s per provisioned MW for gpt-oss-120b ------------------------

ITL_90_TPS_MS = 1000.0 / 90.0  # 90 tok/s per user
GPT_OSS = {
    "model": "gpt-oss-120b", "weights": "fp4", "kv_cache": "fp8", "prompt_len": 1024, "output_len": 8192,
}
# MXFP4 on Hopper and CDNA3 runs as weight-only (vLLM's Marlin/Triton MoE kernels dequantize to bf16);
# Blackwell and CDNA4 have fp4 tensor cores.
DONE_WHEN = {"h100-sxm": "bf16", "b200": None, "mi300x": "bf16", "mi355x": None}
PUBLISHED = power_constants()["inferencex"]["gpt_oss_120b_1k8k_90tps"]
KW = {g: v["power_kw"] for g, v in power_constants()["inferencex"]["gpus"].items()}


def _per_mw(gpu: str) -> dict:
    scenario = {**GPT_OSS, "gpu": gpu}
    if DONE_WHEN[gpu]:
        scenario["compute"] = DONE_WHEN[gpu]
    best = tokens_per_mw_at_interactivity(scenario, [1, 2, 4, 8], ITL_90_TPS_MS, KW[gpu])
    assert best is not None
    return best


def test_operating_point_is_the_last_concurrency_within_the_interactivity_target():
    """Source: invariant: at the chosen concurrency median ITL <= 11.1 ms, one more sequence exceeds it."""
    best = _per_mw("b200")
    assert best["itl_ms_p50"] <= ITL_90_TPS_MS
    nxt = plan_dict(
        {**GPT_OSS, "gpu": "b200", "tp": best["tp"], "load": {"concurrency": best["concurrency"] + 1}}
    )
    assert nxt["serving"]["itl_ms"]["p50"] is None or nxt["serving"]["itl_ms"]["p50"] > ITL_90_TPS_MS


def _inferencex_sweep(gpu: str) -> dict[int, list[int]]:
    """The (TP, concurrency) points InferenceX ran for gpt-oss-120b 1k/8k on vLLM, as its public runs record
    them (data/reference/serving_runs_published.csv): its figure is the best of these points."""
    import csv

    runs = csv.DictReader((Path(__file__).resolve().parents[1] / "data" / "reference"
                           / "serving_runs_published.csv").open())
    sweep: dict[int, list[int]] = {}
    for r in runs:
        if (r["model_preset"], r["engine"], r["gpu"], r["prompt_len"], r["output_len"]) == (
                "gpt-oss-120b", "vllm", gpu, "1024", "8192"):
            sweep.setdefault(int(r["tp"]), []).append(int(r["concurrency"]))
    return sweep


_B200_OVER = pytest.mark.xfail(strict=True, reason=(
    "B200 TP 2 x 128 plans 3.52 M tokens/s per MW against InferenceX's ~2.8 M (ratio 1.26; its best "
    "measured point 3.21 M): 3.46 M (1.24x) before MoE prompts riding a pass shared its expert read (a 1k "
    "prompt beside 128 decodes no longer pays its own read of the experts they read anyway)"))


@pytest.mark.parametrize("gpu", ["h100-sxm", pytest.param("b200", marks=_B200_OVER)])
def test_gpt_oss_tokens_per_mw_within_25_percent_of_inferencex(gpu):
    """Source: published: InferenceX (issue 24's table; tpPerMw = total tokens/s per GPU / all-in kW,
    InferenceX-app chart-utils.ts): gpt-oss-120b, 1k in / 8k out, 90 tok/s per user: H100 ~0.9 M,
    B200 ~2.8 M tokens/s per MW; like with like, planned on the points InferenceX ran (its public vLLM runs:
    H100 TP 2-8 x concurrency 4-64, B200 TP 1-8 x 4-128). On 2026-11-27 the planner gave H100 1.02 M (ratio
    1.14, TP 4 x 64) and B200 3.23 M (ratio 1.15, TP 2 x 128), both from the kernel tables; InferenceX's own
    best measured points there are 1.01 M and 3.21 M (TP 4 x 64 at 9.9 ms, TP 2 x 128 at 9.9 ms)."""
    scenario = {**GPT_OSS, "gpu": gpu}
    if DONE_WHEN[gpu]:
        scenario["compute"] = DONE_WHEN[gpu]
    sweep = _inferencex_sweep(gpu)
    assert len(sweep) >= 3
    rows = [
        tokens_per_mw_at_interactivity(scenario, [tp], ITL_90_TPS_MS, KW[gpu], ns) for tp, ns in sweep.items()
    ]
    best = max((r for r in rows if r is not None), key=lambda r: r["total_tokens_per_s_per_mw"])
    assert best["concurrency"] in sweep[best["tp"]]
    assert best["total_tokens_per_s_per_mw"] == pytest.approx(PUBLISHED[gpu], rel=0.25)


@pytest.mark.parametrize("gpu", ["h100-sxm", "b200"])
def test_gpt_oss_beyond_the_sweep_is_the_planners_own_claim(gpu):
    """Source: invariant: searched over every batch the memory holds, the planner's best is at least the best
    of InferenceX's sweep (a superset of points), and past its largest concurrency. On 2026-11-27: H100 1.64 M
    (TP 8 x 247, 1.82x the published figure), B200 5.87 M (TP 4 x 605, 2.10x): batches no public gpt-oss run
    measured, so this is a prediction, not a check."""
    free = _per_mw(gpu)
    sweep = _inferencex_sweep(gpu)
    assert free["concurrency"] > max(max(ns) for ns in sweep.values())
    assert free["total_tokens_per_s_per_mw"] >= PUBLISHED[gpu]


@pytest.mark.xfail(strict=True, reason=(
    "issue 30 refit: 3.40 M vs InferenceX's 2.55 M (ratio 1.33, TP 8 x 831; 1.96 M, 0.77, before). vLLM "
    "CDNA4's record is fitted on Llama-3.3-70B alone (80 layers): its per-step and per-layer costs cannot be "
    "told apart, so the per-step host cost is held at vLLM's kernel-table host cost (1.2 ms), and its fp4 "
    "streaming, driven to the 0.95 bound, at the published 0.81; gpt-oss's 36 layers then pay ~5.9 ms of "
    "fixed costs a step where the earlier fit (2.2 ms a step, 65 us a layer, compute at its 0.5 bound) "
    "gave 6.6 ms: at the 11.1 ms ITL target, 831 sequences where it found 428"))
def test_gpt_oss_tokens_per_mw_mi355x_within_25_percent():
    """Source: published: InferenceX (issue 24's table): MI355X ~2.55 M tokens/s per MW at 2.65 kW per GPU;
    the planner gives 3.40 M (ratio 1.33; TP 8, 831 sequences) with vLLM's CDNA4 production profile."""
    assert _per_mw("mi355x")["total_tokens_per_s_per_mw"] == pytest.approx(PUBLISHED["mi355x"], rel=0.25)


def test_gpt_oss_tokens_per_mw_mi300x_within_25_percent():
    """Source: published: InferenceX (issue 24's table): MI300X ~0.75 M tokens/s per MW at 1.79 kW per GPU;
    the planner gives 0.80 M (ratio 1.07; TP 8, 114 sequences; 0.58 M, 0.77, before issue 30's refit) with
    MXFP4 as w4a16 on vLLM's CDNA3 profile."""
    assert _per_mw("mi300x")["total_tokens_per_s_per_mw"] == pytest.approx(PUBLISHED["mi300x"], rel=0.25)


# --- bad input, fuzzed: one line, exit 2, never a traceback --------------------------------------

def _fuzz_requests(rng) -> list[tuple[str, dict]]:
    sizing = {
        "model": "llama-3.1-8b",
        "traffic": {
            "requests_per_s": rng.uniform(0.01, 50), "prompt_len": rng.randint(1, 4000),
            "output_len": rng.randint(1, 1000),
        },
        "slo": {"ttft_ms": rng.uniform(10, 10_000), "itl_ms": rng.uniform(5, 200)}, "gpus": ["h100-sxm"],
        "tp": [1], "weights": ["fp8"], "kv_cache": ["fp8"],
    }
    return [
        (
            "size-power",
            {
                "sizing": sizing,
                "power": {
                    "objective": rng.choice(["min_mw", "max_goodput"]), "budget_mw": rng.uniform(0.01, 5),
                    "cost_tier": "neocloud",
                },
            },
        ),
        (
            "mixed-fleet",
            {
                "model": "llama-3.1-8b", "requests_per_s": rng.uniform(0.1, 100), "slo": sizing["slo"],
                "gpus": ["h100-sxm"], "tp": [1], "weights": ["fp8"], "kv_cache": ["fp8"],
                "lengths": {
                    "histogram": [
                        {
                            "prompt_len": rng.randint(1, 4000), "output_len": rng.randint(1, 500),
                            "weight": rng.uniform(0.1, 1),
                        }
                    ]
                },
            },
        ),
        ("context-tiers", {"sizing": sizing, "context_lens": [rng.randint(4000, 200_000)]}),
    ]


@settings(max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(rng=st.randoms(use_true_random=True))
def test_issue24_commands_any_broken_request(rng):
    """Source: invariant: each new command's request, broken in 1-3 places (tests/test_fuzz.py's mutations),
    exits 0 with finite JSON or 2 with one `error:` line naming the field, never 70."""
    from tests.test_fuzz import _dumps, check_cli, mutated

    for command, request in _fuzz_requests(rng):
        check_cli([command, "-"], _dumps(mutated(rng, request, ["power", "lengths", "context_lens"])))
