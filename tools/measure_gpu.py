#!/usr/bin/env python3
"""Measure a CUDA GPU for Ridgeline's time model and write a calibration-measurement JSON.

Runs on any CUDA machine with PyTorch (no other dependency). With random weights it measures:
  * achievable HBM bandwidth (device-to-device copy; a read-only reduction),
  * dense tensor throughput (bf16, and fp8 through torch._scaled_mm where the GPU has it),
  * decode GEMM efficiency against M (Llama-shaped weight matrices),
  * engine-class decode steps of whole Llama-shaped models (CUDA graphs, GQA attention over a
    paged-like KV cache read once per step) over a batch x context grid,
  * prefill of one prompt (flash attention through scaled_dot_product_attention).
Tensor-parallel shards are emulated by running one rank's slice of the model (heads and d_ff / tp);
the all-reduces are not in these numbers.

    python3 tools/measure_gpu.py --out measurements.json [--quick]
    python3 tools/measure_gpu.py --physics --out physics.json   # the graph engine's set (measure_physics.py)

Then `python3 tools/fit_calibration.py measurements.json` turns it into a calibration profile.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import platform
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

try:  # python3 tools/measure_gpu.py has tools/ on the path; python -m tools.measure_gpu the repository root
    from gpu_timing import log, measure_bandwidth, time_cuda, time_graph
except ImportError:
    from tools.gpu_timing import log, measure_bandwidth, time_cuda, time_graph

DEV = "cuda"
BF16 = torch.bfloat16
FP8 = getattr(torch, "float8_e4m3fn", None)

# name -> (n_layers, d_model, n_heads, n_kv_heads, head_dim, d_ff, vocab)
SHAPES = {
    "llama-3.1-8b": (32, 4096, 32, 8, 128, 14336, 128256),
    "qwen3-8b": (36, 4096, 32, 8, 128, 12288, 151936),
    "llama-3.1-70b": (80, 8192, 64, 8, 128, 28672, 128256),
}


# ---------------------------------------------------------------------------------------------
# Ceilings


def _fp8_weight(w):
    return w.to(FP8)


def linear_fn(x, w, precision, out=None):
    if precision == "fp8":
        m = x.shape[0]
        pad = (-m) % 16
        xq = x.to(FP8)
        if pad:
            xq = F.pad(xq.view(torch.uint8), (0, 0, 0, pad)).view(FP8)
        one = torch.ones((), device=DEV, dtype=torch.float32)
        y = torch._scaled_mm(xq, w.t(), scale_a=one, scale_b=one, out_dtype=BF16)
        return y[:m] if pad else y
    return F.linear(x, w)


def measure_gemm(precisions):
    """Decode-shaped GEMMs: weights (N x K) times M tokens; the gate/up matrix of Llama-3.1-8B and a
    big square for the peak."""
    rows = []
    shapes = [(28672, 4096), (4096, 14336)]
    for precision in precisions:
        for n, k in shapes:
            w = torch.randn(n, k, device=DEV, dtype=BF16) * 0.02
            if precision == "fp8":
                w = _fp8_weight(w)
            for m in (1, 16, 64, 128, 256, 512, 1024, 2048, 4096, 8192):
                x = torch.randn(m, k, device=DEV, dtype=BF16)
                ms, _, _ = time_cuda(lambda x=x, w=w: linear_fn(x, w, precision), iters=20)
                wbytes = n * k * (1 if precision == "fp8" else 2)
                rows.append({"precision": precision, "m": m, "n": n, "k": k, "ms": ms,
                             "tflops": 2 * m * n * k / (ms * 1e-3) / 1e12,
                             "weight_tb_s": wbytes / (ms * 1e-3) / 1e12})
            del w
        s = 8192
        a = torch.randn(s, s, device=DEV, dtype=BF16)
        b = torch.randn(s, s, device=DEV, dtype=BF16)
        if precision == "fp8":
            bq = b.to(FP8)
            ms, _, _ = time_cuda(lambda: linear_fn(a, bq, "fp8"), iters=10)
        else:
            ms, _, _ = time_cuda(lambda: a @ b, iters=10)
        rows.append({"precision": precision, "m": s, "n": s, "k": s, "ms": ms,
                     "tflops": 2 * s ** 3 / (ms * 1e-3) / 1e12, "weight_tb_s": None, "square": True})
        del a, b
        torch.cuda.empty_cache()
    return rows


# ---------------------------------------------------------------------------------------------
# A Llama-shaped model, one tensor-parallel rank of it


def _pre_attention(x, norm_w, w_qkv, precision: str):
    return linear_fn(F.rms_norm(x, (x.shape[-1],), norm_w, 1e-5), w_qkv, precision)


def _post_attention(x, attn, w_o, norm_w, w_gate_up, w_down, d_ff: int, precision: str):
    x = x + linear_fn(attn, w_o, precision)
    h = F.rms_norm(x, (x.shape[-1],), norm_w, 1e-5)
    gu = linear_fn(h, w_gate_up, precision)
    return x + linear_fn(F.silu(gu[:, :d_ff]) * gu[:, d_ff:], w_down, precision)


_COMPILED = {}


def fused(name):
    """torch.compile'd layer pieces (norms, activations and residuals fused around the GEMMs)."""
    if name not in _COMPILED:
        # one compiled graph per (batch, shape): well past Dynamo's default of 8, or it falls back to eager
        torch._dynamo.config.recompile_limit = 256
        torch._dynamo.config.cache_size_limit = 256
        fn = {"pre": _pre_attention, "post": _post_attention}[name]
        _COMPILED[name] = torch.compile(fn, dynamic=False)
    return _COMPILED[name]


