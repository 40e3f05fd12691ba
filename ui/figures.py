"""Headline figures: each with its unit and its meaning, said once (a caption, not also a tooltip)."""

from __future__ import annotations

from typing import Any

import streamlit as st

from planner import Plan
from planner.contract.equal_service import Fleet
from planner.scenario.scenario import ServiceObjective
from planner.serving.operating_point import judge
from ui.text import plain

# the planner's breakdown keys, as a reader says them
BREAKDOWN_LABELS = {"gemm_ms": "matrix multiplies (weights)", "attention_ms": "attention (KV cache)",
                    "activations_ms": "activations", "communication_ms": "TP all-reduce",
                    "overhead_ms": "engine overhead (launch, scheduling)"}


def fmt_ms(x: float) -> str:
    return f"{x:,.1f} ms" if x >= 10 else f"{x:,.2f} ms"


def breakdown_label(key: str) -> str:
    return BREAKDOWN_LABELS.get(key, key.removesuffix("_ms").replace("_", " "))


def gib(gb: float) -> str:
    """A memory figure in GiB (2^30 bytes), the unit engines log and every chart uses."""
    return f"{gb * 1e9 / 2**30:,.2f} GiB"


def memory_rows(p: Plan) -> list[tuple[str, str, str]]:
    m, r = p.memory, p.roofline
    crossing = (f"decode reaches it at batch {r.ridge_crossing_batch:,}" if r.ridge_crossing_batch
                else "decode never reaches it at this context (KV reads grow with the batch)")
    return [
        (
            "Weights per GPU", gib(m.weights_gb_per_gpu),
            "stored weights on each GPU, quantization scales included",
        ),
        (
            "KV budget per GPU", gib(m.kv_budget_gb_per_gpu),
            "memory left for the KV cache after weights and reserve",
        ),
        ("Max batch", f"{m.max_batch:,}", "sequences of the full context that fit in the KV budget"),
        ("Decode FLOP/byte", f"{r.decode_ai:,.1f}", f"FLOPs per HBM byte of one decode step: {r.regime}"),
        (
            "Ridge FLOP/byte", f"{r.ridge_flop_per_byte:,.1f}",
            f"dense {r.compute_precision} peak / HBM bandwidth; {crossing}",
        ),
    ]


def fmt_time(x: float) -> str:
    """Milliseconds, or seconds from 1 s up (end-to-end latencies)."""
    return f"{x / 1000:,.2f} s" if x >= 1000 else fmt_ms(x)


def _usd(x: float | None) -> str:
    return f"${x:,.3f}" if x is not None and x == x else "n/a"


def _gpus(n: int) -> str:
    return f"{n:,} GPU" + ("" if n == 1 else "s")


def objective_text(slo: ServiceObjective) -> str:
    """The objective as a reader says it: 'p90 TTFT <= 1,000 ms, p90 ITL <= 50 ms'."""
    parts = [
        f"p{slo.percentile} {name} ≤ {bound:,.0f} ms"
        for name, bound in (("TTFT", slo.ttft_ms), ("ITL", slo.itl_ms))
        if bound is not None
    ] + ([f"mean TPOT ≤ {slo.tpot_ms:,.1f} ms"] if slo.tpot_ms is not None else [])
    return ", ".join(parts) or "none"


def objective_of(scenario: dict[str, Any]) -> ServiceObjective | None:
    """The scenario's own objective (load.slo), validated by the planner's model."""
    slo = (scenario.get("load") or {}).get("slo")
    return ServiceObjective.model_validate(slo) if slo else None


def _gpus_per_replica(p: Plan) -> int:
    return p.parallelism.gpus_per_replica if p.parallelism else p.tp


