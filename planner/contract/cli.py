"""The contract's command line: `python -m planner
plan|size|gpus|models|calibrate|schema|commands|compare-bench|size-power|` `mixed-fleet|context-tiers`.

A bad input exits 2 with one line `error: <field path>: <reason>` on stderr and nothing on stdout.
`run()` does the work and raises ScenarioError; `main()` turns that into the line and the exit code.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import sys
import warnings
from collections.abc import Iterable
from typing import Any, TextIO

from gpu_catalog import load_catalog
from planner.core.errors import ScenarioError, loads_json
from planner.engines.base import SERVING_ENGINES
from planner.model.presets import load_presets

EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 70  # EX_SOFTWARE: a bug of ours, still reported on one line
EXIT_NO_INPUT = 66  # EX_NOINPUT: standard input is closed (or a file cannot be opened for reading)
EXIT_OUTPUT = 74  # EX_IOERR: the output cannot be written (a closed pipe, a full disk)
MAX_INPUT_BYTES = 16_000_000  # a scenario or a config.json is a few kB; refuse files that are clearly not one


_PLAN_HELP = """\
input: one scenario, a JSON object (docs/CONTRACT.md; schema: python -m planner schema scenario).
Only "model" and "gpu" are required; "model" is a preset id (python -m planner models), a model
object or {"hf_config": {...config.json...}}; "gpu" a catalog id (python -m planner gpus) or a GPU object.

example (data/examples/llama70b_h100_fp8_scenario.json):
  echo '{"model": "llama-3.1-70b", "gpu": "h100-sxm", "tp": 4, "weights": "fp8", "kv_cache": "fp8",
         "context_len": 8192, "prompt_len": 2000, "output_len": 400}' | python -m planner plan -
"""
_SIZE_HELP = """\
input: one sizing request, a JSON object (docs/CONTRACT.md "Sizing"; schema: python -m planner schema sizing):
"model", "traffic" {requests_per_s, prompt_len, output_len}, "slo" {ttft_ms, itl_ms}; optional candidate
lists "gpus", "tp", "weights", "kv_cache", and "cost_mode": "own" with "ownership" costs;
"disaggregation": true adds prefill/decode fleets ("prefill_gpus", "decode_gpus", "pp", "ep" lists).

example (data/examples/llama70b_sizing.json):
  echo '{"model": "llama-3.1-70b", "traffic": {"requests_per_s": 5, "prompt_len": 2000, "output_len": 400},
         "slo": {"ttft_ms": 2000, "itl_ms": 50}, "gpus": ["h100-sxm", "h200"]}' | python -m planner size -
"""
_CALIBRATE_HELP = """\
inputs: BENCH_JSON, the file `vllm bench serve --save-result` wrote (median_tpot_ms, median_ttft_ms,
max_concurrency, completed, total_input_tokens, total_output_tokens, and for an open-loop run request_rate,
burstiness, request_throughput, mean_e2el_ms are read: fitted at its rate, --max-concurrency only a cap);
SCENARIO_JSON, the scenario that benchmark ran. Output: a calibration profile (schema: python -m planner
schema calibration) for a scenario's "calibration" field.

example:
  python -m planner calibrate data/examples/vllm_bench_qwen3_8b_h100.json \\
      data/examples/qwen3_8b_h100_scenario.json --name my-vllm > profile.json
"""
_COMMANDS_HELP = """\
input: one scenario, as for `plan` (docs/CONTRACT.md; schema: python -m planner schema scenario).
Output: the engine launch command and the `vllm bench serve` command that reproduce its plan.

