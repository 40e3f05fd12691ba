#!/usr/bin/env python3
"""Import measured per-kernel tables (issue 30, item 2) into compact tables under planner/data/kernel_tables/.

    python -m tools.import_kernel_tables [--mirror PATH] [--commit HASH]

Source: NVIDIA AIConfigurator (github.com/ai-dynamo/aiconfigurator, Apache-2.0), its per-kernel tables
`aic-core/src/aiconfigurator_core/systems/data/<gpu>/<op>/<engine>/<version>/*.parquet`, read from a pinned
commit of a local git mirror with `git show` (no checkout, no import of the aiconfigurator package, none
of its code copied). Only per-kernel tables are read: GEMM, context and generation attention, MLA,
MoE and the engines' custom all-reduce. The repository's end-to-end measurements ("silicon" samples,
any end-to-end TTFT/TPOT runs) are never listed, read, fitted on or tested on: they are outsiders'
validation set.

Columns and units, as the source documents them (read to understand the tables, not copied):
- every `latency` is milliseconds per kernel call on one GPU
  (aic-core/rust/aiconfigurator-core/src/perf_database/attention.rs: "latency ms");
- generation attention's cached length is `isl + step` (same file, "kv_seq_tokens = isl + step"), its
  `num_heads` / `num_key_value_heads` are one GPU's heads; context attention's length is `isl`;
- GEMM is (m tokens) x (k) @ (k x n) in `gemm_dtype`; MoE is one layer's routed experts for `num_tokens`
  tokens on one GPU of a `moe_tp_size` x `moe_ep_size` split; all-reduce is by `message_size` bytes and
  `num_gpus`.

How the source's own code reads these tables (read at the pinned commit to interpret the data; none copied):
- every row is one call replayed from a CUDA graph (collector/helper.py, benchmark_with_power: graph of the
  call, latency = elapsed / runs / repeat, then divided by the weight copies the collector rotated over L2) --
  except vLLM's block-fp8 GEMM, timed eagerly (collector/vllm/collect_gemm.py, use_cuda_graph=gemm_type !=
  "fp8_block"): its small-m rows are host launch time and SGLang's graph-timed block-fp8 rows replace them;
- GEMM m is the tokens, n the output features, k the input features (aic-core/rust/aiconfigurator-core/src/
  operators/gemm.rs: "M=x, N=n, K=k"; the collectors build Linear(k -> n));
- per-tensor fp8 GEMM rows quantize the activation dynamically (no input scale: collector/trtllm/
  collect_gemm.py; vLLM's activation_scheme="dynamic"; SGLang's per-token quant in the timed call); a static
  checkpoint is the fp8 row less compute_scale (dynamic minus static quantization of the same m x k,
  collector/*/collect_computescale.py), floored at the GEMM's roofline (operators/gemm.rs, fp8_static); the
  predictor subtracts the engine's computescale table imported here (floored at half the bf16 call);
- MoE rows are one layer's routed experts for `num_tokens` tokens on one GPU of the split, at a routing
  distribution (the source's models default to power_law with alpha 1.2: sdk/models/moe.py).

Compaction: one engine version per GPU x engine (the oldest that has GEMM, attention and MoE tables, the
nearest to the public serving runs' releases), the fastest kernel per shape where an engine ships several
(for MoE, the kernel the engine's serving recipes launch where measured: LAUNCHED_MOE_KERNEL),
MoE from every release of the engine on the GPU (a release's collection covers some splits and kernels only;
TensorRT-LLM and vLLM also take FlashInfer's TRT-LLM-gen MoE rows measured under SGLang, the kernels they run
on Blackwell, at quantized precisions; bf16 experts run each engine's default Triton or CUTLASS kernel) at
the `power_law_1.01` token distribution (real routing is skewed; `balanced` where a shape has none), context
attention at batch 1 (the predictor scales by batch), and the all-reduce the engine runs inside a CUDA
graph (the fastest of its releases per size). Each table is a long table of its axes and latency, in one
compressed .npz per GPU x engine, with manifest.json holding the provenance (repository, commit, path, GPU,
engine, version, license).
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "planner" / "data" / "kernel_tables"
MIRROR = Path("/work/.mirror/ai-dynamo+aiconfigurator/repo")
PINNED_COMMIT = "095f58a51c4ca8e61b66ec108d86f223f8d559ce"  # 2026-08-21, main
SOURCE_REPO = "https://github.com/ai-dynamo/aiconfigurator"
LICENSE = "Apache-2.0"
DATA = "aic-core/src/aiconfigurator_core/systems/data"
# catalog GPU id -> the source's folder
# (GB300 left out for size: its public runs are multi-node, planned from B300's tables)
GPUS = {"h100-sxm": "h100_sxm", "h200": "h200_sxm", "b200": "b200_sxm", "gb200": "gb200", "b300": "b300_sxm"}
# our engine name -> the source's
ENGINES = {"vllm": "vllm", "sglang": "sglang", "trt-llm": "trtllm"}
GEMM_DTYPES = ("bfloat16", "fp8", "fp8_block", "nvfp4")
MOE_DTYPES = ("bfloat16", "fp8", "fp8_block", "nvfp4", "w4a16_mxfp4", "int4_wo", "w4a8_mxfp4_mxfp8")
# GEMM rows: m up to 16,384 tokens (a decode batch or a prefill chunk); the source's odd m (4353) dropped
GEMM_MAX_M = 16384
MOE_MAX_TOKENS = 16384
# expert splits (tp x ep) up to an NVL72 rack's largest power of two (the source measured up to 256 GPUs;
# the files stay a few MB)
MOE_MAX_GPUS = 64
# the oldest release taken where an older one's tables are sparse (SGLang 0.5.6's MoE table has 2k rows)
OLDEST = {"sglang": "0.5.9"}
# engines whose block-fp8 GEMMs the source timed without a CUDA graph
EAGER_FP8_BLOCK = ("vllm",)
NEEDED = ("gemm/{e}/{v}/gemm_perf.parquet", "attention/{e}/{v}/generation_attention_perf.parquet",
          "moe/{e}/{v}/moe_perf.parquet")


def _git(mirror: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(mirror), *args], check=True, capture_output=True).stdout


def _listing(mirror: Path, commit: str) -> set[str]:
    names = _git(mirror, "ls-tree", "-r", "--name-only", commit, DATA + "/").decode().splitlines()
    # never list, let alone read, the end-to-end samples
    return {n for n in names if "silicon" not in n.lower() and n.endswith(".parquet")}


def _version_key(v: str) -> tuple:
    parts = []
    for token in v.replace("rc", ".").replace("post", ".").split("."):
        parts.append(int(token) if token.isdigit() else 0)
    return tuple(parts)


def pick_version(files: set[str], gpu: str, engine: str) -> str | None:
    versions = {n.split("/")[-2] for n in files if n.startswith(f"{DATA}/{gpu}/gemm/{engine}/")}
    complete = [v for v in versions
                if all(f"{DATA}/{gpu}/" + p.format(e=engine, v=v) in files for p in NEEDED)]
    preferred = [v for v in complete if _version_key(v) >= _version_key(OLDEST.get(engine, "0"))]
    return min(preferred or complete, key=_version_key) if complete else None


def _read(mirror: Path, commit: str, path: str) -> pd.DataFrame:
    return pd.read_parquet(io.BytesIO(_git(mirror, "show", f"{commit}:{path}")))


def _compact(frame: pd.DataFrame, axes: list[str]) -> dict[str, np.ndarray]:
    """Fastest kernel per shape, as int32 axes and float32 latency (ms)."""
    best = frame.groupby(axes, as_index=False)["latency"].min().sort_values(axes)
    out = {a: best[a].to_numpy() for a in axes}
    out = {a: (v.astype(np.int32) if np.issubdtype(v.dtype, np.integer) else v.astype(str))
           for a, v in out.items()}
    out["latency_ms"] = best["latency"].to_numpy(dtype=np.float32)
    return out


def _codes(values: np.ndarray, names: tuple[str, ...]) -> np.ndarray:
    return np.array([names.index(v) for v in values], dtype=np.int8)


def _versions(files: set[str], gpu: str, op: str, engine: str, name: str) -> list[str]:
    return sorted({n.split("/")[-2] for n in files if n.startswith(f"{DATA}/{gpu}/{op}/{engine}/")
                   and n.endswith(f"/{name}.parquet")}, key=_version_key)


def _sibling_rows(mirror: Path, commit: str, files: set[str], gpu: str, op: str, name: str,
                  used: list[dict[str, str]]) -> pd.DataFrame | None:
    """The first graph-timing sibling engine's table on this GPU (its oldest complete release)."""
    for eng in ("sglang", "trtllm"):
        version = pick_version(files, gpu, eng)
        if version is not None and version in _versions(files, gpu, op, eng, name):
            path = f"{DATA}/{gpu}/{op}/{eng}/{version}/{name}.parquet"
            used.append({"table": f"{name} (fp8_block rows)", "path": path, "engine": eng,
                         "version": version})
            return _read(mirror, commit, path)
    return None


