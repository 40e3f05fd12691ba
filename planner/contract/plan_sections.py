"""The sections of a plan (pydantic models): memory, roofline, latency, throughput, cost, serving, speculative
decoding and fit alternatives. planner.contract.planning fills them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, computed_field

from planner.physics.bands import Band
from planner.serving.distributions import Percentiles
from planner.serving.operating_point import GoodputBinding
from planner.serving.queue_bands import QueueBands

GB_PER_GIB = 1e9 / 2**30  # GiB per GB: a figure in GB (10^9 bytes) times this is the same bytes in GiB


class ModelSummary(BaseModel):
    name: str
    total_params: float
    active_params: float
    non_embedding_params: float


class MemorySection(BaseModel):
    weights_gb_per_gpu: float
    kv_bytes_per_token: float
    kv_bytes_per_token_per_gpu: float
    kv_budget_gb_per_gpu: float
    max_batch: int
    fits: bool
    # extensions
    kv_bytes_per_sequence_per_gpu: float
    usable_gb_per_gpu: float
    reserve_gb: float
    kv_gb_per_gpu_at_batch: float
    weights_fit: bool
    smallest_tp_that_fits: int | None
    smallest_layout_that_fits: dict[str, int] | None = None
    kv_shortfall_gb_per_gpu: float = (
        0.0  # issue 22: what weights and overheads exceed the cap by; the budget is 0
    )
    # extensions (engine memory, planner.engines.vllm): waterfall in GiB and vLLM's start-up lines
    engine_rules: str = "napkin"
    vllm_version: str | None = None
    vllm_sampler: str | None = None  # the profiling run's top-k/top-p path under the release's rules
    waterfall_gib: dict[str, float | None] | None = None
    kv_cache_tokens: int | None = None
    max_concurrency: float | None = None
    num_gpu_blocks: int | None = None
    engine_log_lines: list[str] = []
    kv_cache_groups: list[dict[str, Any]] = []
    block_size: int | None = None
    max_model_len: int | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None

    # the same figures in GiB (2^30 bytes), the unit vLLM logs and the app shows; the _gb keys stay (contract)
    @computed_field  # type: ignore[prop-decorator]
    @property
    def weights_gib_per_gpu(self) -> float:
        return self.weights_gb_per_gpu * GB_PER_GIB

    @computed_field  # type: ignore[prop-decorator]
    @property
    def kv_budget_gib_per_gpu(self) -> float:
        return self.kv_budget_gb_per_gpu * GB_PER_GIB

    @computed_field  # type: ignore[prop-decorator]
    @property
    def usable_gib_per_gpu(self) -> float:
        return self.usable_gb_per_gpu * GB_PER_GIB

    @computed_field  # type: ignore[prop-decorator]
    @property
    def reserve_gib(self) -> float:
        return self.reserve_gb * GB_PER_GIB

    @computed_field  # type: ignore[prop-decorator]
    @property
    def kv_gib_per_gpu_at_batch(self) -> float:
        return self.kv_gb_per_gpu_at_batch * GB_PER_GIB

    @computed_field  # type: ignore[prop-decorator]
    @property
    def kv_shortfall_gib_per_gpu(self) -> float:
        return self.kv_shortfall_gb_per_gpu * GB_PER_GIB

    @property
    def usable_after_reserve_gb(self) -> float:
        """Per GPU: the engine's memory cap less the reserve, what weights and the KV cache share."""
        return self.usable_gb_per_gpu - self.reserve_gb


class RooflineSection(BaseModel):
    ridge_flop_per_byte: float
    decode_ai: float
    ridge_crossing_batch: int | None
    regime: Literal["memory-bound", "compute-bound"]
    # extensions
    compute_precision: str
    prefill_ai: float
    decode_flops_per_gpu: float
    decode_bytes_per_gpu: float
    prefill_flops_per_gpu: float


class LatencySection(BaseModel):
    """One request's prefill and the decode step at `batch`, each alone (no load). The serving section has the
    figures under load."""

    prefill_ms: float
    ttft_ms: float
    itl_ms: float
    itl_ms_bound: float
    # extensions
    prefill_ms_bound: float
    batch: int
    mean_context: float
    decode_breakdown_ms: dict[str, float]
    prefill_breakdown_ms: dict[str, float]
    itl_band_ms: Band | None
    ttft_band_ms: Band | None
    # fidelity v2 (issue 10): the engine profile, the graph floor beside the estimate, band provenance
    engine: str = "vllm"
    itl_ms_floor: float | None = None
    prefill_ms_floor: float | None = None
    band_status: dict[str, str] = {}
    # issue 30: the step-time predictor the step times came from (planner.physics.step_predictor)
    step_predictor: str = "production"


