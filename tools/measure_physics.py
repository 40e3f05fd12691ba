#!/usr/bin/env python3
"""The GPU-physics measurement set behind Ridgeline's "graph" engine (issue 10): what a compiled step
costs on this GPU, with no serving stack.

    python3 tools/measure_physics.py --out physics.json [--subset] [--budget-s 540]
    (also: python3 tools/measure_gpu.py --physics --out physics.json)

Needs only PyTorch (Triton, which ships with it, for the context-split decode attention). Random weights
and caches, never zeros. It writes, with GPU, driver, torch, CUDA and UTC date in `meta`:
  * `bandwidth`: device-to-device copy and read-only reduction (4 GiB);
  * `gemm`: weight matrices (N x K) of real models times M tokens, M = 1..16384, in bf16, fp8
    (torch._scaled_mm, per-tensor scales) and int4 weight-only (tinygemm, group 128) where the GPU
    runs them; weights rotate over copies larger than L2 so each product streams its weights;
  * `decode`: whole decode steps (norms, QKV, KV append, attention, O, MLP or grouped MoE experts,
    final norm, LM head, greedy argmax) of many shapes, d_model 2048-16384, GQA 1-16, head_dim
    64-256, bf16/fp8/int4 weights, bf16/fp8 KV, batch 1-512, context 512-32k, replayed from one
    CUDA graph. Attention per (shape, batch, context): the fastest of a context-split Triton kernel
    (flash-decoding style: the cached context is cut into chunks that run on all SMs, then merged by
    log-sum-exp), PyTorch SDPA, and batched matmuls, as engines pick a kernel per shape; every
    candidate's time is kept. Only `layers_timed` of the model's layers are built (memory); the
    step is layers_ms x n_layers / layers_timed + head_ms, where `scaled` says so. A full 32-layer
    Llama-3.1-8B checks that scaling;
  * `prefill`: one prompt of 512-32k tokens through the same layers (flash attention via SDPA,
    causal, native GQA), replayed from a CUDA graph, scaled the same way.
Tensor-parallel ranks are emulated by building one rank's slice (heads, d_ff and vocab / tp); the
all-reduces are not in these numbers (tools/measure_allreduce.py measures them).
Rotary embeddings are not applied (one elementwise kernel per layer, well under 1% of a step).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import subprocess
import sys
import time
import traceback

import torch
import torch.nn.functional as F

# python3 tools/measure_physics.py has tools/ on the path; python -m tools.measure_physics the repository root
try:
    from gpu_timing import graph_median_ms as graph_ms
    from gpu_timing import log, measure_bandwidth, time_cuda
except ImportError:
    from tools.gpu_timing import graph_median_ms as graph_ms
    from tools.gpu_timing import log, measure_bandwidth, time_cuda

DEV = "cuda"
BF16 = torch.bfloat16
FP8 = getattr(torch, "float8_e4m3fn", None)
L2_ROTATE_BYTES = 256 << 20

try:
    import triton
    import triton.language as tl
except Exception:  # noqa: BLE001 - the split kernel is optional
    triton = None


# ---------------------------------------------------------------------------------------------
# weights in three precisions


class Linear:
    """y = x W^T for a weight of N x K in bf16, fp8 (per-tensor scale) or int4 weight-only (group 128)."""

    def __init__(self, n, k, precision):
        self.n, self.k, self.precision = n, k, precision
        if precision == "int4":
            q = torch.randint(0, 16, (n, k), dtype=torch.int32, device=DEV)
            packed_u8 = ((q[:, ::2] << 4) | q[:, 1::2]).to(torch.uint8)
            self.w = torch._convert_weight_to_int4pack(packed_u8, 8)
            self.sz = (torch.rand(k // 128, n, 2, device=DEV, dtype=BF16) * 0.01).contiguous()
            self.bytes = n * k // 2 + self.sz.numel() * 2
        else:
            w = torch.randn(n, k, device=DEV, dtype=BF16) * 0.02
            self.w = w.to(FP8) if precision == "fp8" else w
            self.bytes = n * k * (1 if precision == "fp8" else 2)
            self.one = torch.ones((), device=DEV, dtype=torch.float32)

    def __call__(self, x):
        if self.precision == "int4":
            return torch._weight_int4pack_mm(x, self.w, 128, self.sz)
        if self.precision == "fp8":
            m = x.shape[0]
            pad = (-m) % 16
            xq = x.to(FP8)
            if pad:
                xq = F.pad(xq.view(torch.uint8), (0, 0, 0, pad)).view(FP8)
            y = torch._scaled_mm(xq, self.w.t(), scale_a=self.one, scale_b=self.one, out_dtype=BF16)
            return y[:m] if pad else y
        return F.linear(x, self.w)


def precision_works(precision):
    try:
        lin = Linear(256, 256, precision)
        y = lin(torch.randn(4, 256, device=DEV, dtype=BF16))
        torch.cuda.synchronize()
        return bool(torch.isfinite(y.float()).all())
    except Exception as err:  # noqa: BLE001
        log(f"precision {precision} unavailable: {type(err).__name__}: {str(err)[:200]}")
        return False


# ---------------------------------------------------------------------------------------------
# ceilings


GEMM_SHAPES = [  # (N, K, where from)
    (3072, 2048, "llama-3.2-1b qkv"), (4096, 4096, "8b o_proj"), (6144, 4096, "8b qkv"),
    (28672, 4096, "8b gate_up"), (4096, 14336, "8b down"), (10240, 8192, "70b qkv"),
    (14336, 8192, "70b gate_up tp4"), (8192, 7168, "70b down tp4"), (2560, 16384, "405b qkv tp8"),
    (16384, 6656, "405b down tp8"), (1536, 2048, "qwen3-30b expert gate_up"),
]
GEMM_M = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)


def measure_gemm(precisions, subset=False):
    rows = []
    shapes = GEMM_SHAPES[:6] if subset else GEMM_SHAPES
    for precision in precisions:
        for n, k, label in shapes:
            try:
                first = Linear(n, k, precision)
                copies = [first] + [
                    Linear(n, k, precision)
                    for _ in range(max(0, math.ceil(L2_ROTATE_BYTES / first.bytes) - 1))
                ]
                for m in GEMM_M:
                    if precision == "int4" and m > 256:
                        continue  # tinygemm is a decode kernel; engines dequantize for prefill
                    x = torch.randn(m, k, device=DEV, dtype=BF16)
                    state = {"i": 0}

                    def fn(x=x, copies=copies, state=state):
                        state["i"] = (state["i"] + 1) % len(copies)
                        return copies[state["i"]](x)

                    ms = time_cuda(fn, warmup=3, iters=20)[0]
                    rows.append({"precision": precision, "m": m, "n": n, "k": k, "label": label, "ms": ms,
                                 "weight_bytes": first.bytes, "tflops": 2 * m * n * k / (ms * 1e-3) / 1e12,
                                 "weight_tb_s": first.bytes / (ms * 1e-3) / 1e12})
                del copies, first
            except Exception as err:  # noqa: BLE001
                log(f"gemm {precision} {n}x{k} failed: {type(err).__name__}: {str(err)[:200]}")
            torch.cuda.empty_cache()
        if precision in ("bf16", "fp8"):
            s = 8192
            a = torch.randn(s, s, device=DEV, dtype=BF16)
            lin = Linear(s, s, precision)
            ms = time_cuda(lambda lin=lin, a=a: lin(a), iters=10)[0]
            rows.append({"precision": precision, "m": s, "n": s, "k": s, "ms": ms, "square": True,
                         "tflops": 2 * s ** 3 / (ms * 1e-3) / 1e12})
    return rows


# ---------------------------------------------------------------------------------------------
# decode attention: a context-split (flash-decoding style) Triton kernel


if triton is not None:
    @triton.jit
    def _split_kv_attention(Q, K, V, O, L,  # noqa: E741
                            ctx, chunk, scale, stride_qb, stride_kb, stride_ob, stride_lb,
                            G: tl.constexpr, GP: tl.constexpr, D: tl.constexpr, BN: tl.constexpr):
        bh = tl.program_id(0)
        s = tl.program_id(1)
        g = tl.arange(0, GP)
        d = tl.arange(0, D)
        q = tl.load(Q + bh * stride_qb + g[:, None] * D + d[None, :], mask=g[:, None] < G, other=0.0)
        start = s * chunk
        end = tl.minimum(start + chunk, ctx)
        m_i = tl.full([GP], float("-inf"), tl.float32)
        l_i = tl.zeros([GP], tl.float32)
        acc = tl.zeros([GP, D], tl.float32)
        for n0 in range(start, end, BN):
            n = n0 + tl.arange(0, BN)
            valid = n < end
            k = tl.load(K + bh * stride_kb + n[:, None] * D + d[None, :], mask=valid[:, None], other=0.0)
            sc = tl.dot(q, tl.trans(k.to(tl.bfloat16))) * scale
            sc = tl.where(valid[None, :], sc, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(sc, 1))
            alpha = tl.exp(m_i - m_new)
            p = tl.exp(sc - m_new[:, None])
            l_i = l_i * alpha + tl.sum(p, 1)
            v = tl.load(V + bh * stride_kb + n[:, None] * D + d[None, :], mask=valid[:, None], other=0.0)
            acc = acc * alpha[:, None] + tl.dot(p.to(tl.bfloat16), v.to(tl.bfloat16))
            m_i = m_new
        tl.store(O + bh * stride_ob + s * GP * D + g[:, None] * D + d[None, :], acc / l_i[:, None],
                 mask=g[:, None] < G)
        tl.store(L + bh * stride_lb + s * GP + g, m_i + tl.log(l_i), mask=g < G)


N_SM = None


class SplitAttention:
    """Decode attention over a (B, Hkv, ctx, hd) cache for q (B, Hkv, G, hd): ctx cut into S chunks so
    B x Hkv x S programs cover the SMs twice over, partial results merged by log-sum-exp."""

    def __init__(self, batch, hkv, group, hd, ctx):
        self.b, self.hkv, self.g, self.hd, self.ctx = batch, hkv, group, hd, ctx
        self.gp = max(16, 1 << (group - 1).bit_length())
        self.bn = 32 if hd >= 256 else 64
        rows = batch * hkv
        want = max(1, math.ceil(2 * N_SM / rows))
        s = min(want, max(1, ctx // 256))
        self.chunk = math.ceil(math.ceil(ctx / s) / self.bn) * self.bn
        self.s = math.ceil(ctx / self.chunk)
        self.o = torch.zeros(rows, self.s, self.gp, hd, device=DEV, dtype=torch.float32)
        self.lse = torch.zeros(rows, self.s, self.gp, device=DEV, dtype=torch.float32)
        self.scale = 1.0 / math.sqrt(hd)

    def __call__(self, q, kc, vc):
        rows = self.b * self.hkv
        q = q.reshape(rows, self.g, self.hd).contiguous()
        _split_kv_attention[(rows, self.s)](
            q, kc, vc, self.o, self.lse, self.ctx, self.chunk, self.scale,
            self.g * self.hd, self.ctx * self.hd, self.s * self.gp * self.hd, self.s * self.gp,
            G=self.g, GP=self.gp, D=self.hd, BN=self.bn, num_warps=4, num_stages=2)
        if self.s == 1:
            out = self.o[:, 0, :self.g]
        else:
            lse = self.lse[:, :, :self.g]
            w = torch.exp(lse - lse.amax(dim=1, keepdim=True))
            out = (self.o[:, :, :self.g] * w.unsqueeze(-1)).sum(1) / w.sum(1).unsqueeze(-1)
        return out.to(BF16).reshape(self.b, self.hkv * self.g * self.hd)


def sdpa_attention(q, kc, vc, b, h, hd):
    out = F.scaled_dot_product_attention(q.reshape(b, h, 1, hd), kc, vc, enable_gqa=True)
    return out.reshape(b, h * hd)


def bmm_attention(q, kc, vc, b, hkv, g, hd):
    scores = torch.matmul(q.reshape(b, hkv, g, hd), kc.transpose(-1, -2)) * (1.0 / math.sqrt(hd))
    probs = torch.softmax(scores.float(), dim=-1).to(BF16)
    return torch.matmul(probs, vc).reshape(b, hkv * g * hd)


def check_split_kernel(results):
    """The Triton kernel against an fp32 reference, for each (group, head_dim, kv dtype) it will run."""
    ok = True
    for g, hd, kv_dtype, ctx in (
        (1, 128, BF16, 1000), (4, 64, BF16, 3000), (8, 128, BF16, 5000), (16, 128, BF16, 700),
        (2, 256, BF16, 2500), (4, 128, FP8, 4000),
    ):
        b, hkv = 2, 2
        q = torch.randn(b, hkv, g, hd, device=DEV, dtype=BF16)
        k = torch.randn(b, hkv, ctx, hd, device=DEV, dtype=BF16)
        v = torch.randn(b, hkv, ctx, hd, device=DEV, dtype=BF16)
        kq, vq = (k.to(kv_dtype), v.to(kv_dtype)) if kv_dtype is not BF16 else (k, v)
        attn = SplitAttention(b, hkv, g, hd, ctx)
        out = attn(q, kq, vq).float().reshape(b, hkv, g, hd)
        kr, vr = kq.float(), vq.float()
        ref = torch.softmax(q.float() @ kr.transpose(-1, -2) / math.sqrt(hd), dim=-1) @ vr
        err = float((out - ref).norm() / ref.norm())
        results.append({"group": g, "head_dim": hd, "kv": str(kv_dtype), "ctx": ctx, "splits": attn.s,
                        "rel_error": err})
        log(f"split kernel g={g} hd={hd} kv={kv_dtype} splits={attn.s}: rel error {err:.2e}")
        ok = ok and err < 2e-2 and math.isfinite(err)
    return ok


# ---------------------------------------------------------------------------------------------
# one tensor-parallel rank of a transformer


class RankModel:
    def __init__(self, spec, tp, precision, layers_timed):
        self.spec, self.tp, self.precision = spec, tp, precision
        d, h, hkv = spec["d_model"], spec["n_heads"], spec["n_kv_heads"]
        self.d = d
        self.hd = spec.get("head_dim") or d // h
        self.h = h // tp
        self.hkv = max(1, hkv // tp)
        self.g = self.h // self.hkv
        self.q_dim, self.kv_dim = self.h * self.hd, self.hkv * self.hd
        self.moe = spec.get("moe")
        self.d_ff = (self.moe["d_ff_expert"] if self.moe else spec["d_ff"]) // tp
        self.layers_timed = layers_timed
        self.layers = []
        for _ in range(layers_timed):
            layer = {
                "qkv": Linear(self.q_dim + 2 * self.kv_dim, d, precision),
                "o": Linear(d, self.q_dim, precision), "norm1": torch.rand(d, device=DEV, dtype=BF16) + 0.5,
                "norm2": torch.rand(d, device=DEV, dtype=BF16) + 0.5,
            }
            if self.moe:
                e = self.moe["n_experts"]
                layer["router"] = Linear(e, d, "bf16")
                layer["w13"] = torch.randn(e, 2 * self.d_ff, d, device=DEV, dtype=BF16) * 0.02
                layer["w2"] = torch.randn(e, d, self.d_ff, device=DEV, dtype=BF16) * 0.02
            else:
                layer["gate_up"] = Linear(2 * self.d_ff, d, precision)
                layer["down"] = Linear(d, self.d_ff, precision)
            self.layers.append(layer)
        vocab = spec["vocab_size"] // tp
        self.lm_head = (
            torch.randn(vocab, d, device=DEV, dtype=BF16) * 0.02
        )  # bf16 in quantized checkpoints too
        self.final_norm = torch.rand(d, device=DEV, dtype=BF16) + 0.5
        self.grouped = None
        self.expert_gemm = None  # a callable (xs, layer, plan) -> y replacing the experts' GEMMs
        self.last_moe_plan = None

    def _norm(self, x, w):
        return F.rms_norm(x, (x.shape[-1],), w, 1e-5)

    # MoE: a fixed random top-k routing (the router GEMM runs; its
    # choice is drawn once so the graph is static)
    def moe_plan(self, tokens):
        e, k = self.moe["n_experts"], self.moe["top_k"]
        choice = torch.rand(tokens, e, device=DEV).topk(k, dim=-1).indices.reshape(-1)
        order = torch.argsort(choice, stable=True)
        token_of = (order // k).to(torch.int64)
        counts = torch.bincount(choice, minlength=e)
        offs = torch.cumsum(counts, 0).to(torch.int32)
        weight = torch.rand(tokens * k, 1, device=DEV, dtype=BF16)
        return {"token_of": token_of, "offs": offs, "counts": counts.tolist(), "weight": weight}

    def moe_mlp(self, h, layer, plan):
        layer["router"](h)  # routing logits (cost only)
        xs = h.index_select(0, plan["token_of"])
        if self.expert_gemm is not None:
            y = self.expert_gemm(xs, layer, plan)
            out = torch.zeros_like(h)
            out.index_add_(0, plan["token_of"], y * plan["weight"])
            return out
        if self.grouped is None:
            try:
                torch._grouped_mm(
                    torch.randn(16, self.d, device=DEV, dtype=BF16), layer["w13"][:1].transpose(-2, -1),
                    offs=torch.tensor([16], device=DEV, dtype=torch.int32),
                )
                self.grouped = True
            except Exception as err:  # noqa: BLE001
                log(f"torch._grouped_mm unavailable ({type(err).__name__}); experts run one GEMM each")
                self.grouped = False
        if self.grouped:
            gu = torch._grouped_mm(xs, layer["w13"].transpose(-2, -1), offs=plan["offs"])
            act = F.silu(gu[:, :self.d_ff]) * gu[:, self.d_ff:]
            y = torch._grouped_mm(act, layer["w2"].transpose(-2, -1), offs=plan["offs"])
        else:
            outs, start = [], 0
            for e, c in enumerate(plan["counts"]):
                if c:
                    gu = F.linear(xs[start:start + c], layer["w13"][e])
                    outs.append(F.linear(F.silu(gu[:, :self.d_ff]) * gu[:, self.d_ff:], layer["w2"][e]))
                start += c
            y = torch.cat(outs)
        out = torch.zeros_like(h)
        out.index_add_(0, plan["token_of"], y * plan["weight"])
        return out

    def mlp(self, h, layer, plan):
        if self.moe:
            return self.moe_mlp(h, layer, plan)
        gu = layer["gate_up"](h)
        return layer["down"](F.silu(gu[:, :self.d_ff]) * gu[:, self.d_ff:])

    def head(self, x):
        return torch.argmax(F.linear(self._norm(x, self.final_norm), self.lm_head), dim=-1)

    def decode_layers(self, batch, ctx, caches, attention, n_layers=None):
        x0 = torch.randn(batch, self.d, device=DEV, dtype=BF16)
        plan = self.moe_plan(batch) if self.moe else None
        self.last_moe_plan = plan
        q_dim, kv_dim = self.q_dim, self.kv_dim
        layers = self.layers[: n_layers or len(self.layers)]

        def run():
            x = x0
            for i, layer in enumerate(layers):
                kc, vc = caches[i]
                qkv = layer["qkv"](self._norm(x, layer["norm1"]))
                kc[:, :, ctx - 1].copy_(qkv[:, q_dim:q_dim + kv_dim].view(batch, self.hkv, self.hd))
                vc[:, :, ctx - 1].copy_(qkv[:, q_dim + kv_dim:].view(batch, self.hkv, self.hd))
                a = attention(qkv[:, :q_dim], kc, vc)
                x = x + layer["o"](a)
                x = x + self.mlp(self._norm(x, layer["norm2"]), layer, plan)
            return x

        return run, x0

    def prefill_layers(self, s, n_layers):
        x0 = torch.randn(s, self.d, device=DEV, dtype=BF16)
        plan = self.moe_plan(s) if self.moe else None
        q_dim, kv_dim, h, hkv, hd = self.q_dim, self.kv_dim, self.h, self.hkv, self.hd
        caches = [
            (torch.empty(s, kv_dim, device=DEV, dtype=BF16), torch.empty(s, kv_dim, device=DEV, dtype=BF16))
            for _ in range(n_layers)
        ]

        def run():
            x = x0
            for i, layer in enumerate(self.layers[:n_layers]):
                qkv = layer["qkv"](self._norm(x, layer["norm1"]))
                caches[i][0].copy_(qkv[:, q_dim:q_dim + kv_dim])
                caches[i][1].copy_(qkv[:, q_dim + kv_dim:])
                q = qkv[:, :q_dim].view(s, h, hd).transpose(0, 1).unsqueeze(0)
                k = qkv[:, q_dim:q_dim + kv_dim].view(s, hkv, hd).transpose(0, 1).unsqueeze(0)
                v = qkv[:, q_dim + kv_dim:].view(s, hkv, hd).transpose(0, 1).unsqueeze(0)
                a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=hkv != h)
                x = x + layer["o"](a.squeeze(0).transpose(0, 1).reshape(s, q_dim))
                x = x + self.mlp(self._norm(x, layer["norm2"]), layer, plan)
            return x

        return run


def layer_weight_bytes(spec, tp, precision):
    d, h, hkv = spec["d_model"], spec["n_heads"], spec["n_kv_heads"]
    hd = spec.get("head_dim") or d // h
    per = {"bf16": 2, "fp8": 1, "int4": 0.5}[precision]
    attn = (h // tp * hd * 2 + 2 * max(1, hkv // tp) * hd) * d
    if spec.get("moe"):
        m = spec["moe"]
        return attn * per + 3 * m["n_experts"] * m["d_ff_expert"] // tp * d * 2
    return (attn + 3 * spec["d_ff"] // tp * d) * per


def run_shape(entry, kv_budget_gb, attention_ok, out_decode, out_prefill, deadline):
    name, spec, tp, precision, kv = (
        entry["name"], entry["spec"], entry["tp"], entry["precision"], entry.get("kv", "bf16"),
    )
    wbytes = layer_weight_bytes(spec, tp, precision)
    timed = entry.get("layers_timed") or max(2, min(spec["n_layers"], 8, int(16e9 // wbytes)))
    timed = min(timed, spec["n_layers"])
    log(f"== {name} tp{tp} {precision} kv {kv}: {timed}/{spec['n_layers']} layers built")
    t0 = time.time()
    model = RankModel(spec, tp, precision, timed)
    kv_dtype = FP8 if kv == "fp8" else BF16
    kv_bytes_per = 1 if kv == "fp8" else 2
    meta = {"shape": name, "model": {"name": name, **spec}, "tp_shard": tp, "precision": precision, "kv": kv,
            "n_layers": spec["n_layers"], "layers_timed": timed, "scaled": timed < spec["n_layers"],
            "kv_heads_per_gpu": model.hkv, "group": model.g, "head_dim": model.hd}
    head_cache = {}
    for batch, ctx in entry["grid"]:
        if time.time() > deadline:
            log("time budget reached: skipping the rest")
            break
        need = timed * 2 * batch * ctx * model.kv_dim * kv_bytes_per
        if need > kv_budget_gb * 1e9:
            continue
        try:
            caches = [(torch.randn(batch, model.hkv, ctx, model.hd, device=DEV, dtype=BF16).to(kv_dtype),
                       torch.randn(batch, model.hkv, ctx, model.hd, device=DEV, dtype=BF16).to(kv_dtype))
                      for _ in range(timed)]
            candidates = {}
            if attention_ok:
                split = SplitAttention(batch, model.hkv, model.g, model.hd, ctx)
                candidates["split"] = split
            if kv == "bf16":
                candidates["sdpa"] = lambda q, kc, vc, b=batch: sdpa_attention(
                    q, kc, vc, b, model.h, model.hd
                )
                candidates["bmm"] = lambda q, kc, vc, b=batch: bmm_attention(
                    q, kc, vc, b, model.hkv, model.g, model.hd
                )
            qs = [torch.randn(batch, model.q_dim, device=DEV, dtype=BF16) for _ in range(timed)]
            attn_ms = {}
            for cname, fn in candidates.items():
                try:
                    def attn_all(fn=fn, qs=qs, caches=caches):
                        for i in range(timed):
                            fn(qs[i], *caches[i])
                    attn_ms[cname] = graph_ms(attn_all, iters=10) / timed
                except Exception as err:  # noqa: BLE001
                    attn_ms[cname] = None
                    log(f"   attention {cname} failed: {type(err).__name__}: {str(err)[:120]}")
            usable = {k: v for k, v in attn_ms.items() if v is not None}
            if not usable:
                continue
            best = min(usable, key=usable.get)
            run, _ = model.decode_layers(batch, ctx, caches, candidates[best])
            layers_ms = graph_ms(run)
            if batch not in head_cache:
                xh = torch.randn(batch, model.d, device=DEV, dtype=BF16)
                head_cache[batch] = graph_ms(lambda xh=xh: model.head(xh))
            head_ms = head_cache[batch]
            ms = layers_ms * spec["n_layers"] / timed + head_ms
            out_decode.append({**meta, "batch": batch, "context": ctx, "ms": ms, "layers_ms": layers_ms,
                               "head_ms": head_ms, "attention": best, "attention_ms_per_layer": attn_ms,
                               "kv_bytes_per_layer": 2 * batch * ctx * model.kv_dim * kv_bytes_per})
            log(f"   decode b={batch:4d} ctx={ctx:6d} {ms:9.3f} ms  (attn {best}: "
                + ", ".join(f"{k} {v * 1e3:.0f}us" for k, v in usable.items()) + ")")
            caches = run = candidates = None
        except torch.cuda.OutOfMemoryError:
            log(f"   decode b={batch} ctx={ctx}: out of memory, skipped")
        except Exception as err:  # noqa: BLE001
            log(f"   decode b={batch} ctx={ctx} failed: {type(err).__name__}: {str(err)[:200]}")
        torch.cuda.empty_cache()
    if precision != "int4":
        n_pre = min(timed, entry.get("prefill_layers", 2))
        for s in entry["prompts"]:
            if time.time() > deadline:
                break
            try:
                run = model.prefill_layers(s, n_pre)
                iters = 3 if s >= 8192 else 5
                layers_ms = graph_ms(run, warmup=1, iters=iters)
                if 1 not in head_cache:
                    x1 = torch.randn(1, model.d, device=DEV, dtype=BF16)
                    head_cache[1] = graph_ms(lambda x1=x1: model.head(x1))
                ms = layers_ms * spec["n_layers"] / n_pre + head_cache[1]  # logits of the last token only
                out_prefill.append(
                    {
                        **meta,
                        "layers_timed": n_pre, "scaled": n_pre < spec["n_layers"], "prompt_len": s, "ms": ms,
                        "layers_ms": layers_ms, "head_ms": head_cache[1],
                    }
                )
                log(f"   prefill s={s:6d} {ms:9.2f} ms")
                run = None
            except torch.cuda.OutOfMemoryError:
                log(f"   prefill s={s}: out of memory, skipped")
            except Exception as err:  # noqa: BLE001
                log(f"   prefill s={s} failed: {type(err).__name__}: {str(err)[:200]}")
            torch.cuda.empty_cache()
    model = None
    torch.cuda.empty_cache()
    log(f"   ({time.time() - t0:.0f} s)")


# ---------------------------------------------------------------------------------------------
# the set


def _m(n_layers, d, h, hkv, hd, d_ff, vocab, moe=None, tied=False):
    spec = {"n_layers": n_layers, "d_model": d, "n_heads": h, "n_kv_heads": hkv, "head_dim": hd, "d_ff": d_ff,
            "vocab_size": vocab}
    if moe:
        spec["moe"] = moe
    if tied:
        spec["tied_embeddings"] = True
    return spec


MODELS = {
    "llama-3.2-1b": _m(16, 2048, 32, 8, 64, 8192, 128256, tied=True),
    "llama-3.2-3b": _m(28, 3072, 24, 8, 128, 8192, 128256, tied=True),
    "llama-3.1-8b": _m(32, 4096, 32, 8, 128, 14336, 128256),
    "qwen3-8b": _m(36, 4096, 32, 8, 128, 12288, 151936),
    "llama-2-7b": _m(32, 4096, 32, 32, 128, 11008, 32000),  # GQA 1 (MHA)
    "d4096-gqa16": _m(32, 4096, 32, 2, 128, 13696, 65024),  # GQA 16 (ChatGLM-like)
    "d3584-hd256": _m(
        42, 3584, 16, 8, 256, 14336, 256000, tied=True
    ),  # head_dim 256 (Gemma-2-9B-like, no window)
    "d8192-8layers": _m(8, 8192, 64, 8, 128, 28672, 128256),  # wide and shallow
    "llama-3.1-70b": _m(80, 8192, 64, 8, 128, 28672, 128256),
    "llama-3.1-405b": _m(126, 16384, 128, 8, 128, 53248, 128256),
    "mixtral-8x7b": _m(
        32, 4096, 32, 8, 128, 14336, 32000, moe={"n_experts": 8, "top_k": 2, "d_ff_expert": 14336}
    ),
    "qwen3-30b-a3b": _m(
        48, 2048, 32, 4, 128, 6144, 151936, moe={"n_experts": 128, "top_k": 8, "d_ff_expert": 768}
    ),
}

GRID = [
    (1, 512), (1, 4096), (1, 16384), (1, 32768), (8, 2048), (16, 8192), (32, 1024), (64, 4096), (128, 512),
    (128, 2048), (256, 1024), (512, 512),
]
SMALL_GRID = [(1, 512), (1, 16384), (16, 2048), (64, 1024), (256, 512)]
PROMPTS = [512, 1024, 2048, 4096, 8192, 16384, 32768]
SMALL_PROMPTS = [1024, 4096, 16384]


def plan_runs(precisions, subset):
    def e(name, tp=1, precision="bf16", kv="bf16", grid=GRID, prompts=PROMPTS, **kw):
        return {"name": name, "spec": MODELS[name], "tp": tp, "precision": precision, "kv": kv, "grid": grid,
                "prompts": prompts, **kw}

    if subset:  # a second GPU: enough shapes to check the transfer of every constant
        runs = [e("llama-3.1-8b"), e("d8192-8layers", grid=SMALL_GRID, prompts=SMALL_PROMPTS),
                e("llama-3.1-70b", tp=4, grid=SMALL_GRID, prompts=SMALL_PROMPTS),
                e("qwen3-30b-a3b", grid=SMALL_GRID, prompts=SMALL_PROMPTS)]
        if "fp8" in precisions:
            runs.append(e("llama-3.1-8b", precision="fp8", grid=SMALL_GRID, prompts=SMALL_PROMPTS))
        return runs
    runs = [
        e("llama-3.1-8b"), e("llama-3.1-70b", tp=4), e("d8192-8layers"), e("llama-3.2-1b"), e("llama-2-7b"),
        e("d4096-gqa16"), e("d3584-hd256"), e("llama-3.1-405b", tp=8, layers_timed=4),
        e("qwen3-30b-a3b", layers_timed=4), e("mixtral-8x7b", layers_timed=4), e("llama-3.2-3b"),
        e("qwen3-8b"), e("llama-3.1-70b", tp=2, layers_timed=4), e("llama-3.1-70b", tp=8),
        e("mixtral-8x7b", tp=2, layers_timed=4),
    ]
    if "fp8" in precisions:
        runs += [e("llama-3.1-8b", precision="fp8"),
                 e("d8192-8layers", precision="fp8"),
                 e("llama-3.1-70b", tp=2, precision="fp8", layers_timed=4),
                 e("llama-3.1-70b", tp=4, precision="fp8"),
                 e("llama-3.2-3b", precision="fp8", grid=SMALL_GRID, prompts=SMALL_PROMPTS),
                 e("llama-3.1-8b", kv="fp8", prompts=[]),
                 e("llama-3.1-70b", tp=4, kv="fp8", grid=SMALL_GRID, prompts=[])]
    if "int4" in precisions:
        runs += [e("llama-3.1-8b", precision="int4", prompts=[]),
                 e("llama-3.1-70b", tp=4, precision="int4", grid=SMALL_GRID, prompts=[])]
    # the scaling check: all 32 layers of Llama-3.1-8B in one graph
    runs.append(e("llama-3.1-8b", grid=[(1, 512), (64, 1024), (256, 512)], prompts=[2048], layers_timed=32,
                  prefill_layers=32, check="full-model"))
    return runs


def main():
    global N_SM
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="physics.json")
    ap.add_argument("--subset", action="store_true", help="a smaller set (a second GPU)")
    ap.add_argument(
        "--budget-s", type=float, default=540.0, help="stop starting new shapes after this many seconds"
    )
    ap.add_argument("--kv-gb", type=float, default=24.0)
    ap.add_argument("--skip-gemm", action="store_true")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("error: no CUDA device")
    t_start = time.time()
    deadline = t_start + args.budget_s
    torch.manual_seed(0)
    props = torch.cuda.get_device_properties(0)
    N_SM = props.multi_processor_count
    try:
        driver = subprocess.run(
            [
                "nvidia-smi", "--query-gpu=driver_version,memory.total,clocks.max.sm,power.limit",
                "--format=csv,noheader",
            ],
            capture_output=True, text=True, timeout=20,
        ).stdout.strip()
    except Exception:  # noqa: BLE001
        driver = "unknown"
    meta = {
        "gpu": props.name, "sm_count": props.multi_processor_count, "memory_bytes": props.total_memory,
        "driver_memory_maxclock_powerlimit": driver, "torch": torch.__version__, "cuda": torch.version.cuda,
        "triton": getattr(triton, "__version__", None),
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "method": __doc__.split("\n\n")[2].strip() if __doc__ else "",
    }
    log(json.dumps(meta))
    result = {"meta": meta, "attention_check": [], "bandwidth": {}, "gemm": [], "decode": [], "prefill": []}

    def save():
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)

    precisions = [p for p in ("bf16", "fp8", "int4") if precision_works(p)]
    result["meta"]["precisions"] = precisions
    attention_ok = False
    if triton is not None:
        try:
            attention_ok = check_split_kernel(result["attention_check"])
        except Exception as err:  # noqa: BLE001
            log(f"split kernel failed: {type(err).__name__}: {str(err)[:300]}")
            traceback.print_exc()
    result["meta"]["split_attention"] = attention_ok
    result["bandwidth"] = measure_bandwidth(release=False)
    log("bandwidth", result["bandwidth"])
    save()
    for entry in plan_runs(precisions, args.subset):
        if time.time() > deadline:
            log(f"time budget reached before {entry['name']} {entry['precision']}")
            result.setdefault("not_run", []).append(
                f"{entry['name']} tp{entry['tp']} {entry['precision']} kv {entry['kv']}"
            )
            continue
        before = len(result["decode"])
        try:
            run_shape(entry, args.kv_gb, attention_ok, result["decode"], result["prefill"], deadline)
        except torch.cuda.OutOfMemoryError:
            log(f"{entry['name']}: out of memory")
        except Exception as err:  # noqa: BLE001
            log(f"{entry['name']} failed: {type(err).__name__}: {str(err)[:300]}")
        if entry.get("check"):
            for row in result["decode"][before:]:
                row["check"] = entry["check"]
            for row in result["prefill"]:
                if row["layers_timed"] == 32 and row["shape"] == entry["name"]:
                    row["check"] = entry["check"]
        torch.cuda.empty_cache()
        save()
    if not args.skip_gemm and time.time() < deadline + 60:
        result["gemm"] = measure_gemm(precisions, subset=args.subset)
        for row in result["gemm"]:
            if row.get("square") or row["m"] in (1, 64, 256, 4096):
                log("gemm", row["precision"], row["m"], row["n"], row["k"], f"{row['tflops']:.1f} TFLOP/s",
                    f"{row.get('weight_tb_s') or 0:.2f} TB/s")
    save()
    log(f"wrote {args.out}: {len(result['decode'])} decode, {len(result['prefill'])} prefill, "
        f"{len(result['gemm'])} gemm rows in {time.time() - t_start:.0f} s")


if __name__ == "__main__":
    main()
