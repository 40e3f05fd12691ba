"""Scenario I/O: the contract's input object, validated, and resolved into a Deployment.

Every bad input becomes one ScenarioError naming the field path and the reason.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from gpu_catalog import GpuSpec, load_catalog
from planner.core.deployment import Deployment
from planner.core.efficiency import EngineEfficiency, ideal
from planner.core.errors import ScenarioError, from_validation_error, loads_json
from planner.core.model_shapes import ModelSpec
from planner.core.precision import ComputePrecision, KvPrecision, WeightPrecision, default_compute_precision
from planner.economics.power import EconomicsSettings
from planner.engines.base import DEFAULT_BLOCK_SIZE, DEFAULT_ENGINE, DEFAULT_MAX_NUM_BATCHED_TOKENS
from planner.engines.profiles import engine_efficiency
from planner.hardware.parallelism import effective_ep, validate_parallelism
from planner.model.presets import load_presets
from planner.physics.calibration import CalibrationProfile
from planner.physics.memory import NAPKIN_RESERVE_GB
from planner.physics.step_predictor import default_efficiency, kernel_host_terms

DEFAULT_MEMORY_UTILIZATION = 0.90  # vLLM's --gpu-memory-utilization default (0.9)
DEFAULT_RESERVE_GB = (
    NAPKIN_RESERVE_GB  # the reserve field's default when a user turns the modelled overheads off
)


class MemorySettings(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    utilization: float = Field(default=DEFAULT_MEMORY_UTILIZATION, gt=0, le=1)
    # None (default): the engine's overheads (activations, non-torch memory, CUDA graphs) are modelled;
    # a number overrides them with a flat reserve per GPU.
    reserve_gb: float | None = Field(default=None, ge=0, le=10_000)


class SpeculativeSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    draft_tokens: int = Field(ge=1, le=64)
    acceptance: float = Field(ge=0, le=1)
    draft_params: float = Field(ge=1e3, le=1e13)


# planner.engines.base.ENGINES, as a type (tests/test_structure.py checks they agree)
EngineName = Literal["graph", "vllm", "sglang", "trt-llm"]
SamplerPath = Literal["native", "triton", "flashinfer"]


def _vllm_release(value: str) -> str:
    if not re.fullmatch(r"[0-9]{1,2}\.[0-9]{1,3}(\.[0-9]{1,3})?", value):
        raise ValueError("a vLLM release as major.minor[.patch], e.g. 0.10.1")
    return value


VllmVersion = Annotated[str, AfterValidator(_vllm_release)]


class ServiceObjective(BaseModel):
    """A latency objective at a percentile: what goodput and the sizing search are held to."""

    model_config = ConfigDict(extra="forbid", strict=True)

    ttft_ms: float | None = Field(default=None, gt=0, le=1e7)
    itl_ms: float | None = Field(default=None, gt=0, le=1e7)
    percentile: Literal[50, 90, 99] = 90
    # extension: mean time per output token per request, (E2E - TTFT) / (output - 1): vLLM's "Mean TPOT"
    tpot_ms: float | None = Field(default=None, gt=0, le=1e7)


class TrafficShapeFields(BaseModel):
    """The traffic's shape, one definition for a scenario's `load` and a sizing request's `traffic`."""

    model_config = ConfigDict(extra="forbid", strict=True)

    arrival_cv: float = Field(default=1.0, ge=0, le=10, description="inter-arrival coefficient of variation")
    prompt_len_cv: float = Field(default=0.0, ge=0, le=10)
    output_len_cv: float = Field(default=0.0, ge=0, le=10)
    prefix_cache_hit: float = Field(default=0.0, ge=0, le=1)


