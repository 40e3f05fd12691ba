"""The time model: decode step (ITL) and prefill (TTFT) from roofline work and engine efficiency.

Decode step = GEMM term + attention term + activation traffic + TP all-reduces + fixed costs
(kernels per layer inside a CUDA graph, the engine's per-step overhead). Each of the first two joins
its compute time and its memory time with a p-norm (`smoothing`): our compiled steps near the ridge
cost more than max(compute, memory) (p = 2 earns its place in cross-validation, docs/ACCURACY.md).
Prefill is the same sum at prefill rates. With `ideal()` efficiency every fixed cost is zero, the
p-norm is max() and the step reduces to the roofline.
The bound (`*_bound_ms`) is the pure roofline of the same step: max(all FLOPs / peak, all bytes / BW).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt

from planner.core.deployment import Deployment
from planner.core.precision import bits_per_value
from planner.hardware.communication import ep_communication_ms, pp_communication_ms, tp_communication_ms
from planner.hardware.parallelism import sharding
from planner.physics import kernel_step
from planner.physics.roofline import (
    StepWork,
    decode_micro_batch,
    decode_work,
    prefill_activation_bytes,
    prefill_attention_flops,
    prefill_gemm_flops,
    prefill_work,
    roofline_floor_ms,
    routed_expert_work,
)


def _join(compute_ms: npt.ArrayLike, memory_ms: npt.ArrayLike, p: float) -> npt.NDArray[np.float64]:
    """p-norm of compute and memory time; p = 0 means max()."""
    if p <= 0:
        return np.maximum(compute_ms, memory_ms)
    hi = np.maximum(np.maximum(compute_ms, memory_ms), 1e-30)
    return hi * ((compute_ms / hi) ** p + (memory_ms / hi) ** p) ** (1.0 / p)


@dataclass(frozen=True)
class StepTime:
    gemm_ms: np.ndarray
    attention_ms: np.ndarray
    activations_ms: np.ndarray
    # TP all-reduces and the fixed costs: a float where the whole batch shares one value (0 without TP)
    communication_ms: np.ndarray | float
    overhead_ms: np.ndarray | float
    work: StepWork
    deployment: Deployment = field(repr=False, compare=False)
    # pipeline point-to-point sends and expert all-to-alls (zero without pp / ep)
    pp_ms: np.ndarray | float = 0.0
    ep_ms: np.ndarray | float = 0.0

    # The step is immutable: its total and its bound are computed once, on first use (the sizing search
    # reads the total of thousands of steps and never their bound).
    @functools.cached_property
    def total_ms(self) -> np.ndarray:
        total = self.gemm_ms + self.attention_ms + self.activations_ms
        # in the same order; a term that is the float 0.0 (no TP, pp or ep) is skipped: adding it changes no
        # bit of a sum of non-negative times (thousands of steps a sizing request)
        for term in (self.communication_ms, self.overhead_ms, self.pp_ms, self.ep_ms):
            if not (isinstance(term, float) and term == 0.0):
                total = total + term
        return total

    @functools.cached_property
    def bound_ms(self) -> np.ndarray:
        """The pure roofline of the same work (`*_bound_ms`)."""
        return _bound_ms(self.deployment, self.work)

    def breakdown(self, index: int | tuple[int, ...] = ()) -> dict[str, float]:
        def at(name: str) -> float:  # the scalar terms take the GEMMs' shape
            value = getattr(self, name)
            return float((np.asarray(value) if name in self._ARRAYS else
                          np.broadcast_to(value, np.shape(self.gemm_ms)))[index])

        return {name: at(name) for name in ("gemm_ms", "attention_ms", "activations_ms", "communication_ms",
                                            "overhead_ms", "pp_ms", "ep_ms")}

    _ARRAYS = ("gemm_ms", "attention_ms", "activations_ms")


def _bound_ms(d: Deployment, work: StepWork) -> np.ndarray:
    return roofline_floor_ms(d, work)  # the one floor (planner.physics.roofline)


def is_weight_only_4bit(d: Deployment) -> bool:
    """4-bit weights multiplied in 16-bit math: dequantizing kernels (tinygemm, Marlin), not native GEMMs."""
    return bits_per_value(d.weights) < 8 and bits_per_value(d.compute) >= 16


def weight_bandwidth_efficiency(d: Deployment) -> float:
    """Dequantizing kernels for sub-16-bit weights reach less of HBM bandwidth at small batch."""
    e = d.efficiency
    if is_weight_only_4bit(d):
        return e.int4_bandwidth
    return e.quantized_bandwidth if bits_per_value(d.weights) < 16 else e.bandwidth


def _kv_bandwidth_efficiency(d: Deployment) -> float:
    return (
        d.efficiency.kv_quantized_bandwidth if bits_per_value(d.kv_cache) < 16 else d.efficiency.kv_bandwidth
    )


def _layer_overhead_ms(d: Deployment, per_layer_us: float) -> float:
    """Kernel costs inside a graph: every layer's, plus the extra kernels of each MoE layer."""
    m = d.model
    moe_layers = 0 if m.moe is None else m.n_layers - m.moe.first_dense_layers
    return (m.n_layers * per_layer_us + moe_layers * d.efficiency.moe_layer_overhead_us) / 1e3


