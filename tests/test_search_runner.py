"""The app's sizing searches in a bounded child process (ui/search_runner.py, issue 32)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from planner.core.errors import ScenarioError
from ui import search_runner


def test_a_bad_request_comes_back_as_one_named_line():
    """Source: contract: docs/CONTRACT_EXTENSIONS.md, "Bounded sizing requests" (issue 32): the child's
    refusal is the CLI's line, field and reason, never a traceback."""
    with pytest.raises(ScenarioError) as err:
        search_runner.run_search(json.dumps({"model": "llama-3.1-8b", "max_options": 5000}))
    assert err.value.field == "traffic" and "required" in err.value.reason


def test_the_result_cache_is_bounded_in_bytes(monkeypatch):
    """Source: contract: docs/CONTRACT_EXTENSIONS.md, "Bounded sizing requests": results are kept up to a
    byte budget, oldest out first; one over the per-entry limit is not kept."""
    monkeypatch.setattr(search_runner, "_cache", type(search_runner._cache)())
    monkeypatch.setattr(search_runner, "_cache_bytes", 0)
    monkeypatch.setattr(search_runner, "CACHE_MAX_BYTES", 250)
    monkeypatch.setattr(search_runner, "CACHE_MAX_ENTRY_BYTES", 120)
    for key in "abc":
        search_runner._remember(key, "x" * 100)
    search_runner._remember("huge", "x" * 121)
    assert list(search_runner._cache) == ["b", "c"] and search_runner.cache_bytes() == 200
    assert search_runner._cached("a") is None and search_runner._cached("b") == "x" * 100


def test_the_memory_limit_is_named_in_gib():
    """A search past the child's limit says so in the app's one memory unit: the limit is 2 x 1024^3 bytes,
    2 GiB (it read "2 GB", a GiB figure under the decimal unit's name, beside tiles in GiB).
    Source: ui: the sizing page's refusal line (issue 31 item 7: one memory unit, GiB, throughout)."""
    assert search_runner.MAX_SEARCH_MEMORY_BYTES == 2 * 1024**3
    reason = search_runner.memory_limit_reason()
    assert reason.startswith("needs more than 2 GiB of memory") and " GB" not in reason


SMALL = {"model": "llama-3.1-8b", "gpus": ["h100-sxm"], "tp": [1], "weights": ["bf16"], "kv_cache": ["bf16"],
         "traffic": {"requests_per_s": 5.0, "prompt_len": 1000, "output_len": 200},
         "slo": {"ttft_ms": 1000.0, "itl_ms": 50.0}, "max_options": 3}


def _one_shot(tool: str, request: dict) -> dict:
    """The child as it ran before the standby: the tool named on its command line, the request on stdin."""
    done = subprocess.run([sys.executable, "-m", "ui.search_runner", tool],
                          input=json.dumps(request).encode(), capture_output=True, cwd=search_runner.ROOT,
                          env=search_runner._child_env(), check=True)
    return json.loads(done.stdout)


def test_the_standby_child_answers_as_a_fresh_one(monkeypatch):
    """The standby child (imports done before the request, issue 31) gives the one-shot child's answer, byte
    for byte once parsed, and a fresh standby waits for the next search.
    Source: contract: ui/search_runner.py's docstring (one request per child; the tool's name on stdin's first
    line)."""
    monkeypatch.setattr(search_runner, "_cache", type(search_runner._cache)())
    search_runner.prestart()
    answer = search_runner.run_search(json.dumps(SMALL, sort_keys=True))
    assert answer == _one_shot("size", SMALL) and answer["options"]
    assert search_runner._standby is not None and search_runner._standby.poll() is None


def test_a_standby_child_refuses_an_unknown_tool_in_one_line():
    """A standby child given a tool it does not have answers one line (an internal refusal), not a traceback.
    Source: contract: docs/CONTRACT_EXTENSIONS.md, "Bounded sizing requests" (issue 32)."""
    child = search_runner._start_child()
    out, err = child.communicate(b"rm -rf {}\n", timeout=120)
    assert child.returncode == 0 and json.loads(out)["error"]["field"] == "internal"
    assert b"Traceback" not in err


@pytest.mark.parametrize("prepare", [SMALL, {**SMALL, "tp": [1, 2]}, "{not json"])
def test_a_prepared_standby_answers_the_request_sent(prepare):
    """The standby prepares the form's request before the button (prestart); whatever it prepared (this
    request, another one, or a broken one), it answers the request actually sent as a one-shot child does.
    Source: contract: ui/search_runner.py's docstring (a prepared request is used only if that very request
    comes)."""
    child = search_runner._start_child()
    text = prepare if isinstance(prepare, str) else json.dumps(prepare, sort_keys=True)
    request = json.dumps(SMALL, sort_keys=True)
    out, err = child.communicate(f"prepare {text}\nsize {request}\n".encode(), timeout=300)
    assert child.returncode == 0 and b"Traceback" not in err
    assert json.loads(out) == _one_shot("size", SMALL)


def test_prestart_prepares_the_forms_request_and_skips_one_already_answered(monkeypatch):
    """prestart hands the standby the form's request once; a request already in the result cache is not
    prepared again, and a new request replaces a standby that prepared another.
    Source: contract: ui/search_runner.py's prestart docstring."""
    monkeypatch.setattr(search_runner, "_cache", type(search_runner._cache)())
    monkeypatch.setattr(search_runner, "_cache_bytes", 0)
    request = json.dumps(SMALL, sort_keys=True)
    search_runner.prestart(request)
    first = search_runner._standby
    assert search_runner._standby_request == request
    search_runner.prestart(request)
    assert search_runner._standby is first  # the same request: the same child, prepared once
    other = json.dumps({**SMALL, "tp": [1, 2]}, sort_keys=True)
    search_runner.prestart(other)
    assert search_runner._standby is not first and search_runner._standby_request == other
    search_runner._remember(f"size {request}", "{}")
    search_runner.prestart(request)  # answered already: a fresh standby, nothing to prepare
    assert search_runner._standby_request is None
