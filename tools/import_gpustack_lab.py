#!/usr/bin/env python3
"""Import GPUStack performance-lab runs (`vllm bench serve` printouts) into serving_runs_published.csv.

    python -m tools.import_gpustack_lab --repo /path/to/gpustack.git          # print what would be added
    python -m tools.import_gpustack_lab --repo /path/to/gpustack.git --write  # replace the gpl-* rows

Issue 30. Reads each page of PAGES at its pinned commit with `git show` (a clone or bare mirror of
github:gpustack/gpustack), pairs every "Benchmark result" printout with the serving command above it, and
writes one row per run in the CSV's schema (`run_id` gpl-NNNNN, `source` gpustack-performance-lab). Nothing is
typed by hand: lengths come from the page's "Benchmark Dataset" list and are checked against the printout's
token totals; engine versions from its "Engine Version" list; layout, precision and token budget from the
serving command.

The pages' client (`vllm bench serve --num-prompts N`, no `--max-concurrency`, request rate inf) sends every
prompt at once: a burst, planned as a closed loop with concurrency = num_prompts = the successful requests.
Only the "ShareGPT batch size 4" runs print a `Maximum request concurrency`. The client ran without
`--ignore-eos`, so outputs may end early: `output_len` is the published generated tokens / requests (the
planner plans that mean as a fixed length); `metric_stat` says where it fell short of the requested length.
Runs are left out (and counted by reason) where they crashed, use speculative decoding, pipeline or vLLM data
parallelism, SGLang DP attention without a DP size, or a flag this importer does not know.
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
RUNS_CSV = ROOT / "data" / "reference" / "serving_runs_published.csv"
SOURCE = "gpustack-performance-lab"
PREFIX = "gpl"
# Every page at the last commit that changed it (2026-01-06): NVIDIA H100 / H200 pages only.
COMMIT = "1f37f1b8bd79c6b424a0cb55c7abd08a5c2132dc"
PAGES = {
    f"docs/performance-lab/{p}.md": COMMIT
    for p in (
        "qwen3-235b-a22b/h100",
        "glm-4.5-air/h100",
        "glm-4.x/h100",
        "glm-4.x/h200",
        "qwen3-32b/h100",
        "qwen3-14b/h100",
        "gpt-oss-120b/h100",
        "gpt-oss-20b/h100",
        "deepseek-r1/h200",
    )
}
GPUS = {"h100": "h100-sxm", "h200": "h200"}
# checkpoint name (the command's last path part, without -FP8) -> (Hugging Face id's organisation, preset)
MODELS = {
    "Qwen3-235B-A22B-Instruct-2507": ("Qwen", "qwen3-235b-a22b"),
    "Qwen3-32B": ("Qwen", "qwen3-32b"),
    "Qwen3-14B": ("Qwen", "qwen3-14b"),
    "GLM-4.5-Air": ("zai-org", "glm-4.5-air"),
    "GLM-4.6": ("zai-org", "glm-4.6"),
    "gpt-oss-120b": ("openai", "gpt-oss-120b"),
    "gpt-oss-20b": ("openai", "gpt-oss-20b"),
    "DeepSeek-R1-0528": ("deepseek-ai", "deepseek-r1"),
}
# each page's model (its folder): a command naming another model is left out
PAGE_MODELS = {
    "qwen3-235b-a22b": "qwen3-235b-a22b",
    "glm-4.5-air": "glm-4.5-air",
    "glm-4.x": "glm-4.6",
    "qwen3-32b": "qwen3-32b",
    "qwen3-14b": "qwen3-14b",
    "gpt-oss-120b": "gpt-oss-120b",
    "gpt-oss-20b": "gpt-oss-20b",
    "deepseek-r1": "deepseek-r1",
}
# Flags that change nothing the planner plans (ports, parsers, kernel choices inside the same layout).
NEUTRAL = {
    "--host",
    "--port",
    "--tool-call-parser",
    "--reasoning-parser",
    "--served-model-name",
    "--trust-remote-code",
    "--max-model-len",
    "--max_seq_len",
    "--enable-auto-tool-choice",
    "--attention-backend",
    "--enable-torch-compile",
    "--enable_chunked_prefill",
    "--gpu-memory-utilization",
}
ENGINE_LABELS = {"vLLM": "vllm", "SGLang": "sglang", "TensorRT-LLM": "trt-llm"}
SKIP_FLAGS = ("--speculative", "--pp-size", "-pp", "--pipeline-parallel-size", "-dp", "--data-parallel-size")
PRINTOUT = {
    "Successful requests": "requests",
    "Benchmark duration (s)": "duration_s",
    "Total input tokens": "input_tokens",
    "Total generated tokens": "generated_tokens",
    "Request throughput (req/s)": "request_throughput",
    "Output token throughput (tok/s)": "output_throughput",
    "Total Token throughput (tok/s)": "total_token_throughput",
    "Peak concurrent requests": "peak_concurrent",
    "Maximum request concurrency": "max_concurrency",
    **{
        f"{stat} {m} (ms)": f"{m.lower()}_{col}_ms"
        for m in ("TTFT", "TPOT", "ITL")
        for stat, col in (("Mean", "mean"), ("Median", "median"), ("P99", "p99"))
    },
}


@dataclass
class Printout:
    line: int  # 1-based line of the "Serving Benchmark Result" header in the page
    label: str  # the comment above it inside the result block ("random 4K input"), "" where none
    command: str
    values: dict[str, float] = field(default_factory=dict)


def page_text(repo: Path, path: str, commit: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "show", f"{commit}:{path}"], check=True, capture_output=True, text=True
    ).stdout


def page_date(repo: Path, path: str) -> str:
    """The month the page was first published (its first commit): the runs predate it."""
    log = subprocess.run(
        [
            "git",
            "-C",
            str(repo),
            "log",
            "--diff-filter=A",
            "--format=%ad",
            "--date=format:%Y-%m",
            COMMIT,
            "--",
            path,
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    return log[-1] if log else ""


def _fenced_blocks(lines: list[str]) -> list[tuple[str, int, list[str]]]:
    """(admonition title, first line index, lines) of each ``` block under a `??? info "..."` title."""
    out, title, i = [], "", 0
    while i < len(lines):
        m = re.match(r'\s*\?\?\?\+? \w+ "(.*)"', lines[i])
        if m:
            title = m.group(1)
        elif lines[i].strip().startswith("```") and title:
            start, i = i + 1, i + 1
            while i < len(lines) and not lines[i].strip().startswith("```"):
                i += 1
            out.append((title, start, lines[start:i]))
            title = ""
        i += 1
    return out


