#!/usr/bin/env python3
"""Plan each published MLPerf Inference SERVER / INTERACTIVE result (the rows of
data/reference/mlperf_server_published.csv) as the planner would size it, and compare the planner's goodput
for the submission's 8 GPUs with the published "Completed tokens per second". A held-out check: nothing in
the planner was fitted on these rows.

    python -m tools.mlperf_check              # the table (docs/MLPERF.md carries its output)
    python -m tools.mlperf_check --markdown   # the same as a Markdown table
    python -m tools.mlperf_check --write      # refresh docs/MLPERF.md's two tables (a test compares them)

How a row is planned (every choice is the submission's own where its config states it):
- the GPU, the submission's layout (tp x pp per replica, 8 / (tp x pp) replicas on the 8 GPUs), its weight
  and KV-cache precision, engine `trt-llm` (every row ran TensorRT-LLM), its cap on running sequences
  (`gpu_batch_size` -> `batch`) and its token budget per iteration (`max_num_tokens` ->
  `load.max_num_batched_tokens`);
- Poisson arrivals (MLPerf's server scenario; `load.arrival_cv` 1), fixed lengths at the dataset's means:
  the output length is the run's own (completed tokens / completed samples), the input length an assumed
  mean (the CSV's `input_len_mean_assumed`; no source read publishes it, see
  data/reference/mlperf_server_published.md), and the check is repeated at the CSV's low and high inputs;
- the objective: MLPerf's p99 TTFT limit as `load.slo.ttft_ms` at percentile 99, and its p99 TPOT limit as
  `load.slo.tpot_ms` (the contract's mean-TPOT objective: the serving model decodes every request at the
  mean iteration, so its TPOT p50 = p99 = mean). The ITL p99 objective (`itl_ms`, pooled over tokens) is
  shown beside it as the stricter reading: a prompt chunk in an iteration is a long gap for every sequence;
- the operating point `load.at_goodput`: `serving.goodput_request_rate` per replica, times the replicas and
  the output length, is the planned tokens/s of the 8 GPUs.
"""

from __future__ import annotations

import argparse
import csv
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.contract.planning import plan_dict  # noqa: E402

CSV_PATH = ROOT / "data" / "reference" / "mlperf_server_published.csv"

# Llama-2-70B has no preset: its shape from meta-llama/Llama-2-70b-chat-hf config.json (MLPerf's checkpoint):
# hidden_size 8192, intermediate_size 28672, 80 layers, 64 heads, 8 KV heads, vocab 32000, 4,096 positions.
LLAMA_2_70B: dict[str, Any] = {
    "name": "Llama-2-70B-chat",
    "n_layers": 80,
    "d_model": 8192,
    "n_heads": 64,
    "n_kv_heads": 8,
    "head_dim": 128,
    "d_ff": 28672,
    "vocab_size": 32000,
    "max_position_embeddings": 4096,
    "tied_embeddings": False,
    "source": "https://huggingface.co/meta-llama/Llama-2-70b-chat-hf/blob/main/config.json",
}
PRESETS = {"llama-3.1-8b": "llama-3.1-8b", "llama-3.1-405b": "llama-3.1-405b"}


@dataclass(frozen=True)
class Check:
    """One row planned: the published and planned tokens/s of the 8 GPUs, and what binds the plan."""

    row_id: str
    model: str
    gpu: str
    scenario: str
    layout: str
    published_tok_s: float
    planned_tok_s: float
    planned_low_input_tok_s: float
    planned_high_input_tok_s: float
    planned_itl_objective_tok_s: float
    confirmed_tok_s: float
    binding: str

    @property
    def ratio(self) -> float:
        return self.planned_tok_s / self.published_tok_s


def read_rows(path: Path = CSV_PATH) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def scenario_for(row: dict[str, str], prompt_len: int | None = None,
                 objective: str = "tpot") -> dict[str, Any]:
    """The scenario of one row at the goodput under its MLPerf limits (`objective` "tpot" or "itl")."""
    slo: dict[str, Any] = {"ttft_ms": float(row["ttft_limit_ms"]), "percentile": 99}
    slo["tpot_ms" if objective == "tpot" else "itl_ms"] = float(row["tpot_limit_ms"])
    load: dict[str, Any] = {"at_goodput": True, "slo": slo, "arrival_cv": 1.0}
    if row["max_num_tokens"]:
        load["max_num_batched_tokens"] = int(row["max_num_tokens"])
    return {
        "model": LLAMA_2_70B if row["model"] == "llama-2-70b" else PRESETS[row["model"]],
        "gpu": row["gpu"],
        "tp": int(row["tp"]),
        "pp": int(row["pp"]),
        "weights": row["weights"],
        "kv_cache": row["kv_cache"],
        "engine": row["engine"],
        "prompt_len": int(prompt_len or row["input_len_mean_assumed"]),
        "output_len": round(float(row["output_tokens_per_sample"])),
        "batch": int(row["max_batch_per_replica"]),
        "load": load,
    }


def replicas(row: dict[str, str]) -> int:
    return int(row["gpus_total"]) // (int(row["tp"]) * int(row["pp"]))


def planned_tok_s(row: dict[str, str], prompt_len: int | None = None, objective: str = "tpot",
                  confirmed: bool = False) -> tuple[float, dict[str, Any]]:
    """The 8 GPUs' output tokens/s at the plan's goodput (or the sizing search's confirmed rate)."""
    scenario = scenario_for(row, prompt_len, objective)
    serving = plan_dict(scenario)["serving"]
    rate = serving["goodput_request_rate"] or 0.0
    if confirmed:
        rate = (serving.get("goodput_binding") or {}).get("confirmed_request_rate") or 0.0
    return rate * scenario["output_len"] * replicas(row), serving