class BenchmarkClientSettings(BaseModel):
    """How a closed-loop `bench serve` run sends its requests (planner.serving.benchmark_client)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    num_prompts: int | None = Field(
        default=None, ge=1, le=1_000_000,
        description="requests the run sends; default 10 x concurrency (InferenceX)",
    )
    random_range_ratio: float = Field(
        default=1.0, gt=0, le=1,
        description="lengths uniform around or below prompt_len / output_len; 1: fixed",
    )
    range: Literal["below", "around"] = Field(
        default="below",
        description="below: [r L, L] (benchmark_serving.py, InferenceX); around: [L(1 - r), L(1 + r)] "
        "(vllm bench serve since 0.10)",
    )


class SchedulerSettings(BaseModel):
    """How the engine admits new prompts while sequences decode (issue 20): launch settings of SGLang and
    TensorRT-LLM that hold a prompt back behind the running decodes. The defaults hold nothing (every
    engine's own default); planner.serving.benchmark_client follows them."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    recv_interval_steps: int = Field(
        default=1, ge=1, le=1000,
        description="new requests reach the scheduler once every k decode iterations, at once after a "
        "prefill (SGLang --scheduler-recv-interval; --num-continuous-decode-steps runs k decodes per poll)",
    )
    prefill_wait_steps: int = Field(
        default=0, ge=0, le=10_000,
        description="while sequences decode, waiting prompts are held up to k iterations to batch more of "
        "them (TensorRT-LLM batch_wait_timeout_iters; attention-DP balance timeout_iters); 0: never held",
    )
    prefill_wait_tokens: int = Field(
        default=0, ge=0, le=10_000_000,
        description="the hold ends once waiting prompt tokens plus decodes reach this "
        "(batch_wait_max_tokens_ratio x max_num_tokens); 0: no token condition",
    )
    prefill_wait_prompts: int = Field(
        default=0, ge=0, le=100_000,
        description="the hold ends once this many prompts wait (attention-DP balance: one per rank); "
        "0: no count condition",
    )
    async_scheduling: bool = Field(
        default=False,
        description="vLLM --async-scheduling (its default from 0.14): the next iteration is formed before "
        "the current one's output is processed, so a request reaching a busy engine misses two iterations",
    )


class LoadSettings(TrafficShapeFields):
    """The operating point: a request rate per replica (open loop) or a concurrency (closed loop),
    the shape of the traffic, and the engine's chunked-prefill token budget."""

    request_rate: float | None = Field(default=None, gt=0, le=1e6, description="requests/s per replica")
    concurrency: int | None = Field(default=None, ge=1, le=10_000_000)
    max_num_batched_tokens: int = Field(default=DEFAULT_MAX_NUM_BATCHED_TOKENS, ge=16, le=10_000_000)
    slo: ServiceObjective | None = None
    # extension (issue 21): run the replica at its goodput under `slo`, the highest rate that meets it
    at_goodput: bool = False
    # extension (issue 20): the benchmark client a closed loop at `concurrency` is predicted for
    benchmark: BenchmarkClientSettings = Field(default_factory=BenchmarkClientSettings)
    # extension (issue 20): the engine's prompt admission as launched (SGLang recv interval, TRT-LLM waits)
    scheduler: SchedulerSettings = Field(default_factory=SchedulerSettings)

    @model_validator(mode="after")
    def _one_operating_point(self) -> LoadSettings:
        if self.request_rate is not None and self.concurrency is not None:
            raise ValueError("give request_rate or concurrency, not both")
        if self.at_goodput and (self.request_rate is not None or self.concurrency is not None):
            raise ValueError("at_goodput sets the request rate: give no request_rate or concurrency with it")
        if self.at_goodput and (self.slo is None or (self.slo.ttft_ms is None and self.slo.itl_ms is None)):
            raise ValueError("at_goodput needs slo with ttft_ms or itl_ms: the objective the rate must meet")
        return self


