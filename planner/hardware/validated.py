"""Which catalog GPUs the planner's efficiency fits were measured on (the catalog's `validated` flag).

The engine efficiency behind every plan was fitted on measured GPUs; on the others the planner applies the
same fraction of the datasheet peaks, which a buyer should check before trusting the ranking. The flag is
catalog data (gpu_catalog/gpus.toml, with its source); a GPU the catalog does not flag is not validated.
"""

from __future__ import annotations

from gpu_catalog import load_catalog


def is_validated(gpu_id: str) -> bool:
    """The catalog's `validated` flag for `gpu_id`; False for a GPU the catalog does not flag or hold
    (a custom GPU object is never validated)."""
    spec = load_catalog().get(gpu_id)
    return spec is not None and bool(spec.validated)


__all__ = ["is_validated"]
