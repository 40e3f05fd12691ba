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
    "compare", "size",
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
    view = "Size a fleet" if "size" in params and rng.random() < 0.7 else "Plan"
    return params, uploads, view


def _named(at: AppTest, names: list[str]) -> bool:
    text = " ".join(e.value for e in (*at.warning, *at.error)).replace("`", "")
    return all(name in text for name in names)


def run_case(params: dict[str, str], uploads: dict[str, bytes], view: str) -> AppTest:
    """Run the app on one case; assert no exception element, and a named line for each refused input."""
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
    if view != "Plan":
        at.radio(key="view").set_value(view).run()
        assert not at.exception, [e.value for e in at.exception]
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