class Scenario(BaseModel):
    """The contract's scenario. `model` and `gpu` stay as given (id, object or hf_config) so a
    scenario round-trips through links and exports unchanged."""

    model_config = ConfigDict(extra="forbid", strict=True)

    model: str | dict[str, Any]
    gpu: str | dict[str, Any]
    tp: Annotated[int, Field(strict=True, ge=1, le=1024)] = 1
    weights: WeightPrecision = "bf16"
    kv_cache: KvPrecision = "bf16"
    compute: ComputePrecision | None = None
    context_len: Annotated[int, Field(strict=True, ge=1, le=100_000_000)] | None = None
    prompt_len: Annotated[int, Field(strict=True, ge=1, le=100_000_000)] = 1024
    output_len: Annotated[int, Field(strict=True, ge=1, le=100_000_000)] = 256
    batch: Annotated[int, Field(strict=True, ge=1, le=10_000_000)] | None = None
    memory: MemorySettings = Field(default_factory=MemorySettings)
    efficiency: Literal["ideal", "default"] | EngineEfficiency = "default"
    speculative: SpeculativeSettings | None = None
    usd_per_gpu_hour: Annotated[float, Field(strict=True, ge=0.0001, le=100_000)] | None = None
    calibration: CalibrationProfile | None = None
    # extensions (round 2): parallelism, engine, engine memory knobs, operating point
    pp: Annotated[int, Field(strict=True, ge=1, le=256)] = 1
    ep: Annotated[int, Field(strict=True, ge=1, le=1024)] = 1
    engine: EngineName = DEFAULT_ENGINE
    max_model_len: Annotated[int, Field(strict=True, ge=1, le=100_000_000)] | None = None
    block_size: Annotated[int, Field(strict=True, ge=1, le=1024)] = DEFAULT_BLOCK_SIZE
    enforce_eager: bool = False
    load: LoadSettings | None = None
    # vLLM's rules by release (planner/engines/vllm.py): default the latest the planner follows
    vllm_version: VllmVersion | None = None
    max_num_seqs: Annotated[int, Field(strict=True, ge=1, le=1_000_000)] | None = None
    vllm_sampler: SamplerPath | None = None
    # issue 24: the electricity price behind the plan's economics section
    economics: EconomicsSettings | None = None

    @model_validator(mode="after")
    def _lengths_fit_context(self) -> Scenario:
        if self.context_len is not None and self.prompt_len + self.output_len > self.context_len:
            raise ValueError(
                f"context_len ({self.context_len}) is shorter than prompt_len + output_len "
                f"({self.prompt_len + self.output_len})")
        return self

    @property
    def context_len_resolved(self) -> int:
        return self.context_len if self.context_len is not None else self.prompt_len + self.output_len

    @property
    def max_num_batched_tokens(self) -> int:
        return self.load.max_num_batched_tokens if self.load is not None else DEFAULT_MAX_NUM_BATCHED_TOKENS

    @property
    def mean_context(self) -> float:
        return self.prompt_len + self.output_len / 2


def parse_scenario(data: Any) -> Scenario:
    if not isinstance(data, dict):
        raise ScenarioError("scenario", "must be a JSON object")
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        if first["type"] == "value_error" and not first["loc"]:
            raise ScenarioError("context_len", from_validation_error(err).reason) from None
        # Unions report a path per branch ('model.str'); name the field itself.
        loc = first["loc"]
        if loc and loc[0] in ("model", "gpu") and len(loc) > 1 and loc[1] in ("str", "dict[str,any]"):
            raise ScenarioError(loc[0], "must be a preset id (string) or an object") from None
        if loc and loc[0] == "efficiency":
            if not isinstance(data.get("efficiency"), dict):
                raise ScenarioError("efficiency", "must be \"ideal\", \"default\" or an object") from None
            for e in err.errors():
                if e["loc"][:2] == ("efficiency", "EngineEfficiency"):
                    sub = ".".join(str(p) for p in e["loc"][2:])
                    one = ValidationError.from_exception_data(
                        "efficiency",
                        [
                            {
                                "type": e["type"], "loc": e["loc"][2:], "input": e["input"],
                                "ctx": e.get("ctx", {}),
                            }
                        ],
                    )
                    raise ScenarioError(f"efficiency.{sub}" if sub else "efficiency",
                                        from_validation_error(one).reason) from None
        raise from_validation_error(err) from None
    return scenario


