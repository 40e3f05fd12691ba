"""Engine profiles: the GPU's own step time ("graph") and each serving engine's overhead on top.

Two layers (issue 10). The *physics* is what a compiled step costs on the GPU: fractions of the
datasheet bandwidth and tensor peak that the kernels reach, a per-layer kernel cost inside a CUDA
graph, the all-reduce latency and bus bandwidth. It was fitted on our own measurements of compiled
steps (data/measurements/*physics*.json, tools/fit_engines.py) and applies to every engine. An
*engine profile* adds what a serving stack costs beyond that: scheduling, sampling and Python per
decode step, a fixed cost per prefill, and the serving time before the first token. Each profile is
fitted only on public measurements of that engine (`sources` in planner/data/engine_profiles.json).
"graph" adds nothing: it is the floor a plan shows beside its estimate.
"""

from __future__ import annotations

import copy
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from gpu_catalog import load_catalog
from planner.core.deployment import Deployment
from planner.core.efficiency import EngineEfficiency
from planner.engines.base import DEFAULT_ENGINE, ENGINES

PROFILES_PATH = Path(__file__).parent.parent / "data" / "engine_profiles.json"
# What an engine profile may set on top of the physics: serving-stack costs only.
ENGINE_TERMS = ("step_overhead_us", "prefill_overhead_ms", "ttft_overhead_ms")


@lru_cache(maxsize=1)
def gpu_generations() -> dict[str, str]:
    """GPU generation of each catalog GPU (gpu_catalog/gpus.toml `generation`): production engine profiles are
    fitted per engine x generation (issue 20), since an engine ships different kernels for each
    (FlashInfer/CUTLASS on Hopper, TRT-LLM gen kernels and NVFP4 on Blackwell, AITER on CDNA)."""
    return {gpu_id: g.generation for gpu_id, g in load_catalog().items() if g.generation is not None}


@lru_cache(maxsize=1)
def profiles() -> dict[str, Any]:
    return json.loads(PROFILES_PATH.read_text())


def physics_values(gpu_id: str | None = None) -> dict[str, float]:
    """The graph physics constants, with a GPU's own values where it was measured apart."""
    data = profiles()["physics"]
    values = dict(data["efficiency"])
    if gpu_id is not None:
        values.update(data.get("per_gpu", {}).get(gpu_id, {}))
    return values


def gpu_generation(gpu_id: str | None) -> str | None:
    return None if gpu_id is None else gpu_generations().get(gpu_id)


def production_terms(engine: str, gpu_id: str | None, weights: str | None = None) -> dict[str, float]:
    """The terms fitted on public runs of `engine` on the GPU's generation (tools/fit_production_engines.py),
    with the weight precision's streaming efficiency; none for a generation without runs. A term the runs
    cannot pin takes the value the record holds it at (`held`: a measured or published figure, issue 30)."""
    fitted = profiles()["engines"][engine].get("production", {}).get(gpu_generation(gpu_id) or "", {})
    held = fitted.get("held", {})
    terms = {k: v for k, v in held.items() if ":" not in k}
    terms.update(fitted.get("terms", {}))
    if weights is not None:
        terms.update({k.split(":")[1]: v for k, v in held.items() if k.split(":")[0] == weights and ":" in k})
        terms.update(fitted.get("weights", {}).get(weights, {}))
    return terms


def engine_efficiency(engine: str, gpu_id: str | None = None, weights: str | None = None) -> EngineEfficiency:
    """The physics plus `engine`'s serving overheads, and its production terms where public runs of it on
    this GPU generation were fitted, as one EngineEfficiency named after the engine (a copy of its own:
    the profiles file is read once, and a sizing request resolves thousands of layouts)."""
    return _engine_efficiency(engine, gpu_id, weights).model_copy()


@lru_cache(maxsize=512)
def _engine_efficiency(engine: str, gpu_id: str | None, weights: str | None) -> EngineEfficiency:
    if engine not in ENGINES:
        raise ValueError(f"unknown engine '{engine}' (known: {', '.join(ENGINES)})")
    overheads = profiles()["engines"][engine].get("overheads", {})
    record = profiles()["engines"][engine].get("production", {}).get(gpu_generation(gpu_id) or "", {})
    # issue 30: the record's MoE prefill takes the routed experts from the engine's kernel tables
    tables = {"prefill_moe_from_tables": 1.0} if record.get("prefill_moe_from_tables") else {}
    return EngineEfficiency(
        **{**physics_values(gpu_id), **overheads, **production_terms(engine, gpu_id, weights), **tables,
           "name": engine}
    )


def default_engine(gpu_id: str | None = None) -> EngineEfficiency:
    """The default engine of a scenario (`engine` left out): the vLLM profile over the graph physics."""
    return engine_efficiency(DEFAULT_ENGINE, gpu_id)


def with_efficiency(d: Deployment, efficiency: EngineEfficiency) -> Deployment:
    """The same deployment under another efficiency (the plan's floor), keeping its resolved parameter
    counts: a copy, not dataclasses.replace, which would count them again."""
    other = copy.copy(d)
    object.__setattr__(other, "efficiency", efficiency)
    return other


def is_engine_profile(efficiency: EngineEfficiency) -> bool:
    return efficiency.name in ENGINES


def engines_listing() -> list[dict[str, Any]]:
    """`python -m planner engines`: every profile with its values, evidence and validation."""
    data = profiles()
    out = []
    for name in ENGINES:
        entry = data["engines"][name]
        out.append({
            "engine": name, "default": name == DEFAULT_ENGINE, "description": entry["description"],
            "overheads": entry.get("overheads", {}), "public_rows": entry.get("public_rows", []),
            "public_rows_role": entry.get("public_rows_role", ""), "validation": entry.get("validation", {}),
            "physics": physics_values(),
            # issue 20: terms per GPU generation fitted on public serving runs, their runs and held-out errors
            "production": entry.get("production", {}),
            "production_validation": entry.get("production_validation", {}),
            "production_source": data.get("production_sources", ""),
        })
    return out


def physics_evidence() -> dict[str, Any]:
    data = profiles()["physics"]
    return {
        "measurements": data["measurements"], "evidence": data["evidence"],
        "validation": data.get("validation", {}),
    }
