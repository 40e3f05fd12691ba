"""vLLM's start-up memory accounting, term by term, and the two lines it logs.

Units: everything here is in GiB (2^30 bytes), as vLLM logs it; `planner.physics.memory` converts to GB.

Source of each term (vLLM V1 worker, vllm-project/vllm `vllm/v1/worker/gpu_worker.py`
`Worker.determine_available_memory` and `vllm/utils/mem_utils.py` `memory_profiling`):

    available_kv = total_memory x gpu_memory_utilization - non_kv_cache_memory
    non_kv_cache_memory = weights_memory + torch_peak_increase + non_torch_increase

* `total_memory` is `torch.cuda.mem_get_info()[1]` (MemorySnapshot), not nvidia-smi's figure. Public
  start-up logs print it: H100 80GB 79.11-79.25 GiB while nvidia-smi shows 81,559 MiB (79.65 GiB)
  (vllm-project/vllm PR #10511 and PR #12126: "total_gpu_memory 79.22GiB"); RTX 3090 23.58 GiB for
  24,576 MiB (vllm#10517); L40S 44.42 GiB for 46,068 MiB (vllm#15815). The driver keeps about
  0.45 GiB out of what the framework sees: DRIVER_RESERVED_GIB.
* `weights_memory` is the model as loaded ("Model loading took X GiB"), per TP rank: quantized body,
  embedding and LM head kept in 16 bits, vocabulary padded to a multiple of 64 per TP shard
  (`vocab_parallel_embedding.py` DEFAULT_VOCAB_PADDING_SIZE = 64), MXFP4 experts padded for the kernel the
  release runs them through (`mxfp4_moe_backend`, `mxfp4_expert_bytes`), and the rotary cos/sin tables
  (`rotary_embedding/base.py`: [positions, rotary_dim] in the model dtype, every rank; Llama-4-Scout's
  10,485,760 positions make 2.5 GiB). The plan keeps the tables as their own term (`rotary_cache_gib`).
* `torch_peak_increase` is the peak of `profile_run()`: a dummy forward of `max_num_batched_tokens`
  tokens (`gpu_model_runner.py` `_dummy_run(self.max_num_tokens)`), then a dummy sampler run
  (`_dummy_sampler_run`) over the logits of `min(max_num_seqs, max_num_batched_tokens)` rows with
  top-k = vocab - 1 and top-p = 0.9, while the forward's hidden states are still held. The two peaks
  come one after the other, so the profiled peak is the larger of them, not their sum. The forward
  peak is the widest live set of one layer: the residual and normed hidden state plus the MLP's
  gate_up and activation outputs (dense), or fused MoE's intermediate caches `[tokens, top_k, 2N]`,
  `[tokens, top_k, N]`, `[tokens, top_k, hidden]` (`fused_moe.py`). The sampler's PyTorch-native
  path (`topk_topp_sampler.py` `apply_top_k_top_p`) sorts the whole vocabulary: 38.0 bytes per logit
  at its peak (bf16 logits, their float32 copy, the sort's values, int64 indices and workspace),
  measured by replaying that path on an H200 (tools/measure_sampler_peak.py,
  data/measurements/h200_vllm_sampler_peak_2026-11-26.json: 38.0-38.2 B for 256-1,024 rows of a
  50k-201k vocabulary). FlashInfer's sampler (`top_k_top_p_sampling_from_logits`) sorts nothing:
  bf16 logits, the float32 copy, the top-k-masked logits and the probabilities, 14 B per logit (read
  from its source, not measured). vLLM's Triton top-k/top-p kernels (0.17-0.19) peak at 15 B per logit
  (the 0.19.0 Llama-3.1-8B log, tuning). Which path a release takes by default: `default_sampler`. The V0
  engine (before 0.8) samples on the driver rank only, but the engine sizes every rank's cache by
  the smallest rank's budget, so the sampler binds there too.
* `non_torch_increase` is what the forward allocates outside torch (cuBLAS workspaces, NCCL and
  custom all-reduce buffers when TP > 1): 0.03-0.35 GiB at TP 1 and 0.25-0.30 GiB at TP 2 in the
  V0 logs that print it (vllm#10517, #13061, #15815), 0.13-0.27 GiB at TP 1 in V1 logs; about 2.1 GiB
  at TP > 1 from 0.19 on (`NON_TORCH_GIB_TP_GT1_FROM_0_19`), 0.25 at TP 1 in 0.19; before 0.19, 2.04 GiB
  at TP > 2 on Hopper-or-later NVSwitch hosts, where NCCL keeps its NVLS buffers (`nvls_capable`).
* The fp32 case (`--dtype float32`): activations, the sampler's logits and the rotary tables in 4 bytes
  (`model_dtype_bytes`).
* CUDA graphs: up to vLLM 0.20 they are captured after the KV cache is allocated
  (`compile_or_warm_up_model` runs after `initialize_from_config`), so they come out of the
  (1 - utilization) headroom. From 0.21 the profiler estimates the graph pool before sizing the KV
  cache (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS on by default, PR #38284); `enforce_eager` removes it.
  The pool's size (`cuda_graph_pool_gib`) is a line in the layer count fitted on two 0.19.0 logs.
* Multimodal checkpoints: the vision encoder and projector are loaded too (`ModelSpec.encoder_params`,
  16 bits, split over TP) though no text token runs through them.
* KV cache: `kv_cache_utils.py` `get_num_blocks`: num_blocks = available // page_size // num_layers,
  page_size = 2 x block_size x kv_heads x head_size x dtype bytes per layer (MLA: one latent of
  kv_lora_rank + rope dim). Models mixing sliding-window and full layers are split into KV-cache
  groups of equal layer count that share one block pool (`_get_kv_cache_config_uniform_page_size`).
  Logged lines (`_report_kv_cache_config`): "GPU KV cache size: {num_blocks // n_groups x block_size:,}
  tokens" and "Maximum concurrency for {max_model_len:,} tokens per request: {C:.2f}x" with C =
  num_blocks / blocks one max_model_len request needs across the groups.
"""

