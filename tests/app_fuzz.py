"""Fuzzing the app through streamlit's AppTest: every query parameter and every JSON the app accepts
(scenario, calibration, fit-from-bench and compare-bench uploads, a pasted or uploaded config.json) with
values chosen to hurt: nesting far past any parser's recursion limit, 5,000-digit integers, wrong types,
NaN, huge text, duplicated list items. The page must show no exception element, and a value the app
refuses must be named in a warning or error line.

AppTest cannot upload a file, so the script it runs (SCRIPT) replaces `file_uploader` by one that returns
the fuzzed bytes for the uploader's key, then runs app.py itself. Used by tests/test_fuzz_app.py (a few
examples in CI) and tools/fuzz_app.py (a thousand or more, once).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from streamlit.testing.v1 import AppTest

APP = Path(__file__).resolve().parents[1] / "app.py"
TIMEOUT = 120
SEARCH_TIMEOUT = 700  # a search stops itself after 600 s of wall time (ui/search_runner.py), with one line

# Runs inside AppTest: uploads come from session state key "_fuzz_uploads" ({uploader key: bytes}).
SCRIPT = f"""
import runpy
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

class _Upload:
    def __init__(self, key, raw):
        self.name, self.size, self.file_id, self._raw = key + ".json", len(raw), "fuzz", raw
    def getvalue(self):
        return self._raw

_uploads = st.session_state.get("_fuzz_uploads") or {{}}
_real = DeltaGenerator.file_uploader
_real_st = st.file_uploader

def _fake(self, label, *args, key=None, **kwargs):
    _real(self, label, *args, key=key, **kwargs)
    return _Upload(key, _uploads[key]) if key in _uploads else None

def _fake_st(label, *args, key=None, **kwargs):
    _real_st(label, *args, key=key, **kwargs)
    return _Upload(key, _uploads[key]) if key in _uploads else None

DeltaGenerator.file_uploader, st.file_uploader = _fake, _fake_st
try:
    runpy.run_path({str(APP)!r}, run_name="__main__")
finally:
    DeltaGenerator.file_uploader, st.file_uploader = _real, _real_st
