"""Decode under load: continuous batching interleaves arriving prompts' prefills with decode steps.

If prefills take a share rho of a replica's time, decoding runs in the remaining 1 - rho, so the
inter-token latency a user sees is ITL / (1 - rho). At a fixed concurrency c (a closed loop: a new
request replaces each finished one), Little's law gives the arrival rate lambda = c / E2E with
E2E = TTFT + output_len * ITL_load; a sequence's decode is slowed by the prefills of the other c - 1,
so rho = (c - 1) / E2E * prefill time (none at c = 1): solved by fixed-point iteration.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from planner.deployment import Deployment
from planner.latency import decode_step, prefill, ttft_ms

MAX_PREFILL_SHARE = 0.95


def itl_with_prefill_share(itl_ms: npt.ArrayLike, prefill_share: npt.ArrayLike) -> npt.NDArray[np.float64]:
    return np.asarray(itl_ms) / (1.0 - np.minimum(np.asarray(prefill_share), MAX_PREFILL_SHARE))


def itl_under_concurrency(d: Deployment, concurrency: int, prompt_len: int, output_len: int,
                          iterations: int = 50) -> float:
    itl = float(decode_step(d, concurrency, prompt_len + output_len / 2).total_ms)
    prefill_ms = float(prefill(d, prompt_len).total_ms)
    first = float(ttft_ms(d, prefill_ms))
    itl_load = itl
    for _ in range(iterations):
        e2e_ms = first + output_len * itl_load
        share = (concurrency - 1) / e2e_ms * prefill_ms
        itl_load = float(itl_with_prefill_share(itl, share))
    return itl_load
