"""Model shapes: parameter counts from the architecture (GQA/MQA, MLA, gated MLP, MoE, embeddings).

All counts are for one whole model (all TP ranks together). `n_params` on the model overrides the
derived total; every component is then scaled by the same factor so memory and FLOPs follow it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field, model_validator

from planner.core.precision import embedding_bytes_per_value, weight_bytes_per_value


class MoeSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    n_experts: int = Field(ge=1, le=4096)
    top_k: int = Field(ge=1, le=4096)
    d_ff_expert: int = Field(ge=1, le=1_000_000)
    n_shared_experts: int = Field(default=0, ge=0, le=64)
    # Extension: leading layers that keep a dense MLP of width `d_ff` (DeepSeek-V3: 3).
    first_dense_layers: int = Field(default=0, ge=0, le=1000)

    @model_validator(mode="after")
    def _top_k_fits(self) -> MoeSpec:
        if self.top_k > self.n_experts:
            raise ValueError("top_k cannot exceed n_experts")
        return self


class MlaSpec(BaseModel):
    """Multi-head latent attention (DeepSeek-V2/V3). The KV cache holds the compressed latent plus the
    decoupled rotary key per token per layer, and it is replicated on every TP rank."""

    model_config = ConfigDict(extra="forbid", strict=True)

    kv_lora_rank: int = Field(ge=1, le=100_000)
    qk_rope_head_dim: int = Field(ge=0, le=100_000)
    qk_nope_head_dim: int = Field(ge=1, le=100_000)
    v_head_dim: int = Field(ge=1, le=100_000)
    q_lora_rank: int | None = Field(default=None, ge=1, le=1_000_000)


class ModelSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    name: str = Field(default="custom", min_length=1, max_length=120)
    n_layers: int = Field(ge=1, le=1000)
    d_model: int = Field(ge=1, le=1_000_000)
    n_heads: int = Field(ge=1, le=10_000)
    n_kv_heads: int = Field(ge=1, le=10_000)
    head_dim: int | None = Field(default=None, ge=1, le=100_000)
    d_ff: int = Field(ge=1, le=10_000_000)
    vocab_size: int = Field(ge=1, le=10_000_000)
    tied_embeddings: bool = False
    n_params: float | None = Field(default=None, ge=1e3, le=1e15)
    moe: MoeSpec | None = None
    # Extensions (contract v1 allows new optional fields).
    mla: MlaSpec | None = None
    sliding_window: int | None = Field(default=None, ge=1, le=100_000_000)
    sliding_window_layers: int | None = Field(default=None, ge=0, le=1000)
    source: str | None = Field(default=None, max_length=2000)
    # the precision the published checkpoint ships in (informational; the scenario's `weights` decides)
    checkpoint_weights: Literal["fp32", "fp16", "bf16", "fp8", "int8", "int4", "fp4"] | None = None
    # which weights a quantized checkpoint quantizes: all matmuls (default) or only the routed experts
    # (gpt-oss MXFP4 and Llama-4-Maverick FP8 keep attention, router and shared experts in 16 bits)
    quantized_scope: Literal["all", "routed_experts"] | None = None
    # notes from an import (an unknown family read from its standard keys, a quantization left out)
    import_notes: list[str] | None = Field(default=None, max_length=20)
    # parameters of a vision/audio encoder and its projector: loaded by the engine (16 bits, split over TP),
    # never run on a text token, so only the engine's memory counts them
    encoder_params: float | None = Field(default=None, ge=0, le=1e13)
    # config.json's `max_position_embeddings`: the positions an engine precomputes its rotary table for
    max_position_embeddings: int | None = Field(default=None, ge=1, le=1_000_000_000)
    # rows of each rotary cos/sin table the engine builds, when they differ from [max_position_embeddings]:
    # vLLM's `get_rope` makes max_position x factor rows for linear scaling, original x factor for YaRN, and
    # one table per distinct base (Gemma-3: a local and a global one)
    rotary_cache_positions: list[int] | None = Field(default=None, min_length=1, max_length=8)
    # the fp4 block format of a checkpoint shipped in fp4: NVFP4 (16 values per FP8 scale, the default) or
    # MXFP4 (32 values per E8M0 scale: gpt-oss)
    fp4_format: Literal["nvfp4", "mxfp4"] | None = None
    # how the fp8 checkpoint scales its weights: "tensor" (the default: one scale per tensor or per output
    # channel, NVIDIA ModelOpt FP8, compressed-tensors FP8-dynamic) or "block" (one scale per
    # `fp8_block_size` block of the weight, activations scaled per token and 128-wide group: config.json's
    # `weight_block_size`, DeepSeek-V3/R1, Kimi-K2, Qwen3 -FP8, MiniMax-M2.5, GLM -FP8); the kernel-table
    # predictor reads block-scaled GEMM and MoE kernels for "block"
    fp8_format: Literal["tensor", "block"] | None = None
    # [rows, columns] of one scale block of a block-scaled fp8 checkpoint (DeepSeek's [128, 128])
    fp8_block_size: list[int] | None = Field(default=None, min_length=2, max_length=2)

    @model_validator(mode="after")
    def _consistent(self) -> ModelSpec:
        if self.n_kv_heads > self.n_heads:
            raise ValueError("n_kv_heads cannot exceed n_heads")
        if self.n_heads % self.n_kv_heads != 0:
            raise ValueError("n_heads must be a multiple of n_kv_heads")
        if self.head_dim is None and self.d_model % self.n_heads != 0:
            raise ValueError("head_dim is required when d_model is not a multiple of n_heads")
        if self.sliding_window_layers is not None and self.sliding_window_layers > self.n_layers:
            raise ValueError("sliding_window_layers cannot exceed n_layers")
        if self.moe is not None and self.moe.first_dense_layers > self.n_layers:
            raise ValueError("moe.first_dense_layers cannot exceed n_layers")
        if self.rotary_cache_positions is not None and not all(
            1 <= r <= 1_000_000_000 for r in self.rotary_cache_positions
        ):
            raise ValueError("rotary_cache_positions must each be between 1 and 1,000,000,000")
        if self.fp8_block_size is not None and (
            self.fp8_format != "block" or not all(1 <= b <= 65_536 for b in self.fp8_block_size)
        ):
            raise ValueError("fp8_block_size needs fp8_format \"block\" and two sizes between 1 and 65,536")
        return self

    @property
    def fp8_block_scaled(self) -> bool:
        """Whether the checkpoint's fp8 weights carry block scales: `fp8_format` "block", or an MLA model that
        does not say (every public MLA fp8 checkpoint, DeepSeek-V3/R1's and Kimi-K2's, is block-scaled, and
        a saved model or custom MLA shape from before the key keeps the reading it had)."""
        if self.fp8_format is None:
            return self.mla is not None
        return self.fp8_format == "block"

    @property
    def rotary_dim(self) -> int:
        """Width of one rotary table row (cos and sin halves): the rope part of the head (MLA:
        qk_rope_head_dim)."""
        return self.mla.qk_rope_head_dim if self.mla is not None else self.head_dim_resolved

    @property
    def rotary_table_rows(self) -> list[int]:
        """Rows of each rotary cos/sin table an engine precomputes (none when the positions are unknown)."""
        if self.rotary_cache_positions is not None:
            return list(self.rotary_cache_positions)
        return [self.max_position_embeddings] if self.max_position_embeddings else []

    @property
    def head_dim_resolved(self) -> int:
        return self.head_dim if self.head_dim is not None else self.d_model // self.n_heads

    @property
    def n_windowed_layers(self) -> int:
        if self.sliding_window is None:
            return 0
        return self.n_layers if self.sliding_window_layers is None else self.sliding_window_layers


@dataclass(frozen=True)
class ParamCounts:
    """Parameters by role, whole model, after any `n_params` scaling.

    `expert_params` are all routed experts of all MoE layers; a token reads `top_k` of them per layer.
    """

    attention: float
    dense_mlp: float
    shared_experts: float
    expert_params: float
    router: float
    norms: float
    embedding: float
    lm_head: float
    scale: float  # n_params / derived total (1.0 without the override)
    routed_share: float = 0.0  # top_k / n_experts: the share of routed experts one token reads
    tied: bool = False  # the LM head is the embedding matrix

    @property
    def total(self) -> float:
        return (self.attention + self.dense_mlp + self.shared_experts + self.expert_params + self.router
                + self.norms + self.embedding + self.lm_head)

    @property
    def non_embedding(self) -> float:
        return self.total - self.embedding - self.lm_head

    @property
    def body_matmul(self) -> float:
        """Transformer-body weights that go through matmuls (quantizable), experts included."""
        return self.attention + self.dense_mlp + self.shared_experts + self.expert_params + self.router

    @property
    def head(self) -> float:
        """The LM head's weights (the embedding matrix when tied)."""
        return self.embedding if self.tied else self.lm_head

    @property
    def routed_per_token(self) -> float:
        """Routed-expert weights one token multiplies through (its top-k experts)."""
        return self.expert_params * self.routed_share

    @property
    def active(self) -> float:
        """Parameters one token touches: all but the routed experts it does not select."""
        return self.total - self.expert_params + self.routed_per_token

    @property
    def matmul_per_token(self) -> float:
        """Weights one token multiplies through (2 FLOPs each): body with top-k experts, plus the LM head.
        The input embedding is a lookup, not a matmul."""
        return (self.attention + self.dense_mlp + self.shared_experts + self.routed_per_token + self.router
                + self.head)


