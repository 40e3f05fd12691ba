"""Sizing: the cheapest fleets that serve a traffic target within TTFT and ITL objectives.

Search space: candidate GPUs x TP x weight precision x KV precision (a "family") x batch. Per family
the batch grid is evaluated at once (numpy), so thousands of configurations take well under a second.

Load model (stated in README "Sizing assumptions"):
  * Continuous batching with chunked prefill. A replica at concurrency `batch` decodes at the plan's
    ITL(batch); prefills of arriving requests take a share rho_p = lambda_r * prefill_s of its time, so
    decoding slows to ITL / (1 - rho_p) ("ITL under load") and its throughput falls by (1 - rho_p).
  * Replicas = ceil(traffic tokens/s / per-replica decode throughput under load).
  * TTFT under load: arrivals are Poisson and prefills are served one at a time in arrival order, an
    M/D/1 queue with deterministic service S = prefill_ms: mean wait W = rho S / (2 (1 - rho)). The
    prefill itself rides along decode steps in chunks of `chunk_tokens`, each chunk adding one decode
    step: TTFT = W + prefill_ms + ceil(prompt / chunk) * ITL(batch) + serving overhead.
  * Cost: $/hour = GPUs x $/GPU-hour (rented, or owned: planner.ownership), and $ per million output
    tokens at the traffic actually served.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gpu_catalog import load_catalog
from planner.errors import ScenarioError, from_validation_error
from planner.latency import decode_step, prefill, ttft_ms
from planner.memory import plan_memory
from planner.ownership import OwnershipCosts, owned_usd_per_gpu_hour
from planner.precision import KvPrecision, WeightPrecision
from planner.scenario import MemorySettings, Scenario, resolve, resolve_gpu, resolve_model
from planner.sweep import batch_grid

DEFAULT_TP = [1, 2, 4, 8]
DEFAULT_WEIGHTS: list[WeightPrecision] = ["bf16", "fp8", "int4"]
DEFAULT_KV: list[KvPrecision] = ["bf16", "fp8"]
CHUNK_TOKENS = 2048  # vLLM V1's default max_num_batched_tokens for chunked prefill (online serving)


class Traffic(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    requests_per_s: float = Field(gt=0, le=1e7)
    prompt_len: int = Field(ge=1, le=10_000_000)
    output_len: int = Field(ge=1, le=10_000_000)


class Slo(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    ttft_ms: float = Field(gt=0, le=1e7)
    itl_ms: float = Field(gt=0, le=1e7)


class SizingRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    model: str | dict[str, Any]
    traffic: Traffic
    slo: Slo
    gpus: list[str | dict[str, Any]] | None = Field(default=None, min_length=1, max_length=100)
    tp: list[int] = Field(default_factory=lambda: list(DEFAULT_TP), min_length=1, max_length=16)
    weights: list[WeightPrecision] = Field(default_factory=lambda: list(DEFAULT_WEIGHTS), min_length=1)
    kv_cache: list[KvPrecision] = Field(default_factory=lambda: list(DEFAULT_KV), min_length=1)
    context_len: int | None = Field(default=None, ge=1, le=100_000_000)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    efficiency: Literal["ideal", "default"] | dict[str, Any] = "default"
    usd_per_gpu_hour: dict[str, Annotated[float, Field(ge=0.0001, le=10_000)]] | None = Field(default=None, max_length=1000)
    # extensions
    cost_mode: Literal["rent", "own"] = "rent"
    ownership: OwnershipCosts | None = None
    max_options: int = Field(default=200, ge=1, le=100_000)


@dataclass(frozen=True)
class _Family:
    gpu_key: str
    gpu_value: str | dict[str, Any]
    tp: int
    weights: str
    kv_cache: str


def parse_sizing(data: Any) -> SizingRequest:
    if not isinstance(data, dict):
        raise ScenarioError("sizing", "must be a JSON object")
    try:
        req = SizingRequest.model_validate(data)
    except ValidationError as err:
        raise from_validation_error(err) from None
    for i, tp in enumerate(req.tp):
        if tp < 1 or tp > 1024:
            raise ScenarioError(f"tp.{i}", "must be between 1 and 1024")
    context = req.context_len or req.traffic.prompt_len + req.traffic.output_len
    if context < req.traffic.prompt_len + req.traffic.output_len:
        raise ScenarioError("context_len", "is shorter than traffic.prompt_len + traffic.output_len")
    resolve_model(req.model)
    for i, gpu in enumerate(req.gpus or []):
        resolve_gpu(gpu, f"gpus.{i}")
    for gpu_id, price in (req.usd_per_gpu_hour or {}).items():
        if not price > 0:
            raise ScenarioError(f"usd_per_gpu_hour.{gpu_id}", "must be a positive price")
    return req


def _gpu_price(req: SizingRequest, gpu_key: str, gpu_value: Any) -> tuple[float | None, float | None]:
    """(rent $/GPU-hour, own $/GPU-hour or None)."""
    spec, _ = resolve_gpu(gpu_value)
    rent = (req.usd_per_gpu_hour or {}).get(gpu_key) or spec.usd_per_hour
    own = owned_usd_per_gpu_hour(gpu_key, spec, req.ownership) if req.cost_mode == "own" else None
    return rent, own


def _families(req: SizingRequest) -> list[_Family]:
    gpus = req.gpus if req.gpus is not None else list(load_catalog())
    out = []
    for gpu in gpus:
        key = gpu if isinstance(gpu, str) else str(gpu.get("name", "custom"))
        for tp in req.tp:
            for w in req.weights:
                for kv in req.kv_cache:
                    out.append(_Family(key, gpu, tp, w, kv))
    return out


def _scenario_for(req: SizingRequest, fam: _Family, batch: int | None = None) -> dict[str, Any]:
    s: dict[str, Any] = {
        "model": req.model, "gpu": fam.gpu_value, "tp": fam.tp, "weights": fam.weights, "kv_cache": fam.kv_cache,
        "context_len": req.context_len or req.traffic.prompt_len + req.traffic.output_len,
        "prompt_len": req.traffic.prompt_len, "output_len": req.traffic.output_len,
        "memory": req.memory.model_dump(), "efficiency": req.efficiency,
    }
    if req.usd_per_gpu_hour and fam.gpu_key in req.usd_per_gpu_hour:
        s["usd_per_gpu_hour"] = req.usd_per_gpu_hour[fam.gpu_key]
    if batch is not None:
        s["batch"] = int(batch)
    return s


def mdl_wait_ms(arrival_per_ms: npt.ArrayLike, service_ms: float) -> npt.NDArray[np.float64]:
    """Mean wait in an M/D/1 queue (Pollaczek-Khinchine with deterministic service)."""
    rho = np.asarray(arrival_per_ms, dtype=float) * service_ms
    with np.errstate(divide="ignore", invalid="ignore"):
        wait = np.where(rho < 1, rho * service_ms / (2 * (1 - rho)), np.inf)
    return wait


def pareto_mask(cost: npt.NDArray[np.float64], latency: npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:
    """True where no other point is at least as good on both and better on one (lower is better)."""
    order = np.lexsort((latency, cost))
    mask = np.zeros(len(cost), dtype=bool)
    best_latency = np.inf
    for i in order:
        if latency[i] < best_latency:
            mask[i] = True
            best_latency = latency[i]
    return mask


def size(data: Any) -> dict[str, Any]:
    req = data if isinstance(data, SizingRequest) else parse_sizing(data)
    t = req.traffic
    demand_tokens_per_s = t.requests_per_s * t.output_len
    mean_ctx = t.prompt_len + t.output_len / 2
    rows: list[dict[str, Any]] = []
    infeasible: list[dict[str, str]] = []
    searched = 0

    for fam in _families(req):
        label = f"{fam.gpu_key} tp{fam.tp} {fam.weights}/{fam.kv_cache}"
        try:
            scenario = Scenario.model_validate(_scenario_for(req, fam))
            d = resolve(scenario)
        except (ScenarioError, ValidationError) as err:
            reason = f"{err.field}: {err.reason}" if isinstance(err, ScenarioError) else str(err).splitlines()[0]
            infeasible.append({"candidate": label, "reason": reason})
            continue
        mem = plan_memory(d, scenario.context_len_resolved)
        if not mem.fits:
            infeasible.append({"candidate": label, "reason": f"weights ({mem.weights_gb_per_gpu:.1f} GB/GPU) and one "
                               f"sequence do not fit in {d.gpu.name} memory"})
            continue
        batches = batch_grid(mem.max_batch)
        batches = batches[batches <= mem.max_batch]
        searched += len(batches)
        itl = np.asarray(decode_step(d, batches, mean_ctx).total_ms)
        prefill_ms = float(prefill(d, t.prompt_len).total_ms)
        # prefill share of each replica's time, at the replica count this batch needs
        tput = batches * 1000.0 / itl
        # replicas r solves r * tput * (1 - lambda/r * prefill_s) >= demand  ->  r >= demand/tput + lambda*prefill_s
        replicas = np.ceil(demand_tokens_per_s / tput + t.requests_per_s * prefill_ms / 1000.0 + 1e-9)
        lam_r_per_ms = t.requests_per_s / replicas / 1000.0
        rho_p = lam_r_per_ms * prefill_ms
        itl_load = itl / np.maximum(1.0 - rho_p, 1e-9)
        chunks = math.ceil(t.prompt_len / CHUNK_TOKENS)
        ttft_load = mdl_wait_ms(lam_r_per_ms, prefill_ms) + ttft_ms(d, prefill_ms) + chunks * itl
        ok = (itl_load <= req.slo.itl_ms) & (ttft_load <= req.slo.ttft_ms) & (rho_p < 1)
        if not ok.any():
            why = []
            if (itl > req.slo.itl_ms).all():
                why.append(f"ITL at batch 1 is {itl[0]:.1f} ms > {req.slo.itl_ms:g} ms")
            if (ttft_load > req.slo.ttft_ms).all():
                why.append(f"TTFT is at least {np.min(ttft_load):.0f} ms > {req.slo.ttft_ms:g} ms")
            infeasible.append({"candidate": label, "reason": "; ".join(why) or "no batch meets both objectives"})
            continue
        rent, own = _gpu_price(req, fam.gpu_key, fam.gpu_value)
        price = own if req.cost_mode == "own" else rent
        if price is None:
            infeasible.append({"candidate": label, "reason": "no price: give usd_per_gpu_hour for this GPU"})
            continue
        for i in np.nonzero(ok)[0]:
            r = int(replicas[i])
            usd_per_hour = r * fam.tp * price
            rows.append({
                "gpu": fam.gpu_key, "tp": fam.tp, "weights": fam.weights, "kv_cache": fam.kv_cache,
                "batch": int(batches[i]), "replicas": r, "gpus_total": r * fam.tp,
                "ttft_ms": float(ttft_load[i]), "itl_ms": float(itl[i]), "itl_ms_under_load": float(itl_load[i]),
                "output_tokens_per_s": float(tput[i]), "usd_per_hour": usd_per_hour,
                "usd_per_million_output_tokens": usd_per_hour / (demand_tokens_per_s * 3600.0) * 1e6,
                "usd_per_gpu_hour": price, "rent_usd_per_gpu_hour": rent, "own_usd_per_gpu_hour": own,
                "prefill_share": float(rho_p[i]),
                "scenario": _scenario_for(req, fam, int(batches[i])),
            })

    rows.sort(key=lambda r: (r["usd_per_hour"], r["itl_ms"]))
    if rows:
        mask = pareto_mask(np.array([r["usd_per_hour"] for r in rows]), np.array([r["itl_ms"] for r in rows]))
        for row, on in zip(rows, mask, strict=True):
            row["pareto"] = bool(on)
    return {
        "searched": searched,
        "feasible": len(rows),
        "options": rows[: req.max_options],
        "infeasible": infeasible,
        "assumptions": {"chunk_tokens": CHUNK_TOKENS, "queue": "M/D/1 prefill queue per replica, Poisson arrivals",
                        "cost_mode": req.cost_mode,
                        "engine": "default engine calibrated on NVIDIA GPUs; other vendors' options assume the same "
                                  "fraction of peak (calibrate them)",
                        "prices": "catalog reference prices; several are estimates (see `python -m planner gpus` sources)"},
    }
