"""Streamlit AppTest: every element, the link round trip (bad parameters included), pins, exports, sizing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from planner import plan_dict
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


def query(at: AppTest) -> dict[str, str]:
    """The app's query string as name -> value (AppTest may hold a value as a one-item list)."""
    return {k: (v[0] if isinstance(v, list) else v) for k, v in ((k, at.query_params[k]) for k in at.query_params)}


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def _num(text: str) -> float:
    """The number a tile shows, in its base unit: "1.73 s" reads as 1,730 ms."""
    parts = text.replace("$", "").replace(",", "").split()
    value = float(parts[0])
    return value * 1000.0 if len(parts) > 1 and parts[1] == "s" else value


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
    assert _num(m["$ per M output tokens"]) == pytest.approx(p["cost"]["usd_per_million_output_tokens"], abs=6e-4)
    sv = p["serving"]
    assert _num(m["Request rate"]) == pytest.approx(sv["request_rate"], abs=0.006)
    ttft50, ttft99 = (_num(x) for x in m["TTFT p50 / p99"].split(" / "))
    # shown to 3-4 significant figures (ms below 10 s, then s with 2 decimals)
    assert ttft50 == pytest.approx(sv["ttft_ms"]["p50"], rel=0.006) and ttft99 == pytest.approx(sv["ttft_ms"]["p99"], rel=0.006)
    itl50, itl99 = (_num(x) for x in m["ITL p50 / p99"].split(" / "))
    assert itl50 == pytest.approx(sv["itl_ms"]["p50"], rel=0.006) and itl99 == pytest.approx(sv["itl_ms"]["p99"], rel=0.006)


def test_default_page_shows_a_realistic_plan_with_every_headline_figure():
    """Source: ui: the app, default page shows a realistic plan with every headline figure."""
    at = run_app()
    assert len(at.metric) == 17  # operating point 4 + latency 3 + memory/roofline 5 + decode-only 5
    assert_metrics_match_plan(at, DEFAULT_SCENARIO)
    assert at.sidebar.selectbox(key="model_choice").value == "llama-3.1-70b"
    assert at.sidebar.selectbox(key="gpu_choice").value == "h100-sxm"
    assert len(at.get("vega_lite_chart")) >= 5  # memory, roofline, AI, ITL+tok/s, cost
    assert not at.error and not at.warning


def test_share_link_reproduces_the_cli_plan():
    """Source: ui: the app, share link reproduces the cli plan."""
    link = {"model": "llama-3.1-70b", "gpu": "h200", "tp": "2", "weights": "fp8", "kv_cache": "fp8",
            "context_len": "8192", "prompt_len": "3000", "output_len": "500"}
    at = run_app(link)
    scenario = {**{k: (int(v) if v.isdigit() else v) for k, v in link.items()}}
    assert_metrics_match_plan(at, scenario)
    assert query(at) == scenario_to_query(scenario)


def test_bad_link_parameters_fall_back_and_the_rest_applies():
    """Source: ui: the app, bad link parameters fall back and the rest applies."""
    at = run_app({"gpu": "h900", "tp": "two", "context_len": "4096", "prompt_len": "1000", "output_len": "200",
                  "weights": "<b>fp9</b>"})
    warnings = unescape(" ".join(w.value for w in at.warning))
    assert "gpu" in warnings and "unknown GPU" in warnings
    assert "tp" in warnings and "whole number" in warnings
    assert "weights" in warnings and "<b>" not in warnings  # user text is escaped, never HTML
    assert at.sidebar.number_input(key="context_len").value == 4096
    assert at.sidebar.number_input(key="prompt_len").value == 1000
    assert at.sidebar.selectbox(key="gpu_choice").value == DEFAULT_SCENARIO["gpu"]
    assert at.sidebar.selectbox(key="tp").value == DEFAULT_SCENARIO["tp"]
    assert_metrics_match_plan(at, {**DEFAULT_SCENARIO, "context_len": 4096, "prompt_len": 1000, "output_len": 200})


