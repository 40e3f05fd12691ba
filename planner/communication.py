"""Tensor-parallel communication: two all-reduces per layer (after attention and after the MLP).

A ring all-reduce moves 2(n-1)/n of the message over each GPU's link, per direction, and pays a
fixed latency per collective, which dominates at decode sizes. The latency is given at TP 2 and grows
with log2(tp) (tree/NVSwitch algorithms add a step per doubling): measured on 2x H200 over NVLink, NCCL
2.28 (NCCL_VERSION 2.28.3 in the image, torch reports 2.28.9), inside a CUDA graph, 8.7 us at 8 KB and 12.3 us at 512 KB (data/measurements/allreduce_*.json);
TP 4 and 8 were not measured (machines with more than 2 GPUs were not lent).
"""

from __future__ import annotations

import numpy as np

from planner.deployment import Deployment
from planner.precision import ACTIVATION_BYTES

ALLREDUCES_PER_LAYER = 2


def ring_allreduce_volume_factor(tp: int) -> float:
    return 2.0 * (tp - 1) / tp


def allreduce_ms(message_bytes, tp: int, link_gb_s: float, link_efficiency: float, latency_us: float):
    """Time of one ring all-reduce of `message_bytes` per GPU."""
    if tp <= 1:
        return np.zeros_like(np.asarray(message_bytes, dtype=float))
    transfer_s = ring_allreduce_volume_factor(tp) * np.asarray(message_bytes, dtype=float) / (
        link_efficiency * link_gb_s * 1e9)
    return transfer_s * 1e3 + latency_us * np.log2(tp) / 1e3


def tp_communication_ms(d: Deployment, tokens) -> np.ndarray:
    """All-reduce time of one forward pass over `tokens` tokens (decode batch or prompt length)."""
    message = np.asarray(tokens, dtype=float) * d.model.d_model * ACTIVATION_BYTES
    per_collective = allreduce_ms(message, d.tp, d.gpu.link_gb_s, d.efficiency.link,
                                  d.efficiency.allreduce_latency_us)
    return ALLREDUCES_PER_LAYER * d.model.n_layers * per_collective