def _command(block: list[str]) -> str:
    joined = " ".join(ln.strip().rstrip("\\").strip() for ln in block if not ln.strip().startswith("#"))
    return " ".join(joined.split())


def printouts(text: str) -> list[Printout]:
    """Every benchmark printout of a page with the serving command in force above it."""
    lines = text.splitlines()
    out: list[Printout] = []
    command = ""
    for title, start, block in _fenced_blocks(lines):
        if "serving script" in title.lower() or "serving command" in title.lower():
            if "serving script" in title.lower():
                command = _command(block)
            continue
        if "benchmark result" not in title.lower():
            continue
        label, current = "", None
        for j, raw in enumerate(block):
            s = raw.strip()
            if s.startswith("#"):
                label = s.lstrip("#").strip()
            elif "Serving Benchmark Result" in s:
                current = Printout(start + j + 1, label, command)
                out.append(current)
                label = ""
            elif current is not None and ":" in s:
                key, _, value = s.partition(":")
                if key.strip() in PRINTOUT:
                    current.values[PRINTOUT[key.strip()]] = float(value.strip())
            elif set(s) == {"="}:
                current = None
    return out


def dataset_lengths(text: str) -> dict[int, int]:
    """The page's random-dataset lengths: input tokens -> output tokens."""
    return {int(a): int(b) for a, b in re.findall(r"(\d+) input tokens, (\d+) output tokens", text)}


