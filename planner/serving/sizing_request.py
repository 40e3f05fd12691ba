"""The sizing request (the contract's `size` input; planner.serving.sizing searches it): the traffic, the
objective, the candidate GPUs, layouts and precisions, and the price each GPU-hour is charged at."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from planner.core.errors import ScenarioError, from_validation_error
from planner.core.precision import ComputePrecision, KvPrecision, WeightPrecision
from planner.economics.cost import gpu_price
from planner.economics.ownership import OwnershipCosts, owned_usd_per_gpu_hour
from planner.scenario.scenario import (
    MemorySettings,
    TrafficShapeFields,
    resolve_gpu,
    resolve_model,
    weight_only_compute,
)
from planner.serving.request_bounds import dedupe_lists

DEFAULT_TP = [1, 2, 4, 8]
DEFAULT_WEIGHTS: list[WeightPrecision] = ["bf16", "fp8", "int4"]
DEFAULT_KV: list[KvPrecision] = ["bf16", "fp8"]
DEFAULT_PERCENTILE = 90
SHAPE_FIELDS = tuple(TrafficShapeFields.model_fields)
# Fleets per family: its fewest replicas at its largest cap on running sequences, and up to two more replicas
# (more headroom, lower latency) while each replica still serves at least half its confirmed rate
# (MIN_LOAD_SHARE). A smaller cap is never faster at the same rate (the same fast-model latencies, a longer
# wait for a slot): at any replica count the largest cap's fleet dominates it.
OPTIONS_PER_FAMILY = 3
MIN_LOAD_SHARE = 0.5


class Traffic(TrafficShapeFields):
    """The contract's traffic; the shape fields (extensions) reach the serving model as the plan's `load`."""

    # from one request in 11.6 days: below ~1e-300 a fleet's price per million tokens overflows to infinity
    requests_per_s: float = Field(ge=1e-6, le=1e7)
    prompt_len: int = Field(ge=1, le=10_000_000)
    output_len: int = Field(ge=1, le=10_000_000)

    def shape(self) -> dict[str, float]:
        """The non-default shape fields, as a scenario's `load` takes them."""
        return {k: getattr(self, k) for k in SHAPE_FIELDS if k in self.model_fields_set}


class Slo(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    ttft_ms: float = Field(gt=0, le=1e7)
    itl_ms: float = Field(gt=0, le=1e7)
    percentile: Literal[50, 90,
                        99] = 90  # extension (DEFAULT_PERCENTILE): the objectives hold at this percentile
    # extension: mean time per output token per request, (E2E - TTFT) / (output - 1), vLLM's "Mean TPOT"
    tpot_ms: float | None = Field(default=None, gt=0, le=1e7)


class SizingRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    model: str | dict[str, Any]
    traffic: Traffic
    slo: Slo
    gpus: list[str | dict[str, Any]] | None = Field(default=None, min_length=1, max_length=100)
    tp: list[int] = Field(default_factory=lambda: list(DEFAULT_TP), min_length=1, max_length=16)
    # extensions: pipeline stages and expert-parallel sizes searched (ep > 1 only for MoE models); when
    # `pp` is not given, a GPU and precision on which no requested TP fits also gets its cheapest layout
    pp: list[int] = Field(default_factory=lambda: [1], min_length=1, max_length=8)
    ep: list[int] = Field(default_factory=lambda: [1], min_length=1, max_length=12)
    weights: list[WeightPrecision] = Field(default_factory=lambda: list(DEFAULT_WEIGHTS), min_length=1)
    kv_cache: list[KvPrecision] = Field(default_factory=lambda: list(DEFAULT_KV), min_length=1)
    context_len: int | None = Field(default=None, ge=1, le=100_000_000)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    efficiency: Literal["ideal", "default"] | dict[str, Any] = "default"
    usd_per_gpu_hour: dict[str, Annotated[float, Field(ge=0.0001, le=10_000)]] | None = Field(default=None,
                                                                                              max_length=1000)
    # extensions
    cost_mode: Literal["rent", "own"] = "rent"
    ownership: OwnershipCosts | None = None
    max_options: int = Field(default=200, ge=1, le=100_000)
    # the headroom: the most a replica may serve, as a share of its capacity; null: the highest load at which
    # the simulated range still meets the objective (planner.serving.confirmed_rate)
    max_utilization: float | None = Field(default=None, gt=0.0, le=0.95)
    # the GEMMs' precision on every candidate; null: each GPU's own for the weights, or bf16 (weight-only)
    # where it has no tensor cores for them (planner.scenario.scenario.weight_only_compute)
    compute: ComputePrecision | None = None


@dataclass(frozen=True)
class LayoutCandidate:
    """One configuration the search plans: a GPU (catalog id or custom object), its parallel layout and the
    weight and KV precisions. Sizing calls it a family (every batch of it); disaggregation a pool
    candidate."""

    gpu_key: str
    gpu_value: str | dict[str, Any]
    tp: int
    weights: str
    kv_cache: str
    pp: int = 1
    ep: int = 1
    compute: str | None = None  # the request's `compute`; None: the GPU's own for the weights, or weight-only

    def scenario_fields(self) -> dict[str, Any]:
        """The scenario keys this candidate sets (`compute` only where it is not the weights' own)."""
        fields = {"gpu": self.gpu_value, "tp": self.tp, "pp": self.pp, "ep": self.ep, "weights": self.weights,
                  "kv_cache": self.kv_cache}
        compute = self.compute or weight_only_compute(self.gpu_value, self.weights)
        if compute is not None:
            fields["compute"] = compute
        return fields



def parse_sizing(data: Any) -> SizingRequest:
    if not isinstance(data, dict):
        raise ScenarioError("sizing", "must be a JSON object")
    try:
        req = SizingRequest.model_validate(dedupe_lists(data))  # a repeated candidate only repeats work
    except ValidationError as err:
        raise from_validation_error(err) from None
    for i, tp in enumerate(req.tp):
        if tp < 1 or tp > 1024:
            raise ScenarioError(f"tp.{i}", "must be between 1 and 1024")
    for name, values, top in (("pp", req.pp, 256), ("ep", req.ep, 1024)):
        for i, v in enumerate(values):
            if not 1 <= v <= top:
                raise ScenarioError(f"{name}.{i}", f"must be between 1 and {top}")
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
    rent = gpu_price((req.usd_per_gpu_hour or {}).get(gpu_key), spec)
    own = owned_usd_per_gpu_hour(gpu_key, spec, req.ownership) if req.cost_mode == "own" else None
    return rent, own


def gpu_key(gpu: str | dict[str, Any]) -> str:
    """A GPU's name in results and prices: its catalog id, or a custom GPU's `name`."""
    return gpu if isinstance(gpu, str) else str(gpu.get("name", "custom"))
