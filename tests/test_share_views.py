"""One share link for every view (issue 31 item 4: "A share link reproduces every view"): inputs set on the
Plan, Compare, Size a fleet and Power & fleets views travel in the one link the app writes, and a fresh
session opened on it shows each view with the same inputs and the same figures. Bad values of the views' own
parameters (ui/view_links.py) are each named in one warning line and left at their defaults."""

from __future__ import annotations

import json

from streamlit.testing.v1 import AppTest
from test_app import TIMEOUT, metrics, press_find, query, run_app, unescape

from ui.compare import MODES
from ui.links import DEFAULT_SCENARIO, scenario_to_query

# every view's own inputs, as the session holds them (the sidebar's are the scenario's, compared through it)
COMPARE_KEYS = ("cmp_mode", "cmp_rate")
SIZE_KEYS = ("sz_model", "sz_rps", "sz_prompt", "sz_output", "sz_ttft", "sz_itl", "sz_pct", "sz_tpot",
             "sz_headroom", "sz_gpus", "sz_tp", "sz_weights", "sz_kv", "sz_cost_mode", "sz_disagg", "sz_pp",
             "sz_ep", "sz_validated_first", "sz_pick", "sz_cmd_show", "sz_cmd_engine")
POWER_KEYS = ("pw_tool", "ct_model", "ct_rps", "ct_ttft", "ct_itl", "ct_prompt", "ct_output", "ct_gpus",
              "ct_tiers")


def _view(at: AppTest, name: str) -> None:
    at.radio(key="view").set_value(name).run(timeout=TIMEOUT)
    assert not at.exception, [e.value for e in at.exception]


def _inputs(at: AppTest, keys: tuple[str, ...]) -> dict[str, object]:
    return {k: at.session_state[k] for k in keys}


def _commands(at: AppTest) -> list[str]:
    """The launch and benchmark commands a Deploy-and-benchmark panel shows (its code blocks)."""
    return [c.value for c in at.code if "--" in c.value]


def _set_every_view(at: AppTest) -> dict[str, object]:
    """Non-default inputs on each view, each view's figures recorded as shown."""
    seen: dict[str, object] = {}
    at.sidebar.selectbox(key="gpu_choice").set_value("h200").run()
    at.sidebar.number_input(key="traffic_rps").set_value(80.0).run()
    _view(at, "Compare what-ifs")
    at.button(key="pin_compare").click().run()
    at.sidebar.selectbox(key="gpu_choice").set_value("b200").run()
    at.button(key="pin_compare").click().run()
    at.radio(key="cmp_mode").set_value(MODES[1]).run()
    at.number_input(key="cmp_rate").set_value(1.5).run()
    seen["compare"] = at.dataframe[0].value
    _view(at, "Size a fleet")
    at.multiselect(key="sz_gpus").set_value(["h100-sxm", "h200"])
    at.multiselect(key="sz_tp").set_value([4, 8])
    at.number_input(key="sz_headroom").set_value(80.0)
    press_find(at)
    at.checkbox(key="sz_validated_first").uncheck().run()
    at.number_input(key="sz_pick").set_value(2).run()
    at.toggle(key="sz_cmd_show").set_value(True).run()
    at.radio(key="sz_cmd_engine").set_value("trt-llm").run()
    seen["size"] = at.dataframe[0].value
    seen["size_commands"] = _commands(at)
    _view(at, "Power & fleets")
    at.radio(key="pw_tool").set_value("Context tiers").run()
    at.multiselect(key="ct_gpus").set_value(["h200"])
    at.multiselect(key="ct_tiers").set_value([8192, 32768]).run()
    at.button(key="ct_run").click().run(timeout=TIMEOUT)
    seen["power"] = at.dataframe[0].value
    _view(at, "Plan")  # the link is taken on the Plan view: every other view's inputs must still be in it
    at.toggle(key="cmd_show").set_value(True).run()
    at.radio(key="cmd_engine").set_value("sglang").run()
    seen["plan"], seen["commands"] = metrics(at), _commands(at)
    seen.update(compare_inputs=_inputs(at, COMPARE_KEYS), size_inputs=_inputs(at, SIZE_KEYS),
                power_inputs=_inputs(at, POWER_KEYS))
    return seen


