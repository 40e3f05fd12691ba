"""Ridgeline's pure planning core: scenario in, plan out. No UI imports here."""

from planner.contract.planning import Plan, plan, plan_dict
from planner.core.errors import ScenarioError
from planner.scenario.scenario import Scenario, parse_scenario, parse_scenario_json

__all__ = ["Plan", "Scenario", "ScenarioError", "parse_scenario", "parse_scenario_json", "plan", "plan_dict"]
