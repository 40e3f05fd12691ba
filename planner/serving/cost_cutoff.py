"""The $/hour above which no fleet the sizing search finds later can be shown.

The search (planner.serving.sizing.search) returns its `max_options` cheapest rows: a family whose cost floor
is above the `max_options`-th cheapest $/hour found so far gives only rows that are never returned, so it is
skipped, and a family's goodput is searched only as far as that cutoff needs. A request with disaggregation
shows the `max_options` cheapest of both modes' options, with each mode's cheapest kept
(planner.serving.serving_modes._shown): an aggregated row dearer than the `max_options`-th cheapest
disaggregated option (`shown_below_usd`) ranks behind at least `max_options` options, so it is never shown
unless it is the cheapest aggregated row. The cutoff is therefore the lower of the `max_options`-th cheapest
row found and the larger of `shown_below_usd` and the cheapest row found (which stays an upper bound on the
cheapest aggregated row, so that row and its ties are always found). Rows at the cutoff itself still count:
every comparison against it is strict.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence


class CostCutoff:
    """The `keep` cheapest $/hour found so far, and the cutoff they and `shown_below_usd` give."""

    def __init__(self, keep: int, shown_below_usd: float = math.inf) -> None:
        self._keep = keep
        self._shown_below_usd = shown_below_usd
        self._dearest_kept: list[float] = []  # max-heap (negated) of the `keep` cheapest found so far
        self._cheapest_usd = math.inf

    def add(self, usd_per_hour: float) -> None:
        self._cheapest_usd = min(self._cheapest_usd, usd_per_hour)
        if len(self._dearest_kept) < self._keep:
            heapq.heappush(self._dearest_kept, -usd_per_hour)
        elif usd_per_hour < -self._dearest_kept[0]:
            heapq.heapreplace(self._dearest_kept, -usd_per_hour)

    @property
    def usd_per_hour(self) -> float:
        """No row dearer than this is returned (math.inf until one can be excluded)."""
        kth = -self._dearest_kept[0] if len(self._dearest_kept) == self._keep else math.inf
        return min(kth, max(self._shown_below_usd, self._cheapest_usd))


def shown_below_usd(options: Sequence[dict], max_options: int) -> float:
    """The `max_options`-th cheapest $/hour among another mode's `options` (math.inf if fewer): a row dearer
    than it is shown only as its mode's cheapest."""
    costs = sorted(o["usd_per_hour"] for o in options)
    return costs[max_options - 1] if len(costs) >= max_options else math.inf
