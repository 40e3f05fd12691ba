"""From plan to proof: the engine launch and benchmark commands that reproduce a plan.

The launch command is the engine's (planner.contract.launch); the benchmark is `vllm bench serve` on the
random dataset at the planned lengths and operating point; the figures it should print come from
planner.contract.expected_figures. Also written here: the launch script, a minimal Kubernetes Deployment and
the expected-figures sheet. Pure text generation: no engine is imported or run.
"""

from __future__ import annotations

import json
import math
import shlex
from dataclasses import dataclass
from typing import Any

from planner.contract.expected_figures import ExpectedFigure, expected_figures
from planner.contract.launch import (
    PORTS,
    LaunchCommand,
    flag_value,
    prefix_tokens,
    range_ratio,
    sglang_launch,
    trtllm_launch,
    vllm_launch,
    yaml_scalar,
)
from planner.core.errors import ScenarioError
from planner.engines.base import DEFAULT_ENGINE, ENGINE_LABELS, SERVING_ENGINES
from planner.hardware.parallelism import effective_ep, validate_parallelism
from planner.model.presets import preset_hf_id
from planner.scenario.scenario import Scenario, parse_scenario, resolve_gpu, resolve_model
from planner.serving.benchmark_client import default_num_prompts
from planner.serving.distributions import PERCENTILES

ENGINES = SERVING_ENGINES  # the engines a launch command exists for
HEALTH_PATH = "/health"  # all three servers answer GET /health with 200 once ready
MODEL_PLACEHOLDER = "YOUR_MODEL_ID"
RESULT_FILENAME = "ridgeline_bench.json"
BENCH_SECONDS = 120  # open loop: at least two minutes of arrivals at the planned rate
# An open-loop run long enough for its percentiles: at least OPEN_LOOP_MIN_PROMPTS requests (the p99 of 1,000
# requests has 10 beyond it), and at least STEADY_STATE_E2ES mean request lifetimes long, so that the ramp-up
# (the first E2E, an emptier server) and the drain (the last one) are each 5 % of the run or less.
OPEN_LOOP_MIN_PROMPTS = 1000
STEADY_STATE_E2ES = 20
# The safety cap of an open-loop run (--max-concurrency): the requests in flight at a rate below capacity are
# about Poisson with mean L = rate x mean E2E (Little's law; the plan's `serving.concurrency`). The cap is
# max(2 L, L + 5 sqrt(L)): beyond the Poisson 99.99th percentile (L + 3.7 sqrt(L)), so it never holds an
# arrival back at the planned latencies (vllm bench serve would start such a request late and leave that
# wait out of its TTFT), and it still bounds the pile-up of a server twice as slow as planned.
CAP_OVER_MEAN = 2.0
CAP_SIGMAS = 5.0
RATE_DIGITS = 4  # a goodput is written to 4 significant digits, rounded down: never above the goodput



@dataclass(frozen=True)
class CommandSet:
    engine: str
    model_id: str
    gpus_per_replica: int
    launch: LaunchCommand
    bench: tuple[str, ...]
    expected: tuple[ExpectedFigure, ...]
    notes: tuple[str, ...]


def model_id(scenario: Scenario) -> str | None:
    """The Hugging Face id an engine loads: the preset's, or `_name_or_path` of an imported config."""
    if isinstance(scenario.model, str):
        return preset_hf_id(scenario.model)
    config = scenario.model.get("hf_config")
    if isinstance(config, dict):
        name = config.get("_name_or_path")
        if isinstance(name, str) and 0 < len(name) <= 200 and not name.startswith(("/", ".")):
            return name
    return None


def pick_engine(scenario: Scenario, engine: str | None) -> str:
    if engine is None:
        return scenario.engine if scenario.engine in ENGINES else DEFAULT_ENGINE
    if engine not in ENGINES:
        raise ScenarioError("engine", f"must be one of {', '.join(ENGINES)}")
    return engine


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _floor_digits(x: float, digits: int = RATE_DIGITS) -> float:
    """`x` rounded down to `digits` significant digits (4.447363 -> 4.447)."""
    scale = 10.0 ** (digits - 1 - math.floor(math.log10(x)))
    return math.floor(x * scale * (1 + 1e-12)) / scale


