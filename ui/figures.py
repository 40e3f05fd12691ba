"""Headline figures: each with its unit and its meaning, said once (a caption, not also a tooltip)."""

from __future__ import annotations

from typing import Any

import streamlit as st

from planner import Plan
from ui.text import plain

# the planner's breakdown keys, as a reader says them
BREAKDOWN_LABELS = {"gemm_ms": "matrix multiplies (weights)", "attention_ms": "attention (KV cache)",
                    "activations_ms": "activations", "communication_ms": "TP all-reduce",
                    "overhead_ms": "engine overhead (launch, scheduling)"}


def fmt_ms(x: float) -> str:
    return f"{x:,.1f} ms" if x >= 10 else f"{x:,.2f} ms"


def breakdown_label(key: str) -> str:
    return BREAKDOWN_LABELS.get(key, key.removesuffix("_ms").replace("_", " "))


def memory_rows(p: Plan) -> list[tuple[str, str, str]]:
    m, r = p.memory, p.roofline
    crossing = (f"decode reaches it at batch {r.ridge_crossing_batch:,}" if r.ridge_crossing_batch
                else "decode never reaches it at this context (KV reads grow with the batch)")
    return [
        ("Weights per GPU", f"{m.weights_gb_per_gpu:,.2f} GB", "stored weights on each GPU, quantization scales included"),
        ("KV budget per GPU", f"{m.kv_budget_gb_per_gpu:,.2f} GB", "memory left for the KV cache after weights and reserve"),
        ("Max batch", f"{m.max_batch:,}", "sequences of the full context that fit in the KV budget"),
        ("Decode FLOP/byte", f"{r.decode_ai:,.1f}", f"FLOPs per HBM byte of one decode step: {r.regime}"),
        ("Ridge FLOP/byte", f"{r.ridge_flop_per_byte:,.1f}", f"dense {r.compute_precision} peak / HBM bandwidth; {crossing}"),
    ]


def fmt_time(x: float) -> str:
    """Milliseconds, or seconds from 1 s up (end-to-end latencies)."""
    return f"{x / 1000:,.2f} s" if x >= 1000 else fmt_ms(x)


def _pct(x: Any) -> str:
    return fmt_time(x.p50) + " / " + fmt_time(x.p99) if x.p50 is not None and x.p99 is not None else "n/a"


def _usd(x: float | None) -> str:
    return f"${x:,.3f}" if x is not None and x == x else "n/a"


def load_rows(p: Plan) -> list[tuple[str, str, str]]:
    """The operating point: load, throughput and cost under the serving model (plan section `serving`)."""
    sv = p.serving
    cap = f"capacity {sv.max_request_rate:,.2f} req/s" if sv.max_request_rate else "no capacity"
    goodput = (f"; goodput {sv.goodput_request_rate:,.2f} req/s at the p{sv.slo_percentile} objective"
               if sv.goodput_request_rate is not None else "")
    share = f"; {sv.prefill_share:.0%} of GPU time on prefill" if sv.prefill_share is not None else ""
    return [
        ("Request rate", f"{sv.request_rate:,.2f} req/s" if sv.request_rate else "n/a",
         f"per replica ({'given' if sv.mode == 'request_rate' else 'what the clients sustain'}); {cap}{goodput}"),
        ("Concurrency", f"{sv.concurrency:,.0f}" if sv.concurrency else "n/a",
         f"requests in the replica ({'given' if sv.mode == 'concurrency' else 'from the rate'}){share}"),
        ("Output tokens/s per GPU", f"{sv.output_tokens_per_s_per_gpu:,.0f}" if sv.output_tokens_per_s_per_gpu else "n/a",
         f"{sv.output_tokens_per_s or 0:,.0f} per replica of {p.parallelism.gpus_per_replica if p.parallelism else p.tp} GPUs"),
        ("$ per M output tokens", _usd(p.cost.usd_per_million_output_tokens),
         f"at this load, prefill included; {_usd(p.cost.usd_per_million_total_tokens)} per M input + output tokens; "
         f"decode-only bound {_usd(p.cost.usd_per_million_output_tokens_bound)}"),
    ]


