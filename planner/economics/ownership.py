"""Owning instead of renting: $/GPU-hour from capex, amortization, power and hosting, and the
break-even utilization against a rental price.

owned $/GPU-hour = capex / (years * 8760)
                 + TDP_kW * average_power_fraction * PUE * $/kWh
                 + hosting $/month * 12 / 8760
An owned GPU costs that every hour of the year; a rented one only while rented, so owning is cheaper
once the fleet is busy more than  break_even_utilization = owned $/h / rented $/h  of the time.
"""

from __future__ import annotations

import tomllib
from functools import lru_cache
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from gpu_catalog import GpuSpec

OWNERSHIP_PATH = Path(__file__).parent.parent / "data" / "ownership.toml"
HOURS_PER_YEAR = 8760.0


@lru_cache(maxsize=1)
def ownership_defaults() -> dict:
    """planner/data/ownership.toml: the one place of the ownership defaults, each with its source."""
    return tomllib.loads(OWNERSHIP_PATH.read_text())


_DEFAULT = ownership_defaults()["default"]
# A GPU with no tdp_w (a custom GPU) is powered as the catalog's H100 SXM / H200 (datasheet: 700 W).
DEFAULT_TDP_W = float(_DEFAULT["tdp_w_if_unknown"])


# Physical ranges: a GPU costs less than $10M; a fleet is amortized over 1 month to 30 years.
CapexUsd = Annotated[float, Field(ge=0, le=10_000_000)]


class OwnershipCosts(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    capex_usd_per_gpu: Annotated[dict[str, CapexUsd], Field(max_length=1000)] | CapexUsd | None = None
    amortization_years: float = Field(default=_DEFAULT["amortization_years"], ge=1 / 12, le=30)
    power_usd_per_kwh: float = Field(default=_DEFAULT["power_usd_per_kwh"], ge=0, le=10)
    pue: float = Field(default=_DEFAULT["pue"], ge=1, le=5)
    average_power_fraction: float = Field(default=_DEFAULT["average_power_fraction"], ge=0, le=1.5)
    hosting_usd_per_gpu_month: float = Field(default=_DEFAULT["hosting_usd_per_gpu_month"], ge=0, le=1e6)


def capex_for(gpu_id: str, costs: OwnershipCosts) -> float | None:
    c = costs.capex_usd_per_gpu
    if isinstance(c, (int, float)):
        return float(c)
    if isinstance(c, dict) and gpu_id in c:
        return float(c[gpu_id])
    return ownership_defaults()["capex_usd_per_gpu"].get(gpu_id)


def owned_usd_per_gpu_hour(gpu_id: str, gpu: GpuSpec, costs: OwnershipCosts | None) -> float | None:
    costs = costs or OwnershipCosts()
    capex = capex_for(gpu_id, costs)
    if capex is None:
        return None
    tdp_kw = (gpu.tdp_w or DEFAULT_TDP_W) / 1000.0
    amortization = capex / (costs.amortization_years * HOURS_PER_YEAR)
    power = tdp_kw * costs.average_power_fraction * costs.pue * costs.power_usd_per_kwh
    hosting = costs.hosting_usd_per_gpu_month * 12.0 / HOURS_PER_YEAR
    return amortization + power + hosting


def break_even_utilization(owned_usd_per_hour: float, rented_usd_per_hour: float) -> float:
    """Fraction of hours a GPU must be busy for owning it to cost less than renting it when busy."""
    return owned_usd_per_hour / rented_usd_per_hour