def test_changing_an_input_updates_the_url():
    """Source: ui: the app, changing an input updates the url."""
    at = run_app()
    at.sidebar.selectbox(key="tp").set_value(8).run()
    assert query(at)["tp"] == "8"
    assert_metrics_match_plan(at, {**DEFAULT_SCENARIO, "tp": 8})
    at.sidebar.selectbox(key="gpu_choice").set_value("b200").run()
    assert query(at)["gpu"] == "b200"


def test_custom_model_travels_as_json_in_the_link():
    """Source: ui: the app, custom model travels as json in the link."""
    model = {"name": "tiny", "n_layers": 4, "d_model": 512, "n_heads": 8, "n_kv_heads": 2, "d_ff": 2048,
             "vocab_size": 32000}
    at = run_app({"model": json.dumps(model), "gpu": "l4", "tp": "1", "weights": "bf16", "kv_cache": "bf16"})
    assert at.sidebar.selectbox(key="model_choice").value == "custom"
    assert at.sidebar.number_input(key="m_n_layers").value == 4
    assert_metrics_match_plan(at, {"model": {**model, "head_dim": 64, "tied_embeddings": False}, "gpu": "l4",
                                   "tp": 1, "weights": "bf16", "kv_cache": "bf16", "context_len": 8192,
                                   "prompt_len": 2000, "output_len": 400})


def test_scenario_that_does_not_fit_says_so_and_offers_what_would_fit():
    """Llama-3.1-405B in bf16 is 405.9e9 x 2 B = 811.8 GB of weights. On H100s (80 GB x 0.9 - 2 GB reserve =
    70 GB per GPU for weights and KV) TP 8 holds 101.5 GB per GPU: no fit; TP 16 holds 50.7 GB: fits. At TP 8,
    fp8 weights are 50.7 GB per GPU: fit; an H200 (141 x 0.9 - 2 = 124.9 GB) holds the 101.5 GB of bf16.
    Source: hand: the arithmetic above (parameter count from the Llama 3.1 405B model card).
    """
    at = run_app({"model": "llama-3.1-405b", "gpu": "h100-sxm", "tp": "8", "weights": "bf16", "kv_cache": "bf16"})
    errors = " ".join(e.value for e in at.error)
    assert "do not fit" in errors
    assert not {"ITL, decode only", "$ per M output tokens", "TTFT p50 / p99"} & set(metrics(at))  # nothing implies it works
    assert len(at.get("vega_lite_chart")) == 1  # the memory bar only
    labels = [b.label for b in at.button]
    assert "Use TP 16" in labels
    assert "fp8 weights, bf16 KV" in labels
    assert "NVIDIA H200" in " ".join(labels)
    at.button(key="fit_tp").click().run()
    assert at.sidebar.selectbox(key="tp").value == 16
    assert "ITL, decode only" in metrics(at) and not at.error


def test_invalid_input_combination_names_the_field_and_keeps_state():
    """Source: ui: the app, invalid input combination names the field and keeps state."""
    at = run_app()
    at.sidebar.number_input(key="prompt_len").set_value(9000).run()
    assert not at.exception
    assert any("context_len" in unescape(e.value) for e in at.error)
    assert at.sidebar.selectbox(key="model_choice").value == "llama-3.1-70b"  # nothing else lost
    at.sidebar.number_input(key="context_len").set_value(16384).run()
    assert not at.error and len(at.metric) == 17


def test_pin_two_scenarios_and_compare():
    """Source: ui: the app, pin two scenarios and compare."""
    at = run_app()
    at.button(key="pin_plan").click().run()
    at.sidebar.selectbox(key="gpu_choice").set_value("h200").run()
    at.button(key="pin_plan").click().run()
    at.radio(key="view").set_value("Compare what-ifs").run()
    table = at.dataframe[0].value
    assert table.shape[1] == 3  # two pins and the difference
    assert "ITL p99" in table.index and "Request rate (req/s per replica)" in table.index
    compare = json.loads(query(at)["compare"])
    assert [p["gpu"] for p in compare] == ["h100-sxm", "h200"]


def test_comparison_link_loads_pins_and_skips_bad_ones():
    """Source: ui: the app, comparison link loads pins and skips bad ones."""
    pins = [{**DEFAULT_SCENARIO}, {**DEFAULT_SCENARIO, "gpu": "b200"}, {**DEFAULT_SCENARIO, "tp": "x"}]
    at = run_app({**scenario_to_query(DEFAULT_SCENARIO), "compare": json.dumps(pins)})
    assert len(at.session_state["pins"]) == 2
    assert any("compare[2]" in unescape(w.value) for w in at.warning)


