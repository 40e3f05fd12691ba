"""Batch sweep: the decode figures of one scenario over a grid of batch sizes, vectorized."""

from __future__ import annotations

from typing import Any

import numpy as np

from planner.economics.cost import gpu_price, usd_per_million_output_tokens
from planner.hardware.parallelism import sharding
from planner.physics.latency import decode_step
from planner.physics.memory import plan_memory
from planner.physics.roofline import ridge_flop_per_byte
from planner.scenario.scenario import Scenario, parse_scenario, resolve


def batch_grid(max_batch: int, chosen: int | None = None, points_per_octave: int = 4) -> np.ndarray:
    """Batches from 1 to past the max batch, log-spaced, with the max and the chosen batch included."""
    top = max(2 * max(max_batch, 1), 16, chosen or 1)
    grid = np.unique(
        np.round(np.logspace(0, np.log2(top), int(np.log2(top) * points_per_octave) + 1, base=2))
    )
    extra = [b for b in (max_batch, chosen) if b and b >= 1]
    return np.unique(np.concatenate([grid, np.array(extra, dtype=float)])).astype(int)


def batch_caps(max_batch: int) -> np.ndarray:
    """batch_grid(max_batch) up to the max batch (every batch that fits), from the same grid without
    batch_grid's sorts (its rounded log grid is already ascending): the sizing search asks for it for
    thousands of max batches."""
    top = max(2 * max(max_batch, 1), 16)
    stop = np.log2(top)
    num = int(stop * 4) + 1  # at least 17
    exponents = np.arange(num, dtype=float)  # np.logspace(0, stop, num, base=2)'s linspace, as numpy steps it
    exponents *= stop / (num - 1)
    exponents[-1] = stop
    grid = np.round(np.power(2, exponents))
    grid = grid[grid <= max_batch]
    fresh = np.empty(len(grid), dtype=bool)
    fresh[:1] = True
    np.not_equal(grid[1:], grid[:-1], out=fresh[1:])
    grid = grid[fresh]
    if max_batch >= 1 and (not len(grid) or grid[-1] != max_batch):
        grid = np.append(grid, float(max_batch))
    return grid.astype(int)


def batch_sweep(
    scenario: Scenario | dict[str, Any], batches: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """Columns: batch, itl_ms, itl_ms_bound, output_tokens_per_s(_bound), tokens_per_s_per_user, decode_ai,
    usd_per_million_output_tokens, fits (batch <= max batch)."""
    if not isinstance(scenario, Scenario):
        scenario = parse_scenario(scenario)
    d = resolve(scenario)
    mem = plan_memory(d, scenario.context_len_resolved)
    if batches is None:
        batches = batch_grid(mem.max_batch, scenario.batch)
    b = np.asarray(batches, dtype=float)
    step = decode_step(d, b, scenario.mean_context)
    itl = np.asarray(step.total_ms)
    bound = np.asarray(step.bound_ms)
    price = gpu_price(scenario.usd_per_gpu_hour, d.gpu) or float("nan")
    tps = b * 1000.0 / itl
    return {
        "batch": b.astype(int), "itl_ms": itl, "itl_ms_bound": bound, "output_tokens_per_s": tps,
        "output_tokens_per_s_bound": b * 1000.0 / bound, "tokens_per_s_per_user": 1000.0 / itl,
        "decode_ai": np.asarray(step.work.arithmetic_intensity),
        "ridge_flop_per_byte": np.full_like(b, ridge_flop_per_byte(d)),
        "usd_per_million_output_tokens": np.asarray(
            usd_per_million_output_tokens(sharding(d).gpus_per_replica, price, tps)
        ),
        "fits": b <= mem.max_batch,
    }
