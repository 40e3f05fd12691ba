"""Benchmarks of issue 22's sizing requests (targets measured by `make bench`, never asserted as timings):
each under 2 s of CPU in-process on the 2-core reference machine. The whole command, 2026-11-26: WHOLE_CATALOG
1.13-1.14 s, ISSUE9 1.48-1.55 s; 2026-11-27, on a slower host (AMD EPYC Zen 3 vCPU, 2.45 GHz), the same
outputs took 2.9-3.1 s and 3.5-4.7 s (benchmarks/test_bench_modes.py says why and what would close the gap).

- WHOLE_CATALOG: a dense model over the whole catalog, tp x pp x ep x both serving modes;
- ISSUE9: issue 9's 82,000-configuration MoE request (benchmarks/test_bench_modes.py REQUEST);
- REPEATED: 2,000 copies of one weight precision with disaggregation (21.7 s of CPU before the lists
  were de-duplicated; now the cost of one);
- ISSUE31: issue 31's buyer (Llama-3.1-70B fp8, 50 req/s, p90 TTFT <= 1 s and ITL <= 50 ms, H100 SXM, H200,
  B200, MI355X), every option judged with the slot wait and the simulated range.

Issue 31 (each family sized at its confirmed rate: planner.serving.confirmed_rate) measured 2026-11-27
16:33-16:35 UTC on the 2-core host at load average 5.8-9.6 (other developers' work), before (the branch point,
25b88a8) and after, interleaved. In-process CPU, best of four: WHOLE_CATALOG 1.31 s before, 1.39 s after;
ISSUE9 2.13 s before, 1.98 s after. The whole command `python -m planner size FILE`, user+system CPU, three
rounds: WHOLE_CATALOG 1.85-1.98 s before, 1.99-2.12 s after; ISSUE9 2.48-2.69 s before, 2.63-2.86 s after;
ISSUE31 0.51-0.55 s before, 0.50-0.55 s after (wall 1.1-10.5 s: the host was shared). Within this host's
noise (about 10%) the confirmation costs what the fast goodput search did; the 2 s target is not met for
ISSUE9 on this host before or after. Where the time goes: test_bench_modes.py.

Issue 31's speed work (what changed: test_bench_modes.py), 2026-11-27 19:13-19:15 UTC, the same host at load
average 1.5-2.0, main at f863e5a (before) and the branch (after) interleaved, every output byte-identical.
In-process CPU, best of three: WHOLE_CATALOG 2.14 s before, 1.99 s after; ISSUE9 3.68 s, 2.92 s; REPEATED
0.035 s, 0.026 s; ISSUE31 0.140 s, 0.132 s. The whole command, three rounds, wall (user+system CPU):
WHOLE_CATALOG 2.38-2.48 s (2.37-2.44 s) before, 2.17-2.25 s (2.17-2.25 s) after; ISSUE9 3.83-4.04 s
(3.83-4.03 s), 3.01-3.08 s (3.00-3.07 s); REPEATED 0.31-0.32 s, 0.30-0.31 s; ISSUE31 0.42-0.51 s, 0.41-0.48 s
(about 0.3 s of each is process start and imports). The 2 s target holds for REPEATED and ISSUE31;
WHOLE_CATALOG misses it by ~0.2 s and ISSUE9 by ~1 s on this host.

Issue 31, less work (what changed: test_bench_modes.py), 2026-11-27 19:39-19:41 UTC, load average 2.2-2.9,
main at 8b77b21 (before) and the branch (after) interleaved, shown options identical (`pruned` and `feasible`,
counts of work done, change). In-process CPU, best of three, two rounds: WHOLE_CATALOG 1.94-2.00 s before,
1.53-1.57 s after; ISSUE9 2.61-2.74 s, 2.25-2.26 s; ISSUE31 0.114-0.115 s, 0.113-0.114 s (size alone:
unchanged); REPEATED 0.010-0.011 s both. The whole command, three rounds, wall (user+system CPU):
WHOLE_CATALOG 2.23-2.31 s (2.22-2.30 s) before, 1.89-1.98 s (1.87-1.97 s) after; ISSUE9 3.03-3.12 s (3.01-3.11
s), 2.61-2.67 s (2.61-2.65 s); ISSUE31 0.43-0.47 s both; REPEATED 0.31-0.35 s both. On this host WHOLE_CATALOG
now meets the 2 s target (by 0.02-0.11 s) and ISSUE9 misses it by ~0.65 s.

Issue 31, tighter floors and less repeated work (what changed: test_bench_modes.py), 2026-11-27 21:07-21:09
UTC, load average 1.9-2.9 (other developers' work), main at 48833be (before) and the branch (after)
interleaved, outputs identical but for `pruned` and `feasible`. In-process CPU, best of three, two rounds:
WHOLE_CATALOG 1.62-1.70 s before, 1.56-1.57 s after; ISSUE9 2.32-2.39 s, 2.06-2.13 s (the branch's caches by
model object outlive a request, so its repeat requests gain a little more than a process's first: the whole
command is the fair figure). The whole command, four rounds, neither tree with cached bytecode, user+system
CPU (wall, inflated by the load): WHOLE_CATALOG 1.98-2.06 s (2.97-3.19 s) before, 1.87-2.01 s (2.63-3.10 s)
after; ISSUE9 2.72-2.83 s (3.62-4.29 s), 2.53-2.61 s (3.51-3.94 s); ISSUE31 0.40-0.41 s, 0.41-0.42 s (three
rounds, 21:02 UTC against 5e266e5, whose outputs and ISSUE31 figures main keeps). WHOLE_CATALOG is at 2 s of
CPU under this load; ISSUE9 misses it by ~0.55-0.6 s.

Issue 31, per-call costs (what changed: test_bench_modes.py), 2026-11-27 21:33-21:34 UTC, load average
0.95-0.98, main at 17bab82 (before) and the branch (after) interleaved, all four outputs byte-identical. The
whole command, three rounds, neither tree with cached bytecode, user+system CPU (wall): WHOLE_CATALOG
1.81-1.85 s (1.81-1.85 s) before, 1.75-1.76 s (1.75-1.77 s) after; ISSUE9 2.50-2.58 s (2.51-2.58 s),
2.33-2.37 s (2.33-2.38 s); ISSUE31 0.41-0.42 s both. In-process CPU, ISSUE9, the first request of a process:
2.12-2.21 s before, 2.02 s after (repeats 1.83-1.88 s, 1.76 s). WHOLE_CATALOG meets 2 s by ~0.25 s at this
load; ISSUE9 misses it by ~0.35 s.

Issue 31, "any legal request", 2026-11-27 23:16-23:19 UTC, load average 0.8-1.6, the stop's start (4cd958b,
before) and main (after) interleaved, both trees with bytecode written, the whole command, user+system CPU
(three rounds; ISSUE9 five): ISSUE9 2.32-2.81 s (median 2.41) before, 2.24-3.11 s (median 2.26) after;
WHOLE_CATALOG 1.83-3.09 s, 1.65-2.21 s; ISSUE31 0.40-0.55 s, 0.40-0.60 s; TIGHT 5.69-7.31 s, 2.33-2.38 s (its
trickle misses answered from the step table: goodput_search.trickle_miss); P99_BURSTY 4.41-4.65 s, 4.24-4.33
s; MANY_OPTIONS 4.21-4.28 s, 4.21-4.26 s; WIDEST 3.25-4.47 s, 3.15-3.20 s. After also plans fp8 on Ampere and
fp4 on Hopper weight-only (more families fit: ISSUE9 searches 124,321 configurations, 118,148 before). The
2 s target holds for ISSUE31 and about for WHOLE_CATALOG; ISSUE9 misses it by ~0.25 s, P99_BURSTY and
MANY_OPTIONS by ~2.2 s: their families are evaluated one by one (~1.5 ms each, 880-1,140 of them), because
their cost floors sit far under their fleets' cost (p99 with bursty arrivals: ~18x; the ITL band's ratio
load by load, tried on the aggregated floors, cut the families evaluated 4-16% and saved no CPU).

Issue 31, fewer numpy calls per family (arrivals, distributions, confirmed_rate, replica, slot_wait), decode
pools walked only as far as the pairing build needs (decode_pool.DecodePoolWalk), 2026-11-28 00:46-00:48 UTC,
load average 1.0-1.3, the stop's start (56ae56c, before) and main at 74cb606 (after) interleaved, every output
byte-identical (34 requests and these seven), the whole command, user+system CPU, three rounds: ISSUE9
2.21-2.36 s before, 2.08-2.17 s after; WHOLE_CATALOG 1.33-1.34 s, 1.15-1.22 s; ISSUE31 0.35-0.37 s, 0.34-0.36
s; TIGHT 2.37-2.53 s, 2.24-2.35 s; P99_BURSTY 4.31-4.49 s, 3.87-4.07 s; MANY_OPTIONS 4.16-4.35 s, 3.88-4.03
s; WIDEST 3.04-3.18 s, 2.99-3.04 s. In the app the search child now waits with its imports done
(ui/search_runner.py, standby), which takes ~0.2-0.3 s off each search: run_search's wall time, five rounds
against the one-shot child, 00:52-00:54 UTC at load 0.1-0.6: ISSUE9 2.09-2.30 s one-shot, 1.89-2.18 s standby;
P99_BURSTY 3.82-4.20 s, 3.58-3.92 s; ISSUE31 (three rounds) 0.35-0.38 s, 0.14-0.17 s. The 2 s target holds
for ISSUE31 and WHOLE_CATALOG, and for ISSUE9's search child in four of five rounds; as a browser shows it,
from the button to the drawn table, ISSUE9 took 2.19-2.69 s, and 1.52-1.73 s once the standby child prepares
the form's request while the user reads it (benchmarks/bench_app_sizing.py has every request's figures);
P99_BURSTY, MANY_OPTIONS and WIDEST still miss it by 1-2 s. What is left is per layout and per family:
preparing every layout (resolve,
memory, the decode-step table, the floors: ~0.3 ms each, 1.2 s for ISSUE9's 3,600 families, 1.7 s for
WIDEST's 5,400) and evaluating a family (~1.1 ms). Neither the floors nor a second process pays that back: a
cheaper floor cannot skip the layouts the disaggregated pools plan anyway, and moving prepared layouts between
processes costs 0.5 s to pickle and load ISSUE9's. Closing it needs the step tables and the serving model
computed for many layouts in one numpy pass.

Issue 31, cost floors under clumped arrivals and the TTFT tail (planner/serving/clumped_quiet_window.py,
wait_bound.py), 2026-11-28 02:42-02:44 UTC, load average 0.3-0.9, 41b6a6f (before) and main at 099d9b7 (after)
interleaved, the options identical on 41 requests (P99_BURSTY evaluates fewer families: `pruned` 2,025 ->
2,436, `feasible` 3,002 -> 1,769, with the first clumped limit), the whole command, user+system CPU, three
rounds: P99_BURSTY 3.68-3.84 s before, 3.26-3.42 s after; ISSUE31 0.41-0.42 s, 0.36 s; WHOLE_CATALOG 1.21-1.28
s, 1.15-1.20 s; ISSUE9 2.06-2.10 s, 2.03-2.14 s; TIGHT 2.27-2.33 s, 2.22-2.24 s; WIDEST 2.88-2.98 s, 2.92-2.96
s; MANY_OPTIONS 3.81-3.90 s, 3.75-3.89 s. P99_BURSTY's floors were ~9x under its families' cheapest fleets at
the median and were ~3x with the first clumped limit. A review then found that limit's proof unsound where the
token step outlasts the iteration; the corrected limit (a3ed075) is looser (floors ~4x under, median):
P99_BURSTY `pruned` 2,212, `feasible` 2,441, and at 03:34 UTC (load 0.5-0.8, both trees slower than at 02:42)
3.95-4.11 s before, 3.70-3.76 s after. The largest legal requests are far from 2 s: issue 9's model over the
whole catalog with tp [1, 2, 4, 8], pp [1, 2, 4], ep [1, 2, 4, 8, 16] (9,000 families), p99 under CV 2 and
1,000 options, took 8.95 s of CPU (8.96 s wall, 205 MB) on this host at 02:30 UTC.
"""