"""

LINK_PARAMS = (
    "model", "gpu", "tp", "weights", "kv_cache", "context_len", "prompt_len", "output_len", "batch", "pp",
    "ep", "efficiency", "load", "speculative", "calibration", "memory.utilization", "usd_per_gpu_hour",
    "compare", "size", "compare_at", "compare_rate", "size_order", "size_option", "commands", "size_commands",
)
# uploader key -> what its error line starts with or names (ui/exports.py, ui/commands_panel.py, ui/inputs.py)
UPLOADS = {
    "up_scenario": "Scenario not loaded: ", "up_calibration": "Calibration not loaded: ",
    "up_bench": "Calibration not loaded: ", "cmd_bench_upload": "Benchmark not read: ",
    "hf_upload": "config.json",
}

VALID = {
    "model": "llama-3.1-8b", "gpu": "h100-sxm", "efficiency": "ideal", "load": {"request_rate": 2.0},
    "speculative": {"draft_tokens": 3, "acceptance": 0.7, "draft_params": 1e9}, "calibration": {"name": "x"},
    "compare": [{"model": "llama-3.1-8b", "gpu": "h100-sxm"}],
    "compare_at": "rate", "compare_rate": 1.5, "size_order": "cheapest", "size_option": 2,
    "commands": "sglang", "size_commands": "vllm",
    "size": {"model": "llama-3.1-8b", "traffic": {"requests_per_s": 1.0, "prompt_len": 100, "output_len": 10},
             "slo": {"ttft_ms": 2000.0, "itl_ms": 50.0}, "gpus": ["h100-sxm"], "tp": [1], "weights": ["fp8"],
             "kv_cache": ["fp8"]},
}


def nested(depth: int, leaf: Any = 1, kind: str = "[") -> str:
    """JSON text nested `depth` deep (lists or objects), built as text: json.dumps would itself recurse."""
    if kind == "[":
        return "[" * depth + json.dumps(leaf) + "]" * depth
    return '{"a":' * depth + json.dumps(leaf) + "}" * depth


def hurtful_text(rng: random.Random, valid: Any = None) -> str:
    """One hurtful parameter value or upload body, as text."""
    kind = rng.randrange(12)
    if kind == 0:
        return nested(rng.choice([150, 999, 2000, 5000]), kind=rng.choice("[{"))
    if kind == 1:
        return "1" * rng.choice([30, 31, 500, 4301, 5000])
    if kind == 2:
        return json.dumps({"tp": int("9" * 40)}) if rng.random() < 0.5 else "[" + "9" * 5000 + "]"
    if kind == 3:
        return rng.choice(["[1]", "1", "null", '"x"', "true", "[]", "{}", "-0", "1e999", "NaN", "-Infinity"])
    if kind == 4:
        return rng.choice(["", " ", "{", "}", "[[", "\x00", "\ud7ff", "<b>x</b>", "**bold**", "a\nb"])
    if kind == 5:
        return "x" * rng.choice([100, 40_000])
    if kind == 6 and isinstance(valid, dict):
        broken = dict(valid)
        key = rng.choice(list(broken))
        broken[key] = rng.choice([None, [], {}, "x", -1, 1e308, [broken[key]] * 500, {"a": [1] * 3}])
        return json.dumps(broken)
    if kind == 7 and isinstance(valid, dict):  # duplicated list items, in every list field
        return json.dumps({k: (v * 300 if isinstance(v, list) else v) for k, v in valid.items()})
    if kind == 8:
        return json.dumps([valid] * rng.choice([2, 13, 200]))
    if kind == 9 and isinstance(valid, dict):  # a valid object wrapped deep inside itself
        return nested(rng.choice([50, 1500]), valid, "{")
    if kind == 10:
        return json.dumps(valid) + " " + json.dumps(valid)
    return json.dumps(valid) if valid is not None else "{}"


def case(rng: random.Random) -> tuple[dict[str, str], dict[str, bytes], str]:
    """One fuzz case: query parameters, uploads, and the view to render ('Plan' or 'Size a fleet')."""
    params: dict[str, str] = {}
    uploads: dict[str, bytes] = {}
    for name in rng.sample(LINK_PARAMS, rng.randint(1, 3)):
        valid = VALID.get(name, rng.choice([4, "fp8", 0.9]))
        params[name] = hurtful_text(rng, valid)
    if rng.random() < 0.5:
        key = rng.choice(list(UPLOADS))
        uploads[key] = hurtful_text(rng, {"model": "llama-3.1-8b", "gpu": "h100-sxm"}).encode(
            "utf-8", "surrogatepass"
        )
    view = rng.choice(VIEWS)
    if "size" in params and rng.random() < 0.6:
        view = "Size a fleet"
    elif "compare" in params and rng.random() < 0.6:
        view = "Compare what-ifs"
    return params, uploads, view


VIEWS = ("Plan", "Compare what-ifs", "Size a fleet", "Power & fleets")


def _named(at: AppTest, names: list[str]) -> bool:
    text = " ".join(e.value for e in (*at.warning, *at.error)).replace("`", "")
    return all(name in text for name in names)


def _nodes(node: Any):
    yield node
    for child in getattr(node, "children", {}).values():
        yield from _nodes(child)


def chart_specs(at: AppTest) -> list[str]:
    """The Vega-Lite spec (JSON text) of every chart on the page."""
    return [n.proto.spec for n in _nodes(at._tree) if getattr(n, "type", None) == "arrow_vega_lite_chart"]


def check_charts(at: AppTest) -> None:
    """No chart's data holds NaN or an infinity: JSON has neither, and the browser then shows a SyntaxError
    in place of every chart (issue 32: an unpriced Compare pin)."""
    for spec in chart_specs(at):
        json.loads(spec, parse_constant=_no_constant)


def _no_constant(name: str) -> None:
    raise AssertionError(f"{name} in a chart's data")


def press_find(at: AppTest) -> None:
    """Press the sizing form's button, where the page shows it (a link only fills the form: issue 32)."""
    for button in at.button:
        if button.label == "Find the cheapest fleet":
            button.click().run(timeout=SEARCH_TIMEOUT)
            assert not at.exception, [e.value for e in at.exception]
            return


def run_case(params: dict[str, str], uploads: dict[str, bytes], view: str, search: bool = False) -> AppTest:
    """Run the app on one case; assert no exception element and no NaN in a chart (`search`: on the Size
    view, press the button too)."""
    at = AppTest.from_string(SCRIPT, default_timeout=TIMEOUT)
    if "hf_upload" in uploads:  # the config.json import sits under a custom model
        from ui.widget_state import CUSTOM_MODEL_DEFAULT

        params = {"model": json.dumps(CUSTOM_MODEL_DEFAULT), **params}
    for k, v in params.items():
        at.query_params[k] = v
    at.session_state["_fuzz_uploads"] = uploads
    if "cmd_bench_upload" in uploads:
        at.session_state["cmd_bench_show"] = True
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    check_charts(at)
    if view != "Plan":
        at.radio(key="view").set_value(view).run()
        assert not at.exception, [e.value for e in at.exception]
        if search and view == "Size a fleet":
            press_find(at)
        check_charts(at)
    if "hf_upload" in uploads and any(b.key == "hf_apply" for b in at.button):
        at.button(key="hf_apply").click().run()
        assert not at.exception, [e.value for e in at.exception]
    # Every line the app shows about input is one line (no traceback text, no newlines).
    for element in (*at.warning, *at.error):
        assert "Traceback" not in element.value
    return at


