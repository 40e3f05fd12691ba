"""Step times from the engine's own measured kernels (issue 30, item 2): a decode step and a prefill built
layer by layer from the model's shapes and the kernel tables of its GPU x engine (planner.physics.
kernel_tables), so a model nobody ran is predicted from its own layers.

A layer on one GPU of a tp x ep replica (attention data-parallel in ep / tp groups under EP):
- attention projections as GEMMs (QKV and output; MLA's low-rank projections and its absorbed up-projections,
  the latter as GEMMs of the same weights), in the weights' precision;
- the attention kernel: generation attention (GQA/MHA) or generation MLA at the cached length, context
  attention / context MLA for a prompt;
- the MLP: gate-up and down GEMMs, or the MoE kernel (routed experts) plus the shared experts' GEMMs and the
  router's;
- two TP all-reduces (the engine's custom all-reduce, measured inside a CUDA graph);
then the LM head's GEMM. What the tables do not measure stays on the physics model: expert all-to-alls
(planner.hardware.communication), pipeline sends, and the engine's per-step host cost (scheduling, input
preparation, sampling: `step_overhead_us`, fitted on public runs) and per-prefill cost. The step is never
shorter than the roofline of its work (`StepTime.bound_ms`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from planner.core.deployment import Deployment
from planner.core.precision import bits_per_value
from planner.hardware.communication import ep_communication_ms, pp_communication_ms
from planner.hardware.parallelism import sharding
from planner.physics.kernel_tables import KernelTables, gemm_rows, has_tables, tables
from planner.physics.roofline import decode_micro_batch

# the catalog GPUs whose tables stand in for a sibling without its own (same chip and memory)
TABLE_GPU = {"h100-sxm": "h100-sxm", "h200": "h200", "b200": "b200", "gb200": "gb200", "b300": "b300",
             "gb300": "b300"}


def tables_key(gpu_id: str | None, engine: str) -> str | None:
    """The kernel tables of a catalog GPU x engine ("gpu/engine"), None where there are none."""
    gpu = TABLE_GPU.get(gpu_id or "")
    return f"{gpu}/{engine}" if gpu is not None and has_tables(gpu, engine) else None


def _tables(d: Deployment) -> KernelTables:
    key = d.efficiency.kernel_tables
    assert key is not None
    gpu, engine = key.split("/")
    return tables(gpu, engine)


@dataclass(frozen=True)
class StepParts:
    """A step's terms (ms), for planner.physics.latency to assemble into its StepTime."""

    gemm_ms: np.ndarray
    attention_ms: np.ndarray
    communication_ms: np.ndarray
    overhead_ms: float
    pp_ms: np.ndarray | float
    ep_ms: np.ndarray | float


# bits per value with the scales counted (fp4: 4.5, int4: 4.125): below this a precision is a 4-bit one
FOUR_BIT = 6.0


def _gemm_dtype(t: KernelTables, precision: str, block_scaled: bool) -> str:
    """The table's GEMM precision for weights in `precision`, the nearest the table has."""
    bits = bits_per_value(precision)
    if bits < FOUR_BIT:
        wanted = ["nvfp4", "fp8_block" if block_scaled else "fp8", "bfloat16"]
    elif bits <= 8:
        wanted = ["fp8_block", "fp8", "bfloat16"] if block_scaled else ["fp8", "fp8_block", "bfloat16"]
    else:
        wanted = ["bfloat16"]
    have = t.gemm_dtypes()
    chosen = next(w for w in wanted if w in have)
    # a per-tensor fp8 checkpoint carries its activations' static scale (NVIDIA's ModelOpt FP8 releases); the
    # table's fp8 rows computed it per call
    return "fp8_static" if chosen == "fp8" else chosen


