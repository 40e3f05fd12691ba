"""Ridgeline's vLLM memory rules against public vLLM start-up logs (data/reference/vllm_startup_logs.csv).

    python -m tools.vllm_log_accuracy     # prints each row's error and the tuning / held-out summary

Nothing is fitted per case: each row is planned with the rules of its vLLM version, its GPU's total
(the logged framework total when the log prints one, else the catalog), TP, utilization, batched
tokens and max_num_seqs. The KV budget target: within 3% or 0.75 GiB, whichever is larger; the KV
token count is checked from the logged budget (block rounding and groups) within 3%.
"""

from __future__ import annotations

import csv
import json
import statistics
from dataclasses import dataclass
from pathlib import Path

from gpu_catalog import GpuSpec, load_catalog
from planner.core.deployment import Deployment
from planner.core.efficiency import ideal
from planner.core.model_shapes import ModelSpec
from planner.engines.base import DEFAULT_BLOCK_SIZE, DRIVER_RESERVED_GIB, GIB
from planner.engines.vllm import VLLM_RULES_VERSION, plan_engine_memory
from planner.engines.vllm_kv_cache import kv_tokens_and_concurrency
from planner.model.hf_import import model_from_hf_config
from planner.model.presets import load_presets

CSV_PATH = Path(__file__).resolve().parents[1] / "data" / "reference" / "vllm_startup_logs.csv"
GPU_IDS = {"H100 80GB": "h100-sxm", "H200 141GB": "h200", "A100 80GB": "a100-sxm-80gb", "L40S 48GB": "l40s"}
BUDGET_REL, BUDGET_ABS_GIB, TOKENS_REL = 0.03, 0.75, 0.03


@dataclass(frozen=True)
class RowResult:
    id: str
    split: str
    known_gap: str
    budget_logged_gib: float | None
    budget_model_gib: float | None
    weights_logged_gib: float | None
    weights_model_gib: float | None
    tokens_logged: int | None
    tokens_model: int | None  # from the logged budget: the block arithmetic alone
    tokens_predicted: int | None = None  # from the planner's own budget: the figure a user reads
    activation_model_gib: float | None = None  # the profiling peak the release's rules give
    concurrency_logged: float | None = None
    concurrency_predicted: float | None = None  # "Maximum concurrency for L tokens per request: C x"

    @property
    def concurrency_error(self) -> float | None:
        if not self.concurrency_logged or self.concurrency_predicted is None:
            return None
        return self.concurrency_predicted / self.concurrency_logged - 1.0

    @property
    def tokens_predicted_error(self) -> float | None:
        if not self.tokens_logged or self.tokens_predicted is None:
            return None
        return self.tokens_predicted / self.tokens_logged - 1.0

    @property
    def budget_error_gib(self) -> float | None:
        if self.budget_logged_gib is None or self.budget_model_gib is None:
            return None
        return self.budget_model_gib - self.budget_logged_gib

    @property
    def budget_ok(self) -> bool | None:
        err = self.budget_error_gib
        if err is None:
            return None
        return abs(err) <= max(BUDGET_REL * abs(self.budget_logged_gib or 0.0), BUDGET_ABS_GIB)

    @property
    def tokens_error(self) -> float | None:
        if not self.tokens_logged or self.tokens_model is None:
            return None
        return self.tokens_model / self.tokens_logged - 1.0


def load_rows() -> list[dict[str, str]]:
    with CSV_PATH.open() as f:
        return list(csv.DictReader(f))


def _num(text: str) -> float | None:
    return float(text) if text.strip() else None


FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "hf_configs"


def model_for(ref: str) -> ModelSpec:
    """A preset id, or "hf:<file>" for a checkpoint planned from its config.json fixture
    (tests/fixtures/hf_configs)."""
    if ref.startswith("hf:"):
        return model_from_hf_config(json.loads((FIXTURES / f"{ref[3:]}.json").read_text()))
    return load_presets()[ref]


