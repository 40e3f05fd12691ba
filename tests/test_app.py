"""Streamlit AppTest: every element, the link round trip (bad parameters included), pins, exports, sizing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from planner import plan_dict
from ui.figures import fmt_time
from ui.inputs import HF_MAX_BYTES
from ui.links import DEFAULT_SCENARIO, scenario_to_query

TIMEOUT = 60
APP = Path(__file__).resolve().parents[1] / "app.py"


def run_app(params: dict[str, str] | None = None) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    for k, v in (params or {}).items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def unescape(markdown: str) -> str:
    """Markdown as displayed: the app shows user and field text in code spans (ui/text.py)."""
    return markdown.replace("`", "")


def press_find(at: AppTest) -> None:
    """Press the sizing form's button (a sizing link only fills the form: issue 32)."""
    [b for b in at.button if b.label == "Find the cheapest fleet"][0].click().run(timeout=TIMEOUT)


def query(at: AppTest) -> dict[str, str]:
    """The app's query string as name -> value (AppTest may hold a value as a one-item list)."""
    return {
        k: (v[0] if isinstance(v, list) else v) for k, v in ((k, at.query_params[k]) for k in at.query_params)
    }


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def _num(text: str) -> float:
    """The number a tile shows, in its base unit: "1.73 s" reads as 1,730 ms, "16.92 GiB" as 18.17 GB."""
    parts = text.replace("$", "").replace(",", "").split()
    value = float(parts[0])
    if len(parts) > 1 and parts[1] == "GiB":
        return value * 2**30 / 1e9
    return value * 1000.0 if len(parts) > 1 and parts[1] == "s" else value


# --- figures from outside the planner (tests/README.md: hand, datasheet, model-card) --------------------
# Llama-3.1-70B, config.json (80 layers, d_model 8192, 64 heads, 8 KV heads, head_dim 128, d_ff 28672,
# vocab 128256, untied): per layer attention 8192 x (2 x 8192 + 2 x 1024) = 150,994,944 and MLP
# 3 x 8192 x 28672 = 704,643,072, so 80 x 855,638,016 = 68,451,041,280 linear weights; norms
# 80 x 2 x 8192 + 8192 = 1,318,912; embedding + LM head 2 x 128256 x 8192 = 2,101,346,304; total
# 70,553,706,496 (the card's 70.6B). An fp8 checkpoint stores the linear weights in 1 B, the embedding and
# head in bf16 (both sharded) and the norms in bf16 on every GPU: at TP 4
# 68,451,041,280 / 4 + 4,202,692,608 / 4 + 2,637,824 = 18,166,071,296 B.
W70_FP8_GB = {2: 36.3295, 4: 18.1661, 8: 9.0844}
# Llama-3.1-8B, config.json (32 layers, d_model 4096, 32 heads, 8 KV heads, d_ff 14336, vocab 128256):
# linear 32 x (4096 x 10240 + 3 x 4096 x 14336) = 6,979,321,856; norms 32 x 8192 + 4096 = 266,240;
# embedding + head 2 x 128256 x 4096 = 1,050,673,152. bf16 at TP 1: 16,060,522,496 B; bf16 at TP 4:
# 4,015,529,984 B; fp8 at TP 4: 6,979,321,856 / 4 + 2,101,346,304 / 4 + 532,480 = 2,270,699,520 B;
# fp8 at TP 3: 6,979,321,856 / 3 + 2,101,346,304 / 3 + 532,480 = 3,027,421,867 B.
W8_GB = {("bf16", 1): 16.0605, ("bf16", 4): 4.0155, ("fp8", 4): 2.2707, ("fp8", 3): 3.0274}
# Ridge = dense tensor peak / HBM bandwidth, vendor datasheets (their TFLOPS are 2:4-sparse: dense is half):
# H100 SXM fp8 1,979 / 3.35 TB/s = 590.7, bf16 989.5 / 3.35 = 295.4; H200 fp8 1,979 / 4.8 = 412.3;
# HGX B200 fp8 72 PF / 8 GPUs / 2 = 4,500 over 64 TB/s / 8 = 8 TB/s:
# 562.5; L4 bf16 242 / 2 = 121 / 0.3 TB/s = 403.3.
RIDGE = {
    "h100-sxm fp8": 590.7, "h100-sxm bf16": 295.4, "h200 fp8": 412.3, "b200 fp8": 562.5, "l4 bf16": 403.3,
}
# KV budget without the engine's rules (a link with `memory.reserve_gb`): the H100's 81,559 MiB (nvidia-smi,
# data/measurements/h100_physics_2026-11-26.json) = 85.52e9 B x 0.9 - 2 GB reserve - 18.166 GB of 70B fp8
# weights at TP 4 = 56.80 GB; fp8 KV per token per GPU 80 x 8 x 128 x 2 x 1 B / 4 = 40,960 B, so
# max batch = floor(56.80e9 / (40,960 x context)): 338 at 4,096, 169 at 8,192, 84 at 16,384.
NAPKIN_MAX_BATCH_70B_TP4 = {4096: 338, 8192: 169, 16384: 84}


def shown(at: AppTest, label: str) -> float:
    return _num(metrics(at)[label])


def assert_metrics_match_plan(at: AppTest, scenario: dict) -> None:
    p = plan_dict(scenario)
    m = metrics(at)
    assert _num(m["Weights per GPU"]) == pytest.approx(p["memory"]["weights_gb_per_gpu"], abs=0.006)
    assert _num(m["KV budget per GPU"]) == pytest.approx(p["memory"]["kv_budget_gb_per_gpu"], abs=0.006)
    assert int(_num(m["Max batch"])) == p["memory"]["max_batch"]
    assert _num(m["Decode FLOP/byte"]) == pytest.approx(p["roofline"]["decode_ai"], abs=0.06)
    assert _num(m["Ridge FLOP/byte"]) == pytest.approx(p["roofline"]["ridge_flop_per_byte"], abs=0.06)
    assert _num(m["TTFT, one request alone"]) == pytest.approx(p["latency"]["ttft_ms"], rel=0.006)
    assert _num(m["ITL, decode only"]) == pytest.approx(p["latency"]["itl_ms"], rel=0.006)
    assert _num(m["Tokens/s, decode only"]) == pytest.approx(p["throughput"]["output_tokens_per_s"], abs=0.6)
    assert _num(m["$ per M output tokens"]) == pytest.approx(
        p["cost"]["usd_per_million_output_tokens"], abs=6e-4
    )
    sv = p["serving"]
    rate = m["Goodput per replica"] if sv["at_goodput"] else m["Request rate"]
    assert _num(rate) == pytest.approx(sv["request_rate"], abs=0.006)
    if "TTFT p50 / p99" not in m:  # an objective: its percentile, judged
        pct = f"p{sv['slo_percentile']}"
        assert _num(m[f"TTFT {pct}"]) == pytest.approx(sv["ttft_ms"][pct], rel=0.006)
        assert _num(m[f"ITL {pct}"]) == pytest.approx(sv["itl_ms"][pct], rel=0.006)
        return
    ttft50, ttft99 = (_num(x) for x in m["TTFT p50 / p99"].split(" / "))
    # shown to 3-4 significant figures (ms below 10 s, then s with 2 decimals)
    assert ttft50 == pytest.approx(sv["ttft_ms"]["p50"], rel=0.006) and ttft99 == pytest.approx(
        sv["ttft_ms"]["p99"], rel=0.006
    )
    itl50, itl99 = (_num(x) for x in m["ITL p50 / p99"].split(" / "))
    assert itl50 == pytest.approx(sv["itl_ms"]["p50"], rel=0.006) and itl99 == pytest.approx(
        sv["itl_ms"]["p99"], rel=0.006
    )


def test_default_page_shows_a_realistic_plan_with_every_headline_figure():
    """The default scenario is Llama-3.1-70B, fp8 weights and KV, TP 4 on H100 SXM: each GPU holds
    18,166,071,296 B of weights (W70_FP8_GB above, from the config) and the fp8 ridge is 1,979 / 2 dense
    TFLOP/s over 3.35 TB/s = 590.7 FLOP/byte.
    Source: hand: weights from Llama-3.1-70B's config.json (above); ridge from the NVIDIA H100 SXM datasheet.
    """
    at = run_app()
    # at the objective 5 (goodput, tokens/s, $/M, GPUs and $/h for the traffic) + latency 4 (TTFT, ITL, mean
    # TPOT, E2E) + memory/roofline 5 + decode-only 5
    assert len(at.metric) == 19
    assert shown(at, "Weights per GPU") == pytest.approx(W70_FP8_GB[4], abs=0.006)
    assert shown(at, "Ridge FLOP/byte") == pytest.approx(RIDGE["h100-sxm fp8"], rel=2e-3)
    assert_metrics_match_plan(at, DEFAULT_SCENARIO)
    assert at.sidebar.selectbox(key="model_choice").value == "llama-3.1-70b"
    assert at.sidebar.selectbox(key="gpu_choice").value == "h100-sxm"
    assert len(at.get("vega_lite_chart")) >= 5  # memory, roofline, AI, ITL+tok/s, cost
    assert not at.error and not at.warning