def is_refusal_named(at: AppTest, params: dict[str, str]) -> bool:
    """Each parameter whose value is not plain valid JSON is named in a warning or error line."""
    return _named(at, list(params))


def invalid_text(rng: random.Random) -> str:
    """A value no parameter or upload accepts: the app must refuse it with a line naming the field."""
    return rng.choice(
        [
            nested(2000), nested(2000, kind="{"), nested(150, kind="{"), "9" * 5000, "[" + "9" * 5000 + "]",
            "[1]", '"x"', "[[[[",
        ]
    )


# Issue 32's crafted links: (what, query parameters, view, press the search button, text a warning must name)
_UNPRICED_GPU = {"name": "no price", "memory_gb": 80.0, "hbm_tb_s": 3.35,
                 "tflops": {"bf16": 989.4, "fp8": 1978.9}}
_PARETO_CRASH = {"model": "llama-3.1-8b", "slo": {"ttft_ms": 1000, "itl_ms": 100}, "gpus": ["h100-sxm"],
                 "traffic": {"requests_per_s": 1e7, "prompt_len": 1, "output_len": 1_000_000}}


def hostile_sizing_request(max_options: int) -> dict[str, Any]:
    """Issue 32's 22 KB `?size=` link: 100 custom GPUs x tp 1-8 x 5 weight x 5 KV precisions = 20,000
    configuration families, the cap."""
    gpus = [{**_UNPRICED_GPU, "name": f"gpu {i}", "memory_gb": 80.0 + i / 10, "usd_per_hour": 2.0 + i / 100}
            for i in range(100)]
    five = ["fp16", "bf16", "fp8", "int8", "int4"]
    traffic = {"requests_per_s": 10.0, "prompt_len": 2000, "output_len": 400}
    return {"model": "llama-3.1-8b", "traffic": traffic, "slo": {"ttft_ms": 2000.0, "itl_ms": 50.0},
            "gpus": gpus, "tp": list(range(1, 9)), "weights": five, "kv_cache": five,
            "max_options": max_options}


def _extreme_size(rps: float, prompt: int, output: int) -> str:
    return json.dumps({"model": "llama-3.1-8b", "traffic": {"requests_per_s": rps, "prompt_len": prompt,
                                                            "output_len": output},
                       "slo": {"ttft_ms": 1000.0, "itl_ms": 100.0}, "gpus": ["h100-sxm", "l4"], "tp": [1, 8]})


CRAFTED: list[tuple[str, dict[str, str], str, bool, str | None]] = [
    ("the pareto_mask crash request, searched", {"size": json.dumps(_PARETO_CRASH)}, "Size a fleet", True,
     None),
    ("an unpriced custom-GPU Compare pin",
     {"compare": json.dumps([{"model": "llama-3.1-8b", "gpu": _UNPRICED_GPU},
                             {"model": "llama-3.1-8b", "gpu": "h100-sxm"}])},
     "Compare what-ifs", False, None),
    ("the 22 KB size link (max_options 100,000), on the Plan view",
     {"size": json.dumps(hostile_sizing_request(100_000))}, "Plan", False, "max_options"),
    ("the 22 KB size link (max_options 100,000), on the Size view",
     {"size": json.dumps(hostile_sizing_request(100_000))}, "Size a fleet", True, "max_options"),
    ("a duplicate key in a size link, on the Compare view",
     {"size": '{"model": "llama-3.1-8b", "model": "qwen3-8b"}'}, "Compare what-ifs", False,
     "duplicate key"),
    ("a duplicate key in a scenario parameter", {"load": '{"request_rate": 1, "request_rate": 2}'}, "Plan",
     False, "duplicate key"),
    ("a bad size link on the Power view", {"size": "[1]"}, "Power & fleets", False, "size"),
    *[(f"sizing at {rps:g} req/s, prompt {p:,}, output {o:,}, searched", {"size": _extreme_size(rps, p, o)},
       "Size a fleet", True, None)
      for rps in (1e-6, 1e7) for p in (1, 10_000_000) for o in (1, 10_000_000)],
]
# the largest legal search (20,000 families, 1,000 options: ~6 s of CPU in its child): tools/fuzz_app.py
CRAFTED_SLOW = [("the 22 KB size link at max_options 1,000, searched",
                 {"size": json.dumps(hostile_sizing_request(1000))}, "Size a fleet", True, None)]


def run_crafted(params: dict[str, str], view: str, search: bool, named: str | None) -> AppTest:
    """One crafted case: no exception, no NaN in a chart, and the named text in a warning or error line."""
    at = run_case(params, {}, view, search=search)
    if named is not None:
        assert _named(at, [named]), (named, [e.value for e in (*at.warning, *at.error)])
    return at
