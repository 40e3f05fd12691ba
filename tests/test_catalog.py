"""The GPU catalog: every figure sourced, dense peaks per precision, sanity of values."""

from __future__ import annotations

import pytest

from gpu_catalog import SOURCED_FIGURES, load_catalog

CATALOG = load_catalog()
REQUIRED = ["h100-sxm", "h100-pcie", "h100-nvl", "h200", "h20", "b200", "gb200", "a100-sxm-80gb", "a100-sxm-40gb",
            "a100-pcie-80gb", "a100-pcie-40gb", "l40s", "l4", "a10g", "rtx-4090", "rtx-6000-ada", "mi300x",
            "mi325x", "gaudi3"]


def test_catalog_holds_the_gpus_teams_plan_for():
    assert set(REQUIRED) <= set(CATALOG)
    assert len(CATALOG) >= 15


@pytest.mark.parametrize("gpu_id", sorted(CATALOG))
def test_every_figure_has_a_source(gpu_id):
    g = CATALOG[gpu_id]
    for figure in SOURCED_FIGURES:
        if getattr(g, figure) is not None:
            assert g.sources.get(figure), f"{gpu_id}.{figure}"


@pytest.mark.parametrize("gpu_id", sorted(CATALOG))
def test_values_positive_and_dense_not_above_sparse(gpu_id):
    g = CATALOG[gpu_id]
    assert g.memory_gb > 0 and g.hbm_tb_s > 0 and g.interconnect_gb_s > 0
    assert "bf16" in g.tflops
    for precision, dense in g.tflops.items():
        assert dense > 0
        if g.tflops_sparse and precision in g.tflops_sparse:
            assert dense <= g.tflops_sparse[precision]
    # an 8-bit peak is never below the 16-bit one on these parts
    if "fp8" in g.tflops:
        assert g.tflops["fp8"] >= g.tflops["bf16"]


@pytest.mark.parametrize("gpu_id, bf16, fp8, hbm", [
    ("h100-sxm", 989.4, 1978.9, 3.35), ("h200", 989.4, 1978.9, 4.8), ("b200", 2250, 4500, 8.0),
    ("mi300x", 1307.4, 2614.9, 5.3), ("l40s", 362.05, 733, 0.864),
])
def test_datasheet_dense_figures(gpu_id, bf16, fp8, hbm):
    g = CATALOG[gpu_id]
    assert g.tflops["bf16"] == bf16 and g.tflops["fp8"] == fp8 and g.hbm_tb_s == hbm


def test_no_fp8_on_ampere_and_fp4_only_on_blackwell():
    for gpu_id in ("a100-sxm-80gb", "a100-sxm-40gb", "a100-pcie-80gb", "a100-pcie-40gb", "a10g"):
        assert "fp8" not in CATALOG[gpu_id].tflops
    assert {g for g, spec in CATALOG.items() if "fp4" in spec.tflops} == {"b200", "gb200"}


def test_fp4_on_hopper_is_refused_with_a_message():
    from planner import ScenarioError, plan

    with pytest.raises(ScenarioError, match="has no dense fp4 peak"):
        plan({"model": "llama-3.1-8b", "gpu": "h100-sxm", "weights": "fp4"})
    # weight-only fp4 dequantized to bf16 is allowed when asked for explicitly
    assert plan({"model": "llama-3.1-8b", "gpu": "h100-sxm", "weights": "fp4", "compute": "bf16"}).memory.fits
