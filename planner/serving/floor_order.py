"""Candidates in the order of their exact cost floors, each exact floor computed only when the candidate's
cheap lower bound does not already place it after the candidate that goes next.

Sorting candidates by an exact floor (ties in list order) and walking them until a floor passes a threshold
needs the exact floor of every candidate only to order them. A lower bound orders as well wherever it
already puts a candidate behind the next one: `pop` gives the candidates in the sorted order, and
`floors_above` says whether every candidate left has a floor above a threshold, each computing the exact
floors of the candidates whose bounds leave the answer open and no others. The sizing search's families
(planner.serving.sizing) and the disaggregated prefill pool (planner.serving.disaggregation) walk theirs so.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")


class FloorOrder(Generic[T]):
    """`candidates`: (a lower bound on the floor, the exact floor on demand, the candidate), in list order."""

    def __init__(self, candidates: Sequence[tuple[float, Callable[[], float], T]]) -> None:
        self._candidates = candidates
        self._bounded = [(bound, i) for i, (bound, _, _) in enumerate(candidates)]  # exact floor not known
        heapq.heapify(self._bounded)
        self._exact: list[tuple[float, int]] = []
        self.left = len(candidates)

    def _settle_first_bounded(self) -> None:
        _, i = heapq.heappop(self._bounded)
        heapq.heappush(self._exact, (self._candidates[i][1](), i))

    def floors_above(self, threshold: float) -> bool:
        """Whether every candidate left has an exact floor above `threshold` (a bound above it says so; one
        exact floor at or below it says no)."""
        while not (self._exact and not self._exact[0][0] > threshold):
            if not (self._bounded and not self._bounded[0][0] > threshold):
                return True
            self._settle_first_bounded()
        return False

    def pop(self) -> tuple[float, T]:
        """The next candidate by (exact floor, list index) and its floor: a candidate whose bound sorts before
        the first exact floor may come first, so its floor is computed before the choice."""
        while self._bounded and (not self._exact or self._bounded[0] < self._exact[0]):
            self._settle_first_bounded()
        floor, i = heapq.heappop(self._exact)
        self.left -= 1
        return floor, self._candidates[i][2]
