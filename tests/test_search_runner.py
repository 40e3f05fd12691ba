"""The app's sizing searches in a bounded child process (ui/search_runner.py, issue 32)."""

from __future__ import annotations

import json

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
