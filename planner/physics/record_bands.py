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
from planner.engines.profiles import gpu_generation
from planner.physics.bands import Band, band_status, error_band
from planner.physics.kernel_tables import kernel_terms

RECORD_METRIC = {"itl": "tpot", "ttft": "ttft"}


def plan_band(metric: str, estimate: float, engine: str, gpu_id: str | None,
              model: ModelSpec, kernel_tables: bool = False) -> tuple[Band | None, str]:
    """(band, status) of `metric` ("itl" or "ttft") around `estimate`; `kernel_tables`: the estimate came
    from the kernel-table predictor, whose band is its own leave-one-family-out residuals on the engine x
    GPU generation (planner/data/kernel_tables/kernel_terms.json)."""
    q, where = band_quantiles(engine, gpu_id, model, RECORD_METRIC[metric])
    terms = kernel_terms(engine, gpu_generation(gpu_id)) if kernel_tables else None
    kq = (terms or {}).get("lofo_band", {}).get(RECORD_METRIC[metric])
    if kq is not None:
        kernel_band = Band(low=estimate / (1.0 + kq["q90"]), high=estimate / (1.0 + kq["q10"]),
                           rows=int(kq["n"]))
        lead = (f"extrapolated: {architecture_family(model)} is outside the profile's fitted families; "
                if where == EXTRAPOLATED else "")
        return kernel_band, f"{lead}kernel tables, leave-one-family-out band, {kernel_band.rows} rows"
    if q is None:
        band = error_band(metric, estimate, engine)
        return band, band_status(band)
    band = Band(low=estimate / (1.0 + q["q90"]), high=estimate / (1.0 + q["q10"]), rows=int(q["n"]))
    if where == EXTRAPOLATED:
        return band, (f"extrapolated: {architecture_family(model)} is outside the profile's fitted families; "
                      f"leave-one-family-out band, {band.rows} rows")
    return band, f"held-out, {band.rows} rows"