def gpu_for(row: dict[str, str]) -> GpuSpec | None:
    total = _num(row["framework_total_gib"])
    gpu_id = GPU_IDS.get(row["gpu"])
    catalog = load_catalog()[gpu_id] if gpu_id else None
    if total is not None:  # the log prints torch's total: give the planner the device figure it comes from
        return GpuSpec(name=row["gpu"], memory_gb=(total + DRIVER_RESERVED_GIB) * GIB / 1e9, hbm_tb_s=1.0,
                       tflops={"bf16": 1.0}, scale_up_domain=catalog.scale_up_domain if catalog else None)
    return catalog


def _int(text: str) -> int | None:
    return int(text) if text.strip() else None


# Ranks that print a budget other than the one that sets the cache (the engine sizes every rank's cache by
# the smallest budget): a V0 rank other than the driver (no sampler), the first of several pipeline stages
# (no sampler, no LM head). Their budget is not compared; the token line, the binding rank's, is.
NON_BINDING_RANKS = ("non-driver", "first-stage")


def evaluate_row(row: dict[str, str]) -> RowResult:
    model = model_for(row["model"])
    if row.get(
        "max_position_embeddings", ""
    ).strip():  # the logged checkpoint's config differs from the preset's
        model = model.model_copy(update={"max_position_embeddings": int(row["max_position_embeddings"])})
    tp, pp = int(row["tp"]), int(row.get("pp") or 1)
    budget_logged = _num(row["logged_kv_gib"])
    tokens_logged = _int(row["logged_kv_tokens"])
    if not tokens_logged and row["logged_gpu_blocks"]:
        tokens_logged = int(row["logged_gpu_blocks"]) * 16
    gpu = gpu_for(row)
    budget_model = weights_model = concurrency_predicted = activation_model = None
    tokens_predicted = None
    mml = _int(row["max_model_len"])
    version = row["vllm_version"] or VLLM_RULES_VERSION
    seqs = _int(row["max_num_seqs"])
    mnbt = _int(row["max_num_batched_tokens"]) or default_max_num_batched_tokens(gpu)
    binding = row.get("budget_rank", "") not in NON_BINDING_RANKS
    if gpu is not None and row["utilization"]:
        d = Deployment(model=model, gpu=gpu, tp=tp, weights=row["weights"], kv_cache=row["kv_cache"],
                       compute="bf16", efficiency=ideal(), memory_utilization=float(row["utilization"]),
                       reserve_gb=None, pp=pp, engine="vllm", block_size=DEFAULT_BLOCK_SIZE,
                       max_num_batched_tokens=mnbt)
        e = plan_engine_memory(
            d, mml or 4096, mnbt, DEFAULT_BLOCK_SIZE, max_num_seqs=seqs, vllm_version=version
        )
        budget_model, weights_model = e.kv_budget_gib, e.model_loading_gib
        tokens_predicted, concurrency_predicted = e.kv_cache_tokens, e.max_concurrency
        activation_model = e.activation_peak_gib
    elif gpu is not None or row["weights"]:
        d = Deployment(model=model, gpu=gpu or load_catalog()["h100-sxm"], tp=tp, weights=row["weights"],
                       kv_cache=row["kv_cache"], compute="bf16", efficiency=ideal(), memory_utilization=0.9,
                       reserve_gb=None, pp=pp, engine="vllm", block_size=DEFAULT_BLOCK_SIZE,
                       max_num_batched_tokens=mnbt)
        weights_model = plan_engine_memory(
            d, mml or 4096, mnbt, DEFAULT_BLOCK_SIZE, vllm_version=version
        ).model_loading_gib
    tokens_from_logged = None
    if row["tokens_checkable"] == "yes" and budget_logged is not None and mml:
        _, tokens_from_logged, _, _, _ = kv_tokens_and_concurrency(
            model, tp, row["kv_cache"], budget_logged, DEFAULT_BLOCK_SIZE, mml, mnbt
        )
    return RowResult(
        id=row["id"], split=row["split"], known_gap=row["known_gap"],
        budget_logged_gib=budget_logged if row["utilization"] and gpu is not None and binding else None,
        budget_model_gib=budget_model,
        weights_logged_gib=_num(row["logged_weights_gib"]) if binding else None,
        weights_model_gib=weights_model, tokens_logged=tokens_logged,
        tokens_model=tokens_from_logged if row["tokens_checkable"] == "yes" else None,
        tokens_predicted=tokens_predicted if mml else None,
        concurrency_logged=_num(row["logged_concurrency"]) if mml else None,
        concurrency_predicted=concurrency_predicted if mml else None, activation_model_gib=activation_model,
    )


