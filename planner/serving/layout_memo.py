"""What one sizing request computes per layout (GPU x TP x PP x EP x weight and KV precision) that depends on
nothing else of the search: the layout's deployment, its memory plan at a context, a prompt's prefill work
(and a cheap bound under it, which orders candidates where it suffices: planner.serving.floor_order), the
empty iteration and the decode-step table of the goodput bound. The aggregated search and the disaggregated
pools of one request plan the same layouts with the same model, memory and efficiency settings, so they
share one memo (each figure is computed once per request, by the same call)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from planner.core.deployment import Deployment
from planner.physics.latency import (
    decode_step,
    empty_iteration_ms,
    prefill,
    prefill_chunk_work_ms,
    prefill_floors_ms,
)
from planner.physics.memory import MemoryPlan, plan_memory
from planner.serving.replica import PrefillWork, geometric_grid

LayoutKey = tuple[str, int, int, int, str, str]
StepTable = tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]  # (decoding populations, step ms)
# decoding populations the goodput bound tabulates (planner.serving.goodput_search.rate_bound_per_s)
BOUND_GRID = 48


def layout_key(gpu_value: str | dict[str, Any], tp: int, pp: int, ep: int, weights: str,
               kv_cache: str) -> LayoutKey:
    """A layout's identity: a custom GPU by its whole object (two custom GPUs may share a name)."""
    gpu = gpu_value if isinstance(gpu_value, str) else json.dumps(gpu_value, sort_keys=True, default=str)
    return gpu, tp, pp, ep, weights, kv_cache


def _hints_key(hints: Any) -> str:
    return json.dumps(hints, sort_keys=True, default=str)