With --option N the input is a sizing request: the commands of its option N (a disaggregated option's
prefill and decode workers, the router between them and the benchmark at the fleet's rate).

example:
  python -m planner commands data/examples/llama70b_h100_fp8_scenario.json --engine vllm
"""
_COMPARE_HELP = """\
inputs: BENCH_JSON, a `vllm bench serve --save-result` file; SCENARIO_JSON, the scenario it ran
(as for `plan`). Output: predicted vs measured figures and the calibration that closes the gap.

example:
  python -m planner compare-bench data/examples/vllm_bench_qwen3_8b_h100.json \\
      data/examples/qwen3_8b_h100_scenario.json
"""
_SCHEMA_HELP = """\
prints the JSON Schema (draft 2020-12) of an input, generated from the models that validate it.

example:
  python -m planner schema scenario > scenario.schema.json
"""


_EXIT_HELP = f"""\
exit codes (each error is one line `error: <field>: <reason>` on stderr):
  0 done; {EXIT_BAD_INPUT} bad input; {EXIT_NO_INPUT} standard input is closed; \
{EXIT_INTERNAL} a bug of ours (please report the input);
  {EXIT_OUTPUT} the output cannot be written (the reader closed the pipe, or the disk is full)
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2, like every other bad input
        raise ScenarioError("arguments", message)


class InputClosed(Exception):
    """Standard input is closed (`<&-`): exit EXIT_NO_INPUT."""


def _read_json(path: str, field: str, stdin: TextIO | None) -> Any:
    try:
        if path == "-":
            if stdin is None or stdin.closed:
                raise InputClosed
            text = stdin.read(MAX_INPUT_BYTES + 1)
        else:
            with open(path, encoding="utf-8") as f:
                text = f.read(MAX_INPUT_BYTES + 1)
    except FileNotFoundError:
        raise ScenarioError("file", f"{path!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ScenarioError("file", f"cannot read {path!r} ({type(err).__name__})") from None
    if len(text) > MAX_INPUT_BYTES:
        raise ScenarioError("file", f"{path!r} is larger than {MAX_INPUT_BYTES:,} characters")
    return loads_json(text, field)


def _catalog_json() -> list[dict[str, Any]]:
    return [gpu.model_dump(exclude_none=True) for gpu in load_catalog().values()]


def _models_json() -> list[dict[str, Any]]:
    from planner.core.model_shapes import active_params, param_counts

    out = []
    for model_id, spec in load_presets().items():
        entry = {"id": model_id, **spec.model_dump(exclude_none=True)}
        entry["total_params"] = param_counts(spec).total
        entry["active_params"] = active_params(spec)
        out.append(entry)
    return out


def _first_non_finite(value: Any, path: str = "") -> str | None:
    """The path of the first NaN or infinite number in a result, or None."""
    if isinstance(value, float):
        return None if math.isfinite(value) else (path or "result")
    items: Iterable[tuple[Any, Any]]
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return None
    for k, v in items:
        found = _first_non_finite(v, f"{path}.{k}" if path else str(k))
        if found:
            return found
    return None


@functools.cache
def _parser() -> _Parser:  # built once: argparse setup costs more than a plan
    parser = _Parser(prog="python -m planner", description="Ridgeline LLM serving capacity planner. "
                     "Inputs and outputs: docs/CONTRACT.md; examples: data/examples/.", epilog=_EXIT_HELP,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    raw = argparse.RawDescriptionHelpFormatter
    p_plan = sub.add_parser(
        "plan", help="plan one scenario (JSON file or '-')", epilog=_PLAN_HELP, formatter_class=raw
    )
    p_plan.add_argument("file", help="scenario JSON file, or '-' for standard input")
    full = ("print every float as computed; by default floats are rounded to 4 significant digits "
            "(integers unchanged)")
    p_plan.add_argument("--full-precision", action="store_true", help=full)
    p_size = sub.add_parser("size", help="size a fleet for a traffic target (JSON file or '-')",
                            epilog=_SIZE_HELP, formatter_class=raw)
    p_size.add_argument("file", help="sizing request JSON file, or '-' for standard input")
    p_size.add_argument("--full-precision", action="store_true", help=full)
    sub.add_parser("gpus", help="the GPU catalog as JSON (no input)")
    sub.add_parser("models", help="the model presets as JSON (no input)")
    p_cal = sub.add_parser("calibrate", help="fit a calibration profile from a vLLM bench result",
                           epilog=_CALIBRATE_HELP, formatter_class=raw)
    p_cal.add_argument("bench_json", help="`vllm bench serve --save-result` output")
    p_cal.add_argument("scenario_json", help="the scenario that benchmark ran")
    p_cal.add_argument("--name", default=None, help="the profile's name (default: vllm-bench-<gpu>)")
    p_schema = sub.add_parser("schema", help="JSON Schema of an input (scenario, sizing, calibration)",
                              epilog=_SCHEMA_HELP, formatter_class=raw)
    p_schema.add_argument(
        "input", nargs="?", default="scenario", choices=["scenario", "sizing", "calibration"]
    )
    # commands (issue 15): the engine and benchmark commands of a plan, and a benchmark compared with it
    p_cmd = sub.add_parser("commands", help="launch and benchmark commands that reproduce a scenario's plan",
                           epilog=_COMMANDS_HELP, formatter_class=raw)
    p_cmd.add_argument("file", help="scenario JSON file or '-'")
    p_cmd.add_argument("--engine", choices=SERVING_ENGINES, default=None,
                       help="default: the scenario's engine (vllm for 'graph')")
    p_cmd.add_argument("--format", choices=["text", "script", "k8s", "json", "expected"], default="text")
    p_cmd.add_argument("--option", type=int, metavar="N", help="FILE is a sizing request: its option N (as "
                       "`size` lists them; a disaggregated one's whole launch set: text, json, expected)")
    # issue 10 (fidelity): the engine profiles and their evidence
    sub.add_parser(
        "engines", help="engine profiles (graph floor, vllm, sglang, trt-llm) with their evidence (no input)"
    )
    p_cmp = sub.add_parser(
        "compare-bench", help="predicted vs measured for a `vllm bench serve --save-result` run",
        epilog=_COMPARE_HELP, formatter_class=raw,
    )
    p_cmp.add_argument("bench_json")
    p_cmp.add_argument("scenario_json")
    p_cmp.add_argument("--format", choices=["text", "json"], default="text")
    # issue 24: power-capped sizing, mixed fleets routed by length,
    # context tiers (docs/CONTRACT_EXTENSIONS.md)
    for name, text in (
        ("size-power", "size under a power budget or for the fewest MW, with a cost tier"),
        ("mixed-fleet", "cheapest mix of GPU types for a length distribution, routed by prompt length"),
        ("context-tiers", "GPUs and $ of the same traffic at several maximum contexts"),
    ):
        p_tool = sub.add_parser(name, help=f"{text} (JSON file or '-')")
        p_tool.add_argument("file", help="request JSON file, or '-'")
        p_tool.add_argument("--full-precision", action="store_true", help=full)
    return parser


def _issue15_output(args: argparse.Namespace, stdin: TextIO) -> str:
    if args.command == "commands" and args.option is not None:
        from planner.contract.disaggregated_commands import option_commands

        return option_commands(_read_json(args.file, "sizing", stdin), args.option, args.engine, args.format)
    if args.command == "commands":
        from planner.contract.commands import command_set, render

        return render(command_set(_read_json(args.file, "scenario", stdin), engine=args.engine), args.format)
    from planner.contract.bench_compare import compare_bench, comparison_dict, comparison_text
    from planner.contract.planning import clean_json

    result = compare_bench(
        _read_json(args.bench_json, "bench", stdin), _read_json(args.scenario_json, "scenario", stdin)
    )
    if args.format == "json":
        return json.dumps(clean_json(comparison_dict(result)), indent=2, allow_nan=False) + "\n"
    return comparison_text(result)


def _issue24_output(command: str, request: Any) -> Any:
    from planner.contract.planning import clean_json

    if command == "size-power":
        from planner.contract.power_sizing import size_power

        return clean_json(size_power(request))
    if command == "mixed-fleet":
        from planner.serving.mixed_fleet import mixed_fleet

        return clean_json(mixed_fleet(request))
    from planner.contract.context_tiers import context_tiers

    return clean_json(context_tiers(request))


def run(argv: list[str], stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    """Run one command; a bad input raises ScenarioError (main() prints it)."""
    stdin = stdin if stdin is not None else sys.stdin
    stdout = stdout if stdout is not None else sys.stdout
    args = _parser().parse_args(argv)
    if args.command in ("commands", "compare-bench"):
        stdout.write(_issue15_output(args, stdin))
        return 0

    if args.command == "plan":
        from planner.contract.planning import plan_dict

        result: Any = plan_dict(_read_json(args.file, "scenario", stdin))
    elif args.command == "size":
        from planner.serving.serving_modes import size_with_modes  # aggregated, and disaggregated when asked

        result = size_with_modes(_read_json(args.file, "sizing", stdin))
    elif args.command in ("size-power", "mixed-fleet", "context-tiers"):
        result = _issue24_output(args.command, _read_json(args.file, "request", stdin))
    elif args.command == "gpus":
        result = _catalog_json()
    elif args.command == "engines":
        from planner.engines.profiles import engines_listing, physics_evidence

        result = {"engines": engines_listing(), "physics": physics_evidence()}
    elif args.command == "models":
        result = _models_json()
    elif args.command == "schema":
        from planner.contract.schema import input_schema

        result = input_schema(args.input)
    else:
        from planner.serving.calibration_fit import profile_from_vllm_bench

        if args.name is not None and not 1 <= len(args.name) <= 120:
            raise ScenarioError("--name", "must be 1 to 120 characters")
        bench = _read_json(args.bench_json, "bench", stdin)
        scenario = _read_json(args.scenario_json, "scenario", stdin)
        result = profile_from_vllm_bench(bench, scenario, name=args.name).model_dump(exclude_none=True)
    bad = _first_non_finite(result)
    if bad is not None:  # a range we missed: refuse rather than print NaN/Infinity or a silent null
        raise ScenarioError(bad, "the inputs give a figure that is not a finite number (check their ranges)")
    rounded = ("plan", "size", "size-power", "mixed-fleet", "context-tiers")
    if args.command in rounded and not args.full_precision:
        from planner.contract.rounding import round_figures

        result = round_figures(result)  # at output only: the figures above were computed unrounded
    stdout.write(json.dumps(result, indent=2, allow_nan=False) + "\n")
    return 0


def _silence_stdout(out: TextIO | None) -> None:
    """Point a failed stdout at /dev/null, so that the interpreter's flush at exit does not print a second
    error (Python's documented way for SIGPIPE: docs.python.org/3/library/signal.html#note-on-sigpipe)."""
    try:
        fd = out.fileno() if out is not None else -1
    except (OSError, ValueError, AttributeError):
        return
    if fd >= 0:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)


def _report(stderr: TextIO | None, line: str) -> None:
    """Write the error line; where stderr is closed, gone or full the line is lost, but the exit code the
    caller returns still names the error (docs/CONTRACT_EXTENSIONS.md, exit codes), and a failed stderr is
    pointed at /dev/null so that the interpreter's flush at exit neither prints nor changes that code."""
    try:
        if stderr is None:
            return
        stderr.write(line + "\n")
        stderr.flush()
    except (OSError, ValueError):  # a full disk, a closed pipe, a closed file object
        _silence_stdout(stderr)


def _run_guarded(argv: list[str] | None, stdin: TextIO | None, stdout: TextIO) -> tuple[int, str | None]:
    """(exit code, the error line or None)."""
    try:
        with warnings.catch_warnings():
            # A guard: a numeric warning is a bug of ours (the tests run with warnings as errors), never
            # numpy text on stderr.
            warnings.simplefilter("ignore")
            code = run(sys.argv[1:] if argv is None else argv, stdin, stdout)
        stdout.flush()  # a full disk shows here, not at exit
        return code, None
    except InputClosed:
        closed = "standard input is closed; give a file or pipe JSON in"
        return EXIT_NO_INPUT, ScenarioError("input", closed).line()
    except (BrokenPipeError, OSError) as err:
        _silence_stdout(stdout)
        reason = (
            "the reader closed the pipe"
            if isinstance(err, BrokenPipeError)
            else (f"cannot write ({err.strerror or type(err).__name__})")
        )
        return EXIT_OUTPUT, ScenarioError("output", reason).line()
    except ScenarioError as err:
        return EXIT_BAD_INPUT, err.line()
    except SystemExit as exit_:  # --help prints and exits 0
        return int(exit_.code or 0), None
    except (
        Exception
    ) as err:  # a bug of ours: still one line, no traceback (the fuzz tests keep this unreachable)
        internal = f"{type(err).__name__}; please report the input"
        return EXIT_INTERNAL, ScenarioError("internal", internal).line()


def main(argv: list[str] | None = None, stdin: TextIO | None = None, stdout: TextIO | None = None,
         stderr: TextIO | None = None) -> int:
    """Run one command: its exit code, and on failure one line on stderr. A closed stdout (`>&-`: Python
    then has no sys.stdout) is refused before any work with exit 74, like any output that cannot be
    written."""
    stderr = stderr if stderr is not None else sys.stderr
    out = stdout if stdout is not None else sys.stdout
    line: str | None
    if out is None or out.closed:
        code, line = EXIT_OUTPUT, ScenarioError("output", "standard output is closed").line()
    else:
        code, line = _run_guarded(argv, stdin, out)
    if line is not None:
        _report(stderr, line)
    return code
