"""Does a grouped MoE decode draw for its padded tensor-core tiles? Qwen3-30B-A3B at TP 1 (24 of 48 layers,
128 experts, top 8, context 1,024) decoding from CUDA graphs with torch._grouped_mm and with a Triton grouped
GEMM of row tile BLOCK_M = 16, 64 and 128 (tools/moe_tile_gemm.py, tools/measure_power_serving.py --plan
moe-tiles), scored by the shipped power rule over the useful FLOPs and over the FLOPs of the rows the tiles
ran (tools/moe_tile_power.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tools.moe_tile_power import FILES, MEASUREMENTS, padded_rows, points


@pytest.fixture(scope="module")
def scored() -> list[dict]:
    return points()


def _by_tile(name: str) -> dict[tuple[str, int], dict]:
    rows = json.loads((MEASUREMENTS / name).read_text())["points"]
    return {(p["shape"].rsplit("-", 1)[-1], p["batch"]): p for p in rows if "-tile" in p["shape"]}


def test_every_moe_tile_file_names_its_gpu_and_checks_its_kernel():
    """Source: measured: data/measurements/h*_power_moe_tiles*_2026-11-28.json: each file names GPU, driver,
    torch, CUDA, power limit and date; the Triton kernel matched a float64 per-expert reference on a fresh
    random routing at every tile (relative error 1.7e-3, bf16 operands), and every point records the routing
    it replayed (128 expert counts summing to batch x 8)."""
    for names in FILES.values():
        for name in names:
            data = json.loads((MEASUREMENTS / name).read_text())
            meta = data["meta"]
            assert {"gpu", "driver", "torch", "cuda", "date_utc", "power_limit_w"} <= meta.keys()
            assert meta["power_limit_w"] == 700.0 and meta["plan"] == "moe-tiles"
            assert all(0 < e < 5e-3 for e in meta["tile_check_rel_err"].values())
            assert len(data["points"]) == 24
            for p in data["points"]:
                assert len(p["expert_counts"]) == 128 and sum(p["expert_counts"]) == 8 * p["batch"]


def test_moe_decode_draw_grows_with_the_row_tile():
    """Source: measured: NVIDIA H100 80GB HBM3 (two runs) and NVIDIA H200, 2026-11-28
    (h*_power_moe_tiles*_2026-11-28.json). At batch 1-64 the same decode step draws more with a larger
    row tile, 16 < 64 < 128, on both GPUs and both H100 runs (H100 batch 16: 488, 533, 598 W; H200:
    555, 603, 643 W), while the larger tile's step is never more than 10% faster: the extra watts are
    the padded tile work, not bytes streamed faster. (From batch 128 the H200 sits at its 700 W limit
    and the order no longer shows.)"""
    for names in FILES.values():
        for name in names:
            by = _by_tile(name)
            for batch in (1, 16, 32, 64):
                small, mid, large = (by[(f"tile{t}", batch)] for t in (16, 64, 128))
                assert small["median_w"] < mid["median_w"] < large["median_w"], (name, batch)
                for a, b in ((small, mid), (mid, large)):
                    assert b["step_ms"] >= 0.9 * a["step_ms"], (name, batch)


def test_useful_flops_read_every_moe_tile_kernel_low(scored):
    """Source: measured: NVIDIA H100 80GB HBM3 (two runs) and NVIDIA H200, 2026-11-28:
    the rule over the useful FLOPs (what it counted until now) reads under the
    measured draw at all 72 points, every kernel and tile, and more than 15% under at 63 of them (worst
    -34.9%, the H100 at tile 128, batch 16)."""
    errors = [r["useful_err"] for r in scored]
    assert len(errors) == 72
    assert max(errors) < 0
    assert sum(e < -0.15 for e in errors) == 63


def test_padded_tile_flops_read_torch_grouped_mm_within_15_percent(scored):
    """Source: measured: NVIDIA H100 80GB HBM3 (two runs) and NVIDIA H200, 2026-11-28:
    torch._grouped_mm's points, scored with the FLOPs of the rows its own tile
    ran (64 rows on sm90 for groups of <= 128 rows: PyTorch aten/src/ATen/native/cuda/GroupMM.cu @ 06c0cf0,
    dispatch_bf16_grouped_kernel_on_tile_size, `small` picks the 64 x 128 x 128 tile), read within 15% at
    every batch on both GPUs (H100 -0.7% to -12.6%, H200 -7.1% to +0.6%), where the useful FLOPs read
    -14.95% (the H200 at batch 1) to -33.2%."""
    rows = [r for r in scored if "-tile" not in r["shape"]]
    assert len(rows) == 18
    for r in rows:
        assert r["padded_w"] == pytest.approx(r["measured_w"], rel=0.15), r
        assert r["padded_uncapped_w"] == pytest.approx(r["measured_w"], rel=0.15), r  # not the cap's doing
        assert r["useful_err"] < -0.14, r


@pytest.mark.xfail(strict=True, reason=(
    "padded tile FLOPs read 55 of 72 MoE tile points within 15% before the rule's cap at the power limit "
    "(65 with it): the H100 at tile 16 reads -18.5% to -18.7% at batch 128 and -26.1% at 256 (the draw "
    "nears 660 W whatever the tile), tile 128 +15.9% to +19.4% at batch 16-64, the H200 at tile 64 +16.4% "
    "to +17.7% at batch 16-32 and at tile 128 +19.3% to +26.3% from batch 16 (padding rows are zeros, "
    "perhaps cheaper than real operands)"))
def test_padded_tile_flops_within_15_percent_for_every_tile(scored):
    """Source: measured: NVIDIA H100 80GB HBM3 (two runs) and NVIDIA H200, 2026-11-28:
    the hypothesis as a kernel property, whatever the tile: the rule over the
    FLOPs of the padded rows within 15% at every batch for BLOCK_M = 16, 64 and 128 and torch._grouped_mm."""
    for r in scored:
        assert r["padded_uncapped_w"] == pytest.approx(r["measured_w"], rel=0.15), r


@given(st.lists(st.integers(0, 300), min_size=1, max_size=160), st.sampled_from([16, 32, 64, 128]))
def test_padded_rows_round_each_expert_up_to_whole_tiles(counts, tile):
    """Source: invariant: an expert's rows round up to a multiple of the tile, so the rows a grouped kernel
    runs are at least the routed rows, a multiple of the tile, and less than one tile more per busy expert."""
    rows = padded_rows(counts, tile)
    busy = sum(c > 0 for c in counts)
    assert rows % tile == 0
    assert sum(counts) <= rows <= sum(counts) + (tile - 1) * busy
    assert padded_rows(counts, 1) == sum(counts)


def test_moe_tile_measurement_files_exist():
    """Source: measured: the three moe-tiles files (two H100 runs, one H200) lie where the scorer reads."""
    for names in FILES.values():
        for name in names:
            assert Path(MEASUREMENTS / name).is_file()
