"""The views' own inputs in the share link (issue 31: a share link reproduces every view), beside the
scenario (ui/links.py), the traffic target and the view (ui/state.py), the sizing search (`size`), the opened
fleet (`fleet`) and the Power & fleets tools (`power`, ui/power_link.py):

    compare_at=rate      Compare what-ifs at one request rate (absent: at equal service)
    compare_rate=1.5     that rate, req/s per replica (absent: 70% of the lowest capacity among the pins)
    size_order=cheapest  the sizing table cheapest first (absent: validated GPUs first)
    size_option=3        the sizing option shown below the table (absent: option 1)
    commands=sglang      the Plan view's Deploy-and-benchmark panel open, on that engine (absent: closed)
    size_commands=vllm   the same panel of the sizing option shown (absent: closed)

Each leaves the link at its default. A bad value is named in one warning line and left at its default; the
rest of the link still applies."""

from __future__ import annotations

import math
from typing import Any

import streamlit as st

COMPARE_AT_PARAM, COMPARE_RATE_PARAM = "compare_at", "compare_rate"
SIZE_ORDER_PARAM, SIZE_OPTION_PARAM = "size_order", "size_option"
# a commands panel's parameter -> its widgets' key prefix (ui/plan_page.py, ui/sizing_page.py)
PANELS = {"commands": "cmd", "size_commands": "sz_cmd"}
PARAMS = (COMPARE_AT_PARAM, COMPARE_RATE_PARAM, SIZE_ORDER_PARAM, SIZE_OPTION_PARAM, *PANELS)
COMPARE_AT = {"goodput": 0, "rate": 1}  # link id -> index in ui.compare.MODES
SIZE_ORDER = {"validated": True, "cheapest": False}  # link id -> sz_validated_first
COMPARE_RATE_BOUNDS = (0.001, 1e6)  # req/s per replica: the Compare view's rate input's own range
MAX_SIZE_OPTION = 10_000  # above any search's options (planner.serving.request_bounds.MAX_OPTIONS_OUT: 1,000)


def _modes() -> tuple[str, ...]:
    from ui.compare import MODES  # lazy: ui.compare pulls in the planner and pandas

    return MODES


def _number(raw: str, low: float, high: float, whole: bool) -> float | int:
    """The parameter as a number within [low, high]; ValueError otherwise."""
    if len(raw) > 30:  # no legal value is that long; int() of thousands of digits is slow
        raise ValueError
    value: float | int = int(raw) if whole else float(raw)
    if not (math.isfinite(value) and low <= value <= high):
        raise ValueError
    return value


def _read_one(param: str, raw: str, ss: Any) -> str | None:
    """Put one parameter into the session; the reason it was left out, or None."""
    if param == COMPARE_AT_PARAM:
        if raw not in COMPARE_AT:
            return "must be goodput or rate; Compare shows the pins at equal service"
        ss["cmp_mode"] = _modes()[COMPARE_AT[raw]]
    elif param == COMPARE_RATE_PARAM:
        low, high = COMPARE_RATE_BOUNDS
        try:
            ss["cmp_rate"] = float(_number(raw, low, high, whole=False))
        except ValueError:
            return (f"must be a number of requests/s per replica from {low:g} to {high:g}; using the "
                    "default, 70% of the lowest capacity among the pins")
    elif param == SIZE_ORDER_PARAM:
        if raw not in SIZE_ORDER:
            return "must be validated or cheapest; validated GPUs first"
        ss["sz_validated_first"] = SIZE_ORDER[raw]
    elif param in PANELS:
        from planner.contract.commands import ENGINES

        if raw not in ENGINES:
            return f"must be one of {', '.join(ENGINES)}; the commands stay closed"
        ss[f"{PANELS[param]}_show"], ss[f"{PANELS[param]}_engine"] = True, raw
    else:
        try:
            ss["sz_pick"] = int(_number(raw, 1, MAX_SIZE_OPTION, whole=True))
            ss["sz_pick_linked"] = True  # named if the search, once run, lists fewer options
        except ValueError:
            return f"must be a whole number from 1 to {MAX_SIZE_OPTION:,}; showing option 1"
    return None


def load(params: dict[str, str]) -> list[tuple[str, str]]:
    """Take the views' parameters out of the link's `params` into the session; (parameter, reason) for each
    one left at its default."""
    problems = []
    for param in PARAMS:
        raw = params.pop(param, None)
        if raw is not None:
            reason = _read_one(param, raw.strip(), st.session_state)
            if reason:
                problems.append((param, reason))
    return problems


def to_query() -> dict[str, str]:
    """The views' parameters for the current session, each left out at its default."""
    ss = st.session_state
    params: dict[str, str] = {}
    if ss.get("cmp_mode") == _modes()[COMPARE_AT["rate"]]:
        params[COMPARE_AT_PARAM] = "rate"
        # the rate the view holds for the current pins (a change of pins resets it to the default there)
        if "cmp_rate" in ss and ss.get("cmp_pins_seen") == len(ss.get("pins") or []):
            params[COMPARE_RATE_PARAM] = repr(float(ss["cmp_rate"]))
    if ss.get("sz_validated_first", True) is False:
        params[SIZE_ORDER_PARAM] = "cheapest"
    # the option shown below the results, or the linked one before the search has run (it runs on the button)
    if (ss.get("sz_result") or ss.get("size_link")) and int(ss.get("sz_pick") or 1) != 1:
        params[SIZE_OPTION_PARAM] = str(int(ss["sz_pick"]))
    for param, prefix in PANELS.items():  # a disaggregated fleet's panel has no engine choice: vLLM's
        if ss.get(f"{prefix}_show"):
            params[param] = str(ss.get(f"{prefix}_engine") or "vllm")
    return params


def option_within(n: int) -> list[str]:
    """Keep the sizing option shown within the n options its search lists (Size a fleet calls this before
    drawing the option's input); the warning line when it was a link's, past them."""
    ss = st.session_state
    linked = ss.pop("sz_pick_linked", False)
    if 1 <= int(ss.setdefault("sz_pick", 1)) <= n:
        return []
    shown, ss["sz_pick"] = int(ss["sz_pick"]), 1
    if not linked:
        return []
    return [f"Link parameter **{SIZE_OPTION_PARAM}**: option {shown:,} is beyond this search's {n:,} "
            "options; showing option 1"]
