"""The cost-latency frontier of the sizing search's options (planner.serving.sizing)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt


def pareto_mask(cost: npt.NDArray[np.float64], latency: npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:
    """True where no other point is at least as good on both and better on one (lower is better)."""
    order = np.lexsort((latency, cost))
    mask = np.zeros(len(cost), dtype=bool)
    best_latency = np.inf
    for i in order:
        if latency[i] < best_latency:
            mask[i] = True
            best_latency = latency[i]
    return mask
