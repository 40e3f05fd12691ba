"""Communication of one forward pass: TP all-reduces, PP point-to-point sends, EP all-to-alls.

TP: two all-reduces per layer (after attention and after the MLP; one per MoE layer under EP, whose MLP
output returns by the combine instead, except on an engine that combines the experts in that all-reduce:
runs_expert_alltoall). A ring all-reduce moves 2(n-1)/n of the message over each GPU's
link, per direction, and pays a fixed latency per collective, which dominates at decode sizes. The
latency is given at TP 2 and grows with log2(tp) (tree/NVSwitch algorithms add a step per doubling):
measured on 2x H200 over NVLink, NCCL 2.28 (NCCL_VERSION 2.28.3 in the image, torch reports 2.28.9),
inside a CUDA graph, 8.7 us at 8 KB and 12.3 us at 512 KB (data/measurements/allreduce_*.json);
TP 4 and 8 were not measured.

A TP group wider than the scale-up domain runs hierarchically (NCCL's tree/ring over nodes): a
reduce-scatter and all-gather inside each node (the intra-node all-reduce volume) plus an all-reduce of
the node's 1/g shard across the n nodes over each GPU's own NIC, paying the network latency twice per
doubling of n.

PP: each stage boundary sends the micro-batch's hidden states (tokens x d_model x 2 bytes) once.

EP: per MoE layer a dispatch (tokens x top_k x d_model, fp8 when the GEMMs run fp8 as DeepEP does, else
bf16) and a combine (bf16) all-to-all. A GPU's traffic to peers on its own node rides NVLink; the share
for other nodes, (ep - g) / ep, crosses its NIC. Checked against DeepEP's published low-latency kernels
(H800, CX7 400 Gb/s, 128 tokens, hidden 7168, top-8): this model gives 112/152/183 us dispatch at
EP 16/32/64 against 118/155/173 us measured, and 193/275/315 us combine against 195/273/314 us.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from planner.core.deployment import Deployment
from planner.core.precision import ACTIVATION_BYTES
from planner.hardware.parallelism import Link, sharding

ALLREDUCES_PER_LAYER = 2
# Bus bandwidth a collective reaches over the network, as a fraction of the NIC's line rate: DeepEP's
# normal kernels sustain 43-58 GB/s "bottleneck bandwidth" on ~50 GB/s CX7 NICs and NCCL all-reduce bus
# bandwidth over 400 Gb/s InfiniBand is commonly ~90% of line rate.
NETWORK_EFFICIENCY = 0.9
# Fixed cost of one all-to-all across nodes (RDMA writes, completion signals): the intercept that makes
# the model above match DeepEP's low-latency dispatch/combine table within 10% from EP 16 to EP 256.
NETWORK_ALLTOALL_LATENCY_US = 30.0
DISPATCH_BYTES_FP8 = 1.0


def ring_allreduce_volume_factor(tp: int) -> float:
    return 2.0 * (tp - 1) / tp


def allreduce_ms(message_bytes: npt.ArrayLike, tp: int, link_gb_s: float, link_efficiency: float,
                 latency_us: float) -> npt.NDArray[np.float64]:
    """Time of one ring all-reduce of `message_bytes` per GPU."""
    if tp <= 1:
        return np.zeros_like(np.asarray(message_bytes, dtype=float))
    transfer_s = ring_allreduce_volume_factor(tp) * np.asarray(message_bytes, dtype=float) / (
        link_efficiency * link_gb_s * 1e9)
    return transfer_s * 1e3 + latency_us * np.log2(tp) / 1e3


def _inner_group(d: Deployment) -> int:
    """GPUs of a wide group that share the fast tier: the scale-up domain, or the server for PCIe cards."""
    return d.gpu.scale_up_gpus if d.gpu.scale_up_gpus > 1 else d.gpu.node_gpus


def tp_allreduce_ms(d: Deployment, message_bytes: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """One all-reduce over the TP group, hierarchical when the group outgrows its fast tier."""
    s = sharding(d)
    e = d.efficiency
    inner = _inner_group(d)
    if d.tp <= inner:
        return allreduce_ms(message_bytes, d.tp, s.tp_link.gb_s, e.link, e.allreduce_latency_us)
    outer = math.ceil(d.tp / inner)
    inner_link = d.gpu.link_gb_s if d.gpu.scale_up_gpus > 1 else d.gpu.host_link_gb_s
    inner_ms = allreduce_ms(message_bytes, inner, inner_link, e.link, e.allreduce_latency_us)
    shard = np.asarray(message_bytes, dtype=float) / inner
    if s.tp_link.crosses_nodes:
        outer_ms = allreduce_ms(
            shard, outer, d.gpu.network_gb_s, NETWORK_EFFICIENCY, 2.0 * d.gpu.network_latency_us
        )
    else:  # e.g. NVLink-bridged pairs joined over PCIe inside one server
        outer_ms = allreduce_ms(shard, outer, d.gpu.host_link_gb_s, e.link, e.allreduce_latency_us)
    return inner_ms + outer_ms


# Engines whose expert parallelism at tp = ep moves no tokens between GPUs: SGLang's default MoE dispatcher
# (`--moe-a2a-backend` "none", StandardDispatcher in 0.5.6-0.5.12, python/sglang/srt/layers/moe/) only remaps
# the routed experts to the rank's local ones, every rank computes its experts for the whole batch (the TP
# group already holds it), and the layer's TP all-reduce sums the ranks' partial outputs: the all-reduce a
# TP MoE layer runs anyway, no all-to-all. No public SGLang run here sets an all-to-all backend (DeepEP,
# Mooncake).
ENGINES_COMBINING_EXPERTS_BY_ALLREDUCE = frozenset({"sglang"})


def runs_expert_alltoall(d: Deployment) -> bool:
    """Whether the deployment's expert parallelism moves tokens by all-to-alls (dispatch and combine): an EP
    layout of an MoE model, unless its engine combines the experts in the TP all-reduce (attention not
    data-parallel: every rank of the group holds the batch)."""
    if d.ep <= 1 or d.model.moe is None:
        return False
    return not (d.engine in ENGINES_COMBINING_EXPERTS_BY_ALLREDUCE and sharding(d).attention_dp == 1)


def tp_allreduces_per_pass(d: Deployment) -> int:
    m = d.model
    if runs_expert_alltoall(d) and m.moe is not None:
        moe_layers = m.n_layers - m.moe.first_dense_layers
        return ALLREDUCES_PER_LAYER * m.n_layers - moe_layers
    return ALLREDUCES_PER_LAYER * m.n_layers


def tp_communication_ms(d: Deployment, tokens: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """All-reduce time of one forward pass over `tokens` tokens of one TP group (decode batch or prompt)."""
    message = np.asarray(tokens, dtype=float) * d.model.d_model * ACTIVATION_BYTES
    return tp_allreduces_per_pass(d) * tp_allreduce_ms(d, message)


def _p2p_ms(message_bytes: npt.ArrayLike, link: Link, d: Deployment) -> npt.NDArray[np.float64]:
    if link.kind == "none":
        return np.zeros_like(np.asarray(message_bytes, dtype=float))
    if link.crosses_nodes:
        bw, latency_us = NETWORK_EFFICIENCY * link.gb_s, d.gpu.network_latency_us
    else:
        bw, latency_us = d.efficiency.link * link.gb_s, d.efficiency.allreduce_latency_us
    return np.asarray(message_bytes, dtype=float) / (bw * 1e9) * 1e3 + latency_us / 1e3


def pp_communication_ms(d: Deployment, tokens: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Point-to-point sends of one micro-batch of `tokens` tokens through the pp - 1 stage boundaries."""
    if d.pp <= 1:
        return np.zeros_like(np.asarray(tokens, dtype=float))
    s = sharding(d)
    # each GPU of a stage sends its 1/tp slice of the hidden states to its peer in the next stage
    message = np.asarray(tokens, dtype=float) * d.model.d_model * ACTIVATION_BYTES / d.tp
    return (d.pp - 1) * _p2p_ms(message, s.pp_link, d)


