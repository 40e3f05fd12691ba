"""A grouped MoE expert GEMM with a chosen row tile, in the layout production engines use for decode: the
routed (token, expert) rows sorted by expert, each expert's rows padded up to a multiple of BLOCK_M, one
program per (row block, column block). Every row block belongs to one expert and runs a whole
BLOCK_M x BLOCK_N tensor-core tile over K, whatever number of its rows are real: an expert that got 3
tokens still costs BLOCK_M rows of MMA work. tools/measure_power_serving.py --plan moe-tiles measures the
board power of a decode step with these experts at BLOCK_M = 16, 64 and 128, to tell whether the padded
tile work (not the useful FLOPs) is what a MoE decode draws for.

Written for this project (Triton, bf16 in, fp32 accumulate, bf16 out); the row layout is built on the host
from the fixed routing, as the measured decode step replays one routing from a CUDA graph.

    xs: [R, K]  the routed rows in expert order (R = tokens x top_k)
    w:  [E, N, K] the experts' weights (y = x w_e^T)
    out: [R, N]
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK_N = 64
BLOCK_K = 64


@triton.jit
def _grouped_tile_gemm(a_ptr, w_ptr, c_ptr, row_ids_ptr, block_expert_ptr, n_blocks_ptr, rows_valid, n, k,
                       stride_am, stride_we, stride_wn, stride_cm,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid = tl.program_id(0)
    n_col_blocks = tl.cdiv(n, BLOCK_N)
    pid_m = pid // n_col_blocks
    pid_n = pid % n_col_blocks
    # the grid is sized for the worst routing; blocks past this routing's padded rows leave at once
    if pid_m >= tl.load(n_blocks_ptr):
        return
    rows = tl.load(row_ids_ptr + pid_m * BLOCK_M + tl.arange(0, BLOCK_M))
    real = rows < rows_valid  # padding rows point past the end: loaded as zeros, never stored
    expert = tl.load(block_expert_ptr + pid_m).to(tl.int64)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rows.to(tl.int64)[:, None] * stride_am + ks[None, :]
    w_ptrs = w_ptr + expert * stride_we + cols.to(tl.int64)[None, :] * stride_wn + ks[:, None]
    col_ok = cols < n
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, k, BLOCK_K):
        a = tl.load(a_ptrs, mask=real[:, None] & (ks[None, :] < k - k0), other=0.0)
        b = tl.load(w_ptrs, mask=col_ok[None, :] & (ks[:, None] < k - k0), other=0.0)
        acc = tl.dot(a, b, acc)  # the whole BLOCK_M x BLOCK_N tile, padding rows included
        a_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
    c_ptrs = c_ptr + rows.to(tl.int64)[:, None] * stride_cm + cols[None, :]
    tl.store(c_ptrs, acc.to(tl.bfloat16), mask=real[:, None] & col_ok[None, :])


def padded_rows(counts: list[int], block_m: int) -> int:
    """Rows the tile kernel runs: each expert with tokens rounds its count up to a multiple of block_m."""
    return sum(-(-c // block_m) * block_m for c in counts)


class TileLayout:
    """The sorted, padded row layout of one routing (expert `e` owns `counts[e]` consecutive rows of xs)."""

    def __init__(self, counts: list[int], block_m: int, device: str = "cuda") -> None:
        self.block_m = block_m
        self.rows_valid = sum(counts)
        row_ids: list[int] = []
        block_expert: list[int] = []
        start = 0
        for e, c in enumerate(counts):
            blocks = -(-c // block_m)
            ids = list(range(start, start + c)) + [self.rows_valid] * (blocks * block_m - c)
            row_ids += ids
            block_expert += [e] * blocks
            start += c
        self.n_blocks = len(block_expert)
        # the worst routing's blocks (every expert a partial block), as an engine sizes its grid
        self.grid_blocks = -(-self.rows_valid // block_m) + min(len(counts), self.rows_valid)
        pad = self.grid_blocks * block_m - len(row_ids)
        self.row_ids = torch.tensor(row_ids + [self.rows_valid] * pad, device=device, dtype=torch.int32)
        self.block_expert = torch.tensor(block_expert + [0] * (self.grid_blocks - self.n_blocks),
                                         device=device, dtype=torch.int32)
        self.n_blocks_t = torch.tensor([self.n_blocks], device=device, dtype=torch.int32)


def num_warps(block_m: int) -> int:
    return 8 if block_m >= 128 else 4


def grouped_tile_gemm(xs: torch.Tensor, w: torch.Tensor, layout: TileLayout,
                      out: torch.Tensor | None = None) -> torch.Tensor:
    """out[r] = xs[r] @ w[expert of r]^T for every routed row r, by whole BLOCK_M-row tiles."""
    rows, k = xs.shape
    n = w.shape[1]
    assert w.shape[2] == k and xs.stride(1) == 1 and w.stride(2) == 1
    if out is None:
        out = torch.empty(rows, n, device=xs.device, dtype=torch.bfloat16)
    grid = (layout.grid_blocks * triton.cdiv(n, BLOCK_N),)
    _grouped_tile_gemm[grid](xs, w, out, layout.row_ids, layout.block_expert, layout.n_blocks_t,
                             layout.rows_valid, n, k, xs.stride(0), w.stride(0), w.stride(1), out.stride(0),
                             BLOCK_M=layout.block_m, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
                             num_warps=num_warps(layout.block_m), num_stages=3)
    return out


def check(block_m: int, tokens: int = 37, n_experts: int = 128, top_k: int = 8, n: int = 1536,
          k: int = 2048) -> float:
    """Relative error of the tile GEMM against a float64 per-expert reference on a fresh random routing,
    the output poisoned with NaN first (an unwritten row fails)."""
    choice = torch.rand(tokens, n_experts, device="cuda").topk(top_k, dim=-1).indices.reshape(-1)
    counts = torch.bincount(choice, minlength=n_experts).tolist()
    xs = torch.randn(tokens * top_k, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n_experts, n, k, device="cuda", dtype=torch.bfloat16) * 0.02
    out = torch.full((tokens * top_k, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    grouped_tile_gemm(xs, w, TileLayout(counts, block_m), out)
    torch.cuda.synchronize()
    ref = torch.empty(tokens * top_k, n, device="cuda", dtype=torch.float64)
    start = 0
    for e, c in enumerate(counts):
        ref[start:start + c] = xs[start:start + c].double() @ w[e].double().T
        start += c
    if torch.isnan(out).any():
        return float("inf")
    return float((out.double() - ref).norm() / ref.norm())