class ThroughputSection(BaseModel):
    """Decode-only figures at `batch` (prefill ignored): bounds of what serving reaches."""

    output_tokens_per_s: float
    output_tokens_per_s_bound: float
    tokens_per_s_per_user: float
    output_tokens_per_s_band: Band | None


class CostSection(BaseModel):
    usd_per_million_output_tokens: float | None  # at the serving operating point
    usd_per_gpu_hour: float
    usd_per_replica_hour: float
    # extensions
    usd_per_million_total_tokens: float | None  # input + output tokens at the operating point
    usd_per_million_output_tokens_bound: (
        float | None
    )  # decode-only at `batch`, prefill ignored: a lower bound


class LatencyPercentiles(BaseModel):
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    mean: float | None = None  # extension (issue 21)

    @classmethod
    def of(cls, p: Percentiles, mean: float | None = None) -> LatencyPercentiles:
        return cls(p50=p.p50, p90=p.p90, p99=p.p99, mean=mean)


class TpotSummary(BaseModel):
    """Time per output token per request, (E2E - TTFT) / (output - 1): mean (what `vllm bench serve` prints
    first), p50, p90, p99 (`vllm bench serve` prints all three percentiles)."""

    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None


class BenchmarkSection(BaseModel):
    """What a closed-loop `bench serve --max-concurrency N --request-rate inf` run reports (issue 20): clients
    start together, each sends its next request when its last one ends."""

    num_prompts: int
    duration_s: float
    request_throughput: float
    output_throughput: float
    total_token_throughput: float
    ttft_ms: LatencyPercentiles
    tpot_ms: LatencyPercentiles
    itl_ms: LatencyPercentiles
    e2e_ms: LatencyPercentiles


class ServingSection(BaseModel):
    """One replica at its operating point under the serving model (planner.serving.serving)."""

    mode: Literal["concurrency", "request_rate"]
    request_rate: float | None  # requests/s per replica
    concurrency: float | None  # mean requests in the replica (given, or lambda x mean E2E)
    stable: bool
    max_request_rate: float | None  # capacity: the saturation rate
    goodput_request_rate: float | None  # highest rate meeting load.slo (null without one)
    prefill_share: float | None
    output_tokens_per_s: float | None
    output_tokens_per_s_per_gpu: float | None
    ttft_ms: LatencyPercentiles
    itl_ms: LatencyPercentiles
    e2e_ms: LatencyPercentiles
    # extensions
    total_tokens_per_s_per_gpu: float | None
    decoding_sequences: float | None
    max_running: int
    max_num_batched_tokens: int
    slo_percentile: int | None
    tpot_ms: TpotSummary = TpotSummary()
    at_goodput: bool = False  # the operating point is the goodput under load.slo
    saturated: bool = False  # a closed loop held at capacity by more clients than it runs (not unstable)
    benchmark: BenchmarkSection | None = None  # load.concurrency given: the benchmark's own report
    # open loop: the percentiles bracketed by the scheduler's simulation where the queue model leaves its
    # validated range (planner.serving.queue_bands; null in a closed loop, which is simulated itself)
    queue_bands: QueueBands | None = None
    # an open loop under load.slo: which objective binds the goodput, why, and what relaxing it buys
    goodput_binding: GoodputBinding | None = None
    # an open loop's wait for a sequence slot (max_num_seqs or the KV budget; planner.serving.slot_wait),
    # included in ttft_ms and e2e_ms: P(an arrival waits), its mean given it does, and TTFT without it (the
    # figure queue_bands bracket); null in a closed loop
    slot_wait_probability: float | None = None
    slot_wait_mean_ms: float | None = None
    ttft_without_slot_wait_ms: LatencyPercentiles | None = None


class PrecisionChoice(BaseModel):
    weights: str
    kv_cache: str


class GpuChoice(BaseModel):
    gpu: str
    tp: int


class FitAlternatives(BaseModel):
    """What would fit when the scenario does not."""

    smallest_tp: int | None
    precisions: list[PrecisionChoice]
    gpus: list[GpuChoice]


class SpeculativeSection(BaseModel):
    tokens_per_round: float
    itl_ms: float
    round_ms: float
    output_tokens_per_s: float