def test_share_link_reproduces_the_cli_plan():
    """A link to Llama-3.1-70B fp8 on two H200s: 36.33 GB of weights per GPU (68,451,041,280 / 2 +
    4,202,692,608 / 2 + 2,637,824 B) and an fp8 ridge of 1,979 / 4.8 TB/s = 412.3 FLOP/byte.
    Source: datasheet: NVIDIA H200 SXM datasheet (4.8 TB/s, 3,958 sparse fp8 TFLOP/s); weights by hand from
    Llama-3.1-70B's config.json.
    """
    link = {"model": "llama-3.1-70b", "gpu": "h200", "tp": "2", "weights": "fp8", "kv_cache": "fp8",
            "context_len": "8192", "prompt_len": "3000", "output_len": "500"}
    at = run_app(link)
    assert shown(at, "Weights per GPU") == pytest.approx(W70_FP8_GB[2], abs=0.006)
    assert shown(at, "Ridge FLOP/byte") == pytest.approx(RIDGE["h200 fp8"], rel=2e-3)
    # a link without `load` takes the default operating point: the goodput under the default objective
    scenario = {
        **{k: (int(v) if v.isdigit() else v) for k, v in link.items()},
        "load": DEFAULT_SCENARIO["load"],
    }
    assert_metrics_match_plan(at, scenario)
    assert query(at) == scenario_to_query(scenario)


def test_bad_link_parameters_fall_back_and_the_rest_applies():
    """The good parameters apply: with a 2 GB reserve the KV budget is 56.80 GB per GPU (NAPKIN_MAX_BATCH
    above) and each 4,096-token sequence needs 40,960 x 4,096 = 167,772,160 B, so the max batch is
    floor(56.80e9 / 167,772,160) = 338 on the H100 the bad `gpu` falls back to (169 had the context not
    applied).
    Source: hand: the derivation above (H100 memory: our nvidia-smi measurement, 81,559 MiB).
    """
    at = run_app(
        {
            "gpu": "h900", "tp": "two", "context_len": "4096", "prompt_len": "1000", "output_len": "200",
            "weights": "<b>fp9</b>", "memory.reserve_gb": "2",
        }
    )
    assert int(shown(at, "Max batch")) == NAPKIN_MAX_BATCH_70B_TP4[4096]
    warnings = unescape(" ".join(w.value for w in at.warning))
    assert "gpu" in warnings and "unknown GPU" in warnings
    assert "tp" in warnings and "whole number" in warnings
    assert "weights" in warnings and "<b>" not in warnings  # user text is escaped, never HTML
    assert at.sidebar.number_input(key="context_len").value == 4096
    assert at.sidebar.number_input(key="prompt_len").value == 1000
    assert at.sidebar.selectbox(key="gpu_choice").value == DEFAULT_SCENARIO["gpu"]
    assert at.sidebar.selectbox(key="tp").value == DEFAULT_SCENARIO["tp"]
    assert_metrics_match_plan(
        at,
        {
            **DEFAULT_SCENARIO,
            "context_len": 4096, "prompt_len": 1000, "output_len": 200, "memory": {"reserve_gb": 2.0},
        },
    )


def test_reserve_input_is_in_gib_and_a_link_keeps_its_gb():
    """The reserve input speaks GiB, the unit vLLM logs and the memory waterfall shows (issue 31: one memory
    unit), while the link keeps the contract's decimal GB: a 6 GB reserve reads 6e9 / 2^30 = 5.59 GiB, the
    link reproduces 6 exactly, and 3 GiB typed in is 3 x 2^30 = 3,221,225,472 B = 3.221225472 GB.
    Source: hand: the unit definitions (1 GiB = 2^30 B, 1 GB = 1e9 B).
    """
    at = run_app({"memory.reserve_gb": "6"})
    reserve = at.sidebar.number_input(key="reserve_gib")
    assert "GiB" in reserve.label and reserve.value == pytest.approx(6e9 / 2**30, rel=1e-12)
    assert float(query(at)["memory.reserve_gb"]) == 6.0  # the link as given, not 6.000000000000001
    reserve.set_value(3.0).run()
    assert not at.exception and not at.error
    assert float(query(at)["memory.reserve_gb"]) == pytest.approx(3 * 2**30 / 1e9, rel=1e-12)


def test_changing_an_input_updates_the_url():
    """TP 8 halves the default's weights per GPU: 68,451,041,280 / 8 + 4,202,692,608 / 8 + 2,637,824 B =
    9.08 GB; a B200 then shows its fp8 ridge, 4,500 dense TFLOP/s over 8 TB/s = 562.5 FLOP/byte.
    Source: datasheet: NVIDIA HGX B200 specifications (72 PF sparse fp8 and 64 TB/s per 8 GPUs); weights by
    hand from Llama-3.1-70B's config.json.
    """
    at = run_app()
    at.sidebar.selectbox(key="tp").set_value(8).run()
    assert query(at)["tp"] == "8"
    assert shown(at, "Weights per GPU") == pytest.approx(W70_FP8_GB[8], abs=0.006)
    assert_metrics_match_plan(at, {**DEFAULT_SCENARIO, "tp": 8})
    at.sidebar.selectbox(key="gpu_choice").set_value("b200").run()
    assert query(at)["gpu"] == "b200"
    assert shown(at, "Ridge FLOP/byte") == pytest.approx(RIDGE["b200 fp8"], rel=2e-3)


def test_custom_model_travels_as_json_in_the_link():
    """The custom model runs on the linked L4 in bf16: the ridge is the L4's, 242 / 2 = 121 dense bf16
    TFLOP/s over 300 GB/s = 403.3 FLOP/byte.
    Source: datasheet: NVIDIA L4 datasheet (242 TFLOP/s bf16 with sparsity, 300 GB/s).
    """
    model = {"name": "tiny", "n_layers": 4, "d_model": 512, "n_heads": 8, "n_kv_heads": 2, "d_ff": 2048,
             "vocab_size": 32000}
    at = run_app({"model": json.dumps(model), "gpu": "l4", "tp": "1", "weights": "bf16", "kv_cache": "bf16"})
    assert at.sidebar.selectbox(key="model_choice").value == "custom"
    assert at.sidebar.number_input(key="m_n_layers").value == 4
    assert shown(at, "Ridge FLOP/byte") == pytest.approx(RIDGE["l4 bf16"], rel=2e-3)
    assert_metrics_match_plan(at, {"model": {**model, "head_dim": 64, "tied_embeddings": False}, "gpu": "l4",
                                   "tp": 1, "weights": "bf16", "kv_cache": "bf16", "context_len": 8192,
                                   "prompt_len": 2000, "output_len": 400, "load": DEFAULT_SCENARIO["load"]})


def test_scenario_that_does_not_fit_says_so_and_offers_what_would_fit():
    """Llama-3.1-405B in bf16 is 405.9e9 x 2 B = 811.8 GB of weights. On H100s (80 GB x 0.9 - 2 GB reserve =
    70 GB per GPU for weights and KV) TP 8 holds 101.5 GB per GPU: no fit; TP 16 (50.7 GB) would, but a
    TP group stays in its 8-GPU server, so the offer is 12 GPUs over 2 servers, TP 4 x PP 3 (811.8 / 12 =
    67.7 GB each). At TP 8, fp8 weights are 50.7 GB per GPU: fit; an H200 (141 x 0.9 - 2 = 124.9 GB) holds
    the 101.5 GB of bf16. No int4 KV cache is offered: no engine stores one (vLLM's --kv-cache-dtype).
    Source: hand: the arithmetic above (parameter count from the Llama 3.1 405B model card).
    """
    at = run_app(
        {"model": "llama-3.1-405b", "gpu": "h100-sxm", "tp": "8", "weights": "bf16", "kv_cache": "bf16"}
    )
    errors = " ".join(e.value for e in at.error)
    assert "do not fit" in errors
    assert not {"ITL, decode only", "$ per M output tokens", "TTFT p50 / p99"} & set(
        metrics(at)
    )  # nothing implies it works
    assert len(at.get("vega_lite_chart")) == 1  # the memory bar only
    labels = [b.label for b in at.button]
    assert "Use TP 16" not in labels and "Use TP 4 x PP 3" in labels
    assert "fp8 weights, bf16 KV" in labels and not any("int4 KV" in label for label in labels)
    assert "NVIDIA H200" in " ".join(labels)
    at.button(key="fit_layout").click().run()
    assert (at.sidebar.selectbox(key="tp").value, at.sidebar.number_input(key="pp").value) == (4, 3)
    assert "ITL, decode only" in metrics(at) and not any("do not fit" in e.value for e in at.error)


