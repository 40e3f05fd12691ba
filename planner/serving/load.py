"""A closed loop of `concurrency` clients on one replica, through the serving model (planner.serving.serving):
the median ITL and TTFT that `vllm bench serve --max-concurrency` reports, for calibration fits.
No physics of its own: one serving model for the plan, the sizing search and calibration."""

from __future__ import annotations

from planner.core.deployment import Deployment
from planner.serving.serving import ServingPoint, serve_at_concurrency
from planner.serving.workload import TrafficMix, replica_workload


def closed_loop(d: Deployment, concurrency: int, prompt_len: int, output_len: int,
                mix: TrafficMix | None = None) -> ServingPoint:
    """`mix`: the scenario's `load` (length and arrival variation, prefix hits, batched-token budget)."""
    w = replica_workload(d, prompt_len, output_len, concurrency, mix)
    return serve_at_concurrency(d, w, concurrency)


def itl_under_concurrency(d: Deployment, concurrency: int, prompt_len: int, output_len: int,
                          mix: TrafficMix | None = None) -> float:
    """Median inter-token latency (pooled over tokens) of the closed loop."""
    p50 = closed_loop(d, concurrency, prompt_len, output_len, mix).itl_ms.p50
    return float("inf") if p50 is None else p50


def ttft_under_concurrency(d: Deployment, concurrency: int, prompt_len: int, output_len: int,
                           mix: TrafficMix | None = None) -> float:
    """Median time to first token of the closed loop, serving overhead included."""
    p50 = closed_loop(d, concurrency, prompt_len, output_len, mix).ttft_ms.p50
    return float("inf") if p50 is None else p50