@dataclass(frozen=True)
class OpenLoop:
    """An open-loop benchmark: Poisson (or gamma) arrivals at `rate` requests/s, as the plan assumes, with a
    concurrency cap that does not bind at the planned latencies, long enough for its percentiles."""

    rate: float
    cap: int | None  # None: the plan has no steady state to bound (an unstable rate)
    num_prompts: int
    how: str  # why these numbers, for the notes


def open_loop(s: Scenario, plan_json: dict[str, Any] | None) -> OpenLoop | None:
    """The open-loop benchmark of a plan at a request rate (`load.request_rate`, or `load.at_goodput`: the
    goodput its `serving` section found); None for a closed loop or a plan without a rate."""
    if s.load is None:
        return None
    serving = (plan_json or {}).get("serving") or {}
    planned = _number(serving.get("request_rate"))
    if s.load.request_rate is not None:
        rate, source = s.load.request_rate, "the scenario's request rate"
    elif s.load.at_goodput and planned is not None and planned > 0:
        rate, source = _floor_digits(planned), (
            f"the plan's goodput {planned:.6g} req/s, rounded down to {RATE_DIGITS} digits")
    else:
        return None
    in_flight = _number(serving.get("concurrency")) if serving.get("stable") else None
    e2e = _number((serving.get("e2e_ms") or {}).get("mean")) if serving.get("stable") else None
    seconds = max(BENCH_SECONDS, STEADY_STATE_E2ES * e2e / 1000.0) if e2e else BENCH_SECONDS
    num_prompts = max(OPEN_LOOP_MIN_PROMPTS, math.ceil(rate * seconds))
    how = (f"--request-rate {flag_value(rate)}: {source}, arrivals "
           + ("Poisson (burstiness 1, vllm bench serve's default)" if s.load.arrival_cv == 1.0
              else "gamma-distributed (--burstiness)")
           + f" as the plan assumes; --num-prompts {num_prompts}: about {num_prompts / rate:,.0f} s of "
           f"arrivals, at least {OPEN_LOOP_MIN_PROMPTS} requests and {STEADY_STATE_E2ES} mean E2Es")
    cap = None
    if in_flight is not None and in_flight > 0:
        cap = math.ceil(max(CAP_OVER_MEAN * in_flight, in_flight + CAP_SIGMAS * math.sqrt(in_flight)))
        how += (f"; --max-concurrency {cap} is only a safety cap: the plan holds {in_flight:,.1f} requests "
                f"in flight on average, and max(2 L, L + 5 sqrt(L)) = {cap} is not reached at the planned "
                "latencies")
    else:
        how += "; no --max-concurrency: the plan has no steady state at this rate (at or above capacity)"
    return OpenLoop(rate, cap, num_prompts, how)


def _num_prompts(s: Scenario, concurrency: int | None) -> int:
    """A closed loop's requests: the scenario's benchmark setting, else ~10 per client."""
    if s.load is not None and s.load.benchmark.num_prompts is not None:
        return s.load.benchmark.num_prompts
    return default_num_prompts(concurrency or 1)  # the plan's benchmark section sends the same