def _moe_dtype(t: KernelTables, d: Deployment, block_scaled: bool) -> str:
    bits = bits_per_value(d.weights)
    if bits < FOUR_BIT:
        if bits_per_value(d.compute) < FOUR_BIT:
            # fp4 tensor cores: the engines run fp4 experts natively, not a weight-only kernel. MXFP4 experts
            # (gpt-oss) take MXFP8 activations in TRT-LLM-gen's kernels (vLLM's Blackwell recipes set
            # VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8, TensorRT-LLM's run its TRTLLM MoE backend); else the
            # class of the tables' NVFP4 kernels (4.25 vs 4.5 bits a weight)
            wanted = ["nvfp4", "w4a16_mxfp4", "int4_wo"]
            if d.model.fp4_format == "mxfp4":
                wanted = ["w4a8_mxfp4_mxfp8", *wanted]
        else:  # weight-only (gpt-oss on Hopper: Marlin / Triton MXFP4 kernels)
            mxfp4 = d.model.fp4_format == "mxfp4"
            wanted = (["w4a16_mxfp4", "int4_wo"] if mxfp4 else ["int4_wo", "w4a16_mxfp4"]) + ["nvfp4"]
        wanted += ["fp8_block", "fp8", "bfloat16"]
    elif bits <= 8:
        wanted = ["fp8_block", "fp8", "bfloat16"] if block_scaled else ["fp8", "fp8_block", "bfloat16"]
    else:
        wanted = ["bfloat16"]
    have = [w for w in wanted if w in t.moe_dtypes()]
    # the model's own experts measured in an acceptable precision beat another shape scaled to them: the
    # nearest measured shape can be 2x off (gpt-oss's 2880 x 2880 x top-4 experts on B200 read from NVFP4
    # 6144 x 3072 rows: 403 us at 64 tokens; its own MXFP4 rows: 294 us)
    moe = d.model.moe
    own = [w for w in have if moe is not None
           and t.has_moe_shape(w, d.model.d_model, moe.d_ff_expert, moe.top_k, moe.n_experts)]
    return (own or have)[0]


def _moe_table(d: Deployment, t: KernelTables, dtype: str) -> str:
    """The MoE table of the kernel the engine launches for this layout: "moe_adp" under attention data
    parallelism where the import found the engine's recipes launch another kernel there and measured it at
    the model's experts (TensorRT-LLM's FP4 DeepSeek-R1 on Blackwell: CUTLASS), else "moe"."""
    moe = d.model.moe
    if (moe is None or sharding(d).attention_dp <= 1
            or not t.has_moe_shape(dtype, d.model.d_model, moe.d_ff_expert, moe.top_k, moe.n_experts,
                                   "moe_adp")):
        return "moe"
    return "moe_adp"


def _layer_precisions(d: Deployment, t: KernelTables) -> tuple[str, str]:
    """GEMM precision of the dense layers (attention, shared experts) and of the routed experts. A
    block-scaled fp8 checkpoint (the model's `fp8_format` "block": DeepSeek's 128x128 scales, and Qwen3's,
    MiniMax's and GLM's -FP8 releases) reads the tables' block-scaled rows, any other fp8 their per-tensor
    ones; a routed-experts-only quantization keeps the dense layers in 16 bits (gpt-oss), an fp4 MoE
    checkpoint keeps them in fp8."""
    block = d.model.fp8_block_scaled
    dense = "bf16" if d.model.quantized_scope == "routed_experts" else d.weights
    if bits_per_value(dense) < FOUR_BIT and d.model.moe is not None:
        # an fp4 MoE checkpoint (NVIDIA's DeepSeek-R1-FP4, Qwen3 NVFP4) quantizes the experts; its attention
        # and shared layers stay 8-bit
        dense = "fp8"
    return _gemm_dtype(t, dense, block), _moe_dtype(t, d, block)


