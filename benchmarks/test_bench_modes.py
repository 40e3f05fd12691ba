"""Benchmark: the sizing search over tp x pp x ep x precision x GPU x mode (aggregated and disaggregated).
Target (issue 12): at least 5,000 configurations in under 2 s for the whole command, process start and
imports included; issue 22 asks the same of this 82,326-configuration request. Wall time varies with the load
of the shared 2-core dev machine: CPU time is the fair figure. The request took about 9-10 s CPU with the
25-GPU catalog before the per-request layout memo, the stepwise goodput search and the cost floors (issue
22). Measured 2026-11-26 on the idle 2-core machine (load under 0.5): 1.37-1.45 s CPU in-process (warm),
1.46-1.56 s for the first request of a process; the whole command `python -m planner size` 1.48-1.55 s wall
(1.57-1.64 s CPU), of which about 0.25 s is process start and imports. On 2026-11-27 the development
host was an AMD EPYC Zen 3 vCPU at 2.45 GHz, where the same command, output byte-identical, took 3.5-4.7 s
wall (load under 1; a small numpy operation costs ~0.75 us there, and imports 0.45 s): the 2 s target is not
met on that host. In-process there (~2.9 s): preparing the 3,600 layouts ~1.1 s (a decode-step table ~100
us, a memory plan ~55 us, a resolve ~18 us each: per-call costs of small numpy operations, not of points),
searching the 581 unpruned families ~0.9 s, the disaggregated pools ~0.6 s. Closing it there needs the
physics evaluated over many layouts per call (arrays of layouts, not one Deployment at a time).

Issue 31 (any legal sizing request under 2 s), measured 2026-11-27 19:13-19:15 UTC on that host at load
average 1.5-2.0, main at f863e5a (before) against the issue-31 branch (after), interleaved, outputs
byte-identical: in-process CPU, best of three, 3.68 s before, 2.92 s after (-21 %); the whole command, three
rounds, 3.83-4.04 s wall (3.83-4.03 s user+system) before, 3.01-3.08 s (3.00-3.07 s) after. What went:
kernel-table steps no longer sort the whole table for its precisions (np.unique per step) or scan its MoE
shapes per step, and take one log of the tokens for all of a layer's GEMMs; a layout's lone-prompt prefill
is computed once per request (it was computed up to three times); the decode pool finishes only the
goodputs that may cost under a candidate's floor (goodput steps 3,090 -> 1,670 before the decode pool was
confirmed); only the aggregated options shown are finished (35 of 200 here). Still ~1 s over 2 s on this
host: the time is spread over ~3,600 layouts x a dozen numpy calls each (preparing them ~1.1 s) and the
per-family searches (~1.6 s); closing it needs the physics over arrays of layouts, as above.

Issue 31, less work (2026-11-27 19:39-19:41 UTC, the same host at load average 2.2-2.9, main at 8b77b21
(before) against the branch (after), interleaved; shown options, order, figures, pareto flags, verdict,
infeasible and searched identical; `pruned` and `feasible`, counts of the work done, change): the aggregated
families are searched after the disaggregated pools and cut at the max_options-th cheapest disaggregated
option (planner.serving.cost_cutoff: families searched 548 -> 294, pruned 2,230 -> 2,484); the pools' pairings
are built cheapest floor first until the max_options-th cheapest fleet is below every floor left
(planner.serving.cheapest_first: pairings sized 1,152 -> 204; feasible 2,626 -> 992); and the decode pool
skips a layout whose one-sequence decode step already misses ITL (none here; 182 decode models in
WHOLE_CATALOG). In-process CPU, best of three, two rounds: 2.61-2.74 s before, 2.25-2.26 s after; the whole
command, three rounds, wall 3.03-3.12 s (CPU 3.01-3.11 s) before, 2.61-2.67 s (2.61-2.65 s) after. Still ~0.65
s over 2 s: what is left is work every shown option needs with the floors as they are: the 2,778 layouts'
decode-step tables (~0.3 s; the decode pool sorts every layout by its bound), memory plans and resolves (~0.4
s), the decode pool (~0.5 s, 495 workers built for 144 kept) and the 294 families (~0.35 s). The families'
cheapest fleets cost 2.0-3.0x their floors (quartiles, measured at 832291c): their confirmed rate stops at the
ITL band (539 of 552 searched), while the goodput bound caps the population by the decode step alone, leaving
out the iterations that carry prompt chunks; a floor with them in would skip most of the families searched
that show nothing.

Issue 31, tighter floors and less repeated work (2026-11-27 21:07-21:09 UTC, the same host at load average
1.9-2.9 from other developers' work, main at 48833be (before) against the branch (after), interleaved; shown
options, order, figures, pareto flags, verdict, infeasible and searched identical for ISSUE9, WHOLE_CATALOG,
ISSUE31, REPEATED and 40 drawn requests; of 12 drawn catalog-wide ones, one lists 3 fewer infeasible families,
skipped now: docs/CONTRACT_EXTENSIONS.md): the aggregated cost floor counts the prompt chunks riding the
iterations on ITL (planner.serving.interference_bound: a p90 token must see an iteration without prompts where
a prompt's first chunk cannot ride within ITL, which caps the arrivals per iteration at 0.22; families
searched 294 -> 201, their cheapest fleets still 1.8-2.3x the floor, quartiles, as the ITL distribution's
spread and the band's ratio above 1.15 at higher loads are left out); the prefill pool's bound counts what an
EP layout's expert all-to-alls add (exact prefill floors settled 1,442 -> 948); a deployment's parameter
counts are kept per model object and vLLM's KV-free start-up terms per layout (both KV precisions share them);
a pairing's floor needs its decode workers' count alone (decode sides worked out 144 -> 54). In-process CPU,
best of three, two rounds: 2.32-2.39 s before, 2.06-2.13 s after (the first request of a process, the fair
figure since the branch's caches by model object outlive a request: 2.55-2.56 s, 2.34-2.45 s). The whole
command, four rounds, neither tree with cached bytecode, user+system CPU (wall): 2.72-2.83 s (3.62-4.29 s)
before, 2.53-2.61 s (3.51-3.94 s) after. Still ~0.55-0.6 s of CPU over 2 s on this host; what is left
(profiled, after): the 2,778 decode-step tables (~0.3 s), the 495 decode workers built for 144 kept (~0.4 s:
their serving models and confirmed-rate grids), the lone prefills the floors settle (~0.2 s), memory plans and
resolves (~0.25 s), the 201 families (~0.25 s) and the imports (~0.3 s of the whole command). Much of it is
per-call cost of small numpy operations over one layout at a time.

Issue 31, per-call costs (2026-11-27 21:33-21:34 UTC, the same host at load average 0.95-0.98, main at
17bab82 (before) against the branch (after), interleaved; ISSUE9, WHOLE_CATALOG, ISSUE31 and REPEATED outputs
byte-identical, work counters included): kernel tables fill a curve's gaps from one isfinite pass and keep a
call's nearest measured shape and curve by its arguments, and their bilinear step computes each weight once;
a memory plan's allocator rounding is kept per model x layout (no GPU figure: 72 figures for 1,800 layouts)
and its KV-cache groups per model x stage; a layout's prompt and cached-prefix prefills are one call (the
decode workers': prefills 1,492 -> 1,172); a step's total skips terms that are the float 0.0 and a 16-bit
EP dispatch is the combine's twin; the young generation is collected at 250,000 objects (~30 ms of CPU went
to its collections); hf_import is imported only for a config.json model. The whole command, three rounds,
neither tree with cached bytecode, user+system CPU (wall): 2.50-2.58 s (2.51-2.58 s) before, 2.33-2.37 s
(2.33-2.38 s) after (a second series at load 1.2-1.3: 2.41-2.53 s, 2.30-2.34 s); in-process, first request of
a process: 2.12-2.21 s, 2.02 s (repeat requests 1.83-1.88 s, 1.76 s). Still ~0.35 s of CPU over 2 s: the
in-process first request would have to drop to ~1.7 s (imports ~0.3 s, of which ~0.07 s compiles planner's
sources: this host writes no bytecode). What is left is spread (measured, after): the 2,778 decode-step
tables ~0.3 s in a repeat request (a physics step ~64 us a call, dozens of numpy calls on 49 points; a
kernel-table step ~230 us) and ~0.15 s more in a process's first, which builds the kernel tables' curves; the
decode pool ~0.5 s (its 495 serving models and confirmed-rate grids; the request's 868 serving models
~0.28 s in all); lone prefills ~0.14 s (1,172 calls); memory plans ~0.07 s (17 us each). Byte-identical
figures forbid folding a chain of scalar products on an array into one (the rounding changes), so what
remains needs the physics over arrays of layouts (a row per GPU of a layout family: the same operations per
element give the same bits), not one Deployment per call.
No timing is asserted; `make bench` times it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from planner.serving.serving_modes import size_with_modes

ROOT = Path(__file__).resolve().parents[1]
REQUEST = {
    "model": "qwen3-235b-a22b", "traffic": {"requests_per_s": 20.0, "prompt_len": 2000, "output_len": 400},
    "slo": {"ttft_ms": 2000.0, "itl_ms": 60.0}, "tp": [1, 2, 4, 8], "pp": [1, 2], "ep": [1, 8, 16],
    "weights": ["bf16", "fp8", "int4"], "kv_cache": ["bf16", "fp8"], "disaggregation": True,
}


def test_bench_sizing_with_modes(benchmark):
    result = benchmark(size_with_modes, REQUEST)
    assert result["searched"] >= 5000
    assert {o["mode"] for o in result["options"]} <= {"aggregated", "disaggregated"}


def test_bench_sizing_with_modes_whole_command(benchmark):
    def run() -> int:
        out = subprocess.run([sys.executable, "-m", "planner", "size", "-"], input=json.dumps(REQUEST),
                             capture_output=True, text=True, check=True, cwd=ROOT)
        return int(json.loads(out.stdout)["searched"])

    assert benchmark.pedantic(run, rounds=1, iterations=1) >= 5000
