"""Speculative decoding with geometric acceptance (Leviathan et al. 2023).

A round drafts k tokens with the draft model, then the target verifies k+1 positions in one pass.
With per-token acceptance p the expected tokens per target pass are (1 - p^(k+1)) / (1 - p).
The draft model is costed as a dense model of `draft_params` streamed at the engine's bandwidth
plus the engine's per-step overhead, at the same batch and TP.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from planner.core.deployment import Deployment
from planner.core.precision import bytes_per_value
from planner.physics.latency import decode_step, weight_bandwidth_efficiency


def tokens_per_round(draft_tokens: int, acceptance: float) -> float:
    if acceptance >= 1.0:
        return float(draft_tokens + 1)
    return (1.0 - acceptance ** (draft_tokens + 1)) / (1.0 - acceptance)


def draft_step_ms(d: Deployment, draft_params: float, batch: npt.ArrayLike) -> npt.NDArray[np.float64]:
    e = d.efficiency
    weight_s = (
        draft_params
        * bytes_per_value(d.weights)
        / d.tp
        / (weight_bandwidth_efficiency(d) * d.gpu.hbm_tb_s * 1e12)
    )
    compute_s = 2.0 * draft_params * np.asarray(batch, dtype=float) / d.tp / (
        e.compute * d.gpu.peak_tflops(d.compute) * 1e12)
    return np.maximum(weight_s, compute_s) * 1e3 + e.step_overhead_us / 1e3


@dataclass(frozen=True)
class SpeculativePlan:
    tokens_per_round: float
    round_ms: float
    itl_ms: float


def plan_speculative(d: Deployment, batch: int, context: float, draft_tokens: int, acceptance: float,
                     draft_params: float) -> SpeculativePlan:
    expected = tokens_per_round(draft_tokens, acceptance)
    verify = decode_step(d, batch, context, tokens_per_sequence=draft_tokens + 1).total_ms
    round_ms = float(verify + draft_tokens * draft_step_ms(d, draft_params, batch))
    return SpeculativePlan(expected, round_ms, round_ms / expected)