def test_invalid_input_combination_names_the_field_and_keeps_state():
    """Once the context is raised to 16,384 the plan follows: with a 2 GB reserve the KV budget is 56.80 GB
    per GPU and a sequence needs 40,960 x 16,384 = 671,088,640 B, so the max batch is 84 (169 at 8,192).
    Source: hand: NAPKIN_MAX_BATCH above (H100 memory: our nvidia-smi measurement, 81,559 MiB).
    """
    at = run_app({"memory.reserve_gb": "2"})
    assert int(shown(at, "Max batch")) == NAPKIN_MAX_BATCH_70B_TP4[8192]
    at.sidebar.number_input(key="prompt_len").set_value(9000).run()
    assert not at.exception
    assert any("context_len" in unescape(e.value) for e in at.error)
    assert at.sidebar.selectbox(key="model_choice").value == "llama-3.1-70b"  # nothing else lost
    at.sidebar.number_input(key="context_len").set_value(16384).run()
    assert not at.error and len(at.metric) == 19
    assert int(shown(at, "Max batch")) == NAPKIN_MAX_BATCH_70B_TP4[16384]


def test_pin_two_scenarios_and_compare():
    """Both pins hold the same 70B fp8 weights at TP 4: 18.17 GB per GPU (W70_FP8_GB above). At the one
    common request rate both make the same tokens, so their $ per M output tokens differ by the price per
    GPU-hour alone: H200 $3.79 / H100 $2.99 - 1 = +26.8%.
    Source: hand: weights from Llama-3.1-70B's config.json; the two prices are the catalog's public listings.
    """
    at = run_app()
    at.button(key="pin_plan").click().run()
    at.sidebar.selectbox(key="gpu_choice").set_value("h200").run()
    at.button(key="pin_plan").click().run()
    at.radio(key="view").set_value("Compare what-ifs").run()
    at.radio(key="cmp_mode").set_value("At one request rate").run()
    table = at.dataframe[0].value
    assert table.shape[1] == 3  # two pins and the difference
    assert "ITL p99" in table.index and "Request rate (req/s per replica)" in table.index
    assert [_num(v) for v in table.loc["Weights per GPU"].iloc[:2]] == pytest.approx(
        [W70_FP8_GB[4]] * 2, abs=0.006
    )
    assert float(table.loc["$ per M output tokens"].iloc[2].rstrip("%")) == pytest.approx(
        (3.79 / 2.99 - 1) * 100, abs=0.06
    )
    compare = json.loads(query(at)["compare"])
    assert [p["gpu"] for p in compare] == ["h100-sxm", "h200"]


def test_comparison_link_loads_pins_and_skips_bad_ones():
    """The two good pins reach the comparison: both hold 18.17 GB of 70B fp8 weights per GPU at TP 4, and
    at their common rate the B200's $ per M output tokens is its price ratio above the H100's:
    $4.99 / $2.99 - 1 = +66.9%.
    Source: hand: weights from Llama-3.1-70B's config.json (W70_FP8_GB above); prices are the catalog's public
    listings.
    """
    pins = [{**DEFAULT_SCENARIO}, {**DEFAULT_SCENARIO, "gpu": "b200"}, {**DEFAULT_SCENARIO, "tp": "x"}]
    at = run_app({**scenario_to_query(DEFAULT_SCENARIO), "compare": json.dumps(pins)})
    assert len(at.session_state["pins"]) == 2
    assert any("compare[2]" in unescape(w.value) for w in at.warning)
    at.radio(key="view").set_value("Compare what-ifs").run()
    at.radio(key="cmp_mode").set_value("At one request rate").run()
    table = at.dataframe[0].value
    assert table.shape[1] == 3
    assert [_num(v) for v in table.loc["Weights per GPU"].iloc[:2]] == pytest.approx(
        [W70_FP8_GB[4]] * 2, abs=0.006
    )
    assert float(table.loc["$ per M output tokens"].iloc[2].rstrip("%")) == pytest.approx(
        (4.99 / 2.99 - 1) * 100, abs=0.06
    )


def test_exports_offer_scenario_plan_and_sweep():
    """Source: ui: the app, exports offer scenario plan and sweep."""
    at = run_app()
    labels = [b.label for b in at.get("download_button")]
    assert labels == ["Scenario JSON", "Plan JSON", "Batch sweep CSV"]


def test_ideal_efficiency_reproduces_the_roofline():
    """Llama-3.1-8B, bf16, one H100, batch 1: an ideal decode step streams every weight but the embedding
    table (one row read): (6,979,321,856 + 525,336,576 + 266,240) x 2 B = 15,009,849,344 B, and the KV of
    the mean context of 2,000 + 400 / 2 = 2,200 tokens: 32 x 8 x 128 x 2 x 2 B x 2,200 = 288,358,400 B.
    Its FLOPs (2 x 7.5e9 = 15 GFLOP, 0.015 ms at 989 TFLOP/s) hide under the bytes:
    ITL = 15,298,207,744 B / 3.35 TB/s = 4.567 ms; 1,000 / 4.567 = 219.0 tokens/s.
    Source: hand: the arithmetic above (Llama-3.1-8B config.json, NVIDIA H100 SXM datasheet 3.35 TB/s).
    """
    link = {"model": "llama-3.1-8b", "tp": "1", "weights": "bf16", "kv_cache": "bf16", "batch": "1"}
    at = run_app(link)
    at.sidebar.radio(key="efficiency").set_value("ideal").run()
    assert query(at)["efficiency"] == "ideal"
    assert shown(at, "ITL, decode only") == pytest.approx(4.567, rel=0.005)
    assert shown(at, "Tokens/s per user, decode only") == pytest.approx(219.0, rel=0.005)
    assert_metrics_match_plan(at, {**DEFAULT_SCENARIO, "model": "llama-3.1-8b", "tp": 1, "weights": "bf16",
                                   "kv_cache": "bf16", "batch": 1, "efficiency": "ideal"})


def test_custom_price_enters_the_link_and_cost():
    """At $5 per GPU-hour, one H100 decoding Llama-3.1-8B bf16 alone at its ideal 4.567 ms per token
    (test_ideal_efficiency_reproduces_the_roofline) makes 219.0 tokens/s, so a million tokens cost
    5 / 3,600 s / 219.0 x 1e6 = $6.343.
    Source: hand: the arithmetic above.
    """
    link = {"model": "llama-3.1-8b", "tp": "1", "weights": "bf16", "kv_cache": "bf16", "batch": "1",
            "efficiency": "ideal"}
    at = run_app(link)
    at.sidebar.number_input(key="price").set_value(5.0).run()
    assert query(at)["usd_per_gpu_hour"] == "5.0"
    assert shown(at, "$ per M, decode-only bound") == pytest.approx(6.343, rel=0.003)
    assert_metrics_match_plan(
        at,
        {
            **DEFAULT_SCENARIO,
            "model": "llama-3.1-8b", "tp": 1, "weights": "bf16", "kv_cache": "bf16", "batch": 1,
            "efficiency": "ideal", "usd_per_gpu_hour": 5.0,
        },
    )


def test_speculative_decoding_inputs():
    """Geometric acceptance (seed 001, E = (1 - p^(k+1)) / (1 - p), which seed_inconsistencies.md item 21
    confirms): at the defaults p = 0.7, k = 4 a target pass yields (1 - 0.7^5) / 0.3 = 2.77 tokens.
    Source: seed: 001's expected tokens per round under geometric acceptance, computed above.
    """
    at = run_app()
    at.sidebar.checkbox(key="spec_on").check().run()
    spec = json.loads(query(at)["speculative"])
    assert spec == {"acceptance": 0.7, "draft_params": 1e9, "draft_tokens": 4}
    text = [i.value for i in at.info if "Speculative decoding" in i.value][0]
    assert "2.77 tokens per target pass" in text