from __future__ import annotations

import math
import re
from functools import partial

from gpu_catalog import GpuSpec
from planner.core.deployment import Deployment
from planner.core.model_shapes import ModelSpec, dense_bytes_per_value, expert_bytes_per_value
from planner.core.precision import ACTIVATION_BYTES, embedding_bytes_per_value
from planner.engines.base import (
    GIB,
    EngineMemory,
    Release,
    value_at,
    visible_total_gib,
)
from planner.engines.profiles import engine_efficiency
from planner.engines.torch_allocator import allocated_bytes
from planner.engines.vllm_kv_cache import (
    blocks_per_request,
    format_log_lines,
    kv_cache_groups,
    kv_cache_layout,
    kv_tokens_and_concurrency,
)
from planner.hardware.parallelism import sharding

NAME = "vllm"

# This engine's step-time profile, efficiency_profile(gpu_id=None): the graph physics plus its fitted serving
# overheads (planner/data/engine_profiles.json, read by planner/engines/profiles.py).
efficiency_profile = partial(engine_efficiency, NAME)

VLLM_RULES_VERSION = "0.21"  # the rules the plan follows by default (graph pool profiled before the KV cache)
# vLLM releases whose memory rules differ, newest first (the form's choices; each a row of a table below)
VLLM_RELEASES = ("0.21", "0.20", "0.19", "0.17", "0.16", "0.11", "0.10", "0.9")
GRAPH_POOL_IN_KV_BUDGET = (
    Release((0, 0, 0), False, "graphs captured after the KV cache is allocated (compile_or_warm_up_model)"),
    Release((0, 21, 0), True, "vLLM PR #38284: VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS on by default"),
)
VOCAB_PADDING = 64  # vLLM DEFAULT_VOCAB_PADDING_SIZE
NON_TORCH_GIB_TP1 = 0.15  # cuBLAS/cuDNN workspaces; V0 logs print 0.03-0.35 GiB at TP 1, V1 0.13-0.27
NON_TORCH_GIB_TP_GT1 = 0.30  # + NCCL and custom all-reduce buffers; V0 logs print 0.25-0.30 GiB at TP 2
# From 0.19 vLLM keeps ~2.1 GiB outside torch at TP > 1 (NCCL, custom, symmetric-memory and FlashInfer
# all-reduce workspaces): 2.07 GiB on the tuning log (Llama-3.1-8B TP 2, vLLM 0.19.0), 2.06-2.21 GiB on its
# held-out siblings at TP 2 and 4. Releases before it print 0.25-0.55 GiB at TP > 1. Later releases keep
# those workspaces; the few public logs after 0.19 at TP 4 print 0.95 GiB (GB200, 0.26) and 1.70 GiB
# (PCIe, 0.27), none on H100 yet, so the H100 figure of 0.19 carries forward (the more cautious budget).
NON_TORCH_GIB_TP_GT1_FROM_0_19 = 2.07
ALLREDUCE_WORKSPACES_HELD = (
    Release((0, 0, 0), False, "logs before 0.19 print 0.25-0.55 GiB non-torch at TP > 1"),
    Release((0, 19, 0), True, "0.19.0 tuning log Llama-3.1-8B TP 2: 2.07 GiB; held-out TP 2, 4: 2.06-2.21"),
)
# NCCL's NVLink SHARP (NVLS) buffers: NCCL turns NVLS on for more than 2 GPUs of a Hopper-or-later NVSwitch
# domain (vllm#9699: 405B at TP 8 on H200 held ~5,000 fewer KV blocks with it) and keeps them outside torch.
# Before 0.19 they are most of the non-torch memory at TP > 2 on such hosts: 2.04 GiB at TP 4 on H200 in the
# July 2025 DEBUG log of vLLM PR #21429 (tuning), against 0.21-0.55 GiB at TP 2 and on PCIe or L40S hosts.
NON_TORCH_GIB_NVLS_BEFORE_0_19 = 2.04
# and 0.25 GiB at TP 1 (the tuning log Llama-3.1-8B TP 1 on 0.19.0; its held-out siblings print 0.24-0.27)
NON_TORCH_GIB_TP1_BY_RELEASE = (
    Release((0, 0, 0), NON_TORCH_GIB_TP1, "V0 logs print 0.03-0.35 GiB at TP 1, V1 0.13-0.27"),
    Release((0, 19, 0), 0.25, "0.19.0 tuning log Llama-3.1-8B TP 1; held-out siblings 0.24-0.27 GiB"),
    Release((0, 20, 0), NON_TORCH_GIB_TP1, "no public TP 1 log after 0.19 prints it: the V1 middle"),
)
# Peak bytes per logit (row x vocabulary entry) of the dummy sampler run, by sampler path (module docstring).
# "none": a V0 rank other than the driver, which does not sample.
SAMPLER_BYTES_PER_LOGIT = {"native": 38.0, "triton": 15.0, "flashinfer": 14.0, "none": 0.0}
# The default top-k/top-p path by release (CUDA): the PyTorch sort up to 0.16 (FlashInfer's kernel was off
# for FlashInfer >= 0.2.3 from 0.8.0, PR #14815, and off by default from 0.11.1, PR #26859; public 0.9-0.11
# logs show the sort's peak); vLLM's Triton top-k/top-p kernels from 0.17 (PR #33538: a Qwen3-14B H100
# profile peak fell from 5.64 to 2.23 GiB between 0.16.0 and 0.17.0); FlashInfer's again by default from
# 0.20, the first release after PR #40376 (0.19.0 logs still print it disabled).
DEFAULT_SAMPLER = (
    Release(
        (0, 0, 0), "native", "public 0.9-0.11 logs show the sort's peak; FlashInfer off (#14815, #26859)"
    ),
    Release(
        (0, 17, 0), "triton", "vLLM PR #33538: Triton top-k/top-p (Qwen3-14B H100 peak 5.64 -> 2.23 GiB)"
    ),
    Release((0, 20, 0), "flashinfer", "vLLM PR #40376: FlashInfer's sampler on by default (0.19.0: off)"),
)
# CUDA-graph pool: vLLM captures one graph per batch size (1-512) per piece of the compiled model, so the
# pool grows with the layer count. Fitted on two tuning logs of vLLM 0.19.0 ("Graph capturing finished ...
# took X GiB"): Llama-3.1-8B TP 1, 32 layers, 0.91 GiB and Llama-3.3-70B-FP8 TP 2, 80 layers, 1.79 GiB;
# the other 0.19.0 logs are held out for it (data/reference/vllm_startup_logs.md). From 0.21 vLLM subtracts
# its estimate of this pool before sizing the KV cache.
GRAPH_POOL_BASE_GIB = 0.3233
GRAPH_POOL_PER_LAYER_GIB = 0.018333
# The fused-MoE modular kernel keeps its workspaces (`SharedResizableBuffer`) after the forward, so they are
# still held while the dummy sampler runs (0.19.0 MoE logs: Qwen3-30B-A3B 2.68 GiB, DeepSeek-V2-Lite 1.93 GiB
# against 2.20 and 1.50 without them; a 0.10.2 log shows none). From 0.11, an assumption between the two.
MOE_WORKSPACE_HELD = (
    Release((0, 0, 0), False, "a 0.10.2 MoE log shows no held workspace"),
    Release(
        (0, 11, 0), True, "0.19.0 MoE logs (Qwen3-30B-A3B 2.68, DeepSeek-V2-Lite 1.93 GiB); 0.11 assumed"
    ),
)
# MXFP4 experts on Hopper: OpenAI's Triton kernels once vLLM ships them (0.11.1, PR #27370), Marlin before
MXFP4_HOPPER_BACKEND = (
    Release((0, 0, 0), "marlin", "public 0.10-0.11 Hopper logs run Marlin (triton_kernels by hand)"),
    Release((0, 11, 1), "triton", "vLLM PR #27370: vLLM ships OpenAI's triton_kernels"),
)
# vLLM `_set_default_args`: GPUs with at least 70 GiB (A100 excepted) default to max_num_seqs 1024, others 256
LARGE_GPU_GIB = 70.0
MAX_NUM_SEQS_LARGE_GPU = 1024
MAX_NUM_SEQS_DEFAULT = 256