def _fixed_costs_ms(d: Deployment, per_layer_us: float, fixed_ms: float) -> float:
    """A pass's fixed costs: its kernels per layer, and it crosses pp stages, each its own scheduled step."""
    return _layer_overhead_ms(d, per_layer_us) + fixed_ms * d.pp


def _gemm_ms(d: Deployment, compute_ms: npt.ArrayLike, weight_bytes: npt.ArrayLike,
             p: float) -> npt.NDArray[np.float64]:
    """A pass's GEMMs: their compute time joined with one read of the weights they stream."""
    weight_bw = weight_bandwidth_efficiency(d) * d.gpu.hbm_tb_s * 1e12
    weight_ms = np.asarray(weight_bytes, dtype=float) / weight_bw * 1e3
    return _join(compute_ms, weight_ms, p)


def _step_time(d: Deployment, work: StepWork, tokens: npt.ArrayLike, gemm_eff: float, attn_compute_eff: float,
               per_layer_us: float, fixed_ms: float, p: float, attention_groups: int = 1) -> StepTime:
    """`tokens`: tokens one pass carries through a stage (one micro-batch, or one prompt), spread over
    `attention_groups` data-parallel attention groups of tp GPUs."""
    group_tokens = np.asarray(tokens, dtype=float)
    if attention_groups != 1:
        group_tokens = group_tokens / attention_groups
    bw = d.gpu.hbm_tb_s * 1e12
    peak_c = d.gpu.peak_tflops(d.compute) * 1e12
    peak_attn = d.gpu.peak_tflops("bf16") * 1e12
    gemm = _gemm_ms(d, work.gemm_flops / (gemm_eff * peak_c) * 1e3, work.weight_bytes, p)
    attention = _join(work.attention_flops / (attn_compute_eff * peak_attn) * 1e3,
                      work.kv_bytes / (_kv_bandwidth_efficiency(d) * bw) * 1e3, p)
    activations = work.activation_bytes / (d.efficiency.bandwidth * bw) * 1e3
    # Terms the batch shares stay scalars: the total adds them elementwise all the same (x + 0.0 is what
    # adding an array of zeros gives, so no term changes a bit of the total).
    comm = tp_communication_ms(d, group_tokens) if d.tp > 1 else 0.0
    overhead = _fixed_costs_ms(d, per_layer_us, fixed_ms)
    # Expert all-to-alls overlap the other half of a two-micro-batch step (DeepSeek's dual micro-batch
    # overlap, SGLang two-batch overlap, vLLM DBO): only what outlasts the compute is exposed. Without EP
    # that is max(0 - overlap x (a finite or infinite step), 0) = 0 where the overlap is positive.
    overlap = d.efficiency.ep_overlap
    ep_exposed: np.ndarray | float = 0.0
    if (d.ep > 1 and d.model.moe is not None) or not overlap > 0:
        ep_exposed = np.maximum(ep_communication_ms(d, group_tokens / d.tp)
                                - overlap * (gemm + attention + activations), 0.0)
    pp = pp_communication_ms(d, tokens) if d.pp > 1 else 0.0
    return StepTime(gemm, attention, activations, comm, overhead, work, d, pp, ep_exposed)


