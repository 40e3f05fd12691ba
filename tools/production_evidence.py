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

A term the runs cannot pin is held at a stated value (held_value): the graph physics measured on H100/H200, or
a published figure (CDNA's GEMM share of its peak), recorded with its source. A term the fit drives to a bound
is not pinned either, since the runs ask for a value outside its physical range: tools/fit_production_engines
holds it (weight streaming at the most a plain HBM read reaches, compute at the measured or published share,
a fixed cost at 0 where its siblings carry it) and refits the others, until no fitted value sits at a bound.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Protocol

from planner.core.precision import bits_per_value
from planner.hardware.communication import runs_expert_alltoall
from planner.physics.kernel_tables import kernel_terms
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
    elif not any(runs_expert_alltoall(r.base) for r in runs):
        for name in ("alltoall_latency_us", "ep_overlap"):
            out[name] = ("its expert-parallel runs move no tokens by all-to-all: the engine combines the "
                         "experts in the TP all-reduce (planner.hardware.communication.runs_expert_alltoall)")
    return out


def fitted_precisions(runs: list[_Run]) -> tuple[list[str], dict[str, str]]:
    """The weight precisions whose streaming efficiency the group fits, and why the others are not."""
    counts = Counter(r.weights for r in runs)
    fitted = sorted(p for p, n in counts.items() if n >= MIN_EVIDENCE_RUNS)
    left = {p: f"{n} run{'s' if n > 1 else ''} in {p} weights: the physics' streaming efficiency stays"
            for p, n in sorted(counts.items()) if n < MIN_EVIDENCE_RUNS}
    return fitted, left


# What a term the runs cannot pin is held at (issue 30: such a term is not a free parameter). By default the
# value every plan on the generation takes (the graph physics measured on H100/H200, the engine profile's
# serving costs); below, where a measured or published figure says otherwise, or where the fit drove the
# term to a bound (held_value's `side`).
# The most a plain HBM read reached (a 4 GiB copy, data/measurements/h100_physics_2026-11-26.json and
# h200_physics_2026-11-26.json: H100 0.89-0.91, H200 0.87 of the datasheet): a weight-streaming fit that
# asks for more does not pin the term, and the term is held at this ceiling. CDNA: published, ~81% of
# MI300X's 5.3 TB/s is what real workloads reach (the source below); CDNA4 takes CDNA3's share.
READ_CEILING = {"nvidia": 0.89, "cdna": 0.81}
# CDNA's decode GEMMs: published, AMD MI300X reaches ~45% of its dense BF16/FP8 peak on real workloads,
# NVIDIA's H100 and B200 up to 93%
# (https://aiweekly.co/alerts/amd-mi300x-hits-only-45-of-peak-flops-in-practice). No
# CDNA4 figure is published: CDNA3's share is held for MI355X too (the same hipBLASLt kernels). NVIDIA keeps
# the graph physics' 0.675 measured on H100/H200 past the ridge (the engines' kernel tables agree: their
# 7168 x 7168 GEMM rows at m 2048-8192 read 0.81-0.86 of the bf16 peak and 0.53-0.70 of the fp8 peak on H100
# and H200, 0.60-0.66 and 0.37-0.53 on B200; read 2026-11-27 from planner/data/kernel_tables/).
CDNA_COMPUTE = 0.45
# fixed costs the fit drove to 0: the runs see no cost of their own beyond the group's other fixed terms
# (an engine that fuses its all-reduce into the norm kernels, per-layer and per-step costs of one model
# depth): held at 0, the fitted fixed terms carry it. A value held at a bound is listed in the record's
# `not_fitted` (tests/test_profile_records.py keeps their count from growing).
FIXED_COSTS = ("layer_overhead_us", "moe_layer_overhead_us", "allreduce_latency_us", "step_overhead_us",
               "alltoall_latency_us")
_SOURCES = {
    "compute": "decode GEMMs past the ridge measured on H100/H200 (the graph physics)",
    "layer_overhead_us": "per-layer kernel cost measured in CUDA graphs on H100/H200 (the graph physics)",
    "moe_layer_overhead_us": "extra MoE-layer kernels measured on H100/H200 (the graph physics)",
    "allreduce_latency_us": "NCCL all-reduce latency measured on H100/H200 (the graph physics)",
    "step_overhead_us": "the engine profile's per-step host cost (no kernel-table host cost)",
    "ep_overlap": "the planned default: the other micro-batch's compute hides the all-to-alls",
    "alltoall_latency_us": "the planned default: the all-reduce's latency",
}
_WEIGHT_SOURCE = "weight streaming measured on H100/H200 (the graph physics)"


def host_cost_us(engine: str, generation: str) -> tuple[float, str] | None:
    """The engine's per-step host cost as the kernel-table predictor fitted it (planner/data/kernel_tables/
    kernel_terms.json: the end-to-end time its measured kernels leave, fitted per engine x generation on
    every architecture family, held out by family): the one term of a step the tables cannot see. A
    generation without tables (CDNA) takes the mean of the engine's NVIDIA generations (the same engine's
    CPU-side scheduling, sampling and detokenizing)."""
    own = kernel_terms(engine, generation)
    if own is not None:
        return float(own["step_overhead_us"]), f"the kernel-table predictor's host cost on {generation}"
    others = [kernel_terms(engine, g) for g in ("hopper", "blackwell")]
    values = [float(t["step_overhead_us"]) for t in others if t is not None]
    if not values:
        return None
    return (sum(values) / len(values),
            "the mean of the kernel-table predictor's host costs on Hopper and Blackwell (no tables here)")


def held_value(term: str, generation: str, planned: Any, side: str | None = None,
               bound: float = 0.0) -> tuple[float | None, str]:
    """The value a term the runs cannot pin is held at, and its source. `term` is a decode term or
    'precision:streaming term'; `side`: 'low' or 'high' where the fit drove it to that bound (`bound`)."""
    name = term.split(":")[-1]
    host = host_cost_us(planned.name, generation) if name == "step_overhead_us" and side != "low" else None
    if host is not None:
        return host
    vendor = "cdna" if generation.startswith("cdna") else "nvidia"
    if ":" in term and side == "high":
        source = ("the most a plain HBM read reaches: measured on H100 0.89-0.91, H200 0.87 "
                  "(data/measurements/h1*0_physics_2026-11-26.json)" if vendor == "nvidia"
                  else "published: ~81% of MI300X's HBM bandwidth on real workloads")
        return READ_CEILING[vendor], source
    if name == "compute" and vendor == "cdna":
        return CDNA_COMPUTE, "published: MI300X reaches ~45% of its dense peak in practice (CDNA4: CDNA3's)"
    if name in FIXED_COSTS and side == "low":
        return 0.0, "no cost of its own beyond the group's other fitted fixed costs, which carry it"
    if name == "ep_overlap" and side is not None:
        return bound, "the bound the runs ask for: no value inside it is pinned"
    value = getattr(planned, name)
    return (None if value is None else float(value)), (_WEIGHT_SOURCE if ":" in term else _SOURCES[name])


def at_bound_reason(bound: float, side: str, value: float | None, source: str) -> str:
    """Why a term the fit drove to a bound is held, not fitted."""
    held = "its planned value" if value is None else f"{value:g}"
    return (f"the fit went to its {'upper' if side == 'high' else 'lower'} bound {bound:g}: the runs do not "
            f"pin it inside its physical range; held at {held} ({source})")

