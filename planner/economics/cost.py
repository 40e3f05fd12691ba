"""Cost per million output tokens from a $/GPU-hour price (contract formula)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt


def usd_per_million_output_tokens(tp: int, usd_per_gpu_hour: float, output_tokens_per_s: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """tp * usd_per_gpu_hour / (output_tokens_per_s * 3600) * 1e6."""
    tokens_per_s = np.asarray(output_tokens_per_s, dtype=float)
    with np.errstate(divide="ignore"):
        return tp * usd_per_gpu_hour / (tokens_per_s * 3600.0) * 1e6