def default_sampler(version: str) -> str:
    """The top-k/top-p path a vLLM release takes on CUDA by default: "native" (sorts), "triton" or
    "flashinfer"."""
    return value_at(DEFAULT_SAMPLER, version)


def default_max_num_seqs(visible_gib: float, gpu_name: str) -> int:
    large = visible_gib >= LARGE_GPU_GIB and "a100" not in gpu_name.lower()
    return MAX_NUM_SEQS_LARGE_GPU if large else MAX_NUM_SEQS_DEFAULT


def padded_vocab_per_gpu(vocab_size: int, tp: int) -> float:
    padded = math.ceil(vocab_size / VOCAB_PADDING) * VOCAB_PADDING
    return padded / tp


def _round_up(x: float, multiple: int) -> float:
    return math.ceil(x / multiple) * multiple


def is_hopper(gpu: GpuSpec) -> bool:
    """H100 / H200 / H20 / H800 / GH200 (compute capability 9.0), read from the GPU's name."""
    return re.search(r"\bG?H(100|200|20|800)\b", gpu.name, re.IGNORECASE) is not None


def mxfp4_moe_backend(gpu: GpuSpec, version: str) -> str:
    """The kernels vLLM runs MXFP4 experts through on this GPU by default (`mxfp4.py` `get_mxfp4_backend`):
    FlashInfer on GPUs with native fp4 (Blackwell); on Hopper the OpenAI Triton kernels from 0.11.1, when
    vLLM started to ship `triton_kernels` (PR #27370; before it the kernels had to be installed by hand and
    public 0.10-0.11 Hopper logs run Marlin); Marlin's weight-only kernel elsewhere. AMD: the checkpoint's
    layout (ROCm's own padding is not modelled)."""
    if (gpu.vendor or "").lower().startswith("amd"):
        return "checkpoint"
    if "fp4" in gpu.tflops:
        return "flashinfer"
    return value_at(MXFP4_HOPPER_BACKEND, version) if is_hopper(gpu) else "marlin"