def default_max_num_batched_tokens(gpu: GpuSpec | None) -> int:
    """`vllm serve`'s default when the thread does not print it: 8192 on GPUs of 70 GiB or more, else 2048
    (vLLM `_set_default_args`; V0 without chunked prefill profiles max_model_len, given in its rows)."""
    if gpu is None:
        return 8192
    return 8192 if gpu.memory_gb * 1e9 / GIB - DRIVER_RESERVED_GIB >= 70 else 2048


def evaluate() -> list[RowResult]:
    return [evaluate_row(row) for row in load_rows()]


def summary(results: list[RowResult], split: str) -> dict[str, float | int | None]:
    rows = [r for r in results if r.split == split]
    budget = [abs(r.budget_error_gib) for r in rows if r.budget_error_gib is not None]
    budget_rel = [abs(r.budget_error_gib) / abs(r.budget_logged_gib) for r in rows
                  if r.budget_error_gib is not None and r.budget_logged_gib]
    tokens = [abs(r.tokens_error) for r in rows if r.tokens_error is not None]
    predicted = [abs(r.tokens_predicted_error) for r in rows if r.tokens_predicted_error is not None]
    concurrency = [abs(r.concurrency_error) for r in rows if r.concurrency_error is not None]
    return {
        "rows": len(rows), "budget_rows": len(budget),
        "budget_within_target": sum(1 for r in rows if r.budget_ok),
        "budget_median_abs_gib": statistics.median(budget) if budget else None,
        "budget_max_abs_gib": max(budget) if budget else None,
        "budget_median_rel": statistics.median(budget_rel) if budget_rel else None, "token_rows": len(tokens),
        "tokens_median_rel": statistics.median(tokens) if tokens else None,
        "tokens_max_rel": max(tokens) if tokens else None, "predicted_token_rows": len(predicted),
        "predicted_tokens_within_target": sum(1 for x in predicted if x <= TOKENS_REL),
        "predicted_tokens_median_rel": statistics.median(predicted) if predicted else None,
        "predicted_tokens_max_rel": max(predicted) if predicted else None,
        "concurrency_rows": len(concurrency),
        "concurrency_within_target": sum(1 for x in concurrency if x <= TOKENS_REL),
        "concurrency_median_rel": statistics.median(concurrency) if concurrency else None,
    }


def main() -> None:
    results = evaluate()
    for r in results:
        err = r.budget_error_gib
        print(
            f"{r.id:36s} {r.split:8s} budget "
            f"{r.budget_model_gib if r.budget_model_gib is None else round(r.budget_model_gib, 2)}"
            f" vs {r.budget_logged_gib} (err {None if err is None else round(err, 2)} GiB, ok={r.budget_ok})"
            f" weights {None if r.weights_model_gib is None else round(r.weights_model_gib, 2)} vs "
            f"{r.weights_logged_gib}"
            f" tokens {r.tokens_model} (predicted {r.tokens_predicted}) vs {r.tokens_logged} {r.known_gap}"
        )
    for split in ("tuning", "held-out"):
        print(split, summary(results, split))
        covered = [r for r in results if r.split == split and not r.known_gap]
        print(split, "without known gaps", summary(covered, split))


if __name__ == "__main__":
    main()