def expert_bytes_per_value(m: ModelSpec, weights: str) -> float:
    """Bytes per routed-expert weight value at the scenario's precision (MXFP4 checkpoints: 4.25 bits)."""
    return weight_bytes_per_value(weights, m.fp4_format)


def dense_bytes_per_value(m: ModelSpec, weights: str) -> float:
    """Bytes per value of the other body matmuls: 16 bits where the checkpoint quantizes only the routed
    experts (`quantized_scope`), else the weight precision."""
    if m.quantized_scope == "routed_experts" and m.moe is not None:
        return embedding_bytes_per_value(weights)
    return weight_bytes_per_value(weights, m.fp4_format)


def attention_params_per_layer(m: ModelSpec) -> float:
    d = m.d_model
    if m.mla is not None:
        a = m.mla
        qk_dim = a.qk_nope_head_dim + a.qk_rope_head_dim
        if a.q_lora_rank:
            q = d * a.q_lora_rank + a.q_lora_rank * m.n_heads * qk_dim + a.q_lora_rank
        else:
            q = d * m.n_heads * qk_dim
        kv = d * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank * m.n_heads * (
            a.qk_nope_head_dim + a.v_head_dim) + a.kv_lora_rank
        o = m.n_heads * a.v_head_dim * d
        return float(q + kv + o)
    hd = m.head_dim_resolved
    return float(d * m.n_heads * hd + 2 * d * m.n_kv_heads * hd + m.n_heads * hd * d)


