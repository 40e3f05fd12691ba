"""Candidates built cheapest cost floor first, only until the `keep` cheapest built cost less than every floor
left: a caller that keeps the `keep` cheapest (ties broken by list order or any figure) gets the same ones
as by building every candidate, and the candidates left unbuilt all cost more than `keep` built ones. The
disaggregated fleets (planner.serving.disaggregation) pair their pools so: a pairing's floor prices its
decode workers and the fewest prefill workers their capacity allows."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from planner.serving.cost_cutoff import CostCutoff

R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


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



class Group(Protocol[R_co]):
    """Candidates listed a few at a time: `floor` is at most the floor of every candidate not listed yet;
    `listed(floor)` (the build has reached `floor`) lists at least every candidate whose floor is at most
    `floor`, each with a key that orders it within the group (the group's joined list's order), and gives
    the new floor under those still not listed (above `floor`; None once all are)."""

    floor: float

    def listed(self, floor: float) -> tuple[Sequence[tuple[Any, float, Callable[[], R_co | None]]],
                                           float | None]:
        ...


def build_cheapest_grouped(groups: Sequence[Group[R]], keep: int, cost: Callable[[R], float]) -> list[R]:
    """build_cheapest over the groups' candidates joined in group order (each group's in its keys' order),
    each listed only once the build reaches its floor: a candidate whose floor is above the cutoff need not
    be listed. Builds the same candidates and returns the same list as build_cheapest: a candidate goes by
    (floor, group, key) as in the joined list, and a group is asked to list before any candidate at its
    floor goes."""
    cutoff = CostCutoff(keep)
    heap: list[tuple[float, int, int, Any]] = [(group.floor, 0, g, ()) for g, group in enumerate(groups)]
    heapq.heapify(heap)
    builds: dict[tuple[int, Any], Callable[[], R | None]] = {}
    built: dict[tuple[int, Any], R] = {}
    while heap:
        floor, is_candidate, g, key = heapq.heappop(heap)
        if floor > cutoff.usd_per_hour:
            break  # this and every candidate or group left cost more than `keep` built ones
        if not is_candidate:
            listed, rest = groups[g].listed(floor)
            for candidate_key, candidate_floor, build in listed:
                builds[g, candidate_key] = build
                heapq.heappush(heap, (candidate_floor, 1, g, candidate_key))
            if rest is not None:
                assert rest > floor, "a group's floor must rise as it lists"
                heapq.heappush(heap, (rest, 0, g, ()))
            continue
        result = builds[g, key]()
        if result is not None:
            built[g, key] = result
            cutoff.add(cost(result))
    return [built[k] for k in sorted(built)]
