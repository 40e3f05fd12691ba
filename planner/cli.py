"""`python -m planner plan|size|gpus|models|calibrate|commands|compare-bench`: the contract's command line.

A bad input exits 2 with one line `error: <field path>: <reason>` on stderr and nothing on stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from gpu_catalog import load_catalog
from planner.errors import ScenarioError
from planner.presets import load_presets

EXIT_BAD_INPUT = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2, like every other bad input
        raise ScenarioError("arguments", message)


def _read_json(path: str) -> Any:
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ScenarioError("file", f"'{path}' does not exist") from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as err:
        raise ScenarioError("file", f"cannot read '{path}' ({type(err).__name__})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise ScenarioError("scenario", f"not valid JSON ({err.msg} at line {err.lineno} column {err.colno})") from None


def _catalog_json() -> list[dict[str, Any]]:
    return [gpu.model_dump(exclude_none=True) for gpu in load_catalog().values()]


def _models_json() -> list[dict[str, Any]]:
    from planner.model_shapes import active_params, param_counts

    out = []
    for model_id, spec in load_presets().items():
        entry = {"id": model_id, **spec.model_dump(exclude_none=True)}
        entry["total_params"] = param_counts(spec).total
        entry["active_params"] = active_params(spec)
        out.append(entry)
    return out


def run(argv: list[str]) -> int:
    parser = _Parser(prog="python -m planner", description="Ridgeline LLM serving capacity planner")
    sub = parser.add_subparsers(dest="command", required=True)
    p_plan = sub.add_parser("plan", help="plan one scenario (JSON file or '-')")
    p_plan.add_argument("file")
    p_size = sub.add_parser("size", help="size a fleet for a traffic target (JSON file or '-')")
    p_size.add_argument("file")
    sub.add_parser("gpus", help="the GPU catalog as JSON")
    sub.add_parser("models", help="the model presets as JSON")
    p_cal = sub.add_parser("calibrate", help="fit a calibration profile from a vLLM bench result")
    p_cal.add_argument("bench_json", help="`vllm bench serve --save-result` output")
    p_cal.add_argument("scenario_json", help="the scenario that benchmark ran")
    p_cal.add_argument("--name", default=None)
    # commands (issue 15): the engine and benchmark commands of a plan, and a benchmark compared with it
    p_cmd = sub.add_parser("commands", help="launch and benchmark commands that reproduce a scenario's plan")
    p_cmd.add_argument("file", help="scenario JSON file or '-'")
    p_cmd.add_argument("--engine", choices=["vllm", "sglang", "trt-llm"], default=None,
                       help="default: the scenario's engine (vllm for 'graph')")
    p_cmd.add_argument("--format", choices=["text", "script", "k8s", "json", "expected"], default="text")
    p_cmp = sub.add_parser("compare-bench", help="predicted vs measured for a `vllm bench serve --save-result` run")
    p_cmp.add_argument("bench_json")
    p_cmp.add_argument("scenario_json")
    p_cmp.add_argument("--format", choices=["text", "json"], default="text")
    args = parser.parse_args(argv)
    if args.command in ("commands", "compare-bench"):
        sys.stdout.write(_issue15_output(args))
        return 0

    if args.command == "plan":
        from planner.planning import plan_dict

        result = plan_dict(_read_json(args.file))
    elif args.command == "size":
        from planner.sizing import size_dict

        result = size_dict(_read_json(args.file))
    elif args.command == "gpus":
        result = _catalog_json()
    elif args.command == "models":
        result = _models_json()
    else:
        from planner.calibration import profile_from_vllm_bench

        result = profile_from_vllm_bench(_read_json(args.bench_json), _read_json(args.scenario_json),
                                         name=args.name).model_dump(exclude_none=True)
    sys.stdout.write(json.dumps(result, indent=2, allow_nan=False) + "\n")
    return 0


def _issue15_output(args: argparse.Namespace) -> str:
    if args.command == "commands":
        from planner.commands import command_set, render

        return render(command_set(_read_json(args.file), engine=args.engine), args.format)
    from planner.bench_compare import compare_bench, comparison_dict, comparison_text
    from planner.planning import clean_json

    result = compare_bench(_read_json(args.bench_json), _read_json(args.scenario_json))
    if args.format == "json":
        return json.dumps(clean_json(comparison_dict(result)), indent=2, allow_nan=False) + "\n"
    return comparison_text(result)


def main(argv: list[str] | None = None) -> int:
    try:
        return run(sys.argv[1:] if argv is None else argv)
    except ScenarioError as err:
        sys.stderr.write(f"error: {err.field}: {err.reason}\n")
        return EXIT_BAD_INPUT