def test_exports_offer_scenario_plan_and_sweep():
    """Source: ui: the app, exports offer scenario plan and sweep."""
    at = run_app()
    labels = [b.label for b in at.get("download_button")]
    assert labels == ["Scenario JSON", "Plan JSON", "Batch sweep CSV"]


def test_ideal_efficiency_reproduces_the_roofline():
    """Source: ui: the app, ideal efficiency reproduces the roofline."""
    at = run_app()
    at.sidebar.radio(key="efficiency").set_value("ideal").run()
    assert query(at)["efficiency"] == "ideal"
    assert_metrics_match_plan(at, {**DEFAULT_SCENARIO, "efficiency": "ideal"})


def test_custom_price_enters_the_link_and_cost():
    """Source: ui: the app, custom price enters the link and cost."""
    at = run_app()
    at.sidebar.number_input(key="price").set_value(5.0).run()
    assert query(at)["usd_per_gpu_hour"] == "5.0"
    assert_metrics_match_plan(at, {**DEFAULT_SCENARIO, "usd_per_gpu_hour": 5.0})


def test_speculative_decoding_inputs():
    """Source: ui: the app, speculative decoding inputs."""
    at = run_app()
    at.sidebar.checkbox(key="spec_on").check().run()
    spec = json.loads(query(at)["speculative"])
    assert spec == {"acceptance": 0.7, "draft_params": 1e9, "draft_tokens": 4}
    expected = plan_dict({**DEFAULT_SCENARIO, "speculative": spec})["speculative"]
    shown = [i.value for i in at.info if "Speculative decoding" in i.value][0]
    assert f"{expected['tokens_per_round']:.2f} tokens per target pass" in shown