def bench_argv(s: Scenario, engine: str, hf_id: str, batch: int,
               plan_json: dict[str, Any] | None = None,
               port: int | None = None) -> tuple[tuple[str, ...], list[str]]:
    """`vllm bench serve` at the planned lengths and operating point; returns (argv, notes). A plan at a
    request rate (given, or its goodput) is benchmarked open loop at that rate (open_loop). `port`: where the
    server answers when not at the engine's default (a disaggregated fleet's router)."""
    notes: list[str] = []
    prefix = prefix_tokens(s)
    argv = ["vllm", "bench", "serve", "--backend", "vllm" if engine == "vllm" else "openai",
            "--base-url", f"http://127.0.0.1:{port or PORTS[engine]}", "--model", hf_id,
            "--dataset-name", "random", "--random-input-len", str(s.prompt_len - prefix),
            "--random-output-len", str(s.output_len)]
    if prefix:
        argv += ["--random-prefix-len", str(prefix)]
        notes.append(
            f"{prefix} shared prefix tokens + {s.prompt_len - prefix} random tokens per prompt reproduce the "
            "planned prefix-cache hit rate"
        )
    bench = s.load.benchmark if s.load is not None else None
    if bench is not None and bench.random_range_ratio < 1.0:
        # the plan's benchmark client draws the same lengths (vllm bench serve: [L(1 - r), L(1 + r)])
        ratio = bench.random_range_ratio if bench.range == "around" else (1.0 - bench.random_range_ratio) / 2
        argv += ["--random-range-ratio", flag_value(ratio)]
        if bench.range == "below":
            notes.append(
                "vllm bench serve draws lengths around L, not in [r L, L] as benchmark_serving.py "
                f"does: --random-range-ratio {flag_value(ratio)} keeps the spread, its mean is L, not (1 + "
                "r) L / 2"
            )
    elif range_ratio(s) > 0:
        argv += ["--random-range-ratio", flag_value(range_ratio(s))]
        if s.load is not None and s.load.output_len_cv != s.load.prompt_len_cv:
            notes.append(
                "vllm bench serve applies one range ratio to prompt and output lengths; it follows "
                "prompt_len_cv"
            )
    loop = open_loop(s, plan_json)
    argv += _operating_point_flags(s, loop, batch, notes)
    argv += ["--ignore-eos",
             "--percentile-metrics", "ttft,tpot,itl,e2el",
             "--metric-percentiles", ",".join(map(str, PERCENTILES))]
    argv += _goodput_flags(s.load.slo if s.load is not None else None, notes)
    argv += ["--save-result", "--result-filename", RESULT_FILENAME]
    if loop is not None and engine != "vllm":
        notes.append(_client_equivalent(engine, loop))
    return tuple(argv), notes


def _operating_point_flags(s: Scenario, loop: OpenLoop | None, batch: int, notes: list[str]) -> list[str]:
    """The run's load: open loop at the plan's rate (`loop`), else a closed loop of `load.concurrency` (or the
    plan's batch) clients; then its number of prompts."""
    if loop is None or s.load is None:
        concurrency = s.load.concurrency if s.load is not None and s.load.concurrency is not None else batch
        return ["--max-concurrency", str(concurrency), "--num-prompts", str(_num_prompts(s, concurrency))]
    argv = ["--request-rate", flag_value(loop.rate)]
    if loop.cap is not None:
        argv += ["--max-concurrency", str(loop.cap)]
    notes.append(loop.how)
    if s.load.arrival_cv != 1.0:
        if s.load.arrival_cv > 0:
            # gamma inter-arrivals with shape k have a coefficient of variation 1 / sqrt(k)
            argv += ["--burstiness", flag_value(1.0 / s.load.arrival_cv ** 2)]
        else:
            notes.append("arrival_cv 0 (evenly spaced arrivals) has no vllm bench equivalent; Poisson is "
                         "used")
    return argv + ["--num-prompts", str(loop.num_prompts)]


def _goodput_flags(slo: Any, notes: list[str]) -> list[str]:
    """vllm bench serve's --goodput: the objective's per-request bounds (TTFT; TPOT where the objective has
    one). An ITL percentile is no per-request bound: it is not passed as a TPOT bound (a request's TPOT is its
    mean ITL, prompt chunks included, and can exceed an ITL p90 the plan meets), the sheet's ITL lines check
    it."""
    if slo is None:
        return []
    tpot_ms = getattr(slo, "tpot_ms", None)
    bounds = ([f"ttft:{flag_value(slo.ttft_ms)}"] if slo.ttft_ms else []) + (
        [f"tpot:{flag_value(tpot_ms)}"] if tpot_ms else [])
    if slo.itl_ms:
        notes.append(f"the ITL objective (p{slo.percentile} <= {flag_value(slo.itl_ms)} ms) is not a vllm "
                     "bench --goodput bound (it takes per-request TTFT, TPOT, E2EL): compare the run's "
                     f"p{slo.percentile}_itl_ms with it")
    return ["--goodput", *bounds] if bounds else []