def load_rows(
    p: Plan, fleet: Fleet | None = None, traffic: float | None = None
) -> list[tuple[str, str, str]]:
    """The operating point: load, throughput and cost under the serving model (plan section `serving`)."""
    sv = p.serving
    n = _gpus_per_replica(p)
    cap = f"capacity {sv.max_request_rate:,.2f} req/s" if sv.max_request_rate else "no capacity"
    share = f"; {sv.prefill_share:.0%} of GPU time on prefill" if sv.prefill_share is not None else ""
    if sv.at_goodput:
        rate = ("Goodput per replica", f"{sv.request_rate:,.2f} req/s" if sv.request_rate else "n/a",
                f"the highest rate that meets the objective; {cap}{share}")
    else:
        goodput = (f"; goodput {sv.goodput_request_rate:,.2f} req/s at the p{sv.slo_percentile} objective"
                   if sv.goodput_request_rate is not None else "")
        how = "given" if sv.mode == "request_rate" else "what the clients sustain"
        rate = ("Request rate", f"{sv.request_rate:,.2f} req/s" if sv.request_rate else "n/a",
                f"per replica ({how}); {cap}{goodput}{share}")
    rows = [
        rate,
        (
            "Output tokens/s per replica",
            f"{sv.output_tokens_per_s:,.0f}" if sv.output_tokens_per_s else "n/a",
            (
                f"{sv.output_tokens_per_s_per_gpu:,.0f} per GPU, {_gpus(n)} per replica"
                if sv.output_tokens_per_s_per_gpu
                else f"{_gpus(n)} per replica"
            ),
        ),
        (
            "$ per M output tokens", _usd(p.cost.usd_per_million_output_tokens),
            f"at this load, prefill included; {_usd(p.cost.usd_per_million_total_tokens)} per M input + "
            "output tokens",
        ),
    ]
    if fleet is not None and traffic is not None:
        if fleet.gpus is not None and fleet.usd_per_hour is not None and fleet.replicas is not None:
            rows.append(
                (
                    f"GPUs for {traffic:,.4g} req/s", f"{fleet.gpus:,}",
                    f"{fleet.replicas:,} replicas of {_gpus(n)}, each within the objective (traffic target "
                    "in "
                    "the sidebar)",
                )
            )
            rows.append((f"$/hour for {traffic:,.4g} req/s", f"${fleet.usd_per_hour:,.2f}",
                         f"{_usd(fleet.usd_per_million_output_tokens)} per M output tokens at that traffic "
                         "(the sizing page's figure)"))
        else:
            rows.append(
                (
                    f"GPUs for {traffic:,.4g} req/s", "none",
                    f"no fleet meets the objective: {plain(fleet.reason)}",
                )
            )
    return rows


def _mark(value: float | None, met: bool | None, range_high: float | None = None,
          range_met: bool | None = None) -> str:
    """A figure against its bound; a tick only where the simulated range's top meets the bound too."""
    if value is None:
        return "n/a"
    if met and range_met is False and range_high is not None:
        return fmt_time(value) + f" ✗ simulated range to {fmt_time(range_high)}"
    return fmt_time(value) + ("" if met is None else " ✓ met" if met else " ✗ missed")


def latency_rows(p: Plan, slo: ServiceObjective | None = None) -> list[tuple[str, str, str]]:
    """Latency tiles at the objective's percentile, each marked met or missed; p50 / p99 without one.
    Means beside them, and mean TPOT beside ITL."""
    sv = p.serving

    def mean(x: Any) -> str:
        return f"mean {fmt_time(x.mean)}" if x.mean is not None else "mean n/a"

    tpot = sv.tpot_ms
    tpot_row = (
        "Mean TPOT", fmt_time(tpot.mean) if tpot.mean is not None else "n/a",
        "time per output token per request, (E2E - TTFT) / (output - 1): `vllm bench serve`'s first figure",
    )
    if slo is None:
        def both(x: Any) -> str:
            return (
                (fmt_time(x.p50) + " / " + fmt_time(x.p99))
                if x.p50 is not None and x.p99 is not None
                else "n/a"
            )

        return [
            (
                "TTFT p50 / p99", both(sv.ttft_ms),
                f"time to first token: queue, prefill chunks; {mean(sv.ttft_ms)}",
            ),
            (
                "ITL p50 / p99", both(sv.itl_ms),
                f"inter-token latency per token, prefill iterations included; {mean(sv.itl_ms)}",
            ),
            tpot_row,
            ("E2E p50 / p99", both(sv.e2e_ms), f"end-to-end: first token plus the rest; {mean(sv.e2e_ms)}"),
        ]
    j = judge(sv.ttft_ms, sv.itl_ms, slo, sv.queue_bands, tpot.mean)
    pct = f"p{slo.percentile}"
    if slo.tpot_ms is not None:
        tpot_row = ("Mean TPOT", _mark(tpot.mean, j.tpot_met), f"objective ≤ {slo.tpot_ms:,.1f} ms; "
                    "(E2E - TTFT) / (output - 1) per request: `vllm bench serve`'s first figure")
    e2e = getattr(sv.e2e_ms, pct)

    def bound(b: float | None) -> str:
        return f"objective ≤ {b:,.0f} ms" if b is not None else "no objective"

    return [
        (f"TTFT {pct}", _mark(j.ttft_ms, j.ttft_met, j.ttft_range_high_ms, j.ttft_range_met),
         f"{bound(slo.ttft_ms)}; {mean(sv.ttft_ms)}"),
        (
            f"ITL {pct}", _mark(j.itl_ms, j.itl_met, j.itl_range_high_ms, j.itl_range_met),
            f"{bound(slo.itl_ms)}; per token, pooled; {mean(sv.itl_ms)}",
        ),
        tpot_row,
        (f"E2E {pct}", fmt_time(e2e) if e2e is not None else "n/a", f"no objective; {mean(sv.e2e_ms)}"),
    ]