def mxfp4_expert_bytes(n_experts: int, hidden: int, intermediate: float, backend: str) -> float:
    """One MoE layer's MXFP4 experts on one rank as the backend lays them out (values 4 bits, one E8M0 byte
    per 32 values), `intermediate` being the rank's share of the expert width.

    * checkpoint: gate_up [E, 2I, H/2] + down [E, H, I/2] bytes, scales a 32nd of the values.
    * marlin (`create_weights`): I up to a multiple of 128, H up to 256 (the kernel's n % 256, k % 128).
    * flashinfer (Blackwell): I and H up to 256.
    * triton: I up to 64 at creation; the Hopper swizzle (triton_kernels `HopperMXValueLayout`) then pads
      each matrix's packed reduction bytes to 64 and its other side to 256, and the scale layout
      (`HopperMXScaleLayout`, 8 warps) pads the non-reduction side to 256 and the scale columns to 2."""
    h, i = float(hidden), float(intermediate)
    if backend == "triton":
        i = _round_up(i, 64)
        values = _round_up(h / 2, 64) * _round_up(2 * i, 256) + _round_up(i / 2, 64) * _round_up(h, 256)
        scales = _round_up(2 * i, 256) * _round_up(h / 32, 2) + _round_up(h, 256) * _round_up(i / 32, 2)
        return n_experts * (values + scales)
    if backend == "marlin":
        i, h = _round_up(i, 128), _round_up(h, 256)
    elif backend == "flashinfer":
        i, h = _round_up(i, 256), _round_up(h, 256)
    return n_experts * 3.0 * h * i * (0.5 + 1.0 / 32.0)


