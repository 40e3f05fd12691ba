"""The GPU catalog: hardware figures as data (gpus.toml), validated on load.

Every figure carries a source; tensor peaks are dense (no 2:4 sparsity).
"""

from __future__ import annotations

import tomllib
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

CATALOG_PATH = Path(__file__).with_name("gpus.toml")

TensorPrecision = Literal["bf16", "fp16", "fp8", "int8", "fp4"]
TENSOR_PRECISIONS: tuple[str, ...] = get_args(TensorPrecision)
# Formats with a published peak that the planner does not model (no weight precision, no bits per value):
# kept as reference only, never used as a compute precision.
ReferencePrecision = Literal["fp6"]
REFERENCE_PRECISIONS: tuple[str, ...] = get_args(ReferencePrecision)
SOURCED_FIGURES = ("memory_gb", "hbm_tb_s", "tflops", "tflops_sparse", "tflops_reference",
                   "interconnect_gb_s", "tdp_w", "usd_per_hour", "scale_up_domain", "gpus_per_node",
                   "scale_out_gb_s", "scale_out_latency_us", "provisioned_kw_all_in", "idle_power_w",
                   "price_is_estimate", "validated")

# All-in provisioned power (gpu_catalog/README.md): where InferenceX publishes no constant,
# provisioned_kw_all_in = (system kW at full load / GPUs per system) x PUE, the system kW from the OEM/NVIDIA
# system datasheet, or, without one, estimated as GPUs x TDP x DGX H100's system-to-GPU ratio
# (10.2 kW / (8 x 700 W) = 1.821). The PUE (1.3) also carries the cluster network's share; it reproduces
# InferenceX's H100 constant within 5% and its B200 one within 8%.
PROVISIONING_PUE = 1.3
DGX_H100_SYSTEM_KW = 10.2
SYSTEM_TO_GPU_POWER_RATIO = DGX_H100_SYSTEM_KW / (8 * 0.700)

# Used when a custom GPU gives no link figure: PCIe Gen4 x16 per direction, the slowest common link.
DEFAULT_INTERCONNECT_GB_S = 32.0
# Topology defaults for a custom GPU that gives none (documented in docs/CONTRACT_EXTENSIONS.md):
# a link of NVLink class (>= 100 GB/s per direction) comes on 8-GPU boards (HGX, MI300X platform), a
# slower one is PCIe and joins nothing beyond the card; servers hold 8 GPUs; one 400 Gb/s NIC per GPU.
SCALE_UP_LINK_THRESHOLD_GB_S = 100.0
DEFAULT_SCALE_UP_DOMAIN = 8
DEFAULT_GPUS_PER_NODE = 8
DEFAULT_SCALE_OUT_GB_S = 50.0
DEFAULT_SCALE_OUT_LATENCY_US = 10.0