class RankModel:
    def __init__(self, shape, tp, precision, kv_tokens_budget, fused_layers=False):
        n_layers, d, h, hkv, hd, d_ff, vocab = shape
        self.n_layers, self.d, self.hd = n_layers, d, hd
        self.h = h // tp
        self.hkv = max(1, hkv // tp)
        self.d_ff = d_ff // tp
        self.vocab = vocab // tp
        self.precision = precision
        self.fused_layers = fused_layers
        q_dim, kv_dim = self.h * hd, self.hkv * hd

        def weight(n, k):
            w = torch.randn(n, k, device=DEV, dtype=BF16) * 0.02
            return _fp8_weight(w) if precision == "fp8" else w

        self.layers = []
        for _ in range(n_layers):
            self.layers.append({
                "qkv": weight(q_dim + 2 * kv_dim, d),
                "o": weight(d, q_dim),
                "gate_up": weight(2 * self.d_ff, d),
                "down": weight(d, self.d_ff),
                "norm1": torch.ones(d, device=DEV, dtype=BF16),
                "norm2": torch.ones(d, device=DEV, dtype=BF16),
            })
        self.lm_head = torch.randn(self.vocab, d, device=DEV, dtype=BF16) * 0.02  # bf16 in quantized ckpts
        self.final_norm = torch.ones(d, device=DEV, dtype=BF16)
        self.kv_tokens_budget = kv_tokens_budget
        # One flat KV buffer per layer, viewed as (B, Hkv, ctx, hd) per configuration.
        self.k_cache = [torch.randn(kv_tokens_budget * self.hkv * hd, device=DEV, dtype=BF16) for _ in range(n_layers)]
        self.v_cache = [torch.randn(kv_tokens_budget * self.hkv * hd, device=DEV, dtype=BF16) for _ in range(n_layers)]

    def weight_bytes(self):
        per = 1 if self.precision == "fp8" else 2
        n = sum(t.numel() for layer in self.layers for key, t in layer.items() if key not in ("norm1", "norm2"))
        return n * per + self.lm_head.numel() * 2

    def _norm(self, x, w):
        return F.rms_norm(x, (x.shape[-1],), w, 1e-5)

    def decode_fn(self, batch, ctx):
        """A closure running one decode step for `batch` sequences with `ctx` cached tokens."""
        d, hd, h, hkv = self.d, self.hd, self.h, self.hkv
        group = h // hkv
        x0 = torch.randn(batch, d, device=DEV, dtype=BF16)
        x = torch.empty_like(x0)
        kc = [c[: batch * hkv * ctx * hd].view(batch, hkv, ctx, hd) for c in self.k_cache]
        vc = [c[: batch * hkv * ctx * hd].view(batch, hkv, ctx, hd) for c in self.v_cache]
        scale = 1.0 / math.sqrt(hd)
        q_dim, kv_dim = h * hd, hkv * hd
        prec = self.precision

        if self.fused_layers:
            pre, post = fused("pre"), fused("post")

            def fused_step():
                h = x0
                for i, layer in enumerate(self.layers):
                    qkv = pre(h, layer["norm1"], layer["qkv"], prec)
                    q = qkv[:, :q_dim].view(batch, hkv, group, hd)
                    kc[i][:, :, ctx - 1].copy_(qkv[:, q_dim:q_dim + kv_dim].view(batch, hkv, hd))
                    vc[i][:, :, ctx - 1].copy_(qkv[:, q_dim + kv_dim:].view(batch, hkv, hd))
                    scores = torch.matmul(q, kc[i].transpose(-1, -2)) * scale
                    probs = torch.softmax(scores.float(), dim=-1).to(BF16)
                    attn = torch.matmul(probs, vc[i]).reshape(batch, q_dim)
                    h = post(h, attn, layer["o"], layer["norm2"], layer["gate_up"], layer["down"], self.d_ff, prec)
                return F.linear(self._norm(h, self.final_norm), self.lm_head)

            return fused_step

        def step():
            x.copy_(x0)
            for i, layer in enumerate(self.layers):
                hdn = self._norm(x, layer["norm1"])
                qkv = linear_fn(hdn, layer["qkv"], prec)
                q = qkv[:, :q_dim].view(batch, hkv, group, hd)
                k_new = qkv[:, q_dim:q_dim + kv_dim].view(batch, hkv, hd)
                v_new = qkv[:, q_dim + kv_dim:].view(batch, hkv, hd)
                kc[i][:, :, ctx - 1].copy_(k_new)  # append this token's K and V
                vc[i][:, :, ctx - 1].copy_(v_new)
                scores = torch.matmul(q, kc[i].transpose(-1, -2)) * scale  # (B, Hkv, g, ctx)
                probs = torch.softmax(scores.float(), dim=-1).to(BF16)
                attn = torch.matmul(probs, vc[i]).reshape(batch, q_dim)
                x.add_(linear_fn(attn, layer["o"], prec))
                hdn = self._norm(x, layer["norm2"])
                gu = linear_fn(hdn, layer["gate_up"], prec)
                act = F.silu(gu[:, : self.d_ff]) * gu[:, self.d_ff:]
                x.add_(linear_fn(act, layer["down"], prec))
            return F.linear(self._norm(x, self.final_norm), self.lm_head)

        return step

    def prefill_fn(self, prompt_len):
        d, hd, h, hkv = self.d, self.hd, self.h, self.hkv
        x0 = torch.randn(prompt_len, d, device=DEV, dtype=BF16)
        q_dim, kv_dim = h * hd, hkv * hd
        prec = self.precision

        if self.fused_layers:
            pre, post = fused("pre"), fused("post")

            def fused_run():
                x = x0
                for i, layer in enumerate(self.layers):
                    qkv = pre(x, layer["norm1"], layer["qkv"], prec)
                    q = qkv[:, :q_dim].view(prompt_len, h, hd).transpose(0, 1).unsqueeze(0)
                    k = qkv[:, q_dim:q_dim + kv_dim].view(prompt_len, hkv, hd).transpose(0, 1).unsqueeze(0)
                    v = qkv[:, q_dim + kv_dim:].view(prompt_len, hkv, hd).transpose(0, 1).unsqueeze(0)
                    self.k_cache[i][: prompt_len * kv_dim].view(prompt_len, kv_dim).copy_(qkv[:, q_dim:q_dim + kv_dim])
                    self.v_cache[i][: prompt_len * kv_dim].view(prompt_len, kv_dim).copy_(qkv[:, q_dim + kv_dim:])
                    # native GQA: no repeated K/V in memory (flash attention reads each KV head once)
                    attn = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=hkv != h)
                    attn = attn.squeeze(0).transpose(0, 1).reshape(prompt_len, q_dim)
                    x = post(x, attn, layer["o"], layer["norm2"], layer["gate_up"], layer["down"], self.d_ff, prec)
                return F.linear(self._norm(x[-1:], self.final_norm), self.lm_head)

            return fused_run

        def run():
            x = x0.clone()
            for i, layer in enumerate(self.layers):
                hdn = self._norm(x, layer["norm1"])
                qkv = linear_fn(hdn, layer["qkv"], prec)
                q = qkv[:, :q_dim].view(prompt_len, h, hd).transpose(0, 1).unsqueeze(0)
                k = qkv[:, q_dim:q_dim + kv_dim].view(prompt_len, hkv, hd).transpose(0, 1).unsqueeze(0)
                v = qkv[:, q_dim + kv_dim:].view(prompt_len, hkv, hd).transpose(0, 1).unsqueeze(0)
                self.k_cache[i][: prompt_len * kv_dim].view(prompt_len, kv_dim).copy_(qkv[:, q_dim:q_dim + kv_dim])
                self.v_cache[i][: prompt_len * kv_dim].view(prompt_len, kv_dim).copy_(qkv[:, q_dim + kv_dim:])
                if hkv != h:
                    k = k.repeat_interleave(h // hkv, dim=1)
                    v = v.repeat_interleave(h // hkv, dim=1)
                attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                attn = attn.squeeze(0).transpose(0, 1).reshape(prompt_len, q_dim)
                x = x + linear_fn(attn, layer["o"], prec)
                hdn = self._norm(x, layer["norm2"])
                gu = linear_fn(hdn, layer["gate_up"], prec)
                act = F.silu(gu[:, : self.d_ff]) * gu[:, self.d_ff:]
                x = x + linear_fn(act, layer["down"], prec)
            return F.linear(self._norm(x[-1:], self.final_norm), self.lm_head)

        return run


def run_model(name, tp, precision, grid, prompts, kv_tokens_budget, fused_layers=False):
    shape = SHAPES[name]
    variant = "fused" if fused_layers else "eager"
    log(f"model {name} tp-shard {tp} {precision} {variant}")
    t0 = time.time()
    model = RankModel(shape, tp, precision, kv_tokens_budget, fused_layers)
    meta = {"model": name, "tp_shard": tp, "precision": precision, "n_layers": shape[0], "variant": variant,
            "weight_bytes_per_gpu": model.weight_bytes(), "kv_heads_per_gpu": model.hkv}
    decode, prefill = [], []
    for batch, ctx in grid:
        if batch * ctx > kv_tokens_budget:
            continue
        ms, lo, hi = time_graph(model.decode_fn(batch, ctx))
        kv_bytes = 2 * shape[0] * batch * ctx * model.hkv * shape[4] * 2
        decode.append({**meta, "batch": batch, "context": ctx, "ms": ms, "ms_min": lo, "ms_max": hi,
                       "kv_read_bytes": kv_bytes})
        log(f"  decode b={batch:4d} ctx={ctx:6d}  {ms:8.3f} ms")
    for s in prompts:
        if s > kv_tokens_budget:
            continue
        # fused: replayed from a CUDA graph like the decode steps (engines capture prefill pieces too)
        timer = time_graph if fused_layers else time_cuda
        ms, lo, hi = timer(model.prefill_fn(s), warmup=2, iters=5)
        prefill.append({**meta, "prompt_len": s, "ms": ms, "ms_min": lo, "ms_max": hi})
        log(f"  prefill s={s:6d}  {ms:8.3f} ms")
    del model
    torch.cuda.empty_cache()
    log(f"  ({time.time() - t0:.0f} s)")
    return decode, prefill


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="measurements.json")
    ap.add_argument("--quick", action="store_true", help="a small grid (smoke test)")
    ap.add_argument("--kv-gb", type=float, default=24.0, help="KV buffer budget in GB")
    ap.add_argument("--fused", action="store_true",
                    help="decode with torch.compile'd layer pieces (fused norms/activations) instead of eager kernels")
    ap.add_argument("--skip-ceilings", action="store_true", help="skip the bandwidth and GEMM measurements")
    ap.add_argument("--physics", action="store_true",
                    help="the GPU-physics set of the graph engine instead (tools/measure_physics.py; pass its options after --)")
    args, rest = ap.parse_known_args()
    if args.physics:
        sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent))
        import measure_physics

        sys.argv = [sys.argv[0], "--out", args.out, *[a for a in rest if a != "--"]]
        return measure_physics.main()
    if rest:
        ap.error(f"unrecognized arguments: {' '.join(rest)}")
    if not torch.cuda.is_available():
        sys.exit("error: no CUDA device")

    props = torch.cuda.get_device_properties(0)
    try:
        driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,memory.total", "--format=csv,noheader"],
                                capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception:  # nvidia-smi missing is not fatal
        driver = "unknown"
    has_fp8 = FP8 is not None and props.major * 10 + props.minor >= 89
    meta = {
        "gpu": props.name, "sm_count": props.multi_processor_count, "memory_bytes": props.total_memory,
        "driver_and_memory": driver, "torch": torch.__version__, "cuda": torch.version.cuda,
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), "host": platform.node(),
        "method": ("random weights; torch.compile-fused layer pieces; decode steps and prefills replayed from CUDA "
                   "graphs (median of 20 / 5 replays); TP ranks emulated without all-reduce") if args.fused else
                  ("random weights; decode steps captured in CUDA graphs (median of 20 replays); prefill eager "
                   "(median of 5); TP ranks emulated without all-reduce"),
    }
    log(json.dumps(meta))
    result = {"meta": meta}
    result["bandwidth"] = {} if args.skip_ceilings else measure_bandwidth()
    log("bandwidth", result["bandwidth"])
    result["gemm"] = [] if args.skip_ceilings else measure_gemm(["bf16"] + (["fp8"] if has_fp8 else []))
    for row in result["gemm"]:
        if row.get("square") or row["m"] in (1, 256, 4096):
            log("gemm", row["precision"], row["m"], row["n"], row["k"], f"{row['tflops']:.1f} TFLOP/s")

    if args.fused:  # compiling per shape costs time: a smaller grid
        grid = [(1, 512), (1, 4096), (8, 1024), (8, 8192), (32, 2048), (64, 1024), (128, 512), (256, 512)]
        prompts = [128, 512, 2048, 8192]
        runs = [("llama-3.1-8b", 1, "bf16"), ("llama-3.1-70b", 4, "bf16"), ("llama-3.1-70b", 8, "bf16")]
        if has_fp8:
            runs.append(("llama-3.1-8b", 1, "fp8"))
    elif args.quick:
        grid = [(1, 512), (16, 2048), (64, 1024)]
        prompts = [128, 2048]
        runs = [("llama-3.1-8b", 1, "bf16")]
    else:
        grid = [(1, 512), (1, 4096), (1, 16384), (4, 2048), (8, 1024), (8, 8192), (16, 4096), (32, 512),
                (32, 2048), (32, 8192), (64, 1024), (64, 4096), (128, 512), (128, 2048), (256, 512), (256, 1024)]
        prompts = [128, 512, 2048, 8192]
        runs = [("llama-3.1-8b", 1, "bf16"), ("qwen3-8b", 1, "bf16"), ("llama-3.1-70b", 4, "bf16"),
                ("llama-3.1-70b", 8, "bf16")]
        if has_fp8:
            runs += [("llama-3.1-8b", 1, "fp8"), ("llama-3.1-70b", 2, "fp8")]
    result["decode"], result["prefill"] = [], []
    for name, tp, precision in runs:
        shape = SHAPES[name]
        hkv = max(1, shape[3] // tp)
        kv_tokens = int(args.kv_gb * 1e9 / (2 * shape[0] * hkv * shape[4] * 2))
        dec, pre = run_model(name, tp, precision, grid, prompts, kv_tokens, fused_layers=args.fused)
        result["decode"] += dec
        result["prefill"] += pre
        with open(args.out, "w") as f:  # keep partial results if the run is cut short
            json.dump(result, f, indent=1)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    log(f"wrote {args.out}: {len(result['decode'])} decode, {len(result['prefill'])} prefill rows")


if __name__ == "__main__":
    main()