def param_counts(m: ModelSpec) -> ParamCounts:
    d, n_layers = m.d_model, m.n_layers
    attention = attention_params_per_layer(m) * n_layers
    gated_mlp = 3.0 * d  # gate, up, down per unit of width
    if m.moe is None:
        dense_mlp, shared, experts, router = gated_mlp * m.d_ff * n_layers, 0.0, 0.0, 0.0
    else:
        moe_layers = n_layers - m.moe.first_dense_layers
        dense_mlp = gated_mlp * m.d_ff * m.moe.first_dense_layers
        shared = gated_mlp * m.moe.d_ff_expert * m.moe.n_shared_experts * moe_layers
        experts = gated_mlp * m.moe.d_ff_expert * m.moe.n_experts * moe_layers
        router = float(d * m.moe.n_experts * moe_layers)
    norms = float(2 * d * n_layers + d)
    embedding = float(m.vocab_size * d)
    lm_head = 0.0 if m.tied_embeddings else float(m.vocab_size * d)
    derived = attention + dense_mlp + shared + experts + router + norms + embedding + lm_head
    scale = m.n_params / derived if m.n_params else 1.0
    return ParamCounts(
        attention=attention * scale, dense_mlp=dense_mlp * scale, shared_experts=shared * scale,
        expert_params=experts * scale, router=router * scale, norms=norms * scale,
        embedding=embedding * scale, lm_head=lm_head * scale, scale=scale,
        routed_share=m.moe.top_k / m.moe.n_experts if m.moe else 0.0, tied=m.tied_embeddings,
    )


def active_params(m: ModelSpec) -> float:
    """Parameters one token touches (a plan reads it from its Deployment's `params` instead)."""
    return param_counts(m).active


def expected_experts_touched(n_experts: int, top_k: int, tokens: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Distinct experts a layer reads for `tokens` tokens with uniform top-k routing:
    E * (1 - (1 - k/E)^B). Works on numpy arrays."""
    return n_experts * (1.0 - (1.0 - top_k / n_experts) ** np.asarray(tokens, dtype=float))
