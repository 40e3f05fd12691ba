"""Ridgeline's pure planning core: scenario in, plan out. No UI imports here."""

from planner.errors import ScenarioError
from planner.planning import Plan, plan, plan_dict
from planner.scenario import Scenario, parse_scenario, parse_scenario_json

__all__ = ["Plan", "Scenario", "ScenarioError", "parse_scenario", "parse_scenario_json", "plan", "plan_dict"]