def _quantize_rows(mirror: Path, commit: str, files: set[str], gpu: str, engine: str,
                   used: list[dict[str, str]]) -> pd.DataFrame | None:
    """compute_scale of the engine on this GPU (its oldest release measured), else TensorRT-LLM's."""
    for eng in (engine, "trtllm"):
        versions = _versions(files, gpu, "quantize", eng, "computescale_perf")
        if versions:
            path = f"{DATA}/{gpu}/quantize/{eng}/{versions[0]}/computescale_perf.parquet"
            used.append({"table": "computescale_perf", "path": path, "engine": eng, "version": versions[0]})
            return _read(mirror, commit, path)
    return None


MOE_SHAPE = ["moe_dtype", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size", "moe_ep_size"]
# MoE kernels a sibling engine's collection measured that this engine runs too: the trtllm-gen kernel
# library that FlashInfer ships, which SGLang's `--moe-runner-backend flashinfer_trtllm` calls,
# TensorRT-LLM's `TRTLLM` MoE backend is (its Blackwell DeepSeek and gpt-oss recipes' `moe_config.backend`),
# and vLLM calls on Blackwell (its gpt-oss recipes' VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8). The source measured
# it under SGLang at the most shapes (its TensorRT-LLM block-fp8 MoE rows are DeepGEMM's; its vLLM
# MXFP4 x MXFP8 rows lack gpt-oss's shape)
MOE_SIBLING_KERNELS = {"trtllm": ("sglang", "flashinfer_trtllm"), "vllm": ("sglang", "flashinfer_trtllm")}


# The MoE kernel each engine's serving recipes launch, per GPU generation and expert precision, by the
# source's `kernel_source` (a substring): where the tables measured it at a shape, that shape keeps only its
# rows, at every token count (a prefill's and a decode's alike: the runner is chosen at launch, not per
# batch), instead of the fastest of every kernel the releases measured. InferenceX's DeepSeek-R1 recipes:
# SGLang on B200/B300 `--moe-runner-backend flashinfer_trtllm` (dsr1_fp8_b200.sh, dsr1_fp4_b200.sh,
# dsr1_fp{4,8}_b300.sh), where SGLang 0.5.9/0.5.10's tables hold Triton's fp8 and CuteDSL's fp4 kernels too
# (CuteDSL's NVFP4 at 8,192 tokens, EP 8: 0.57 ms, TRT-LLM-gen's 0.68 ms); TensorRT-LLM on Blackwell
# `moe_config.backend: TRTLLM` without attention DP (dsr1_fp{4,8}_b200_trt.sh), FlashInfer's TRT-LLM-gen
# kernels (measured under SGLang), where its own tables hold DeepGEMM's fp8 and CUTLASS's fp4 kernels. On
# Hopper each engine's tables hold one kernel per precision (SGLang Triton, TensorRT-LLM CUTLASS).
# Unquantized (bf16) experts run each engine's default kernel: Triton's fused MoE in SGLang (0.5.6 and
# 0.5.8's UnquantizedFusedMoEMethod has no TRT-LLM-gen path and takes FlashInfer's CUTLASS kernel only under
# `--moe-runner-backend flashinfer_cutlass`; its server args pick flashinfer_trtllm for Qwen3 MoE on sm100
# only for fp8 and modelopt_fp4 checkpoints) and in vLLM (select_unquantized_moe_backend: FlashInfer's bf16
# kernels only under VLLM_USE_FLASHINFER_MOE_FP16=1); no public run sets those flags. The later releases'
# FlashInfer bf16 rows (SGLang 0.5.14 on Blackwell: TRT-LLM-gen, 19.7 us for Qwen3-235B's experts at 1 token,
# TP 8, where Triton's takes 33-38 us; on Hopper: CUTLASS) are kernels those runs did not launch.
_BF16_TRITON = {"bfloat16": "triton"}
LAUNCHED_MOE_KERNEL = {
    ("sglang", "blackwell"): {"fp8_block": "flashinfer_trtllm", "nvfp4": "flashinfer_trtllm", **_BF16_TRITON},
    ("sglang", "hopper"): _BF16_TRITON,
    ("trtllm", "blackwell"): {"fp8_block": "flashinfer_trtllm", "nvfp4": "flashinfer_trtllm"},
    # vLLM's Triton MoE: `vllm_fused_moe` to 0.22, `..._triton_tritonexperts` from 0.24
    ("vllm", "blackwell"): {"bfloat16": ("vllm_fused_moe", "triton")},
    ("vllm", "hopper"): {"bfloat16": ("vllm_fused_moe", "triton")},
}
BLACKWELL = ("b200_sxm", "gb200", "b300_sxm")
# ... and the kernel they launch with attention data parallelism where it differs (a second table, `moe_adp`,
# read for attention-DP layouts): TensorRT-LLM's DeepSeek-R1 FP4 recipe on B200 sets `MOE_BACKEND="CUTLASS"`
# when DP_ATTENTION is true (dsr1_fp4_b200_trt.sh from 6eecc0e66, 2026-02-03; before, CUTLASS from
# concurrency 256 at 1k prompts and above 32 at 8k, the concurrencies its configs ran attention DP at): its
# own CUTLASS rows, 1.3-1.9x FlashInfer's TRT-LLM-gen kernel at 256-8,192 tokens, EP 8
LAUNCHED_MOE_KERNEL_ADP = {("trtllm", "blackwell"): {"nvfp4": "moe_torch_flow_cutlass"}}


def _launched_kernel_only(moe: pd.DataFrame, gpu: str, engine: str) -> pd.DataFrame:
    """Per shape, the rows of the kernel the engine's recipes launch where any release measured it."""
    generation = "blackwell" if gpu in BLACKWELL else "hopper"
    kernels = LAUNCHED_MOE_KERNEL.get((engine, generation), {})
    if not kernels:
        return moe
    wanted = [kernels.get(d, ()) for d in moe.moe_dtype]
    launched = pd.Series([any(k in str(src) for k in ((w,) if isinstance(w, str) else w))
                          for w, src in zip(wanted, moe.kernel_source, strict=True)], index=moe.index)
    has = moe[launched][MOE_SHAPE].drop_duplicates().assign(_has=True)
    moe = moe.merge(has, on=MOE_SHAPE, how="left")
    keep = moe._has.isna().to_numpy() | launched.to_numpy()
    return moe[keep].drop(columns="_has")


def _moe_rows(mirror: Path, commit: str, files: set[str], gpu: str, engine: str,
              used: list[dict[str, str]]) -> pd.DataFrame:
    """Every MoE row the engine's releases measured on this GPU (and its sibling kernels'): a release's
    collection covers some splits and kernels only (TensorRT-LLM 1.2's B200 block-fp8 MoE has no split of
    fewer than 16 GPUs; SGLang 0.5.9's has Triton's kernel where the serving recipes run FlashInfer's
    TRT-LLM-gen one, measured from 0.5.14). At power-law routing where any release measured the shape so, else
    balanced; the kernel the engine's recipes launch where measured (LAUNCHED_MOE_KERNEL), and of what is
    left the fastest per shape (below)."""
    frames = []
    sources = [(engine, None)]
    if engine in MOE_SIBLING_KERNELS:
        sources.append(MOE_SIBLING_KERNELS[engine])
    for eng, kernel in sources:
        for ver in _versions(files, gpu, "moe", eng, "moe_perf"):
            path = f"{DATA}/{gpu}/moe/{eng}/{ver}/moe_perf.parquet"
            rows = _read(mirror, commit, path)
            if kernel is not None:
                # the sibling's kernel at the precisions the engine's recipes launch it (quantized experts:
                # no recipe runs FlashInfer's bf16 MoE, LAUNCHED_MOE_KERNEL)
                rows = rows[rows.kernel_source.astype(str).str.contains(kernel)
                            & (rows.moe_dtype != "bfloat16")]
            rows = rows[rows.distribution.isin(["power_law_1.01", "balanced"])
                        & rows.moe_dtype.isin(MOE_DTYPES) & (rows.num_tokens <= MOE_MAX_TOKENS)
                        & (rows.num_tokens & (rows.num_tokens - 1) == 0) & (rows.moe_tp_size <= 8)
                        & (rows.moe_tp_size * rows.moe_ep_size <= MOE_MAX_GPUS)]
            if len(rows):
                used.append({"table": "moe_perf" + (f" ({kernel} rows)" if kernel else ""), "path": path,
                             "engine": eng, "version": ver})
                frames.append(rows)
    moe = pd.concat(frames, ignore_index=True)
    power = moe.distribution == "power_law_1.01"
    measured_so = moe[power][MOE_SHAPE].drop_duplicates().assign(_power=True)
    moe = moe.merge(measured_so, on=MOE_SHAPE, how="left")
    return moe[moe._power.isna() | power.to_numpy()].drop(columns="_power").reset_index(drop=True)


def _adp_moe_rows(moe: pd.DataFrame, gpu: str, engine: str) -> pd.DataFrame | None:
    """The MoE rows of the kernel the engine launches under attention DP, where that differs
    (LAUNCHED_MOE_KERNEL_ADP): only its precisions, only the shapes it was measured at."""
    kernels = LAUNCHED_MOE_KERNEL_ADP.get((engine, "blackwell" if gpu in BLACKWELL else "hopper"), {})
    if not kernels:
        return None
    rows = moe[moe.moe_dtype.isin(list(kernels))]
    rows = rows[[kernels[d] in str(k) for d, k in zip(rows.moe_dtype, rows.kernel_source, strict=True)]]
    return rows if len(rows) else None


def _gemm_rows(mirror: Path, commit: str, files: set[str], gpu: str, engine: str,
               used: list[dict[str, str]]) -> pd.DataFrame:
    """The engine's GEMM rows from every release measured on this GPU, per shape the median over the releases
    of each one's fastest kernel: one release's collection can be slow throughout (vLLM 0.14's H200
    per-tensor fp8 GEMM of 8192 x 8192 at 4 rows: 29.8 us; 0.18, 0.19 and 0.24: 20.8-22.9 us) or hold a
    single fast outlier, and our H100's cuBLASLt fp8 with its cast is 0.78x the 0.14-only read at the median
    (data/measurements/h100_small_gemm_graph_2026-11-27.json)."""
    shape = ["gemm_dtype", "m", "n", "k"]
    frames = []
    for ver in _versions(files, gpu, "gemm", engine, "gemm_perf"):
        path = f"{DATA}/{gpu}/gemm/{engine}/{ver}/gemm_perf.parquet"
        rows = _read(mirror, commit, path)
        rows = rows[rows.gemm_dtype.isin(GEMM_DTYPES) & (rows.m <= GEMM_MAX_M) & (rows.m & (rows.m - 1) == 0)]
        if len(rows):
            used.append({"table": "gemm_perf", "path": path, "engine": engine, "version": ver})
            frames.append(rows.groupby(shape, as_index=False)["latency"].min())
    return pd.concat(frames, ignore_index=True).groupby(shape, as_index=False)["latency"].median()


def _allreduce_rows(mirror: Path, commit: str, files: set[str], gpu: str, engine: str,
                    used: list[dict[str, str]]) -> pd.DataFrame | None:
    """The engine's custom all-reduce inside a CUDA graph, from every release measured on this GPU (the
    fastest per size kept): single releases carry slow outliers the kernel does not have elsewhere (vLLM
    0.14's 8-GPU H200 rows: 44 us at 512 kB where 0.18, 0.19 and SGLang's copy of the kernel take 14-17 us;
    TensorRT-LLM 1.2's 4-GPU H100/H200 rows: 9-11 us at 32-256 kB, 3.6-7.7 us in 1.3)."""
    frames = []
    for ver in _versions(files, gpu, "comm", engine, "custom_allreduce_perf"):
        path = f"{DATA}/{gpu}/comm/{engine}/{ver}/custom_allreduce_perf.parquet"
        rows = _read(mirror, commit, path)
        if "backend" in rows:  # vLLM and SGLang measure eager and graph; a decode step runs in a CUDA graph
            graph = rows[rows.backend.astype(str).str.contains("graph")]
            rows = graph if len(graph) else rows
        used.append({"table": "custom_allreduce_perf", "path": path, "engine": engine, "version": ver})
        frames.append(rows)
    return pd.concat(frames, ignore_index=True) if frames else None


def import_one(mirror: Path, commit: str, files: set[str], gpu: str, engine: str, version: str
               ) -> tuple[dict[str, np.ndarray], list[dict[str, str]]]:
    arrays: dict[str, np.ndarray] = {}
    used: list[dict[str, str]] = []

    def take(op: str, name: str, eng: str = engine, ver: str = version) -> pd.DataFrame | None:
        path = f"{DATA}/{gpu}/{op}/{eng}/{ver}/{name}.parquet"
        if path not in files:
            return None
        used.append({"table": name, "path": path, "engine": eng, "version": ver})
        return _read(mirror, commit, path)

    g = _gemm_rows(mirror, commit, files, gpu, engine, used)
    if engine in EAGER_FP8_BLOCK:
        # the source times vLLM's block-fp8 GEMM without a CUDA graph (collector/vllm/collect_gemm.py:
        # use_cuda_graph=gemm_type != "fp8_block"): its small-m rows are the host's launch time, 3x the
        # kernels (vs our H100 graph replays, data/measurements/h100_small_gemm_graph_2026-11-27.json).
        # Serving runs them in a CUDA graph: the sibling engine's graph-timed block-fp8 rows (DeepGEMM, which
        # vLLM dispatches to)
        sibling = _sibling_rows(mirror, commit, files, gpu, "gemm", "gemm_perf", used)
        if sibling is not None:
            g = pd.concat([g[g.gemm_dtype != "fp8_block"],
                           sibling[(sibling.gemm_dtype == "fp8_block") & (sibling.m <= GEMM_MAX_M)
                                   & (sibling.m & (sibling.m - 1) == 0)]])
    t = _compact(g, ["gemm_dtype", "m", "n", "k"])
    t["gemm_dtype"] = _codes(t["gemm_dtype"], GEMM_DTYPES)
    arrays.update({f"gemm.{k}": v for k, v in t.items()})

    # per-tensor fp8 rows quantize the activations dynamically (the collectors give no input scale); a static
    # checkpoint skips the scale's computation: the engine's measured compute_scale (dynamic minus static
    # quantization of the same m x k), subtracted at query time as the source does for "fp8_static"
    q = _quantize_rows(mirror, commit, files, gpu, engine, used)
    if q is not None:
        q = q[(q.quant_dtype == "fp8") & (q.m <= GEMM_MAX_M)]
        t = _compact(q, ["m", "k"])
        arrays.update({f"compute_scale.{k}": v for k, v in t.items()})

    a = take("attention", "generation_attention_perf")
    assert a is not None
    if "window_size" in a:
        a = a[a.window_size == 0]
    a = a.assign(kv_len=a.isl + a.step, kv_fp8=(a.kv_cache_dtype == "fp8").astype(int))
    t = _compact(a, ["kv_fp8", "head_dim", "num_heads", "num_key_value_heads", "batch_size", "kv_len"])
    arrays.update({f"gen_attn.{k}": v for k, v in t.items()})

    c = take("attention", "context_attention_perf")
    if c is not None:
        if "window_size" in c:
            c = c[c.window_size == 0]
        c = c[(c.batch_size == 1)].assign(kv_fp8=(c.kv_cache_dtype == "fp8").astype(int))
        t = _compact(c, ["kv_fp8", "head_dim", "num_heads", "num_key_value_heads", "isl"])
        arrays.update({f"ctx_attn.{k}": v for k, v in t.items()})

    # MLA kernels: the engine's own, else the first sibling engine on this GPU that has them (FlashMLA /
    # TRT-LLM MLA kernels are shared); the manifest names which
    for prefix, name in (("gen_mla", "generation_mla_perf"), ("ctx_mla", "context_mla_perf")):
        m = take("mla", name)
        if m is None:
            for eng in ("sglang", "trtllm", "vllm"):
                vers = sorted({n.split("/")[-2] for n in files if n.startswith(f"{DATA}/{gpu}/mla/{eng}/")
                               and n.endswith(f"/{name}.parquet")}, key=_version_key)
                if vers:
                    m = take("mla", name, eng, vers[0])
                    break
        if m is None:
            continue
        m = m.assign(kv_fp8=(m.kv_cache_dtype == "fp8").astype(int))
        if prefix == "gen_mla":
            m = m.assign(kv_len=m.isl + m.step)
            t = _compact(m, ["kv_fp8", "num_heads", "batch_size", "kv_len"])
        else:
            t = _compact(m[m.batch_size == 1], ["kv_fp8", "num_heads", "isl"])
        arrays.update({f"{prefix}.{k}": v for k, v in t.items()})

    moe = _moe_rows(mirror, commit, files, gpu, engine, used)
    adp = _adp_moe_rows(moe, gpu, engine)
    for prefix, rows in (("moe", _launched_kernel_only(moe, gpu, engine)), ("moe_adp", adp)):
        if rows is None:
            continue
        t = _compact(rows, MOE_SHAPE + ["num_tokens"])
        t["moe_dtype"] = _codes(t["moe_dtype"], MOE_DTYPES)
        arrays.update({f"{prefix}.{k}": v for k, v in t.items()})

    ar = _allreduce_rows(mirror, commit, files, gpu, engine, used)
    if ar is not None:
        t = _compact(ar, ["num_gpus", "message_size"])
        arrays.update({f"allreduce.{k}": v for k, v in t.items()})
    return arrays, used


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", type=Path, default=MIRROR)
    parser.add_argument("--commit", default=PINNED_COMMIT)
    args = parser.parse_args(argv)
    files = _listing(args.mirror, args.commit)
    OUT.mkdir(parents=True, exist_ok=True)
    manifest: dict = {
        "source_repo": SOURCE_REPO, "commit": args.commit, "license": LICENSE,
        "license_note": "tables derived from AIConfigurator's measured per-kernel data (Apache-2.0); "
                        "no code of that project is used or shipped",
        "tool": "tools/import_kernel_tables.py", "units": "latency_ms: milliseconds per kernel call, one GPU",
        "gemm_dtypes": list(GEMM_DTYPES), "moe_dtypes": list(MOE_DTYPES), "tables": {},
    }
    for gpu_id, gpu in GPUS.items():
        for engine, src_engine in ENGINES.items():
            version = pick_version(files, gpu, src_engine)
            if version is None:
                print(f"{gpu_id} {engine}: no complete version, skipped")
                continue
            arrays, used = import_one(args.mirror, args.commit, files, gpu, src_engine, version)
            name = f"{gpu_id}__{engine}.npz"
            np.savez_compressed(OUT / name, **arrays)
            manifest["tables"][f"{gpu_id}/{engine}"] = {
                "file": name, "gpu": gpu_id, "source_gpu": gpu, "engine": engine, "engine_version": version,
                "sources": used, "rows": {k.split(".")[0]: int(len(v)) for k, v in arrays.items()
                                          if k.endswith("latency_ms")},
            }
            print(f"{gpu_id} {engine} {version}: {(OUT / name).stat().st_size / 1e3:.0f} kB")
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    total = sum(p.stat().st_size for p in OUT.iterdir())
    print(f"total {total / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
