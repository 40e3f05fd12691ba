"""The disaggregated pairing builds only as far as its cutoff needs: pools whose pairings are listed as the
build's floor reaches them (cheapest_first.build_cheapest_grouped) build what the joined list builds, and a
decode pool's walk paused at a cost (decode_pool.DecodePoolWalk) names the workers of the whole walk's
cheapest that cost at most it, with their ranks, and resumed keeps what the whole walk keeps."""

from __future__ import annotations

import functools
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from planner.serving.cheapest_first import build_cheapest, build_cheapest_grouped
from planner.serving.disaggregated_workers import TrafficShape
from tests.decode_pool_candidates import llama70b_decode_candidates

SHAPE = TrafficShape(2000, 400, arrival_cv=2.0)


class _Listed:
    """A group that lists its candidates (floor, result) in steps of `step` above the floor reached."""

    def __init__(self, candidates: list[tuple[float, tuple[float, int] | None]], step: float) -> None:
        self.candidates, self.step = candidates, step
        self.done: set[int] = set()
        self.floor = min((f for f, _ in candidates), default=0.0)

    def listed(self, floor: float):
        reach = floor + self.step
        new = [j for j, (f, _) in enumerate(self.candidates) if j not in self.done and f <= reach]
        self.done.update(new)
        left = [f for j, (f, _) in enumerate(self.candidates) if j not in self.done]
        return ([(j, self.candidates[j][0], (lambda r=self.candidates[j][1]: r)) for j in new],
                min(left) if left else None)


floors_st = st.floats(0.0, 20.0, allow_nan=False).map(lambda x: round(x, 1))  # ties are common
group_st = st.lists(st.tuples(floors_st, st.one_of(st.none(), st.floats(0.0, 10.0))), max_size=12)


@given(st.lists(st.tuples(group_st, st.floats(0.05, 5.0)), max_size=6), st.integers(1, 10))
@settings(max_examples=300, deadline=None)
def test_grouped_build_builds_what_the_joined_list_builds(groups, keep):
    """Source: invariant: a group's floor bounds the floors of the candidates it has not listed yet and it
    lists every candidate up to the floor it is asked at, so the grouped build goes through the joined list
    in the same (floor, list order) and stops at the same candidate: the same results in the same order."""
    joined, grouped = [], []
    for g, (candidates, step) in enumerate(groups):
        # a candidate's cost is at least its floor (what a floor means); results name their place
        named = [(f, None if c is None else (f + c, g * 100 + j)) for j, (f, c) in enumerate(candidates)]
        joined.extend((f, (lambda r=r: r)) for f, r in named)
        grouped.append(_Listed(named, step))
    plain = build_cheapest(joined, keep, lambda r: r[0])
    assert build_cheapest_grouped(grouped, keep, lambda r: r[0]) == plain


@functools.lru_cache(maxsize=1)
def _decode_candidates():
    return sorted(llama70b_decode_candidates(("fp8", "int4", "bf16")), key=lambda x: x[0])


def _walk():
    from planner.serving.decode_pool import DecodePoolWalk

    return DecodePoolWalk(_decode_candidates(), 2400, SHAPE, 40.0, 99)


def _named(ranked):
    return [(rank, cost, dw.goodput_per_s, dw.deployment.gpu.name, dw.deployment.tp, gpu, price)
            for rank, (cost, dw, gpu, price) in ranked]


@functools.lru_cache(maxsize=1)
def _whole():
    from planner.serving.decode_pool import walk_decode_pool

    walk = _walk()
    walk.advance(math.inf)
    kept = walk_decode_pool(_decode_candidates(), 2400, SHAPE, 40.0, 99)
    return _named(walk.cheapest()), [(x[0], x[2], x[3]) for x in walk.kept()], [(x[0], x[2], x[3])
                                                                                  for x in kept]


@given(st.lists(st.floats(0.0, 0.8, allow_nan=False), min_size=1, max_size=4))  # the cheapest: 0.36-0.58
@settings(max_examples=15, deadline=None)
def test_a_paused_decode_walk_names_the_whole_walks_cheapest(reaches):
    """Source: invariant: every candidate costs at least its floor, so a walk paused where every candidate
    left has a floor above a cost has visited every worker that costs at most it; their ranks among the
    whole walk's KEEP_PER_POOL cheapest (cost, then the pool's order) are then known, and the walk resumed
    makes the whole walk's decisions (the same kept workers as walk_decode_pool's)."""
    cheapest, kept_whole, kept_plain = _whole()
    assert kept_whole == kept_plain and len(cheapest) == 8
    walk = _walk()
    for reach in sorted(reaches):
        walk.advance(reach)
        upto = walk.cheapest_upto(reach) if not walk.ended else walk.cheapest()
        assert upto is not None
        named = _named(upto)
        assert set(named) <= set(cheapest)
        if not walk.ended:
            assert {x for x in cheapest if x[1] <= reach} == set(named)
    walk.advance(math.inf)
    assert _named(walk.cheapest()) == cheapest
    assert [(x[0], x[2], x[3]) for x in walk.kept()] == kept_whole
