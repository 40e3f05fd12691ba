"""The GPU catalog: every figure sourced, dense peaks per precision, sanity of values."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gpu_catalog import CatalogGpu, load_catalog

CATALOG = load_catalog()
REQUIRED = ["h100-sxm", "h100-pcie", "h100-nvl", "h200", "h20", "b200", "gb200", "a100-sxm-80gb", "a100-sxm-40gb",
            "a100-pcie-80gb", "a100-pcie-40gb", "l40s", "l4", "a10g", "rtx-4090", "rtx-6000-ada", "mi300x",
            "mi325x", "gaudi3"]


def test_catalog_holds_the_gpus_teams_plan_for():
    """Source: contract: the catalog holds the GPUs the brief names."""
    assert set(REQUIRED) <= set(CATALOG)
    assert len(CATALOG) >= 15


def test_the_loader_refuses_an_unsourced_figure_and_a_sparse_peak_as_dense():
    """Source: contract: the catalog's loader (not a re-check of its output) refuses an entry whose figure has
    no source, and one whose dense peak exceeds its sparse peak (a sparse figure entered as dense)."""
    entry = CATALOG["h100-sxm"].model_dump()
    no_source = {**entry, "sources": {k: v for k, v in entry["sources"].items() if k != "hbm_tb_s"}}
    with pytest.raises(ValidationError, match="hbm_tb_s' has no source"):
        CatalogGpu.model_validate(no_source)
    swapped = {**entry, "tflops": {**entry["tflops"], "bf16": 1978.8 * 1.01}}
    with pytest.raises(ValidationError, match="dense bf16 peak exceeds its sparse peak"):
        CatalogGpu.model_validate(swapped)


@pytest.mark.parametrize("gpu_id", sorted(CATALOG))
def test_8bit_peak_never_below_16bit(gpu_id):
    """Source: invariant: on every catalog part an 8-bit tensor peak is at least the 16-bit one."""
    g = CATALOG[gpu_id]
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
    """Source: contract: fp4 weights on Hopper are refused unless compute is bf16 (weight-only)."""
    from planner import ScenarioError, plan

    with pytest.raises(ScenarioError, match="has no dense fp4 peak"):
        plan({"model": "llama-3.1-8b", "gpu": "h100-sxm", "weights": "fp4"})
    # weight-only fp4 dequantized to bf16 is allowed when asked for explicitly
    assert plan({"model": "llama-3.1-8b", "gpu": "h100-sxm", "weights": "fp4", "compute": "bf16"}).memory.fits
