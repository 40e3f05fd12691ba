"""The Power & fleets view in the share link (issue 31: a link reproduces every view): the tool shown and
its inputs travel as one JSON parameter, `power`; a link that carries it opens the tool and runs it once, as
a sizing link runs its search. Inputs that follow the sidebar (model, traffic, objective, lengths) travel
only as the user set them; a bad value is named and left at its default."""

from __future__ import annotations

import json
from typing import Any

import streamlit as st

from gpu_catalog import load_catalog
from planner import ScenarioError
from planner.core.errors import loads_json
from planner.model.presets import load_presets
from ui.power_page import CONTEXT_CHOICES, OBJECTIVES, SIDEBAR_MODEL, SOURCES, TIERS, TOOLS

PARAM = "power"
MAX_CHARS = 4_000
TOOL_PREFIX = dict(zip(TOOLS, ("pw", "mf", "ct"), strict=True))
# key -> (kind, choices or (low, high)): the widgets' own choices and ranges (ui/power_page.py)
_FOLLOWED = {
    **{f"{p}_model": ("choice", None) for p in TOOL_PREFIX.values()},
    **{f"{p}_rps": ("float", (0.001, 1e7)) for p in TOOL_PREFIX.values()},
    **{f"{p}_ttft": ("float", (1.0, 1e7)) for p in TOOL_PREFIX.values()},
    **{f"{p}_itl": ("float", (0.1, 1e7)) for p in TOOL_PREFIX.values()},
    **{f"{p}_{n}": ("int", (1, 10_000_000)) for p in ("pw", "ct") for n in ("prompt", "output")},
}
INPUTS: dict[str, tuple[str, Any]] = {
    "pw_tool": ("choice", TOOLS), "pw_objective": ("choice", tuple(OBJECTIVES)),
    "pw_tier": ("choice", tuple(TIERS)),
    "pw_source": ("choice", tuple(SOURCES)), "pw_budget": ("float", (0.0, 100_000.0)),
    "pw_gpus": ("gpus", None), "mf_gpus": ("gpus", None), "ct_gpus": ("gpus", None),
    **{k: ("int", (1, 10_000_000)) for k in ("mf_p1", "mf_o1", "mf_p2", "mf_o2")},
    "mf_share": ("float", (0.01, 0.99)), "mf_ttft2": ("float", (1.0, 1e7)),
    "ct_tiers": ("ints", CONTEXT_CHOICES), **_FOLLOWED,
}


def link_value() -> str | None:
    """The `power` parameter for the current session: None until the view has been opened."""
    ss = st.session_state
    if "pw_tool" not in ss:
        return None
    state = {k: ss[k] for k in INPUTS if k in ss and (k not in _FOLLOWED or _user_set(k))}
    return json.dumps(state, separators=(",", ":"), sort_keys=True)


def _user_set(key: str) -> bool:
    """Whether a followed input differs from what the sidebar gave it (ui/power_page.py keeps that)."""
    taken = st.session_state.get(f"{key.split('_')[0]}_from_sidebar") or {}
    return key in taken and taken[key] != st.session_state.get(key)


def _checked(key: str, value: Any) -> Any:
    """The value as its widget holds it; ValueError with the reason."""
    kind, spec = INPUTS[key]
    if kind == "choice":
        options = spec if spec is not None else (*load_presets(), SIDEBAR_MODEL)
        if value not in options:
            raise ValueError("is not one of the view's choices")
        return value
    if kind in ("gpus", "ints"):
        options = list(load_catalog()) if kind == "gpus" else spec
        if not isinstance(value, list) or not all(v in options and not isinstance(v, bool) for v in value):
            raise ValueError("must be a list of the view's choices")
        return list(value)
    low, high = spec
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise ValueError(f"must be a number from {low:g} to {high:g}")
    return int(value) if kind == "int" else float(value)


def load(raw: str) -> list[tuple[str, str]]:
    """Put a link's `power` inputs into the session; (parameter, reason) for what was left out."""
    ss = st.session_state
    try:
        given = loads_json(raw, PARAM, max_bytes=MAX_CHARS)
    except ScenarioError as err:
        return [(PARAM, f"{err.reason}; the view opens with its defaults")]
    if not isinstance(given, dict):
        return [(PARAM, "must be a JSON object; the view opens with its defaults")]
    problems = []
    for key, value in given.items():
        if key not in INPUTS:
            problems.append((f"{PARAM}.{key}", "is not an input of the view; ignored"))
            continue
        try:
            ss[key] = _checked(key, value)
        except ValueError as err:
            problems.append((f"{PARAM}.{key}", f"{err}; using the default"))
            continue
        if key in _FOLLOWED:  # kept over the sidebar's value when the view first opens
            ss.setdefault("power_link_kept", {})[key] = ss[key]
    ss[f"{TOOL_PREFIX[ss.get('pw_tool', TOOLS[0])]}_autorun"] = True
    return problems
