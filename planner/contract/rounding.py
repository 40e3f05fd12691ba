"""Output rounding: the CLI prints figures to meaningful digits (the computation never rounds)."""

from __future__ import annotations

import math
from typing import Any

SIGNIFICANT_DIGITS = 4  # the planner's figures carry model error of a few percent: a 5th digit is noise


def round_figures(value: Any, digits: int = SIGNIFICANT_DIGITS) -> Any:
    """`value` (a JSON tree) with every float rounded to `digits` significant digits; integers, whole-number
    floats (byte and token counts such as 163840.0), booleans, strings and non-finite floats unchanged."""
    if isinstance(value, float):
        if not math.isfinite(value) or value.is_integer():
            return value
        return float(f"{value:.{digits}g}")
    if isinstance(value, dict):
        return {k: round_figures(v, digits) for k, v in value.items()}
    if isinstance(value, list):
        return [round_figures(v, digits) for v in value]
    return value


__all__ = ["SIGNIFICANT_DIGITS", "round_figures"]