def _client_equivalent(engine: str, loop: OpenLoop) -> str:
    """The engine's own benchmark client at the same operating point (its flags follow vllm bench serve's)."""
    same = (f"--request-rate {flag_value(loop.rate)}"
            + (f" --max-concurrency {loop.cap}" if loop.cap is not None else "")
            + f" --num-prompts {loop.num_prompts} and the same --dataset-name random lengths")
    client = ("python -m sglang.bench_serving --backend sglang-oai" if engine == "sglang" else
              "python -m tensorrt_llm.serve.scripts.benchmark_serving --backend openai")
    return f"{ENGINE_LABELS.get(engine, engine)}'s own client takes the same operating point: {client} {same}"



def command_set(scenario: Scenario | dict[str, Any], engine: str | None = None,
                plan_json: dict[str, Any] | None = None) -> CommandSet:
    """Launch and benchmark commands for a scenario; `plan_json` is its plan when the caller has it."""
    s = scenario if isinstance(scenario, Scenario) else parse_scenario(scenario)
    name = pick_engine(s, engine)
    from planner.contract.planning import plan_dict

    if plan_json is None:
        plan_json = plan_dict(s)
    expected_plan = plan_json
    if (
        s.load is not None
        and s.load.concurrency is not None
        and s.batch is None
        and not plan_json.get("serving")
    ):
        # a closed loop runs `concurrency` sequences at once: its medians are the plan's at that batch
        expected_plan = plan_dict(s.model_copy(update={"batch": s.load.concurrency}))
    model = resolve_model(s.model)
    # the plan checked the layout for the scenario's engine; the commands may be for another one
    validate_parallelism(model, s.tp, s.pp, effective_ep(model, s.ep), name)
    hf_id = model_id(s)
    notes: list[str] = []
    if hf_id is None:
        hf_id = MODEL_PLACEHOLDER
        notes.append(f"the model has no known Hugging Face id: replace {MODEL_PLACEHOLDER} with it")
    if s.engine == "graph":
        notes.append("the scenario's engine is 'graph' (no serving engine); the commands use vLLM")
    batch = int(plan_json["latency"]["batch"])
    moe = model.moe is not None
    if name == "vllm":
        launch = vllm_launch(s, hf_id, batch, moe)
    elif name == "sglang":
        launch = sglang_launch(s, hf_id, batch, moe)
    else:
        gpu, _ = resolve_gpu(s.gpu)
        mem = plan_json["memory"]
        free_gb = gpu.memory_gb - float(mem["weights_gb_per_gpu"])
        fraction = min(1.0, max(0.01, float(mem["kv_budget_gb_per_gpu"]) / free_gb)) if free_gb > 0 else 0.01
        launch = trtllm_launch(s, hf_id, batch, moe, round(fraction, 2))
    bench, bench_notes = bench_argv(s, name, hf_id, batch, plan_json)
    # EP groups wider than TP add GPUs per stage: the plan's layout counts them (planner.hardware.parallelism)
    gpus = int((plan_json.get("parallelism") or {}).get("gpus_per_replica") or s.tp * s.pp)
    if gpus > 8:
        notes.append(
            f"{gpus} GPUs per replica span more than one 8-GPU node: the single-pod manifest needs a "
            "multi-node launcher (e.g. LeaderWorkerSet) instead"
        )
    return CommandSet(engine=name, model_id=hf_id, gpus_per_replica=gpus, launch=launch, bench=bench,
                      expected=expected_figures(s, expected_plan), notes=tuple(notes + bench_notes))


def shell_command(argv: tuple[str, ...] | list[str]) -> str:
    """A copy-paste command line: the program and its positional arguments first, then each flag with
    its value(s) on its own continued line."""
    parts: list[str] = []
    for token in argv:
        quoted = shlex.quote(token)
        if token.startswith("-") and parts and not token.lstrip("-").replace(".", "").isdigit():
            parts.append(quoted)
        elif parts:
            parts[-1] += " " + quoted
        else:
            parts.append(quoted)
    return " \\\n    ".join(parts)