def mxfp4_padding_factor(d: Deployment, version: str) -> float:
    """Bytes of MXFP4 experts as loaded over their checkpoint bytes, for the rank's share of the width."""
    m = d.model
    if m.moe is None or d.weights != "fp4" or m.fp4_format != "mxfp4" or d.engine != "vllm":
        return 1.0
    width = m.moe.d_ff_expert / (d.tp if d.ep == 1 else 1)
    backend = mxfp4_moe_backend(d.gpu, version)
    return (mxfp4_expert_bytes(m.moe.n_experts, m.d_model, width, backend)
            / mxfp4_expert_bytes(m.moe.n_experts, m.d_model, width, "checkpoint"))


def rotary_cache_gib(m: ModelSpec, weights: str = "bf16") -> float:
    """The rotary cos/sin tables the engine precomputes (vLLM `RotaryEmbedding.cos_sin_cache`:
    [positions, rotary_dim] in the model's dtype, one per distinct table, on every rank): 16 bits, or 32 for
    a model run in fp32 (`--dtype float32`; quantized checkpoints run in 16 bits)."""
    return sum(m.rotary_table_rows) * m.rotary_dim * model_dtype_bytes(weights) / GIB


def weight_tensors_per_gpu(d: Deployment) -> list[tuple[float, int]]:
    """(bytes, count) of the large weight tensors vLLM allocates on the busiest GPU, one per fused projection:
    qkv_proj, o_proj, gate_up_proj, down_proj (MoE: the fused w13 and w2 of all local experts, and the shared
    experts' MLP), the embedding and the LM head. MLA attention and packed 4-bit formats are left out (their
    tensors are laid out otherwise); the small tensors (norms, biases, scales, router) round by bytes only."""
    m, s = d.model, sharding(d)
    if d.weights in ("int4", "fp4"):
        return []
    w, we = dense_bytes_per_value(m, d.weights), expert_bytes_per_value(m, d.weights)
    emb = embedding_bytes_per_value(d.weights)
    h, t = m.d_model, d.tp
    layers = math.ceil(m.n_layers * s.stage_layer_fraction)
    tensors: list[tuple[float, int]] = []
    if m.mla is None:
        q = m.n_heads * m.head_dim_resolved / t
        kv = max(1, math.ceil(m.n_kv_heads / t)) * m.head_dim_resolved
        tensors += [((q + 2 * kv) * h * w, layers), (q * h * w, layers)]
    dense_layers = layers if m.moe is None else math.ceil(m.moe.first_dense_layers * s.stage_layer_fraction)
    if dense_layers:
        tensors += [(2 * m.d_ff / t * h * w, dense_layers), (m.d_ff / t * h * w, dense_layers)]
    if m.moe is not None:
        moe_layers = layers - dense_layers
        experts = math.ceil(m.moe.n_experts / d.ep) if d.ep > 1 else m.moe.n_experts
        width = m.moe.d_ff_expert / (1 if d.ep > 1 else t)
        tensors += [(experts * 2 * width * h * we, moe_layers), (experts * width * h * we, moe_layers)]
        if m.moe.n_shared_experts:
            shared = m.moe.n_shared_experts * m.moe.d_ff_expert / t
            tensors += [(2 * shared * h * w, moe_layers), (shared * h * w, moe_layers)]
    tables = 1 if (m.tied_embeddings or s.pp > 1) else 2
    tensors.append((padded_vocab_per_gpu(m.vocab_size, t) * h * emb, tables))
    return tensors


def allocator_rounding_gib_per_gpu(d: Deployment) -> float:
    """What the caching allocator charges for the weights beyond their bytes (`allocated_bytes`): 1 MiB for
    each of Qwen2.5-72B's 80 down_proj shards at TP 2 (231 MiB each, a 232 MiB segment), nothing for
    Llama-3.1-8B, whose tensors are whole multiples of 2 MiB."""
    if d.engine not in ("vllm", "sglang"):
        return 0.0
    return sum((allocated_bytes(size) - size) * count for size, count in weight_tensors_per_gpu(d)) / GIB


