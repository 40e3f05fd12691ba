"""Engine efficiency: the knobs that turn roofline bounds into realistic step times.

`ideal()` is the pure roofline (the seeds' napkin math). Engine profiles (planner/engines/profiles.py) fill
these fields: the "graph" floor from our GPU measurements, each serving engine's overheads on top
(docs/ACCURACY.md has every constant, its evidence and the cross-validated errors).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class EngineEfficiency(BaseModel):
    """Fractions of datasheet peaks an engine reaches, and the fixed costs a step carries."""

    model_config = ConfigDict(extra="forbid", strict=True)

    bandwidth: float = Field(default=1.0, ge=0.01, le=1, description="weight streaming, fraction of HBM peak")
    quantized_bandwidth: float = Field(
        default=1.0, ge=0.01, le=1,
        description="streaming sub-16-bit weights (dequantizing kernels), fraction of HBM peak",
    )
    compute: float = Field(
        default=1.0, ge=0.01, le=1, description="decode GEMMs, fraction of dense tensor peak"
    )
    kv_bandwidth: float = Field(
        default=1.0, ge=0.01, le=1, description="attention KV reads, fraction of HBM peak"
    )
    prefill_compute: float = Field(default=1.0, ge=0.01, le=1, description="prefill GEMMs, fraction of peak")
    attention_compute: float = Field(
        default=1.0, ge=0.01, le=1, description="prefill attention, fraction of bf16 peak"
    )
    link: float = Field(
        default=1.0, ge=0.01, le=1, description="all-reduce bus bandwidth, fraction of link peak"
    )
    layer_overhead_us: float = Field(
        default=0.0, ge=0, le=10_000, description="fixed cost per layer per step"
    )
    step_overhead_us: float = Field(default=0.0, ge=0, le=1_000_000, description="fixed cost per decode step")
    allreduce_latency_us: float = Field(default=0.0, ge=0, le=10_000, description="latency of one all-reduce")
    # issue 20: an engine's expert all-to-all has its own latency (DeepEP or NCCL, not the fused
    # all-reduce), and is hidden behind the other micro-batch's compute only as far as the engine overlaps it
    alltoall_latency_us: float | None = Field(
        default=None, ge=0, le=10_000, description="latency of one expert all-to-all; None: the all-reduce's"
    )
    ep_overlap: float = Field(
        default=1.0, ge=0, le=1, description="share of a step's compute that hides the expert all-to-alls"
    )
    prefill_overhead_ms: float = Field(default=0.0, ge=0, le=100_000, description="fixed cost per prefill")
    ttft_overhead_ms: float = Field(
        default=0.0, ge=0, le=100_000, description="serving cost before the first token"
    )
    ttft_per_running_ms: float = Field(
        default=0.0, ge=0, le=10_000,
        description="serving cost before the first token per other request in flight "
        "(the frontend's tokenize/detokenize and scheduling queue)",
    )
    smoothing: float = Field(default=0.0, ge=0, le=64,
                             description="p of the p-norm joining compute and memory time; 0 means max()")
    name: str = Field(default="custom", max_length=200)
    # Fidelity v2 (issue 10): terms the graph physics measured; their defaults keep the pure roofline.
    int4_bandwidth: float = Field(
        default=1.0, ge=0.01, le=1,
        description="streaming 4-bit weight-only weights (dequantizing GEMV), fraction of HBM peak",
    )
    int4_compute: float = Field(
        default=1.0, ge=0.001, le=1,
        description="4-bit weight-only GEMMs (dequantize, bf16 math), fraction of bf16 peak",
    )
    kv_quantized_bandwidth: float = Field(
        default=1.0, ge=0.01, le=1, description="attention over an 8-bit KV cache, fraction of HBM peak"
    )
    moe_layer_overhead_us: float = Field(
        default=0.0, ge=0, le=10_000,
        description="extra kernels of an MoE layer (router, permute, grouped GEMMs)",
    )
    prefill_layer_overhead_us: float = Field(default=0.0, ge=0, le=10_000,
                                             description="fixed cost per layer of a prefill pass")
    prefill_quantized_compute: float = Field(
        default=1.0, ge=0.01, le=1, description="prefill GEMMs in fp8/int8, fraction of that precision's peak"
    )
    # issue 30: an MoE layer's routed experts in prefill run grouped GEMMs of a few dozen tokens per expert at
    # 0.04-0.28 of the peak in the engines' kernel tables, where a dense prefill GEMM reaches 0.6-0.9: 1 takes
    # their time from the tables of the GPU x engine (planner.physics.kernel_step.routed_moe_ms) where those
    # exist, the rest of the prefill from these fractions of peak (a number, as every efficiency value is:
    # calibration profiles scale and store them as numbers)
    prefill_moe_from_tables: float = Field(
        default=0.0, ge=0, le=1,
        description="share of the routed experts' prefill time taken from the engine's kernel tables where "
                    "they exist (1: all; 0: none, the prefill GEMM rate; between: that mix)",
    )
    prefill_smoothing: float = Field(
        default=0.0, ge=0, le=64, description="p of the p-norm joining a prefill's compute and memory time"
    )
    # issue 30: the step-time predictor's measured kernels, "<gpu>/<engine>" of planner/data/kernel_tables/
    # (planner.physics.kernel_step); None: the physics model's fractions of peak above
    kernel_tables: str | None = Field(default=None, max_length=60,
                                      description="kernel tables the step times come from (gpu/engine)")
    chunk_layer_overhead_us: float = Field(
        default=0.0, ge=0, le=10_000,
        description="kernels a prompt chunk adds to each layer of an iteration that carries decodes (its own "
                    "attention, KV writes)",
    )


def ideal() -> EngineEfficiency:
    return EngineEfficiency(name="ideal")