def _from_kernels(d: Deployment, work: StepWork, parts: kernel_step.StepParts) -> StepTime:
    """A kernel-table step, never below the roofline of its work (the GEMM term takes up any shortfall)."""
    step = StepTime(parts.gemm_ms, parts.attention_ms, np.zeros_like(parts.gemm_ms), parts.communication_ms,
                    parts.overhead_ms, work, d, parts.pp_ms, parts.ep_ms)
    short = np.maximum(step.bound_ms - step.total_ms, 0.0)
    if not np.any(short > 0):
        return step
    return StepTime(parts.gemm_ms + short, parts.attention_ms, step.activations_ms, parts.communication_ms,
                    parts.overhead_ms, work, d, parts.pp_ms, parts.ep_ms)


def decode_step(
    d: Deployment, batch: npt.ArrayLike, context: npt.ArrayLike, tokens_per_sequence: int = 1
) -> StepTime:
    """One decode step: the inter-token latency of every sequence in the batch."""
    e = d.efficiency
    work = decode_work(d, batch, context, tokens_per_sequence)
    if e.kernel_tables is not None:  # the kernel-table predictor (planner.physics.step_predictor)
        return _from_kernels(d, work, kernel_step.decode_parts(d, batch, context, tokens_per_sequence))
    tokens = decode_micro_batch(d, batch) * tokens_per_sequence
    gemm_eff = e.int4_compute if is_weight_only_4bit(d) else e.compute
    return _step_time(d, work, tokens, gemm_eff, e.compute, e.layer_overhead_us, e.step_overhead_us / 1e3,
                      e.smoothing, sharding(d).attention_dp)


def _prefill_gemm_efficiency(d: Deployment) -> float:
    e = d.efficiency
    return e.prefill_quantized_compute if bits_per_value(d.compute) < 16 else e.prefill_compute


def _routed_from_tables_ms(d: Deployment,
                           routed_tokens: npt.ArrayLike) -> npt.NDArray[np.float64] | None:
    """An MoE prefill's routed experts, every MoE layer, from the engine's kernel tables
    (`prefill_moe_from_tables`); None where the efficiency does not ask for it or the GPU x engine has
    none."""
    share = d.efficiency.prefill_moe_from_tables
    if share <= 0 or d.model.moe is None:
        return None
    key = kernel_step.tables_key(getattr(d.gpu, "id", None), d.efficiency.name)  # a custom GPU has none
    if key is None:
        return None
    tables_ms = kernel_step.routed_moe_ms(d, key, routed_tokens)
    if share >= 1:
        return tables_ms
    flops, _ = routed_expert_work(d, routed_tokens)
    at_rate_ms = flops / (_prefill_gemm_efficiency(d) * d.gpu.peak_tflops(d.compute) * 1e12) * 1e3
    return np.asarray(share * tables_ms + (1 - share) * at_rate_ms, dtype=float)


def prefill(d: Deployment, prompt_len: npt.ArrayLike, busy_groups: int = 1) -> StepTime:
    """One request's prompt processed alone: GEMMs and attention at prefill rates, a kernel cost per
    layer, and the engine's fixed cost per prefill (scheduling, input preparation). A short prompt's
    GEMMs cost about one weight read: their compute hides under it up to the knee (`prefill_smoothing`).
    `busy_groups`: attention groups prefilling at once (planner.physics.roofline.prefill_work)."""
    e = d.efficiency
    work = prefill_work(d, prompt_len, busy_groups)
    if e.kernel_tables is not None:
        return _from_kernels(d, work, kernel_step.prefill_parts(d, prompt_len, busy_groups))
    routed_tokens = np.asarray(prompt_len, dtype=float) * busy_groups
    routed_ms = _routed_from_tables_ms(d, routed_tokens)
    if routed_ms is None:
        return _step_time(d, work, prompt_len, _prefill_gemm_efficiency(d), e.attention_compute,
                          e.prefill_layer_overhead_us, e.prefill_overhead_ms, e.prefill_smoothing)
    # the routed experts from the tables, the rest (attention projections, shared experts, dense layers,
    # their weight read) as before; never below the roofline of the whole work
    flops, weight_bytes = routed_expert_work(d, routed_tokens)
    rest = StepWork(work.gemm_flops - flops, work.attention_flops, work.weight_bytes - weight_bytes,
                    work.kv_bytes, work.activation_bytes)
    step = _step_time(d, rest, prompt_len, _prefill_gemm_efficiency(d), e.attention_compute,
                      e.prefill_layer_overhead_us, e.prefill_overhead_ms, e.prefill_smoothing)
    step = replace(step, gemm_ms=step.gemm_ms + routed_ms, work=work)
    short = np.maximum(step.bound_ms - step.total_ms, 0.0)
    return replace(step, gemm_ms=step.gemm_ms + short) if np.any(short > 0) else step


