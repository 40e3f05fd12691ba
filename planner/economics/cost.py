"""Cost per million output tokens from a $/GPU-hour price (contract formula), and the price a plan uses.
The plan, the batch sweep, the sizing search and the disaggregated fleets all price through here."""

from __future__ import annotations

from typing import TypeVar

import numpy as np
import numpy.typing as npt

from gpu_catalog import GpuSpec

Tokens = TypeVar("Tokens", float, npt.NDArray[np.float64])


def gpu_price(given_usd_per_gpu_hour: float | None, gpu: GpuSpec) -> float | None:
    """The $/GPU-hour a plan uses: the price given, else the catalog's (None for a custom GPU without one)."""
    return given_usd_per_gpu_hour or gpu.usd_per_hour


def usd_per_million_tokens(usd_per_hour: float, tokens_per_s: Tokens) -> Tokens:
    """$ per million tokens: a fleet's $/hour over the tokens it serves in an hour."""
    return usd_per_hour / (tokens_per_s * 3600.0) * 1e6


def usd_per_million_output_tokens(
    tp: int, usd_per_gpu_hour: float, output_tokens_per_s: npt.ArrayLike
) -> npt.NDArray[np.float64]:
    """tp * usd_per_gpu_hour / (output_tokens_per_s * 3600) * 1e6."""
    tokens_per_s = np.asarray(output_tokens_per_s, dtype=float)
    with np.errstate(divide="ignore"):
        return usd_per_million_tokens(tp * usd_per_gpu_hour, tokens_per_s)
