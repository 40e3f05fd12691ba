#!/usr/bin/env python3
"""Short prompts and mixed iterations on the "graph" engine (issue 20): what a compiled step costs when a
prompt is short (64-2,048 tokens), when several short prompts share a pass, and when one forward pass
carries decodes and a prompt chunk together, as a chunked-prefill engine's iteration does.

    python3 tools/measure_short_prefill.py --out short_prefill.json [--smoke] [--budget-s 480]

The method of tools/measure_physics.py (its kernels and layers are imported from it): random weights and
caches, never zeros; one tensor-parallel rank's slice (heads, d_ff and vocab / tp) with no all-reduce;
`layers_timed` of the model's layers built and replayed from one CUDA graph (median of 20 replays after
warm-up), the pass scaled to every layer as layers_ms x n_layers / layers_timed + head_ms. It writes,
with GPU, driver, torch, CUDA and UTC date in `meta` (gpu_timing.device_meta):
  * `prefill`: B prompts of S tokens each in one pass (B = 1 and a few multi-prompt batches): the GEMMs
    over all B x S tokens, flash attention per prompt (SDPA, causal, native GQA); logits of each
    prompt's last token;
  * `decode`: N sequences at `context` cached tokens, one token each (the context-split Triton
    attention of measure_physics.py, else SDPA); logits of every sequence;
  * `mixed`: one pass carrying both: the N decode tokens and a fresh prompt chunk of P tokens go through
    the QKV, O and MLP GEMMs together (one weight read), the decodes' attention over their caches and
    the chunk's causal attention run side by side; logits of N + 1 tokens. Each row names the decode
    step and the prefill of the same layers measured alone in the same run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

PROMPTS = [64, 128, 256, 384, 512, 768, 1024, 2048]
MULTI = [(2, 256), (4, 128), (4, 256), (4, 512), (8, 128), (16, 64)]  # (prompts, tokens each)
DECODES = [8, 16, 32, 64]
CONTEXTS = [1024, 2048]
CHUNKS = [64, 256, 512]
LAYERS_TIMED = 4


EXTRA = [
    ("llama-3.2-1b", 1, "bf16"),
    ("llama-3.2-3b", 1, "bf16"),
    ("llama-3.2-3b", 1, "fp8"),
    ("qwen3-8b", 1, "bf16"),
    ("llama-2-7b", 1, "bf16"),
    ("d4096-gqa16", 1, "bf16"),
    ("d3584-hd256", 1, "bf16"),
    ("d8192-8layers", 1, "bf16"),
    ("d8192-8layers", 1, "fp8"),
    ("llama-3.1-70b", 2, "bf16"),
    ("llama-3.1-70b", 8, "bf16"),
    ("llama-3.1-405b", 8, "bf16"),
]


def plan_runs(smoke: bool, extra: bool = False) -> list[dict]:
    """Llama-3.1-8B whole (TP 1) and Llama-3.1-70B as one rank of TP 4, bf16 and fp8 weights, bf16 KV;
    `extra`: the other dense shapes of measure_physics.py, fewer mixed iterations."""
    if extra:
        return [
            {
                "name": name,
                "tp": tp,
                "precision": precision,
                "prompts": PROMPTS,
                "multi": [(4, 128), (4, 256)],
                "decodes": [16, 64],
                "contexts": [2048],
                "chunks": CHUNKS,
            }
            for name, tp, precision in EXTRA
        ]
    if smoke:
        return [
            {
                "name": "llama-3.1-8b",
                "tp": 1,
                "precision": "bf16",
                "prompts": [64, 512],
                "multi": [(4, 128)],
                "decodes": [16],
                "contexts": [1024],
                "chunks": [256],
            }
        ]
    runs = []
    for name, tp in (("llama-3.1-8b", 1), ("llama-3.1-70b", 4)):
        for precision in ("bf16", "fp8"):
            runs.append(
                {
                    "name": name,
                    "tp": tp,
                    "precision": precision,
                    "prompts": PROMPTS,
                    "multi": MULTI,
                    "decodes": DECODES,
                    "contexts": CONTEXTS,
                    "chunks": CHUNKS,
                }
            )
    return runs


def run_shape(mp, entry, result, deadline, log):
    import torch
    import torch.nn.functional as F

    dev, bf16 = mp.DEV, mp.BF16
    spec = mp.MODELS[entry["name"]]
    tp, precision = entry["tp"], entry["precision"]
    timed = LAYERS_TIMED
    model = mp.RankModel(spec, tp, precision, timed)
    h, hkv, hd, q_dim, kv_dim = model.h, model.hkv, model.hd, model.q_dim, model.kv_dim
    meta = {
        "shape": entry["name"],
        "model": {"name": entry["name"], **spec},
        "tp_shard": tp,
        "precision": precision,
        "kv": "bf16",
        "n_layers": spec["n_layers"],
        "layers_timed": timed,
        "scaled": timed < spec["n_layers"],
        "kv_heads_per_gpu": hkv,
        "group": model.g,
        "head_dim": hd,
    }
    log(f"== {entry['name']} tp{tp} {precision}: {timed}/{spec['n_layers']} layers built")
    heads: dict[int, float] = {}

    def head_ms(rows):
        if rows not in heads:
            xh = torch.randn(rows, model.d, device=dev, dtype=bf16)
            heads[rows] = mp.graph_ms(lambda xh=xh: model.head(xh))
        return heads[rows]

    def scale(layers_ms, rows):
        return layers_ms * spec["n_layers"] / timed + head_ms(rows)

    def prompt_attention(qkv, b, s):
        """Causal flash attention of b prompts of s tokens each, packed one after another in qkv."""
        q = qkv[:, :q_dim].view(b, s, h, hd).transpose(1, 2)
        k = qkv[:, q_dim : q_dim + kv_dim].view(b, s, hkv, hd).transpose(1, 2)
        v = qkv[:, q_dim + kv_dim :].view(b, s, hkv, hd).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=hkv != h)
        return a.transpose(1, 2).reshape(b * s, q_dim)

    def prefill_run(b, s):
        x0 = torch.randn(b * s, model.d, device=dev, dtype=bf16)
        caches = [
            (
                torch.empty(b * s, kv_dim, device=dev, dtype=bf16),
                torch.empty(b * s, kv_dim, device=dev, dtype=bf16),
            )
            for _ in range(timed)
        ]

        def run():
            x = x0
            for i, layer in enumerate(model.layers):
                qkv = layer["qkv"](model._norm(x, layer["norm1"]))
                caches[i][0].copy_(qkv[:, q_dim : q_dim + kv_dim])
                caches[i][1].copy_(qkv[:, q_dim + kv_dim :])
                x = x + layer["o"](prompt_attention(qkv, b, s))
                x = x + model.mlp(model._norm(x, layer["norm2"]), layer, None)
            return x

        return run

    def decode_attention(n, ctx):
        if mp.triton is not None and result["meta"].get("split_attention"):
            return "split", mp.SplitAttention(n, hkv, model.g, hd, ctx)
        return "sdpa", (lambda q, kc, vc, n=n: mp.sdpa_attention(q, kc, vc, n, h, hd))

    def mixed_run(n, ctx, p, caches, attention):
        """n decode tokens (rows 0..n-1) and a fresh chunk of p prompt tokens (rows n..n+p-1) in one pass."""
        x0 = torch.randn(n + p, model.d, device=dev, dtype=bf16)
        chunk_kv = [
            (torch.empty(p, kv_dim, device=dev, dtype=bf16), torch.empty(p, kv_dim, device=dev, dtype=bf16))
            for _ in range(timed)
        ]

        def run():
            x = x0
            for i, layer in enumerate(model.layers):
                kc, vc = caches[i]
                qkv = layer["qkv"](model._norm(x, layer["norm1"]))
                dec, chunk = qkv[:n], qkv[n:]
                kc[:, :, ctx - 1].copy_(dec[:, q_dim : q_dim + kv_dim].view(n, hkv, hd))
                vc[:, :, ctx - 1].copy_(dec[:, q_dim + kv_dim :].view(n, hkv, hd))
                chunk_kv[i][0].copy_(chunk[:, q_dim : q_dim + kv_dim])
                chunk_kv[i][1].copy_(chunk[:, q_dim + kv_dim :])
                a = torch.cat([attention(dec[:, :q_dim], kc, vc), prompt_attention(chunk, 1, p)])
                x = x + layer["o"](a)
                x = x + model.mlp(model._norm(x, layer["norm2"]), layer, None)
            return x

        return run

    def save_progress():
        result["_save"]()

    # prefill: one prompt, then several prompts in one pass
    prefill_alone = {}
    for b, s in [(1, s) for s in entry["prompts"]] + list(entry["multi"]):
        if time.time() > deadline:
            log("time budget reached: skipping the rest")
            return
        try:
            layers_ms = mp.graph_ms(prefill_run(b, s), warmup=2, iters=20)
            ms = scale(layers_ms, b)
            if b == 1:
                prefill_alone[s] = ms
            result["prefill"].append(
                {
                    **meta,
                    "prompt_len": s,
                    "prompts": b,
                    "tokens": b * s,
                    "ms": ms,
                    "layers_ms": layers_ms,
                    "head_ms": head_ms(b),
                }
            )
            log(f"   prefill {b:2d} x {s:5d} {ms:9.3f} ms")
        except torch.cuda.OutOfMemoryError:
            log(f"   prefill {b} x {s}: out of memory, skipped")
        except Exception as err:  # noqa: BLE001
            log(f"   prefill {b} x {s} failed: {type(err).__name__}: {str(err)[:200]}")
        torch.cuda.empty_cache()
    save_progress()
    # decodes alone and with a chunk
    for ctx in entry["contexts"]:
        for n in entry["decodes"]:
            if time.time() > deadline:
                log("time budget reached: skipping the rest")
                return
            try:
                caches = [
                    (
                        torch.randn(n, hkv, ctx, hd, device=dev, dtype=bf16),
                        torch.randn(n, hkv, ctx, hd, device=dev, dtype=bf16),
                    )
                    for _ in range(timed)
                ]
                kind, attention = decode_attention(n, ctx)
                run, _ = model.decode_layers(n, ctx, caches, attention)
                decode_ms = scale(mp.graph_ms(run), n)
                result["decode"].append(
                    {
                        **meta,
                        "batch": n,
                        "context": ctx,
                        "ms": decode_ms,
                        "attention": kind,
                        "head_ms": head_ms(n),
                    }
                )
                log(f"   decode b={n:3d} ctx={ctx:5d} {decode_ms:9.3f} ms ({kind})")
                for p in entry["chunks"]:
                    layers_ms = mp.graph_ms(mixed_run(n, ctx, p, caches, attention))
                    ms = scale(layers_ms, n + 1)
                    alone = prefill_alone.get(p)
                    result["mixed"].append(
                        {
                            **meta,
                            "batch": n,
                            "context": ctx,
                            "chunk_tokens": p,
                            "chunk_cached": 0,
                            "ms": ms,
                            "layers_ms": layers_ms,
                            "head_ms": head_ms(n + 1),
                            "attention": kind,
                            "decode_alone_ms": decode_ms,
                            "prefill_alone_ms": alone,
                        }
                    )
                    log(
                        f"   mixed  b={n:3d} ctx={ctx:5d} + chunk {p:4d} {ms:9.3f} ms  "
                        f"(decode {decode_ms:.3f}"
                        + (f", prefill {alone:.3f}, sum {decode_ms + alone:.3f})" if alone else ")")
                    )
                caches = run = attention = None
            except torch.cuda.OutOfMemoryError:
                log(f"   decode/mixed b={n} ctx={ctx}: out of memory, skipped")
            except Exception as err:  # noqa: BLE001
                log(f"   decode/mixed b={n} ctx={ctx} failed: {type(err).__name__}: {str(err)[:200]}")
                traceback.print_exc()
            torch.cuda.empty_cache()
        save_progress()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="short_prefill.json")
    ap.add_argument("--smoke", action="store_true", help="one tiny configuration (a check of the script)")
    ap.add_argument(
        "--extra", action="store_true", help="the other dense shapes (short prompts, fewer mixed)"
    )
    ap.add_argument(
        "--budget-s", type=float, default=480.0, help="stop starting new rows after this many seconds"
    )
    args = ap.parse_args()
    import measure_physics as mp
    import torch
    from gpu_timing import device_meta, log, measure_bandwidth

    if not torch.cuda.is_available():
        sys.exit("error: no CUDA device")
    t_start = time.time()
    deadline = t_start + args.budget_s
    torch.manual_seed(0)
    props = torch.cuda.get_device_properties(0)
    mp.N_SM = props.multi_processor_count
    meta = device_meta("short prompts and mixed iterations, engine graph (compiled layers, CUDA graphs)")
    meta.update(
        {
            "sm_count": props.multi_processor_count,
            "memory_bytes": props.total_memory,
            "triton": getattr(mp.triton, "__version__", None),
            "layers_timed": LAYERS_TIMED,
            "timing": "median of 20 CUDA-graph replays after 2 warm-up replays",
            "method": __doc__.split("\n\n")[2].strip() if __doc__ else "",
            "smoke": args.smoke,
            "extra": args.extra,
        }
    )
    log(json.dumps(meta))
    result = {"meta": meta, "attention_check": [], "bandwidth": {}, "prefill": [], "decode": [], "mixed": []}

    def save():
        with open(args.out, "w") as f:
            json.dump({k: v for k, v in result.items() if not k.startswith("_")}, f, indent=1)

    result["_save"] = save
    ok = False
    if mp.triton is not None:
        try:
            ok = mp.check_split_kernel(result["attention_check"])
        except Exception as err:  # noqa: BLE001
            log(f"split kernel failed: {type(err).__name__}: {str(err)[:300]}")
    meta["split_attention"] = ok
    meta["fp8"] = mp.precision_works("fp8")
    result["bandwidth"] = measure_bandwidth()
    log("bandwidth", result["bandwidth"])
    save()
    for entry in plan_runs(args.smoke, args.extra):
        if entry["precision"] == "fp8" and not meta["fp8"]:
            continue
        if time.time() > deadline:
            result.setdefault("not_run", []).append(f"{entry['name']} tp{entry['tp']} {entry['precision']}")
            continue
        try:
            run_shape(mp, entry, result, deadline, log)
        except Exception as err:  # noqa: BLE001
            log(f"{entry['name']} failed: {type(err).__name__}: {str(err)[:300]}")
            traceback.print_exc()
        torch.cuda.empty_cache()
        save()
    # the short table the reply shows last
    log("\nshape precision | prompt tokens -> ms (batch 1)")
    for r in result["prefill"]:
        if r["prompts"] == 1:
            log(f"{r['shape']} {r['precision']} {r['prompt_len']:5d} {r['ms']:8.3f}")
    log("mixed: shape precision N ctx P | ms | decode alone | prefill alone")
    for r in result["mixed"]:
        log(
            f"{r['shape']} {r['precision']} {r['batch']:3d} {r['context']:5d} {r['chunk_tokens']:4d} | "
            f"{r['ms']:8.3f} | "
            f"{r['decode_alone_ms']:8.3f} | {r['prefill_alone_ms'] or math.nan:8.3f}"
        )
    log(
        f"wrote {args.out}: {len(result['prefill'])} prefill, {len(result['decode'])} decode, "
        f"{len(result['mixed'])} "
        f"mixed rows in {time.time() - t_start:.0f} s"
    )


if __name__ == "__main__":
    main()
