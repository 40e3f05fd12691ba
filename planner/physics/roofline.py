"""Roofline: FLOPs and bytes of one decode step and one prefill, per GPU; arithmetic intensity,
the ridge point and the batch where decode crosses it.

Everything takes numpy arrays for `batch` (and `context`) so sweeps and the sizing search are
vectorized. FLOPs count every matmul (top-k experts for MoE, the LM head) and attention over the
cached context; bytes count weights read (touched experts only), KV reads and writes, activations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from planner.core.deployment import Deployment
from planner.core.model_shapes import ModelSpec, dense_bytes_per_value, expert_bytes_per_value
from planner.core.precision import ACTIVATION_BYTES
from planner.hardware.parallelism import sharding
from planner.physics.memory import (
    cached_token_layers,
    embedding_bytes_per_value,
    kv_bytes_per_sequence_per_gpu,
    kv_bytes_per_token_per_gpu,
)

MAX_SEARCH_BATCH = 1 << 24


@dataclass(frozen=True)
class StepWork:
    """FLOPs and bytes of one step on one GPU (arrays broadcast over batch/context)."""

    gemm_flops: np.ndarray
    attention_flops: np.ndarray
    weight_bytes: np.ndarray
    kv_bytes: np.ndarray
    activation_bytes: np.ndarray

    @property
    def flops(self) -> np.ndarray:
        return self.gemm_flops + self.attention_flops

    @property
    def bytes(self) -> np.ndarray:
        return self.weight_bytes + self.kv_bytes + self.activation_bytes

    @property
    def arithmetic_intensity(self) -> np.ndarray:
        return self.flops / self.bytes


def ridge_flop_per_byte(d: Deployment) -> float:
    return d.gpu.peak_tflops(d.compute) / d.gpu.hbm_tb_s


def _weights_read_bytes(d: Deployment, tokens: np.ndarray, include_head: bool = True) -> np.ndarray:
    """Weight bytes one step streams on one GPU when the expert-parallel group routes `tokens` tokens.
    A GPU reads its own routed experts that some token selects: uniform top-k over E experts leaves each
    expert untouched with probability (1 - k/E)^tokens."""
    m, p = d.model, d.params
    w_bytes = expert_bytes_per_value(m, d.weights)
    shared = (p.attention + p.dense_mlp + p.shared_experts + p.router) * dense_bytes_per_value(m, d.weights)
    head = p.head * embedding_bytes_per_value(d.weights) if include_head else 0.0
    if m.moe is None:
        return (shared + head) / d.tp + np.zeros_like(tokens, dtype=float)
    touched_share = 1.0 - (1.0 - m.moe.top_k / m.moe.n_experts) ** tokens
    experts = p.expert_params * w_bytes * touched_share * sharding(d).expert_weight_fraction
    return (shared + head) / d.tp + experts


def routed_expert_work(d: Deployment, routed_tokens: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """The routed experts' share of a pass on the busiest GPU when the EP group routes `routed_tokens`
    tokens: their matmul FLOPs and the expert weight bytes they read (0 for a dense model)."""
    t = np.asarray(routed_tokens, dtype=float)
    flops = _gemm_flops(d, 0.0, t, 0.0) * np.ones_like(t)
    weight_bytes = _weights_read_bytes(d, t, include_head=False) - _weights_read_bytes(d, 0.0 * t, False)
    return flops, weight_bytes


def _gemm_flops(d: Deployment, tokens_per_group, tokens_routed, dense_params: float) -> np.ndarray:
    """Matmul FLOPs on the busiest GPU: each attention group's tokens through the TP-sharded weights, and
    the EP group's routed tokens through the local experts (uneven routing: the busiest GPU's share)."""
    s = sharding(d)
    experts = d.params.routed_per_token
    return (2.0 * tokens_per_group * dense_params / d.tp
            + 2.0 * tokens_routed * experts * s.expert_imbalance / s.expert_shards)


def _attention_flops_per_cached_token_layer(m: ModelSpec) -> float:
    """Decode attention FLOPs per query token, per cached token, per layer (all heads)."""
    if m.mla is not None:  # absorbed MLA: scores over latent+rope, values over latent
        a = m.mla
        return 2.0 * m.n_heads * (a.kv_lora_rank + a.qk_rope_head_dim) + 2.0 * m.n_heads * a.kv_lora_rank
    return 4.0 * m.n_heads * m.head_dim_resolved


def _prefill_attention_flops_per_pair(m: ModelSpec) -> float:
    """Prefill attention FLOPs per (query, key) pair per layer: MLA runs un-absorbed here."""
    if m.mla is not None:
        a = m.mla
        return 2.0 * m.n_heads * (a.qk_nope_head_dim + a.qk_rope_head_dim) + 2.0 * m.n_heads * a.v_head_dim
    return 4.0 * m.n_heads * m.head_dim_resolved


def _prefill_activation_values_per_token_layer(d: Deployment) -> float:
    """Prefill intermediates are prompt-sized and go through HBM: each GEMM's input and output."""
    m = d.model
    hd = m.head_dim_resolved
    q_dim, kv_dim = m.n_heads * hd, m.n_kv_heads * hd
    if m.moe is None:
        ff = m.d_ff
    else:
        ff = m.moe.top_k * m.moe.d_ff_expert + m.moe.n_shared_experts * m.moe.d_ff_expert
    sharded = 2 * (q_dim + 2 * kv_dim) + 2 * q_dim + 3 * ff
    return 6.0 * m.d_model + sharded / d.tp