def test_a_share_link_reproduces_every_view():
    """Inputs set on every view (the sidebar's GPU and an 80 req/s traffic target, the plan's commands for
    SGLang; two pins compared at one request rate of 1.5 req/s per replica; a sizing search over two GPUs and
    two TPs at 80% headroom, cheapest first, option 2 shown with its TensorRT-LLM commands; the context tiers
    of one GPU) survive a switch to another view, travel in the link the app writes, and a fresh session
    opened on that link shows each view with the same inputs and the same figures (the sizing search once
    its button is pressed: a link never starts one, issue 32).
    Source: ui: the app's link round trip (issue 31 item 4: a share link reproduces every view)."""
    at = run_app()
    seen = _set_every_view(at)
    link = query(at)
    assert link["compare_at"] == "rate" and float(link["compare_rate"]) == 1.5
    assert link["size_order"] == "cheapest" and link["size_option"] == "2"
    assert (link["commands"], link["size_commands"]) == ("sglang", "trt-llm")
    assert json.loads(link["power"])["ct_tiers"] == [8192, 32768]
    plan_box = [c.value for c in at.code if c.value.startswith("?")]
    assert plan_box and "compare_rate=1.5" in plan_box[0]  # the Plan view's "Share this scenario" box

    again = run_app(link)
    assert not again.warning, [w.value for w in again.warning]
    _view(again, "Plan")
    assert metrics(again) == seen["plan"] and _commands(again) == seen["commands"]
    assert any("sglang" in c for c in seen["commands"])
    assert again.sidebar.selectbox(key="gpu_choice").value == "b200"
    _view(again, "Compare what-ifs")
    assert _inputs(again, COMPARE_KEYS) == seen["compare_inputs"]
    assert again.dataframe[0].value.equals(seen["compare"])
    _view(again, "Size a fleet")
    press_find(again)
    assert _inputs(again, SIZE_KEYS) == seen["size_inputs"]
    assert again.dataframe[0].value.equals(seen["size"]) and _commands(again) == seen["size_commands"]
    _view(again, "Power & fleets")  # the link's tool ran once on arrival (ui/power_link.py)
    assert _inputs(again, POWER_KEYS) == seen["power_inputs"]
    assert again.dataframe[0].value.equals(seen["power"])
    _view(again, "Plan")
    assert query(again) == link  # nothing lost or added on the way


def test_bad_view_parameters_are_each_named_and_the_rest_applies():
    """Each of the views' parameters with a bad value gives one warning line naming it and its reason, and is
    left at its default; the scenario, the pins and the other parameters of the link still apply, and no
    value from the link is echoed into the page (crafted Markdown stays out of it).
    Source: ui: the app's link reading (issue 31 item 4; the rule for every link parameter)."""
    pins = [{**DEFAULT_SCENARIO, "gpu": g} for g in ("h100-sxm", "h200")]
    crafted = "[x](https://evil.example) <b>bold</b>"
    at = run_app({**scenario_to_query({**DEFAULT_SCENARIO, "gpu": "h200"}), "compare": json.dumps(pins),
                  "view": "compare", "compare_at": crafted, "compare_rate": "-1", "size_order": "nan",
                  "size_option": "0", "commands": "ollama"})
    warnings = [unescape(w.value) for w in at.warning]
    for param, reason in (("compare_at", "must be goodput or rate"),
                          ("compare_rate", "must be a number of requests/s per replica from 0.001"),
                          ("size_order", "must be validated or cheapest"),
                          ("size_option", "must be a whole number from 1 to 10,000"),
                          ("commands", "must be one of vllm, sglang, trt-llm")):
        assert sum(param in w and reason in w for w in warnings) == 1, (param, warnings)
    assert not any("evil" in w or "<b>" in w for w in warnings)
    assert at.sidebar.selectbox(key="gpu_choice").value == "h200"
    assert at.session_state["cmp_mode"] == MODES[0] and len(at.session_state["pins"]) == 2
    link = query(at)
    assert not {"compare_at", "compare_rate", "size_order", "size_option", "commands"} & set(link)
    rate = run_app({**scenario_to_query(DEFAULT_SCENARIO), "compare": json.dumps(pins), "view": "compare",
                    "compare_at": "rate", "compare_rate": "1e999"})
    assert rate.session_state["cmp_mode"] == MODES[1] and "compare_rate" in unescape(rate.warning[0].value)
    assert rate.session_state["cmp_rate"] != float("inf")  # the default rate stands


def test_a_linked_option_past_the_searchs_options_is_named_once_the_search_runs():
    """`size_option=9999` with a search that lists fewer options: once the button runs the search, one
    warning names the parameter and option 1 is shown.
    Source: ui: the app (a link's option number outlives the options its search finds)."""
    request = {"model": "llama-3.1-70b", "gpus": ["h200"], "tp": [4], "weights": ["fp8"], "kv_cache": ["fp8"],
               "traffic": {"requests_per_s": 10.0, "prompt_len": 2000, "output_len": 400},
               "slo": {"ttft_ms": 1000.0, "itl_ms": 50.0, "percentile": 90}}
    at = run_app({"view": "size", "size": json.dumps(request), "size_option": "9999"})
    assert not at.warning
    press_find(at)
    warnings = [unescape(w.value) for w in at.warning]
    assert any("size_option" in w and "beyond this search's" in w for w in warnings), warnings
    assert at.session_state["sz_pick"] == 1 and "size_option" not in query(at)