def ep_alltoall_ms(
    d: Deployment, tokens_per_gpu: npt.ArrayLike, bytes_per_value: float
) -> npt.NDArray[np.float64]:
    """One all-to-all in which each GPU sends `tokens_per_gpu` x top_k hidden vectors to the experts' GPUs;
    the busiest GPU receives `expert_imbalance` times the mean."""
    s = sharding(d)
    m = d.model
    assert m.moe is not None  # expert parallelism applies to MoE models only
    volume = (
        np.asarray(tokens_per_gpu, dtype=float)
        * m.moe.top_k
        * m.d_model
        * bytes_per_value
        * s.expert_imbalance
    )
    if s.ep_link.crosses_nodes:
        remote = (d.ep - d.gpu.node_gpus) / d.ep
        return (
            volume * remote / (NETWORK_EFFICIENCY * d.gpu.network_gb_s * 1e9) * 1e3
            + NETWORK_ALLTOALL_LATENCY_US / 1e3
        )
    remote = (d.ep - 1) / d.ep
    e = d.efficiency
    return (
        volume * remote / (e.link * s.ep_link.gb_s * 1e9) * 1e3
        + (e.allreduce_latency_us if e.alltoall_latency_us is None else e.alltoall_latency_us)
        * math.log2(d.ep) / 1e3
    )


def ep_communication_ms(d: Deployment, tokens_per_gpu) -> np.ndarray:
    """Dispatch + combine of every MoE layer of one pass in which each sending GPU holds `tokens_per_gpu`
    tokens (the TP ranks of an attention group split the group's tokens)."""
    m = d.model
    if not runs_expert_alltoall(d) or m.moe is None:
        return np.zeros_like(np.asarray(tokens_per_gpu, dtype=float))
    per_gpu = np.asarray(tokens_per_gpu, dtype=float)
    dispatch_bytes = DISPATCH_BYTES_FP8 if d.compute == "fp8" else ACTIVATION_BYTES
    moe_layers = m.n_layers - m.moe.first_dense_layers
    combine = ep_alltoall_ms(d, per_gpu, ACTIVATION_BYTES)
    # a 16-bit dispatch is the combine's twin: the same figures, computed once
    dispatch = combine if dispatch_bytes == ACTIVATION_BYTES else ep_alltoall_ms(d, per_gpu, dispatch_bytes)
    return moe_layers * (dispatch + combine)
