"""What would fit, when a deployment does not: the smallest TP, the weight/KV precisions that fit at this
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
class FitAlternatives:
    smallest_tp: int | None
    precisions: list[tuple[str, str]]  # (weights, kv_cache) that fit at this TP
    gpus: list[str]  # catalog ids where this TP and precision fit


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
    precisions = [(w, k) for w in _OFFERED_WEIGHTS for k in _OFFERED_KV
                  if (w, k) != (s.weights, s.kv_cache) and _fits({**data, "weights": w, "kv_cache": k})]
    gpus = [gpu_id for gpu_id in load_catalog() if gpu_id != data.get("gpu")
            and _fits({**{k: v for k, v in data.items() if k != "usd_per_gpu_hour"}, "gpu": gpu_id})]
    return FitAlternatives(smallest_tp=tp, precisions=precisions, gpus=gpus)


__all__ = ["FitAlternatives", "fit_alternatives"]