def test_every_link_parameter_is_documented():
    """Every parameter the app reads from a link beside the scenario's fields has a row in the contract's
    table of link parameters.
    Source: contract: docs/CONTRACT_EXTENSIONS.md "Every view in one share link"."""
    from pathlib import Path

    from ui import links, power_link, state, view_links

    docs = Path(__file__).resolve().parents[1] / "docs"
    text = (docs / "CONTRACT_EXTENSIONS.md").read_text(encoding="utf-8")
    table = text.split("### Every view in one share link", 1)[1].split("\n\n", 3)[2]
    rows = {line.split("|")[1].strip().strip("`") for line in table.splitlines() if line.startswith("| `")}
    params = {state.TRAFFIC_PARAM, state.VIEW_PARAM, links.COMPARE_PARAM, links.SIZE_PARAM, links.FLEET_PARAM,
              power_link.PARAM, *view_links.PARAMS}
    assert params <= rows, params - rows


def test_a_view_keeps_its_inputs_while_another_view_is_shown():
    """Size a fleet -> Plan -> Size a fleet: the form's inputs are as the user left them (Streamlit dropped
    an undrawn widget's value, and the form then raised KeyError 'sz_tp', a traceback); the same for the
    Power & fleets tool and Compare's mode.
    Source: ui: the app (issue 31 item 4; found while checking that every view's inputs reach the link)."""
    at = run_app({"compare": json.dumps([DEFAULT_SCENARIO])})
    _view(at, "Size a fleet")
    at.multiselect(key="sz_tp").set_value([2, 8])
    press_find(at)
    _view(at, "Compare what-ifs")
    at.radio(key="cmp_mode").set_value(MODES[1]).run()
    _view(at, "Power & fleets")
    at.radio(key="pw_tool").set_value("Mixed fleet").run()
    for view in ("Plan", "Size a fleet", "Compare what-ifs", "Power & fleets"):
        _view(at, view)
    ss = at.session_state
    assert (ss["sz_tp"], ss["cmp_mode"], ss["pw_tool"]) == ([2, 8], MODES[1], "Mixed fleet")


def test_a_sidebar_input_hidden_and_shown_again_keeps_its_value():
    """A request rate of 2 req/s per replica, hidden by switching the operating point to concurrency and
    back, is still 2 (it fell back to the 1 req/s the session started with), and so is a speculative
    decoding draft length of 3 behind its checkbox (it fell back to 4).
    Source: ui: the app (the sidebar's conditional inputs, found with the views' ones, issue 31 item 4)."""
    at = run_app()
    at.sidebar.radio(key="load_mode").set_value("request rate").run()
    at.sidebar.number_input(key="load_rate").set_value(2.0).run()
    at.sidebar.radio(key="load_mode").set_value("concurrency").run()
    at.sidebar.radio(key="load_mode").set_value("request rate").run()
    at.sidebar.checkbox(key="spec_on").check().run()
    at.sidebar.number_input(key="spec_k").set_value(3).run()
    at.sidebar.checkbox(key="spec_on").uncheck().run()
    at.sidebar.checkbox(key="spec_on").check().run()
    assert not at.exception
    assert (at.session_state["load_rate"], at.session_state["spec_k"]) == (2.0, 3)
    link = query(at)
    assert json.loads(link["load"])["request_rate"] == 2.0
    assert json.loads(link["speculative"])["draft_tokens"] == 3


def test_the_fleet_views_take_the_sidebars_tpot_objective_and_traffic_shape():
    """The sidebar's whole objective and traffic reach Size a fleet and Power & fleets: a mean TPOT bound of
    25 ms and bursty arrivals (CV 1.5) set on the sidebar fill the sizing form's TPOT input, go into the
    search it runs (`slo.tpot_ms`, `traffic.arrival_cv`) and are named beside the power tools' inputs
    (before, the fleet views took only TTFT, ITL and the percentile: the sizing form said "0: none" for TPOT
    and sized Poisson arrivals while the Plan view judged 25 ms and CV 1.5).
    Source: ui: the app's views (issue 31 item 4: each view starts from the sidebar's objective, traffic)."""
    at = run_app()
    at.sidebar.number_input(key="slo_tpot").set_value(25.0).run()
    at.sidebar.number_input(key="arrival_cv").set_value(1.5).run(timeout=TIMEOUT)
    _view(at, "Size a fleet")
    assert at.session_state["sz_tpot"] == 25.0
    at.multiselect(key="sz_gpus").set_value(["h200"])
    at.multiselect(key="sz_tp").set_value([4])
    press_find(at)
    assert not at.exception
    request = at.session_state["sz_request"]
    assert request["slo"]["tpot_ms"] == 25.0 and request["traffic"]["arrival_cv"] == 1.5
    assert any("arrival CV 1.5" in m.value and "mean TPOT ≤ 25.0 ms" in m.value for m in at.markdown)
    _view(at, "Power & fleets")
    assert any("mean TPOT ≤ 25 ms, arrival CV 1.5" in c.value for c in at.caption)