def _band_text(f: ExpectedFigure) -> str:
    return (
        f"{f.band_low:,.2f} .. {f.band_high:,.2f}"
        if f.band_low is not None and f.band_high is not None
        else ""
    )


def expected_sheet(cs: CommandSet) -> str:
    """The figures the benchmark should print, in its own words, with the plan's band."""
    lines = [f"Expected `vllm bench serve` figures ({cs.engine}, {cs.model_id})",
             f"{'figure':<34}{'result key':<20}{'plan':>12}  band (10th-90th pct of past step error, over "
             "the simulated queue range where the plan has one)"]
    for f in cs.expected:
        value = f"{f.predicted:,.2f}" if f.predicted is not None else "-"
        lines.append(f"{f.label + ' (' + f.unit + ')':<34}{f.result_key:<20}{value:>12}  {_band_text(f)}")
    lines.append("'-': the plan has no figure for it (yet); compare the rest line by line.")
    return "\n".join(lines) + "\n"


def launch_script(cs: CommandSet) -> str:
    """Bash: start the server, wait for /health, run the benchmark, stop the server."""
    launch = cs.launch
    files = "".join(f"cat > {shlex.quote(name)} <<'RIDGELINE_EOF'\n{text}RIDGELINE_EOF\n\n"
                    for name, text in launch.files.items())
    notes = "".join(f"# note: {n}\n" for n in (*launch.notes, *cs.notes))
    return (
        "#!/usr/bin/env bash\n"
        f"# Ridgeline: launch {cs.engine} with the planned settings, wait until it is healthy, benchmark "
        "it.\n"
        f"# Needs {cs.gpus_per_replica} GPU(s) and `vllm` installed for the benchmark client; gated models\n"
        "# (e.g. meta-llama) need HF_TOKEN set in the environment.\n"
        f"{notes}"
        "set -euo pipefail\n\n"
        f"{files}"
        f"{shell_command(launch.argv)} &\n"
        "SERVER_PID=$!\n"
        "trap 'kill $SERVER_PID 2>/dev/null || true' EXIT\n\n"
        f"echo 'waiting for http://127.0.0.1:{launch.port}{HEALTH_PATH} ...'\n"
        f"until curl -sf http://127.0.0.1:{launch.port}{HEALTH_PATH} > /dev/null; do\n"
        "  kill -0 $SERVER_PID 2>/dev/null || { echo 'server exited before becoming healthy' >&2; exit 1; }\n"
        "  sleep 5\n"
        "done\n\n"
        f"{shell_command(cs.bench)}\n\n"
        f"echo 'result: {RESULT_FILENAME} (compare: python -m planner compare-bench {RESULT_FILENAME} "
        "scenario.json)'\n"
    )


def _yaml(value: Any, indent: int = 0) -> str:
    """Block-style YAML for dicts, lists and scalars (strings JSON-quoted, so any text stays one scalar)."""
    pad = " " * indent
    if isinstance(value, dict):
        out = ""
        for k, v in value.items():
            if isinstance(v, (dict, list)) and v:
                out += f"{pad}{k}:\n{_yaml(v, indent + 2)}"
            else:
                out += f"{pad}{k}: {yaml_scalar(v) if not isinstance(v, (dict, list)) else json.dumps(v)}\n"
        return out
    out = ""
    for item in value:
        if isinstance(item, dict) and item:
            body = _yaml(item, indent + 2)
            out += f"{pad}- {body[indent + 2:]}"
        else:
            out += f"{pad}- {yaml_scalar(item)}\n"
    return out


