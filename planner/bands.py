"""Error bands: the 10th-90th percentile of the validation residuals, per metric.

`planner/data/error_bands.json` is written by tools/accuracy_report.py from held-out rows; a band
is estimate / (1 + q90) .. estimate / (1 + q10) where q is the relative error (predicted/measured - 1).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel

BANDS_PATH = Path(__file__).parent / "data" / "error_bands.json"


class Band(BaseModel):
    low: float
    high: float


@lru_cache(maxsize=1)
def _quantiles() -> dict[str, dict[str, float]]:
    if not BANDS_PATH.exists():
        return {}
    return json.loads(BANDS_PATH.read_text())["metrics"]


def error_band(metric: str, estimate: float) -> Band | None:
    q = _quantiles().get(metric)
    if q is None:
        return None
    return Band(low=estimate / (1.0 + q["q90"]), high=estimate / (1.0 + q["q10"]))