class LayoutMemo:
    """Per-layout figures of one request, each computed on first use."""

    def __init__(self) -> None:
        self._deployments: dict[LayoutKey, Deployment] = {}
        self._memory: dict[tuple[LayoutKey, int], MemoryPlan] = {}
        self._longest_fit: dict[LayoutKey, int] = {}  # the longest context a plan has found to fit
        self._weights_fit: dict[LayoutKey, bool] = {}  # whether the weights leave any KV budget
        self._work: dict[tuple[LayoutKey, float, float], float] = {}
        # bounds on a whole prompt's work: without and with the expert all-to-alls (latency.prefill_floors_ms)
        self._work_floor: dict[tuple[LayoutKey, float], tuple[float, float]] = {}
        self._steps: dict[tuple[LayoutKey, int, float], StepTable] = {}
        self._empty: dict[LayoutKey, float] = {}
        self._prefill: dict[tuple[LayoutKey, float], float] = {}  # a lone prompt's prefill by its length
        self._families: tuple[str, tuple[list[Any], list[Any], int]] | None = None  # for one search

    def keep_families(self, hints: Any, families: tuple[list[Any], list[Any], int]) -> None:
        """The request's families as prepared under these fit hints (planner.serving.sizing.prepared_families:
        those to evaluate, the infeasible ones, configurations searched), for the one search that follows to
        take instead of preparing them again (the same figures: each was computed by the same calls)."""
        self._families = (_hints_key(hints), families)

    def take_families(self, hints: Any) -> tuple[list[Any], list[Any], int] | None:
        """The families kept under these hints, once, in lists of the caller's own (None: none kept, or
        under other hints)."""
        kept, self._families = self._families, None
        if kept is None or kept[0] != _hints_key(hints):
            return None
        prepared, infeasible, searched = kept[1]
        return list(prepared), list(infeasible), searched

    def deployment(self, key: LayoutKey, build: Callable[[], Deployment]) -> Deployment:
        """The layout's deployment (`build` raises for a layout that does not resolve; nothing is kept)."""
        if key not in self._deployments:
            self._deployments[key] = build()
        return self._deployments[key]

    def known_deployment(self, key: LayoutKey) -> Deployment | None:
        return self._deployments.get(key)

    def memory(self, key: LayoutKey, d: Deployment, context_len: int) -> MemoryPlan:
        if (key, context_len) not in self._memory:
            plan = self._memory[key, context_len] = plan_memory(d, context_len)
            self._weights_fit[key] = plan.weights_fit
            if plan.fits:
                self._longest_fit[key] = max(self._longest_fit.get(key, 0), context_len)
        return self._memory[key, context_len]

    def fits(self, key: LayoutKey, d: Deployment, context_len: int) -> bool:
        """plan_memory(d, context_len).fits, without a plan where the layout fits a context at least as long
        or its weights leave no KV budget at all: every engine's KV budget is the same at any context, and a
        sequence's blocks or tokens only grow with its length (tests/test_sizing_search_steps.py)."""
        if self._longest_fit.get(key, 0) >= context_len:
            return True
        if not self._weights_fit.get(key, True):
            return False
        return self.memory(key, d, context_len).fits

    def empty_iteration_ms(self, key: LayoutKey, d: Deployment) -> float:
        """planner.physics.latency.empty_iteration_ms (bound_steps computes it beside its table)."""
        if key not in self._empty:
            self._empty[key] = empty_iteration_ms(d)
        return self._empty[key]

    def prefill_ms(self, key: LayoutKey, d: Deployment, prompt_len: float) -> float:
        """prefill(d, [prompt_len]).total_ms: a prompt's work, a cached prefix's and a prefill worker's lone
        prompt all read it."""
        if (key, prompt_len) not in self._prefill:
            self._prefill[key, prompt_len] = float(np.asarray(prefill(d, [float(prompt_len)]).total_ms)[0])
        return self._prefill[key, prompt_len]

    def prefill_work_ms(self, key: LayoutKey, d: Deployment, prompt_len: float,
                        cached_tokens: float) -> float:
        """Prefill work of one prompt riding an iteration (planner.physics.latency.prefill_chunk_work_ms)."""
        if (key, prompt_len, cached_tokens) not in self._work:
            prefix, known = max(float(cached_tokens), 1.0), self._prefill
            if cached_tokens > 0 and (key, prefix) not in known and (key, prompt_len) not in known:
                # both lone prefills in one call (prefill is elementwise in the length: the same figures)
                both = np.asarray(prefill(d, [prefix, float(prompt_len)]).total_ms, dtype=float)
                self._prefill[key, prefix], self._prefill[key, prompt_len] = float(both[0]), float(both[1])

            def lone(lengths: npt.ArrayLike) -> np.ndarray:  # lengths: [prompt] or [cached prefix]
                return np.array([self.prefill_ms(key, d, float(np.asarray(lengths, dtype=float)[0]))])
            work = prefill_chunk_work_ms(d, [float(prompt_len)], [float(cached_tokens)],
                                         empty_ms=self.empty_iteration_ms(key, d), prefill_ms=lone)
            self._work[key, prompt_len, cached_tokens] = float(np.asarray(work)[0])
        return self._work[key, prompt_len, cached_tokens]

    def prefill_work_floor_ms(self, key: LayoutKey, d: Deployment, prompt_len: float,
                              cached_tokens: float, alltoall: bool = False) -> float:
        """A lower bound on prefill_work_ms: the figure itself where the memo holds it (or a prefix is
        cached), else the prompt's prefill bound (latency.prefill_floor_ms, `alltoall` as there) less the
        empty iteration, as the work is its prefill less that iteration (at least 0)."""
        if (key, prompt_len, cached_tokens) in self._work or cached_tokens > 0:
            return self.prefill_work_ms(key, d, prompt_len, cached_tokens)
        if (key, prompt_len) not in self._work_floor:
            empty = self.empty_iteration_ms(key, d)
            plain, alltoalls = prefill_floors_ms(d, prompt_len)
            self._work_floor[key, prompt_len] = max(plain - empty, 0.0), max(alltoalls - empty, 0.0)
        return self._work_floor[key, prompt_len][1 if alltoall else 0]

    def prefill_work(self, key: LayoutKey, d: Deployment) -> PrefillWork:
        """prefill_chunk_work_ms(d, prompts, cached) for the layout's replica models: a lone prompt's the
        memo's (the figure the cost floors use), a length grid's beside the memo's empty iteration."""
        def work(prompts: np.ndarray, cached: np.ndarray) -> np.ndarray:
            if np.shape(prompts) == np.shape(cached) == (1,):
                return np.array([self.prefill_work_ms(key, d, float(prompts[0]), float(cached[0]))])
            empty_ms = self.empty_iteration_ms(key, d)
            return np.asarray(prefill_chunk_work_ms(d, prompts, cached, empty_ms=empty_ms), dtype=float)
        return work

    def bound_steps(self, key: LayoutKey, d: Deployment, max_batch: int, context: float) -> StepTable:
        """(decoding populations, decode step ms at each) from 1 to the max batch, geometric; the empty
        iteration (batch 0 at context 1) rides the same call (decode_step is elementwise: the same
        figures as two calls)."""
        if (key, max_batch, context) not in self._steps:
            population = bound_population(max_batch)
            batch = np.concatenate([[0.0], population])
            contexts = np.concatenate([[1.0], np.full(len(population), float(context))])
            step_ms = np.asarray(decode_step(d, batch, contexts).total_ms, dtype=float)
            self._empty.setdefault(key, float(step_ms[0]))
            self._steps[key, max_batch, context] = population, step_ms[1:].copy()
        return self._steps[key, max_batch, context]


def bound_population(max_batch: int) -> npt.NDArray[np.float64]:
    """The decoding populations the goodput bound tabulates: 1 to the max batch, geometric."""
    return geometric_grid(1.0, max(float(max_batch), 1.0), BOUND_GRID)


def bound_steps(d: Deployment, max_batch: int, context: float) -> StepTable:
    """(decoding populations, decode step ms at each) from 1 to the max batch, geometric."""
    population = bound_population(max_batch)
    return population, np.asarray(decode_step(d, population, context).total_ms, dtype=float)