def test_hf_config_import_in_the_app():
    """Llama-3.1-8B's config pasted in: its fp8 weights at the default TP 4 are 6,979,321,856 / 4 linear
    bytes + 2,101,346,304 / 4 of bf16 embedding and head + 532,480 of norms = 2,270,699,520 B per GPU.
    Source: model-card: Llama-3.1-8B config.json (the config pasted), weights by hand (W8_GB above).
    """
    at = run_app()
    at.sidebar.selectbox(key="model_choice").set_value("custom").run()
    config = {"model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
              "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256}
    at.text_area(key="hf_text").input(json.dumps(config)).run()
    at.button(key="hf_apply").click().run()
    assert not at.exception
    model = json.loads(query(at)["model"])
    assert model == {"hf_config": config}
    assert shown(at, "Weights per GPU") == pytest.approx(W8_GB[("fp8", 4)], abs=0.006)


@pytest.mark.parametrize(
    "text,message",
    [
        (
            '{"model_type": "gpt2"}', "not supported",
        ),  # a family the importer does not know: it names the ones it does
        (
            json.dumps({"model_type": "llama", "pad": "x" * HF_MAX_BYTES}), "paste or upload",
        ),  # over the size limit:
        # the box never holds it, so nothing usable was pasted, and the page says so
    ],
)
def test_a_pasted_config_that_cannot_be_used_is_refused_and_nothing_applies(text, message):
    """Source: ui: the app's behaviour."""
    at = run_app()
    at.sidebar.selectbox(key="model_choice").set_value("custom").run()
    at.text_area(key="hf_text").input(text).run()
    at.button(key="hf_apply").click().run()
    assert not at.exception
    assert len(at.text_area(key="hf_text").value or "") <= HF_MAX_BYTES  # the box itself holds no more
    errors = " ".join(e.value for e in at.error)
    assert message in errors and ("llama" in errors or message != "not supported")
    assert "hf_config" not in query(at).get("model", "")
def test_sizing_page_ranks_options():
    """The form's inputs reach the search: Llama-3.1-8B in bf16 on one H100 at 2 req/s of 500 -> 200 tokens.
    One H100 carries it: a request alone takes a 500-token prefill (2 x 8.03e9 x 500 = 8 TFLOP, 8 ms at
    989 TFLOP/s) and 200 steps of at least 15.0 GB / 3.35 TB/s = 4.5 ms, about 1 s with the engine's
    overheads, so about 2 requests run at once, far below what 60 GB of KV holds, and a step at that batch
    stays near 5-10 ms, under the 40 ms objective. The cheapest option is then one GPU at the catalog's
    $2.99/hour for 2 x 200 = 400 tokens/s: 2.99 / (400 x 3,600) x 1e6 = $2.076 per million output tokens.
    Source: hand: the arithmetic above (price: the catalog's Lambda Cloud listing for H100 SXM).
    """
    at = run_app()
    at.radio(key="view").set_value("Size a fleet").run()
    for key, value in (("sz_model", "llama-3.1-8b"), ("sz_rps", 2.0), ("sz_prompt", 500), ("sz_output", 200),
                       ("sz_ttft", 1000.0), ("sz_itl", 40.0)):
        (at.selectbox if key == "sz_model" else at.number_input)(key=key).set_value(value)
    for key, value in (
        ("sz_gpus", ["h100-sxm"]), ("sz_tp", [1]), ("sz_weights", ["bf16"]), ("sz_kv", ["bf16"]),
    ):
        at.multiselect(key=key).set_value(value)
    submit = [b for b in at.button if b.label == "Find the cheapest fleet"][0]
    submit.click().run(timeout=TIMEOUT)
    assert not at.exception
    assert any("meet both objectives" in m.value for m in at.markdown)
    assert "size" in at.query_params
    best = at.dataframe[0].value.iloc[0]
    assert (best["GPU"], best["replicas"], best["GPUs"]) == ("NVIDIA H100 SXM5 80GB", 1, 1)
    assert best["$/M output tokens"] == pytest.approx(2.076, rel=0.002)


def test_moe_model_shows_total_and_active_parameters():
    """Mistral's Mixtral-8x7B announcement: 46.7B total parameters, 12.9B used per token. From its config
    (32 layers, d_model 4096, 8 KV heads of 128, 8 experts of d_ff 14336, vocab 32000): per layer
    4096 x 10240 + 8 x 3 x 4096 x 14336 + 4096 x 8 + 8192 = 1,451,270,144; x 32 + 2 x 32000 x 4096 + 4096 =
    46,702,792,704 parameters, 93.41 GB in bf16 on one H200.
    Source: model-card: Mixtral-8x7B announcement and config.json.
    """
    at = run_app({"model": "mixtral-8x7b", "gpu": "h200", "tp": "1", "weights": "bf16", "kv_cache": "bf16"})
    header = " ".join(m.value for m in at.markdown)
    assert "46.7B params, 12.9B active per token" in header
    assert shown(at, "Weights per GPU") == pytest.approx(93.4056, abs=0.006)


def test_sizing_link_reproduces_the_search():
    """Llama-3.1-8B bf16 at 2 req/s, ITL objective 40 ms, on an L4 or an H100 at $2.50/hour (the link's
    price). An L4 cannot: every decode step streams 15.0 GB of weights over 300 GB/s (L4 datasheet) = 50 ms
    > 40 ms. One H100 can (test_sizing_page_ranks_options), so the cheapest fleet is one H100 for 400 output
    tokens/s: 2.50 / (400 x 3,600) x 1e6 = $1.736 per million.
    Source: hand: the arithmetic above (NVIDIA L4 datasheet 300 GB/s).
    """
    request = {
        "model": "llama-3.1-8b", "traffic": {"requests_per_s": 2.0, "prompt_len": 500, "output_len": 200},
        "slo": {"ttft_ms": 1000.0, "itl_ms": 40.0}, "gpus": ["l4", "h100-sxm"], "tp": [1],
        "weights": ["bf16"], "kv_cache": ["bf16"], "cost_mode": "rent", "usd_per_gpu_hour": {"h100-sxm": 2.5},
    }
    at = run_app({"size": json.dumps(request)})
    at.radio(key="view").set_value("Size a fleet").run(timeout=TIMEOUT)
    # the link filled the form and says so; nothing ran until the button (issue 32)
    assert not at.dataframe and any("press" in i.value for i in at.info)
    press_find(at)
    assert not any("press" in i.value for i in at.info)  # the note goes once the search has run
    from planner.serving.sizing import size

    expected = size(request)
    text = [m.value for m in at.markdown if "meet both objectives" in m.value][0]
    assert f"**{expected['searched']:,}** configurations" in text
    frame = at.dataframe[0].value
    assert set(frame["GPU"]) == {"NVIDIA H100 SXM5 80GB"}  # no L4 option
    assert (frame.iloc[0]["replicas"], frame.iloc[0]["GPUs"]) == (1, 1)
    assert frame.iloc[0]["$/M output tokens"] == pytest.approx(1.736, rel=0.002)


def test_bad_sizing_link_is_named():
    """Source: ui: the app, bad sizing link is named."""
    at = run_app({"size": '{"model": "llama-3.1-8b"}'})
    at.radio(key="view").set_value("Size a fleet").run()
    assert any("size" in unescape(w.value) and "traffic" in unescape(w.value) for w in at.warning)


def test_calibration_from_a_vllm_bench_file_applies_to_the_plan():
    """The upload handler, driven directly (AppTest cannot upload files): profile in state, plan names it.
    The profile is fitted to GPUStack's concurrency-1 run of vLLM 0.11, Qwen3-8B bf16 on one H100 (TPOT 7.28
    ms); loaded through a link at batch 8, the page must show the TPOT of their concurrency-8 run, which
    the fit never saw: 7.71 ms, within 6%.
    Source: published: GPUStack performance lab, Qwen3-8B on H100 (data/reference/measured_published.csv).
    """
    from ui import exports

    root = Path(__file__).resolve().parents[1] / "data" / "examples"
    scenario = json.loads((root / "qwen3_8b_h100_scenario.json").read_text())

    class Upload:
        name = "bench.json"
        size = 0

        @staticmethod
        def getvalue():
            return (root / "vllm_bench_qwen3_8b_h100.json").read_bytes()

    import streamlit as st

    st.session_state.clear()
    assert exports.apply_bench_upload(Upload, scenario) is None
    profile = st.session_state["calibration"]
    calibrated = plan_dict({**scenario, "calibration": profile})
    assert calibrated["latency"]["itl_ms"] == pytest.approx(7.28, rel=0.01)
    assert calibrated["calibration"] == "vllm-bench:bench.json"
    at = run_app(scenario_to_query({**scenario, "calibration": profile, "batch": 8}))
    assert shown(at, "ITL, decode only") == pytest.approx(7.71, rel=0.06)


SIZING_70B_FP8 = {
    "model": "llama-3.1-70b", "traffic": {"requests_per_s": 10.0, "prompt_len": 2000, "output_len": 400},
    "slo": {"ttft_ms": 2000.0, "itl_ms": 50.0}, "gpus": ["h100-sxm", "h200"], "tp": [2, 4],
    "weights": ["fp8"], "kv_cache": ["fp8"],
}


def test_sizing_option_opens_in_the_planner():
    """A search over Llama-3.1-70B fp8 at TP 2 and 4 on H100 and H200: the opened option shows its own
    weights per GPU (36.33 GB at TP 2, 18.17 GB at TP 4: W70_FP8_GB above) and its GPU's fp8 ridge (590.7 on
    the H100, 412.3 on the H200: RIDGE above).
    Source: hand: weights from Llama-3.1-70B's config.json; ridges from the NVIDIA H100 and H200 datasheets.
    """
    at = run_app({"size": json.dumps(SIZING_70B_FP8)})
    at.radio(key="view").set_value("Size a fleet").run(timeout=TIMEOUT)
    press_find(at)  # a link fills the form; its search waits for the button (issue 32)
    option = at.session_state["sz_result"]["options"][2]
    at.number_input(key="sz_pick").set_value(3).run()  # 1-based: option 3 is the third
    at.button(key="sz_open").click().run()
    assert not at.exception
    assert at.sidebar.selectbox(key="gpu_choice").value == option["gpu"]
    assert at.sidebar.selectbox(key="tp").value == option["tp"]
    assert at.sidebar.number_input(key="batch").value == option["batch"]
    assert_metrics_match_plan(
        at, option["scenario"]
    )  # the option's scenario, its load and objective included
    assert shown(at, "Weights per GPU") == pytest.approx(W70_FP8_GB[option["tp"]], abs=0.006)
    assert shown(at, "Ridge FLOP/byte") == pytest.approx(RIDGE[f"{option['gpu']} fp8"], rel=2e-3)


# --- issue 13: no injection, no traceback, no silent change -------------------------------------------

EVIL = "[Log in again](https://evil.example/login) ![x](https://evil.example/pixel.png) <img src=x>"


def _all_text(at: AppTest) -> str:
    return " ".join(e.value for kind in ("markdown", "caption", "warning", "error", "info", "success")
                    for e in at.get(kind))


def _live_markup(text: str) -> list[str]:
    """Markdown links/images, HTML tags and bare addresses outside code spans (they would render)."""
    import re

    outside = re.sub(r"(`+)(?:(?!\1).)*?\1", "", text)  # drop every inline code span
    return re.findall(r"\]\(|<img|<a |https?://|www\.", outside)


def test_pin_names_from_a_link_never_render_as_markdown():
    """A crafted `compare=` link: pin names go into the comparison as plain text (a dataframe, not
    st.table, whose headers render Markdown), and no Markdown element carries a live link or image.
    Source: ui: the app's behaviour.
    """
    pins = [{**DEFAULT_SCENARIO, "model": {"name": EVIL, "n_layers": 4, "d_model": 512, "n_heads": 8,
                                             "n_kv_heads": 2, "d_ff": 2048, "vocab_size": 32000}},
            {**DEFAULT_SCENARIO, "gpu": {"name": EVIL, "memory_gb": 80.0, "hbm_tb_s": 3.35,
                                         "tflops": {"bf16": 989.4, "fp8": 1978.9}, "usd_per_hour": 2.0}}]
    at = run_app({**scenario_to_query(DEFAULT_SCENARIO), "compare": json.dumps(pins)})
    at.radio(key="view").set_value("Compare what-ifs").run()
    assert not at.exception
    assert len(at.session_state["pins"]) == 2
    assert not at.table  # st.table renders its headers as Markdown
    frame = at.dataframe[0].value
    assert any(EVIL in str(v) for v in [*frame.columns, *frame.to_numpy().ravel()])  # shown literally
    assert not _live_markup(_all_text(at))


def test_custom_names_in_the_plan_header_and_warnings_are_escaped():
    """The custom GPU carries the H100 SXM datasheet's figures (989 dense bf16 TFLOP/s, 3.35 TB/s), so the
    page shows a bf16 ridge of 989.5 / 3.35 = 295.4 and Llama-3.1-8B's bf16 weights at TP 4: 4,015,529,984 B
    per GPU (W8_GB above).
    Source: datasheet: NVIDIA H100 SXM datasheet (1,979 sparse bf16 TFLOP/s, 3.35 TB/s); weights by hand.
    """
    gpu = {
        "name": EVIL, "vendor": "[x](https://evil.example/v)", "memory_gb": 80.0, "hbm_tb_s": 3.35,
        "tflops": {"bf16": 989.4}, "usd_per_hour": 2.0,
    }
    at = run_app(
        {"gpu": json.dumps(gpu), "tp": "4", "model": "llama-3.1-8b", "weights": "bf16", "kv_cache": "bf16"}
    )
    assert at.sidebar.selectbox(key="gpu_choice").value == "custom"
    assert shown(at, "Ridge FLOP/byte") == pytest.approx(RIDGE["h100-sxm bf16"], rel=2e-3)
    assert shown(at, "Weights per GPU") == pytest.approx(W8_GB[("bf16", 4)], abs=0.006)
    text = _all_text(at)
    assert not _live_markup(text)
    assert "evil" in text  # the name is shown, escaped


def test_memory_utilization_below_the_old_slider_minimum_is_shown_as_given():
    """0.1 is a valid vLLM gpu_memory_utilization the planner accepts; the input used to start at 0.3
    and raise. At 0.1 an H100 (81,559 MiB = 85.5 GB) offers 8.6 GB, less than Llama-3.1-8B's 16.06 GB of
    bf16 weights (8.03e9 params x 2 B) before any reserve, so the plan must say it does not fit.
    Source: hand: 85.5 x 0.1 = 8.6 GB < 16.06 GB.
    """
    at = run_app(
        {
            "model": "llama-3.1-8b", "tp": "1", "weights": "bf16", "kv_cache": "bf16",
            "memory.utilization": "0.1",
        }
    )
    assert at.sidebar.number_input(key="utilization").value == pytest.approx(0.1)
    assert query(at)["memory.utilization"] == "0.1"
    assert not at.warning or all("utilization" not in w.value for w in at.warning)
    assert any("do not fit" in e.value for e in at.error)


def test_tp_3_from_a_link_is_refused_naming_the_nearest_valid_tp():
    """Llama-3.1-8B has 32 attention heads and 8 KV heads: vLLM refuses TP 3 (vllm/config/model.py,
    "Total number of attention heads (32) must be divisible by tensor parallel size (3)"), so the link's
    TP is refused with the planner's one line, which names 2 or 4, and the plan uses a valid TP.
    Source: hand: the divisors of 32 that divide 8 or are multiples of it, around 3: 2 and 4.
    """
    at = run_app({"tp": "3", "model": "llama-3.1-8b"})
    warnings = [unescape(w.value) for w in at.warning]
    assert any("tp" in w and "3 must divide the model's 32 attention heads and 8 KV heads" in w
               and "nearest valid 2 or 4" in w for w in warnings), warnings
    assert at.sidebar.selectbox(key="tp").value in (2, 4)
    assert query(at).get("tp") != "3"


def test_a_tp_that_splits_no_heads_is_refused_with_a_button_for_each_nearest_tp():
    """Llama-3.2-3B: 24 attention heads, 8 KV heads. TP 16 divides neither the 24 heads nor is a multiple of
    8 that divides 24, so the plan is refused with `tp: 16 must divide ...: nearest valid 8 or 24`, and the
    sidebar offers both; one click plans at TP 8.
    Source: hand: the TPs that split 24 heads and 8 KV heads are 1, 2, 4, 8 and 24.
    """
    at = run_app({"model": "llama-3.2-3b", "tp": "1"})
    at.sidebar.selectbox(key="tp").set_value(16).run()
    errors = [unescape(e.value) for e in at.error]
    assert any(
        "16 must divide the model's 24 attention heads and 8 KV heads" in e and "nearest valid 8 or 24" in e
        for e in errors
    ), errors
    labels = [b.label for b in at.sidebar.button]
    assert "Use TP 8" in labels and "Use TP 24" in labels
    at.sidebar.button(key="tp_fix_8").click().run()
    assert not at.exception
    assert at.sidebar.selectbox(key="tp").value == 8
    assert not [e for e in at.error if "must divide" in e.value]
    assert query(at)["tp"] == "8"


def test_a_tenth_of_a_cent_per_gpu_hour_is_kept():
    """Source: ui: the app's behaviour."""
    at = run_app({"usd_per_gpu_hour": "0.001"})
    assert at.sidebar.number_input(key="price").value == pytest.approx(0.001)
    assert query(at)["usd_per_gpu_hour"] == "0.001"
    assert_metrics_match_plan(at, {**DEFAULT_SCENARIO, "usd_per_gpu_hour": 0.001})


def test_link_warnings_go_away_once_the_user_changes_the_input():
    """The bad link falls back to the H100 (fp8 ridge 1,979 / 2 / 3.35 = 590.7); once the user picks the
    H200 the page shows its ridge, 1,979 / 2 / 4.8 TB/s = 412.3, and no warning.
    Source: datasheet: NVIDIA H100 SXM and H200 SXM datasheets (RIDGE above).
    """
    at = run_app({"gpu": "h900"})
    assert any("gpu" in unescape(w.value) for w in at.warning)
    assert shown(at, "Ridge FLOP/byte") == pytest.approx(RIDGE["h100-sxm fp8"], rel=2e-3)
    at.sidebar.selectbox(key="gpu_choice").set_value("h200").run()
    assert not at.warning
    assert shown(at, "Ridge FLOP/byte") == pytest.approx(RIDGE["h200 fp8"], rel=2e-3)


def test_sizing_link_with_null_optional_fields_runs():
    """Source: ui: the app's behaviour."""
    request = {
        "model": "llama-3.1-8b", "traffic": {"requests_per_s": 2.0, "prompt_len": 500, "output_len": 200},
        "slo": {"ttft_ms": 1000.0, "itl_ms": 40.0}, "gpus": None, "ownership": None, "tp": [1, 3],
        "weights": ["bf16", "fp16"],
    }
    at = run_app({"size": json.dumps(request)})
    at.radio(key="view").set_value("Size a fleet").run(timeout=TIMEOUT)
    press_find(at)  # a link fills the form; its search waits for the button (issue 32)
    assert not at.exception and not at.error
    assert at.multiselect(key="sz_tp").value == [1, 3]
    assert at.multiselect(key="sz_weights").value == ["bf16", "fp16"]
    assert at.session_state["sz_request"]["tp"] == [1, 3]


def test_a_link_over_the_length_limit_is_refused_with_a_message():
    """Source: ui: the app's behaviour."""
    from ui.links import MAX_LINK_CHARS

    at = run_app({"gpu": "h200", "model": json.dumps({"name": "x" * MAX_LINK_CHARS})})
    warnings = unescape(" ".join(w.value for w in at.warning))
    assert "over the limit" in warnings
    assert at.sidebar.selectbox(key="gpu_choice").value == DEFAULT_SCENARIO["gpu"]  # nothing of it applied




def test_an_uploaded_config_over_the_size_limit_is_never_read():
    """The size comes from the upload's metadata; reading its bytes would fail this test.
    Source: ui: the app's behaviour (AppTest or a real browser).
    """
    from planner import ScenarioError
    from ui.inputs import HF_MAX_BYTES, read_hf_config

    class Upload:
        size = HF_MAX_BYTES + 1

        def getvalue(self):
            raise AssertionError("read before the size check")

    with pytest.raises(ScenarioError, match="over the limit"):
        read_hf_config("", Upload())
    with pytest.raises(ScenarioError, match="nested too deeply|not valid JSON"):
        read_hf_config("[" * 60_000, None)


def test_plan_offers_the_commands_that_deploy_and_benchmark_it():
    """The commands panel (ui/commands_panel.py) appears on request and shows the library's vLLM command,
    which must say the default scenario in vLLM's documented flags: `vllm serve meta-llama/Llama-3.1-70B`
    (the model card's id), `--tensor-parallel-size 4`, `--max-model-len 8192`, `--quantization fp8`,
    `--kv-cache-dtype fp8`, and its benchmark `vllm bench serve` with `--random-input-len 2000` and
    `--random-output-len 400`.
    Source: docs: vLLM 0.11 `vllm serve` and `vllm bench serve` CLI reference
    (data/reference/engine_cli_flags.json).
    """
    from planner.contract.commands import command_set, shell_command

    at = run_app()
    assert not at.code or all("vllm serve" not in c.value for c in at.code)  # not built until asked
    at.toggle(key="cmd_show").set_value(True).run()
    assert not at.exception
    expected = shell_command(command_set(DEFAULT_SCENARIO, "vllm").launch.argv)
    codes = [c.value for c in at.code]
    assert expected in codes
    launch = " ".join(next(c for c in codes if c.startswith("vllm serve")).replace("\\\n", " ").split())
    assert launch.startswith("vllm serve meta-llama/Llama-3.1-70B ")
    for flag in (
        "--tensor-parallel-size 4", "--max-model-len 8192", "--quantization fp8", "--kv-cache-dtype fp8",
    ):
        assert f" {flag} " in launch + " "
    bench = " ".join(next(c for c in codes if c.startswith("vllm bench serve")).replace("\\\n", " ").split())
    assert " --random-input-len 2000 " in bench and " --random-output-len 400 " in bench


def test_a_sizing_option_offers_its_commands():
    """The first option's vLLM command says its layout in vLLM's documented flags: the option's TP as
    `--tensor-parallel-size`, and `--quantization fp8` and `--kv-cache-dtype fp8` for the fp8 search.
    Source: docs: vLLM 0.11 `vllm serve` CLI reference (data/reference/engine_cli_flags.json).
    """
    at = run_app({"size": json.dumps(SIZING_70B_FP8)})
    at.radio(key="view").set_value("Size a fleet").run(timeout=TIMEOUT)
    press_find(at)  # a link fills the form; its search waits for the button (issue 32)
    option = at.session_state["sz_result"]["options"][0]
    at.toggle(key="sz_cmd_show").set_value(True).run()
    assert not at.exception
    launch = (
        " ".join(
            next(c.value for c in at.code if c.value.startswith("vllm serve")).replace("\\\n", " ").split()
        )
        + " "
    )
    assert launch.startswith("vllm serve meta-llama/Llama-3.1-70B ")
    for flag in (f"--tensor-parallel-size {option['tp']}", "--quantization fp8", "--kv-cache-dtype fp8"):
        assert f" {flag} " in launch


def test_sizing_table_reads_like_a_table_and_ownership_inputs_only_when_owning():
    """Human headers, catalog GPU names, options numbered from 1; ownership inputs hidden in rent mode.
    Source: ui: the app's behaviour (issue 13.8).
    """
    at = run_app()
    at.radio(key="view").set_value("Size a fleet").run()
    assert not [n for n in at.number_input if n.key == "sz_years"]  # rent: no ownership inputs
    [b for b in at.button if b.label == "Find the cheapest fleet"][0].click().run(timeout=TIMEOUT)
    frame = at.dataframe[0].value
    assert frame.index[0] == 1 and frame.index.name == "option"
    assert {"GPU", "ITL p90 (ms)", "TTFT p90 (ms)", "$/M output tokens"} <= set(frame.columns)
    assert "ITL alone (ms)" not in frame.columns  # it was the same figure as ITL under load
    for column in frame.columns:  # only columns that differ, beside the fleet's GPU, size, latency and cost
        if column not in (
            "GPU", "GPUs", "TTFT p90 (ms)", "ITL p90 (ms)", "fleet $/hour", "$/M output tokens",
        ):
            assert frame[column].nunique() > 1, column
    assert any("TTFT p90" in m.value and "ITL p90" in m.value for m in at.markdown)
    from gpu_catalog import load_catalog

    names = {g.name for g in load_catalog().values()}
    assert set(frame["GPU"]) <= names
    # validated GPUs first (the catalog's flag), each group cheapest first; unticked, the planner's cost order
    options = at.session_state["sz_result"]["options"]
    flags = (
        [frame.loc[i, "validated GPU"] == "yes" for i in frame.index] if "validated GPU" in frame else None
    )
    if flags is not None:
        assert flags == sorted(flags, reverse=True)
    assert any("Cheaper on paper" in i.value for i in at.info) == (not options[0]["validated"])
    at.checkbox(key="sz_validated_first").set_value(False).run()
    assert at.dataframe[0].value.iloc[0]["fleet $/hour"] == pytest.approx(options[0]["usd_per_hour"])
    at.radio(key="sz_cost_mode").set_value("own").run()
    assert [n for n in at.number_input if n.key == "sz_years"]


def test_wording_has_no_never_crossing_no_redundant_fp8_advice_and_readable_breakdown():
    """The default scenario is memory-bound at every batch, and the page must say so plainly. By hand, per
    GPU of TP 4 at the mean context of 2,200 tokens: a decode step at batch B does
    (2 x 69,501,714,432 weights incl. the LM head x B + 4 x 64 heads x 128 x 80 layers x 2,200 x B) / 4 FLOPs
    and reads 17,640,734,720 B of weights (all but the embedding table) + 40,960 B x 2,200 x B of fp8 KV.
    At B = 64: 2.3163e12 / 23.408e9 = 98.96 FLOP/byte; as B grows it tends to
    (139.0e9 + 5.77e9) / (163,840 x 2,200) = 401.6, below the 590.7 ridge, so no batch reaches it.
    Source: hand: the arithmetic above (Llama-3.1-70B config.json; NVIDIA H100 SXM datasheet for the ridge).
    """
    at = run_app({"batch": "64"})  # fp8 KV, memory-bound at every batch for this context
    assert shown(at, "Decode FLOP/byte") == pytest.approx(98.96, rel=2e-3)
    assert "memory-bound at every batch" in " ".join(m.value for m in at.markdown)
    text = " ".join(m.value for m in at.markdown) + " ".join(c.value for c in at.caption)
    assert "at never" not in text
    assert "already fp8" in text and "fp8/int8 KV" not in text
    breakdown = [d.value for d in at.dataframe if "one decode step" in " ".join(map(str, d.value.columns))][0]
    assert "TP all-reduce" in breakdown.index and "gemm_ms" not in breakdown.index


def test_plan_leads_with_the_operating_point_and_its_charts():
    """The operating point (rate, concurrency, percentiles, cost) comes first, as the plan's `serving`
    section gives it; the frontier and the latency-vs-rate charts are drawn. The charts carry outside figures:
    the memory bar's weights are 18,166,071,296 B (W70_FP8_GB above) / 2^30 = 16.918 GiB and its device total
    the H100's 81,559 MiB / 1,024 = 79.647 GiB; the roofline is drawn at the H100 SXM datasheet's dense fp8
    peak (3,958 / 2 = 1,979 TFLOP/s) and 3.35 TB/s.
    Source: hand: the arithmetic above (H100 memory: our nvidia-smi measurement; peaks: NVIDIA H100
    datasheet).
    """
    at = run_app()
    labels = [m.label for m in at.metric]
    assert labels[:5] == ["Goodput per replica", "Output tokens/s per replica", "$ per M output tokens",
                          "GPUs for 50 req/s", "$/hour for 50 req/s"]
    assert labels.index("TTFT p90") < labels.index("TTFT, one request alone")  # bounds come after
    specs = [json.loads(c.proto.spec) for c in at.get("vega_lite_chart")]
    memory = next(sp for sp in specs if str(sp["title"]["text"]).startswith("Per-GPU memory"))
    bars = {v["part"]: v["gib"] for v in memory["layer"][0]["data"]["values"]}
    ticks = {v["line"].split(" ")[0]: v["gib"] for v in memory["layer"][1]["data"]["values"]}
    assert bars["weights"] == pytest.approx(16.918, abs=0.002)
    assert ticks["device"] == pytest.approx(79.647, abs=0.002)
    # a column's title comes in lines (a list of strings)
    titles = [t if isinstance(t, str) else " ".join(t) for t in (sp["title"]["text"] for sp in specs)]
    roofline = next(t for t in titles if t.startswith("Roofline"))
    assert "1,979 TFLOP/s" in roofline and "3.35 TB/s" in roofline
    assert any(t.startswith("Throughput per GPU vs speed per user") for t in titles)
    assert any(t.startswith("TTFT vs request rate") for t in titles) and any(
        t.startswith("ITL vs request rate") for t in titles
    )


def test_request_rate_and_objective_from_the_sidebar_reach_the_plan():
    """At a stable 2.0 req/s of 400-token outputs the replica makes 2.0 x 400 = 800 tokens/s, 200 per GPU
    of its 4; at the catalog's $2.99 per H100-hour that costs 4 x 2.99 / (800 x 3,600) x 1e6 = $4.153 per
    million output tokens.
    Source: hand: the arithmetic above (price: the catalog's Lambda Cloud listing for H100 SXM).
    """
    at = run_app()
    at.sidebar.radio(key="load_mode").set_value("request rate").run()
    at.sidebar.number_input(key="load_rate").set_value(2.0).run()
    at.sidebar.checkbox(key="slo_on").check().run()
    load = json.loads(query(at)["load"])
    assert load["request_rate"] == 2.0 and load["slo"]["percentile"] == 90
    scenario = {**DEFAULT_SCENARIO, "load": load}
    assert shown(at, "Output tokens/s per replica") == pytest.approx(800.0, abs=0.6)
    assert any(c.value.startswith("200 per GPU") for c in at.caption)
    assert shown(at, "$ per M output tokens") == pytest.approx(4.153, abs=6e-4)
    assert_metrics_match_plan(at, scenario)
    goodput = plan_dict(scenario)["serving"]["goodput_request_rate"]
    assert goodput is not None and f"goodput {goodput:,.2f} req/s" in " ".join(c.value for c in at.caption)


def test_a_rate_beyond_capacity_is_called_unstable_without_percentiles():
    """Source: ui: the app's behaviour (issue 9.2b: no percentiles that pretend)."""
    capacity = plan_dict(DEFAULT_SCENARIO)["serving"]["max_request_rate"]
    at = run_app({"load": json.dumps({"request_rate": round(capacity * 3, 2)})})
    assert any("Unstable" in e.value for e in at.error)
    assert "TTFT p50 / p99" not in metrics(at)


def test_pins_are_compared_at_one_common_request_rate():
    """Every pin at 70% of the lowest capacity among them, stated in the table's first row, so every pin is
    stable there (pins with a `batch` once got a rate past their capacity: it came from the closed-loop plan,
    where `batch` counts clients, not the cap on running sequences). The pins are Llama-3.1-8B bf16, one
    sequence at a time, ideal efficiency, on an H100 and an H200: each decode step streams 15,298,207,744 B
    (test_ideal_efficiency_reproduces_the_roofline), 4.567 ms at 3.35 TB/s and 3.187 ms at 4.8 TB/s, so
    the H200's decode-only ITL is 3.35 / 4.8 - 1 = -30.2% off the H100's.
    Source: datasheet: NVIDIA H100 SXM (3.35 TB/s) and H200 SXM (4.8 TB/s) datasheets; bytes by hand.
    """
    one = {
        **DEFAULT_SCENARIO,
        "model": "llama-3.1-8b", "tp": 1, "weights": "bf16", "kv_cache": "bf16", "batch": 1,
        "efficiency": "ideal",
    }
    pins = [one, {**one, "gpu": "h200"}]
    at = run_app({**scenario_to_query(DEFAULT_SCENARIO), "compare": json.dumps(pins)})
    at.radio(key="view").set_value("Compare what-ifs").run()
    at.radio(key="cmp_mode").set_value("At one request rate").run()
    table = at.dataframe[0].value
    capacities = [float(v) for v in table.loc["Capacity (req/s per replica)"].iloc[:2]]
    rate = 0.7 * min(capacities)
    shown_rate = table.loc["Request rate (req/s per replica)"]
    assert [float(v) for v in shown_rate.iloc[:2]] == pytest.approx([rate, rate], abs=0.006)
    assert "n/a" not in list(table.loc["ITL p99"].iloc[:2])  # both pins stable at the common rate
    itl = [_num(v) for v in table.loc["ITL, decode only at the max batch"].iloc[:2]]
    assert itl == pytest.approx([4.567, 3.187], abs=0.006)
    assert float(table.loc["ITL, decode only at the max batch"].iloc[2].rstrip("%")) == pytest.approx(
        (3.35 / 4.8 - 1) * 100, abs=0.06)
    h200 = plan_dict({**pins[1], "load": {"request_rate": round(at.session_state["cmp_rate"], 3)}})["serving"]
    assert table.iloc[:, 1]["ITL p99"] == fmt_time(h200["itl_ms"]["p99"])


def test_sizing_searches_disaggregated_fleets_and_says_which_mode_wins():
    """Long prompts at 10 req/s (the disaggregation test's case): the page tags options with their mode and
    states the winner with the planner's reason (planner.serving.serving_modes), and a disaggregated option
    opens its decode worker in the planner, which shows the worker's own weights per GPU (70B fp8: 36.33 GB at
    TP 2,
    18.17 GB at TP 4, W70_FP8_GB above) and its GPU's fp8 ridge (H100 590.7, H200 412.3: RIDGE above).
    Source: hand: weights from Llama-3.1-70B's config.json; ridges from the NVIDIA H100 and H200 datasheets.
    """
    request = {
        "model": "llama-3.1-70b", "traffic": {"requests_per_s": 10.0, "prompt_len": 8000, "output_len": 300},
        "slo": {"ttft_ms": 2000.0, "itl_ms": 50.0}, "gpus": ["h100-sxm", "h200"], "tp": [2, 4],
        "weights": ["fp8"], "kv_cache": ["fp8"], "disaggregation": True,
    }
    at = run_app({"size": json.dumps(request)})
    at.radio(key="view").set_value("Size a fleet").run(timeout=TIMEOUT)
    press_find(at)  # a link fills the form; its search waits for the button (issue 32)
    assert not at.exception and at.checkbox(key="sz_disagg").value
    from planner.serving.serving_modes import size_with_modes

    expected = size_with_modes(request)["assumptions"]["modes"]
    assert any(expected["winner"].capitalize() in i.value for i in at.info)
    frame = at.dataframe[0].value
    assert set(frame["mode"]) <= {"aggregated", "disaggregated"} and "disaggregated" in set(frame["mode"])
    first_disagg = int(frame.index[list(frame["mode"]).index("disaggregated")])
    option = at.session_state["sz_result"]["options"][first_disagg - 1]
    decode = option["decode"]
    at.number_input(key="sz_pick").set_value(first_disagg).run()
    # the option opens as a disaggregated fleet: both pools, the KV transfer, the objectives judged
    shown_metrics = {m.label: m for m in at.metric}
    assert shown_metrics["Prefill workers"].value.startswith(f"{option['prefill_workers']:,} worker")
    assert shown_metrics["Decode workers"].value.startswith(f"{option['decode_workers']:,} worker")
    assert shown_metrics["Per request"].value == f"{option['kv_transfer_ms']:,.1f} ms"
    ttft = shown_metrics["TTFT p90 (objective 2,000 ms)"]
    itl = shown_metrics["ITL p90 (objective 50.0 ms)"]
    assert (ttft.delta, itl.delta) == ("met", "met")
    assert option["ttft_ms"] <= 2000.0 and option["itl_ms"] <= 50.0
    at.button(key="sz_open").click().run()
    assert not at.exception and "ITL, decode only" in metrics(at)
    assert shown(at, "Weights per GPU") == pytest.approx(W70_FP8_GB[decode["tp"]], abs=0.006)
    assert shown(at, "Ridge FLOP/byte") == pytest.approx(RIDGE[f"{decode['gpu']} fp8"], rel=2e-3)


def _waterfall(at: AppTest) -> dict[str, float]:
    """The memory waterfall table (GiB per GPU) by its row labels."""
    for frame in at.dataframe:
        table = frame.value
        if "GiB" in table.columns and "= KV cache" in table.index:
            return {label: float(v) for label, v in table["GiB"].items()}
    raise AssertionError("no memory waterfall on the page")


def test_vllm_release_selector_changes_the_profiling_peak_and_the_link():
    """Choosing the vLLM release whose start-up rules to follow changes the activation peak the waterfall
    shows, and the link carries the choice.

    Source: hand: Llama-3.1-8B (config.json: hidden 4,096, vocab 128,256) at vLLM's serve defaults on H100,
    1,024 sequences and 8,192 batched tokens: the dummy sampler run over 1,024 x 128,256 logits plus the
    8,192 x 4,096 bf16 hidden states (67,108,864 B) is the profiling peak. Latest rules (0.21, FlashInfer,
    14 B per logit): 1,838,645,248 + 67,108,864 B = 1.7749 GiB; 0.16 (PyTorch sort, 38 B per logit, our H200
    measurement): 4,990,607,360 + 67,108,864 B = 4.7104 GiB; 0.16 counts no CUDA-graph pool (0.21 does:
    0.3233 + 0.018333 x 32 layers = 0.9100 GiB)."""
    at = run_app(
        {"model": "llama-3.1-8b", "gpu": "h100-sxm", "tp": "1", "weights": "bf16", "kv_cache": "bf16"}
    )
    latest = _waterfall(at)
    assert latest["- activation peak of the profiling run"] == pytest.approx(1.7749, abs=5e-4)
    assert latest["- CUDA-graph pool"] == pytest.approx(0.9100, abs=5e-4)
    at.sidebar.selectbox(key="vllm_version").set_value("0.16").run()
    assert not at.exception
    old = _waterfall(at)
    assert old["- activation peak of the profiling run"] == pytest.approx(4.7104, abs=5e-4)
    assert old["- CUDA-graph pool"] == 0.0
    assert query(at).get("vllm_version") == "0.16"


# --- issue 31: one scenario across every view -------------------------------------------------------------
def test_a_link_carries_the_traffic_target_and_the_view_and_a_reload_keeps_them():
    """The traffic target (80 req/s) and the view travel in the link; reloading that link shows the same
    fleet (80 / goodput per replica, rounded up, x 4 GPUs) on the same view, and the sizing form opens at
    the sidebar's traffic, objective, model and precision instead of its own defaults.
    Source: ui: the app's link round trip (issue 31: 80 req/s -> 584 GPUs became 50 req/s -> 368 GPUs)."""
    at = run_app()
    at.sidebar.number_input(key="traffic_rps").set_value(80.0).run()
    gpus = metrics(at)["GPUs for 80 req/s"]
    at.radio(key="view").set_value("Size a fleet").run()
    link = query(at)
    assert link["traffic_rps"] == "80.0" and link["view"] == "size"
    again = run_app(link)
    assert again.session_state["view"] == "Size a fleet"
    assert again.sidebar.number_input(key="traffic_rps").value == 80.0
    ss = again.session_state
    assert (ss["sz_rps"], ss["sz_ttft"], ss["sz_itl"], ss["sz_pct"]) == (80.0, 1000.0, 50.0, 90)
    assert (ss["sz_model"], ss["sz_weights"], ss["sz_kv"]) == ("llama-3.1-70b", ["fp8"], ["fp8"])
    again.radio(key="view").set_value("Plan").run()
    assert metrics(again)["GPUs for 80 req/s"] == gpus
    bad = run_app({"traffic_rps": "lots", "view": "nowhere"})
    warnings = unescape(" ".join(w.value for w in bad.warning))
    assert "traffic_rps" in warnings and "view" in warnings and not bad.exception


def test_the_sizing_form_follows_the_sidebar():
    """A sidebar change (traffic, objective, model) reaches the sizing form's inputs.
    Source: ui: the app (issue 31: Size a fleet opened at 10 req/s and TTFT <= 2 s beside a 50 req/s, 1 s
    sidebar)."""
    at = run_app()
    at.radio(key="view").set_value("Size a fleet").run()
    assert (at.session_state["sz_rps"], at.session_state["sz_ttft"]) == (50.0, 1000.0)
    at.sidebar.number_input(key="traffic_rps").set_value(12.5).run()
    at.sidebar.number_input(key="slo_ttft").set_value(800.0).run()
    at.sidebar.selectbox(key="model_choice").set_value("llama-3.1-8b").run()
    ss = at.session_state
    assert (ss["sz_rps"], ss["sz_ttft"], ss["sz_model"], ss["sz_weights"]) == (12.5, 800.0, "llama-3.1-8b",
                                                                                ["bf16"])


def test_a_model_switch_takes_the_checkpoints_native_precision():
    """gpt-oss-120b ships its experts in MXFP4 (config.json quantization_config quant_method "mxfp4"): a
    switch to it plans fp4 weights, computed in bf16 on an H100 (no fp4 tensor cores), not the previous
    model's fp8; Llama-3.1-8B ships in bf16.
    Source: model-card: openai/gpt-oss-120b and meta-llama/Llama-3.1-8B config.json (torch_dtype bfloat16)."""
    at = run_app()
    at.sidebar.selectbox(key="model_choice").set_value("gpt-oss-120b").run()
    assert (at.sidebar.selectbox(key="weights").value, at.sidebar.selectbox(key="compute").value) == (
        "fp4", "bf16")
    assert any("MXFP4" in c.value for c in at.sidebar.caption)
    assert not at.error and "ITL, decode only" in metrics(at)
    at.sidebar.selectbox(key="model_choice").set_value("llama-3.1-8b").run()
    assert at.sidebar.selectbox(key="weights").value == "bf16"


def test_a_context_beyond_the_models_positions_is_refused_naming_its_limit():
    """Llama-3.1-8B's config.json has max_position_embeddings 131,072: a 1,000,000-token context is refused
    in the form and in a link, naming that limit (vLLM refuses such a --max-model-len).
    Source: model-card: meta-llama/Llama-3.1-8B config.json (max_position_embeddings 131072)."""
    at = run_app({"model": "llama-3.1-8b", "tp": "1", "weights": "bf16", "kv_cache": "bf16"})
    at.sidebar.number_input(key="context_len").set_value(1_000_000).run()
    errors = unescape(" ".join(e.value for e in at.error))
    assert "context_len" in errors and "131,072" in errors and "Llama-3.1-8B" in errors
    link = run_app({"model": "llama-3.1-8b", "tp": "1", "weights": "bf16", "kv_cache": "bf16",
                    "context_len": "1000000"})
    warnings = unescape(" ".join(w.value for w in link.warning))
    assert "context_len" in warnings and "131,072" in warnings
    assert link.sidebar.number_input(key="context_len").value == DEFAULT_SCENARIO["context_len"]
