#!/usr/bin/env python3
"""Mutation check: does a deliberate 10% error in each physical formula make at least one test fail?

Each mutation multiplies one planner function's result by 1.1 (tools/mutation_plugin.py patches every
binding of it before the tests import the planner) and runs the physics tests in a subprocess; the
first failing tests are the ones that caught it.

    python3 tools/mutation_check.py                 # every mutation, a markdown table on stdout
    python3 tools/mutation_check.py --only kv_bytes # one
    python3 tools/mutation_check.py --list
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# (label, what it stands for, module:function). Each function is the one place its formula lives.
MUTATIONS: list[tuple[str, str, str]] = [
    ("weights", "memory: weight bytes of a checkpoint", "planner.physics.memory:weight_bytes_total"),
    (
        "kv_bytes", "KV bytes per token per layer (memory, KV reads)",
        "planner.physics.memory:kv_values_per_token_per_layer",
    ),
    (
        "kv_bytes_per_gpu", "KV bytes per token per layer on one GPU",
        "planner.physics.memory:kv_values_per_token_per_layer_per_gpu",
    ),
    ("bits_per_value", "storage bits of a precision", "planner.core.precision:bits_per_value"),
    ("gemm_flops", "GEMM FLOPs of a step", "planner.physics.roofline:_gemm_flops"),
    ("gemm_bytes", "GEMM bytes (weights streamed per step)", "planner.physics.roofline:_weights_read_bytes"),
    (
        "decode_attention_flops", "decode attention FLOPs",
        "planner.physics.roofline:_attention_flops_per_cached_token_layer",
    ),
    (
        "prefill_attention_flops", "prefill attention FLOPs",
        "planner.physics.roofline:_prefill_attention_flops_per_pair",
    ),
    (
        "attention_bytes", "attention bytes (KV read per sequence)",
        "planner.physics.memory:kv_bytes_per_sequence_per_gpu",
    ),
    ("causal_pairs", "prefill (query, key) pairs", "planner.physics.roofline:causal_pairs"),
    (
        "prefill_activations", "prefill activation traffic",
        "planner.physics.roofline:_prefill_activation_values_per_token_layer",
    ),
    ("moe_experts", "MoE experts touched per step", "planner.core.model_shapes:expected_experts_touched"),
    ("ridge", "the ridge point", "planner.physics.roofline:ridge_flop_per_byte"),
    ("itl", "ITL: the decode step time", "planner.physics.latency:decode_step"),
    ("prefill", "prefill time", "planner.physics.latency:prefill"),
    ("ttft", "TTFT from prefill", "planner.physics.latency:ttft_ms"),
    ("allreduce", "communication: one all-reduce", "planner.hardware.communication:allreduce_ms"),
    (
        "ring_factor", "communication: ring volume factor",
        "planner.hardware.communication:ring_allreduce_volume_factor",
    ),
    ("cost", "cost per million output tokens", "planner.economics.cost:usd_per_million_output_tokens"),
    ("owned_cost", "owned $/GPU-hour", "planner.economics.ownership:owned_usd_per_gpu_hour"),
    ("speculative", "speculative tokens per round", "planner.physics.speculative:tokens_per_round"),
    ("draft_step", "speculative draft step", "planner.physics.speculative:draft_step_ms"),
    (
        "serving_percentiles", "serving: TTFT/ITL/E2E percentiles under load",
        "planner.serving.distributions:quantile",
    ),
    ("serving_mean_ttft", "serving: mean TTFT under load", "planner.serving.distributions:mean_ttft_ms"),
    ("serving_goodput", "serving: goodput under a percentile SLO", "planner.serving.serving:goodput_per_ms"),
    (
        "serving_chunk", "serving: extra time of a prompt chunk in an iteration",
        "planner.physics.latency:prefill_chunk_work_ms",
    ),
    (
        "serving_closed_loop_itl", "serving: ITL at a concurrency (calibration)",
        "planner.serving.load:itl_under_concurrency",
    ),
    (
        "pp_comm", "communication: pipeline point-to-point",
        "planner.hardware.communication:pp_communication_ms",
    ),
    (
        "ep_alltoall", "communication: expert-parallel all-to-all",
        "planner.hardware.communication:ep_alltoall_ms",
    ),
    (
        "tp_allreduce_hier", "communication: TP all-reduce over tiers",
        "planner.hardware.communication:tp_allreduce_ms",
    ),
    (
        "kv_transfer", "disaggregation: KV transfer prefill -> decode",
        "planner.serving.disaggregation:kv_transfer_ms",
    ),
    ("vllm_weights", "vLLM memory: weights GiB per GPU", "planner.engines.vllm:weights_gib_per_gpu"),
    ("vllm_activation", "vLLM memory: activation peak", "planner.engines.vllm:activation_peak_gib"),
    ("vllm_non_torch", "vLLM memory: non-torch memory", "planner.engines.vllm:non_torch_gib"),
    ("vllm_cuda_graph", "vLLM memory: CUDA graph pool", "planner.engines.vllm:cuda_graph_gib"),
    (
        "vllm_sampler", "vLLM memory: the profiling run's sampler peak",
        "planner.engines.vllm:sampler_peak_gib",
    ),
    ("vllm_moe_workspace", "vLLM memory: fused-MoE workspace held", "planner.engines.vllm:moe_workspace_gib"),
    ("vllm_graph_pool", "vLLM memory: CUDA graph pool size", "planner.engines.vllm:cuda_graph_pool_gib"),
    ("vllm_kv_page", "vLLM memory: KV page bytes per layer", "planner.engines.base:kv_page_bytes_per_layer"),
    ("vllm_visible", "vLLM memory: visible GiB of a GPU", "planner.engines.base:visible_total_gib"),
]

# The physics tests (not the app, browser, typing or suite-convention ones), quickest first.
EXCLUDED = {
    "test_app.py", "test_browser.py", "test_typing.py", "test_suite_sources.py", "test_commands_ui.py",
    "test_fuzz.py", "test_structure.py",
}


# Tests that compare a subprocess (not mutated) with the library in-process (mutated): a mismatch there
# is the harness, not a catch.
DESELECTED = ("test_plan_matches_library", "test_cli_commands_formats")
FIRST = (
    "test_seed_figures.py", "test_roofline.py", "test_memory.py", "test_memory_vllm.py", "test_latency.py",
    "test_model_shapes.py", "test_parallelism.py",
)
LAST = ("test_cli.py", "test_commands.py", "test_commands_bench.py", "test_fidelity.py", "test_sizing.py",
        "test_properties.py")


def test_files() -> list[str]:
    files = sorted(p.name for p in (ROOT / "tests").glob("test_*.py") if p.name not in EXCLUDED)
    middle = [f for f in files if f not in FIRST and f not in LAST]
    ordered = [*[f for f in FIRST if f in files], *middle, *[f for f in LAST if f in files]]
    return [f"tests/{f}" for f in ordered]


def run(target: str, maxfail: int) -> tuple[list[str], float, str]:
    env = {**os.environ, "RIDGELINE_MUTATION": target}
    start = time.time()
    r = subprocess.run(
        [
            sys.executable, "-m", "pytest", "-p", "tools.mutation_plugin", "-p", "no:cacheprovider", "-q",
            "-o", "addopts=", f"--maxfail={maxfail}", "-rf", "--hypothesis-seed=0", "-k",
            " and ".join(f"not {name}" for name in DESELECTED),
            *test_files(),
        ],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800,
    )
    failed = re.findall(r"^FAILED (\S+)", r.stdout, re.M)
    errors = re.findall(r"^ERROR (\S+)", r.stdout, re.M)
    note = "" if r.returncode in (0, 1) else f"pytest exit {r.returncode}: {r.stdout[-300:]}{r.stderr[-300:]}"
    return failed + errors, time.time() - start, note


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="labels to run")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--jobs", type=int, default=2, help="mutations run side by side")
    parser.add_argument("--maxfail", type=int, default=1, help="stop each run after this many failures")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTATIONS if not args.only or m[0] in args.only]
    if args.list:
        for label, what, target in chosen:
            print(f"{label:<24} {target:<62} {what}")
        return 0
    print("| mutation (x1.1) | function | caught by (first failing tests) |")
    print("| --- | --- | --- |")
    survivors = []
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = pool.map(lambda m: (m, run(m[2], args.maxfail)), chosen)
        for (label, what, target), (caught, seconds, note) in results:
            if not caught:
                survivors.append(label)
            shown = ", ".join(f"`{t.removeprefix('tests/')}`" for t in caught) or f"**none** {note}".strip()
            print(f"| {label}: {what} | `{target}` | {shown} |", flush=True)
            print(f"  {label}: {seconds:.0f} s", file=sys.stderr, flush=True)
    print(f"\n{len(chosen) - len(survivors)} of {len(chosen)} mutations caught"
          + (f"; survived: {', '.join(survivors)}" if survivors else ""))
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
