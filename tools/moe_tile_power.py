#!/usr/bin/env python3
"""Score the power rule on the MoE tile measurements (tools/measure_power_serving.py --plan moe-tiles,
data/measurements/*_power_moe_tiles_2026-11-28.json): Qwen3-30B-A3B at TP 1 decoding with torch._grouped_mm
and with a Triton grouped GEMM of row tile BLOCK_M = 16, 64 and 128.

    python -m tools.moe_tile_power

Each point is read by the shipped rule (planner/data/power.toml [model]) two ways, over the measured step
time and the planner's bytes and FLOPs of exactly the measured graph (24 of 48 layers and the LM head):
  (a) the step's useful FLOPs (the routed experts at tokens x top_k rows), what the rule counted until now;
  (b) the routed experts' FLOPs on the rows the tiles ran: each expert's tokens rounded up to a multiple of
      the kernel's tile, from the routing the point recorded (`expert_counts`, the same in every layer).
torch._grouped_mm's tile on sm90 is 64 rows (PyTorch aten/src/ATen/native/cuda/GroupMM.cu: a group of at
most 128 rows takes the 64 x 128 x 128 tile; planner/data/power.toml's [model] source cites it).
The hypothesis (padded tensor-core work is what a grouped MoE decode draws for) holds if (b) is within 15%
at every batch for every tile where (a) is not. Each reading is also printed before the rule's cap at the
power limit: where (b) passes 700 W while the card drew well under it, its capped agreement is the cap's.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from planner.economics.power import power_spec, step_gpu_power_w
from planner.physics.roofline import compute_floor_ms, decode_work, routed_expert_work
from planner.scenario.scenario import parse_scenario, resolve

MEASUREMENTS = Path(__file__).resolve().parents[1] / "data" / "measurements"
FILES = {"h100-sxm": ["h100_power_moe_tiles_2026-11-28.json", "h100_power_moe_tiles_repeat_2026-11-28.json"],
         "h200": ["h200_power_moe_tiles_2026-11-28.json"]}
GROUPED_MM_TILE = 64  # torch._grouped_mm on sm90 for groups of <= 128 rows (GroupMM.cu)


def tile_of(shape: str) -> int:
    """The row tile the point's expert kernel ran: BLOCK_M of the Triton kernel, else torch._grouped_mm's."""
    return int(shape.rsplit("-tile", 1)[1]) if "-tile" in shape else GROUPED_MM_TILE


def padded_rows(counts: list[int], tile: int) -> int:
    """Rows the tiles ran: each expert's tokens rounded up to a multiple of the tile (0 stays 0)."""
    return sum(-(-c // tile) * tile for c in counts)


def score(gpu: str, p: dict) -> dict:
    """The rule's watts for one measured point, useful FLOPs (a) and padded-tile FLOPs (b)."""
    d = resolve(parse_scenario({"model": "qwen3-30b-a3b", "gpu": gpu, "tp": 1, "weights": "bf16",
                                "kv_cache": "bf16", "engine": "graph", "prompt_len": 1024,
                                "output_len": 128}))
    # the measured graph: `layers_timed` of the model's layers and the LM head
    d = dataclasses.replace(d, model=d.model.model_copy(update={"n_layers": p["layers_timed"]}))
    batch = float(p["batch"])
    work = decode_work(d, batch, float(p["context"]))
    step_s = p["step_ms"] * 1e-3
    tb_s = float(work.bytes) / step_s / 1e12
    routed_flops = float(routed_expert_work(d, batch)[0])
    tile = tile_of(p["shape"])
    padding = padded_rows(p["expert_counts"], tile) / sum(p["expert_counts"])
    spec = power_spec(d.gpu)
    out = {"gpu": gpu, "shape": p["shape"], "tile": tile, "batch": p["batch"], "step_ms": p["step_ms"],
           "measured_w": p["median_w"], "padding": padding}
    for key, extra in (("useful", 0.0), ("padded", routed_flops * (padding - 1.0))):
        padded_work = dataclasses.replace(work, gemm_flops=work.gemm_flops + extra)
        u = float(compute_floor_ms(d, padded_work)) / p["step_ms"]
        out[f"{key}_w"] = step_gpu_power_w(spec, tb_s, u)
        out[f"{key}_err"] = out[f"{key}_w"] / p["median_w"] - 1.0
        # the reading before the 700 W cap: where it passes the cap and the card drew well under it, the
        # capped reading's agreement is the cap's, not the rule's
        out[f"{key}_uncapped_w"] = step_gpu_power_w(spec, tb_s, u, capped=False)
        out[f"{key}_uncapped_err"] = out[f"{key}_uncapped_w"] / p["median_w"] - 1.0
    return out


def points() -> list[dict]:
    rows = []
    for gpu, names in FILES.items():
        for name in names:
            path = MEASUREMENTS / name
            if path.exists():
                rows += [score(gpu, p) | {"file": name} for p in json.loads(path.read_text())["points"]]
    return rows


def main() -> None:
    rows = points()
    print(f"{'file':44} {'kernel':>8} {'batch':>5} {'step ms':>8} {'W meas':>7} {'(a) W':>7} {'(a)':>7} "
          f"{'(b) W':>7} {'(b)':>7} {'rows x':>6}")
    for r in rows:
        kernel = f"tile{r['tile']}" if "-tile" in r["shape"] else "grouped"
        print(f"{r['file']:44} {kernel:>8} {r['batch']:>5} {r['step_ms']:8.2f} {r['measured_w']:7.1f} "
              f"{r['useful_w']:7.1f} {r['useful_err']:+7.1%} {r['padded_w']:7.1f} {r['padded_err']:+7.1%} "
              f"{r['padding']:6.2f}")
    for key in ("useful", "padded", "useful_uncapped", "padded_uncapped"):
        errs = [r[f"{key}_err"] for r in rows]
        within = sum(abs(e) <= 0.15 for e in errs)
        print(f"{key}: worst {max(errs, key=abs):+.1%}, within 15%: {within}/{len(errs)}")


if __name__ == "__main__":
    main()
