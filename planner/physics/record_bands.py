"""The plan's error band from the engine profile record its estimate came from (issue 30, item 5).

Where the engine has a record on the GPU's generation (planner.engines.profile_records), the band is that
record's held-out band: TPOT's residuals for a decode step (ITL, throughput), TTFT's for the first token. A
model whose architecture family is outside the record's fit gets the wider leave-one-family-out band and the
status says "extrapolated". Without a record the band is the engine's held-out rows of
planner/data/error_bands.json (planner.physics.bands), as before.
"""

from __future__ import annotations

from planner.core.model_shapes import ModelSpec
from planner.engines.profile_records import EXTRAPOLATED, architecture_family, band_quantiles
from planner.physics.bands import Band, band_status, error_band

RECORD_METRIC = {"itl": "tpot", "ttft": "ttft"}


def plan_band(metric: str, estimate: float, engine: str, gpu_id: str | None,
              model: ModelSpec) -> tuple[Band | None, str]:
    """(band, status) of `metric` ("itl" or "ttft") around `estimate`."""
    q, where = band_quantiles(engine, gpu_id, model, RECORD_METRIC[metric])
    if q is None:
        band = error_band(metric, estimate, engine)
        return band, band_status(band)
    band = Band(low=estimate / (1.0 + q["q90"]), high=estimate / (1.0 + q["q10"]), rows=int(q["n"]))
    if where == EXTRAPOLATED:
        return band, (f"extrapolated: {architecture_family(model)} is outside the profile's fitted families; "
                      f"leave-one-family-out band, {band.rows} rows")
    return band, f"held-out, {band.rows} rows"
