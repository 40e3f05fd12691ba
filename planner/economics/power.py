"""Power at the operating point: GPU watts from a utilization model, joules per token, tokens/s per
provisioned megawatt and the energy cost per million tokens.

Model (planner/data/power.toml [model], fitted to an H100 measurement of power against load):
    GPU watts = min(TDP_w, idle_w + (TDP_w - idle_w) x slope x u)
where u is the fraction of the step's time the binding resource (HBM in decode, tensor cores in
prefill) is busy at its peak rate (the roofline bound time over the step time) and the slope is that
resource's: 0.75 for memory-bound steps (a GEMV streaming HBM at full duty drew 74% of TDP), 1.87 for
compute-bound ones (a GEMM reaches the power limit at 79% of its peak rate). Slope 1 is the plain
idle-to-TDP interpolation. The site draws, per GPU,
its provisioned all-in kW (host, network, cooling at its PUE) in proportion to the GPU's draw
(all-in watts = GPU watts x provisioned_kw_all_in / TDP_kw, so a GPU at TDP draws its provisioned kW).
Tokens per provisioned MW divide by the provisioned (not the drawn) power, as InferenceX does.

Pure functions over floats; each quantity is computed in one place.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from gpu_catalog import PROVISIONING_PUE, SYSTEM_TO_GPU_POWER_RATIO, GpuSpec
from planner.economics.ownership import ownership_defaults

POWER_PATH = Path(__file__).parent.parent / "data" / "power.toml"
SECONDS_PER_HOUR = 3600.0


@lru_cache(maxsize=1)
def power_constants() -> dict[str, Any]:
    """planner/data/power.toml: the power model's defaults and InferenceX's constants, each sourced."""
    return tomllib.loads(POWER_PATH.read_text())


_C = power_constants()
# one electricity price for the ownership model and the energy cost (ownership.toml's, sourced there: EIA)
DEFAULT_ELECTRICITY_USD_PER_KWH = float(ownership_defaults()["default"]["power_usd_per_kwh"])
# the catalog's rule for a GPU without a published all-in figure: system kW per GPU x PUE
ALL_IN_KW_PER_TDP_KW = SYSTEM_TO_GPU_POWER_RATIO * PROVISIONING_PUE
IDLE_FRACTION_OF_TDP = float(_C["fallback"]["idle_fraction_of_tdp"])
COMPUTE_SLOPE = float(_C["model"]["compute_slope"])
MEMORY_W_PER_TB_S = float(_C["model"]["memory_w_per_tb_s"])
DEFAULT_TDP_W = (
    700.0  # a GPU with no tdp_w is powered as an H100 SXM (datasheet: up to 700 W), as ownership does
)
POWER_MODEL = (
    f"GPU W = min(TDP, idle + {MEMORY_W_PER_TB_S:g} W per achieved HBM TB/s + (TDP - idle) x "
    f"{COMPUTE_SLOPE:g} x compute utilization) (measured on real decode steps and prefills of an H100 and "
    "an H200); prefill and decode weighted by the time each takes; site W = GPU W x provisioned kW / TDP kW"
)


class EconomicsSettings(BaseModel):
    """The scenario's `economics` block (extension): the electricity price for the energy cost."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    electricity_usd_per_kwh: float = Field(default=DEFAULT_ELECTRICITY_USD_PER_KWH, ge=0, le=10)


@dataclass(frozen=True)
class PowerSpec:
    """A GPU's power figures, from its catalog entry or the stated fallbacks; `origin` says which."""

    tdp_w: float
    idle_power_w: float
    provisioned_kw_all_in: float
    origin: dict[str, str]


def power_spec(gpu: GpuSpec) -> PowerSpec:
    """TDP, idle watts and all-in provisioned kW per GPU: the catalog's (or a custom GPU's) figures, else
    the fallbacks (planner/data/power.toml's idle fraction; the catalog's all-in rule)."""
    tdp = float(gpu.tdp_w) if gpu.tdp_w is not None else DEFAULT_TDP_W
    idle, all_in = gpu.idle_power_w, gpu.provisioned_kw_all_in
    origin = {
        "tdp_w": "catalog" if gpu.tdp_w is not None else "default: H100 SXM 700 W",
        "idle_power_w": "catalog" if idle is not None else f"fallback: {IDLE_FRACTION_OF_TDP:g} x TDP",
        "provisioned_kw_all_in": (
            "catalog"
            if all_in is not None
            else f"fallback: {ALL_IN_KW_PER_TDP_KW:.3f} x TDP (the catalog's system-to-GPU "
            f"ratio x PUE {PROVISIONING_PUE:g})"
        ),
    }
    return PowerSpec(
        tdp_w=tdp, idle_power_w=min(float(idle), tdp) if idle is not None else IDLE_FRACTION_OF_TDP * tdp,
        provisioned_kw_all_in=float(all_in) if all_in is not None else ALL_IN_KW_PER_TDP_KW * tdp / 1000.0,
        origin=origin,
    )


