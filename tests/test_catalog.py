"""The GPU catalog: every figure sourced, dense peaks per precision, sanity of values."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gpu_catalog import CatalogGpu, load_catalog

CATALOG = load_catalog()
REQUIRED = [
    "h100-sxm", "h100-pcie", "h100-nvl", "h200", "h20", "b200", "gb200", "a100-sxm-80gb", "a100-sxm-40gb",
    "a100-pcie-80gb", "a100-pcie-40gb", "l40s", "l4", "a10g", "rtx-4090", "rtx-6000-ada", "mi300x", "mi325x",
    "gaudi3",
    # late-2026 quotes (issue 21): Blackwell Ultra, RTX PRO Blackwell, H200 NVL, CDNA4
    "b300", "gb300", "rtx-pro-6000", "h200-nvl", "mi355x", "mi350x",
]


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
    "b300": 288 * GIB,  # NVIDIA HGX B300: up to 2.3 TB for 8 GPUs = 288 GB HBM3e each
    "gb300": 288 * GIB,  # NVIDIA GB300 NVL72: 288 GB HBM3e per Blackwell Ultra GPU (up to 20 TB per 72)
    "rtx-pro-6000": 96.0,  # NVIDIA RTX PRO 6000 Blackwell Server Edition datasheet: 96 GB GDDR7
    "h200-nvl": 141 * GIB,  # NVIDIA H200 datasheet, NVL column: 141 GB HBM3e
    "mi355x": 288 * GIB, "mi350x": 288 * GIB,  # AMD Instinct MI355X / MI350X data sheets: 288 GB HBM3E
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
    "h100-sxm": ("fp8", 1978.9),
    "h200": ("fp8", 1978.9),  # H100 / H200 SXM datasheets: FP8 3,958 sparse
    "h100-pcie": ("fp8", 1513.0),  # H100 PCIe: FP8 3,026 sparse
    "h100-nvl": ("fp8", 1670.5),  # H100 NVL: FP8 3,341 sparse
    "h20": ("fp8", 296.0),  # H20 product brief: FP8 296 dense
    "b200": ("fp8", 4500.0),  # HGX B200: FP8 72 PFLOPS sparse for 8 GPUs
    "gb200": ("fp8", 5000.0),  # GB200 NVL72: FP8 720 PFLOPS sparse for 72 GPUs
    "a100-sxm-80gb": ("int8", 624.0),
    "a100-sxm-40gb": ("int8", 624.0),  # A100: INT8 1,248 TOPS sparse, no FP8
    "a100-pcie-80gb": ("int8", 624.0), "a100-pcie-40gb": ("int8", 624.0),
    "a10g": ("int8", 250.0),  # A10 datasheet: INT8 250 TOPS dense (NVIDIA publishes no A10G figure)
    "l40s": ("fp8", 733.0),  # L40S: FP8 1,466 sparse
    "l4": ("fp8", 242.5),  # L4: FP8 485 sparse
    "rtx-4090": ("fp8", 330.3),  # Ada whitepaper: FP8 with FP32 accumulate 330.3 dense
    "rtx-6000-ada": ("fp8", 728.5),  # RTX 6000 Ada: FP8 1,457 sparse
    "mi300x": ("fp8", 2614.9),
    "mi325x": ("fp8", 2614.9),  # AMD MI300X / MI325X data sheets: FP8 2,614.9 dense
    "gaudi3": ("fp8", 1835.0),  # Intel Gaudi 3 white paper: MME FP8 1,835 (as BF16)
    "b300": ("fp8", 4500.0),  # HGX B300: FP8/FP6 72 PFLOPS sparse for 8 GPUs (dense not published: / 2)
    "gb300": ("fp8", 5000.0),  # GB300 NVL72: FP8/FP6 720 PFLOPS sparse for 72 GPUs (dense: / 2)
    "rtx-pro-6000": (
        "fp8", 1000.0,
    ),  # RTX PRO 6000 Server: FP4 4 PFLOPS sparse; fp8 = fp4 dense / 2 (derived)
    "h200-nvl": ("fp8", 1670.5),  # H200 NVL: FP8 3,341 sparse
    "mi355x": ("fp8", 5033.2),
    "mi350x": ("fp8", 4613.7),  # AMD MI355X / MI350X data sheets: FP8 dense
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


@pytest.mark.parametrize(
    "gpu_id, bf16, hbm, tdp_w, link_gb_s",
    [
        ("h100-pcie", 756.5, 2.0, 350, 64.0),  # H100 PCIe: 1,513 sparse; 2.0 TB/s; 350 W; PCIe Gen5 x16
        (
            "a100-sxm-80gb", 312.0, 2.039, 400, 300.0,
        ),  # A100 SXM4 80GB: 312 dense; 2,039 GB/s; 400 W; NVLink 600 total
        ("a100-sxm-40gb", 312.0, 1.555, 400, 300.0),  # A100 SXM4 40GB: 1,555 GB/s
        ("l4", 121.0, 0.3, 72, 32.0),  # L4: 242 sparse; 300 GB/s; 72 W; PCIe Gen4 x16
        ("h200", 989.4, 4.8, 700, 450.0),  # H200 SXM: 4.8 TB/s; up to 700 W; NVLink 900 total
    ],
)
def test_datasheet_bandwidth_power_and_link(gpu_id, bf16, hbm, tdp_w, link_gb_s):
    """Source: datasheet: NVIDIA A100, H100 PCIe, H200 and L4 datasheets (per-direction link figures)."""
    g = CATALOG[gpu_id]
    assert (g.tflops["bf16"], g.hbm_tb_s, g.tdp_w, g.interconnect_gb_s) == (bf16, hbm, tdp_w, link_gb_s)


def test_no_fp8_on_ampere_and_fp4_only_on_blackwell_and_cdna4():
    """Source: datasheet: Ampere has no FP8 tensor cores; FP4 arrives with Blackwell (B200, GB200, B300,
    GB300, RTX PRO 6000 Blackwell) and AMD CDNA4 (MI350X, MI355X data sheets: MXFP4)."""
    for gpu_id in ("a100-sxm-80gb", "a100-sxm-40gb", "a100-pcie-80gb", "a100-pcie-40gb", "a10g"):
        assert "fp8" not in CATALOG[gpu_id].tflops
    assert {g for g, spec in CATALOG.items() if "fp4" in spec.tflops} == {
        "b200", "gb200", "b300", "gb300", "rtx-pro-6000", "mi355x", "mi350x"}


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


# Headline figures of the late-2026 parts, typed from each datasheet (not from gpus.toml): memory GB as
# printed, HBM TB/s, dense bf16 / fp8 / fp4 TFLOP/s, TDP W, scale-up link GB/s per direction, domain.
NEW_PARTS = {
    # NVIDIA HGX B300 (nvidia.com/en-us/data-center/hgx): per 8 GPUs 2.3 TB, FP16/BF16 36 PF and FP8 72 PF
    # sparse, FP4 105 PF dense; NVLink 1.8 TB/s per GPU; TDP 1.1 kW (Verda GB300/B300 table); 576/72 TB/s HBM.
    "b300": (288, 8.0, 36e3 / 16, 72e3 / 16, 105e3 / 8, 1100, 900.0, 8),
    # NVIDIA GB300 NVL72: per 72 GPUs FP16/BF16 360 PF, FP8 720 PF sparse, FP4 1,080 PF dense, 576 TB/s,
    # NVLink 130 TB/s; 1.4 kW per GPU (Verda table); one NVLink domain of 72.
    "gb300": (288, 8.0, 360e3 / 144, 720e3 / 144, 1080e3 / 72, 1400, 900.0, 72),
    # NVIDIA RTX PRO 6000 Blackwell Server Edition: 96 GB GDDR7, 1,597 GB/s, FP4 4 PF sparse, 600 W, PCIe
    # Gen5 x16 (64 GB/s per direction), no NVLink. bf16 / fp8 derived at fp4's 1/4 and 1/2.
    "rtx-pro-6000": (96, 1.597, 4000 / 8, 4000 / 4, 4000 / 2, 600, 64.0, 1),
    # NVIDIA H200 datasheet, NVL column: 141 GB, 4.8 TB/s, BF16 1,671 / FP8 3,341 sparse, 600 W, NVLink bridge
    # 900 GB/s total; no fp4.
    "h200-nvl": (141, 4.8, 1671 / 2, 3341 / 2, None, 600, 450.0, 2),
    # AMD Instinct MI355X: 288 GB, 8 TB/s, FP16 2.5 PF, FP8 5.0 PF, MXFP4 10.1 PF dense, 1,400 W,
    # 7 x 153.6 GB/s Infinity Fabric; 8-GPU platform.
    "mi355x": (288, 8.0, 2516.6, 5033.2, 10066.4, 1400, 7 * 153.6 / 2, 8),
    # AMD Instinct MI350X: 288 GB, 8 TB/s, FP16 2.3 PF, FP8 4.6 PF, MXFP4 9.2 PF dense, 1,000 W.
    "mi350x": (288, 8.0, 2306.9, 4613.7, 9227.5, 1000, 7 * 153.6 / 2, 8),
}


@pytest.mark.parametrize("gpu_id", sorted(NEW_PARTS))
def test_late_2026_parts_carry_their_datasheet_headline_figures(gpu_id):
    """Each new part's memory, bandwidth, dense peaks, TDP and link as its datasheet prints them (within 0.1%:
    the datasheets round to 4 significant figures). A peak entered sparse, or a per-rack figure left unsplit,
    misses by 2x or 72x.
    Source: datasheet: NVIDIA HGX B300, GB300 NVL72, RTX PRO 6000 Blackwell Server Edition, H200 NVL; AMD
    Instinct MI355X and MI350X data sheets (figures and URLs in NEW_PARTS and in each [<id>.sources])."""
    memory, hbm, bf16, fp8, fp4, tdp_w, link, domain = NEW_PARTS[gpu_id]
    g = CATALOG[gpu_id]
    printed = memory * GIB if g.hbm_tb_s > 2 else float(memory)  # HBM binary, GDDR decimal
    assert g.memory_gb == pytest.approx(printed, rel=1e-3)
    assert g.hbm_tb_s == pytest.approx(hbm, rel=1e-3)
    assert g.tflops["bf16"] == pytest.approx(bf16, rel=1e-3)
    assert g.tflops["fp8"] == pytest.approx(fp8, rel=1e-3)
    assert g.tflops.get("fp4") == (None if fp4 is None else pytest.approx(fp4, rel=1e-3))
    assert (g.tdp_w, g.scale_up_domain) == (tdp_w, domain)
    assert g.interconnect_gb_s == pytest.approx(link, rel=1e-3)


def test_fp4_is_twice_fp8_where_the_datasheet_says_so_and_not_on_blackwell_ultra():
    """Dense fp4 = 2x dense fp8 on B200 (HGX B200: FP4 144 PF vs FP8 72 PF sparse), GB200 (1,440 vs 720 PF)
    and CDNA4 (MI355X 10.1 vs 5.0 PF, MI350X 9.2 vs 4.6 PF); Blackwell Ultra prints dense FP4 on its own: HGX
    B300 105 PF dense vs FP8 72 / 2 = 36 PF dense (2.92x), GB300 1,080 vs 360 PF (3x); RTX PRO 6000 prints
    only FP4, so nothing is checked there. fp6 (reference only) = fp8 on Blackwell, = fp4 on CDNA4.
    Source: datasheet: the figures above."""
    for gpu_id in ("b200", "gb200", "mi355x", "mi350x"):
        g = CATALOG[gpu_id]
        assert g.tflops["fp4"] == pytest.approx(2 * g.tflops["fp8"], rel=1e-3), gpu_id
    assert CATALOG["b300"].tflops["fp4"] / CATALOG["b300"].tflops["fp8"] == pytest.approx(105 / 36, rel=1e-3)
    assert CATALOG["gb300"].tflops["fp4"] / CATALOG["gb300"].tflops["fp8"] == pytest.approx(3.0, rel=1e-3)
    for gpu_id in ("b200", "gb200", "b300", "gb300"):
        assert CATALOG[gpu_id].tflops_reference == {"fp6": CATALOG[gpu_id].tflops["fp8"]}
    for gpu_id in ("mi355x", "mi350x"):
        assert CATALOG[gpu_id].tflops_reference == {"fp6": CATALOG[gpu_id].tflops["fp4"]}
    assert "fp6" not in CATALOG["b300"].tflops  # the planner models no fp6


# Fields that are a figure (everything but names, the id, the sources themselves and free-text notes).
NOT_FIGURES = {"id", "name", "vendor", "sources", "power_source_note", "generation"}


@pytest.mark.parametrize("gpu_id", sorted(CATALOG))
def test_every_figure_of_every_gpu_has_a_source(gpu_id):
    """Every field a catalog GPU sets, new power, price and validation fields included, has a non-empty
    source string; the loader's own list (SOURCED_FIGURES) must cover every figure GpuSpec can hold.
    Source: contract: the catalog rule 'a source for every figure' (common standards,
    gpu_catalog/README.md)."""
    from gpu_catalog import SOURCED_FIGURES

    g = CATALOG[gpu_id]
    figures = [f for f in type(g).model_fields if f not in NOT_FIGURES and getattr(g, f) is not None]
    assert set(figures) <= set(SOURCED_FIGURES)
    missing = [f for f in figures if not (g.sources or {}).get(f, "").strip()]
    assert not missing, f"{gpu_id}: no source for {missing}"
    power_and_flags = {"tdp_w", "provisioned_kw_all_in", "idle_power_w", "price_is_estimate", "validated"}
    assert power_and_flags <= set(figures)


# InferenceX's all-in provisioned power per GPU, kW (github:SemiAnalysisAI/InferenceX-app@8647066e,
# packages/app/src/lib/constants.ts, GPU_SPECS power; issue 24 quotes the first four).
INFERENCEX_KW = {"h100-sxm": 1.73, "h200": 1.73, "b200": 2.17, "mi355x": 2.65,
                 "b300": 2.17, "gb200": 2.1, "gb300": 2.1, "mi300x": 1.79, "mi325x": 2.18}


def test_all_in_power_reproduces_inferencex_and_exceeds_the_board():
    """The InferenceX constants are carried exactly; every GPU's all-in power exceeds its board TDP; the
    formula used elsewhere, (system kW / GPUs) x PUE 1.3, lands within 8% of InferenceX where both exist:
    DGX H100 10.2 kW / 8 x 1.3 = 1.6575 kW vs 1.73 (-4.2%), DGX B200 14.3 kW / 8 x 1.3 = 2.324 vs 2.17
    (+7.1%); DGX A100 6.5 kW / 8 x 1.3 = 1.05625 kW; an L4 with no system datasheet
    72 W x 10.2 / 5.6 x 1.3 = 0.1705 kW.
    Source: published: InferenceX constants.ts (commit above), NVIDIA DGX H100 / B200 / A100 datasheets
    (10.2, 14.3, 6.5 kW max system power)."""
    for gpu_id, kw in INFERENCEX_KW.items():
        assert CATALOG[gpu_id].provisioned_kw_all_in == kw, gpu_id
        assert "InferenceX" in CATALOG[gpu_id].sources["provisioned_kw_all_in"]
    for gpu_id, g in CATALOG.items():
        assert g.provisioned_kw_all_in > g.tdp_w / 1000, gpu_id
    assert pytest.approx(1.73, rel=0.05) == 10.2 / 8 * 1.3
    assert pytest.approx(2.17, rel=0.08) == 14.3 / 8 * 1.3
    assert CATALOG["a100-sxm-80gb"].provisioned_kw_all_in == pytest.approx(1.05625, abs=6e-4)
    assert CATALOG["l4"].provisioned_kw_all_in == pytest.approx(0.1705, abs=6e-4)


def test_the_loader_refuses_all_in_power_below_the_board_and_idle_power_above_tdp():
    """Source: contract: provisioned_kw_all_in includes the GPU board (>= tdp_w / 1000) and a board idles
    below its TDP; an unknown reference precision is refused (fp6 is the only one)."""
    entry = CATALOG["h100-sxm"].model_dump()
    with pytest.raises(ValidationError, match="provisioned_kw_all_in must be at least tdp_w"):
        CatalogGpu.model_validate({**entry, "provisioned_kw_all_in": 0.65})
    with pytest.raises(ValidationError, match="idle_power_w must not exceed tdp_w"):
        CatalogGpu.model_validate({**entry, "idle_power_w": 701.0})
    with pytest.raises(ValidationError, match="unknown reference precision"):
        CatalogGpu.model_validate({**entry, "tflops_reference": {"fp2": 1.0}})


def test_idle_power_is_our_measurement_on_hopper():
    """H100 SXM and H200 idle power is the median our runs logged (nvidia-smi power.draw, CUDA context open);
    under an HBM-bound copy the board drew well under TDP, under a bf16 GEMM it reached the 700 W cap.
    Source: measured: data/measurements/h100_power_states_2026-11-26.json and
    h200_power_states_2026-11-26.json."""
    import json
    from pathlib import Path

    root = Path(__file__).parent.parent / "data" / "measurements"
    for gpu_id, name in (("h100-sxm", "h100"), ("h200", "h200")):
        m = json.loads((root / f"{name}_power_states_2026-11-26.json").read_text())
        assert CATALOG[gpu_id].idle_power_w == pytest.approx(m["idle"]["median_w"], abs=0.05)
        assert m["idle"]["median_w"] < m["hbm_copy_2gib"]["median_w"] < 0.75 * 700
        assert m["bf16_gemm_8192"]["median_w"] == pytest.approx(700, rel=0.02)
    for gpu_id, g in CATALOG.items():
        if gpu_id not in ("h100-sxm", "h200"):
            assert g.sources["idle_power_w"].startswith("assumption"), gpu_id


def test_validated_hardware_is_what_our_data_measured():
    """Validated = this GPU or its chip generation has measured rows: H100 SXM and H200 (our runs),
    A100 SXM 80GB (published rows, at least 5 as error bands need), B200, B300, MI300X, MI325X and MI355X
    (public closed-loop serving runs the production profiles are fitted and cross-validated on, issue 20),
    and their same-generation siblings; no Intel part, nor a GPU whose chip has no rows, is validated.
    Source: published: row counts by GPU in data/reference/measured_published.csv and
    data/reference/serving_runs_published.csv."""
    import csv
    from pathlib import Path

    reference = Path(__file__).parent.parent / "data/reference"
    rows = list(csv.DictReader((reference / "measured_published.csv").open()))
    a100 = [r for r in rows if "A100 SXM 80GB" in r["gpu"] or "A100-80G" in r["gpu"]]
    assert len(a100) >= 5
    runs = list(csv.DictReader((reference / "serving_runs_published.csv").open()))
    single_node = [r for r in runs if r["disaggregated"] == "False" and r["multinode"] == "False"]
    for gpu_id in ("b200", "b300", "mi300x", "mi325x", "mi355x"):
        assert sum(r["gpu"] == gpu_id for r in single_node) >= 5, gpu_id
    validated = {g for g, spec in CATALOG.items() if spec.validated}
    assert {"h100-sxm", "h200", "a100-sxm-80gb", "b200", "b300", "mi300x", "mi325x", "mi355x"} <= validated
    for gpu_id in validated:
        assert CATALOG[gpu_id].sources["validated"].split(":")[0] in ("measured", "published", "generation")
    for gpu_id in ("gaudi3", "rtx-pro-6000", "l4", "rtx-4090"):
        assert CATALOG[gpu_id].validated is False, gpu_id


def test_prices_marked_estimate_where_their_source_names_no_list_price():
    """A price whose source says 'estimate' is marked price_is_estimate; every late-2026 part is (no list
    price seen); a named list page (Lambda, AWS, Google Cloud) is not.
    Source: contract: common standards, 'prices that are estimates are marked as estimates'."""
    for gpu_id, g in CATALOG.items():
        if g.sources["usd_per_hour"].startswith("estimate"):
            assert g.price_is_estimate is True, gpu_id
    assert all(CATALOG[g].price_is_estimate for g in NEW_PARTS)
    for gpu_id in ("h100-sxm", "b200", "l4", "a10g"):
        assert CATALOG[gpu_id].price_is_estimate is False