def weights_gib_per_gpu(d: Deployment, vllm_version: str = VLLM_RULES_VERSION) -> float:
    """Weights as loaded on the busiest GPU (planner/hardware/parallelism.py's layout): the stage's layers
    with the quantized body over TP and routed experts over the expert shards (MXFP4 experts as vLLM's kernels
    pad them), RMSNorm weights replicated on every rank, embedding and LM head in 16 bits over vocabulary rows
    padded to 64 and split over TP (first and last stage). vLLM's "Model loading took" adds the rotary tables
    (`rotary_cache_gib`) and what PyTorch's allocator charges beyond the tensors' bytes
    (`allocator_rounding_gib_per_gpu`), each kept as its own term."""
    m = d.model
    p = d.params
    s = sharding(d)
    emb_bytes = embedding_bytes_per_value(d.weights)
    dense_body = (p.body_matmul - p.expert_params) * dense_bytes_per_value(m, d.weights) / d.tp
    experts = (p.expert_params * expert_bytes_per_value(m, d.weights) * s.expert_weight_fraction
               * mxfp4_padding_factor(d, vllm_version))
    norms = p.norms * emb_bytes  # replicated on every rank
    layers = (dense_body + experts + norms) * s.stage_layer_fraction
    vocab_rows = padded_vocab_per_gpu(m.vocab_size, d.tp) * p.scale
    tables = 1 if (m.tied_embeddings or s.pp > 1) else 2
    encoder = (m.encoder_params or 0.0) * 2.0 / d.tp  # in 16 bits, on the first stage (taken as the busiest)
    return (layers + vocab_rows * m.d_model * emb_bytes * tables + encoder) / GIB


def forward_activation_elems_per_token(m: ModelSpec, tp: int) -> float:
    """Widest live set of one layer in the profiling forward, in values per token."""
    hidden = 2.0 * m.d_model  # residual + normed input
    hd = m.head_dim_resolved
    attention = (2 * m.n_heads + 2 * m.n_kv_heads) * hd / tp  # qkv output + attention output
    widths = [attention]
    dense_layers = m.n_layers if m.moe is None else m.moe.first_dense_layers
    if dense_layers:
        widths.append(3.0 * m.d_ff / tp)  # gate_up (2f) + activation (f)
    if m.moe is not None:
        f_e = m.moe.d_ff_expert / tp
        # fused_moe caches: [T, k, 2N] + [T, k, N] + [T, k, hidden]; router logits in fp32
        widths.append(m.moe.top_k * (3.0 * f_e + m.d_model) + 2.0 * m.moe.n_experts)
    return hidden + max(widths)


def forward_peak_gib(
    m: ModelSpec, tp: int, max_num_batched_tokens: int, dtype_bytes: float = ACTIVATION_BYTES
) -> float:
    return max_num_batched_tokens * forward_activation_elems_per_token(m, tp) * dtype_bytes / GIB


def sampler_peak_gib(m: ModelSpec, max_num_batched_tokens: int, max_num_seqs: int, sampler: str,
                     dtype_bytes: float = ACTIVATION_BYTES) -> float:
    """The dummy sampler run over one logit row per dummy request (full vocabulary on every TP rank: vLLM
    gathers the logits), plus the forward's hidden states it keeps alive. The per-logit figures hold the
    logits in 16 bits; a model run in fp32 hands the sampler fp32 logits, 2 B more each."""
    if sampler == "none":
        per_logit = 0.0
    else:
        per_logit = SAMPLER_BYTES_PER_LOGIT[sampler] + (dtype_bytes - ACTIVATION_BYTES)
    rows = min(max_num_seqs, max_num_batched_tokens)
    logits = rows * m.vocab_size * per_logit
    hidden_states = max_num_batched_tokens * m.d_model * dtype_bytes
    return (logits + hidden_states) / GIB


def moe_workspace_gib(
    m: ModelSpec, tp: int, max_num_batched_tokens: int, dtype_bytes: float = ACTIVATION_BYTES
) -> float:
    """Fused MoE's intermediate caches for the profiling batch: [T, k, 2N] + [T, k, N] + [T, k, hidden]."""
    if m.moe is None:
        return 0.0
    per_token = m.moe.top_k * (3.0 * m.moe.d_ff_expert / tp + m.d_model)
    return max_num_batched_tokens * per_token * dtype_bytes / GIB


