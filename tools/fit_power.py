#!/usr/bin/env python3
"""Refit the power rule of planner/data/power.toml [model] on the serving-batch power measurements
(tools/measure_power_serving.py, data/measurements/h*_power_serving_2026-11-27.json) and print the fit, its
in-sample errors per GPU and the errors with each GPU held out.

    python -m tools.fit_power

Rule: GPU W = min(TDP, idle + memory_w_per_tb_s x HBM TB/s + (TDP - idle) x compute_slope x u_compute).
Each decode point's bytes, FLOPs and step time come from the planner's own `graph` step of that shape,
batch and context (the TP-4 rank's all-reduce left out: the measured rank ran none). Least squares on the
relative error over a grid (60-200 W per TB/s by 1, slope 0.5-5 by 0.01); a value at the grid's edge would
mean missing physics, and the tool says so. It then scores the shipped rule, unfitted, on shapes it never saw
(HELD_OUT: another dense shape, fp8 weights, a mixture of experts).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np

from planner.economics.plan_power import step_power
from planner.economics.power import power_spec
from planner.physics.latency import decode_step, prefill
from planner.scenario.scenario import parse_scenario, resolve

MEASUREMENTS = Path(__file__).resolve().parents[1] / "data" / "measurements"
FILES = {"h100-sxm": ["h100_power_serving_2026-11-27.json", "h100_power_serving_repeat_2026-11-27.json"],
         "h200": ["h200_power_serving_2026-11-27.json"]}
MEMORY_GRID = np.arange(60.0, 200.0 + 1e-9, 1.0)
SLOPE_GRID = np.arange(0.5, 5.0 + 1e-9, 0.01)


# Shapes the rule never saw (tools/measure_power_serving.py --plan held-out): scored, never fitted on
HELD_OUT = {"h100-sxm": ["h100_power_heldout_2026-11-28.json"],
            "h200": ["h200_power_heldout_2026-11-28.json"]}
HELD_OUT_SHAPES = {"qwen3-32b-tp2-rank": ("qwen3-32b", 2, "bf16"),
                   "llama-3.1-70b-tp4-rank-fp8": ("llama-3.1-70b", 4, "fp8"),
                   "qwen3-30b-a3b-tp1": ("qwen3-30b-a3b", 1, "bf16")}


def held_out_points() -> list[dict]:
    """Every held-out point (decode and prefill) with the plan's watts for its step under the shipped rule
    (planner/data/power.toml: step_power of the planner's own `graph` step, the all-reduce left out)."""
    points, deployments = [], {}
    for gpu, names in HELD_OUT.items():
        for name in names:
            for p in json.loads((MEASUREMENTS / name).read_text())["points"]:
                key = (gpu, p["shape"])
                if key not in deployments:
                    model, tp, weights = HELD_OUT_SHAPES[p["shape"]]
                    deployments[key] = resolve(parse_scenario(
                        {"model": model, "gpu": gpu, "tp": tp, "weights": weights, "kv_cache": "bf16",
                         "engine": "graph", "prompt_len": 1024, "output_len": 128}))
                d = deployments[key]
                step = (decode_step(d, float(p["batch"]), float(p["context"])) if p["kind"] == "decode"
                        else prefill(d, p["tokens"]))
                step = dataclasses.replace(step, communication_ms=0.0)
                points.append({"gpu": gpu, "shape": p["shape"], "kind": p["kind"],
                               "size": p.get("batch", p.get("tokens")), "measured_w": p["median_w"],
                               "plan_w": step_power(d, step).gpu_w})
    return points


def decode_points() -> list[dict]:
    """Every measured decode point with its GPU figures and the planner's HBM TB/s and compute utilization."""
    points, deployments = [], {}
    for gpu, names in FILES.items():
        for name in names:
            for p in json.loads((MEASUREMENTS / name).read_text())["points"]:
                if p["kind"] != "decode":
                    continue
                key = (gpu, p["shape"])
                if key not in deployments:
                    eight_b = p["shape"].startswith("llama-3.1-8b")
                    model, tp = ("llama-3.1-8b", 1) if eight_b else ("llama-3.1-70b", 4)
                    deployments[key] = resolve(parse_scenario(
                        {"model": model, "gpu": gpu, "tp": tp, "weights": "bf16", "kv_cache": "bf16",
                         "engine": "graph", "prompt_len": 1024, "output_len": 128}))
                d = deployments[key]
                step = dataclasses.replace(decode_step(d, float(p["batch"]), float(p["context"])),
                                           communication_ms=0.0)
                power = step_power(d, step)
                spec = power_spec(d.gpu)
                points.append({"gpu": gpu, "shape": p["shape"], "batch": p["batch"],
                               "measured_w": p["median_w"], "tb_s": power.hbm_tb_s,
                               "u_compute": power.compute_utilization,
                               "idle_w": spec.idle_power_w, "tdp_w": spec.tdp_w})
    return points


def predict(points: list[dict], memory_w_per_tb_s: np.ndarray, slope: np.ndarray) -> np.ndarray:
    """Watts of every point (last axis) for every (memory, slope) pair (leading axes)."""
    tb_s = np.array([p["tb_s"] for p in points])
    u = np.array([p["u_compute"] for p in points])
    idle = np.array([p["idle_w"] for p in points])
    tdp = np.array([p["tdp_w"] for p in points])
    watts = idle + memory_w_per_tb_s[..., None] * tb_s + (tdp - idle) * slope[..., None] * u
    return np.minimum(tdp, watts)


def fit(points: list[dict]) -> tuple[float, float]:
    """The (W per TB/s, compute slope) of least relative squared error over the grid."""
    m, s = np.meshgrid(MEMORY_GRID, SLOPE_GRID, indexing="ij")
    measured = np.array([p["measured_w"] for p in points])
    err = predict(points, m, s) / measured - 1.0
    i, j = np.unravel_index(np.argmin(np.mean(err**2, axis=-1)), m.shape)
    return float(MEMORY_GRID[i]), float(SLOPE_GRID[j])


def errors(points: list[dict], memory: float, slope: float) -> np.ndarray:
    measured = np.array([p["measured_w"] for p in points])
    return predict(points, np.array(memory), np.array(slope)) / measured - 1.0


def main() -> None:
    points = decode_points()
    memory, slope = fit(points)
    print(f"fit on {len(points)} decode points: {memory:g} W per TB/s, compute slope {slope:g}")
    for value, grid, name in ((memory, MEMORY_GRID, "W per TB/s"), (slope, SLOPE_GRID, "slope")):
        if value in (grid[0], grid[-1]):
            print(f"  {name} sits at its grid bound: missing physics, not a result")
    for gpu in FILES:
        e = np.abs(errors([p for p in points if p["gpu"] == gpu], memory, slope))
        print(f"  in sample, {gpu}: worst {e.max():.1%}, median {np.median(e):.1%}")
    for gpu in FILES:
        held = fit([p for p in points if p["gpu"] != gpu])
        e = np.abs(errors([p for p in points if p["gpu"] == gpu], *held))
        print(f"  {gpu} held out (fit {held[0]:g} W per TB/s, slope {held[1]:g}): worst {e.max():.1%}, "
              f"median {np.median(e):.1%}")
    print("shapes never fitted, the shipped rule (decode: worst signed error; prefill: worst absolute):")
    rows = held_out_points()
    for gpu in HELD_OUT:
        for shape in HELD_OUT_SHAPES:
            for kind in ("decode", "prefill"):
                e = [r["plan_w"] / r["measured_w"] - 1.0 for r in rows
                     if (r["gpu"], r["shape"], r["kind"]) == (gpu, shape, kind)]
                if e:
                    worst = max(e, key=abs)
                    print(f"  {gpu} {shape} {kind}: worst {worst:+.1%} over {len(e)} points, "
                          f"from {min(e):+.1%} to {max(e):+.1%}")


if __name__ == "__main__":
    main()