def _layer_ms(d: Deployment, t: KernelTables, tokens: np.ndarray, attention_ms: np.ndarray,
              moe_tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """GEMM time of every layer for `tokens` tokens per attention group (MoE kernels at `moe_tokens`), and
    the TP all-reduces; `attention_ms` is every layer's attention kernels together. Returns (gemm + attention
    + moe, all-reduce)."""
    m = d.model
    tp = d.tp
    hd = m.head_dim_resolved
    dense_dt, moe_dt = _layer_precisions(d, t)
    rows = gemm_rows(tokens)  # every GEMM of the layer runs on these tokens
    heads = max(m.n_heads // tp, 1)
    kv_heads = max(m.n_kv_heads // tp, 1)
    D = m.d_model
    if m.mla is None:
        attn_proj = (t.gemm_ms(dense_dt, rows, (heads + 2 * kv_heads) * hd, D)
                     + t.gemm_ms(dense_dt, rows, D, heads * hd))
    else:
        a = m.mla
        qk = a.qk_nope_head_dim + a.qk_rope_head_dim
        q = (t.gemm_ms(dense_dt, rows, a.q_lora_rank, D)
             + t.gemm_ms(dense_dt, rows, heads * qk, a.q_lora_rank)
             if a.q_lora_rank else t.gemm_ms(dense_dt, rows, heads * qk, D))
        kv_a = t.gemm_ms(dense_dt, rows, a.kv_lora_rank + a.qk_rope_head_dim, D)
        # absorbed up-projections (per head: nope -> latent for the query, latent -> v for the output)
        absorbed = (t.gemm_ms("bfloat16", rows, heads * a.kv_lora_rank, a.qk_nope_head_dim)
                    + t.gemm_ms("bfloat16", rows, heads * a.v_head_dim, a.kv_lora_rank))
        attn_proj = q + kv_a + absorbed + t.gemm_ms(dense_dt, rows, D, heads * a.v_head_dim)
    per_layer = attn_proj
    layers = m.n_layers
    if m.moe is None:
        ff = m.d_ff // tp
        mlp = t.gemm_ms(dense_dt, rows, 2 * ff, D) + t.gemm_ms(dense_dt, rows, D, ff)
        total = layers * (per_layer + mlp)
    else:
        moe = m.moe
        dense_layers = moe.first_dense_layers
        ff = m.d_ff // tp
        expert_tp = 1 if d.ep > 1 else tp
        routed = t.moe_ms(moe_dt, moe_tokens, D, moe.d_ff_expert, moe.top_k, moe.n_experts, expert_tp,
                          max(d.ep, 1), _moe_table(d, t, moe_dt))
        shared = np.zeros_like(tokens)
        if moe.n_shared_experts:
            sff = moe.n_shared_experts * moe.d_ff_expert // tp
            shared = t.gemm_ms(dense_dt, rows, 2 * sff, D) + t.gemm_ms(dense_dt, rows, D, sff)
        router = t.gemm_ms("bfloat16", rows, moe.n_experts, D)
        total = layers * per_layer
        if dense_layers:  # none: their term would be 0 x a finite time, which adds nothing
            total = total + dense_layers * (t.gemm_ms(dense_dt, rows, 2 * ff, D)
                                            + t.gemm_ms(dense_dt, rows, D, ff))
        total = total + (layers - dense_layers) * (routed + shared + router)
    head = t.gemm_ms(dense_dt if m.quantized_scope != "routed_experts" else "bfloat16", rows,
                     max(m.vocab_size // tp, 1), D)
    total = total + head + attention_ms
    allreduce = np.zeros_like(tokens)
    if tp > 1:
        ar = t.allreduce_ms(tokens * D * 2.0, tp)
        if ar is not None:
            allreduce = np.where(tokens > 0, 2.0 * layers * ar, 0.0)
    return total, allreduce


def decode_parts(d: Deployment, batch: npt.ArrayLike, context: npt.ArrayLike,
                 tokens_per_sequence: int = 1) -> StepParts:
    """One decode step from the kernel tables: the layers' kernels at the micro-batch, the engine's
    per-step host cost, expert all-to-alls and pipeline sends from the physics."""
    t = _tables(d)
    m = d.model
    s = sharding(d)
    micro = decode_micro_batch(d, batch)
    context = np.asarray(context, dtype=float)
    # dividing by one attention group or multiplying by one token a sequence leaves every value as it is
    group = micro / s.attention_dp if s.attention_dp != 1 else micro
    shape = np.broadcast_shapes(group.shape, context.shape)
    tokens = np.array(np.broadcast_to(group * tokens_per_sequence if tokens_per_sequence != 1 else group,
                                      shape), dtype=float)
    kv_fp8 = bits_per_value(d.kv_cache) <= 8
    heads = max(m.n_heads // d.tp, 1)
    def layer(kv_len: np.ndarray) -> np.ndarray:
        if m.mla is None:
            return t.generation_attention_ms(tokens, kv_len, heads, max(m.n_kv_heads // d.tp, 1),
                                             m.head_dim_resolved, kv_fp8)
        return t.generation_mla_ms(tokens, kv_len, heads, kv_fp8)

    # sliding-window layers (gpt-oss, Gemma) read at most their window
    windowed = m.n_windowed_layers
    attention = (m.n_layers - windowed) * layer(context)
    if windowed:
        attention = attention + windowed * layer(np.minimum(context, float(m.sliding_window or 0)))
    moe_tokens = np.array(np.broadcast_to(micro * tokens_per_sequence if tokens_per_sequence != 1 else micro,
                                          shape), dtype=float)
    return _parts(d, t, tokens, attention, moe_tokens, d.efficiency.step_overhead_us / 1e3)


def prefill_parts(d: Deployment, prompt_len: npt.ArrayLike, busy_groups: int = 1) -> StepParts:
    """One prompt prefilled from the kernel tables (context attention at its length), plus the engine's
    fixed per-prefill cost. `busy_groups` attention groups (data-parallel under EP) prefill a prompt of this
    length each at once: each group runs its own prompt's attention and dense layers, the experts serve the
    routed tokens of all of them (TensorRT-LLM's and SGLang's attention DP: the MoE layer's tokens are the
    union of every rank's, gathered or sent all-to-all), so the MoE kernels run at busy_groups x the prompt's
    tokens. 1: the prompt alone."""
    t = _tables(d)
    m = d.model
    s_len = np.asarray(prompt_len, dtype=float)
    kv_fp8 = bits_per_value(d.kv_cache) <= 8
    heads = max(m.n_heads // d.tp, 1)
    def layer(length: np.ndarray) -> np.ndarray:
        if m.mla is None:
            return (t.context_attention_ms(length, heads, max(m.n_kv_heads // d.tp, 1), m.head_dim_resolved,
                                           kv_fp8) if t.has("ctx_attn") else np.zeros_like(length))
        return t.context_mla_ms(length, heads, kv_fp8) if t.has("ctx_mla") else np.zeros_like(length)

    windowed = m.n_windowed_layers
    attention = (m.n_layers - windowed) * layer(s_len)
    if windowed:  # a windowed layer's pairs grow linearly past the window: the window's prefill per window
        w = np.minimum(s_len, float(m.sliding_window or 0))
        attention = attention + windowed * layer(w) * s_len / np.maximum(w, 1.0)
    attention = np.where(s_len > 0, attention, 0.0)
    groups = max(min(int(busy_groups), sharding(d).attention_dp), 1)
    return _parts(d, t, s_len, attention, s_len * groups, d.efficiency.prefill_overhead_ms)


def _parts(d: Deployment, t: KernelTables, tokens: np.ndarray, attention: np.ndarray, moe_tokens: np.ndarray,
           fixed_ms: float) -> StepParts:
    kernels, allreduce = _layer_ms(d, t, tokens, attention, moe_tokens)
    attention_total = attention
    ep: np.ndarray | float = 0.0
    if d.ep > 1 and d.model.moe is not None:
        ep = np.maximum(ep_communication_ms(d, tokens / d.tp) - d.efficiency.ep_overlap * kernels, 0.0)
    pp = pp_communication_ms(d, moe_tokens) if d.pp > 1 else 0.0
    return StepParts(kernels - attention_total, attention_total, allreduce, fixed_ms * d.pp, pp, ep)


def routed_moe_ms(d: Deployment, key: str, routed_tokens: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """A pass's routed experts over every MoE layer from the kernel tables `key` ("gpu/engine"), the EP
    group routing `routed_tokens` tokens: what planner.physics.latency.prefill takes for them where the
    efficiency asks (`prefill_moe_from_tables`)."""
    gpu, engine = key.split("/")
    t = tables(gpu, engine)
    m = d.model
    assert m.moe is not None
    _, moe_dt = _layer_precisions(d, t)
    expert_tp = 1 if d.ep > 1 else d.tp
    tokens = np.asarray(routed_tokens, dtype=float)
    per_layer = t.moe_ms(moe_dt, tokens, m.d_model, m.moe.d_ff_expert, m.moe.top_k, m.moe.n_experts,
                         expert_tp, max(d.ep, 1), _moe_table(d, t, moe_dt))
    return np.asarray((m.n_layers - m.moe.first_dense_layers) * per_layer, dtype=float)