def step_utilization(bound_ms: float, step_ms: float) -> float:
    """Fraction of a step the binding resource is busy at its peak rate: bound time / step time, in [0, 1]."""
    if not step_ms > 0 or not math.isfinite(bound_ms):
        return 0.0
    return min(max(bound_ms / step_ms, 0.0), 1.0)


def operating_utilization(
    prefill_share: float, prefill_utilization: float, decode_utilization: float
) -> float:
    """The replica's utilization over time: prefill and decode weighted by the share of time each takes."""
    share = min(max(prefill_share, 0.0), 1.0)
    return share * prefill_utilization + (1.0 - share) * decode_utilization


def gpu_power_w(spec: PowerSpec, utilization: float, slope: float = 1.0) -> float:
    """One GPU's draw: min(TDP, idle + (TDP - idle) x slope x utilization)."""
    u = min(max(utilization, 0.0), 1.0)
    return min(spec.tdp_w, spec.idle_power_w + (spec.tdp_w - spec.idle_power_w) * slope * u)


def step_gpu_power_w(spec: PowerSpec, achieved_tb_s: float, compute_utilization: float,
                     capped: bool = True) -> float:
    """One GPU's draw over a step moving `achieved_tb_s` of HBM traffic with the tensor cores at
    `compute_utilization` of their dense peak: idle + HBM energy per byte + the compute share, capped at
    TDP (`capped` False: the rule's reading before the cap, for scoring it where a card stayed under it)."""
    tb_s = max(achieved_tb_s, 0.0) if math.isfinite(achieved_tb_s) else 0.0
    u = min(max(compute_utilization, 0.0), 1.0) if math.isfinite(compute_utilization) else 0.0
    busy_w = MEMORY_W_PER_TB_S * tb_s + (spec.tdp_w - spec.idle_power_w) * COMPUTE_SLOPE * u
    reading = spec.idle_power_w + busy_w
    return min(spec.tdp_w, reading) if capped else reading


def operating_power_w(prefill_share: float, prefill_w: float, decode_w: float) -> float:
    """A replica's mean draw: prefill and decode power weighted by the share of time each takes."""
    share = min(max(prefill_share, 0.0), 1.0)
    return share * prefill_w + (1.0 - share) * decode_w


def replica_power_w(gpu_watts: float, gpus: int) -> float:
    """The GPUs of one replica (TP x PP), each drawing `gpu_watts`."""
    return gpus * gpu_watts


def site_power_w(spec: PowerSpec, gpu_watts: float) -> float:
    """The site's draw for GPUs drawing `gpu_watts`: host, network and cooling in proportion (a GPU at TDP
    draws its provisioned all-in kW)."""
    return gpu_watts * spec.provisioned_kw_all_in * 1000.0 / spec.tdp_w


def provisioned_kw(spec: PowerSpec, gpus: int) -> float:
    """All-in provisioned kW of `gpus` GPUs: what a site must reserve for them."""
    return gpus * spec.provisioned_kw_all_in


def joules_per_token(watts: float, tokens_per_s: float) -> float | None:
    """W / (tokens/s) = J per token (None where no token is served)."""
    return watts / tokens_per_s if tokens_per_s > 0 else None


def tokens_per_s_per_provisioned_mw(tokens_per_s: float, kw: float) -> float | None:
    """Tokens/s over the provisioned megawatts (InferenceX's tokens per provisioned all-in MW)."""
    return tokens_per_s / (kw / 1000.0) if kw > 0 else None


def energy_usd_per_million_tokens(watts: float, tokens_per_s: float, usd_per_kwh: float) -> float | None:
    """Electricity for a million tokens: kWh = W / 1000 x (1e6 / tokens/s) / 3600, times the price."""
    if not tokens_per_s > 0:
        return None
    return watts / 1000.0 * (1e6 / tokens_per_s) / SECONDS_PER_HOUR * usd_per_kwh


__all__ = [
    "DEFAULT_ELECTRICITY_USD_PER_KWH", "POWER_MODEL", "EconomicsSettings", "PowerSpec",
    "energy_usd_per_million_tokens", "gpu_power_w", "operating_power_w", "joules_per_token",
    "operating_utilization", "power_constants", "power_spec", "provisioned_kw", "replica_power_w",
    "site_power_w", "step_gpu_power_w", "step_utilization", "tokens_per_s_per_provisioned_mw",
]
