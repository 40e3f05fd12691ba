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
  (`vocab_parallel_embedding.py` DEFAULT_VOCAB_PADDING_SIZE = 64).
* `torch_peak_increase` is the peak of `profile_run()`: a dummy forward of `max_num_batched_tokens`
  tokens (`gpu_model_runner.py` `_dummy_run(self.max_num_tokens)`) and a dummy sampler run over
  `max_num_seqs` rows of float32 logits (`_dummy_sampler_run`). The forward peak is the widest live
  set of one layer: the residual and normed hidden state plus the MLP's gate_up and activation
  outputs (dense), or fused MoE's intermediate caches `[tokens, top_k, 2N]`, `[tokens, top_k, N]`,
  `[tokens, top_k, hidden]` (`fused_moe.py`).
* `non_torch_increase` is what the forward allocates outside torch (cuBLAS workspaces, NCCL and
  custom all-reduce buffers when TP > 1): 0.03-0.35 GiB at TP 1 and 0.25-0.30 GiB at TP 2 in the
  V0 logs that print it (vllm#10517, #13061, #15815).
* CUDA graphs: up to vLLM 0.20 they are captured after the KV cache is allocated
  (`compile_or_warm_up_model` runs after `initialize_from_config`), so they come out of the
  (1 - utilization) headroom. From 0.21 the profiler estimates the graph pool before sizing the KV
  cache (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS on by default); `enforce_eager` removes it.
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
from dataclasses import dataclass, field

from planner.contract.deployment import Deployment
from planner.hardware.parallelism import sharding
from planner.model.model_shapes import ModelSpec
from planner.model.precision import bytes_per_value

GIB = float(2**30)

VLLM_RULES_VERSION = "0.21"  # the rules the plan follows by default (graph pool profiled before the KV cache)
GRAPH_POOL_FROM_VERSION = (0, 21)
DRIVER_RESERVED_GIB = 0.45  # nvidia-smi total minus torch's mem_get_info total, see the module docstring
VOCAB_PADDING = 64  # vLLM DEFAULT_VOCAB_PADDING_SIZE
NON_TORCH_GIB_TP1 = 0.15  # cuBLAS/cuDNN workspaces; V0 logs print 0.03-0.35 GiB at TP 1
NON_TORCH_GIB_TP_GT1 = 0.30  # + NCCL and custom all-reduce buffers; V0 logs print 0.25-0.30 GiB at TP 2
ACTIVATION_BYTES = 2.0  # bf16/fp16 activations in the profiling forward
LOGITS_BYTES = 4.0  # the sampler works on float32 logits
LOGITS_COPIES = 2.0  # logits and probabilities live together in the dummy sampler run
GRAPH_CAPTURE_TOKENS = 512  # vLLM's largest default CUDA-graph capture size
GRAPH_POOL_FIXED_GIB = 0.25  # graph executables and per-size outputs; an estimate, not validated by a public log
# vLLM `_set_default_args`: GPUs with at least 70 GiB (A100 excepted) default to max_num_seqs 1024, others 256
LARGE_GPU_GIB = 70.0
MAX_NUM_SEQS_LARGE_GPU = 1024
MAX_NUM_SEQS_DEFAULT = 256


@dataclass(frozen=True)
class KvCacheGroup:
    """Layers that share one block table: full attention, or a sliding window of `window` tokens."""

    kind: str  # "full_attention" | "sliding_window"
    n_layers: int
    window: int | None = None


@dataclass(frozen=True)
class EngineMemory:
    """One GPU's memory as vLLM accounts for it at start-up (GiB)."""

    engine: str
    vllm_version: str
    device_total_gib: float
    visible_total_gib: float
    utilization: float
    requested_gib: float
    weights_gib: float
    activation_peak_gib: float
    non_torch_gib: float
    cuda_graph_gib: float
    reserve_override_gib: float | None
    kv_budget_gib: float
    block_size: int
    max_model_len: int
    max_num_batched_tokens: int
    max_num_seqs: int
    kv_groups: tuple[KvCacheGroup, ...]
    group_size_layers: int
    page_bytes_per_layer: float
    num_gpu_blocks: int
    kv_cache_tokens: int
    max_concurrency: float
    log_lines: tuple[str, ...] = field(default=())

    @property
    def overheads_gib(self) -> float:
        """Everything between the utilization cap and the weights+KV: activations, non-torch, graphs."""
        if self.reserve_override_gib is not None:
            return self.reserve_override_gib
        return self.activation_peak_gib + self.non_torch_gib + self.cuda_graph_gib


def parse_version(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def visible_total_gib(device_memory_gb: float) -> float:
    """What torch.cuda.mem_get_info reports as total: the device-visible memory less the driver's share."""
    return max(device_memory_gb * 1e9 / GIB - DRIVER_RESERVED_GIB, 0.0)


def default_max_num_seqs(visible_gib: float, gpu_name: str) -> int:
    large = visible_gib >= LARGE_GPU_GIB and "a100" not in gpu_name.lower()
    return MAX_NUM_SEQS_LARGE_GPU if large else MAX_NUM_SEQS_DEFAULT


def padded_vocab_per_gpu(vocab_size: int, tp: int) -> float:
    padded = math.ceil(vocab_size / VOCAB_PADDING) * VOCAB_PADDING
    return padded / tp


def weights_gib_per_gpu(d: Deployment) -> float:
    """Weights as loaded on the busiest GPU (planner/hardware/parallelism.py's layout): the stage's layers with the
    quantized body over TP and routed experts over the expert shards, RMSNorm weights replicated on
    every rank, embedding and LM head in 16 bits over vocabulary rows padded to 64 and split over TP
    (first and last stage)."""
    m = d.model
    p = d.params
    s = sharding(d)
    w, emb_bytes = bytes_per_value(d.weights), max(bytes_per_value(d.weights), 2.0)
    w_dense = emb_bytes if m.quantized_scope == "routed_experts" and m.moe is not None else w
    dense_body = (p.body_matmul - p.expert_params) * w_dense / d.tp
    experts = p.expert_params * w * s.expert_weight_fraction
    norms = p.norms * emb_bytes  # replicated on every rank
    layers = (dense_body + experts + norms) * s.stage_layer_fraction
    vocab_rows = padded_vocab_per_gpu(m.vocab_size, d.tp) * p.scale
    tables = 1 if (m.tied_embeddings or s.pp > 1) else 2
    return (layers + vocab_rows * m.d_model * emb_bytes * tables) / GIB


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


def activation_peak_gib(m: ModelSpec, tp: int, max_num_batched_tokens: int, max_num_seqs: int) -> float:
    forward = max_num_batched_tokens * forward_activation_elems_per_token(m, tp) * ACTIVATION_BYTES
    logits = max_num_seqs * m.vocab_size * LOGITS_BYTES * LOGITS_COPIES
    return (forward + logits) / GIB


def non_torch_gib(tp: int) -> float:
    return NON_TORCH_GIB_TP1 if tp == 1 else NON_TORCH_GIB_TP_GT1


def cuda_graph_gib(m: ModelSpec, tp: int, version: str, enforce_eager: bool) -> float:
    if enforce_eager or parse_version(version) < GRAPH_POOL_FROM_VERSION:
        return 0.0
    per_token = forward_activation_elems_per_token(m, tp) * ACTIVATION_BYTES
    return (GRAPH_CAPTURE_TOKENS * per_token) / GIB + GRAPH_POOL_FIXED_GIB


def kv_cache_groups(m: ModelSpec, stage_layer_fraction: float = 1.0) -> tuple[KvCacheGroup, ...]:
    """The KV-cache groups of the busiest pipeline stage (all layers at pp 1)."""
    windowed = math.ceil(m.n_windowed_layers * stage_layer_fraction)
    full = math.ceil((m.n_layers - m.n_windowed_layers) * stage_layer_fraction)
    groups = []
    if full:
        groups.append(KvCacheGroup("full_attention", full))
    if windowed:
        groups.append(KvCacheGroup("sliding_window", windowed, m.sliding_window))
    return tuple(groups)


def kv_page_bytes_per_layer(m: ModelSpec, tp: int, kv_cache: str, block_size: int) -> float:
    """One block of one layer on one GPU (K and V, or the MLA latent, replicated across TP)."""
    if m.mla is not None:
        per_token = m.mla.kv_lora_rank + m.mla.qk_rope_head_dim
    else:
        per_token = 2 * max(1, math.ceil(m.n_kv_heads / tp)) * m.head_dim_resolved
    return block_size * per_token * bytes_per_value(kv_cache)


def blocks_per_request(group: KvCacheGroup, max_model_len: int, block_size: int, max_num_batched_tokens: int) -> int:
    """`max_memory_usage_bytes` / page size of a group's spec (FullAttentionSpec, SlidingWindowSpec)."""
    if group.kind == "sliding_window" and group.window is not None:
        tokens = min(group.window - 1 + max_num_batched_tokens, max_model_len)
        return math.ceil(tokens / block_size) + 1
    return math.ceil(max_model_len / block_size)


def kv_cache_layout(groups: tuple[KvCacheGroup, ...]) -> tuple[int, list[tuple[KvCacheGroup, int]]]:
    """Group size in layers and each layer type's number of groups (uniform-page hybrid allocator:
    the group size is the smallest layer count among the types; larger types take several groups)."""
    if len(groups) == 1:
        return groups[0].n_layers, [(groups[0], 1)]
    size = min(g.n_layers for g in groups)
    return size, [(g, math.ceil(g.n_layers / size)) for g in groups]


def kv_tokens_and_concurrency(m: ModelSpec, tp: int, kv_cache: str, kv_budget_gib: float, block_size: int,
                              max_model_len: int, max_num_batched_tokens: int,
                              stage_layer_fraction: float = 1.0) -> tuple[int, int, float, int, float]:
    """num_gpu_blocks, logged KV cache tokens, max concurrency, group size, page bytes per layer."""
    groups = kv_cache_groups(m, stage_layer_fraction)
    page = kv_page_bytes_per_layer(m, tp, kv_cache, block_size)
    size, layout = kv_cache_layout(groups)
    budget_bytes = max(kv_budget_gib, 0.0) * GIB
    num_blocks = int(budget_bytes // page // size)
    n_groups = sum(n for _, n in layout)
    tokens = num_blocks // n_groups * block_size
    per_request = sum(n * blocks_per_request(g, max_model_len, block_size, max_num_batched_tokens) for g, n in layout)
    concurrency = num_blocks / per_request if per_request else 0.0
    return num_blocks, tokens, concurrency, size, page


def format_log_lines(tokens: int, max_model_len: int, concurrency: float) -> tuple[str, str]:
    """The two lines exactly as vLLM's `_report_kv_cache_config` prints them."""
    return (f"GPU KV cache size: {tokens:,} tokens",
            f"Maximum concurrency for {max_model_len:,} tokens per request: {concurrency:.2f}x")


def plan_engine_memory(d: Deployment, max_model_len: int, max_num_batched_tokens: int, block_size: int,
                       enforce_eager: bool = False, max_num_seqs: int | None = None,
                       vllm_version: str = VLLM_RULES_VERSION) -> EngineMemory:
    """vLLM's KV budget and block pool on one GPU of the deployment."""
    m = d.model
    visible = visible_total_gib(d.gpu.memory_gb)
    seqs = max_num_seqs if max_num_seqs is not None else default_max_num_seqs(visible, d.gpu.name)
    requested = visible * d.memory_utilization
    weights = weights_gib_per_gpu(d)
    activation = activation_peak_gib(m, d.tp, max_num_batched_tokens, seqs)
    non_torch = non_torch_gib(d.tp)
    graphs = cuda_graph_gib(m, d.tp, vllm_version, enforce_eager)
    override = d.reserve_gb * 1e9 / GIB if d.reserve_gb is not None else None
    overheads = override if override is not None else activation + non_torch + graphs
    budget = requested - weights - overheads
    fraction = sharding(d).stage_layer_fraction
    num_blocks, tokens, concurrency, size, page = kv_tokens_and_concurrency(
        m, d.tp, d.kv_cache, budget, block_size, max_model_len, max_num_batched_tokens, fraction)
    return EngineMemory(
        engine="vllm", vllm_version=vllm_version, device_total_gib=d.gpu.memory_gb * 1e9 / GIB,
        visible_total_gib=visible, utilization=d.memory_utilization, requested_gib=requested,
        weights_gib=weights, activation_peak_gib=activation, non_torch_gib=non_torch, cuda_graph_gib=graphs,
        reserve_override_gib=override, kv_budget_gib=budget, block_size=block_size, max_model_len=max_model_len,
        max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=seqs, kv_groups=kv_cache_groups(m, fraction),
        group_size_layers=size, page_bytes_per_layer=page, num_gpu_blocks=num_blocks, kv_cache_tokens=tokens,
        max_concurrency=concurrency, log_lines=format_log_lines(tokens, max_model_len, concurrency),
    )


def max_batch_for_context(e: EngineMemory, context_len: int) -> int:
    """Sequences of `context_len` tokens the block pool holds at once (blocks are whole)."""
    if e.engine == "sglang":
        return e.kv_cache_tokens // context_len
    if e.engine == "trt-llm":
        return e.num_gpu_blocks // math.ceil(context_len / e.block_size)
    size, layout = kv_cache_layout(e.kv_groups)
    per_seq = sum(n * blocks_per_request(g, context_len, e.block_size, e.max_num_batched_tokens) for g, n in layout)
    return e.num_gpu_blocks // per_seq if per_seq else 0


# --- SGLang (sglang/srt/model_executor/model_runner.py `profile_max_num_token`) ---------------------------
#   rest_memory = available_gpu_memory - total_gpu_memory x (1 - mem_fraction_static)
#   max_total_num_tokens = rest_memory x 2^30 // cell_size
# `total_gpu_memory` is the free memory once the distributed environment is up (before the weights),
# `available_gpu_memory` the free memory after loading them. So the KV pool is
#   (framework total - start-up memory) x mem_fraction_static - weights,
# one token per slot (page size 1), cell_size = kv heads per GPU x head_dim x layers x 2 x dtype bytes (MLA:
# (kv_lora_rank + rope dim) x layers x dtype bytes). Activations and CUDA graphs live in the (1 - fraction)
# share. The scenario's `memory.utilization` is read as `mem_fraction_static`.
SGLANG_STARTUP_GIB_TP1 = 0.5  # CUDA context and cuBLAS handles before the weights (an estimate)
SGLANG_STARTUP_GIB_TP_GT1 = 1.5  # + NCCL communicators and custom all-reduce buffers (an estimate)


def sglang_startup_gib(tp: int) -> float:
    return SGLANG_STARTUP_GIB_TP1 if tp == 1 else SGLANG_STARTUP_GIB_TP_GT1


def sglang_cell_bytes(m: ModelSpec, tp: int, kv_cache: str, stage_layer_fraction: float = 1.0) -> float:
    layers = math.ceil(m.n_layers * stage_layer_fraction)
    return kv_page_bytes_per_layer(m, tp, kv_cache, 1) * layers


def format_sglang_log_line(tokens: int, k_gib: float, v_gib: float) -> str:
    """SGLang's `KV Cache is allocated` line (its "GB" are GiB: bytes / 2^30)."""
    return f"KV Cache is allocated. #tokens: {tokens}, K size: {k_gib:.2f} GB, V size: {v_gib:.2f} GB"


def plan_sglang_memory(d: Deployment, max_model_len: int) -> EngineMemory:
    m = d.model
    fraction = sharding(d).stage_layer_fraction
    visible = visible_total_gib(d.gpu.memory_gb)
    mfs = d.memory_utilization
    startup = sglang_startup_gib(d.tp)
    weights = weights_gib_per_gpu(d)
    budget = (visible - startup) * mfs - weights
    cell = sglang_cell_bytes(m, d.tp, d.kv_cache, fraction)
    tokens = max(0, int(budget * GIB // cell)) if budget > 0 else 0
    half = tokens * cell / GIB / (1 if m.mla is not None else 2)
    line = format_sglang_log_line(tokens, half, 0.0 if m.mla is not None else half)
    return EngineMemory(
        engine="sglang", vllm_version="", device_total_gib=d.gpu.memory_gb * 1e9 / GIB, visible_total_gib=visible,
        utilization=mfs, requested_gib=visible * mfs, weights_gib=weights, activation_peak_gib=0.0,
        non_torch_gib=startup * mfs, cuda_graph_gib=0.0, reserve_override_gib=None, kv_budget_gib=budget,
        block_size=1, max_model_len=max_model_len, max_num_batched_tokens=d.max_num_batched_tokens, max_num_seqs=0,
        kv_groups=(KvCacheGroup("full_attention", math.ceil(m.n_layers * fraction)),), group_size_layers=1,
        page_bytes_per_layer=kv_page_bytes_per_layer(m, d.tp, d.kv_cache, 1), num_gpu_blocks=tokens,
        kv_cache_tokens=tokens, max_concurrency=tokens / max_model_len if max_model_len else 0.0, log_lines=(line,),
    )


# --- TensorRT-LLM (cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp `getMaxNumTokens` / pyexecutor) ----------
#   maxTokens = freeGpuMemoryFraction x (free memory + pool free) / cache bytes per token
# measured after the engine (weights) and the runtime buffers (activations, decoder) are allocated, and
# logged as "Memory usage when calculating max tokens in paged kv cache: total: T GiB, available: A GiB" and
# "[MemUsageChange] Allocated K GiB for max tokens in paged KV cache (N)". The scenario's
# `memory.utilization` is read as `free_gpu_memory_fraction`; blocks hold `block_size` tokens.
def format_trtllm_log_lines(total_gib: float, available_gib: float, kv_gib: float, tokens: int) -> tuple[str, str]:
    return (f"Memory usage when calculating max tokens in paged kv cache: total: {total_gib:.2f} GiB, "
            f"available: {available_gib:.2f} GiB",
            f"[MemUsageChange] Allocated {kv_gib:.2f} GiB for max tokens in paged KV cache ({tokens}).")


def plan_trtllm_memory(d: Deployment, max_model_len: int, max_num_seqs: int | None = None) -> EngineMemory:
    m = d.model
    fraction = sharding(d).stage_layer_fraction
    visible = visible_total_gib(d.gpu.memory_gb)
    seqs = max_num_seqs if max_num_seqs is not None else default_max_num_seqs(visible, d.gpu.name)
    weights = weights_gib_per_gpu(d)
    activation = activation_peak_gib(m, d.tp, d.max_num_batched_tokens, seqs)
    non_torch = non_torch_gib(d.tp)
    available = max(visible - weights - activation - non_torch, 0.0)
    budget = available * d.memory_utilization
    page = kv_page_bytes_per_layer(m, d.tp, d.kv_cache, d.block_size) * math.ceil(m.n_layers * fraction)
    blocks = int(budget * GIB // page) if budget > 0 else 0
    tokens = blocks * d.block_size
    return EngineMemory(
        engine="trt-llm", vllm_version="", device_total_gib=d.gpu.memory_gb * 1e9 / GIB, visible_total_gib=visible,
        utilization=d.memory_utilization, requested_gib=visible - (1 - d.memory_utilization) * available,
        weights_gib=weights, activation_peak_gib=activation, non_torch_gib=non_torch, cuda_graph_gib=0.0,
        reserve_override_gib=None, kv_budget_gib=budget, block_size=d.block_size, max_model_len=max_model_len,
        max_num_batched_tokens=d.max_num_batched_tokens, max_num_seqs=seqs,
        kv_groups=(KvCacheGroup("full_attention", math.ceil(m.n_layers * fraction)),),
        group_size_layers=math.ceil(m.n_layers * fraction),
        page_bytes_per_layer=kv_page_bytes_per_layer(m, d.tp, d.kv_cache, d.block_size), num_gpu_blocks=blocks,
        kv_cache_tokens=tokens, max_concurrency=tokens / max_model_len if max_model_len else 0.0,
        log_lines=format_trtllm_log_lines(visible, available, blocks * page / GIB, tokens),
    )