def decode_micro_batch(d: Deployment, batch: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Sequences in one pipeline micro-batch: a replica keeps pp micro-batches in flight, one per stage."""
    return np.asarray(batch, dtype=float) / d.pp


def decode_work(
    d: Deployment, batch: npt.ArrayLike, context: npt.ArrayLike, tokens_per_sequence: int = 1
) -> StepWork:
    """One decode round of a replica holding `batch` sequences at `context` cached tokens each, on one GPU
    column (a GPU of every stage; with pp = 1 simply one GPU). Each of the pp micro-batches of batch/pp
    sequences crosses every stage, so a round is the whole model's work at the micro-batch; attention
    groups (data-parallel under EP) each take their share of the micro-batch. `tokens_per_sequence` > 1
    is a speculative verification pass (k+1 tokens per sequence, one weight read)."""
    micro = decode_micro_batch(d, batch)
    context = np.asarray(context, dtype=float)
    m = d.model
    s = sharding(d)
    # dividing by one attention group or multiplying by one token a sequence leaves every value as it is
    group_batch = micro / s.attention_dp if s.attention_dp != 1 else micro
    tokens = micro * tokens_per_sequence if tokens_per_sequence != 1 else micro
    group_tokens = group_batch * tokens_per_sequence if tokens_per_sequence != 1 else group_batch
    gemm = _gemm_flops(d, group_tokens, tokens, d.params.matmul_per_token - d.params.routed_per_token)
    token_layers = cached_token_layers(m, context)
    attn = (group_tokens * token_layers * _attention_flops_per_cached_token_layer(m)
            / min(d.tp, m.n_heads))
    weights = _weights_read_bytes(d, tokens)
    kv = (group_batch * kv_bytes_per_sequence_per_gpu(m, d.kv_cache, d.tp, context, token_layers)
          + group_tokens * kv_bytes_per_token_per_gpu(m, d.kv_cache, d.tp))
    # A decode batch's intermediates (hidden states of a few hundred tokens, a few MB) stay in the
    # 50-60 MB L2 of current GPUs, so decode counts no activation HBM traffic; prefill does.
    act = np.zeros_like(gemm)
    # every term already spans the batch's shape (attention and KV the context's too): no broadcast needed
    return StepWork(gemm, attn, weights, kv, act)


def causal_pairs(m: ModelSpec, prompt_len: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """(query, key) pairs a causal prefill computes, summed over layers, windows respected."""
    s = np.asarray(prompt_len, dtype=float)
    full_layers = m.n_layers - m.n_windowed_layers
    pairs = full_layers * s * (s + 1) / 2
    if m.n_windowed_layers:
        w = float(m.sliding_window or 0)
        windowed = np.where(s <= w, s * (s + 1) / 2, w * (w + 1) / 2 + (s - w) * w)
        pairs = pairs + m.n_windowed_layers * windowed
    return pairs


def prefill_gemm_flops(d: Deployment, prompt_len: Any, busy_groups: int = 1) -> Any:
    """prefill_work's matmul FLOPs on the busiest GPU, elementwise (a float stays a float): one attention
    group runs the prompt; its routed tokens spread over the expert shards; logits for the last token."""
    head = d.params.head
    return (_gemm_flops(d, prompt_len, prompt_len * busy_groups,
                        d.params.matmul_per_token - head - d.params.routed_per_token)
            + 2.0 * head / d.tp)


def prefill_attention_flops(d: Deployment, prompt_len: Any) -> Any:
    """prefill_work's attention FLOPs on the busiest GPU, elementwise."""
    m = d.model
    return causal_pairs(m, prompt_len) * _prefill_attention_flops_per_pair(m) / min(d.tp, m.n_heads)


def prefill_activation_bytes(d: Deployment, prompt_len: Any) -> Any:
    """prefill_work's activation traffic on the busiest GPU, elementwise (a float stays a float)."""
    return prompt_len * d.model.n_layers * _prefill_activation_values_per_token_layer(d) * ACTIVATION_BYTES


def prefill_work(d: Deployment, prompt_len: npt.ArrayLike, busy_groups: int = 1) -> StepWork:
    """One request's whole prompt in one pass; logits only for the last token. `busy_groups` attention
    groups prefill a prompt each at once (a saturated prefill worker under EP): the expert GPUs then
    serve all of their routed tokens."""
    s = np.asarray(prompt_len, dtype=float)
    m = d.model
    gemm = prefill_gemm_flops(d, s, busy_groups)
    attn = prefill_attention_flops(d, s)
    weights = _weights_read_bytes(d, s * busy_groups)
    kv = s * kv_bytes_per_token_per_gpu(m, d.kv_cache, d.tp)
    act = prefill_activation_bytes(d, s)
    return StepWork(gemm, attn, weights, kv, act)  # the weights' read spans the prompts' shape already


def _compute_ms(d: Deployment, gemm_flops: Any, attention_flops: Any) -> npt.NDArray[np.float64]:
    """FLOPs at peak, in ms: GEMMs at the compute precision's peak, attention at bf16's (16-bit kernels)."""
    peak_c = d.gpu.peak_tflops(d.compute) * 1e12
    peak_attn = d.gpu.peak_tflops("bf16") * 1e12
    return np.asarray((gemm_flops / peak_c + attention_flops / peak_attn) * 1e3, dtype=float)


def compute_floor_ms(d: Deployment, work: StepWork) -> npt.NDArray[np.float64]:
    """The compute roofline of a pass's work: every FLOP at peak, no overlap lost and no fixed cost."""
    return _compute_ms(d, work.gemm_flops, work.attention_flops)


def roofline_floor_ms(d: Deployment, work: StepWork) -> npt.NDArray[np.float64]:
    """The hard floor of any forward pass doing `work`: max(all its FLOPs at peak, all its bytes at the
    HBM bandwidth), the weights read once. No engine, efficiency or queue may plan a pass below it; a pass
    carrying several prompts and decodes has their work summed, its weights still read once."""
    memory_ms = np.asarray(work.bytes / (d.gpu.hbm_tb_s * 1e12) * 1e3, dtype=float)
    return np.maximum(compute_floor_ms(d, work), memory_ms)


def weights_read_ms(d: Deployment, tokens: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """The weights a pass carrying `tokens` tokens reads on one GPU, at the HBM bandwidth: every dense weight
    once, and each routed expert that some token selects. However many prompts share a pass, it reads them
    once; but a pass of many tokens touches (nearly) every expert, which no prompt's work may leave out."""
    return np.asarray(_weights_read_bytes(d, np.asarray(tokens, dtype=float)) / (d.gpu.hbm_tb_s * 1e12) * 1e3,
                      dtype=float)


def prefill_compute_floor_ms(d: Deployment, prompt_len: npt.ArrayLike,
                             cached_tokens: npt.ArrayLike = 0.0) -> npt.NDArray[np.float64]:
    """The compute a prompt's chunk `cached_tokens`..`prompt_len` adds to any pass it rides, at peak: its
    tokens' GEMMs, its logits (once) and its queries' attention over the whole prompt. Riding a pass shares
    the pass's one weight read but never its FLOPs, so however many prompts share a pass, each pays this
    (the pass's roofline_floor_ms is at least this summed over its prompts plus its decodes' compute)."""
    s = np.asarray(prompt_len, dtype=float)
    c = np.minimum(np.asarray(cached_tokens, dtype=float), s)
    # prefill_gemm_flops is affine in the length, its constant the last token's logits: the chunk's tokens
    # plus that constant once
    gemm = prefill_gemm_flops(d, s) - prefill_gemm_flops(d, c) + prefill_gemm_flops(d, 0.0)
    attention = prefill_attention_flops(d, s) - prefill_attention_flops(d, c)
    return _compute_ms(d, gemm, attention)


def ridge_crossing_batch(d: Deployment, context: float) -> int | None:
    """Smallest batch whose decode step's arithmetic intensity reaches the ridge at this context,
    or None when KV traffic keeps it memory-bound at every batch."""
    ridge = ridge_flop_per_byte(d)

    def reaches(batch: float) -> bool:
        return bool(decode_work(d, batch, context).arithmetic_intensity >= ridge)

    if not reaches(MAX_SEARCH_BATCH):
        return None
    lo, hi = 0, MAX_SEARCH_BATCH  # reaches(hi) is true; lo is below any crossing
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if reaches(mid):
            hi = mid
        else:
            lo = mid
    return hi
