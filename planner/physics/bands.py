"""Error bands: the 10th-90th percentile of held-out residuals, per engine profile and per metric.

`planner/data/error_bands.json` is written by tools/fit_engines.py from held-out rows only: the graph
engine's from leave-one-shape-out over our compiled-step measurements, each serving engine's from
leave-one-row-out over its public rows. A band is estimate / (1 + q90) .. estimate / (1 + q10), where
q is the relative error (predicted/measured - 1), and carries the number of rows behind it. Where too
few rows exist the band is None and the plan says "unvalidated".
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel

BANDS_PATH = Path(__file__).parent.parent / "data" / "error_bands.json"
UNVALIDATED = "unvalidated"


class Band(BaseModel):
    low: float
    high: float
    rows: int | None = None  # held-out rows behind the band


@lru_cache(maxsize=1)
def _quantiles() -> dict[str, dict[str, dict[str, float] | None]]:
    if not BANDS_PATH.exists():
        return {}
    return json.loads(BANDS_PATH.read_text())["engines"]


def error_band(metric: str, estimate: float, engine: str = "vllm") -> Band | None:
    """The band of `engine`'s `metric` (itl, prefill, ttft) around `estimate`; None where unvalidated."""
    q = _quantiles().get(engine, {}).get(metric)
    if q is None:
        return None
    return Band(low=estimate / (1.0 + q["q90"]), high=estimate / (1.0 + q["q10"]), rows=int(q["n"]))


def band_status(band: Band | None) -> str:
    return f"held-out, {band.rows} rows" if band is not None else UNVALIDATED
