"""Context tiers: what the same traffic costs when the engine must admit a longer maximum context
(e.g. 32k vs 128k vs 1M). A longer max context reserves more KV per sequence (vLLM admits a sequence
only if its whole max_model_len fits), so fewer sequences run at once, goodput per replica falls and the
fleet grows. Each tier is the sizing search (planner.serving.sizing.size, unchanged) with `context_len`
set to the tier; the answer per tier is its cheapest option and the KV figures behind it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from planner.contract.planning import plan
from planner.core.errors import ScenarioError, from_validation_error
from planner.scenario.scenario import model_position_limit, resolve_model
from planner.serving.request_bounds import check_work
from planner.serving.sizing import families, parse_sizing, size


class ContextTiersRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    sizing: dict[str, Any]
    context_lens: list[int] = Field(min_length=1, max_length=12)


def parse_context_tiers(data: Any) -> ContextTiersRequest:
    if not isinstance(data, dict):
        raise ScenarioError("request", "must be a JSON object")
    try:
        req = ContextTiersRequest.model_validate(data)
    except ValidationError as err:
        raise from_validation_error(err) from None
    for i, c in enumerate(req.context_lens):
        if not 1 <= c <= 100_000_000:
            raise ScenarioError(f"context_lens.{i}", "must be between 1 and 100,000,000")
    return req


def _position_limit(model: Any) -> tuple[int | None, str]:
    """The model's position limit and name (none when the model is not valid: the search names why)."""
    try:
        spec = resolve_model(model, "sizing.model")
    except ScenarioError:
        return None, ""
    return model_position_limit(spec), spec.name


def _refused(context: int, reason: str) -> dict[str, Any]:
    """A tier no option serves, and why."""
    return {"context_len": context, "feasible": False, "gpus_total": None, "usd_per_hour": None,
            "usd_per_million_output_tokens": None, "option": None, "reason": reason}


def context_tiers(data: Any) -> dict[str, Any]:
    req = parse_context_tiers(data)
    contexts = len(set(req.context_lens))
    try:  # one search per context over the same candidate lists: the sizing bound on them all (issue 32)
        check_work([families(parse_sizing({k: v for k, v in req.sizing.items() if k != "context_len"}))]
                   * contexts)
    except ScenarioError as err:
        field = err.field if err.field == "sizing" else f"sizing.{err.field}"
        raise ScenarioError(field, err.reason) from None
    tiers: list[dict[str, Any]] = []
    limit, model_name = _position_limit(req.sizing.get("model"))
    for i, context in enumerate(sorted(set(req.context_lens))):
        if limit is not None and context > limit:  # the engine refuses this max_model_len: no search
            tiers.append(_refused(context, f"context_len {context:,} is beyond {model_name}'s limit of "
                                  f"{limit:,} tokens (max_position_embeddings in its config.json)"))
            continue
        try:
            result = size({**req.sizing, "context_len": context, "max_options": 1})
        except ScenarioError as err:
            raise ScenarioError(f"context_lens.{i}" if err.field == "context_len" else f"sizing.{err.field}",
                                err.reason) from None
        if not result["options"]:
            tiers.append(_refused(context, "; ".join(f"{r['candidate']}: {r['reason']}"
                                                     for r in result["infeasible"][:3])
                                  or "no option meets the objectives"))
            continue
        o = result["options"][0]
        mem = plan(o["scenario"]).memory  # the chosen option at this tier: its KV per sequence and max batch
        tiers.append(
            {
                "context_len": context, "feasible": True, "gpus_total": o["gpus_total"],
                "replicas": o["replicas"], "usd_per_hour": o["usd_per_hour"],
                "usd_per_million_output_tokens": o["usd_per_million_output_tokens"],
                "max_batch": mem.max_batch,
                "kv_gb_per_sequence_per_gpu": mem.kv_bytes_per_sequence_per_gpu / 1e9,
                "kv_gib_per_sequence_per_gpu": mem.kv_bytes_per_sequence_per_gpu / 2**30,
                "option": {
                    k: o[k]
                    for k in (
                        "gpu", "tp", "pp", "ep", "weights", "kv_cache", "batch", "gpus_per_replica",
                        "goodput_request_rate",
                    )
                },
            }
        )
    base = next((t for t in tiers if t["feasible"]), None)
    for t in tiers:
        t["usd_vs_shortest"] = (t["usd_per_hour"] / base["usd_per_hour"]
                                if base is not None and t["feasible"] else None)
    return {
        "tiers": tiers,
        "assumptions": {
            "kv": "each sequence reserves KV for the tier's whole context (the engine's max_model_len): max "
            "batch "
            "= KV budget / KV per sequence at the tier",
            "traffic": "the same traffic and objectives at every tier (prompts and outputs as given)",
        },
    }