def _pass_gemm_ms(d: Deployment, tokens: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """GEMMs of a pass carrying prompt tokens over `tokens` tokens in all (decodes and prompt chunks),
    at prefill rates, with one weight read."""
    work = prefill_work(d, np.asarray(tokens, dtype=float))
    peak_c = d.gpu.peak_tflops(d.compute) * 1e12
    return _gemm_ms(d, work.gemm_flops / (_prefill_gemm_efficiency(d) * peak_c) * 1e3, work.weight_bytes,
                    d.efficiency.prefill_smoothing)


def shared_pass_gemm_ms(d: Deployment, chunk_tokens: npt.ArrayLike,
                        riding_tokens: npt.ArrayLike = 0.0) -> npt.NDArray[np.float64]:
    """GEMM time a prompt chunk adds to a pass that already carries `riding_tokens` tokens (decodes and
    other chunks), beyond what it adds to an empty pass. The weights are read once for all of them; the
    compute of the tokens the pass carries first already fills part of that read's shadow, so a chunk
    riding a full pass pays more of its own compute than one riding alone: g(R + P) - g(R) - (g(P) - g(0))
    for the pass's GEMM time g over its tokens, >= 0 since g is convex, 0 when nothing rides."""
    p = np.asarray(chunk_tokens, dtype=float)
    r = np.asarray(riding_tokens, dtype=float)
    if not (r > 0).any():  # nothing rides: the same zeros, without the four passes np.where would discard
        return np.zeros(np.broadcast_shapes(r.shape, p.shape))
    extra = _pass_gemm_ms(d, r + p) - _pass_gemm_ms(d, r) - _pass_gemm_ms(d, p) + _pass_gemm_ms(d, 0.0)
    return np.where(r > 0, np.maximum(extra, 0.0), 0.0)


def pass_token_terms_ms(d: Deployment, tokens: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """The terms of a prefill pass that are functions of all the tokens it carries, not of how they split
    into prompts: its GEMMs (one read of the weights and, under MoE, of each expert some token routes to),
    TP all-reduces, activations, expert all-to-alls and pipeline sends. An engine flattens every prompt chunk
    and decode of an iteration into one token batch for these; only attention (per sequence) and the fixed
    costs are the prompts' own. Prefill's (analytic or kernel-table) at `tokens` tokens."""
    step = prefill(d, np.asarray(tokens, dtype=float))
    return np.asarray(step.total_ms - step.attention_ms - step.overhead_ms, dtype=float)


def own_pass_terms_ms(d: Deployment, prompt_len: npt.ArrayLike,
                      cached_tokens: npt.ArrayLike = 0.0) -> npt.NDArray[np.float64]:
    """What a prompt's work alone (prefill_chunk_work_ms: its prefill less its cached prefix's, or less an
    empty iteration) carries of pass_token_terms_ms: those terms at its length less at its prefix's. Under
    MoE that includes a read of every expert its tokens route to, which a pass shared with other tokens
    reads once for all of them."""
    return np.asarray(pass_token_terms_ms(d, prompt_len) - pass_token_terms_ms(d, cached_tokens), dtype=float)


def ttft_ms(d: Deployment, prefill_ms: npt.ArrayLike) -> npt.NDArray[np.float64]:
    return np.asarray(prefill_ms, dtype=float) + d.efficiency.ttft_overhead_ms



def prefill_floor_ms(d: Deployment, prompt_len: float, alltoall: bool = False) -> float:
    """A lower bound on prefill(d, [prompt_len]).total_ms without its p-norm joins: each join (GEMMs,
    attention) is at least its compute input, the other terms are those of the step, pipeline sends and
    expert all-to-alls are at least 0, and a sum in the step's order of terms no larger than the step's is
    no larger in floating point; 1e-9 off for the rounding of terms computed here apart. A kernel-table
    deployment's prefill is bounded by the roofline of its work instead (its joins are measured kernels).
    `alltoall`: with what an EP layout's expert all-to-alls add at least (prefill_floors_ms)."""
    return prefill_floors_ms(d, prompt_len)[1 if alltoall else 0]


def prefill_floors_ms(d: Deployment, prompt_len: float) -> tuple[float, float]:
    """prefill_floor_ms without and with the expert all-to-alls, from one evaluation of the terms (the sizing
    search's prefill pool orders its workers by the second; the aggregated search keeps the first, which
    decides the families it says why of)."""
    e = d.efficiency
    s = float(prompt_len)
    if e.kernel_tables is not None:  # the kernel-table step is held at its work's roofline, never below
        roofline = float(_bound_ms(d, prefill_work(d, [s]))[0]) * (1.0 - 1e-9)
        return roofline, roofline
    bw = d.gpu.hbm_tb_s * 1e12
    peak_c = d.gpu.peak_tflops(d.compute) * 1e12
    peak_attn = d.gpu.peak_tflops("bf16") * 1e12
    gemm = prefill_gemm_flops(d, s) / (_prefill_gemm_efficiency(d) * peak_c) * 1e3
    routed_ms = _routed_from_tables_ms(d, [s])
    if routed_ms is not None:  # the routed experts at the tables' time, the rest at its rate
        flops, _ = routed_expert_work(d, np.array([s]))
        gemm = gemm - float(flops[0]) / (_prefill_gemm_efficiency(d) * peak_c) * 1e3 + float(routed_ms[0])
    attention = prefill_attention_flops(d, s) / (e.attention_compute * peak_attn) * 1e3
    activations = prefill_activation_bytes(d, s) / (e.bandwidth * bw) * 1e3
    comm = float(tp_communication_ms(d, s)) if d.tp > 1 else 0.0
    overhead = _fixed_costs_ms(d, e.prefill_layer_overhead_us, e.prefill_overhead_ms)
    joins = gemm + attention + activations
    plain = float(joins + comm + overhead) * (1.0 - 1e-9)
    if d.ep <= 1 or d.model.moe is None:
        return plain, plain
    # the expert all-to-alls add max(A - overlap x G, 0) to the joins G: G plus that is at least G and at
    # least (1 - overlap) G + A, each growing with G, so at least the larger at G's compute inputs
    joins = max(joins, (1.0 - e.ep_overlap) * joins + float(ep_communication_ms(d, s / d.tp)[()]))
    return plain, float(joins + comm + overhead) * (1.0 - 1e-9)


def empty_iteration_ms(d: Deployment) -> float:
    """An engine iteration carrying nothing: the decode step at batch 0 (weights read once, fixed costs)."""
    return float(decode_step(d, 0, 1).total_ms)


def prefill_chunk_work_ms(d: Deployment, prompt_len: npt.ArrayLike, cached_tokens: npt.ArrayLike = 0,
                          riding_tokens: npt.ArrayLike = 0.0, empty_ms: float | None = None,
                          prefill_ms: Callable[[npt.ArrayLike], npt.ArrayLike] | None = None,
                          ) -> npt.NDArray[np.float64]:
    """Extra time that computing prompt tokens `cached_tokens`..`prompt_len` adds to an engine iteration
    it rides in (chunked prefill): the prompt's prefill minus that of its cached prefix, or, with nothing
    cached, minus an empty iteration (decode step at batch 0: weights read once, fixed costs), which the
    iteration pays anyway. So an idle engine's iteration carrying a whole prompt lasts exactly `prefill`.
    `riding_tokens`: tokens the iteration already carries (its decodes, chunks added before this one);
    they share the one weight read, so the chunk pays more of its own GEMM compute
    (shared_pass_gemm_ms; 0 by default, the chunk riding an empty iteration). `empty_ms`:
    empty_iteration_ms(d), when the caller holds it. `prefill_ms`: prefill(d, lengths).total_ms, when the
    caller keeps those figures (planner.serving.layout_memo)."""
    cached = np.asarray(cached_tokens, dtype=float)
    empty = empty_ms if empty_ms is not None else empty_iteration_ms(d)
    total = prefill_ms if prefill_ms is not None else (lambda length: prefill(d, length).total_ms)
    # A cached prefix is subtracted as its own prefill, but never below the empty iteration: a short
    # prefix's prefill (no decode-step fixed costs) can be cheaper than the empty step, and subtracting it
    # would make a cache hit add work (gemma-3-12b on 2x B200: 523 req/s at hit rate 0, 341 at 0.25).
    has_prefix = cached > 0
    # np.where evaluates both branches: the prefix's prefill only where some prompt has one
    prefix_ms = total(np.maximum(cached, 1.0)) if has_prefix.any() else 0.0
    before = np.maximum(np.where(has_prefix, prefix_ms, empty), empty)
    work = np.maximum(np.asarray(total(prompt_len), dtype=float) - before, 0.0)
    chunk = np.asarray(prompt_len, dtype=float) - cached
    return work + shared_pass_gemm_ms(d, chunk, riding_tokens)


def attention_dp_share_ms(d: Deployment, prompt_len: npt.ArrayLike,
                          empty_ms: float | None = None) -> npt.NDArray[np.float64]:
    """Under attention data parallelism, what one prompt adds to an iteration in which every attention group
    prefills a prompt like it: the groups run their prompts' attention and dense layers side by side and the
    experts serve all of their routed tokens (prefill with busy_groups = the groups), so the iteration's
    prompt work is that prefill less an empty iteration, shared by the groups' prompts. An iteration of
    prompts spread over the groups takes at least its busiest group's prompts alone
    (prefill_chunk_work_ms) and at least the sum of their shares. Without attention DP: the prompt alone."""
    groups = sharding(d).attention_dp
    empty = empty_ms if empty_ms is not None else empty_iteration_ms(d)
    full = np.asarray(prefill(d, prompt_len, groups).total_ms, dtype=float)
    return np.maximum(full - empty, 0.0) / groups


def mixed_iteration_ms(d: Deployment, decode_batch: npt.ArrayLike, context: npt.ArrayLike,
                       chunk_tokens: npt.ArrayLike, chunks: int = 1) -> npt.NDArray[np.float64]:
    """One engine iteration carrying `decode_batch` decodes at `context` cached tokens and `chunks` fresh
    prompt chunks of `chunk_tokens` tokens each in the same forward pass: the decode step plus each
    chunk's work, every chunk riding the decodes and the chunks before it (one weight read for all).
    With decodes aboard, the chunks' attention runs beside the decodes' own kernels: a per-layer cost
    (`chunk_layer_overhead_us`) the decode step and an empty iteration do not pay."""
    n = np.asarray(decode_batch, dtype=float)
    p = np.asarray(chunk_tokens, dtype=float)
    total = np.asarray(decode_step(d, n, context).total_ms, dtype=float)
    if d.model.moe is not None and chunks > 0:
        total = total + _moe_chunks_ms(d, n, p, chunks)
    else:
        for i in range(chunks):
            total = total + prefill_chunk_work_ms(d, p, 0, n + i * p)
    beside = d.model.n_layers * d.efficiency.chunk_layer_overhead_us / 1e3
    return total + np.where((n > 0) & (chunks > 0), beside, 0.0)


def _moe_chunks_ms(d: Deployment, decodes: np.ndarray, chunk_tokens: np.ndarray,
                   chunks: int) -> npt.NDArray[np.float64]:
    """What `chunks` prompt chunks add to an MoE pass carrying `decodes` decodes. A chunk's work alone
    carries its own read of every expert its tokens route to (and its GEMMs and all-reduces at its own
    length); the pass runs those once over all its tokens (pass_token_terms_ms), so each chunk keeps only
    the rest of its work (attention, fixed costs). The closed-loop client composes its iterations by the
    same rule (planner.serving.benchmark_client)."""
    rest = np.maximum(prefill_chunk_work_ms(d, chunk_tokens) - own_pass_terms_ms(d, chunk_tokens), 0.0)
    return (chunks * rest + pass_token_terms_ms(d, decodes + chunks * chunk_tokens)
            - pass_token_terms_ms(d, decodes))


def static_batch_e2e_ms(d: Deployment, batch: int, prompt_len: int, output_len: int) -> float:
    """A static batch, as an offline benchmark runs one: every prompt prefilled at once, then `output_len`
    decode steps of the whole batch at the mean context (no request joins or leaves)."""
    batch_prefill = float(prefill(d, batch * prompt_len).total_ms)
    return batch_prefill + float(decode_step(d, batch, prompt_len + output_len / 2).total_ms) * output_len


def static_batch_tokens_per_s(d: Deployment, batch: int, prompt_len: int, output_len: int) -> float:
    """Output tokens per second of that static batch: its tokens over its end-to-end time."""
    return batch * output_len * 1000.0 / static_batch_e2e_ms(d, batch, prompt_len, output_len)