def engine_versions(text: str) -> dict[str, str]:
    section = text.split("### Engine Version", 1)[1].split("###", 1)[0]
    return {
        ENGINE_LABELS[name]: version.lstrip("v")
        for name, version in re.findall(r"- (vLLM|SGLang|TensorRT-LLM): (\S+)", section)
    }


def _flags(tokens: list[str]) -> dict[str, str]:
    flags: dict[str, str] = {}
    for i, tok in enumerate(tokens):
        if tok.startswith("-"):
            name, eq, value = tok.partition("=")
            if not eq:
                nxt = tokens[i + 1] if i + 1 < len(tokens) else ""
                value = nxt if nxt and not nxt.startswith("-") else "true"
            flags[name] = value
    return flags


def parse_command(command: str) -> dict[str, Any]:
    """Engine, checkpoint and layout of a serving command; raises ValueError naming what it cannot plan."""
    tokens = [t for t in shlex.split(command) if not re.match(r"^[A-Z_]+=", t)]  # env: attention backend
    if tokens[:2] in (["python3", "-m"], ["python", "-m"]):
        tokens = tokens[2:]
    if "serve" in tokens and tokens[0] == "vllm":
        engine, model = "vllm", tokens[tokens.index("serve") + 1]
    elif tokens and tokens[0] == "sglang.launch_server":
        engine = "sglang"
    elif tokens and tokens[0] == "trtllm-serve":
        engine, model = "trt-llm", tokens[1]
    else:
        raise ValueError(f"unknown engine in {command!r}")
    flags = _flags(tokens)
    if engine == "sglang":
        model = flags.get("--model-path") or flags["--model"]
    for flag in flags:
        if flag.startswith(SKIP_FLAGS) and flag in flags:
            raise ValueError(f"{flag} (speculative decoding, pipeline or data parallelism)")
    tp = int(
        flags.get("-tp")
        or flags.get("--tensor-parallel-size")
        or flags.get("--tp-size")
        or flags.get("--tp")
        or flags.get("--tp_size")
        or 1
    )
    ep = int(
        flags.get("--ep-size") or flags.get("--ep_size") or (tp if "--enable-expert-parallel" in flags else 1)
    )
    dp_attention = "--enable-dp-attention" in flags
    if dp_attention and "--dp-size" not in flags and "--dp" not in flags:
        raise ValueError("--enable-dp-attention without --dp (SGLang's DP size 1: attention not split)")
    known = {
        "-tp",
        "--tensor-parallel-size",
        "--tp-size",
        "--tp",
        "--tp_size",
        "--ep-size",
        "--ep_size",
        "--enable-expert-parallel",
        "--model",
        "--model-path",
        "--max-num-batched-tokens",
        "--max-num-seqs",
        "--async-scheduling",
        "--kv-cache-dtype",
        "--enable-dp-attention",
        "--dp-size",
        "--dp",
        *NEUTRAL,
    }
    unknown = sorted(set(flags) - known)
    if unknown:
        raise ValueError(f"flags not imported: {unknown}")
    name = model.rstrip("/").split("/")[-1]
    base = name[:-4] if name.upper().endswith("-FP8") else name
    if base not in MODELS:
        raise ValueError(f"model {name} has no preset mapping")
    org, preset = MODELS[base]
    fp8 = name.upper().endswith("-FP8") or preset == "deepseek-r1"
    weights, fmt = (
        ("fp4", "mxfp4")
        if preset.startswith("gpt-oss")
        else (("fp8", "fp8-block") if fp8 else ("bf16", "bf16"))
    )
    return {
        "engine": engine,
        "model_hf_id": f"{org}/{name}",
        "model_preset": preset,
        "tp": tp,
        "ep": ep,
        "dp_attention": dp_attention,
        "weights": weights,
        "weights_format": fmt,
        "kv_cache": flags.get("--kv-cache-dtype", "bf16"),
        "max_num_batched_tokens": flags.get("--max-num-batched-tokens", ""),
        "max_num_seqs": flags.get("--max-num-seqs", ""),
        "async_scheduling": "--async-scheduling" in flags,
    }


