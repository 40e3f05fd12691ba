"""Headline figures: each with its unit and a one-line meaning."""

from __future__ import annotations

from typing import Any

import streamlit as st

from planner import Plan
from ui.text import plain


def fmt_ms(x: float) -> str:
    return f"{x:,.1f} ms" if x >= 10 else f"{x:,.2f} ms"


def headline_rows(p: Plan) -> list[tuple[str, str, str]]:
    """(label, value, meaning) for every headline figure; used by the page and the comparison."""
    m, r, lat, thr = p.memory, p.roofline, p.latency, p.throughput
    crossing = f"batch {r.ridge_crossing_batch:,}" if r.ridge_crossing_batch else "never (KV-bound)"
    cost = p.cost.usd_per_million_output_tokens
    itl_band = f" (likely {lat.itl_band_ms.low:.1f}–{lat.itl_band_ms.high:.1f})" if lat.itl_band_ms else ""
    ttft_band = f" (likely {lat.ttft_band_ms.low:.0f}–{lat.ttft_band_ms.high:.0f})" if lat.ttft_band_ms else ""
    return [
        ("Weights per GPU", f"{m.weights_gb_per_gpu:,.2f} GB", "stored weights on each GPU, quantization scales included"),
        ("KV budget per GPU", f"{m.kv_budget_gb_per_gpu:,.2f} GB", "memory left for the KV cache after weights and reserve"),
        ("Max batch", f"{m.max_batch:,}", "sequences of the full context that fit in the KV budget"),
        ("Decode FLOP/byte", f"{r.decode_ai:,.1f}", f"FLOPs per HBM byte of one decode step: {r.regime}"),
        ("Ridge FLOP/byte", f"{r.ridge_flop_per_byte:,.1f}", f"dense {r.compute_precision} peak / HBM bandwidth; decode crosses it at {crossing}"),
        ("TTFT", fmt_ms(lat.ttft_ms), f"time to first token for one request, alone{ttft_band}"),
        ("ITL", fmt_ms(lat.itl_ms), f"inter-token latency at batch {lat.batch:,}; roofline bound {fmt_ms(lat.itl_ms_bound)}{itl_band}"),
        ("Tokens/s (replica)", f"{thr.output_tokens_per_s:,.0f}", f"aggregate output tokens/s; bound {thr.output_tokens_per_s_bound:,.0f}"),
        ("Tokens/s per user", f"{thr.tokens_per_s_per_user:,.1f}", "1000 / ITL"),
        ("$ per M output tokens", f"${cost:,.3f}" if cost == cost else "n/a", f"at ${p.cost.usd_per_gpu_hour:,.2f}/GPU-hour x {p.tp} GPUs"),
    ]


def regime_advice(p: Plan) -> str:
    r = p.roofline
    if r.regime == "memory-bound":
        if r.ridge_crossing_batch is None:
            return ("Decode is **memory-bound at every batch** at this context: KV reads grow as fast as FLOPs. "
                    "A smaller KV (fp8/int8 KV cache, fewer KV heads) or shorter contexts move it; batching alone cannot.")
        more = "" if r.ridge_crossing_batch <= p.memory.max_batch else " — beyond the max batch that fits, so more memory or a smaller KV would be needed first"
        return (f"Decode is **memory-bound**: batching up to {r.ridge_crossing_batch:,} raises intensity to the ridge{more}. "
                "Lower-precision weights and KV cut the bytes per step.")
    return "Decode is **compute-bound**: larger batches add latency without more throughput; faster tensor precision (fp8) or more GPUs help."


def render(p: Plan, scenario: dict[str, Any]) -> None:
    if not p.memory.fits:
        tp_hint = (f" The smallest TP that fits is **{p.memory.smallest_tp_that_fits}**."
                   if p.memory.smallest_tp_that_fits else " No TP up to 64 fits: use lower-precision weights or a larger GPU.")
        st.error(f"The weights ({p.memory.weights_gb_per_gpu:,.1f} GB per GPU) and one {scenario.get('context_len', '')}-token "
                 f"sequence do not fit in {p.memory.usable_gb_per_gpu - p.memory.reserve_gb:,.1f} GB usable per GPU.{tp_hint}")
    rows = headline_rows(p)
    for start in range(0, len(rows), 5):
        cols = st.columns(5)
        for col, (label, value, meaning) in zip(cols, rows[start:start + 5], strict=False):
            col.metric(label, value, help=meaning)
            col.caption(meaning)
    if p.speculative is not None:
        sp = p.speculative
        st.info(f"Speculative decoding: {sp.tokens_per_round:.2f} tokens per target pass, a round of "
                f"{fmt_ms(sp.round_ms)}, so an effective ITL of **{fmt_ms(sp.itl_ms)}** "
                f"({sp.output_tokens_per_s:,.0f} tokens/s at batch {p.latency.batch:,}) against {fmt_ms(p.latency.itl_ms)} without.")
    st.markdown(regime_advice(p))
    for warning in p.warnings:
        st.warning(plain(warning))  # warnings can echo a custom GPU's vendor or name