def test_a_sizing_link_keeps_its_traffic_shape_through_the_search():
    """A sizing link whose traffic is bursty (`arrival_cv` 2.5) sizes bursty traffic when its button is
    pressed, and the link the page writes back still carries it (before, the form rebuilt `traffic` from its
    three inputs: the search ran Poisson arrivals and the rewritten link dropped the CV).
    Source: ui: the app's sizing link round trip (issue 31 item 4: a share link reproduces every view)."""
    request = {"model": "llama-3.1-8b", "gpus": ["h100-sxm"], "tp": [1], "weights": ["bf16"],
               "kv_cache": ["bf16"], "slo": {"ttft_ms": 800.0, "itl_ms": 30.0, "percentile": 90},
               "traffic": {"requests_per_s": 10.0, "prompt_len": 1000, "output_len": 300, "arrival_cv": 2.5}}
    at = run_app({"view": "size", "size": json.dumps(request)})
    press_find(at)
    assert not at.exception
    assert at.session_state["sz_request"]["traffic"]["arrival_cv"] == 2.5
    options = at.session_state["sz_result"]["options"]
    assert options and all(o["scenario"]["load"]["arrival_cv"] == 2.5 for o in options)
    assert json.loads(query(at)["size"])["traffic"]["arrival_cv"] == 2.5


def test_a_sizing_link_past_the_models_positions_names_the_limit_first():
    """A sizing link for Llama-3.1-8B at a 1,000,000-token context (its config's max_position_embeddings is
    131,072; vLLM refuses such a --max-model-len) finds no option, and the page's error line names the limit,
    the reason most candidates give (560 of 600: the others are GPUs without fp8), rather than only "no
    configuration meets both objectives" above a list of 600 reasons.
    Source: ui: the sizing page's refusal (issue 31 item 7: contexts beyond the model's positions are refused
    with the limit named)."""
    request = {"model": "llama-3.1-8b", "context_len": 1_000_000,
               "traffic": {"requests_per_s": 5.0, "prompt_len": 2000, "output_len": 400},
               "slo": {"ttft_ms": 1000.0, "itl_ms": 50.0, "percentile": 90}}
    at = run_app({"view": "size", "size": json.dumps(request)})
    press_find(at)
    assert not at.exception and not at.session_state["sz_result"]["options"]
    errors = [unescape(e.value) for e in at.error]
    assert len(errors) == 1 and "beyond Llama-3.1-8B's limit of 131,072 tokens" in errors[0], errors
    # every candidate gives it (GPUs without tensor cores for the weights are planned weight-only: no other
    # reason comes first), else the most common reason would be named with its count
    assert "Every candidate's reason: context_len" in errors[0] or "The most common reason (" in errors[0]


def test_a_model_switch_to_a_4_bit_checkpoint_still_sizes_hopper_fleets():
    """gpt-oss-120b's MXFP4 checkpoint runs on Hopper weight-only (4-bit weights, bf16 math: vLLM's MXFP4
    path on H100/H200), which is how the Plan view plans it after a model switch (weights fp4, compute bf16).
    The fleet views must size that same deployment: the Plan view's fleet for the traffic target and the
    sizing search with the switched precision both find H100 fleets.
    Source: ui: the model switch across the views (issue 31 item 4: a model switch takes the checkpoint's
    native precision, and every view starts from the sidebar)."""
    from planner.contract.equal_service import fleet_for
    from planner.serving.serving_modes import size_with_modes
    from ui.figures import objective_of

    at = run_app()
    at.sidebar.selectbox(key="model_choice").set_value("gpt-oss-120b").run(timeout=TIMEOUT)
    assert (at.session_state["weights"], at.session_state["compute"]) == ("fp4", "bf16")
    scenario = {"model": "gpt-oss-120b", "gpu": "h100-sxm", "tp": 4, "weights": "fp4", "kv_cache": "fp8",
                "compute": "bf16", "prompt_len": 2000, "output_len": 400,
                "load": {"at_goodput": True, "slo": {"ttft_ms": 1000.0, "itl_ms": 50.0, "percentile": 90}}}
    assert fleet_for(scenario, 50.0, objective_of(scenario)).gpus is not None
    request = {"model": "gpt-oss-120b", "gpus": ["h100-sxm", "h200"], "weights": ["fp4"], "kv_cache": ["fp8"],
               "traffic": {"requests_per_s": 50.0, "prompt_len": 2000, "output_len": 400},
               "slo": {"ttft_ms": 1000.0, "itl_ms": 50.0, "percentile": 90}}
    assert size_with_modes(request)["options"]