def _dataset(p: Printout, lengths: dict[int, int]) -> tuple[str, int, int | None]:
    """(dataset, nominal input length or 0 for ShareGPT, the client's max concurrency or None)."""
    label = p.label.lower()
    m = re.match(r"random (\d+)(k?) input", label)
    if m:
        nominal = int(m.group(1)) * (1000 if m.group(2) else 1)
        if nominal not in lengths:
            raise ValueError(f"line {p.line}: {p.label!r} not in the page's dataset list")
        return "random", nominal, None
    if label.startswith("sharegpt batch size"):
        return "sharegpt", 0, int(label.split()[-1])
    return "sharegpt", 0, None


def to_row(
    p: Printout, path: str, commit: str, date: str, versions: dict[str, str], lengths: dict[int, int]
) -> dict[str, Any]:
    """One CSV row; raises ValueError naming why the run cannot be planned as published."""
    v = p.values
    command = p.command + (
        f" {p.label}" if p.label.startswith("--") and p.label.split()[0] not in p.command else ""
    )
    spec = parse_command(command)
    page_model = PAGE_MODELS[path.split("/")[-2]]
    if spec["model_preset"] != page_model:  # gpt-oss-20b's page serves "gpt-oss-120b" once: a typo or not
        raise ValueError(f"command serves {spec['model_preset']} on the {page_model} page")
    dataset, nominal, max_conc = _dataset(p, lengths)
    n = int(v["requests"])
    mean_in, mean_out = v["input_tokens"] / n, v["generated_tokens"] / n
    if max_conc is None and "max_concurrency" in v:
        max_conc = int(v["max_concurrency"])
    if dataset == "random":
        # vLLM 0.10/0.11's --random-range-ratio defaults to 0: every prompt is `nominal` tokens (the 32K runs'
        # totals are exactly 100 x 32,000); re-tokenizing random text moves a few by a token or two
        if abs(mean_in / nominal - 1) > 0.02:
            raise ValueError(f"line {p.line}: {mean_in:.0f} input tokens per request, page says {nominal}")
        prompt_len, requested_out = nominal, lengths[nominal]
    else:
        prompt_len, requested_out = round(mean_in), None
    output_len = max(1, round(mean_out))
    gpu = GPUS[path.split("/")[-1].removesuffix(".md")]
    gpus = spec["tp"]
    burst = max_conc is None
    stat = f"vllm bench serve printout: mean, median and p99 over {n} successful requests" + (
        " sent at once (no --max-concurrency: concurrency = num_prompts)" if burst else ""
    )
    if dataset == "sharegpt":
        stat += (
            f"; ShareGPT, lengths vary ({int(v['input_tokens']):,} input / {int(v['generated_tokens']):,} "
            "output tokens in all): prompt_len and output_len are their means"
        )
    elif requested_out is not None and mean_out < requested_out - 0.5:
        stat += (
            f"; outputs ended early (no --ignore-eos): {int(v['generated_tokens']):,} of "
            f"{n * requested_out:,} requested tokens, output_len is their mean"
        )
    row: dict[str, Any] = {
        "source": SOURCE,
        "source_ref": f"github:gpustack/gpustack@{commit}:{path}",
        "source_run_url": f"https://github.com/gpustack/gpustack/blob/{commit}/{path}#L{p.line}",
        "date": date,
        "engine": spec["engine"],
        "serving_stack": spec["engine"],
        "engine_version": versions.get(spec["engine"], ""),
        "image": "",
        "gpu": gpu,
        "gpus_total": gpus,
        "tp": spec["tp"],
        "pp": 1,
        "ep": spec["ep"],
        "dp_attention": spec["dp_attention"],
        "disaggregated": False,
        "multinode": False,
        "model_hf_id": spec["model_hf_id"],
        "model_preset": spec["model_preset"],
        "weights": spec["weights"],
        "weights_format": spec["weights_format"],
        "kv_cache": spec["kv_cache"],
        "max_num_seqs": spec["max_num_seqs"],
        "max_num_batched_tokens": spec["max_num_batched_tokens"],
        "spec_decode": "none",
        "prompt_len": prompt_len,
        "output_len": output_len,
        "random_range_ratio": 1.0,
        "num_prompts": n,
        "concurrency": n if burst else max_conc,
        "request_rate": "inf",
        "warmup": False,
        "request_throughput": v["request_throughput"],
        "output_throughput": v["output_throughput"],
        "total_token_throughput": v["total_token_throughput"],
        **{k: v[k] for k in v if k.endswith("_ms")},
        "metric_stat": stat,
        "itl_counts_chunks": False,
        "flag": "",
        "serve_command": command,
    }
    return row