def check_row(row: dict[str, str]) -> Check:
    tok_s, serving = planned_tok_s(row)
    binding = serving.get("goodput_binding") or {}
    return Check(
        row_id=row["row_id"],
        model=row["model"],
        gpu=row["gpu"],
        scenario=row["scenario"],
        layout=f"{replicas(row)} x tp{row['tp']} {row['weights']}/{row['kv_cache']}",
        published_tok_s=float(row["tokens_per_s"]),
        planned_tok_s=tok_s,
        planned_low_input_tok_s=planned_tok_s(row, int(row["input_len_low"]))[0],
        planned_high_input_tok_s=planned_tok_s(row, int(row["input_len_high"]))[0],
        planned_itl_objective_tok_s=planned_tok_s(row, objective="itl")[0],
        confirmed_tok_s=planned_tok_s(row, confirmed=True)[0],
        binding=f"{binding.get('constraint', '-')} ({binding.get('cause', '-')})",
    )


@dataclass(frozen=True)
class AtRate:
    """One row planned at its published rate (open loop, Poisson): the plan's latencies beside the log's."""

    row_id: str
    scenario: str
    utilization: float
    ttft_p99_ms: float
    measured_ttft_p99_ms: float
    tpot_mean_ms: float
    measured_tpot_mean_ms: float
    measured_tpot_p99_ms: float

    @property
    def tpot_ratio(self) -> float:
        return self.tpot_mean_ms / self.measured_tpot_mean_ms


def at_published_rate(row: dict[str, str]) -> AtRate:
    """The row's scenario at `load.request_rate` = the completed samples/s per replica."""
    scenario = scenario_for(row)
    load = {k: v for k, v in scenario["load"].items() if k not in ("at_goodput", "slo")}
    load["request_rate"] = float(row["samples_per_s"]) / replicas(row)
    serving = plan_dict({**scenario, "load": load})["serving"]
    return AtRate(
        row_id=row["row_id"],
        scenario=row["scenario"],
        utilization=load["request_rate"] / serving["max_request_rate"],
        ttft_p99_ms=serving["ttft_ms"]["p99"],
        measured_ttft_p99_ms=float(row["ttft_p99_ms"]),
        tpot_mean_ms=serving["tpot_ms"]["mean"],
        measured_tpot_mean_ms=float(row["tpot_mean_ms"]),
        measured_tpot_p99_ms=float(row["tpot_p99_ms"]),
    )


def check_all(path: Path = CSV_PATH) -> list[Check]:
    return [check_row(row) for row in read_rows(path)]


HEADER = ("row", "model", "GPU", "scenario", "layout", "published tok/s", "planned tok/s", "ratio",
          "ratio, input low-high", "ratio, ITL p99 objective", "ratio, confirmed rate", "binds in the plan")


def table_rows(checks: list[Check]) -> list[tuple[str, ...]]:
    out = []
    for c in checks:
        p = c.published_tok_s
        out.append((c.row_id, c.model, c.gpu, c.scenario, c.layout, f"{p:,.0f}", f"{c.planned_tok_s:,.0f}",
                    f"{c.ratio:.2f}",
                    f"{c.planned_high_input_tok_s / p:.2f}-{c.planned_low_input_tok_s / p:.2f}",
                    f"{c.planned_itl_objective_tok_s / p:.2f}", f"{c.confirmed_tok_s / p:.2f}", c.binding))
    return out


AT_RATE_HEADER = ("row", "scenario", "planned load (of capacity)", "TTFT p99 planned / measured ms",
                  "TPOT mean planned / measured ms", "TPOT ratio", "measured TPOT p99 ms")


def at_rate_rows(points: list[AtRate]) -> list[tuple[str, ...]]:
    return [(a.row_id, a.scenario, f"{a.utilization:.0%}",
             f"{a.ttft_p99_ms:,.0f} / {a.measured_ttft_p99_ms:,.0f}",
             f"{a.tpot_mean_ms:.1f} / {a.measured_tpot_mean_ms:.1f}", f"{a.tpot_ratio:.2f}",
             f"{a.measured_tpot_p99_ms:.1f}") for a in points]


DOC = ROOT / "docs" / "MLPERF.md"


def _markdown_line(cells: tuple[str, ...]) -> str:
    return "| " + " | ".join(cells) + " |"


def markdown_rows(checks: list[Check] | None = None) -> list[str]:
    """The two tables' data rows as docs/MLPERF.md prints them (goodput, then latency at the published
    rate); `checks`: the goodput rows already planned (check_all), else planned here."""
    rows = table_rows(check_all() if checks is None else checks) + at_rate_rows(
        [at_published_rate(row) for row in read_rows()])
    return [_markdown_line(r) for r in rows]


def write_doc(path: Path = DOC) -> None:
    """Replace docs/MLPERF.md's table rows (the lines starting `| mlp-`), in order, with the tool's."""
    fresh = iter(markdown_rows())
    lines = [next(fresh) if line.startswith("| mlp-") else line for line in path.read_text().splitlines()]
    path.write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument("--write", action="store_true", help="refresh docs/MLPERF.md's two tables")
    args = parser.parse_args(argv)
    if args.write:
        write_doc()
        return 0
    _print(HEADER, table_rows(check_all()), args.markdown)
    print()
    _print(AT_RATE_HEADER, at_rate_rows([at_published_rate(row) for row in read_rows()]), args.markdown)
    return 0


def _print(header: tuple[str, ...], rows: list[tuple[str, ...]], markdown: bool) -> None:
    if markdown:
        print(_markdown_line(header))
        print("|" + "|".join(" --- " for _ in header) + "|")
        for r in rows:
            print(_markdown_line(r))
        return
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    for r in (header, *rows):
        print("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)))


if __name__ == "__main__":
    raise SystemExit(main())