def test_hf_config_import_in_the_app():
    """Source: ui: the app, hf config import in the app."""
    at = run_app()
    at.sidebar.selectbox(key="model_choice").set_value("custom").run()
    config = {"model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
              "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256}
    at.text_area(key="hf_text").input(json.dumps(config)).run()
    at.button(key="hf_apply").click().run()
    assert not at.exception
    model = json.loads(query(at)["model"])
    assert model == {"hf_config": config}
    weights_8b = plan_dict({**DEFAULT_SCENARIO, "model": "llama-3.1-8b"})["memory"]["weights_gb_per_gpu"]
    assert float(metrics(at)["Weights per GPU"].split()[0]) == pytest.approx(weights_8b, abs=0.006)


def test_hf_config_import_rejects_unsupported_family():
    """Source: ui: the app, hf config import rejects unsupported family."""
    at = run_app()
    at.sidebar.selectbox(key="model_choice").set_value("custom").run()
    at.text_area(key="hf_text").input('{"model_type": "gpt2"}').run()
    at.button(key="hf_apply").click().run()
    assert any("not supported" in e.value and "llama" in e.value for e in at.error)


def test_sizing_page_ranks_options():
    """Source: ui: the app, sizing page ranks options."""
    at = run_app()
    at.radio(key="view").set_value("Size a fleet").run()
    submit = [b for b in at.button if b.label == "Find the cheapest fleet"][0]
    submit.click().run(timeout=TIMEOUT)
    assert not at.exception
    assert any("meet both objectives" in m.value for m in at.markdown)
    assert "size" in at.query_params


def test_moe_model_shows_total_and_active_parameters():
    """Source: ui: the app, moe model shows total and active parameters."""
    at = run_app({"model": "mixtral-8x7b", "gpu": "h200", "tp": "1", "weights": "bf16", "kv_cache": "bf16"})
    header = " ".join(m.value for m in at.markdown)
    assert "46.7B params, 12.9B active per token" in header


def test_sizing_link_reproduces_the_search():
    """Source: ui: the app, sizing link reproduces the search."""
    request = {"model": "llama-3.1-8b", "traffic": {"requests_per_s": 2.0, "prompt_len": 500, "output_len": 200},
               "slo": {"ttft_ms": 1000.0, "itl_ms": 40.0}, "gpus": ["l4", "h100-sxm"], "tp": [1], "weights": ["bf16"],
               "kv_cache": ["bf16"], "cost_mode": "rent"}
    at = run_app({"size": json.dumps(request)})
    at.radio(key="view").set_value("Size a fleet").run(timeout=TIMEOUT)
    from planner.serving.sizing import size

    expected = size(request)
    shown = [m.value for m in at.markdown if "meet both objectives" in m.value][0]
    assert f"**{expected['searched']:,}** configurations" in shown
    assert at.session_state["sz_result"]["options"][0]["gpu"] == expected["options"][0]["gpu"]


def test_bad_sizing_link_is_named():
    """Source: ui: the app, bad sizing link is named."""
    at = run_app({"size": '{"model": "llama-3.1-8b"}'})
    at.radio(key="view").set_value("Size a fleet").run()
    assert any("size" in unescape(w.value) and "traffic" in unescape(w.value) for w in at.warning)


def test_calibration_from_a_vllm_bench_file_applies_to_the_plan():
    """The upload handler, driven directly (AppTest cannot upload files): profile in state, plan names it.
    Source: ui: the app, calibration from a vllm bench file applies to the plan."""
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


def test_sizing_option_opens_in_the_planner():
    """Source: ui: the app, sizing option opens in the planner."""
    at = run_app()
    at.radio(key="view").set_value("Size a fleet").run()
    [b for b in at.button if b.label == "Find the cheapest fleet"][0].click().run(timeout=TIMEOUT)
    option = at.session_state["sz_result"]["options"][2]
    at.number_input(key="sz_pick").set_value(3).run()  # 1-based: option 3 is the third
    at.button(key="sz_open").click().run()
    assert not at.exception
    assert at.sidebar.selectbox(key="gpu_choice").value == option["gpu"]
    assert at.sidebar.selectbox(key="tp").value == option["tp"]
    assert at.sidebar.number_input(key="batch").value == option["batch"]
    # the option's itl_ms is its p90 under load; the page shows the decode-only step at the option's batch:
    # close, not equal (2.8% apart under issue 10's physics)
    assert float(metrics(at)["ITL, decode only"].split()[0]) == pytest.approx(option["itl_ms"], rel=0.05)


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
    assert any(EVIL in str(col) for col in frame.columns)  # shown literally
    assert not _live_markup(_all_text(at))


def test_custom_names_in_the_plan_header_and_warnings_are_escaped():
    """Source: ui: the app's behaviour."""
    gpu = {"name": EVIL, "vendor": "[x](https://evil.example/v)", "memory_gb": 80.0, "hbm_tb_s": 3.35, "tflops": {"bf16": 989.4},
           "usd_per_hour": 2.0}
    at = run_app({"gpu": json.dumps(gpu), "tp": "4", "model": "llama-3.1-8b", "weights": "bf16", "kv_cache": "bf16"})
    assert at.sidebar.selectbox(key="gpu_choice").value == "custom"
    text = _all_text(at)
    assert not _live_markup(text)
    assert "evil" in text  # the name is shown, escaped


def test_memory_utilization_below_the_old_slider_minimum_is_shown_as_given():
    """0.1 is a valid vLLM gpu_memory_utilization the planner accepts; the input used to start at 0.3
    and raise. At 0.1 an 80 GB H100 offers 8.0 GB, minus the 2 GB reserve: 6 GB, less than Llama-3.1-8B's
    16.06 GB of bf16 weights (8.03e9 params x 2 B), so the plan must say it does not fit.
    Source: hand: 80 x 0.1 - 2 = 6 GB < 16.06 GB.
    """
    at = run_app({"model": "llama-3.1-8b", "tp": "1", "weights": "bf16", "kv_cache": "bf16", "memory.utilization": "0.1"})
    assert at.sidebar.number_input(key="utilization").value == pytest.approx(0.1)
    assert query(at)["memory.utilization"] == "0.1"
    assert not at.warning or all("utilization" not in w.value for w in at.warning)
    assert any("do not fit" in e.value for e in at.error)


def test_tp_3_from_a_link_stays_tp_3():
    """Source: ui: the app's behaviour."""
    at = run_app({"tp": "3", "model": "llama-3.1-8b"})
    assert at.sidebar.selectbox(key="tp").value == 3
    assert query(at)["tp"] == "3"
    assert_metrics_match_plan(at, {**DEFAULT_SCENARIO, "model": "llama-3.1-8b", "tp": 3})


def test_a_tenth_of_a_cent_per_gpu_hour_is_kept():
    """Source: ui: the app's behaviour."""
    at = run_app({"usd_per_gpu_hour": "0.001"})
    assert at.sidebar.number_input(key="price").value == pytest.approx(0.001)
    assert query(at)["usd_per_gpu_hour"] == "0.001"
    assert_metrics_match_plan(at, {**DEFAULT_SCENARIO, "usd_per_gpu_hour": 0.001})


def test_link_warnings_go_away_once_the_user_changes_the_input():
    """Source: ui: the app's behaviour."""
    at = run_app({"gpu": "h900"})
    assert any("gpu" in unescape(w.value) for w in at.warning)
    at.sidebar.selectbox(key="gpu_choice").set_value("h200").run()
    assert not at.warning


def test_sizing_link_with_null_optional_fields_runs():
    """Source: ui: the app's behaviour."""
    request = {"model": "llama-3.1-8b", "traffic": {"requests_per_s": 2.0, "prompt_len": 500, "output_len": 200},
               "slo": {"ttft_ms": 1000.0, "itl_ms": 40.0}, "gpus": None, "ownership": None, "tp": [1, 3],
               "weights": ["bf16", "fp16"]}
    at = run_app({"size": json.dumps(request)})
    at.radio(key="view").set_value("Size a fleet").run(timeout=TIMEOUT)
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


def test_a_pasted_config_over_the_size_limit_is_refused_before_parsing():
    """Source: ui: the app's behaviour."""
    from ui.inputs import HF_MAX_BYTES

    at = run_app()
    at.sidebar.selectbox(key="model_choice").set_value("custom").run()
    big = json.dumps({"model_type": "llama", "pad": "x" * HF_MAX_BYTES})
    at.text_area(key="hf_text").input(big).run()
    at.button(key="hf_apply").click().run()
    assert not at.exception
    assert len(at.text_area(key="hf_text").value or "") <= HF_MAX_BYTES  # the box itself holds no more
    assert at.error  # nothing usable was pasted: said so
    assert "hf_config" not in query(at).get("model", "")


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
    """The commands panel (ui/commands_panel.py) appears on request and shows the library's vLLM command.
    Source: ui: the app's behaviour.
    """
    from planner.contract.commands import command_set, shell_command

    at = run_app()
    assert not at.code or all("vllm serve" not in c.value for c in at.code)  # not built until asked
    at.toggle(key="cmd_show").set_value(True).run()
    assert not at.exception
    expected = shell_command(command_set(DEFAULT_SCENARIO, "vllm").launch.argv)
    assert expected in [c.value for c in at.code]


def test_a_sizing_option_offers_its_commands():
    """Source: ui: the app's behaviour."""
    at = run_app()
    at.radio(key="view").set_value("Size a fleet").run()
    [b for b in at.button if b.label == "Find the cheapest fleet"][0].click().run(timeout=TIMEOUT)
    at.toggle(key="sz_cmd_show").set_value(True).run()
    assert not at.exception
    assert any("--tensor-parallel-size" in c.value for c in at.code)


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
    assert {"GPU", "ITL under load (ms)", "$/M output tokens"} <= set(frame.columns)
    from gpu_catalog import load_catalog

    names = {g.name for g in load_catalog().values()}
    assert set(frame["GPU"]) <= names
    at.radio(key="sz_cost_mode").set_value("own").run()
    assert [n for n in at.number_input if n.key == "sz_years"]


def test_wording_has_no_never_crossing_no_redundant_fp8_advice_and_readable_breakdown():
    """Source: ui: the app's behaviour (issue 13.8)."""
    at = run_app()  # fp8 KV, memory-bound at every batch for this context
    text = " ".join(m.value for m in at.markdown) + " ".join(c.value for c in at.caption)
    assert "at never" not in text
    assert "already fp8" in text and "fp8/int8 KV" not in text
    breakdown = [d.value for d in at.dataframe if "one decode step" in " ".join(map(str, d.value.columns))][0]
    assert "TP all-reduce" in breakdown.index and "gemm_ms" not in breakdown.index


def test_plan_leads_with_the_operating_point_and_its_charts():
    """The operating point (rate, concurrency, percentiles, cost) comes first, as the plan's `serving`
    section gives it; the frontier and the latency-vs-rate charts are drawn.
    Source: ui: the app's behaviour (issue 9.6).
    """
    at = run_app()
    labels = [m.label for m in at.metric]
    assert labels[:4] == ["Request rate", "Concurrency", "Output tokens/s per GPU", "$ per M output tokens"]
    assert labels.index("TTFT p50 / p99") < labels.index("TTFT, one request alone")  # bounds come after
    titles = [json.loads(c.proto.spec)["title"]["text"] for c in at.get("vega_lite_chart")]
    assert any(t.startswith("Throughput per GPU vs speed per user") for t in titles)
    assert any(t.startswith("TTFT vs request rate") for t in titles) and any(t.startswith("ITL vs request rate") for t in titles)


def test_request_rate_and_objective_from_the_sidebar_reach_the_plan():
    """Source: ui: the app's behaviour (issue 9.6)."""
    at = run_app()
    at.sidebar.radio(key="load_mode").set_value("request rate").run()
    at.sidebar.number_input(key="load_rate").set_value(2.0).run()
    at.sidebar.checkbox(key="slo_on").check().run()
    load = json.loads(query(at)["load"])
    assert load["request_rate"] == 2.0 and load["slo"]["percentile"] == 90
    scenario = {**DEFAULT_SCENARIO, "load": load}
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
    """Every pin at 70% of the lowest capacity among them, stated in the table's first row.
    Source: ui: the app's behaviour (issue 9.6).
    """
    pins = [{**DEFAULT_SCENARIO}, {**DEFAULT_SCENARIO, "gpu": "h200"}]
    at = run_app({**scenario_to_query(DEFAULT_SCENARIO), "compare": json.dumps(pins)})
    at.radio(key="view").set_value("Compare what-ifs").run()
    capacities = [plan_dict(p)["serving"]["max_request_rate"] for p in pins]
    rate = 0.7 * min(capacities)
    table = at.dataframe[0].value
    shown = table.loc["Request rate (req/s per replica)"]
    assert [float(v) for v in shown.iloc[:2]] == pytest.approx([rate, rate], abs=0.006)
    h200 = plan_dict({**pins[1], "load": {"request_rate": round(rate, 3)}})["serving"]
    assert table.iloc[:, 1]["ITL p99"] == f"{h200['itl_ms']['p99']:,.1f} ms"


def test_sizing_searches_disaggregated_fleets_and_says_which_mode_wins():
    """Long prompts at 10 req/s (the disaggregation test's case): the page tags options with their mode and
    states the winner with the planner's reason (planner.serving.serving_modes), and a disaggregated option opens
    its decode worker in the planner.
    Source: ui: the app's behaviour (issue 12).
    """
    request = {"model": "llama-3.1-70b", "traffic": {"requests_per_s": 10.0, "prompt_len": 8000, "output_len": 300},
               "slo": {"ttft_ms": 2000.0, "itl_ms": 50.0}, "gpus": ["h100-sxm", "h200"], "tp": [2, 4],
               "weights": ["fp8"], "kv_cache": ["fp8"], "disaggregation": True}
    at = run_app({"size": json.dumps(request)})
    at.radio(key="view").set_value("Size a fleet").run(timeout=TIMEOUT)
    assert not at.exception and at.checkbox(key="sz_disagg").value
    from planner.serving.serving_modes import size_with_modes

    expected = size_with_modes(request)["assumptions"]["modes"]
    assert any(expected["winner"].capitalize() in i.value for i in at.info)
    frame = at.dataframe[0].value
    assert set(frame["mode"]) <= {"aggregated", "disaggregated"} and "disaggregated" in set(frame["mode"])
    first_disagg = int(frame.index[list(frame["mode"]).index("disaggregated")])
    at.number_input(key="sz_pick").set_value(first_disagg).run()
    at.button(key="sz_open").click().run()
    assert not at.exception and "ITL, decode only" in metrics(at)