def import_rows(repo: Path) -> tuple[pd.DataFrame, dict[str, int]]:
    rows, skipped = [], {}
    for path, commit in PAGES.items():
        text = page_text(repo, path, commit)
        date, versions, lengths = page_date(repo, path), engine_versions(text), dataset_lengths(text)
        for p in printouts(text):
            try:
                rows.append(to_row(p, path, commit, date, versions, lengths))
            except (ValueError, KeyError) as exc:
                key = f"{path.split('/', 2)[-1]}: {exc}"
                skipped[key] = skipped.get(key, 0) + 1
    frame = pd.DataFrame(rows)
    # a page that prints the same result twice (glm-4.x/h200's FP8 TP8 under two headings) holds one run
    metrics = [c for c in frame.columns if c.endswith("_ms") or c.endswith("throughput")]
    repeated = frame.duplicated(["source_ref", "serve_command", "prompt_len", *metrics], keep="first")
    if repeated.any():
        skipped["the same printout twice on a page (kept once)"] = int(repeated.sum())
    frame = frame[~repeated].reset_index(drop=True)
    frame.insert(0, "run_id", [f"{PREFIX}-{i:05d}" for i in range(len(frame))])
    return frame, skipped


def write(frame: pd.DataFrame, path: Path = RUNS_CSV) -> None:
    """Replace the CSV's gpl-* rows with `frame`, leaving every other line as it is (text, not
    re-serialized)."""
    lines = path.read_text().splitlines()
    header = lines[0].split(",")
    if "serve_command" not in header:  # the column this import adds: every earlier row leaves it empty
        lines = [lines[0] + ",serve_command"] + [ln + "," for ln in lines[1:]]
        header.append("serve_command")
    kept = [ln for ln in lines[1:] if not ln.startswith(f"{PREFIX}-")]
    new = frame.reindex(columns=header)
    text = new.to_csv(index=False, header=False, lineterminator="\n")
    path.write_text("\n".join([lines[0], *kept]) + "\n" + text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--repo", type=Path, required=True, help="a clone or mirror of github:gpustack/gpustack"
    )
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args(argv)
    frame, skipped = import_rows(args.repo)
    with pd.option_context("display.width", 220, "display.max_rows", 500):
        print(
            frame[
                [
                    "run_id",
                    "engine",
                    "gpu",
                    "model_preset",
                    "weights",
                    "tp",
                    "ep",
                    "prompt_len",
                    "output_len",
                    "concurrency",
                    "tpot_mean_ms",
                    "ttft_mean_ms",
                ]
            ].to_string(index=False)
        )
    print(f"{len(frame)} rows; left out:")
    for reason, count in sorted(skipped.items()):
        print(f"  {count} x {reason}")
    if args.write:
        write(frame)
    return 0


if __name__ == "__main__":
    sys.exit(main())
