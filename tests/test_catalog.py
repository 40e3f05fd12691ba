"""The GPU catalog: every figure sourced, dense peaks per precision, sanity of values."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gpu_catalog import CatalogGpu, load_catalog

CATALOG = load_catalog()
REQUIRED = ["h100-sxm", "h100-pcie", "h100-nvl", "h200", "h20", "b200", "gb200", "a100-sxm-80gb", "a100-sxm-40gb",
            "a100-pcie-80gb", "a100-pcie-40gb", "l40s", "l4", "a10g", "rtx-4090", "rtx-6000-ada", "mi300x",
            "mi325x", "gaudi3"]


# Memory per GPU as each vendor's datasheet states it, and how it reads: HBM capacities are binary
# (nvidia-smi shows 81,559 MiB on an "80 GB" H100 and 143,771 MiB on a "141 GB" H200), so "80 GB" is
# 80 x 2^30 = 85.90e9 B; GDDR capacities (L40S, L4, A10G, RTX parts) are decimal.
GIB = 2**30 / 1e9
DATASHEET_MEMORY_GB = {
    "h100-sxm": 80 * GIB, "h100-pcie": 80 * GIB,  # NVIDIA H100 datasheet: 80 GB
    "h100-nvl": 94 * GIB,  # NVIDIA H100 datasheet, NVL column: 94 GB
    "h200": 141 * GIB,  # NVIDIA H200 datasheet: 141 GB HBM3e
    "h20": 96 * GIB,  # NVIDIA H20 product brief: 96 GB HBM3
    "b200": 180 * GIB,  # NVIDIA HGX B200 specifications: 1,440 GB for 8 GPUs
    "gb200": 186 * GIB,  # NVIDIA GB200 NVL72 specifications: up to 13.4 TB HBM3e for 72 GPUs
    "a100-sxm-80gb": 80 * GIB, "a100-pcie-80gb": 80 * GIB,  # NVIDIA A100 datasheet: 80 GB HBM2e
    "a100-sxm-40gb": 40 * GIB, "a100-pcie-40gb": 40 * GIB,  # NVIDIA A100 datasheet: 40 GB HBM2
    "mi300x": 192 * GIB,  # AMD Instinct MI300X data sheet: 192 GB HBM3
    "mi325x": 256 * GIB,  # AMD Instinct MI325X data sheet: 256 GB HBM3E
    "gaudi3": 128 * GIB,  # Intel Gaudi 3 white paper: 128 GB HBM2e
    "l40s": 48.0, "rtx-6000-ada": 48.0,  # NVIDIA L40S and RTX 6000 Ada datasheets: 48 GB GDDR6
    "l4": 24.0, "a10g": 24.0, "rtx-4090": 24.0,  # NVIDIA L4 datasheet, AWS G5 page, Ada whitepaper: 24 GB
}


def test_catalog_holds_the_gpus_teams_plan_for():
    """The catalog holds the GPUs the brief names, each with its datasheet memory (within 1%: the measured
    H100 and H200 capacities are 0.4% under the binary reading).
    Source: datasheet: the vendor datasheets named in DATASHEET_MEMORY_GB."""
    assert set(REQUIRED) <= set(CATALOG)
    assert len(CATALOG) >= 15
    assert set(DATASHEET_MEMORY_GB) == set(REQUIRED)
    for gpu_id, memory_gb in DATASHEET_MEMORY_GB.items():
        assert CATALOG[gpu_id].memory_gb == pytest.approx(memory_gb, rel=0.01), gpu_id


def test_the_loader_refuses_an_unsourced_figure_and_a_sparse_peak_as_dense():
    """The catalog's loader (not a re-check of its output) refuses an entry whose figure has no source, and
    one whose dense peak exceeds its sparse peak (a sparse figure entered as dense); the sparse peaks it
    holds are the datasheet's.
    Source: datasheet: NVIDIA H100 datasheet, SXM column: BF16 1,979 and FP8 3,958 TFLOP/s with sparsity."""
    assert CATALOG["h100-sxm"].tflops_sparse["bf16"] == pytest.approx(1979, rel=1e-3)
    assert CATALOG["h100-sxm"].tflops_sparse["fp8"] == pytest.approx(3958, rel=1e-3)
    entry = CATALOG["h100-sxm"].model_dump()
    no_source = {**entry, "sources": {k: v for k, v in entry["sources"].items() if k != "hbm_tb_s"}}
    with pytest.raises(ValidationError, match="hbm_tb_s' has no source"):
        CatalogGpu.model_validate(no_source)
    swapped = {**entry, "tflops": {**entry["tflops"], "bf16": 1978.8 * 1.01}}
    with pytest.raises(ValidationError, match="dense bf16 peak exceeds its sparse peak"):
        CatalogGpu.model_validate(swapped)


# Each part's dense 8-bit tensor peak as its datasheet gives it (half the "with sparsity" figure where the
# datasheet prints that one).
DATASHEET_8BIT = {
    "h100-sxm": ("fp8", 1978.9), "h200": ("fp8", 1978.9),  # H100 / H200 SXM datasheets: FP8 3,958 sparse
    "h100-pcie": ("fp8", 1513.0),  # H100 PCIe: FP8 3,026 sparse
    "h100-nvl": ("fp8", 1670.5),  # H100 NVL: FP8 3,341 sparse
    "h20": ("fp8", 296.0),  # H20 product brief: FP8 296 dense
    "b200": ("fp8", 4500.0),  # HGX B200: FP8 72 PFLOPS sparse for 8 GPUs
    "gb200": ("fp8", 5000.0),  # GB200 NVL72: FP8 720 PFLOPS sparse for 72 GPUs
    "a100-sxm-80gb": ("int8", 624.0), "a100-sxm-40gb": ("int8", 624.0),  # A100: INT8 1,248 TOPS sparse, no FP8
    "a100-pcie-80gb": ("int8", 624.0), "a100-pcie-40gb": ("int8", 624.0),
    "a10g": ("int8", 250.0),  # A10 datasheet: INT8 250 TOPS dense (NVIDIA publishes no A10G figure)
    "l40s": ("fp8", 733.0),  # L40S: FP8 1,466 sparse
    "l4": ("fp8", 242.5),  # L4: FP8 485 sparse
    "rtx-4090": ("fp8", 330.3),  # Ada whitepaper: FP8 with FP32 accumulate 330.3 dense
    "rtx-6000-ada": ("fp8", 728.5),  # RTX 6000 Ada: FP8 1,457 sparse
    "mi300x": ("fp8", 2614.9), "mi325x": ("fp8", 2614.9),  # AMD MI300X / MI325X data sheets: FP8 2,614.9 dense
    "gaudi3": ("fp8", 1835.0),  # Intel Gaudi 3 white paper: MME FP8 1,835 (as BF16)
}


@pytest.mark.parametrize("gpu_id", sorted(CATALOG))
def test_8bit_peak_is_the_datasheets_and_never_below_16bit(gpu_id):
    """On every catalog part the 8-bit tensor peak is its datasheet's, and at least the 16-bit one.
    Source: datasheet: the vendor datasheets named in DATASHEET_8BIT (a new part needs its figure there)."""
    g = CATALOG[gpu_id]
    precision, peak = DATASHEET_8BIT[gpu_id]
    assert g.tflops[precision] == pytest.approx(peak, rel=1e-3)
    if "fp8" in g.tflops:
        assert g.tflops["fp8"] >= g.tflops["bf16"]


@pytest.mark.parametrize("gpu_id, bf16, fp8, hbm", [
    ("h100-sxm", 989.4, 1978.9, 3.35), ("h200", 989.4, 1978.9, 4.8), ("b200", 2250, 4500, 8.0),
    ("mi300x", 1307.4, 2614.9, 5.3), ("l40s", 362.05, 733, 0.864),
])
def test_datasheet_dense_figures(gpu_id, bf16, fp8, hbm):
    """Source: datasheet: NVIDIA H100/H200/B200, AMD MI300X, NVIDIA L40S datasheets (dense = sparse / 2)."""
    g = CATALOG[gpu_id]
    assert g.tflops["bf16"] == bf16 and g.tflops["fp8"] == fp8 and g.hbm_tb_s == hbm


@pytest.mark.parametrize("gpu_id, bf16, hbm, tdp_w, link_gb_s", [
    ("h100-pcie", 756.5, 2.0, 350, 64.0),  # H100 PCIe: 1,513 sparse; 2.0 TB/s; 350 W; PCIe Gen5 x16
    ("a100-sxm-80gb", 312.0, 2.039, 400, 300.0),  # A100 SXM4 80GB: 312 dense; 2,039 GB/s; 400 W; NVLink 600 total
    ("a100-sxm-40gb", 312.0, 1.555, 400, 300.0),  # A100 SXM4 40GB: 1,555 GB/s
    ("l4", 121.0, 0.3, 72, 32.0),  # L4: 242 sparse; 300 GB/s; 72 W; PCIe Gen4 x16
    ("h200", 989.4, 4.8, 700, 450.0),  # H200 SXM: 4.8 TB/s; up to 700 W; NVLink 900 total
])
def test_datasheet_bandwidth_power_and_link(gpu_id, bf16, hbm, tdp_w, link_gb_s):
    """Source: datasheet: NVIDIA A100, H100 PCIe, H200 and L4 datasheets (per-direction link figures)."""
    g = CATALOG[gpu_id]
    assert (g.tflops["bf16"], g.hbm_tb_s, g.tdp_w, g.interconnect_gb_s) == (bf16, hbm, tdp_w, link_gb_s)


def test_no_fp8_on_ampere_and_fp4_only_on_blackwell():
    """Source: datasheet: Ampere has no FP8 tensor cores; FP4 arrives with Blackwell."""
    for gpu_id in ("a100-sxm-80gb", "a100-sxm-40gb", "a100-pcie-80gb", "a100-pcie-40gb", "a10g"):
        assert "fp8" not in CATALOG[gpu_id].tflops
    assert {g for g, spec in CATALOG.items() if "fp4" in spec.tflops} == {"b200", "gb200"}


def test_fp4_on_hopper_is_refused_with_a_message():
    """fp4 weights on Hopper are refused unless compute is bf16 (weight-only); then the GEMMs run at the
    bf16 peak, so the ridge is the bf16 one.
    Source: datasheet: NVIDIA H100 datasheet, SXM column: no FP4 tensor cores; BF16 1,979 TFLOP/s with
    sparsity = 989.4 dense over 3.35 TB/s gives a ridge of 989.4e12 / 3.35e12 = 295.3 FLOP/B (seed item 1)."""
    from planner import ScenarioError, plan

    with pytest.raises(ScenarioError, match="has no dense fp4 peak"):
        plan({"model": "llama-3.1-8b", "gpu": "h100-sxm", "weights": "fp4"})
    # weight-only fp4 dequantized to bf16 is allowed when asked for explicitly
    p = plan({"model": "llama-3.1-8b", "gpu": "h100-sxm", "weights": "fp4", "compute": "bf16"})
    assert p.memory.fits
    assert p.roofline.compute_precision == "bf16"
    assert p.roofline.ridge_flop_per_byte == pytest.approx(295.3, rel=0.001)
