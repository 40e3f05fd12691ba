"""Measured per-kernel tables (issue 30, item 2): one GPU x engine's GEMM, attention, MLA, MoE and
all-reduce latencies, interpolated by shape.

The tables are compact copies of NVIDIA AIConfigurator's per-kernel measurements (Apache-2.0), written by
tools/import_kernel_tables.py with their provenance in planner/data/kernel_tables/manifest.json; this
module reads only those files. Every latency is milliseconds per kernel call on one GPU.

Interpolation is linear in log latency over log-spaced axes (kernel time is close to a power law between
grid points); outside the measured range a shape is scaled from the nearest edge by the work it adds
(tokens, cached length, heads or bytes: linear), never extrapolated below the smallest measured call;
a grid cell the source left out past its last measured neighbour is extended the same way. A call takes at
most what any larger measured call takes (a smaller call can run padded to it). A shape the table has no
row for (another hidden size, expert count, head count) is scaled from the nearest measured shape by the
ratio of the bytes and FLOPs the two move, so a model nobody measured is predicted from its own layer
shapes; decode attention at few KV heads per GPU also takes no longer than its bytes at the rate the table
measured for the same sequences over more heads (the engines' split-KV decode fills the GPU either way).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

TABLES_DIR = Path(__file__).parent.parent / "data" / "kernel_tables"
# codes the importer stores dtypes by (tools/import_kernel_tables.py)
GEMM_DTYPES = ("bfloat16", "fp8", "fp8_block", "nvfp4")
MOE_DTYPES = ("bfloat16", "fp8", "fp8_block", "nvfp4", "w4a16_mxfp4", "int4_wo", "w4a8_mxfp4_mxfp8")


@lru_cache(maxsize=1)
def manifest() -> dict[str, Any]:
    path = TABLES_DIR / "manifest.json"
    return json.loads(path.read_text()) if path.exists() else {"tables": {}}


@lru_cache(maxsize=1)
def _terms() -> dict[str, Any]:
    path = TABLES_DIR / "kernel_terms.json"
    return json.loads(path.read_text()) if path.exists() else {"engines": {}}


def kernel_terms(engine: str, generation: str | None) -> dict[str, Any] | None:
    """The kernel-table predictor's fitted terms on an engine x GPU generation (per-step host cost, frontend
    cost, the runs they were fitted on and the leave-one-family-out band; tools/validate_predictors.py)."""
    return None if generation is None else _terms()["engines"].get(engine, {}).get(generation)


def has_tables(gpu_id: str, engine: str) -> bool:
    return f"{gpu_id}/{engine}" in manifest()["tables"]


def provenance(gpu_id: str, engine: str) -> dict[str, Any] | None:
    entry = manifest()["tables"].get(f"{gpu_id}/{engine}")
    if entry is None:
        return None
    m = manifest()
    return {"source_repo": m["source_repo"], "commit": m["commit"], "license": m["license"],
            "engine_version": entry["engine_version"], "source_gpu": entry["source_gpu"]}


def _log(x: npt.ArrayLike) -> npt.NDArray[np.float64]:
    return np.log(np.maximum(np.asarray(x, dtype=float), 1e-12))


@dataclass(frozen=True)
class Curve:
    """log latency on a grid of one or two log axes (dense; a missing cell filled from its neighbours)."""

    axes: tuple[np.ndarray, ...]  # log axis values, ascending
    log_ms: np.ndarray

    @cached_property
    def _widths(self) -> tuple[np.ndarray, ...]:
        """Each axis's cell widths, axis[i + 1] - axis[i] (as _interpolate subtracted them a call)."""
        return tuple(axis[1:] - axis[:-1] for axis in self.axes)

    def __call__(self, *points: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Latency at the points; beyond an axis's last value, linear in that axis (work grows with it)."""
        if len(self.axes) <= 2 and all(len(axis) > 1 for axis in self.axes):
            return self._interpolate(points)
        pts = [_log(p) for p in points]
        shape = np.broadcast_shapes(*(p.shape for p in pts))
        pts = [np.broadcast_to(p, shape) for p in pts]
        scale = np.zeros(shape)
        clipped = []
        for axis, p in zip(self.axes, pts, strict=True):
            if len(axis) == 1:
                clipped.append(np.full(shape, axis[0]))
                continue
            scale = scale + np.maximum(p - axis[-1], 0.0)
            clipped.append(np.clip(p, axis[0], axis[-1]))
        return np.exp(_multilinear(self.axes, self.log_ms, clipped) + scale)

    def _interpolate(self, points: tuple[npt.ArrayLike, ...]) -> npt.NDArray[np.float64]:
        """__call__ on a grid with no single-valued axis, in fewer array passes: the same products and sums
        in the same order (a sum that starts at 0 or a weight that starts at 1 leaves the first term as it
        is), so the same latencies (tests/test_kernel_tables.py)."""
        pts = [_log(p) for p in points]
        if len(pts) > 1:
            shape = np.broadcast_shapes(*(p.shape for p in pts))
            pts = [np.broadcast_to(p, shape) for p in pts]
        scale: npt.NDArray[np.float64] | None = None
        cell, frac = [], []
        for axis, p in zip(self.axes, pts, strict=True):
            over = np.maximum(p - axis[-1], 0.0)
            scale = over if scale is None else scale + over
            inside = np.minimum(np.maximum(p, axis[0]), axis[-1])  # np.clip's figures
            i = np.minimum(np.maximum(np.searchsorted(axis, inside, side="right") - 1, 0), len(axis) - 2)
            cell.append(i)
            frac.append((inside - axis[i]) / self._widths[len(cell) - 1][i])
        v = self.log_ms
        if len(pts) == 1:
            (i,), (f,) = cell, frac
            out = (1.0 - f) * v[i] + f * v[i + 1]
        else:  # each weight and corner taken once (the same products, so the same bits)
            (i, j), (f, g) = cell, frac
            i1, j1, f0, g0 = i + 1, j + 1, 1.0 - f, 1.0 - g
            out = f0 * g0 * v[i, j] + f * g0 * v[i1, j] + f0 * g * v[i, j1] + f * g * v[i1, j1]
        assert scale is not None
        return np.exp(out + scale)


def _multilinear(axes: tuple[np.ndarray, ...], values: np.ndarray, pts: list[np.ndarray]) -> np.ndarray:
    idx, frac = [], []
    for axis, p in zip(axes, pts, strict=True):
        if len(axis) == 1:
            idx.append(np.zeros(p.shape, dtype=int))
            frac.append(np.zeros(p.shape))
            continue
        i = np.clip(np.searchsorted(axis, p, side="right") - 1, 0, len(axis) - 2)
        idx.append(i)
        frac.append((p - axis[i]) / (axis[i + 1] - axis[i]))
    out = np.zeros(pts[0].shape)
    for corner in range(2 ** len(axes)):
        w = np.ones(pts[0].shape)
        at = []
        for j in range(len(axes)):
            bit = (corner >> j) & 1
            if len(axes[j]) == 1:
                if bit:
                    w = w * 0.0
                at.append(idx[j])
                continue
            w = w * (frac[j] if bit else 1.0 - frac[j])
            at.append(idx[j] + bit)
        out = out + w * values[tuple(at)]
    return out


def _dense(axis_values: list[np.ndarray], latency: np.ndarray, level: bool = True) -> Curve:
    """A dense grid over the unique values of each axis, missing cells filled along the first axis; `level`:
    a call's time never exceeds a larger measured call's (below)."""
    uniq = [np.unique(v) for v in axis_values]
    grid = np.full(tuple(len(u) for u in uniq), np.nan)
    where = tuple(np.searchsorted(u, v) for u, v in zip(uniq, axis_values, strict=True))
    grid[where] = _log(latency)
    # fill gaps: along each axis, between measured neighbours (in index); past the last measured value the
    # call's work grows with the axis, linearly as Curve extrapolates (the tables leave the largest calls
    # out: vLLM's H200 decode attention at 8 KV heads has no batch 64 past 2k tokens, and a flat fill read
    # batch 64 x 5k tokens at 9.9 TB/s)
    for ax in range(grid.ndim):
        moved = np.moveaxis(grid, ax, -1)
        flat = moved.reshape(-1, moved.shape[-1])
        axis_log = _log(uniq[ax])
        finite = np.isfinite(flat)
        counts = finite.sum(axis=1)
        # only rows with some cells measured and some missing change (each row on its own, as before)
        for r in np.flatnonzero((counts > 0) & (counts < flat.shape[1])):
            row, ok = flat[r], finite[r]
            measured, missing = np.flatnonzero(ok), np.flatnonzero(~ok)
            row[missing] = np.interp(missing, measured, row[ok])
            beyond = missing[missing > measured[-1]]
            row[beyond] = row[measured[-1]] + axis_log[beyond] - axis_log[measured[-1]]
        grid = np.moveaxis(flat.reshape(moved.shape), -1, ax)
    grid = np.where(np.isfinite(grid), grid, np.nanmax(grid) if np.isfinite(grid).any() else 0.0)
    # every axis adds work (tokens, length, width, bytes) and a smaller call can always run padded to a larger
    # measured one, so a call takes at most what any larger measured call takes: the minimum from each point
    # up. (Kernel switches make the measured rows non-monotonic: TensorRT-LLM's B200 block-fp8 GEMM of
    # 1536 x 7168 takes 23-26 us below 32 rows and 12 us at 32.) Levelling UP to the running maximum instead
    # carried such a small-m path's time onto every larger m.
    for ax in range(grid.ndim if level else 0):
        grid = np.flip(np.minimum.accumulate(np.flip(grid, axis=ax), axis=ax), axis=ax)
    return Curve(tuple(_log(u) for u in uniq), grid)


class KernelTables:
    """One GPU x engine's tables."""

    def __init__(self, gpu_id: str, engine: str) -> None:
        entry = manifest()["tables"][f"{gpu_id}/{engine}"]
        with np.load(TABLES_DIR / entry["file"]) as data:
            self._raw = {k: data[k] for k in data.files}
        self.gpu_id, self.engine = gpu_id, engine
        self._curves: dict[tuple, Curve] = {}
        self._near: dict[tuple, dict[str, float]] = {}
        self._lines: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
        self._wider: dict[tuple, list[dict[str, float]]] = {}
        self._tables: dict[str, dict[str, np.ndarray]] = {}
        self._dtypes: dict[str, frozenset[str]] = {}
        self._moe_shapes: dict[tuple, bool] = {}  # the GEMM and MoE precisions the tables hold
        # a call's nearest measured shape and its curve, by the call's own arguments (the keys above sort
        # the shape's columns: thousands of calls a sizing request)
        self._shapes: dict[tuple, tuple[dict[str, float], Curve]] = {}

    def _table(self, name: str) -> dict[str, np.ndarray]:
        if name not in self._tables:
            prefix = name + "."
            self._tables[name] = {k[len(prefix):]: v for k, v in self._raw.items() if k.startswith(prefix)}
        return self._tables[name]

    def has(self, name: str) -> bool:
        return f"{name}.latency_ms" in self._raw

    # -- GEMM ---------------------------------------------------------------------------------------
    def gemm_dtypes(self) -> frozenset[str]:
        # kept: a decode step or prefill asks for every layer's precision (np.unique of the whole table)
        if "gemm" not in self._dtypes:
            self._dtypes["gemm"] = frozenset(GEMM_DTYPES[c] for c in np.unique(self._raw["gemm.gemm_dtype"]))
        return self._dtypes["gemm"]

    def _gemm_curve(self, dtype: str) -> Curve:
        key = ("gemm", dtype)
        if key not in self._curves:
            t = self._table("gemm")
            sel = t["gemm_dtype"] == GEMM_DTYPES.index(dtype)
            self._curves[key] = _dense([t["m"][sel], t["n"][sel], t["k"][sel]], t["latency_ms"][sel])
        return self._curves[key]

    def _gemm_line(self, dtype: str, n: float, k: float) -> tuple[np.ndarray, np.ndarray]:
        """The GEMM of one weight matrix over its tokens: log latency on the table's log m axis."""
        if dtype == "bfloat16":
            curve = self._gemm_curve(dtype)
            ms_axis = curve.axes[0]
            return ms_axis, _log(curve(np.exp(ms_axis), n, k))
        bf16_axis, bf16 = self._gemm_line("bfloat16", n, k)
        # a quantized GEMM reads half (fp8) or a quarter (fp4) of the bf16 GEMM's weight bytes at twice or
        # four times its tensor-core rate: where the table's quantized call is slower than the bf16 call of
        # the same shape, it timed the collector's activation quantization (a separate kernel per call there;
        # fused into the preceding norm or activation in the engines' serving graphs) and its small-m kernel
        # path, so the bf16 call bounds it. (On our H100, CUDA-graph replays: fp8 with its cast 0.52-1.15 x
        # bf16, data/measurements/h100_small_gemm_graph_2026-11-27.json.)
        if dtype != "fp8_static":
            curve = self._gemm_curve(dtype)
            ms_axis = curve.axes[0]
            capped = np.minimum(_log(curve(np.exp(ms_axis), n, k)), np.interp(ms_axis, bf16_axis, bf16))
            return ms_axis, capped
        # per-tensor fp8 with a static input scale (the checkpoint's): the measured dynamic-scale GEMM less
        # the scale's computation, as AIConfigurator's own query does (operators/gemm.rs, fp8_static); never
        # under half the bf16 GEMM of the shape (half its weight bytes, twice its tensor-core rate)
        ms_axis = self._gemm_curve("fp8").axes[0]
        m = np.exp(ms_axis)
        ms = self._gemm_curve("fp8")(m, n, k)
        if self.has("compute_scale"):
            t = self._table("compute_scale")
            if ("compute_scale",) not in self._curves:
                # a difference of two timings (dynamic minus static quantization), zero where they tie
                self._curves[("compute_scale",)] = _dense([t["m"], t["k"]], np.maximum(t["latency_ms"], 1e-6),
                                                          level=False)
            ms = ms - self._curves[("compute_scale",)](m, k)
        bf16_ms = np.exp(np.interp(ms_axis, bf16_axis, bf16))
        return ms_axis, _log(np.clip(ms, 0.5 * bf16_ms, bf16_ms))

    def gemm_ms(self, dtype: str, m: npt.ArrayLike | GemmRows, n: float, k: float) -> npt.NDArray[np.float64]:
        """(m x k) @ (k x n) in `dtype` ("fp8_static": per-tensor fp8 with the checkpoint's input scale); m
        may be an array (tokens), m = 0 costs nothing; or gemm_rows(tokens), for a layer's many GEMMs."""
        line_key = (dtype, float(n), float(k))
        if line_key not in self._lines:
            self._lines[line_key] = self._gemm_line(dtype, n, k)
        axis, values = self._lines[line_key]
        rows = m if isinstance(m, GemmRows) else gemm_rows(m)
        ms = np.exp(np.interp(rows.log_m, axis, values) + np.maximum(rows.log_m - axis[-1], 0.0))
        return np.where(rows.positive, ms, 0.0)

    # -- attention ----------------------------------------------------------------------------------
    def _nearest(self, name: str, columns: dict[str, float], exact: tuple[str, ...] = ()) -> dict[str, float]:
        """The measured shape nearest (log distance) to `columns`; `exact` columns must match when any row
        does."""
        key = (name, tuple(sorted(columns.items())), exact)
        if key in self._near:
            return self._near[key]
        t = self._table(name)
        mask = np.ones(len(t["latency_ms"]), dtype=bool)
        for c in exact:
            match = mask & (t[c] == columns[c])
            if match.any():
                mask &= match
        dist = np.zeros(mask.sum())
        for c, v in columns.items():
            dist = dist + np.abs(_log(t[c][mask]) - _log(v))
        i = int(np.argmin(dist))
        self._near[key] = {c: float(t[c][mask][i]) for c in columns}
        return self._near[key]

    def _curve(self, name: str, fixed: dict[str, float], free: tuple[str, ...]) -> Curve:
        key = (name, tuple(sorted(fixed.items())), free)
        if key not in self._curves:
            t = self._table(name)
            sel = np.ones(len(t["latency_ms"]), dtype=bool)
            for c, v in fixed.items():
                sel &= t[c] == v
            self._curves[key] = _dense([t[c][sel] for c in free], t["latency_ms"][sel])
        return self._curves[key]

    def generation_attention_ms(self, batch: npt.ArrayLike, kv_len: npt.ArrayLike, heads: int, kv_heads: int,
                                head_dim: int, kv_fp8: bool) -> npt.NDArray[np.float64]:
        """One layer's decode attention (GQA/MHA) over `batch` sequences of `kv_len` cached tokens, one
        GPU's heads. A shape without rows: the nearest measured one, scaled by the KV bytes it reads."""
        shape_key = ("gen_attn", kv_fp8, head_dim, heads, kv_heads)
        if shape_key not in self._shapes:  # kept: every decode step of a layout asks for the same
            want = {"kv_fp8": float(kv_fp8), "head_dim": float(head_dim), "num_heads": float(heads),
                    "num_key_value_heads": float(kv_heads)}
            found = self._nearest("gen_attn", want, exact=("kv_fp8", "head_dim"))
            self._shapes[shape_key] = found, self._attention_curve(found, kv_heads, head_dim)
        curve = self._shapes[shape_key][1]
        b = np.asarray(batch, dtype=float)
        return np.where(b > 0, curve(np.maximum(b, 1.0), np.maximum(kv_len, 1.0)), 0.0)

    def _attention_curve(self, near: dict[str, float], kv_heads: int, head_dim: int) -> Curve:
        """Decode attention of `kv_heads` x `head_dim` per GPU (ms) on the grid of the measured shape `near`,
        scaled by the KV bytes it reads.

        Decode attention reads each sequence's KV once; the engines split a long sequence's KV over thread
        blocks (flash-decoding: vLLM's FlashAttention num_splits in its CUDA graphs, TensorRT-LLM's XQA
        multi-block mode, FlashInfer's split-KV), so at few KV heads per GPU the call still fills the GPU and
        takes the bytes it reads at the rate the table measured with more heads (same sequences, the same GQA
        group): vLLM's H200 1-KV-head calls read 0.7 TB/s at batch 16 x 4k tokens where its 8-KV-head calls
        read 3.6 TB/s, and the engine's TP8 Llama-3.3-70B TPOT does not grow from 1.5k to 5k cached tokens at
        16 sequences (9.72 vs 9.71 ms). Never below the call's own floor (its time at the shortest measured
        length: launch, KV write, the split's combine)."""
        key = ("attention", tuple(sorted(near.items())), kv_heads, head_dim)
        if key not in self._curves:
            curve = self._curve("gen_attn", near, ("batch_size", "kv_len"))
            batch, length = np.meshgrid(*(np.exp(a) for a in curve.axes), indexing="ij")
            bytes_ratio = kv_heads * head_dim / (near["num_key_value_heads"] * near["head_dim"])
            ms = curve(batch, length) * bytes_ratio
            wider = self._wider_attention(near)
            if wider:
                floor = ms[:, :1]
                spread = np.min([self._curve("gen_attn", w, ("batch_size", "kv_len"))(batch, length)
                                 * (kv_heads * head_dim / (w["num_key_value_heads"] * w["head_dim"]))
                                 for w in wider], axis=0)
                ms = np.minimum(ms, np.maximum(spread, floor))
            self._curves[key] = Curve(curve.axes, _log(ms))
        return self._curves[key]

    def _wider_attention(self, near: dict[str, float]) -> list[dict[str, float]]:
        """The measured decode-attention shapes with more KV heads than `near` (its KV precision, head size
        and GQA group)."""
        key = ("wider",) + tuple(sorted(near.items()))
        if key in self._wider:
            return self._wider[key]
        t = self._table("gen_attn")
        group = near["num_heads"] / near["num_key_value_heads"]
        sel = ((t["kv_fp8"] == near["kv_fp8"]) & (t["head_dim"] == near["head_dim"])
               & (t["num_key_value_heads"] > near["num_key_value_heads"])
               & (t["num_heads"] == group * t["num_key_value_heads"]))
        shapes = {(float(h), float(k)) for h, k in zip(t["num_heads"][sel], t["num_key_value_heads"][sel],
                                                       strict=True)}
        self._wider[key] = [{"kv_fp8": near["kv_fp8"], "head_dim": near["head_dim"], "num_heads": h,
                             "num_key_value_heads": k} for h, k in sorted(shapes)]
        return self._wider[key]

    def context_attention_ms(self, prompt_len: npt.ArrayLike, heads: int, kv_heads: int, head_dim: int,
                             kv_fp8: bool) -> npt.NDArray[np.float64]:
        """One layer's causal prefill attention of one prompt; beyond the longest measured prompt the time
        grows with its square (causal pairs). None of the table: the caller falls back."""
        want = {"kv_fp8": float(kv_fp8), "head_dim": float(head_dim), "num_heads": float(heads),
                "num_key_value_heads": float(kv_heads)}
        near = self._nearest("ctx_attn", want, exact=("kv_fp8", "head_dim"))
        curve = self._curve("ctx_attn", near, ("isl",))
        scale = (heads * head_dim) / (near["num_heads"] * near["head_dim"])
        s = np.maximum(np.asarray(prompt_len, dtype=float), 1.0)
        top = float(np.exp(curve.axes[0][-1]))
        return curve(np.minimum(s, top)) * scale * np.maximum(s / top, 1.0) ** 2

    def generation_mla_ms(self, batch: npt.ArrayLike, kv_len: npt.ArrayLike, heads: int,
                          kv_fp8: bool) -> npt.NDArray[np.float64]:
        near = self._nearest("gen_mla", {"kv_fp8": float(kv_fp8), "num_heads": float(heads)},
                             exact=("kv_fp8",))
        curve = self._curve("gen_mla", near, ("batch_size", "kv_len"))
        b = np.asarray(batch, dtype=float)
        scale = max(heads / near["num_heads"], 1.0) if heads > near["num_heads"] else 1.0
        return np.where(b > 0, curve(np.maximum(b, 1.0), np.maximum(kv_len, 1.0)) * scale, 0.0)

    def context_mla_ms(self, prompt_len: npt.ArrayLike, heads: int, kv_fp8: bool) -> npt.NDArray[np.float64]:
        near = self._nearest("ctx_mla", {"kv_fp8": float(kv_fp8), "num_heads": float(heads)},
                             exact=("kv_fp8",))
        curve = self._curve("ctx_mla", near, ("isl",))
        s = np.maximum(np.asarray(prompt_len, dtype=float), 1.0)
        top = float(np.exp(curve.axes[0][-1]))
        return curve(np.minimum(s, top)) * (heads / near["num_heads"]) * np.maximum(s / top, 1.0) ** 2

    # -- MoE ----------------------------------------------------------------------------------------
    def moe_dtypes(self, table: str = "moe") -> frozenset[str]:
        """The expert precisions of a MoE table: "moe", or "moe_adp" (the kernel the engine launches under
        attention data parallelism, where the import found it differs; empty where there is none)."""
        if table not in self._dtypes:
            codes = (np.unique(self._raw[f"{table}.moe_dtype"]) if self.has(table)
                     else np.zeros(0, dtype=np.int8))
            self._dtypes[table] = frozenset(MOE_DTYPES[c] for c in codes)
        return self._dtypes[table]

    def has_moe_shape(self, dtype: str, hidden: int, inter: int, top_k: int, experts: int,
                      table: str = "moe") -> bool:
        """Whether the table measured this MoE shape (any split) in `dtype`."""
        key = (dtype, hidden, inter, top_k, experts, table)  # kept: every MoE step asks, for each precision
        if key not in self._moe_shapes:
            if not self.has(table):
                self._moe_shapes[key] = False
                return False
            t = self._table(table)
            rows = ((t["moe_dtype"] == MOE_DTYPES.index(dtype)) & (t["hidden_size"] == hidden)
                    & (t["inter_size"] == inter) & (t["topk"] == top_k) & (t["num_experts"] == experts))
            self._moe_shapes[key] = bool(rows.any())
        return self._moe_shapes[key]

    def moe_ms(self, dtype: str, tokens: npt.ArrayLike, hidden: int, inter: int, top_k: int, experts: int,
               tp: int, ep: int, table: str = "moe") -> npt.NDArray[np.float64]:
        """One MoE layer's routed experts (grouped GEMMs, routing) for `tokens` tokens, on one GPU of a
        tp x ep expert split. A configuration nobody measured is scaled from the nearest measured one by the
        expert weights its tokens touch per GPU (active experts x 3 x hidden x inter / shards) and, past the
        weights, by its FLOPs (tokens x top-k x hidden x inter / shards)."""
        shape_key = ("moe", dtype, hidden, inter, top_k, experts, tp, ep, table)
        if shape_key not in self._shapes:  # kept: every MoE step of a layout asks for the same
            code = float(MOE_DTYPES.index(dtype))
            want = {"moe_dtype": code, "hidden_size": float(hidden), "inter_size": float(inter),
                    "topk": float(top_k), "num_experts": float(experts), "moe_tp_size": float(tp),
                    "moe_ep_size": float(ep)}
            # the model's own experts at the nearest measured split (tp and ep both in the distance: a table
            # may lack tp 8 x ep 1 but have tp 8 x ep 2), scaled below by the shards each holds; experts
            # nobody measured: the shape nearest in every column at once. Matching the hidden size first read
            # GLM-4.6's 160 top-8 experts of 1536 from Llama-4 Maverick's 128 top-1 experts of 8192 (scaled
            # x1.5 at 1 token, x0.43 at 100), where Qwen3-235B's 128 top-8 experts of 1536 differ only in
            # hidden size and expert count (1.25x each)
            own = self.has_moe_shape(dtype, hidden, inter, top_k, experts, table)
            found = self._nearest(table, want, exact=("moe_dtype", "hidden_size", "inter_size", "topk",
                                                      "num_experts") if own else ("moe_dtype",))
            self._shapes[shape_key] = found, self._curve(table, found, ("num_tokens",))
        near, curve = self._shapes[shape_key]
        t = np.maximum(np.asarray(tokens, dtype=float), 1.0)
        ms = curve(t)

        def per_gpu_work(h: float, i: float, k: float, e: float, shards: float) -> np.ndarray:
            active = e * (1.0 - (1.0 - k / e) ** t)  # experts some token picks
            weights = active * 3.0 * h * i / shards
            flops = t * k * 3.0 * h * i / shards
            # a grouped GEMM is weight-bound until its FLOPs pass the weights x ~300 (the GPUs' ridge)
            return np.maximum(weights, flops / 300.0)

        mine = per_gpu_work(hidden, inter, top_k, experts, tp * ep)
        theirs = per_gpu_work(near["hidden_size"], near["inter_size"], near["topk"], near["num_experts"],
                              near["moe_tp_size"] * near["moe_ep_size"])
        return np.where(np.asarray(tokens, dtype=float) > 0, ms * mine / theirs, 0.0)

    # -- all-reduce ---------------------------------------------------------------------------------
    def allreduce_ms(self, message_bytes: npt.ArrayLike, gpus: int) -> npt.NDArray[np.float64] | None:
        if not self.has("allreduce") or gpus <= 1:
            return None
        shape_key = ("allreduce", gpus)
        if shape_key not in self._shapes:
            near = self._nearest("allreduce", {"num_gpus": float(gpus)})
            self._shapes[shape_key] = near, self._curve("allreduce", {"num_gpus": near["num_gpus"]},
                                                        ("message_size",))
        curve = self._shapes[shape_key][1]
        return curve(np.maximum(np.asarray(message_bytes, dtype=float), 1.0))


class GemmRows(NamedTuple):
    """A GEMM's rows (tokens) as gemm_ms reads them: log of max(m, 1), and where m > 0."""

    log_m: np.ndarray
    positive: np.ndarray


def gemm_rows(m: npt.ArrayLike) -> GemmRows:
    m_arr = np.asarray(m, dtype=float)
    return GemmRows(_log(np.maximum(m_arr, 1.0)), m_arr > 0)


@lru_cache(maxsize=32)
def tables(gpu_id: str, engine: str) -> KernelTables:
    return KernelTables(gpu_id, engine)
