"""The app's sizing searches, each in its own process at a low CPU priority, bounded (issue 32).

Why a process: Streamlit runs every session's script as a thread of one server process, so a search run in
the script holds the GIL for its whole length (the largest legal search, 20,000 configuration families,
took 44-80 s of CPU) and every other session's rerun waits behind it (their p95 went from 0.21 s to 5.2 s).
Here the session's script thread only waits on a pipe (no GIL held), and the search runs in a child
process:
  * at nice SEARCH_NICE (10), so the kernel gives the other sessions' reruns the CPU first: against a busy
    nice-0 thread it gets a tenth of a core (CFS weights 110 against 1024). Nice 19 (weight 15) starved it
    on a saturated host: 7 s of CPU in 4.6 min at a load average of 14 on 2 cores;
  * with RLIMIT_CPU (MAX_SEARCH_CPU_S) and RLIMIT_AS (MAX_SEARCH_MEMORY_BYTES): past either, the search
    stops and the page says which limit it met, in one line;
  * at most MAX_CONCURRENT_SEARCHES at a time per server process (a session waits up to
    SLOT_WAIT_S for a slot, then is told to try again); one session runs one search at a time by
    construction: its script thread waits for the search.
Results are kept in a process-wide cache bounded in bytes (CACHE_MAX_BYTES), not in entries: 64 cached
20,000-family results were a memory risk.

The child is `python -m ui.search_runner TOOL`: the request as JSON on stdin, the result (or
{"error": {"field", "reason"}}) as JSON on stdout. TOOL is the sizing search (`size`) or one of the Power
view's searches (`size-power`, `mixed-fleet`, `context-tiers`), which are bounded and run the same way.

A standby child (`python -m ui.search_runner --standby`) is started ahead of the next search: it starts
Python and imports the planner (~0.3 s of the 2 s a sizing request may take, issue 31) while nobody waits,
then blocks on stdin, one message a line: `prepare <request>` (the sizing request the form holds: the child
prepares its layouts while the user reads the form, planner.serving.serving_modes.prepared_layouts, and uses
them if that very request comes), then `<tool> <request>`. Each child answers one request and exits, as
before; the next standby starts once a search is done.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from planner.core.errors import ScenarioError

ROOT = Path(__file__).resolve().parents[1]
SEARCH_NICE = 10
MAX_SEARCH_CPU_S = 120  # the largest legal search measured 44-80 s of CPU on the 2-core reference host
MAX_SEARCH_MEMORY_BYTES = 2 * 1024**3  # address space; the largest legal search peaked near 250 MB resident
MAX_SEARCH_WALL_S = 600  # at a low priority on a busy host a search may wait: a deadline on the wait
MAX_CONCURRENT_SEARCHES = 2  # per server process: two cores
SLOT_WAIT_S = 30.0
# A request the standby prepares before anyone pressed the button (prestart) plans at most this many
# configuration families: every legal request with disaggregation (20,000 family plans, 3 a family) and
# issue 9's with pp [1, 2, 4] (5,400: ~2.0 s of CPU); 7,000 take ~2.6 s at nice 10, one standby a server at
# a time: a link alone never costs more (issue 32: a link that ran its search on arrival handed a stranger's
# click a minute of the server's CPU).
MAX_PREPARED_FAMILIES = 7_000
CACHE_MAX_BYTES = 64_000_000  # JSON text of the results kept, all sessions together
CACHE_MAX_ENTRY_BYTES = 16_000_000

_slots = threading.BoundedSemaphore(MAX_CONCURRENT_SEARCHES)
_standby: subprocess.Popen | None = None  # a child with its imports done, waiting for a request
_standby_request: str | None = None  # the sizing request the standby prepares (prestart), if any
_standby_lock = threading.Lock()
_cache: OrderedDict[str, str] = OrderedDict()
_cache_bytes = 0
_cache_lock = threading.Lock()


def _cached(key: str) -> str | None:
    with _cache_lock:
        text = _cache.get(key)
        if text is not None:
            _cache.move_to_end(key)
        return text


def _remember(key: str, text: str) -> None:
    global _cache_bytes
    if len(text) > CACHE_MAX_ENTRY_BYTES:
        return
    with _cache_lock:
        if key in _cache:
            return
        _cache[key] = text
        _cache_bytes += len(text)
        while _cache_bytes > CACHE_MAX_BYTES and _cache:
            _, old = _cache.popitem(last=False)
            _cache_bytes -= len(old)


def cache_bytes() -> int:
    """Bytes of JSON the result cache holds now."""
    return _cache_bytes


def _child_env() -> dict[str, str]:
    # one BLAS thread: the search does no large matrix work, and a thread pool per child costs CPU
    return {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
            "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}


TOOLS = ("size", "size-power", "mixed-fleet", "context-tiers")


def _start_child() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "ui.search_runner", "--standby"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=_child_env())


def _take_child() -> subprocess.Popen:
    """The standby child when one is alive, else a fresh one (the next standby starts once this search is
    done: started now, its imports would take CPU from this search on a two-core host). A standby that
    prepared another request still serves: its imports are done, and the preparation (bounded:
    MAX_PREPARED_FAMILIES) has most likely ended while the user edited the form."""
    global _standby, _standby_request
    with _standby_lock:
        child = _standby if _standby is not None and _standby.poll() is None else None
        _standby, _standby_request = None, None
    return child if child is not None else _start_child()


def prestart(request_json: str | None = None) -> None:
    """Start the standby child now (the sizing page calls it as it draws, so the search finds it warm).
    `request_json`: the sizing request the form holds (run_search's text); the standby prepares its layouts
    while the user reads the form (planner.serving.serving_modes.prepared_layouts), so that pressing the
    button on that request skips the work. A standby preparing another request is replaced; a request
    already answered (cached) is not prepared."""
    global _standby, _standby_request
    with _standby_lock:
        child = _standby if _standby is not None and _standby.poll() is None else None
        if child is not None and request_json is not None and _standby_request not in (None, request_json):
            _stop(child)  # its prepared layouts are another request's
            child = None
        if child is None:
            child = _standby = _start_child()
            _standby_request = None
        if request_json is None or _standby_request == request_json or _cached(f"size {request_json}"):
            return
        try:
            assert child.stdin is not None  # started with a pipe
            child.stdin.write(f"prepare {request_json}\n".encode())
            child.stdin.flush()
            _standby_request = request_json
        except OSError:  # it died meanwhile: the next search starts a fresh one
            _standby, _standby_request = None, None


def _stop(child: subprocess.Popen) -> None:
    child.kill()
    child.communicate()


@atexit.register
def _stop_standby() -> None:
    with _standby_lock:
        if _standby is not None and _standby.poll() is None:
            _stop(_standby)


def _run_child(request_json: str, tool: str) -> str:
    """The child's stdout; ScenarioError when it was stopped by a limit or failed."""
    child = _take_child()
    try:
        out, _ = child.communicate(f"{tool} {request_json}\n".encode(), timeout=MAX_SEARCH_WALL_S)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        raise ScenarioError("sizing", f"the search ran past {MAX_SEARCH_WALL_S} s on this busy server and "
                                      "was stopped: narrow the candidate lists or use the CLI") from None
    finally:
        prestart()  # the next search's child
    if child.returncode != 0:
        if child.returncode in (-24, -9):  # SIGXCPU at the soft CPU limit, SIGKILL at the hard one
            raise ScenarioError("sizing", f"needs more than {MAX_SEARCH_CPU_S} s of CPU, the app's limit "
                                          "per search: narrow the candidate lists or use the CLI")
        stopped = f"the search stopped (exit {child.returncode}); please report the request"
        raise ScenarioError("sizing", stopped)
    return out.decode()


def run_search(request_json: str, tool: str = "size") -> dict[str, Any]:
    """The result of `tool` (TOOLS; `size`: size_with_modes) on this request (JSON text, keys sorted: the
    cache key), run in a bounded child process; a bad request or a limit met raises ScenarioError."""
    if tool not in TOOLS:
        raise ValueError(f"unknown tool {tool!r}")
    key = f"{tool} {request_json}"
    text = _cached(key)
    if text is None:
        if not _slots.acquire(timeout=SLOT_WAIT_S):
            raise ScenarioError("sizing", f"the server is running {MAX_CONCURRENT_SEARCHES} searches "
                                          "already; press the button again in a minute")
        try:
            text = _run_child(request_json, tool)
        finally:
            _slots.release()
        result = json.loads(text)
        if "error" not in result:
            _remember(key, text)
    else:
        result = json.loads(text)  # a fresh copy per session: nobody edits the cached one
    if "error" in result:
        raise ScenarioError(result["error"]["field"], result["error"]["reason"])
    return result


def _limit_self() -> None:
    import resource

    os.setpriority(os.PRIO_PROCESS, 0, max(SEARCH_NICE, os.getpriority(os.PRIO_PROCESS, 0)))
    resource.setrlimit(resource.RLIMIT_CPU, (MAX_SEARCH_CPU_S, MAX_SEARCH_CPU_S + 5))
    resource.setrlimit(resource.RLIMIT_AS, (MAX_SEARCH_MEMORY_BYTES, MAX_SEARCH_MEMORY_BYTES))


def _tool(name: str) -> Any:
    if name == "size-power":
        from planner.contract.power_sizing import size_power

        return size_power
    if name == "mixed-fleet":
        from planner.serving.mixed_fleet import mixed_fleet

        return mixed_fleet
    if name == "context-tiers":
        from planner.contract.context_tiers import context_tiers

        return context_tiers
    from planner.serving.serving_modes import size_with_modes

    return size_with_modes


def memory_limit_reason() -> str:
    """A search past the child's address-space limit, in the app's one memory unit (GiB, as vLLM logs it)."""
    return (f"needs more than {MAX_SEARCH_MEMORY_BYTES / 2**30:g} GiB of memory, the app's limit per search: "
            "narrow the candidate lists or use the CLI")


def _answer(tools: dict[str, Any], standby: bool) -> Any:
    """The tool's answer to the request on stdin. A standby child reads one message a line, `<word> <json>`:
    `prepare` (the layouts of a sizing request the user may send next: kept, and used if that very request
    comes), then the tool's name with its request."""
    from planner.core.errors import loads_json
    from planner.serving.serving_modes import prepared_layouts

    if not standby:
        return next(iter(tools.values()))(loads_json(sys.stdin.buffer.read(), "request"))
    prepared: tuple[bytes, Any] | None = None
    for line in sys.stdin.buffer:
        word, _, payload = line.rstrip(b"\n").partition(b" ")
        if word == b"prepare":
            try:
                memo = prepared_layouts(loads_json(payload, "request"), MAX_PREPARED_FAMILIES)
                prepared = None if memo is None else (payload, memo)
            except Exception:  # noqa: BLE001 - the search itself names what is wrong with the request
                prepared = None
            continue
        tool = tools.get(word.decode(errors="replace"))
        if tool is None:
            raise ValueError("unknown tool")
        data = loads_json(payload, "request")
        if word == b"size" and prepared is not None and prepared[0] == payload:
            return tool(data, prepared[1])
        return tool(data)
    raise ValueError("no request")


def main() -> int:
    """The child: one request on stdin, one JSON answer on stdout (the CLI's collector settings,
    planner.core.one_request: issue 9's search 2.54-2.60 s of CPU before, issue 31). `--standby`: every
    tool imported first, then messages a line each (_answer)."""
    _limit_self()
    from planner.core.one_request import collect_rarely, freeze_imports

    collect_rarely()
    try:
        standby = sys.argv[1:] == ["--standby"]
        tools = {name: _tool(name) for name in (TOOLS if standby else (sys.argv[1:] or ["size"])[:1])}
        freeze_imports()
        answer: Any = _answer(tools, standby)
    except ScenarioError as err:
        answer = {"error": {"field": err.field, "reason": err.reason}}
    except MemoryError:
        answer = {"error": {"field": "sizing", "reason": memory_limit_reason()}}
    except Exception as err:  # noqa: BLE001 - a bug of ours: one line, never a traceback on the page
        reason = f"{type(err).__name__}; please report the request"
        answer = {"error": {"field": "internal", "reason": reason}}
    sys.stdout.write(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
