"""One profile record per engine x GPU generation (issue 30, item 5).

A record (planner/data/engine_profiles.json, `engines.<engine>.production.<generation>`, written by
tools/fit_production_engines.py) holds the fitted terms, what they were fitted on (models, architecture
families, GPUs, runs), and the held-out bands of that same fit:
- `band`: the 10th-90th percentile of the held-out residuals (predicted / measured - 1) of TPOT and TTFT,
  from leaving one GPU out within the group (else one model), for plans of a family the record was fitted on;
- `lofo_band`: the same from leaving one architecture family out across the engine's records, for plans of a
  family outside the record's fit: the plan then says "extrapolated".
The plan reads its estimate and its band from the same record.
"""

from __future__ import annotations

from typing import Any

from planner.core.model_shapes import ModelSpec
from planner.engines.profiles import gpu_generation, profiles

EXTRAPOLATED = "extrapolated"
# named families (issue 30's list); any other model falls back to its shape class
_NAMED = (("deepseek", "deepseek-mla-moe"), ("kimi", "deepseek-mla-moe"), ("gpt-oss", "gpt-oss"),
          ("llama-4", "llama4-moe"), ("llama", "llama-dense"), ("minimax", "minimax-moe"), ("glm", "glm-moe"))


def architecture_family(model: ModelSpec | str) -> str:
    """A model's architecture family: the layers it shares with other models (its name's family where the name
    says, else its shape: MLA or not, MoE or dense)."""
    name = (model if isinstance(model, str) else model.name).lower()
    if name.startswith("qwen3"):
        moe = "-a" in name and name.rsplit("-a", 1)[-1].split("b")[0].replace(".", "").isdigit()
        if not isinstance(model, str):
            moe = model.moe is not None
        return "qwen3-moe" if moe else "qwen3-dense"
    for prefix, family in _NAMED:
        if name.startswith(prefix):
            return family
    if isinstance(model, str):
        return name
    return f"{'mla-' if model.mla is not None else ''}{'moe' if model.moe is not None else 'dense'}"


def record(engine: str, gpu_id: str | None) -> dict[str, Any] | None:
    """The engine's record on the GPU's generation, None where it has none (no public runs there)."""
    generation = gpu_generation(gpu_id)
    if generation is None:
        return None
    return profiles()["engines"].get(engine, {}).get("production", {}).get(generation)


def band_quantiles(engine: str, gpu_id: str | None, model: ModelSpec,
                   metric: str) -> tuple[dict[str, float] | None, str]:
    """The held-out quantiles {q10, q90, n} of `metric` ("tpot" or "ttft") for a plan of `model` on the
    record, and whether the model's family was in the record's fit ("fitted family") or not ("extrapolated":
    the leave-one-family-out band). (None, reason) where the record has no band."""
    rec = record(engine, gpu_id)
    if rec is None or "fitted_on" not in rec:
        return None, "no record"
    inside = architecture_family(model) in rec["fitted_on"]["families"]
    band = (rec.get("band") if inside else rec.get("lofo_band")) or {}
    return band.get(metric), ("fitted family" if inside else EXTRAPOLATED)