def parse_scenario_json(text: str) -> Scenario:
    """A scenario from JSON text; NaN, Infinity, deep nesting and huge integer literals are refused."""
    return parse_scenario(loads_json(text, "scenario"))


def resolve_model(model: str | dict[str, Any], field: str = "model") -> ModelSpec:
    if isinstance(model, str):
        presets = load_presets()
        if model not in presets:
            raise ScenarioError(field, f"unknown preset '{model[:60]}' (known: {', '.join(presets)})")
        return presets[model]
    if set(model) == {"hf_config"}:
        # imported here: only a model given as its config.json needs it (not a preset's plan or sizing)
        from planner.model.hf_import import model_from_hf_config

        return model_from_hf_config(model["hf_config"], f"{field}.hf_config")
    try:
        return ModelSpec.model_validate(model)
    except ValidationError as err:
        raise from_validation_error(err, field) from None


def resolve_gpu(gpu: str | dict[str, Any], field: str = "gpu") -> tuple[GpuSpec, str | None]:
    """The GPU spec and its catalog id (None for a custom GPU)."""
    if isinstance(gpu, str):
        catalog = load_catalog()
        if gpu not in catalog:
            raise ScenarioError(field, f"unknown GPU '{gpu[:60]}' (known: {', '.join(catalog)})")
        return catalog[gpu], gpu
    try:
        return GpuSpec.model_validate(gpu), None
    except ValidationError as err:
        raise from_validation_error(err, field) from None


def resolve_efficiency(scenario: Scenario, gpu_id: str | None,
                       model: ModelSpec | None = None) -> EngineEfficiency:
    """ideal: the pure roofline; else the scenario's engine profile (planner/engines/profiles.py), under an
    explicit efficiency object or a calibration profile where one is given; by default, a model outside the
    profile's fitted families on an engine and GPU with kernel tables is planned from them
    (planner.physics.step_predictor.default_efficiency)."""
    if scenario.efficiency == "ideal":
        return ideal()
    base = engine_efficiency(scenario.engine, gpu_id, scenario.weights)
    if isinstance(scenario.efficiency, EngineEfficiency):
        # fields the scenario leaves out come from its engine profile, not from the ideal roofline
        given = scenario.efficiency.model_dump(include=scenario.efficiency.model_fields_set)
        # kernel tables named: their own fitted host and frontend costs, unless given
        host = kernel_host_terms(gpu_id, scenario.engine) if given.get("kernel_tables") else {}
        return EngineEfficiency.model_validate({**base.model_dump(), **host, "name": "custom", **given})
    if scenario.calibration is not None:
        return scenario.calibration.efficiency_for(gpu_id, base)
    if model is None:
        return base
    return default_efficiency(base, gpu_id, scenario.engine, model, scenario.tp * scenario.pp, scenario.ep)


def checkpoint_weights(scenario: Scenario, model: ModelSpec) -> str:
    """The weight precision: the scenario's when it gives one, else the checkpoint's native precision
    (a preset's `checkpoint_weights` or an imported quantization_config), else bf16."""
    if "weights" in scenario.model_fields_set or model.checkpoint_weights is None:
        return scenario.weights
    return model.checkpoint_weights


def resolution_notes(scenario: Scenario, d: Deployment) -> list[str]:
    """What the plan took from the model rather than the scenario: the checkpoint's precision, import
    notes."""
    notes = list(d.model.import_notes or [])
    if d.weights != scenario.weights:
        notes.append(f"weights {d.weights}: the checkpoint's native precision (set `weights` to plan another)"
                     + (f"; computed in {d.compute} (weight-only)" if d.compute != d.weights else ""))
    return notes


def model_position_limit(model: ModelSpec) -> int | None:
    """The longest sequence the model's positions allow, as vLLM derives `max_model_len`'s upper bound:
    config.json's `max_position_embeddings`, or the rows of its one scaled rotary table (linear or YaRN
    scaling) when longer; Gemma-3's two tables (vLLM leaves its scaling out of the bound) count
    max_position_embeddings. None when the model does not say."""
    limit = model.max_position_embeddings
    rows = model.rotary_cache_positions
    if rows is not None and len(rows) == 1 and (limit is None or rows[0] > limit):
        limit = rows[0]
    return limit