def manifest_object(cs: CommandSet, name: str = "ridgeline-llm") -> dict[str, Any]:
    """The Deployment as data: one replica, the planned GPUs, probes on the engine's health path."""
    launch = cs.launch
    probe = {"httpGet": {"path": HEALTH_PATH, "port": launch.port}}
    volumes: list[dict[str, Any]] = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
    mounts: list[dict[str, Any]] = [{"name": "dshm", "mountPath": "/dev/shm"}]  # NCCL needs shared memory
    command = list(launch.argv)
    if launch.files:
        volumes.append({"name": "engine-options", "configMap": {"name": f"{name}-options"}})
        mounts.append({"name": "engine-options", "mountPath": "/etc/ridgeline"})
        command = [f"/etc/ridgeline/{t}" if t in launch.files else t for t in command]
    container = {
        "name": "engine",
        "image": {"vllm": "vllm/vllm-openai:latest", "sglang": "lmsysorg/sglang:latest",
                  "trt-llm": "nvcr.io/nvidia/tensorrt-llm/release:latest"}[cs.engine],
        "command": command, "ports": [{"containerPort": launch.port}],
        # gated repositories (e.g. meta-llama) need a Hugging Face token: secret `hf-token`, key `token`
        "env": [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token",
                                                                    "optional": True}}}],
        "resources": {"limits": {"nvidia.com/gpu": cs.gpus_per_replica},
                      "requests": {"nvidia.com/gpu": cs.gpus_per_replica}},
        # weights load before /health answers: readiness waits, liveness starts late
        "readinessProbe": {**probe, "initialDelaySeconds": 60, "periodSeconds": 10, "failureThreshold": 90},
        "livenessProbe": {**probe, "initialDelaySeconds": 900, "periodSeconds": 30, "failureThreshold": 5},
        "volumeMounts": mounts,
    }
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": 1, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                         "spec": {"containers": [container], "volumes": volumes}},
        },
    }


def k8s_manifest(cs: CommandSet, name: str = "ridgeline-llm") -> str:
    docs = []
    if cs.launch.files:
        config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-options"},
                      "data": dict(cs.launch.files)}
        docs.append(_yaml(config_map))
    docs.append(_yaml(manifest_object(cs, name)))
    header = f"# Ridgeline: {cs.engine} serving {cs.model_id} on {cs.gpus_per_replica} GPU(s) per replica.\n"
    return header + "---\n".join(docs)


def command_set_dict(cs: CommandSet) -> dict[str, Any]:
    return {
        "engine": cs.engine, "model_id": cs.model_id, "gpus_per_replica": cs.gpus_per_replica,
        "launch": {
            "argv": list(cs.launch.argv), "command": shlex.join(cs.launch.argv), "port": cs.launch.port,
            "health_path": HEALTH_PATH, "files": dict(cs.launch.files), "notes": list(cs.launch.notes),
        },
        "bench": {"argv": list(cs.bench), "command": shlex.join(cs.bench), "result_file": RESULT_FILENAME},
        "expected": [
            {
                "figure": f.label, "result_key": f.result_key, "unit": f.unit, "predicted": f.predicted,
                "band": ({"low": f.band_low, "high": f.band_high} if f.band_low is not None else None),
            }
            for f in cs.expected
        ],
        "notes": list(cs.notes),
    }


def commands_text(cs: CommandSet) -> str:
    files = "".join(f"# {name}\n{text}\n" for name, text in cs.launch.files.items())
    notes = "".join(f"# note: {n}\n" for n in (*cs.launch.notes, *cs.notes))
    return (
        f"# launch ({cs.engine}, {cs.gpus_per_replica} GPU(s))\n{files}{shell_command(cs.launch.argv)}\n\n"
        f"# benchmark (after GET http://127.0.0.1:{cs.launch.port}{HEALTH_PATH} answers 200)\n"
        f"{shell_command(cs.bench)}\n{notes}"
    )


FORMATS = ("text", "script", "k8s", "json", "expected")


def render(cs: CommandSet, fmt: str) -> str:
    if fmt == "text":
        return commands_text(cs)
    if fmt == "script":
        return launch_script(cs)
    if fmt == "k8s":
        return k8s_manifest(cs)
    if fmt == "expected":
        return expected_sheet(cs)
    if fmt == "json":
        from planner.contract.planning import clean_json

        return json.dumps(clean_json(command_set_dict(cs)), indent=2, allow_nan=False) + "\n"
    raise ScenarioError("format", f"must be one of {', '.join(FORMATS)}")