def latency_rows(p: Plan) -> list[tuple[str, str, str]]:
    sv = p.serving
    return [
        ("TTFT p50 / p99", _pct(sv.ttft_ms), "time to first token under this load: queue, prefill chunks"),
        ("ITL p50 / p99", _pct(sv.itl_ms), "inter-token latency per token, iterations carrying prefill included"),
        ("E2E p50 / p99", _pct(sv.e2e_ms), "end-to-end: first token plus the rest of the output"),
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
        ("TTFT, one request alone", fmt_ms(lat.ttft_ms),
         f"no queue, no other traffic{_band(lat.ttft_band_ms, status.get('ttft'), 0)}"),
        ("ITL, decode only", fmt_ms(lat.itl_ms),
         f"a pure decode step at batch {lat.batch:,}{' on ' + engine if engine else ''}{floor}; roofline bound "
         f"{fmt_ms(lat.itl_ms_bound)}{_band(lat.itl_band_ms, status.get('itl'), 1)}"),
        ("Tokens/s, decode only", f"{thr.output_tokens_per_s:,.0f}",
         f"batch {lat.batch:,} / ITL, prefill ignored: an upper bound; roofline {thr.output_tokens_per_s_bound:,.0f}"),
        ("Tokens/s per user, decode only", f"{thr.tokens_per_s_per_user:,.1f}", "1000 / decode-only ITL"),
        _decode_cost_row(p),
    ]


def _decode_cost_row(p: Plan) -> tuple[str, str, str]:
    where = f"at ${p.cost.usd_per_gpu_hour:,.2f}/GPU-hour x {p.tp} GPUs"
    return ("$ per M, decode-only bound", _usd(p.cost.usd_per_million_output_tokens_bound),
            f"decode only at batch {p.latency.batch:,}, prefill ignored: a lower bound; {where}")


def regime_advice(p: Plan, kv_cache: str) -> str:
    r = p.roofline
    smaller_kv = ("a lower-precision KV cache such as fp8, or fewer KV heads" if kv_cache not in ("fp8", "int8", "int4")
                  else f"fewer KV heads; the cache is already {kv_cache}")
    if r.regime == "memory-bound":
        if r.ridge_crossing_batch is None:
            return ("Decode is **memory-bound at every batch** at this context: KV reads grow as fast as FLOPs. "
                    f"A smaller KV ({smaller_kv}) or shorter contexts move it; batching alone cannot.")
        more = ("" if r.ridge_crossing_batch <= p.memory.max_batch else
                " — beyond the max batch that fits, so more memory or a smaller KV would be needed first")
        return (f"Decode is **memory-bound**: batching up to {r.ridge_crossing_batch:,} raises intensity to the "
                f"ridge{more}. Lower-precision weights and KV cut the bytes per step.")
    return ("Decode is **compute-bound**: larger batches add latency without more throughput; a faster tensor "
            "precision or more GPUs help.")


def _tiles(rows: list[tuple[str, str, str]]) -> None:
    cols = st.columns(len(rows))
    for col, (label, value, meaning) in zip(cols, rows, strict=True):
        col.metric(label, value)
        col.caption(meaning)


def render(p: Plan, scenario: dict[str, Any]) -> None:
    """The operating point first (load, latency percentiles, cost), then memory and roofline, then the
    decode-only bounds; serving tiles only for a deployment that fits."""
    sv = p.serving
    if p.memory.fits:
        st.markdown("**At the operating point**")
        _tiles(load_rows(p))
        if sv.stable:
            _tiles(latency_rows(p))
        else:
            cap = f"{sv.max_request_rate:,.2f}" if sv.max_request_rate else "0"
            st.error(f"Unstable: this load exceeds what one replica sustains ({cap} req/s); queues grow without "
                     "bound, so there are no latency percentiles. Lower the rate or the concurrency, or add replicas.")
    st.markdown("**Memory and roofline**")
    _tiles(memory_rows(p))
    if not p.memory.fits:
        return
    st.markdown("**Decode-only bounds** (no prefill, no queue)")
    _tiles(serving_rows(p))
    if p.speculative is not None:
        sp = p.speculative
        st.info(f"Speculative decoding: {sp.tokens_per_round:.2f} tokens per target pass, a round of "
                f"{fmt_ms(sp.round_ms)}, so an effective ITL of **{fmt_ms(sp.itl_ms)}** "
                f"({sp.output_tokens_per_s:,.0f} tokens/s at batch {p.latency.batch:,}) against {fmt_ms(p.latency.itl_ms)} without.")
    st.markdown(regime_advice(p, str(scenario.get("kv_cache", ""))))
    for warning in p.warnings:
        st.warning(plain(warning))  # warnings can echo a custom GPU's vendor or name
