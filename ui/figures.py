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


def serving_rows(p: Plan) -> list[tuple[str, str, str]]:
    lat, thr = p.latency, p.throughput
    cost = p.cost.usd_per_million_output_tokens
    itl_band = f" (likely {lat.itl_band_ms.low:.1f}–{lat.itl_band_ms.high:.1f})" if lat.itl_band_ms else ""
    ttft_band = f" (likely {lat.ttft_band_ms.low:.0f}–{lat.ttft_band_ms.high:.0f})" if lat.ttft_band_ms else ""
    return [
        ("TTFT", fmt_ms(lat.ttft_ms), f"time to first token for one request, alone{ttft_band}"),
        ("ITL", fmt_ms(lat.itl_ms), f"inter-token latency at batch {lat.batch:,}; roofline bound {fmt_ms(lat.itl_ms_bound)}{itl_band}"),
        ("Tokens/s (replica)", f"{thr.output_tokens_per_s:,.0f}", f"aggregate output tokens/s; bound {thr.output_tokens_per_s_bound:,.0f}"),
        ("Tokens/s per user", f"{thr.tokens_per_s_per_user:,.1f}", "1000 / ITL"),
        ("$ per M output tokens", f"${cost:,.3f}" if cost is not None and cost == cost else "n/a",
         f"at ${p.cost.usd_per_gpu_hour:,.2f}/GPU-hour x {p.tp} GPUs"),
    ]


def headline_rows(p: Plan) -> list[tuple[str, str, str]]:
    """(label, value, meaning) for every headline figure; used by the page and the comparison."""
    return memory_rows(p) + serving_rows(p)


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
    """Memory and roofline tiles always; serving tiles only for a deployment that fits."""
    _tiles(memory_rows(p))
    if not p.memory.fits:
        return
    _tiles(serving_rows(p))
    if p.speculative is not None:
        sp = p.speculative
        st.info(f"Speculative decoding: {sp.tokens_per_round:.2f} tokens per target pass, a round of "
                f"{fmt_ms(sp.round_ms)}, so an effective ITL of **{fmt_ms(sp.itl_ms)}** "
                f"({sp.output_tokens_per_s:,.0f} tokens/s at batch {p.latency.batch:,}) against {fmt_ms(p.latency.itl_ms)} without.")
    st.markdown(regime_advice(p, str(scenario.get("kv_cache", ""))))
    for warning in p.warnings:
        st.warning(plain(warning))  # warnings can echo a custom GPU's vendor or name
