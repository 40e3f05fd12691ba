"""A disaggregated option's launch set (planner/contract/disaggregated_commands.py): the prefill and decode
workers (`vllm serve ... --kv-transfer-config` NixlConnector), the router between them (vLLM's
toy_proxy_server.py), the benchmark against the router at the fleet's rate, in the CLI
(`commands REQUEST.json --option N`) and the Deploy-and-benchmark panel (ui/commands_panel.py).
"""

from __future__ import annotations

import functools
import io
import json
import math
from pathlib import Path
from typing import Any

from streamlit.testing.v1 import AppTest

from planner.contract.cli import main
from planner.contract.commands import command_set, commands_text, shell_command
from planner.contract.disaggregated_commands import (
    DECODE_PORT,
    PREFILL_PORT,
    ROUTER_PORT,
    disaggregated_command_set,
    render_disaggregated,
)
from planner.serving.serving_modes import size_with_modes
from tests.test_commands import REFERENCE, check_against_reference, flags_of

ROOT = Path(__file__).resolve().parents[1]
# issue 31's case: Llama-3.1-70B fp8, 2,000 -> 400 tokens, 50 req/s, p90 TTFT 1 s and ITL 50 ms, six GPUs
REQUEST: dict[str, Any] = {
    "model": "llama-3.1-70b", "traffic": {"requests_per_s": 50.0, "prompt_len": 2000, "output_len": 400},
    "slo": {"ttft_ms": 1000.0, "itl_ms": 50.0, "percentile": 90}, "weights": ["fp8"], "kv_cache": ["fp8"],
    "gpus": ["h100-sxm", "h200", "b200", "mi355x", "mi350x", "gaudi3"], "disaggregation": True,
}
ENV = ("VLLM_NIXL_SIDE_CHANNEL_HOST", "VLLM_NIXL_SIDE_CHANNEL_PORT", "UCX_NET_DEVICES")


@functools.cache
def _options() -> tuple[tuple[int, dict[str, Any]], ...]:
    """(1-based number, option) of every option `size` lists for REQUEST."""
    return tuple(enumerate(size_with_modes(REQUEST)["options"], start=1))


def _disaggregated(count: int = 3) -> list[tuple[int, dict[str, Any]]]:
    """The first disaggregated options, one per vendor where the list has several."""
    seen: dict[str, tuple[int, dict[str, Any]]] = {}
    for n, o in _options():
        if o["mode"] == "disaggregated":
            seen.setdefault(o["kv_transfer_path"]["vendor"], (n, o))
    return list(seen.values())[:count]


def test_every_worker_router_and_bench_flag_is_documented_and_the_fleet_is_the_option():
    """Each pool's worker is `vllm serve` with the pool's layout (--tensor-parallel-size = the pool's TP) and
    `--kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'` with NIXL's side channel in
    its environment, as vLLM's NixlConnector guide starts prefiller and decoder; the router is vLLM's
    toy_proxy_server.py with one --prefiller-hosts/-ports pair per prefill worker and one
    --decoder-hosts/-ports pair per decode worker (the guide's "Proxy for Multiple Instances"); the benchmark
    goes to the router's port, open loop at the request's 50 req/s, and its --max-concurrency is a cap the
    fleet does not reach (above L + 3.7 sqrt(L), the Poisson 99.99th percentile of L = the decode workers'
    sequences + 50 req/s x the TTFT). Every flag and environment variable is in
    data/reference/engine_cli_flags.json.
    Source: docs: vLLM docs/features/nixl_connector_usage.md and
    tests/v1/kv_connector/nixl_integration/toy_proxy_server.py (engine_cli_flags.json names the commits)."""
    options = _disaggregated()
    assert options
    for _, option in options:
        c = disaggregated_command_set(option, REQUEST)
        pools = ((c.prefill, option["prefill"], option["prefill_workers"], PREFILL_PORT),
                 (c.decode, option["decode"], option["decode_workers"], DECODE_PORT))
        for pool, spec, workers, port in pools:
            assert pool.launch.argv[:3] == ("vllm", "serve", "meta-llama/Llama-3.1-70B")
            flags = flags_of(pool.launch.argv, 3)
            check_against_reference(flags, "vllm serve")
            assert flags["--tensor-parallel-size"] == [str(spec["tp"])] and flags["--port"] == [str(port)]
            assert json.loads(flags["--kv-transfer-config"][0]) == {"kv_connector": "NixlConnector",
                                                                     "kv_role": "kv_both"}
            assert "--enable-prefix-caching" not in flags  # the traffic shares no prefix
            assert pool.workers == workers and len(pool.hosts) == workers
            assert tuple(k for k, _ in pool.env) == ENV
            assert set(ENV) <= set(REFERENCE["vllm serve"]["environment"])
        assert c.router[:2] == ("python", "tests/v1/kv_connector/nixl_integration/toy_proxy_server.py")
        router = flags_of(c.router, 2)
        check_against_reference(router, "vllm toy_proxy_server")
        assert router["--port"] == [str(ROUTER_PORT)]
        assert router["--prefiller-ports"] == [str(PREFILL_PORT)] * option["prefill_workers"]
        assert router["--decoder-ports"] == [str(DECODE_PORT)] * option["decode_workers"]
        assert router["--prefiller-hosts"] == list(c.prefill.hosts)
        bench = flags_of(c.bench, 3)
        check_against_reference(bench, "vllm bench serve")
        assert bench["--base-url"] == [f"http://127.0.0.1:{ROUTER_PORT}"]
        assert bench["--request-rate"] == ["50"] and bench["--goodput"] == ["ttft:1000"]
        in_flight = option["decode_workers"] * option["decode"]["batch"] + 50.0 * option["ttft_ms"] / 1000.0
        assert int(bench["--max-concurrency"][0]) > in_flight + 3.7 * math.sqrt(in_flight)