def activation_peak_gib(m: ModelSpec, tp: int, max_num_batched_tokens: int, max_num_seqs: int,
                        sampler: str = "native", moe_workspace_held: bool = False,
                        dtype_bytes: float = ACTIVATION_BYTES) -> float:
    """The profiling run's torch peak: the larger of the forward's and the sampler's (one after the other),
    with fused MoE's workspaces still held during the sampler where the release keeps them. `dtype_bytes`:
    the activations' width, 2 (4 for a model run in fp32, `model_dtype_bytes`)."""
    held = moe_workspace_gib(m, tp, max_num_batched_tokens, dtype_bytes) if moe_workspace_held else 0.0
    return max(forward_peak_gib(m, tp, max_num_batched_tokens, dtype_bytes),
               sampler_peak_gib(m, max_num_batched_tokens, max_num_seqs, sampler, dtype_bytes) + held)


def model_dtype_bytes(weights: str) -> float:
    """The dtype the engine runs the model in: fp32 for fp32 weights (`--dtype float32`), else 16 bits
    (quantized checkpoints compute their activations in bf16/fp16)."""
    return 4.0 if weights == "fp32" else ACTIVATION_BYTES


def holds_moe_workspace(m: ModelSpec, weights: str, version: str) -> bool:
    """MoE through the fused-MoE modular kernel (not MXFP4, which vLLM runs through other kernels)."""
    return m.moe is not None and weights != "fp4" and value_at(MOE_WORKSPACE_HELD, version)


def nvls_capable(gpu: GpuSpec) -> bool:
    """An NVSwitch domain of more than 2 Hopper-or-later GPUs (A100's NVSwitch has no NVLink SHARP)."""
    newer_than_ampere = is_hopper(gpu) or "fp4" in gpu.tflops
    return (
        newer_than_ampere
        and not (gpu.vendor or "").lower().startswith("amd")
        and (gpu.scale_up_domain or 0) > 2
    )


def non_torch_gib(tp: int, version: str = VLLM_RULES_VERSION, gpu: GpuSpec | None = None) -> float:
    if tp == 1:
        return value_at(NON_TORCH_GIB_TP1_BY_RELEASE, version)
    if value_at(ALLREDUCE_WORKSPACES_HELD, version):
        return NON_TORCH_GIB_TP_GT1_FROM_0_19
    if tp > 2 and gpu is not None and nvls_capable(gpu):
        return NON_TORCH_GIB_NVLS_BEFORE_0_19
    return NON_TORCH_GIB_TP_GT1


def cuda_graph_pool_gib(m: ModelSpec, stage_layer_fraction: float = 1.0) -> float:
    """The CUDA-graph pool vLLM captures (whether or not its release counts it before the KV cache)."""
    return GRAPH_POOL_BASE_GIB + GRAPH_POOL_PER_LAYER_GIB * math.ceil(m.n_layers * stage_layer_fraction)


def cuda_graph_gib(
    m: ModelSpec, version: str, enforce_eager: bool, stage_layer_fraction: float = 1.0
) -> float:
    """The graph pool as it comes out of the KV budget: from 0.21, unless eager."""
    if enforce_eager or not value_at(GRAPH_POOL_IN_KV_BUDGET, version):
        return 0.0
    return cuda_graph_pool_gib(m, stage_layer_fraction)


# The terms of plan_engine_memory that the KV cache's precision leaves alone, by everything they read: a
# sizing request plans each layout with every KV precision it lists (issue 31). An entry holds the model and
# GPU objects its key names by id, so no id is reused while it stands.
_KV_FREE: dict[tuple, tuple[ModelSpec, GpuSpec, tuple[float, ...]]] = {}
_ROUNDING: dict[tuple, tuple[ModelSpec, float]] = {}  # allocator rounding (weight tensors alone) by the same


