"""Which production terms a group of public runs can tell apart (issue 30: no fitted value at a bound).

A term the runs of one engine x GPU generation carry no evidence for is not fitted: the group keeps the value
its runs were planned with (the graph physics plus the engine's serving overheads, planner/data/
engine_profiles.json), the same value every plan on that generation takes, and the record says why. A free
value without evidence drifts to whichever bound the noise favours, and a value at a bound does not transfer.

  * Fixed costs per step: the per-step host cost (`step_overhead_us`), the kernels of every layer
    (`layer_overhead_us`) and the extra ones of an MoE layer (`moe_layer_overhead_us`) are one constant over
    runs of one model. A group needs models of different depths to tell the first two apart, and dense and
    MoE models to tell the third. With one model it fits the per-layer kernel cost.
  * The all-reduce's latency is a per-layer constant too where every run has the same TP: it needs runs at
    two TP sizes (TP 1 counts: it has none).
  * A weight precision's streaming efficiency needs runs in that precision.
  * Expert all-to-alls need expert-parallel runs of an MoE model.
  * The decode compute efficiency (`compute`, the share of the dense peak a step's GEMMs and attention math
    reach) moves a step only where its compute time nears the memory time it hides under: it needs runs whose
    GEMM or attention compute, at the physics' measured efficiency and the run's concurrency (a closed loop's
    largest decode batch), is at least half the time of the weights or KV they read (the p-norm join then adds
    >= 10%). Below that the step is the memory read plus a tail the join barely moves, and the fit would
    leave compute wherever the noise pushes it (1.0 or 0.5 in 8 of 10 groups, issue 30).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Protocol

from planner.core.precision import bits_per_value
from planner.physics.latency import weight_bandwidth_efficiency
from planner.physics.roofline import decode_work

# runs a model, a precision or a TP size needs in a group before it counts as evidence: one or two runs (a
# GPUStack Qwen3-8B row in a group of 100 DeepSeek runs) move a term without pinning it
MIN_EVIDENCE_RUNS = 5


# a run's compute time, as a share of the memory time it hides under, from which compute moves its step
COMPUTE_EVIDENCE_RATIO = 0.5


class _Run(Protocol):
    model: str
    weights: str
    base: Any
    context: float
    row: Any


def compute_to_memory(run: _Run) -> float:
    """The larger of the run's GEMM compute / weight-read time and attention compute / KV-read time, at the
    physics' efficiencies and the run's concurrency."""
    d = run.base
    e = d.efficiency
    work = decode_work(d, float(run.row["concurrency"]), run.context)
    bw = d.gpu.hbm_tb_s * 1e12
    # at the compute term even for weight-only 4-bit GEMMs (fit_production_engines.TIED_TERMS)
    gemm = float(work.gemm_flops) / (e.compute * d.gpu.peak_tflops(d.compute) * 1e12)
    weights = float(work.weight_bytes) / (weight_bandwidth_efficiency(d) * bw)
    attention = float(work.attention_flops) / (e.compute * d.gpu.peak_tflops("bf16") * 1e12)
    kv_efficiency = e.kv_quantized_bandwidth if bits_per_value(d.kv_cache) < 16 else e.kv_bandwidth
    kv = float(work.kv_bytes) / (kv_efficiency * bw)
    return max(gemm / weights, attention / max(kv, 1e-30))


def _counted(values: list[Any]) -> set[Any]:
    return {v for v, n in Counter(values).items() if n >= MIN_EVIDENCE_RUNS}


def unfitted_terms(runs: list[_Run]) -> dict[str, str]:
    """Each decode term the group's runs cannot pin, with the reason (tools/fit_production_engines.py
    DECODE_TERMS names)."""
    models = _counted([r.model for r in runs])
    moe = {r.model for r in runs if r.base.model.moe is not None} & models
    depths = {r.base.model.n_layers for r in runs if r.model in models}
    out: dict[str, str] = {}
    near = sum(compute_to_memory(r) >= COMPUTE_EVIDENCE_RATIO for r in runs)
    if near < MIN_EVIDENCE_RUNS:
        out["compute"] = (f"{near} runs with decode compute at least {COMPUTE_EVIDENCE_RATIO:g} of the "
                          "memory time it hides under: the batches stay below the ridge; the physics' "
                          "measured compute stays")
    if len(depths) < 2:
        out["step_overhead_us"] = (f"runs of one model depth ({', '.join(sorted(models))}): a per-step cost "
                                   "is the per-layer one times the depth; the engine's host cost stays its "
                                   "profile's")
    if not moe:
        out["moe_layer_overhead_us"] = "no MoE model in the group"
    elif moe == models:
        out["moe_layer_overhead_us"] = ("MoE models only: an MoE layer's extra kernels cannot be told from "
                                        "every layer's; the physics' measured extra stays")
    tps = _counted([int(r.base.tp) for r in runs])
    if len(tps) < 2:
        out["allreduce_latency_us"] = (f"every run at TP {', '.join(str(t) for t in sorted(tps))}: the "
                                       "all-reduce's latency is one more per-layer constant; the physics' "
                                       "measured one stays")
    if not any(r.base.ep > 1 and r.base.model.moe is not None for r in runs):
        for name in ("alltoall_latency_us", "ep_overlap"):
            out[name] = "no expert-parallel run"
    return out


def fitted_precisions(runs: list[_Run]) -> tuple[list[str], dict[str, str]]:
    """The weight precisions whose streaming efficiency the group fits, and why the others are not."""
    counts = Counter(r.weights for r in runs)
    fitted = sorted(p for p, n in counts.items() if n >= MIN_EVIDENCE_RUNS)
    left = {p: f"{n} run{'s' if n > 1 else ''} in {p} weights: the physics' streaming efficiency stays"
            for p, n in sorted(counts.items()) if n < MIN_EVIDENCE_RUNS}
    return fitted, left
