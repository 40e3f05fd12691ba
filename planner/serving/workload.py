"""The one constructor of a replica's `Workload`: the plan, the chart data, the sizing search, the
disaggregated pools and the calibration fit all build their traffic here, so each keeps the traffic's
coefficients of variation, its prefix-cache hit rate and the engine's batched-token budget."""

from __future__ import annotations

from typing import Protocol

from planner.core.deployment import Deployment
from planner.engines.base import DEFAULT_MAX_NUM_BATCHED_TOKENS
from planner.scenario.scenario import LoadSettings, Scenario, SchedulerSettings
from planner.serving.replica import Workload


class TrafficMix(Protocol):
    """The traffic's shape, as a scenario's `load`, a sizing request's `traffic` or a TrafficShape gives
    it."""

    @property
    def arrival_cv(self) -> float: ...
    @property
    def prompt_len_cv(self) -> float: ...
    @property
    def output_len_cv(self) -> float: ...
    @property
    def prefix_cache_hit(self) -> float: ...


def replica_workload(d: Deployment, prompt_len: float, output_len: float, max_running: int,
                     mix: TrafficMix | None = None, *, context: float | None = None,
                     prefix_cache_hit: float | None = None,
                     ttft_overhead_ms: float | None = None) -> Workload:
    """The traffic one replica serves. `mix` None: fixed lengths, Poisson arrivals, no prefix hits.
    A decode-only worker overrides `prefix_cache_hit` (its prompts arrive cached) and `ttft_overhead_ms`."""
    mix = mix if mix is not None else LoadSettings()
    return Workload(
        ttft_overhead_ms=d.efficiency.ttft_overhead_ms if ttft_overhead_ms is None else ttft_overhead_ms,
        # the frontend's cost per request in flight goes with its fixed cost (a decode worker pays neither)
        ttft_per_running_ms=d.efficiency.ttft_per_running_ms if ttft_overhead_ms is None else 0.0,
        prompt_len=prompt_len, output_len=output_len, max_running=max(int(max_running), 1),
        prompt_len_cv=mix.prompt_len_cv, output_len_cv=mix.output_len_cv, arrival_cv=mix.arrival_cv,
        prefix_cache_hit=mix.prefix_cache_hit if prefix_cache_hit is None else prefix_cache_hit,
        max_num_batched_tokens=getattr(mix, "max_num_batched_tokens", DEFAULT_MAX_NUM_BATCHED_TOKENS),
        # (the default built only where the mix has none: a pydantic model per call otherwise)
        context=context, scheduler=mix.scheduler if hasattr(mix, "scheduler") else SchedulerSettings())


def running_cap(batch: int | None, max_batch: int, max_num_seqs: int | None = None) -> int:
    """Sequences a replica runs at once: the scenario's `batch` (vLLM's max_num_seqs), at most the KV cache's
    max batch; the max batch when no batch is given. `max_num_seqs`: an engine limit the caller applies too
    (the closed-loop benchmark runs the engine as launched)."""
    cap = max_batch if batch is None else min(batch, max_batch)
    return cap if max_num_seqs is None else min(cap, max_num_seqs)


def workload_for(scenario: Scenario, d: Deployment, max_running: int) -> Workload:
    """The traffic one replica serves, from the scenario's lengths and its `load` shape."""
    return replica_workload(d, scenario.prompt_len, scenario.output_len, max_running, scenario.load,
                            context=scenario.mean_context)