def check_context_limit(scenario: Scenario, model: ModelSpec) -> None:
    """A context beyond the model's positions is refused: vLLM refuses such a `--max-model-len` at start-up
    (unless VLLM_ALLOW_LONG_MAX_MODEL_LEN is set) and the model was never trained on it."""
    limit = model_position_limit(model)
    if limit is None:
        return
    given = scenario.context_len is not None
    checks = (("context_len", scenario.context_len_resolved), ("max_model_len", scenario.max_model_len))
    for field, value in checks:
        if value is not None and value > limit:
            what = field if given or field == "max_model_len" else "prompt_len + output_len"
            raise ScenarioError(
                field, f"{what} {value:,} is beyond {model.name}'s limit of {limit:,} tokens "
                "(max_position_embeddings in its config.json)",
            )


def weight_only_compute(gpu: str | dict[str, Any], weights: str) -> str | None:
    """"bf16" where the GPU has no dense tensor-core peak for the weights' own compute (fp8 weights on
    Ampere, fp4 on Hopper, Ampere or CDNA3): the engines run such a checkpoint weight-only, dequantizing to
    bf16 (vLLM's Marlin kernels, its MXFP4 Triton kernels for gpt-oss on Hopper); None where the GPU runs
    the weights' precision natively, or has no bf16 peak either (resolve then names the gap). The sizing
    search plans each GPU as its engines would run the checkpoint (issue 31: gpt-oss-120b fp4 found no H100
    or H200 fleet)."""
    return _weight_only(resolve_gpu(gpu)[0].tflops, weights)


def _weight_only(tflops: dict[str, float], weights: str) -> str | None:
    """weight_only_compute on the GPU's dense peaks (resolve's fallback for a checkpoint's weights too)."""
    native = default_compute_precision(weights)
    return "bf16" if native not in tflops and "bf16" in tflops else None


def resolve(scenario: Scenario) -> Deployment:
    model = resolve_model(scenario.model)
    gpu, gpu_id = resolve_gpu(scenario.gpu)
    weights = checkpoint_weights(scenario, model)
    compute = scenario.compute or default_compute_precision(weights)
    if compute not in gpu.tflops and weights != scenario.weights:
        # weight-only kernels (Marlin) dequantize a checkpoint the GPU has no tensor cores for
        compute = _weight_only(gpu.tflops, weights) or compute
    if compute not in gpu.tflops:
        have = ", ".join(sorted(gpu.tflops))
        field = "compute" if scenario.compute else "weights"
        hint = (
            ""
            if scenario.compute
            else f"; {scenario.weights} weights need {compute} tensor cores, or set compute to bf16 for "
                "weight-only"
        )
        raise ScenarioError(field, f"{gpu.name} has no dense {compute} peak (it has: {have}){hint}")
    validate_parallelism(model, scenario.tp, scenario.pp, scenario.ep, scenario.engine)
    check_context_limit(scenario, model)
    is_ideal = scenario.efficiency == "ideal"
    return Deployment(
        model=model, gpu=gpu, tp=scenario.tp, weights=weights, kv_cache=scenario.kv_cache,
        compute=compute, efficiency=resolve_efficiency(scenario, gpu_id, model),
        memory_utilization=1.0 if is_ideal else scenario.memory.utilization,
        reserve_gb=0.0 if is_ideal else scenario.memory.reserve_gb,
        pp=scenario.pp, ep=effective_ep(model, scenario.ep),
        engine=scenario.engine, block_size=scenario.block_size,
        max_num_batched_tokens=scenario.max_num_batched_tokens, max_model_len=scenario.max_model_len,
        enforce_eager=scenario.enforce_eager, vllm_version=scenario.vllm_version,
        max_num_seqs=scenario.max_num_seqs, vllm_sampler=scenario.vllm_sampler,
    )
