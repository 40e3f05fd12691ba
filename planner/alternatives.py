"""What would fit, when a deployment does not (until the plan's own `fit_alternatives` section, issue 9.7,
is on this branch; the page prefers the plan's): the smallest TP, the weight/KV precisions that fit at this
TP, and the catalog GPUs where it fits at this TP and precision. Memory only (the cheapest test: the
weights and one full-length sequence within the KV budget), so the page can offer each as one click."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpu_catalog import load_catalog
from planner.errors import ScenarioError
from planner.memory import plan_memory
from planner.planning import smallest_tp_that_fits
from planner.precision import KV_PRECISIONS, WEIGHT_PRECISIONS
from planner.scenario import Scenario, parse_scenario, resolve

# precisions worth offering, most accurate first (fp32/fp16 never rescue a bf16 deployment)
_OFFERED_WEIGHTS: list[str] = [w for w in ("bf16", "fp8", "int8", "int4", "fp4") if w in WEIGHT_PRECISIONS]
_OFFERED_KV: list[str] = [k for k in ("bf16", "fp8", "int8", "int4") if k in KV_PRECISIONS]


@dataclass(frozen=True)
class PrecisionChoice:
    weights: str
    kv_cache: str


@dataclass(frozen=True)
class GpuChoice:
    gpu: str  # catalog id
    tp: int  # the smallest TP at which it fits on that GPU


@dataclass(frozen=True)
class FitAlternatives:
    smallest_tp: int | None
    precisions: list[PrecisionChoice]  # that fit at this TP
    gpus: list[GpuChoice]  # catalog GPUs where this precision fits, each at its smallest TP


def _fits(data: dict[str, Any]) -> bool:
    try:
        s = parse_scenario(data)
        return plan_memory(resolve(s), s.context_len_resolved).fits
    except ScenarioError:
        return False  # e.g. fp8 weights on a GPU without fp8 tensor cores


def fit_alternatives(scenario: Scenario | dict[str, Any]) -> FitAlternatives:
    data = scenario.model_dump(exclude_none=True) if isinstance(scenario, Scenario) else dict(scenario)
    s = parse_scenario(data)
    d = resolve(s)
    context = s.context_len_resolved
    tp = smallest_tp_that_fits(d, context)
    data.pop("compute", None)  # let each precision pick its own compute precision
    precisions = [PrecisionChoice(w, k) for w in _OFFERED_WEIGHTS for k in _OFFERED_KV
                  if (w, k) != (s.weights, s.kv_cache) and _fits({**data, "weights": w, "kv_cache": k})]
    base = {k: v for k, v in data.items() if k != "usd_per_gpu_hour"}
    gpus = []
    for gpu_id in load_catalog():
        if gpu_id == data.get("gpu"):
            continue
        for trial_tp in (1, 2, 4, 8, 16, 32, 64):
            if _fits({**base, "gpu": gpu_id, "tp": trial_tp}):
                gpus.append(GpuChoice(gpu_id, trial_tp))
                break
    return FitAlternatives(smallest_tp=tp, precisions=precisions, gpus=gpus)


__all__ = ["FitAlternatives", "GpuChoice", "PrecisionChoice", "fit_alternatives"]
