"""Ridgeline's pure planning core: scenario in, plan out. No UI imports here."""

from planner.contract.errors import ScenarioError
from planner.contract.planning import Plan, plan, plan_dict
from planner.contract.scenario import Scenario, parse_scenario, parse_scenario_json

__all__ = ["Plan", "Scenario", "ScenarioError", "parse_scenario", "parse_scenario_json", "plan", "plan_dict"]