def _band(band: Any, status: str | None, digits: int) -> str:
    """The error band with the number of held-out rows behind it, or why there is none."""
    if band is not None:
        rows = getattr(band, "rows", None)
        behind = f", {rows} held-out rows" if rows else ""
        return f" (likely {band.low:.{digits}f}–{band.high:.{digits}f}{behind})"
    return " (band: unvalidated)" if status == "unvalidated" else ""


def serving_rows(p: Plan) -> list[tuple[str, str, str]]:
    """Decode-only figures at the batch: bounds beside the operating point, labelled as such; the
    compiled-graph floor (no serving engine) beside the engine's estimate where the plan has it."""
    lat, thr = p.latency, p.throughput
    status = getattr(lat, "band_status", {}) or {}
    itl_floor = getattr(lat, "itl_ms_floor", None)
    floor = f"; floor {fmt_ms(itl_floor)} (compiled graph, no engine)" if itl_floor else ""
    engine = getattr(lat, "engine", None)
    return [
        (
            "TTFT, one request alone", fmt_ms(lat.ttft_ms),
            f"no queue, no other traffic{_band(lat.ttft_band_ms, status.get('ttft'), 0)}",
        ),
        (
            "ITL, decode only", fmt_ms(lat.itl_ms),
            f"a pure decode step at batch {lat.batch:,}{' on ' + engine if engine else ''}{floor}; roofline "
            "bound "
            f"{fmt_ms(lat.itl_ms_bound)}{_band(lat.itl_band_ms, status.get('itl'), 1)}",
        ),
        (
            "Tokens/s, decode only", f"{thr.output_tokens_per_s:,.0f}",
            f"batch {lat.batch:,} / ITL, prefill ignored: an upper bound; roofline "
            f"{thr.output_tokens_per_s_bound:,.0f}",
        ),
        ("Tokens/s per user, decode only", f"{thr.tokens_per_s_per_user:,.1f}", "1000 / decode-only ITL"),
        _decode_cost_row(p),
    ]


def _decode_cost_row(p: Plan) -> tuple[str, str, str]:
    where = f"at ${p.cost.usd_per_gpu_hour:,.2f}/GPU-hour x {_gpus(_gpus_per_replica(p))}"
    return ("$ per M, decode-only bound", _usd(p.cost.usd_per_million_output_tokens_bound),
            f"decode only at batch {p.latency.batch:,}, prefill ignored: a lower bound; {where}")


def regime_advice(p: Plan, kv_cache: str) -> str:
    r = p.roofline
    smaller_kv = (
        "a lower-precision KV cache such as fp8, or fewer KV heads"
        if kv_cache not in ("fp8", "int8", "int4")
        else f"fewer KV heads; the cache is already {kv_cache}"
    )
    if r.regime == "memory-bound":
        if r.ridge_crossing_batch is None:
            return (
                "Decode is **memory-bound at every batch** at this context: KV reads grow as fast as FLOPs. "
                f"A smaller KV ({smaller_kv}) or shorter contexts move it; batching alone cannot."
            )
        more = ("" if r.ridge_crossing_batch <= p.memory.max_batch else
                " — beyond the max batch that fits, so more memory or a smaller KV would be needed first")
        return (
            f"Decode is **memory-bound**: batching up to {r.ridge_crossing_batch:,} raises intensity to the "
            f"ridge{more}. Lower-precision weights and KV cut the bytes per step."
        )
    return (
        "Decode is **compute-bound**: larger batches add latency without more throughput; a faster tensor "
        "precision or more GPUs help."
    )


