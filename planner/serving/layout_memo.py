"""What one sizing request computes per layout (GPU x TP x PP x EP x weight and KV precision) that depends on
nothing else of the search: the layout's deployment, its memory plan at a context, a prompt's prefill work
and the decode-step table of the goodput bound. The aggregated search and the disaggregated pools of one
request plan the same layouts with the same model, memory and efficiency settings, so they share one memo
(each figure is computed once per request, by the same call)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from planner.core.deployment import Deployment
from planner.physics.latency import decode_step, prefill_chunk_work_ms
from planner.physics.memory import MemoryPlan, plan_memory

LayoutKey = tuple[str, int, int, int, str, str]
StepTable = tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]  # (decoding populations, step ms)
# decoding populations the goodput bound tabulates (planner.serving.goodput_search.rate_bound_per_s)
BOUND_GRID = 48


def layout_key(gpu_value: str | dict[str, Any], tp: int, pp: int, ep: int, weights: str,
               kv_cache: str) -> LayoutKey:
    """A layout's identity: a custom GPU by its whole object (two custom GPUs may share a name)."""
    gpu = gpu_value if isinstance(gpu_value, str) else json.dumps(gpu_value, sort_keys=True, default=str)
    return gpu, tp, pp, ep, weights, kv_cache


class LayoutMemo:
    """Per-layout figures of one request, each computed on first use."""

    def __init__(self) -> None:
        self._deployments: dict[LayoutKey, Deployment] = {}
        self._memory: dict[tuple[LayoutKey, int], MemoryPlan] = {}
        self._work: dict[tuple[LayoutKey, float, float], float] = {}
        self._steps: dict[tuple[LayoutKey, int, float], StepTable] = {}

    def deployment(self, key: LayoutKey, build: Callable[[], Deployment]) -> Deployment:
        """The layout's deployment (`build` raises for a layout that does not resolve; nothing is kept)."""
        if key not in self._deployments:
            self._deployments[key] = build()
        return self._deployments[key]

    def known_deployment(self, key: LayoutKey) -> Deployment | None:
        return self._deployments.get(key)

    def memory(self, key: LayoutKey, d: Deployment, context_len: int) -> MemoryPlan:
        if (key, context_len) not in self._memory:
            self._memory[key, context_len] = plan_memory(d, context_len)
        return self._memory[key, context_len]

    def prefill_work_ms(self, key: LayoutKey, d: Deployment, prompt_len: float,
                        cached_tokens: float) -> float:
        """Prefill work of one prompt riding an iteration (planner.physics.latency.prefill_chunk_work_ms)."""
        if (key, prompt_len, cached_tokens) not in self._work:
            work = prefill_chunk_work_ms(d, [float(prompt_len)], [float(cached_tokens)])
            self._work[key, prompt_len, cached_tokens] = float(np.asarray(work)[0])
        return self._work[key, prompt_len, cached_tokens]

    def bound_steps(self, key: LayoutKey, d: Deployment, max_batch: int, context: float) -> StepTable:
        """(decoding populations, decode step ms at each) from 1 to the max batch, geometric."""
        if (key, max_batch, context) not in self._steps:
            self._steps[key, max_batch, context] = bound_steps(d, max_batch, context)
        return self._steps[key, max_batch, context]


def bound_steps(d: Deployment, max_batch: int, context: float) -> StepTable:
    """(decoding populations, decode step ms at each) from 1 to the max batch, geometric."""
    population = np.geomspace(1.0, max(float(max_batch), 1.0), BOUND_GRID)
    return population, np.asarray(decode_step(d, population, context).total_ms, dtype=float)
