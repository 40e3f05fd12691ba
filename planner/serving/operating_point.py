"""The operating point a buyer plans at: the highest load that meets a latency objective (goodput), the
default objective an interactive chat product would accept, the judgement of each latency figure against
it, and the mean time per output token. Pure: the serving model (planner.serving.serving) does the physics.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.core.deployment import Deployment
from planner.scenario.scenario import ServiceObjective
from planner.serving.replica import Workload, replica_model
from planner.serving.serving import Objective, ServingPoint, goodput_per_ms, serve_model_at_rate

# The default latency objective: what an interactive chat product accepts, at p90.
# Public practice it sits between: MLPerf Inference's Llama-2-70B scenarios hold TTFT p99 <= 2 s and
# TPOT p99 <= 200 ms (server) and TTFT p99 <= 450 ms, TPOT p99 <= 40 ms (interactive)
# (https://mlcommons.org/2024/03/mlperf-llama2-70b/,
# docs.mlcommons.org/inference/benchmarks/language/llama2-70b/).
# A first token within 1 s and 50 ms per token (20 tokens/s, faster than people read) for 9 requests in 10
# is an interactive chat objective, looser than MLPerf's interactive p99 and far tighter than its server one.
DEFAULT_OBJECTIVE = ServiceObjective(ttft_ms=1000.0, itl_ms=50.0, percentile=90)
DEFAULT_OBJECTIVE_SOURCE = ("interactive chat: p90 TTFT <= 1 s, p90 ITL <= 50 ms; between MLPerf Inference "
                            "Llama-2-70B's interactive (TTFT p99 450 ms, TPOT p99 40 ms) and server "
                            "(TTFT p99 2 s, TPOT p99 200 ms) scenarios")
# A quantile is found by bisection (planner.serving.serving.quantile) to ~1e-5 of its value: a figure
# within this share of its bound meets it (the goodput itself sits on the bound).
JUDGE_RELATIVE_TOLERANCE = 1e-4


def objective_of(slo: ServiceObjective) -> Objective:
    return Objective(slo.ttft_ms, slo.itl_ms, slo.percentile)


def serve_at_goodput(
    d: Deployment, w: Workload, slo: Objective, max_population: int | None = None
) -> ServingPoint:
    """Open loop at the replica's goodput: the highest rate whose TTFT and ITL at the objective's
    percentile meet it (serving.goodput_per_ms). Where even a trickle misses it, the replica at a trickle
    (a millionth of its capacity), so that the page can say by how much."""
    m = replica_model(d, w, max_population)
    goodput = float(goodput_per_ms(m, slo.percentile, slo.ttft_ms, slo.itl_ms))
    rate_per_ms = goodput if goodput > 0 else float(m.capacity_per_ms()) * 1e-6
    return serve_model_at_rate(m, rate_per_ms * 1000.0, slo, goodput)


@dataclass(frozen=True)
class TimePerOutputToken:
    """Per request TPOT = (E2E - TTFT) / (output tokens - 1), its mean and percentiles over requests."""

    mean: float | None
    p50: float | None
    p99: float | None


def time_per_output_token(point: ServingPoint) -> TimePerOutputToken:
    """TPOT from the serving model's own quantities. The model decodes every request's O - 1 tokens at the
    mean iteration T (E2E = TTFT + (O - 1) T), so each request's (E2E - TTFT) / (O - 1) is T: the
    distribution is a point and mean = p50 = p99 = T. Mean TPOT is the first figure `vllm bench serve`
    prints; pooled ITL (per token) is the other view of the same decode. None where not stable, or with
    one output token (no decode)."""
    if point.tpot_ms is not None:  # a closed-loop benchmark measured it request by request
        return TimePerOutputToken(point.tpot_mean_ms, point.tpot_ms.p50, point.tpot_ms.p99)
    t = point.mean_iteration_ms
    if not point.stable or t is None or point.decode_steps_per_request <= 0:
        return TimePerOutputToken(None, None, None)
    return TimePerOutputToken(t, t, t)


def meets(value_ms: float | None, bound_ms: float | None) -> bool | None:
    """Whether a latency figure meets its bound (None when either is absent)."""
    if value_ms is None or bound_ms is None:
        return None
    return value_ms <= bound_ms * (1.0 + JUDGE_RELATIVE_TOLERANCE)


@dataclass(frozen=True)
class Judgement:
    """The objective's percentile of TTFT and ITL, each against its bound (None: no bound or no figure)."""

    percentile: int
    ttft_ms: float | None
    itl_ms: float | None
    ttft_met: bool | None
    itl_met: bool | None

    @property
    def met(self) -> bool | None:
        marks = [m for m in (self.ttft_met, self.itl_met) if m is not None]
        return all(marks) if marks else None


def judge(ttft_ms, itl_ms, slo: ServiceObjective) -> Judgement:
    """Judge a plan's serving TTFT and ITL (objects with p50/p90/p99) at the objective's percentile."""
    key = f"p{slo.percentile}"
    ttft, itl = getattr(ttft_ms, key), getattr(itl_ms, key)
    return Judgement(slo.percentile, ttft, itl, meets(ttft, slo.ttft_ms), meets(itl, slo.itl_ms))


__all__ = [
    "DEFAULT_OBJECTIVE", "DEFAULT_OBJECTIVE_SOURCE", "Judgement", "TimePerOutputToken", "judge", "meets",
    "objective_of", "serve_at_goodput", "time_per_output_token",
]