from __future__ import annotations

from benchmarks.test_bench_modes import REQUEST as ISSUE9
from planner.serving.serving_modes import size_with_modes
from planner.serving.sizing import size

WHOLE_CATALOG = {
    "model": "llama-3.1-70b", "traffic": {"requests_per_s": 10.0, "prompt_len": 2000, "output_len": 400},
    "slo": {"ttft_ms": 2000.0, "itl_ms": 50.0}, "tp": [1, 2, 4, 8], "pp": [1, 2, 4], "ep": [1],
    "weights": ["bf16", "fp8", "int4"], "kv_cache": ["bf16", "fp8"], "disaggregation": True,
}
ISSUE31 = {
    "model": "llama-3.1-70b", "traffic": {"requests_per_s": 50.0, "prompt_len": 2000, "output_len": 400},
    "slo": {"ttft_ms": 1000.0, "itl_ms": 50.0}, "gpus": ["h100-sxm", "h200", "b200", "mi355x"],
    "weights": ["fp8"],
}
# issue 31, "any legal request under 2 s": issue 9's request made harder in the ways a buyer may ask
TIGHT = {**ISSUE9, "slo": {"ttft_ms": 300.0, "itl_ms": 15.0}}  # most families miss ITL at any rate
P99_BURSTY = {**ISSUE9, "slo": {"ttft_ms": 2000.0, "itl_ms": 60.0, "percentile": 99},
              "traffic": {**ISSUE9["traffic"], "arrival_cv": 2.0}}  # looser floors: more families evaluated