def queue_band_text(p: Plan) -> str | None:
    """One line on where the scheduler's simulation puts the open loop's percentiles (serving.queue_bands)."""
    bands = p.serving.queue_bands
    if bands is None:
        return None
    if bands.status != "simulated":
        return f"Simulated range: {bands.status}."
    parts = []
    for label, band in (("TTFT p50", bands.ttft_p50_ms), ("p90", bands.ttft_p90_ms),
                        ("p99", bands.ttft_p99_ms), ("ITL p50", bands.itl_p50_ms), ("p90", bands.itl_p90_ms),
                        ("p99", bands.itl_p99_ms)):
        if band is not None:
            parts.append(f"{label} {fmt_ms(band.low)} to {fmt_ms(band.high)}")
    long = ", prompts over the chunk budget" if bands.prompt_class == "long" else ""
    where = f"{bands.load_fraction:.0%} of capacity ({bands.arrival_class} arrivals{long}"
    return (f"Simulated range at {where}; the scheduler's discrete-event simulation around the queue model's "
            "figures): " + ", ".join(parts) + ".")


def _tiles(rows: list[tuple[str, str, str]]) -> None:
    cols = st.columns(len(rows))
    for col, (label, value, meaning) in zip(cols, rows, strict=True):
        col.metric(label, value)
        col.caption(meaning)


def render(
    p: Plan, scenario: dict[str, Any], fleet: Fleet | None = None, traffic: float | None = None
) -> None:
    """The operating point first (load, latency against the objective, cost, the fleet for the traffic),
    then memory and roofline, then the decode-only bounds; serving tiles only for a deployment that fits."""
    sv = p.serving
    slo = objective_of(scenario)
    if p.memory.fits:
        if sv.at_goodput and slo is not None:
            st.markdown(f"**At the objective** ({objective_text(slo)}): the highest load one replica serves "
                        "within it")
        else:
            st.markdown("**At the operating point**" + (f" (objective {objective_text(slo)})" if slo else ""))
        _tiles(load_rows(p, fleet, traffic))
        if sv.stable:
            _tiles(latency_rows(p, slo))
            band_text = queue_band_text(p)
            if band_text:
                st.caption(band_text)
            if sv.at_goodput and slo is not None and sv.goodput_request_rate is not None and not judge(
                    sv.ttft_ms, sv.itl_ms, slo).met:
                st.error(
                    "Even a trickle of traffic misses the objective on this configuration: the figures above "
                    "are one request at a time. Loosen the objective, or choose a faster GPU or layout."
                )
        elif sv.saturated:
            st.warning(
                f"Saturated: {sv.concurrency or 0:,.0f} clients keep the replica at its capacity "
                f"({sv.max_request_rate or 0:,.2f} req/s); the requests it cannot run wait for admission, so "
                "latency grows with the clients and has no estimate here. Choose the operating point "
                "'at objective', or fewer clients."
            )
        else:
            cap = f"{sv.max_request_rate:,.2f}" if sv.max_request_rate else "0"
            st.error(
                f"Unstable: this rate is above what one replica sustains ({cap} req/s); queues grow without "
                "bound, so there are no latency percentiles. Lower the rate, or add replicas."
            )
    st.markdown("**Memory and roofline**")
    _tiles(memory_rows(p))
    if not p.memory.fits:
        return
    st.markdown("**Decode-only bounds** (no prefill, no queue)")
    _tiles(serving_rows(p))
    if p.speculative is not None:
        sp = p.speculative
        st.info(
            f"Speculative decoding: {sp.tokens_per_round:.2f} tokens per target pass, a round of "
            f"{fmt_ms(sp.round_ms)}, so an effective ITL of **{fmt_ms(sp.itl_ms)}** "
            f"({sp.output_tokens_per_s:,.0f} tokens/s at batch {p.latency.batch:,}) against "
            f"{fmt_ms(p.latency.itl_ms)} without."
        )
    st.markdown(regime_advice(p, str(scenario.get("kv_cache", ""))))
    for warning in p.warnings:
        st.warning(plain(warning))  # warnings can echo a custom GPU's vendor or name
