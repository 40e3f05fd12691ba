"""Candidates built cheapest cost floor first, only until the `keep` cheapest built cost less than every floor
left: a caller that keeps the `keep` cheapest (ties broken by list order or any figure) gets the same ones
as by building every candidate, and the candidates left unbuilt all cost more than `keep` built ones. The
disaggregated fleets (planner.serving.disaggregation) pair their pools so: a pairing's floor prices its
decode workers and the fewest prefill workers their capacity allows."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from planner.serving.cost_cutoff import CostCutoff

R = TypeVar("R")


def build_cheapest(candidates: Sequence[tuple[float, Callable[[], R | None]]], keep: int,
                   cost: Callable[[R], float]) -> list[R]:
    """`candidates`: (a lower bound on the cost of what it builds, the build; None: nothing built). What was
    built, in list order: candidates are built in order of their floors (list order among equal floors)
    until the next floor is above the `keep`-th cheapest cost built."""
    cutoff = CostCutoff(keep)
    built: dict[int, R] = {}
    for i in sorted(range(len(candidates)), key=lambda i: candidates[i][0]):
        floor, build = candidates[i]
        if floor > cutoff.usd_per_hour:
            break  # this and every candidate left cost more than `keep` built ones
        result = build()
        if result is not None:
            built[i] = result
            cutoff.add(cost(result))
    return [built[i] for i in sorted(built)]