MANY_OPTIONS = {**ISSUE9, "max_options": 1000}
WIDEST = {**ISSUE9, "pp": [1, 2, 4]}  # 16,200 family plans of the 20,000 allowed
REPEATED = {
    "model": "llama-3.1-8b", "traffic": {"requests_per_s": 5.0, "prompt_len": 1000, "output_len": 200},
    "slo": {"ttft_ms": 2000.0, "itl_ms": 50.0}, "gpus": ["h100-sxm"], "tp": [1], "weights": ["fp8"] * 2000,
    "disaggregation": True,
}


def test_bench_whole_catalog_tp_pp_ep_modes(benchmark):
    result = benchmark.pedantic(size_with_modes, (WHOLE_CATALOG,), rounds=1, iterations=1)
    assert result["options"]


def test_bench_issue9_request(benchmark):
    result = benchmark.pedantic(size_with_modes, (ISSUE9,), rounds=1, iterations=1)
    assert result["searched"] >= 5000


def test_bench_repeated_candidates(benchmark):
    result = benchmark(size_with_modes, REPEATED)
    assert result["options"]


def test_bench_issue31_request(benchmark):
    result = benchmark.pedantic(size, (ISSUE31,), rounds=1, iterations=1)
    assert all(o["ttft_ms_simulated_high"] <= 1000.0 * (1 + 1e-4) for o in result["options"])


def test_bench_issue9_tight_objective(benchmark):
    result = benchmark.pedantic(size_with_modes, (TIGHT,), rounds=1, iterations=1)
    assert any("fastest decode step" in i["reason"] for i in result["infeasible"])


def test_bench_issue9_p99_bursty(benchmark):
    result = benchmark.pedantic(size_with_modes, (P99_BURSTY,), rounds=1, iterations=1)
    assert result["options"]


def test_bench_issue9_many_options(benchmark):
    result = benchmark.pedantic(size_with_modes, (MANY_OPTIONS,), rounds=1, iterations=1)
    assert len(result["options"]) > 200


def test_bench_issue9_widest_legal(benchmark):
    result = benchmark.pedantic(size_with_modes, (WIDEST,), rounds=1, iterations=1)
    assert result["searched"] > 118_148  # issue 9's configurations, and the pp 4 ones