def _kv_free_terms(d: Deployment, max_num_batched_tokens: int, enforce_eager: bool, seqs: int,
                   vllm_version: str, sampler: str) -> tuple[float, ...]:
    """(weights, activation peak, non-torch, CUDA graphs, rotary tables, allocator rounding) GiB per GPU."""
    key = (id(d.model), id(d.gpu), d.tp, d.pp, d.ep, d.weights, d.engine, max_num_batched_tokens,
           enforce_eager, seqs, vllm_version, sampler)
    kept = _KV_FREE.get(key)
    if kept is not None and kept[0] is d.model and kept[1] is d.gpu:
        return kept[2]
    m = d.model
    held, width = holds_moe_workspace(m, d.weights, vllm_version), model_dtype_bytes(d.weights)
    rounding = _ROUNDING.get(key[:1] + key[2:7])  # no GPU figure: a request's GPUs share it
    if rounding is None or rounding[0] is not m:
        rounding = _ROUNDING[key[:1] + key[2:7]] = (m, allocator_rounding_gib_per_gpu(d))
    terms = (weights_gib_per_gpu(d, vllm_version),
             activation_peak_gib(m, d.tp, max_num_batched_tokens, seqs, sampler, held, width),
             non_torch_gib(d.tp, vllm_version, d.gpu),
             cuda_graph_gib(m, vllm_version, enforce_eager, sharding(d).stage_layer_fraction),
             rotary_cache_gib(m, d.weights), rounding[1])
    if len(_KV_FREE) >= 4096:  # a few requests' layouts
        _KV_FREE.clear()
        _ROUNDING.clear()
    _KV_FREE[key] = (d.model, d.gpu, terms)
    return terms


def plan_engine_memory(d: Deployment, max_model_len: int, max_num_batched_tokens: int, block_size: int,
                       enforce_eager: bool = False, max_num_seqs: int | None = None,
                       vllm_version: str = VLLM_RULES_VERSION, sampler: str | None = None) -> EngineMemory:
    """vLLM's KV budget and block pool on one GPU of the deployment."""
    m = d.model
    visible = visible_total_gib(d.gpu.memory_gb)
    seqs = max_num_seqs if max_num_seqs is not None else default_max_num_seqs(visible, d.gpu.name)
    requested = visible * d.memory_utilization
    sampler_path = sampler or default_sampler(vllm_version)
    weights, activation, non_torch, graphs, rotary, rounding = _kv_free_terms(
        d, max_num_batched_tokens, enforce_eager, seqs, vllm_version, sampler_path)
    override = d.reserve_gb * 1e9 / GIB if d.reserve_gb is not None else None
    overheads = override if override is not None else rotary + rounding + activation + non_torch + graphs
    budget = requested - weights - overheads
    fraction = sharding(d).stage_layer_fraction
    num_blocks, tokens, concurrency, size, page = kv_tokens_and_concurrency(
        m, d.tp, d.kv_cache, budget, block_size, max_model_len, max_num_batched_tokens, fraction)
    return EngineMemory(
        engine="vllm", vllm_version=vllm_version, device_total_gib=d.gpu.memory_gb * 1e9 / GIB,
        visible_total_gib=visible, utilization=d.memory_utilization, requested_gib=requested,
        weights_gib=weights, activation_peak_gib=activation, non_torch_gib=non_torch, cuda_graph_gib=graphs,
        reserve_override_gib=override, kv_budget_gib=budget, block_size=block_size,
        max_model_len=max_model_len, max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=seqs,
        kv_groups=kv_cache_groups(m, fraction), group_size_layers=size, page_bytes_per_layer=page,
        num_gpu_blocks=num_blocks, kv_cache_tokens=tokens, max_concurrency=concurrency,
        log_lines=format_log_lines(tokens, max_model_len, concurrency), sampler=sampler_path,
        rotary_cache_gib=rotary if override is None else 0.0,
        allocator_rounding_gib=rounding if override is None else 0.0,
    )


def startup_memory(d: Deployment, context_len: int) -> EngineMemory:
    """The deployment's start-up accounting under its own knobs (max_model_len defaults to the context)."""
    return plan_engine_memory(d, d.max_model_len or context_len, d.max_num_batched_tokens, d.block_size,
                              enforce_eager=d.enforce_eager, max_num_seqs=d.max_num_seqs,
                              vllm_version=d.vllm_version or VLLM_RULES_VERSION, sampler=d.vllm_sampler)


def max_batch_for_context(e: EngineMemory, context_len: int) -> int:
    """Sequences of `context_len` tokens the block pool holds at once (blocks are whole)."""
    size, layout = kv_cache_layout(e.kv_groups)
    per_seq = sum(
        n * blocks_per_request(g, context_len, e.block_size, e.max_num_batched_tokens) for g, n in layout
    )
    return e.num_gpu_blocks // per_seq if per_seq else 0