def test_the_fleet_sheet_is_the_options_figures():
    """Source: hand: 50 req/s x 400 output tokens = 20,000 tokens/s of output; request throughput 50 req/s;
    p90 TTFT and ITL are the option's own (the figures the sizing table and banner show), no band."""
    _, option = _disaggregated(1)[0]
    sheet = {f.result_key: f for f in disaggregated_command_set(option, REQUEST).expected}
    assert sheet["request_throughput"].predicted == 50.0
    assert sheet["output_throughput"].predicted == 20_000.0
    assert sheet["p90_ttft_ms"].predicted == option["ttft_ms"]
    assert sheet["p90_itl_ms"].predicted == option["itl_ms"]
    assert all(f.band_low is None for f in sheet.values())


def _cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return main(argv, stdout=out, stderr=err), out.getvalue(), err.getvalue()


def test_cli_commands_of_a_sizing_option(tmp_path):
    """`python -m planner commands REQUEST.json --option N`: a disaggregated option prints its whole launch
    set (the same text, JSON and sheet as the module renders); an aggregated option prints what `commands`
    prints for its scenario; a number outside the list, a format a fleet has no form for and another engine
    than its KV path's are one line each, exit 2.
    Source: contract: the CLI's error line `error: <field>: <reason>` and exit code 2 (docs/CONTRACT.md)."""
    f = tmp_path / "request.json"
    f.write_text(json.dumps(REQUEST))
    (n_dis, dis), = _disaggregated(1)
    n_agg, agg = next((n, o) for n, o in _options() if o["mode"] == "aggregated")
    c = disaggregated_command_set(dis, REQUEST)
    for fmt in ("text", "json", "expected"):
        code, out, err = _cli(["commands", str(f), "--option", str(n_dis), "--format", fmt])
        assert code == 0 and out == render_disaggregated(c, fmt), err
    assert "--prefiller-hosts" in render_disaggregated(c, "text")
    code, out, _ = _cli(["commands", str(f), "--option", str(n_agg)])
    assert code == 0 and out == commands_text(command_set(agg["scenario"]))
    n = len(_options())
    for argv, line in (
        (["--option", str(n + 1)], f"error: --option: must be 1 to {n} (the options `size` lists for this "
                                   "request)\n"),
        (["--option", str(n_dis), "--format", "k8s"],
         "error: --format: a disaggregated fleet's commands come as text, json, expected\n"),
        (["--option", str(n_dis), "--engine", "sglang"],
         "error: --engine: a disaggregated option's commands are vLLM's (its KV-transfer path)\n"),
    ):
        code, out, err = _cli(["commands", str(f), *argv])
        assert (code, out, err) == (2, "", line)


FLEET_PANEL = """
import json, sys
sys.path.insert(0, {root!r})
from ui.commands_panel import render_fleet_commands_panel
render_fleet_commands_panel(json.loads({option!r}), json.loads({request!r}))
"""


def test_the_panel_shows_the_whole_fleet():
    """The Deploy-and-benchmark panel of an opened disaggregated option shows the prefill worker's command,
    the decode worker's, the router's and the benchmark's, each as the module renders it, and the option's
    sheet.
    Source: ui: the panel lays out planner.contract.disaggregated_commands' commands unchanged."""
    _, option = _disaggregated(1)[0]
    at = AppTest.from_string(FLEET_PANEL.format(root=str(ROOT), option=json.dumps(option),
                                                request=json.dumps(REQUEST)), default_timeout=60)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    c = disaggregated_command_set(option, REQUEST)
    codes = [x.value for x in at.code]
    for pool in (c.prefill, c.decode):
        assert shell_command((*(f"{k}={v}" for k, v in pool.env), *pool.launch.argv)) in codes
    assert shell_command(c.router) in codes and shell_command(c.bench) in codes
    assert len(at.dataframe) == 1 and list(at.dataframe[0].value["result key"]) == [
        "request_throughput", "output_throughput", "p90_ttft_ms", "p90_itl_ms"]
