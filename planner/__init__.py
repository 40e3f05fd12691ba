"""Ridgeline's pure planning core: scenario in, plan out. No UI imports here.

The names below load on first use (PEP 562), so that `import planner` and a CLI subcommand load only the
layers they use (`python -m planner gpus` never imports the serving model)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from planner.contract.planning import Plan, plan, plan_dict
    from planner.core.errors import ScenarioError
    from planner.scenario.scenario import Scenario, parse_scenario, parse_scenario_json

_HOMES = {
    "Plan": "planner.contract.planning", "plan": "planner.contract.planning",
    "plan_dict": "planner.contract.planning", "ScenarioError": "planner.core.errors",
    "Scenario": "planner.scenario.scenario", "parse_scenario": "planner.scenario.scenario",
    "parse_scenario_json": "planner.scenario.scenario",
}

__all__ = ["Plan", "Scenario", "ScenarioError", "parse_scenario", "parse_scenario_json", "plan", "plan_dict"]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'planner' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later lookups find it without this hook
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
