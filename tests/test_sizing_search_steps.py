"""The sizing search's shortcuts give the figures of the long way: the goodput searched one step at a time
ends on goodput_per_ms's answer and never leaves its bracket, deferred families give the same returned
options, and the disaggregated pools' floors stay under what they bound."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.core.errors import ScenarioError
from planner.physics.memory import plan_memory
from planner.scenario.scenario import Scenario, resolve
from planner.serving.disaggregation import TrafficShape, _prefill_cost_floor, prefill_worker
from planner.serving.goodput_search import GoodputSearch
from planner.serving.layout_memo import LayoutMemo, layout_key
from planner.serving.serving import goodput_per_ms, replica_model
from planner.serving.sizing import _finish, parse_sizing, search
from planner.serving.workload import workload_for
from tests.decode_pool_candidates import llama70b_decode_candidates

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

SCENARIOS = [
    {"model": "llama-3.1-70b", "gpu": "h100-sxm", "tp": 4, "weights": "fp8", "kv_cache": "fp8"},
    {"model": "llama-3.1-8b", "gpu": "l40s", "tp": 1, "weights": "bf16", "kv_cache": "bf16",
     "load": {"arrival_cv": 2.0, "prompt_len_cv": 0.5}},
    {"model": "qwen3-235b-a22b", "gpu": "h200", "tp": 8, "ep": 8, "weights": "fp8", "kv_cache": "fp8"},
]
OBJECTIVES = [(2000.0, 50.0), (500.0, 30.0), (None, 40.0), (3000.0, None)]


def _model(fields):
    s = Scenario.model_validate({"prompt_len": 2000, "output_len": 400, **fields})
    d = resolve(s)
    return d, replica_model(d, workload_for(s, d, 256), max_population=256)


@pytest.mark.parametrize("fields", SCENARIOS)
def test_goodput_searched_step_by_step_is_goodput_per_ms(fields):
    """Source: invariant: GoodputSearch takes goodput_per_ms's own steps, so its answer is the same number
    and every bracket on the way holds it, whether each step is judged alone or several steps' midpoints in
    one vectorized call (finish(), and a step looking ahead)."""
    _, m = _model(fields)
    for percentile in (50, 90, 99):
        for ttft_ms, itl_ms in OBJECTIVES:
            exact = goodput_per_ms(m, percentile, ttft_ms, itl_ms)
            for depth in (1, 2, 3):
                search_ = GoodputSearch(m, percentile, ttft_ms, itl_ms)
                while not search_.exact:
                    assert search_.lo <= exact <= search_.hi
                    search_.step(depth)
                assert search_.lo == search_.hi == exact
            assert GoodputSearch(m, percentile, ttft_ms, itl_ms).finish() == exact


def _top(rows, n):
    rows.sort(key=lambda r: (r["usd_per_hour"], r["itl_ms"]))
    for r in rows[:n]:
        _finish(r)
    return [{k: v for k, v in r.items() if k != "_finish"} for r in rows[:n]]


@pytest.mark.parametrize("max_options", [5, 40])
def test_deferred_families_return_the_same_options(max_options):
    """Source: invariant: a deferred family ranks past every returned option, so the returned options, their
    order and the counts equal those of the search that finishes every family."""
    req = parse_sizing({"model": "llama-3.1-70b", "traffic": {"requests_per_s": 30.0, "prompt_len": 2000,
                        "output_len": 400}, "slo": {"ttft_ms": 2000.0, "itl_ms": 50.0}, "tp": [2, 4, 8],
                        "max_options": max_options})
    rows, infeasible, searched, pruned = search(req, lazy=True, prune=True, defer=True)
    full, infeasible_full, searched_full, pruned_full = search(req, lazy=True, prune=True)
    assert (len(rows), infeasible, searched) == (len(full), infeasible_full, searched_full)
    assert pruned == pruned_full
    assert any(r["itl_ms"] == float("inf") for r in rows)  # some family was left unfinished
    assert _top(rows, max_options) == _top(full, max_options)


@pytest.mark.parametrize("fields", SCENARIOS)
def test_prefill_cost_floor_is_below_the_prefill_workers_cost(fields):
    """Source: invariant: the floor (the mean prompt's prefill work per slot, 1 % off) is at most a prefill
    worker's $/hour per prompt/s, so the workers the pool never builds cost more than those it keeps."""
    d, _ = _model(fields)
    load = fields.get("load", {})
    shape = TrafficShape(2000, 400, load.get("arrival_cv", 1.0), load.get("prompt_len_cv", 0.0), 0.0, 0.0)
    w = prefill_worker(d, shape)
    key = layout_key(fields["gpu"], d.tp, d.pp, d.ep, d.weights, d.kv_cache)
    work_ms = LayoutMemo().prefill_work_ms(key, d, 2000, 0)
    assert 0 < _prefill_cost_floor(d, shape, 2.0, work_ms) <= 2.0 * w.gpus / w.prompts_per_s


def test_decode_pool_keeps_what_building_every_worker_keeps():
    """Source: invariant: the decode pool searches goodputs only as far as its ranking needs, so the
    KEEP_PER_POOL cheapest decode workers (cost, GPU, goodput, ITL) are those of the plain loop that builds
    each worker it reaches in floor order."""
    from planner.serving.decode_pool import KEEP_PER_POOL, walk_decode_pool
    from planner.serving.disaggregation import decode_worker

    shape = TrafficShape(2000, 400)
    candidates = llama70b_decode_candidates(("fp8", "int4"))
    plain = []
    for floor, c, d, price, _, _ in sorted(candidates, key=lambda x: x[0]):
        if len(plain) >= KEEP_PER_POOL and floor > sorted(k[0] for k in plain)[KEEP_PER_POOL - 1]:
            break
        dw = decode_worker(d, 2400, shape, 40.0)
        if dw is not None:
            plain.append((price * dw.gpus / dw.goodput_per_s, dw, c.gpu_key, price))

    def top(kept):
        return [(cost, dw.goodput_per_s, dw.itl_ms, gpu, price)
                for cost, dw, gpu, price in sorted(kept, key=lambda x: x[0])[:KEEP_PER_POOL]]

    assert len(plain) > KEEP_PER_POOL
    assert top(walk_decode_pool(candidates, 2400, shape, 40.0, 90)) == top(plain)


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trt-llm", "graph"])
@pytest.mark.parametrize("memory", [{}, {"reserve_gb": 3.0}])
def test_a_shorter_context_never_holds_fewer_sequences(engine, memory):
    """Source: invariant: LayoutMemo.fits answers for a prompt from a plan at a longer context that fits (or
    from any plan whose weights leave no KV budget), which holds because every engine's KV budget is the
    same at any context and a sequence's blocks (or tokens) only grow with its length: the max batch never
    rises with the context."""
    contexts = [1, 17, 1000, 2001, 2400, 8192, 32_768, 131_072, 1_000_000]
    for fields in SCENARIOS + [{"model": "llama-3.1-70b", "gpu": "a100-sxm-80gb", "tp": 2, "weights": "bf16",
                                "kv_cache": "bf16"},
                               {"model": "llama-3.1-70b", "gpu": "l40s", "tp": 1, "weights": "bf16",
                                "kv_cache": "bf16"}]:  # the weights alone overflow it
        for max_model_len in (None, 4096):
            extra = {} if max_model_len is None else {"max_model_len": max_model_len}
            d = resolve(Scenario.model_validate({"prompt_len": 1, "output_len": 1, "context_len": 2, **fields,
                                                 "engine": engine, "memory": memory, **extra}))
            plans = [plan_memory(d, context) for context in contexts]
            batches = [plan.max_batch for plan in plans]
            assert batches == sorted(batches, reverse=True)
            assert len({(plan.weights_fit, plan.kv_budget_gb_per_gpu) for plan in plans}) == 1
            memo, key = LayoutMemo(), layout_key(fields["gpu"], d.tp, d.pp, d.ep, d.weights, d.kv_cache)
            for context in reversed(contexts):  # the memo then answers the shorter ones from the longer
                assert memo.fits(key, d, context) == plan_memory(d, context).fits


def test_floor_order_walks_the_sorted_order():
    """Source: invariant: FloorOrder gives candidates in the order of sorting by exact floor (ties in list
    order) and says whether every candidate left is above a threshold as the sorted walk would, computing
    exact floors only where a bound leaves it open."""
    import random

    from planner.serving.floor_order import FloorOrder

    def exact(floors: list[float], computed: list[int], i: int):
        def floor() -> float:
            computed.append(i)
            return floors[i]
        return floor

    rng = random.Random(7)
    for _ in range(200):
        floors = [rng.choice([0.0, 1.0, 2.0, 2.5, 3.0, 10.0, rng.uniform(0, 20)])
                  for _ in range(rng.randint(1, 30))]
        bounds = [f * rng.choice([1.0, 0.999, 0.5, 0.0, rng.random()]) for f in floors]
        computed: list[int] = []
        order = FloorOrder([(b, exact(floors, computed, i), i) for i, b in enumerate(bounds)])
        expected = sorted(range(len(floors)), key=lambda i: floors[i])
        for position, i in enumerate(expected):
            threshold = rng.uniform(0, 20)
            assert order.floors_above(threshold) == all(floors[j] > threshold for j in expected[position:])
            assert order.pop() == (floors[i], i)
        assert order.left == 0 and len(computed) == len(set(computed))


@pytest.mark.parametrize("fields", SCENARIOS)
def test_prefill_bound_is_below_the_prefill(fields):
    """Source: invariant: the bound on a prompt's prefill (its joins' compute inputs, the step's other terms)
    and the work bound the search orders families by stay under the figures they bound, so a family the
    bound places behind another is behind it."""
    from planner.physics.latency import prefill, prefill_floor_ms

    for engine in ("vllm", "sglang"):
        for efficiency in ("default", "ideal"):
            s = Scenario.model_validate({"prompt_len": 2000, "output_len": 400, **fields, "engine": engine,
                                         "efficiency": efficiency})
            d = resolve(s)
            key = layout_key(fields["gpu"], d.tp, d.pp, d.ep, d.weights, d.kv_cache)
            for prompt in (1, 37, 2000, 50_000):
                for alltoall in (False, True):
                    floor = prefill_floor_ms(d, prompt, alltoall)
                    assert floor <= float(prefill(d, [float(prompt)]).total_ms[0])
                    bound = LayoutMemo().prefill_work_floor_ms(key, d, prompt, 0, alltoall)
                    assert 0.0 <= bound <= LayoutMemo().prefill_work_ms(key, d, prompt, 0)


@given(gpu=st.sampled_from(["mi350x", "mi300x", "gaudi3", "l40s", "h100-sxm"]), tp=st.sampled_from([1, 2, 4]),
       ep=st.sampled_from([8, 16]), weights=st.sampled_from(["fp8", "bf16"]), prompt=st.integers(1, 20_000),
       overlap=st.sampled_from([None, 0.0, 0.4, 1.0]))
@settings(max_examples=60, deadline=None)
def test_prefill_bound_with_expert_alltoalls_is_below_the_prefill(gpu, tp, ep, weights, prompt, overlap):
    """Source: invariant: the prefill bound with an EP layout's expert all-to-alls (what they add to the
    joins, at least: latency.prefill_floors_ms) stays under the prefill, for any overlap of them with the
    compute, and at or above the bound without them."""
    from planner.physics.latency import prefill, prefill_floors_ms

    fields = {"model": "qwen3-235b-a22b", "gpu": gpu, "tp": tp, "ep": ep, "weights": weights,
              "kv_cache": "fp8", "prompt_len": 2000, "output_len": 400}
    if overlap is not None:
        fields["efficiency"] = {"ep_overlap": overlap}
    try:
        d = resolve(Scenario.model_validate(fields))
    except ScenarioError:
        return  # a layout the GPU cannot run (its peak, its memory): no case
    plain, alltoalls = prefill_floors_ms(d, prompt)
    assert plain <= alltoalls <= float(prefill(d, [float(prompt)]).total_ms[0])


def test_cost_cutoff_never_drops_a_shown_row():
    """Source: invariant: at every point of the search, no aggregated row that the modes' merge shows (the
    max_options cheapest of both modes, each mode's cheapest kept) costs more than CostCutoff's cutoff, so
    skipping or leaving unfinished every row above it changes no shown option."""
    import math
    import random

    from planner.serving.cost_cutoff import CostCutoff, shown_below_usd

    rng = random.Random(31)
    for _ in range(300):
        keep = rng.randint(1, 8)
        prices = [1.0, 2.0, 2.5, 4.0]
        aggregated = [rng.choice(prices) * rng.randint(1, 6) for _ in range(rng.randint(1, 25))]
        disagg = [{"usd_per_hour": rng.choice(prices) * rng.randint(1, 6)} for _ in range(rng.randint(0, 25))]
        merged = sorted([(usd, "aggregated") for usd in aggregated]
                        + [(o["usd_per_hour"], "disaggregated") for o in disagg])
        shown = [usd for usd, mode in merged[:keep] if mode == "aggregated"] + [min(aggregated)]
        cutoff, plain = CostCutoff(keep, shown_below_usd(disagg, keep)), CostCutoff(keep)
        for usd in rng.sample(aggregated, len(aggregated)):
            cutoff.add(usd)
            plain.add(usd)
            assert max(shown) <= cutoff.usd_per_hour  # every aggregated row the merge shows is kept
            assert sorted(aggregated)[:keep][-1] <= plain.usd_per_hour  # alone: its own keep cheapest
        assert plain.usd_per_hour < math.inf or len(aggregated) < keep


def test_modes_cutoff_shows_the_same_options(monkeypatch):
    """Source: invariant: the aggregated search cut at the max_options-th cheapest disaggregated option
    (planner.serving.cost_cutoff) shows the options, figures, order, verdict and infeasible families of the
    search without that cut; only the work counts `pruned` and `feasible` (options of evaluated families) may
    fall."""
    import json
    import math

    from planner.serving import serving_modes

    request = {"model": "llama-3.1-70b", "traffic": {"requests_per_s": 10.0, "prompt_len": 2000,
               "output_len": 400}, "slo": {"ttft_ms": 2000.0, "itl_ms": 50.0}, "tp": [1, 2, 4, 8],
               "gpus": ["h100-sxm", "h200", "b200", "mi300x", "l40s"], "weights": ["fp8", "bf16"],
               "disaggregation": True, "max_options": 12}
    cut = serving_modes.size_with_modes(request)
    monkeypatch.setattr(serving_modes, "shown_below_usd", lambda options, max_options: math.inf)
    full = serving_modes.size_with_modes(request)
    assert json.dumps(cut["options"]) == json.dumps(full["options"])
    for key in ("assumptions", "infeasible", "fit_hints", "searched"):
        assert cut[key] == full[key], key
    assert cut["pruned"] > full["pruned"] and cut["feasible"] < full["feasible"]  # the cut did prune
    assert {o["mode"] for o in cut["options"]} == {"aggregated", "disaggregated"}


def test_build_cheapest_keeps_what_building_every_candidate_keeps():
    """Source: invariant: build_cheapest builds in floor order and stops once the keep-th cheapest built is
    below the next floor, so its keep cheapest (by cost, then list order) are those of building everything,
    and it returns what it built in list order."""
    import random

    from planner.serving.cheapest_first import build_cheapest

    rng = random.Random(12)
    for _ in range(300):
        costs = [rng.choice([None, 1.0, 2.0, 3.0, rng.uniform(0, 10)]) for _ in range(rng.randint(0, 30))]
        floors = [0.0 if c is None else c * rng.choice([1.0, 0.5, 0.0, rng.random()]) for c in costs]
        keep = rng.randint(1, 6)
        results = [None if c is None else (c, i) for i, c in enumerate(costs)]
        built = build_cheapest([(f, (lambda r=r: r)) for f, r in zip(floors, results, strict=True)], keep,
                               lambda r: r[0])
        everything = [(c, i) for i, c in enumerate(costs) if c is not None]
        assert sorted(built)[:keep] == sorted(everything)[:keep]
        assert built == sorted(built, key=lambda r: r[1]) and set(built) <= set(everything)


def test_pairing_floors_are_below_their_fleets(monkeypatch):
    """Source: invariant: a disaggregated pairing's floor (its decode workers, and the fewest prefill workers
    their capacity allows) is at most its fleet's $/hour, so pairing the pools cheapest floor first shows
    the options of pairing them all; only `feasible` (options of evaluated pairings) falls."""
    import json

    from planner.serving import disaggregation, serving_modes

    request = {"model": "llama-3.1-70b", "traffic": {"requests_per_s": 10.0, "prompt_len": 2000,
               "output_len": 400}, "slo": {"ttft_ms": 2000.0, "itl_ms": 50.0}, "tp": [1, 2, 4, 8],
               "gpus": ["h100-sxm", "h200", "b200", "mi300x"], "weights": ["fp8", "bf16"],
               "disaggregation": True, "max_options": 10}
    cut = serving_modes.size_with_modes(request)
    seen: list[tuple[float, float]] = []

    def build_every(groups, keep, cost):
        built = []
        for group in groups:  # each pool's pairings, all listed at once (a group's floor is below them all)
            group_floor = group.floor
            listed, rest = group.listed(math.inf)
            assert rest is None and all(group_floor <= floor for _, floor, _ in listed)
            built.extend((floor, build()) for _, floor, build in listed)
        seen.extend((floor, cost(option)) for floor, option in built if option is not None)
        return [option for _, option in built if option is not None]
    monkeypatch.setattr(disaggregation, "build_cheapest_grouped", build_every)
    full = serving_modes.size_with_modes(request)
    assert len(seen) > 10 and all(floor <= usd * (1 + 1e-12) for floor, usd in seen)
    assert json.dumps(cut["options"]) == json.dumps(full["options"])
    assert cut["feasible"] < full["feasible"] and cut["searched"] == full["searched"]


@pytest.mark.parametrize("itl_ms", [20.0, 50.0])
def test_a_decode_worker_without_a_goodput_bound_has_no_goodput(itl_ms):
    """Source: invariant: where even one sequence's decode step misses the ITL objective (the goodput bound is
    None), the decode pool skips the candidate: a token's mean ITL is the step at N + 1 >= 1 sequences (the
    serving model's load point), so its confirmed rate is 0 and it would give no worker."""
    from gpu_catalog import load_catalog
    from planner.serving.confirmed_rate import SizingObjective
    from planner.serving.disaggregated_workers import ConfirmedDecodeRate, _decode_model
    from planner.serving.goodput_search import confirmed_bound_per_s
    from planner.serving.layout_memo import bound_steps

    shape = TrafficShape(2000, 400)
    context_len, context = 2400, 2000 + 400 / 2
    none = 0
    for gpu in load_catalog():
        for tp, weights in ((1, "bf16"), (2, "fp8"), (4, "bf16")):
            try:
                d = resolve(Scenario.model_validate({"model": "llama-3.1-70b", "gpu": gpu, "tp": tp,
                                                     "weights": weights, "kv_cache": "fp8",
                                                     "context_len": context_len, "prompt_len": 2000,
                                                     "output_len": 400}))
            except Exception:  # a layout the catalog's GPU cannot run is no candidate
                continue
            mem = plan_memory(d, context_len)
            if not mem.fits:
                continue
            bound = confirmed_bound_per_s(d, context, mem.max_batch, 400, 0.0,
                                          bound_steps(d, mem.max_batch, context),
                                          SizingObjective(90, None, itl_ms), (1.0, False, "fits"), None)
            if bound is None:
                none += 1
                max_batch, m = _decode_model(d, context_len, shape, mem)
                assert ConfirmedDecodeRate(m, max_batch, 90, itl_ms, None).hi == 0.0, (gpu, tp, weights)
    assert none > 0


@given(gpu=st.sampled_from(["h100-sxm", "h200", "b200", "mi300x", "l40s"]), tp=st.sampled_from([1, 2, 8]),
       ep=st.sampled_from([1, 8]), weights=st.sampled_from(["fp8", "bf16", "int4"]),
       lengths=st.lists(st.integers(1, 40_000), min_size=2, max_size=3))
@settings(max_examples=60, deadline=None)
def test_prefill_is_elementwise_in_the_prompt_length(gpu, tp, ep, weights, lengths):
    """Source: invariant: a prefill over several prompt lengths gives each length the figure it gets alone,
    to the bit, on the physics and the kernel-table paths (LayoutMemo computes a prompt's and its cached
    prefix's lone prefills in one call)."""
    from planner.physics.latency import prefill

    fields = {"model": "qwen3-235b-a22b", "gpu": gpu, "tp": tp, "ep": ep, "weights": weights,
              "kv_cache": "fp8", "prompt_len": 2000, "output_len": 400}
    try:
        d = resolve(Scenario.model_validate(fields))
    except ScenarioError:
        return  # a layout the GPU cannot run: no case
    together = prefill(d, [float(n) for n in lengths]).total_ms
    for i, n in enumerate(lengths):
        assert together[i] == prefill(d, [float(n)]).total_ms[0]


PREPARED = [
    {"model": "llama-3.1-70b", "traffic": {"requests_per_s": 20.0, "prompt_len": 2000, "output_len": 400},
     "slo": {"ttft_ms": 1000.0, "itl_ms": 50.0}, "gpus": ["h100-sxm", "h200", "mi300x"], "tp": [1, 2, 4, 8],
     "weights": ["fp8", "bf16"], "kv_cache": ["fp8"], "disaggregation": True},
    {"model": "qwen3-235b-a22b", "traffic": {"requests_per_s": 5.0, "prompt_len": 4000, "output_len": 200,
                                             "arrival_cv": 2.0},
     "slo": {"ttft_ms": 3000.0, "itl_ms": 60.0, "percentile": 99}, "gpus": ["h200", "b200"], "tp": [4, 8],
     "ep": [1, 8], "weights": ["fp8"], "kv_cache": ["bf16", "fp8"], "max_options": 30},
]


@pytest.mark.parametrize("request_", PREPARED)
def test_layouts_prepared_ahead_give_the_same_answer(request_):
    """The app's search child prepares a request's layouts while the user reads the form (issue 31,
    ui/search_runner.py): the search given them answers byte for byte as the search alone (each memo figure is
    the one the plain call gives), and a request past the bound is not prepared at all.
    Source: invariant: planner.serving.layout_memo's contract (one figure per layout, by the same call)."""
    import json

    from planner.serving.serving_modes import prepared_layouts, size_with_modes

    alone = json.dumps(size_with_modes(request_), sort_keys=True)
    memo = prepared_layouts(request_)
    assert memo is not None and json.dumps(size_with_modes(request_, memo), sort_keys=True) == alone
    assert prepared_layouts(request_, max_families=1) is None


@pytest.mark.parametrize("request_", PREPARED)
def test_prepared_families_are_taken_once(request_, monkeypatch):
    """The families prepared ahead are taken by the one search that follows (it prepares none again), and
    only under the fit hints they were prepared with; the memo's layouts still serve a second search, which
    prepares its families itself: both answer as the search alone.
    Source: invariant: planner.serving.layout_memo.keep_families's contract."""
    import json

    from planner.serving import sizing
    from planner.serving.serving_modes import prepared_layouts, size_with_modes

    alone = json.dumps(size_with_modes(request_), sort_keys=True)
    memo = prepared_layouts(request_)
    assert memo is not None
    calls = []
    real = sizing.prepared_families
    monkeypatch.setattr(sizing, "prepared_families", lambda *a: calls.append(1) or real(*a))
    assert json.dumps(size_with_modes(request_, memo), sort_keys=True) == alone
    assert calls == []  # taken as kept
    assert json.dumps(size_with_modes(request_, memo), sort_keys=True) == alone
    assert calls == [1]  # kept for one search only
    memo.keep_families([{"other": "hints"}], ([], [], 0))
    assert memo.take_families(None) is None and memo.take_families([{"other": "hints"}]) is None
