#!/usr/bin/env python3
"""GPU board power at serving batches (issue 31): real decode steps and prefills, replayed back to back
from CUDA graphs, with nvidia-smi's power.draw sampled every 100 ms. The evidence behind the power rule
of planner/economics/power.py, measured where the old rule (fitted on one GEMV and one GEMM) was weakest:
decode at batch 64-256 runs GEMMs of 64-256 rows that load the tensor cores as well as HBM.

    python3 tools/measure_power_serving.py --out power_serving.json [--budget-s 420] [--plan held-out]

Shapes (one tensor-parallel rank, random bf16 weights and caches, never zeros; tools/measure_physics.py's
RankModel and decode attention):
  * Llama-3.1-8B, TP 1, all 32 layers and the LM head: decode at batch 1-256, context 1,024 and 4,096;
    prefill of 1k-8k tokens;
  * a Llama-3.1-70B rank at TP 4 (d_model 8192, 16 query heads, 2 KV heads, d_ff 7,168 per rank),
    20 of its 80 layers: decode at batch 1-256, context 2,048; prefill 1k-8k.
`--plan held-out` measures shapes the rule never saw (tools/fit_power.py --held-out scores it there): a
Qwen3-32B rank at TP 2 (16 of 64 layers), the Llama-3.1-70B TP-4 rank with fp8 weights (per-tensor scales,
torch._scaled_mm), and Qwen3-30B-A3B at TP 1 (24 of 48 layers: 128 experts, top 8, fixed random routing).
`--plan moe-kernels` runs that MoE twice, its experts as one GEMM each (cuBLAS) and as the grouped GEMM.
`--plan moe-tiles` runs it with torch._grouped_mm and with a Triton grouped GEMM of row tile BLOCK_M = 16, 64
and 128 (tools/moe_tile_gemm.py: rows sorted by expert, each expert padded to whole tiles); every MoE point
records its routing (`expert_counts`, the tokens each expert got, the same in every layer), from which the
rows the tiles ran follow, and `meta` the tile kernel's error against a float64 reference.
Each point replays its graph for PHASE_S seconds; the draw is the median of the samples after SETTLE_S.
The step time is the median graph replay (CUDA events). Written with GPU, driver, torch, CUDA, date and the
power limit in `meta`.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

try:
    import measure_physics as mp
    from gpu_timing import capture_graph, device_meta, time_cuda
    from measure_power import Sampler, smi
except ImportError:
    import tools.measure_physics as mp
    from tools.gpu_timing import capture_graph, device_meta, time_cuda
    from tools.measure_power import Sampler, smi

try:
    import moe_tile_gemm as tile
except ImportError:
    import tools.moe_tile_gemm as tile

PHASE_S = 5.0
SETTLE_S = 1.5

LLAMA_8B = {"d_model": 4096, "n_heads": 32, "n_kv_heads": 8, "head_dim": 128, "d_ff": 14336,
            "vocab_size": 128256, "n_layers": 32}
LLAMA_70B = {"d_model": 8192, "n_heads": 64, "n_kv_heads": 8, "head_dim": 128, "d_ff": 28672,
             "vocab_size": 128256, "n_layers": 80}
QWEN3_32B = {"d_model": 5120, "n_heads": 64, "n_kv_heads": 8, "head_dim": 128, "d_ff": 25600,
             "vocab_size": 151936, "n_layers": 64}
QWEN3_30B_A3B = {"d_model": 2048, "n_heads": 32, "n_kv_heads": 4, "head_dim": 128, "d_ff": 6144,
                 "vocab_size": 151936, "n_layers": 48,
                 "moe": {"n_experts": 128, "top_k": 8, "d_ff_expert": 768}}
BATCHES = (1, 16, 32, 64, 128, 256)
# (name, spec, tp, precision, layers timed, decode (batch, context) points, prefill tokens)
PLANS = {
    # the shapes the power rule was fitted on (tools/fit_power.py)
    "fit": [
        ("llama-3.1-8b-tp1", LLAMA_8B, 1, "bf16", 32,
         [(b, 1024) for b in (1, 8, 16, 32, 64, 96, 128, 192, 256)] + [(b, 4096) for b in (16, 64)],
         (1024, 2048, 4096, 8192)),
        ("llama-3.1-70b-tp4-rank", LLAMA_70B, 4, "bf16", 20, [(b, 2048) for b in (1, 16, 32, 64, 128, 256)],
         (1024, 4096, 8192)),
    ],
    # shapes it never saw, to score it held out: another dense shape, fp8 weights, a mixture of experts
    "held-out": [
        ("qwen3-32b-tp2-rank", QWEN3_32B, 2, "bf16", 16, [(b, 2048) for b in BATCHES], (1024, 4096)),
        ("llama-3.1-70b-tp4-rank-fp8", LLAMA_70B, 4, "fp8", 20, [(b, 2048) for b in BATCHES], (1024, 4096)),
        ("qwen3-30b-a3b-tp1", QWEN3_30B_A3B, 1, "bf16", 24, [(b, 1024) for b in BATCHES], (1024, 4096)),
    ],
    # the same MoE with a grouped GEMM whose row tile is chosen (torch._grouped_mm's, then Triton's at 16, 64
    # and 128 rows): the padded tile work grows with BLOCK_M, the useful FLOPs do not
    "moe-tiles": [
        (f"qwen3-30b-a3b-tp1{suffix}", QWEN3_30B_A3B, 1, "bf16", 24, [(b, 1024) for b in BATCHES], ())
        for suffix in ("", "-tile16", "-tile64", "-tile128")
    ],
    # the same MoE with its experts run one GEMM each (cuBLAS picks its kernel by each expert's few rows)
    # beside the grouped GEMM, to tell the tensor-core tiles a grouped kernel pads to from the rest
    "moe-kernels": [
        ("qwen3-30b-a3b-tp1-per-expert", QWEN3_30B_A3B, 1, "bf16", 24, [(b, 1024) for b in BATCHES], ()),
        ("qwen3-30b-a3b-tp1", QWEN3_30B_A3B, 1, "bf16", 24, [(b, 1024) for b in BATCHES], ()),
    ],
}


class TileExperts:
    """The experts' two GEMMs (gate-up, then down) through the BLOCK_M-tiled grouped kernel; the padded row
    layout is built once per routing, before the graph is captured."""

    def __init__(self, block_m: int, d_ff: int) -> None:
        self.block_m, self.d_ff = block_m, d_ff
        self.layouts: dict[tuple[int, ...], tile.TileLayout] = {}

    def __call__(self, xs, layer, plan):
        key = tuple(plan["counts"])
        if key not in self.layouts:
            self.layouts[key] = tile.TileLayout(plan["counts"], self.block_m)
        layout = self.layouts[key]
        gu = tile.grouped_tile_gemm(xs, layer["w13"], layout)
        act = torch.nn.functional.silu(gu[:, :self.d_ff]) * gu[:, self.d_ff:]
        return tile.grouped_tile_gemm(act, layer["w2"], layout)


def sustain(sampler: Sampler, name: str, graph) -> dict:
    """Replay `graph` back to back for PHASE_S s (synchronising every ~20 ms of work) and read the draw."""
    step_ms = time_cuda(graph.replay, warmup=3, iters=15)[0]
    per_burst = max(1, round(20.0 / max(step_ms, 1e-3)))
    sampler.phase = name
    start = time.monotonic()
    while time.monotonic() - start < PHASE_S:
        for _ in range(per_burst):
            graph.replay()
        torch.cuda.synchronize()
    return {"step_ms": step_ms, **sampler.stats(name, start + SETTLE_S)}


def decode_point(model, spec_name, batch, ctx, sampler, out):
    hkv, hd = model.hkv, model.hd
    caches = [(torch.randn(batch, hkv, ctx, hd, device="cuda", dtype=mp.BF16).mul_(0.5),
               torch.randn(batch, hkv, ctx, hd, device="cuda", dtype=mp.BF16).mul_(0.5))
              for _ in range(model.layers_timed)]
    split = mp.SplitAttention(batch, hkv, model.g, hd, ctx) if mp.triton is not None else None

    def attention(q, kc, vc):
        if split is not None:
            return split(q, kc, vc)
        return mp.sdpa_attention(q, kc, vc, batch, model.h, hd)

    run, _ = model.decode_layers(batch, ctx, caches, attention)

    def step():
        model.head(run())

    graph = capture_graph(step)
    row = {"kind": "decode", "shape": spec_name, "batch": batch, "context": ctx,
           "layers_timed": model.layers_timed, **sustain(sampler, f"{spec_name}-d{batch}-c{ctx}", graph)}
    if model.moe:
        row["expert_counts"] = [int(c) for c in model.last_moe_plan["counts"]]
    out.append(row)
    print(json.dumps(row), flush=True)
    del graph, caches
    torch.cuda.empty_cache()


def prefill_point(model, spec_name, tokens, sampler, out):
    run = model.prefill_layers(tokens, model.layers_timed)
    graph = capture_graph(run)
    row = {"kind": "prefill", "shape": spec_name, "tokens": tokens, "layers_timed": model.layers_timed,
           **sustain(sampler, f"{spec_name}-p{tokens}", graph)}
    out.append(row)
    print(json.dumps(row), flush=True)
    del graph
    torch.cuda.empty_cache()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--budget-s", type=float, default=420.0)
    parser.add_argument("--plan", choices=sorted(PLANS), default="fit")
    args = parser.parse_args()
    deadline = time.monotonic() + args.budget_s
    mp.N_SM = torch.cuda.get_device_properties(0).multi_processor_count
    meta = device_meta("board power at serving decode batches and prefills (tools/measure_power_serving.py)")
    meta.update({"power_limit_w": float(smi("power.limit")), "phase_s": PHASE_S, "settle_s": SETTLE_S})
    rows: list[dict] = []
    with Sampler() as sampler:
        sampler.phase = "idle"
        t0 = time.monotonic()
        time.sleep(3.0)
        meta["idle_context_w"] = sampler.stats("idle", t0 + 1.0)["median_w"]
        meta["plan"] = args.plan
        if args.plan == "moe-tiles":
            meta["tile_check_rel_err"] = {str(b): tile.check(b) for b in (16, 64, 128)}
            meta["tile_kernel"] = {"block_n": tile.BLOCK_N, "block_k": tile.BLOCK_K, "num_stages": 3,
                                   "num_warps": {str(b): tile.num_warps(b) for b in (16, 64, 128)}}
            print(json.dumps(meta), flush=True)
        for name, spec, tp, precision, layers, decodes, prefills in PLANS[args.plan]:
            model = mp.RankModel(spec, tp, precision, layers)
            if name.endswith("-per-expert"):
                model.grouped = False  # RankModel.moe_mlp's loop: one GEMM per expert that has tokens
            if "-tile" in name:
                model.expert_gemm = TileExperts(int(name.rsplit("-tile", 1)[1]), model.d_ff)
            for batch, ctx in decodes:
                if time.monotonic() > deadline:
                    break
                try:
                    decode_point(model, name, batch, ctx, sampler, rows)
                except torch.OutOfMemoryError:
                    print(f"skip {name} decode b{batch} c{ctx}: out of memory", flush=True)
                    torch.cuda.empty_cache()
            for tokens in prefills:
                if time.monotonic() > deadline:
                    break
                prefill_point(model, name, tokens, sampler, rows)
            del model
            torch.cuda.empty_cache()
    with open(args.out, "w") as f:
        json.dump({"meta": meta, "points": rows}, f, indent=1)


if __name__ == "__main__":
    main()