class GpuSpec(BaseModel):
    """One GPU as the contract's `gpu` object describes it (catalog entries add sources)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: str = Field(min_length=1, max_length=120)
    memory_gb: float = Field(ge=0.1, le=10_000)
    hbm_tb_s: float = Field(ge=0.01, le=1_000)
    tflops: dict[str, float] = Field(max_length=len(TENSOR_PRECISIONS))
    interconnect_gb_s: float | None = Field(default=None, ge=1, le=100_000)
    usd_per_hour: float | None = Field(default=None, ge=0.0001, le=10_000)
    vendor: str | None = Field(default=None, max_length=60)
    tdp_w: float | None = Field(default=None, ge=1, le=10_000)
    tflops_sparse: dict[str, float] | None = Field(
        default=None, max_length=len(TENSOR_PRECISIONS)
    )  # 2:4 peaks, reference only
    sources: dict[str, str] | None = Field(default=None, max_length=32)
    # topology: the scale-up (NVLink / Infinity Fabric) domain, the server, and the network per GPU
    scale_up_domain: int | None = Field(default=None, ge=1, le=100_000)
    gpus_per_node: int | None = Field(default=None, ge=1, le=1024)
    scale_out_gb_s: float | None = Field(default=None, ge=0.1, le=10_000)
    scale_out_latency_us: float | None = Field(default=None, ge=0, le=100_000)
    # reference-only dense peaks of formats the planner does not model (fp6)
    tflops_reference: dict[str, float] | None = Field(default=None, max_length=len(REFERENCE_PRECISIONS))
    # power: board TDP is tdp_w; all-in provisioned kW per GPU (host, network, cooling via PUE); idle board W
    provisioned_kw_all_in: float | None = Field(default=None, ge=0.01, le=100)
    idle_power_w: float | None = Field(default=None, ge=0, le=10_000)
    power_source_note: str | None = Field(default=None, max_length=1000)
    # the rental price is an estimate (no named list price); the physics is validated on this GPU's generation
    price_is_estimate: bool | None = None
    validated: bool | None = None
    # the chip generation engines ship kernels for ("hopper", "blackwell", "cdna3", ...): production engine
    # profiles are per engine x generation (planner/engines/profiles.py); informational on a custom GPU
    generation: str | None = Field(default=None, max_length=40)

    @field_validator("tflops")
    @classmethod
    def _dense_peaks(cls, peaks: dict[str, float]) -> dict[str, float]:
        if "bf16" not in peaks:
            raise ValueError("needs a dense 'bf16' peak")
        for precision, value in peaks.items():
            if precision not in TENSOR_PRECISIONS:
                raise ValueError(
                    f"unknown precision {precision[:30]!r} (known: {', '.join(TENSOR_PRECISIONS)})"
                )
            if not (0.1 <= value <= 1_000_000):
                raise ValueError(f"'{precision}' peak must be between 0.1 and 1,000,000 TFLOP/s")
        return peaks

    @field_validator("tflops_reference")
    @classmethod
    def _reference_peaks(cls, peaks: dict[str, float] | None) -> dict[str, float] | None:
        for precision, value in (peaks or {}).items():
            if precision not in REFERENCE_PRECISIONS:
                known = ", ".join(REFERENCE_PRECISIONS)
                raise ValueError(f"unknown reference precision {precision[:30]!r} (known: {known})")
            if not (0.1 <= value <= 1_000_000):
                raise ValueError(f"'{precision}' reference peak must be between 0.1 and 1,000,000 TFLOP/s")
        return peaks

    @model_validator(mode="after")
    def _power_consistent(self) -> GpuSpec:
        # all-in power includes the board, and a board idles below its TDP
        if self.tdp_w is not None and self.provisioned_kw_all_in is not None and \
                self.provisioned_kw_all_in * 1000 < self.tdp_w:
            raise ValueError("provisioned_kw_all_in must be at least tdp_w (it includes the GPU board)")
        if self.tdp_w is not None and self.idle_power_w is not None and self.idle_power_w > self.tdp_w:
            raise ValueError("idle_power_w must not exceed tdp_w")
        return self

    @property
    def link_gb_s(self) -> float:
        return self.interconnect_gb_s or DEFAULT_INTERCONNECT_GB_S

    @property
    def scale_up_gpus(self) -> int:
        """GPUs that reach each other over `interconnect_gb_s`."""
        if self.scale_up_domain is not None:
            return self.scale_up_domain
        return DEFAULT_SCALE_UP_DOMAIN if self.link_gb_s >= SCALE_UP_LINK_THRESHOLD_GB_S else 1

    @property
    def node_gpus(self) -> int:
        return self.gpus_per_node or DEFAULT_GPUS_PER_NODE

    @property
    def host_link_gb_s(self) -> float:
        """Between GPUs of one server outside the scale-up domain: PCIe through the host."""
        return self.link_gb_s if self.scale_up_gpus == 1 else DEFAULT_INTERCONNECT_GB_S

    @property
    def network_gb_s(self) -> float:
        return self.scale_out_gb_s or DEFAULT_SCALE_OUT_GB_S

    @property
    def network_latency_us(self) -> float:
        return (
            self.scale_out_latency_us
            if self.scale_out_latency_us is not None
            else DEFAULT_SCALE_OUT_LATENCY_US
        )

    def peak_tflops(self, precision: str) -> float:
        return self.tflops[precision]


class CatalogGpu(GpuSpec):
    id: str

    @model_validator(mode="after")
    def _every_figure_sourced(self) -> CatalogGpu:
        sources = self.sources or {}
        for figure in SOURCED_FIGURES:
            if getattr(self, figure) is not None and not sources.get(figure):
                raise ValueError(f"{self.id}: figure '{figure}' has no source")
        for precision, sparse in (self.tflops_sparse or {}).items():
            if precision in self.tflops and self.tflops[precision] > sparse:
                raise ValueError(f"{self.id}: dense {precision} peak exceeds its sparse peak")
        return self


@lru_cache(maxsize=1)
def load_catalog() -> dict[str, CatalogGpu]:
    raw = tomllib.loads(CATALOG_PATH.read_text())
    return {gpu_id: CatalogGpu(id=gpu_id, **entry) for gpu_id, entry in raw.items()}



def get_gpu(gpu_id: str) -> CatalogGpu:
    return load_catalog()[gpu_id]


CUSTOM_GPU_TEMPLATE_ID = "h100-sxm"  # a custom GPU's inputs start from this catalog entry's figures


def custom_gpu_template(gpu_id: str = CUSTOM_GPU_TEMPLATE_ID, name: str = "my-gpu") -> dict[str, Any]:
    """A catalog GPU's figures in a scenario's custom-GPU form (`gpu` as an object): the starting values of a
    custom GPU, each with the catalog's source."""
    g = get_gpu(gpu_id)
    return {"name": name, "memory_gb": g.memory_gb, "hbm_tb_s": g.hbm_tb_s,
            "tflops": {p: g.tflops[p] for p in ("bf16", "fp8", "fp4") if p in g.tflops},
            "interconnect_gb_s": g.link_gb_s, "usd_per_hour": g.usd_per_hour}
