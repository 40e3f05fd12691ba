"""From a disaggregated sizing option to its launch set: the prefill workers, the decode workers, the router
between them and the benchmark against the router at the fleet's rate.

vLLM's documented disaggregated prefill with NixlConnector (docs/features/nixl_connector_usage.md in
github.com/vllm-project/vllm, data/reference/engine_cli_flags.json): every instance is a `vllm serve` with
`--kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'` (NixlConnector ignores the role;
the proxy decides which instance prefills), `VLLM_NIXL_SIDE_CHANNEL_HOST` / `_PORT` for the NIXL handshake
and `UCX_NET_DEVICES`; a proxy (vLLM's `toy_proxy_server.py`, round robin over `--prefiller-hosts/-ports` and
`--decoder-hosts/-ports`, `GET /healthcheck`) sends each request to a prefill instance with max_tokens 1,
then to a decode instance with the KV cache's address. Pure text generation: no engine is imported or run.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Any

from planner.contract.commands import (
    MODEL_PLACEHOLDER,
    RESULT_FILENAME,
    bench_argv,
    model_id,
    shell_command,
)
from planner.contract.expected_figures import ExpectedFigure
from planner.contract.launch import LaunchCommand, vllm_launch
from planner.core.errors import ScenarioError
from planner.engines.base import ENGINE_LABELS
from planner.physics.memory import plan_memory
from planner.scenario.scenario import parse_scenario, resolve, resolve_model

PREFILL_PORT, DECODE_PORT, ROUTER_PORT = 8100, 8200, 8192  # the ports of vLLM's NixlConnector guide
NIXL_SIDE_CHANNEL_PORT = 5600  # VLLM_NIXL_SIDE_CHANNEL_PORT's default
ROUTER_SCRIPT = "tests/v1/kv_connector/nixl_integration/toy_proxy_server.py"  # in a vLLM checkout
ROUTER_HEALTH_PATH = "/healthcheck"
KV_TRANSFER_CONFIG = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
HOST_PLACEHOLDER = "THIS_HOST_IP"


@dataclass(frozen=True)
class PoolLaunch:
    """One pool's workers: the same `vllm serve` on each worker's host (its address in the environment)."""

    role: str  # "prefill" or "decode"
    workers: int
    gpus_per_worker: int
    gpu: str
    env: tuple[tuple[str, str], ...]
    launch: LaunchCommand
    hosts: tuple[str, ...]  # placeholders the router command names


@dataclass(frozen=True)
class DisaggregatedCommandSet:
    engine: str
    model_id: str
    request_rate: float
    prefill: PoolLaunch
    decode: PoolLaunch
    router: tuple[str, ...]
    bench: tuple[str, ...]
    expected: tuple[ExpectedFigure, ...]
    kv_transfer_path: dict[str, Any]
    notes: tuple[str, ...]


def worker_scenario(pool: dict[str, Any], request: dict[str, Any], role: str) -> dict[str, Any]:
    """The scenario a pool's worker is launched with: the pool's GPU and layout, the traffic's lengths and
    shape. A decode worker's prompts arrive computed (planner.serving.serving_modes.decode_worker_scenario
    plans it with prefix hits 1), which is no prefix caching to switch on: it launches without it."""
    traffic = request["traffic"]
    shape = {k: traffic[k] for k in ("arrival_cv", "prompt_len_cv", "output_len_cv") if k in traffic}
    if role == "prefill" and traffic.get("prefix_cache_hit"):
        shape["prefix_cache_hit"] = traffic["prefix_cache_hit"]
    scenario = {
        "model": request["model"], "gpu": pool["gpu"], "tp": pool["tp"], "pp": pool.get("pp", 1),
        "ep": pool.get("ep", 1), "weights": pool["weights"], "kv_cache": pool["kv_cache"],
        "context_len": request.get("context_len") or traffic["prompt_len"] + traffic["output_len"],
        "prompt_len": traffic["prompt_len"], "output_len": traffic["output_len"], "load": shape,
    }
    if isinstance(request.get("memory"), dict):
        scenario["memory"] = request["memory"]
    return scenario


def _pool_launch(pool: dict[str, Any], request: dict[str, Any], role: str, workers: int) -> PoolLaunch:
    s = parse_scenario(worker_scenario(pool, request, role))
    d = resolve(s)
    max_batch = plan_memory(d, s.context_len_resolved).max_batch
    # a decode worker runs at most the KV cache's max batch (the option's max_running); a prefill worker too
    batch = max(1, min(int(pool.get("max_running") or max_batch), max_batch))
    hf_id = model_id(s) or MODEL_PLACEHOLDER
    port = PREFILL_PORT if role == "prefill" else DECODE_PORT
    base = vllm_launch(s, hf_id, batch, resolve_model(s.model).moe is not None, port)
    launch = LaunchCommand(base.engine, (*base.argv, "--kv-transfer-config",
                                         json.dumps(KV_TRANSFER_CONFIG, separators=(",", ":"))),
                           base.port, base.files, base.notes)
    env = (("VLLM_NIXL_SIDE_CHANNEL_HOST", HOST_PLACEHOLDER),
           ("VLLM_NIXL_SIDE_CHANNEL_PORT", str(NIXL_SIDE_CHANNEL_PORT)), ("UCX_NET_DEVICES", "all"))
    prefix = "PREFILL" if role == "prefill" else "DECODE"
    return PoolLaunch(role, workers, int(pool["gpus_per_worker"]), str(pool["gpu"]), env, launch,
                      tuple(f"{prefix}_HOST_{i + 1}" for i in range(workers)))


def _fleet_in_flight(option: dict[str, Any], rate: float) -> float:
    """Requests the fleet holds at once (Little's law, by part): the decoding sequences of every decode worker
    and, over the TTFT at the objective's percentile (at least the mean), those before their first token."""
    decoding = int(option["decode_workers"]) * float(option["decode"]["batch"])
    return decoding + rate * float(option["ttft_ms"]) / 1000.0


def _bench(option: dict[str, Any], request: dict[str, Any], hf_id: str) -> tuple[tuple[str, ...], list[str]]:
    """`vllm bench serve` against the router, open loop at the fleet's rate (planner.contract.commands'
    open-loop rules: the cap over the fleet's in-flight requests, the run 20 mean lifetimes long)."""
    traffic, slo = request["traffic"], request["slo"]
    rate = float(traffic["requests_per_s"])
    load: dict[str, Any] = {k: traffic[k] for k in ("arrival_cv", "prompt_len_cv", "output_len_cv",
                                                    "prefix_cache_hit") if k in traffic}
    load.update(request_rate=rate, slo={"ttft_ms": slo["ttft_ms"], "itl_ms": slo["itl_ms"],
                                        "percentile": int(option.get("percentile") or 90)})
    dec = option["decode"]
    s = parse_scenario({"model": request["model"], "gpu": dec["gpu"], "tp": dec["tp"], "pp": dec.get("pp", 1),
                        "ep": dec.get("ep", 1), "weights": dec["weights"], "kv_cache": dec["kv_cache"],
                        "prompt_len": traffic["prompt_len"], "output_len": traffic["output_len"],
                        "load": load})
    in_flight = _fleet_in_flight(option, rate)
    fleet = {"serving": {"request_rate": rate, "stable": True, "concurrency": in_flight,
                         "e2e_ms": {"mean": in_flight / rate * 1000.0}}}
    return bench_argv(s, "vllm", hf_id, int(dec["batch"]), fleet, ROUTER_PORT)


def _expected(option: dict[str, Any], request: dict[str, Any]) -> tuple[ExpectedFigure, ...]:
    """What the run should print, from the option's own figures (no bands: the fleet's are not validated)."""
    rate = float(request["traffic"]["requests_per_s"])
    pct = int(option.get("percentile") or 90)
    return (
        ExpectedFigure("Request throughput", "request_throughput", "req/s", rate),
        ExpectedFigure("Output token throughput", "output_throughput", "tok/s",
                       rate * float(request["traffic"]["output_len"])),
        ExpectedFigure(f"P{pct} TTFT", f"p{pct}_ttft_ms", "ms", float(option["ttft_ms"])),
        ExpectedFigure(f"P{pct} ITL", f"p{pct}_itl_ms", "ms", float(option["itl_ms"])),
    )


def disaggregated_command_set(option: dict[str, Any], request: dict[str, Any]) -> DisaggregatedCommandSet:
    """The launch set of a disaggregated sizing option (planner.serving.serving_modes) for the request it was
    sized for. Commands exist for vLLM's NixlConnector path (the engine sizing plans with)."""
    if option.get("mode") != "disaggregated":
        raise ScenarioError("option", "is not a disaggregated option")
    path = option.get("kv_transfer_path") or {}
    if path.get("engine") != "vllm" or "NixlConnector" not in str(path.get("path", "")):
        raise ScenarioError("option", "has no vLLM NixlConnector path; commands exist for that path only")
    prefill = _pool_launch(option["prefill"], request, "prefill", int(option["prefill_workers"]))
    decode = _pool_launch(option["decode"], request, "decode", int(option["decode_workers"]))
    hf_id = prefill.launch.argv[2]
    router = ("python", ROUTER_SCRIPT, "--host", "0.0.0.0", "--port", str(ROUTER_PORT),
              "--prefiller-hosts", *prefill.hosts,
              "--prefiller-ports", *[str(PREFILL_PORT)] * prefill.workers,
              "--decoder-hosts", *decode.hosts, "--decoder-ports", *[str(DECODE_PORT)] * decode.workers)
    bench, bench_notes = _bench(option, request, hf_id)
    notes = [
        f"run the prefill command on each of the {prefill.workers} prefill workers' hosts "
        f"({', '.join(prefill.hosts[:3])}{', ...' if prefill.workers > 3 else ''}) and the decode command on "
        f"each of the {decode.workers} decode workers' hosts, with {HOST_PLACEHOLDER} that host's address "
        "(VLLM_NIXL_SIDE_CHANNEL_HOST; workers sharing a host need their own port, "
        "VLLM_NIXL_SIDE_CHANNEL_PORT and CUDA_VISIBLE_DEVICES); in the router command put the hosts' "
        "addresses for the PREFILL_HOST_i / DECODE_HOST_i names",
        f"the router is vLLM's {ROUTER_SCRIPT} (from a vLLM source checkout; it needs fastapi, httpx and "
        "uvicorn): round robin, no load awareness, as vLLM's NixlConnector guide documents it; a production "
        "fleet routes with llm-d or NVIDIA Dynamo. It answers GET "
        f"http://127.0.0.1:{ROUTER_PORT}{ROUTER_HEALTH_PATH} once started, before the workers are ready: "
        f"wait for each worker's GET /health first",
        f"KV cache path: {ENGINE_LABELS.get(str(path.get('engine')), path.get('engine'))} {path.get('path')} "
        f"({path.get('transport')}); source: {path.get('source')}",
        "the sheet's TTFT counts the KV transfer whole and no router hop; the decode workers were sized at "
        f"{option['decode']['request_rate_per_worker']:.4g} req/s each, which round robin gives them only "
        "on average",
    ]
    return DisaggregatedCommandSet(
        engine="vllm", model_id=hf_id, request_rate=float(request["traffic"]["requests_per_s"]),
        prefill=prefill, decode=decode, router=router, bench=bench, expected=_expected(option, request),
        kv_transfer_path=dict(path), notes=tuple(notes + bench_notes))


def _pool_text(p: PoolLaunch) -> str:
    env = [f"{k}={v}" for k, v in p.env]
    notes = "".join(f"# note: {n}\n" for n in p.launch.notes)
    return (f"# {p.role} worker: {p.workers} worker(s) of {p.gpus_per_worker} {p.gpu} GPU(s), on each of "
            f"{p.hosts[0]}{' .. ' + p.hosts[-1] if p.workers > 1 else ''}\n{notes}"
            f"{shell_command((*env, *p.launch.argv))}\n")


def disaggregated_commands_text(c: DisaggregatedCommandSet) -> str:
    notes = "".join(f"# note: {n}\n" for n in c.notes)
    gpus = sum(p.workers * p.gpus_per_worker for p in (c.prefill, c.decode))
    return (
        f"# disaggregated fleet ({c.engine}, {c.model_id}): {c.prefill.workers} prefill + {c.decode.workers} "
        f"decode workers, {gpus} GPUs\n"
        f"{_pool_text(c.prefill)}\n{_pool_text(c.decode)}\n"
        f"# router (after every worker's GET /health answers 200)\n{shell_command(c.router)}\n\n"
        f"# benchmark against the router, at the fleet's {c.request_rate:.4g} req/s\n"
        f"{shell_command(c.bench)}\n"
        f"{notes}"
    )


def disaggregated_expected_sheet(c: DisaggregatedCommandSet) -> str:
    lines = [f"Expected `vllm bench serve` figures against the router (disaggregated fleet, {c.model_id})",
             f"{'figure':<34}{'result key':<20}{'plan':>12}"]
    lines += [f"{f.label + ' (' + f.unit + ')':<34}{f.result_key:<20}{f.predicted or 0:>12,.2f}"
              for f in c.expected]
    return "\n".join(lines) + "\n"


def disaggregated_command_set_dict(c: DisaggregatedCommandSet) -> dict[str, Any]:
    def pool(p: PoolLaunch) -> dict[str, Any]:
        return {"role": p.role, "workers": p.workers, "gpus_per_worker": p.gpus_per_worker, "gpu": p.gpu,
                "env": dict(p.env), "hosts": list(p.hosts), "argv": list(p.launch.argv),
                "command": shlex.join(p.launch.argv), "port": p.launch.port, "health_path": "/health",
                "notes": list(p.launch.notes)}

    return {
        "engine": c.engine, "model_id": c.model_id, "request_rate": c.request_rate,
        "prefill": pool(c.prefill), "decode": pool(c.decode),
        "router": {"argv": list(c.router), "command": shlex.join(c.router), "port": ROUTER_PORT,
                   "health_path": ROUTER_HEALTH_PATH},
        "bench": {"argv": list(c.bench), "command": shlex.join(c.bench), "result_file": RESULT_FILENAME},
        "expected": [{"figure": f.label, "result_key": f.result_key, "unit": f.unit, "predicted": f.predicted,
                      "band": None} for f in c.expected],
        "kv_transfer_path": c.kv_transfer_path, "notes": list(c.notes),
    }


DISAGGREGATED_FORMATS = ("text", "json", "expected")


def render_disaggregated(c: DisaggregatedCommandSet, fmt: str) -> str:
    if fmt == "text":
        return disaggregated_commands_text(c)
    if fmt == "expected":
        return disaggregated_expected_sheet(c)
    if fmt == "json":
        from planner.contract.planning import clean_json

        return json.dumps(clean_json(disaggregated_command_set_dict(c)), indent=2, allow_nan=False) + "\n"
    raise ScenarioError("--format",
                        f"a disaggregated fleet's commands come as {', '.join(DISAGGREGATED_FORMATS)}")


def option_commands(request: Any, number: int, engine: str | None = None, fmt: str = "text") -> str:
    """`python -m planner commands REQUEST.json --option N`: the commands of option N (1-based, in the order
    `python -m planner size` lists them) of a sizing request; an aggregated option's are its scenario's, a
    disaggregated one's its whole launch set (vLLM's: its KV path)."""
    from planner.contract.commands import command_set, render
    from planner.serving.serving_modes import size_with_modes

    options = size_with_modes(request)["options"]
    if not options:
        raise ScenarioError("--option", "the sizing request has no option that meets its objectives")
    if not 1 <= number <= len(options):
        raise ScenarioError("--option",
                            f"must be 1 to {len(options)} (the options `size` lists for this request)")
    option = options[number - 1]
    if option.get("mode") != "disaggregated":
        return render(command_set(option["scenario"], engine), fmt)
    if engine not in (None, "vllm"):
        raise ScenarioError("--engine", "a disaggregated option's commands are vLLM's (its KV-transfer path)")
    return render_disaggregated(disaggregated_command_set(option, request), fmt)


__all__ = ["DisaggregatedCommandSet", "PoolLaunch", "disaggregated_command_set",
           "disaggregated_command_set_dict", "disaggregated_commands_text", "disaggregated_expected_sheet",
           "option_commands", "render_disaggregated", "worker_scenario"]
