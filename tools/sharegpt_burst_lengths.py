#!/usr/bin/env python3
"""Do ShareGPT's long-tailed lengths explain the GPUStack ShareGPT bursts? (issue 30; a diagnostic, not
part of validation: the bursts stay validation only and nothing here is fitted on them).

    python -m tools.sharegpt_burst_lengths --lengths sharegpt_opt_text_completion_length.pkl

The bursts (GPUStack performance-lab, `vllm bench serve --dataset-name sharegpt`, ~1,000 prompts sent at
once) publish only the mean lengths (prompt ~215, output ~200 tokens); the plan sends every request at those
means. This re-plans them with per-request lengths drawn from a public ShareGPT length distribution.

Source of the distribution: the vLLM paper's artifact (Kwon et al., SOSP 2023, "Efficient Memory Management
for Large Language Model Serving with PagedAttention"), https://github.com/sosp-ae-39/sosp-ae-astra,
`datasets/sharegpt_opt_text_completion_length.pkl` (commit 3180d2f): the (prompt, output) token lengths of
the first round of 84,226 ShareGPT conversations (March 2023), OPT tokenizer. The file has no licence, so it
is read from a path given here, never copied into the repository. vLLM's benchmark filter
(benchmark_serving.py's sample_sharegpt_requests: both >= 4 tokens, prompt <= 1,024, prompt + output <=
2,048) keeps 74,704 of them: prompt mean 119.6, median 34, p90 382, p99 919 (CV 1.64); output mean 348.4,
median 280, p90 764, p99 1,292 (CV 0.82). Its means differ from ShareGPT_V3_unfiltered_cleaned_split's as
the bursts sampled it (~215 / ~200, their published means, Qwen/GLM/gpt-oss tokenizers), so only its shape
is used: each request's lengths are a pair drawn from it, divided by the filtered means and multiplied by
the run's published means.

Result (41 ShareGPT bursts, production profile, medians; means -> ShareGPT shape): mean TPOT -70% -> -53%
(abs. 73% -> 60%), output tokens/s 2.9x -> 1.7x the measured, duration 20.5 s -> 35.8 s (measured 54.2 s),
TTFT median -61% -> -62%, ITL median -17% -> -29%. The long answers lengthen the run, but the mean TPOT and
the TTFT stay far too low: the lengths are not what the plan misses most.
"""

from __future__ import annotations

import argparse
import pickle
import sys
from pathlib import Path
from unittest import mock

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import planner.serving.benchmark_client as benchmark_client  # noqa: E402
from planner.scenario.scenario import resolve_efficiency  # noqa: E402
from tools.engine_fidelity import GPUSTACK_LAB  # noqa: E402
from tools.fit_production_engines import Run, load_runs  # noqa: E402
from tools.validate_predictors import _benchmark  # noqa: E402

SHAREGPT_PROMPT_LENS = (214, 218)  # GPUStack's ShareGPT bursts (its random-dataset pages have round lengths)


class _LengthsOnly(pickle.Unpickler):
    """The artifact is a list of (int, int) tuples: refuse any class, so the file cannot run code."""

    def find_class(self, module: str, name: str) -> None:
        raise pickle.UnpicklingError(f"lengths file: unexpected object {module}.{name}")


def vllm_filtered(path: Path) -> np.ndarray:
    """(prompt, output) token pairs that vLLM's ShareGPT sampler keeps."""
    with path.open("rb") as f:
        pairs = np.asarray(_LengthsOnly(f).load(), dtype=float)
    keep = ((pairs[:, 0] >= 4) & (pairs[:, 1] >= 4) & (pairs[:, 0] <= 1024)
            & (pairs[:, 0] + pairs[:, 1] <= 2048))
    return pairs[keep]


def describe(pairs: np.ndarray) -> str:
    lines = []
    for name, x in (("prompt", pairs[:, 0]), ("output", pairs[:, 1])):
        p50, p90, p99 = np.percentile(x, (50, 90, 99))
        lines.append(f"{name}: mean {x.mean():.1f} median {p50:.0f} p90 {p90:.0f} p99 {p99:.0f} "
                     f"CV {x.std() / x.mean():.2f}")
    return f"{len(pairs)} pairs after vLLM's filter; " + "; ".join(lines)


def _shaped_lengths(unit: np.ndarray):  # type: ignore[no-untyped-def]
    """A stand-in for benchmark_client._lengths, which the client calls for the prompts, then the outputs:
    the prompts draw pairs, the outputs return the same pairs' outputs."""
    pending: list[np.ndarray] = []

    def lengths(rng: np.random.Generator, nominal: float, client, n: int) -> np.ndarray:  # type: ignore[no-untyped-def]
        if pending:
            return np.maximum(np.round(pending.pop() * nominal), 1).astype(np.int64)
        pick = unit[rng.integers(0, len(unit), n)]
        pending.append(pick[:, 1])
        return np.maximum(np.round(pick[:, 0] * nominal), 1).astype(np.int64)

    return lengths


def _row(run: Run, label: str) -> dict:
    result, row = _benchmark(run, resolve_efficiency(run.scenario, run.gpu)), run.row
    return {"lengths": label, "run_id": row["run_id"], "engine": row["engine"],
            "tpot_err": result.tpot_ms.mean / row["tpot_mean_ms"] - 1,
            "ttft_median_err": result.ttft_ms.p50 / row["ttft_median_ms"] - 1,
            "itl_median_err": result.itl_ms.p50 / row["itl_median_ms"] - 1,
            "tok_s_ratio": result.output_throughput / row["output_throughput"],
            # the run's duration: its output tokens over its output tokens/s
            "duration_s": row["num_prompts"] * row["output_len"] / row["output_throughput"],
            "planned_duration_s": result.duration_s}


def compare(unit: np.ndarray) -> pd.DataFrame:
    runs = [r for r in load_runs() if r.row["source"] == GPUSTACK_LAB
            and SHAREGPT_PROMPT_LENS[0] <= r.row["prompt_len"] <= SHAREGPT_PROMPT_LENS[1]]
    rows = [_row(r, "means") for r in runs]
    with mock.patch.object(benchmark_client, "_lengths", _shaped_lengths(unit)):
        rows += [_row(r, "ShareGPT shape") for r in runs]
    return pd.DataFrame(rows)


def summary(frame: pd.DataFrame) -> pd.DataFrame:
    def by(group: pd.DataFrame) -> pd.Series:
        return pd.Series({"runs": len(group), "tpot_signed": group.tpot_err.median(),
                          "tpot_abs": group.tpot_err.abs().median(),
                          "tok_s_ratio": group.tok_s_ratio.median(),
                          "ttft_median_err": group.ttft_median_err.median(),
                          "itl_median_err": group.itl_median_err.median(),
                          "duration_s": group.duration_s.median(),
                          "planned_duration_s": group.planned_duration_s.median()})

    every = frame.assign(engine="all")
    return pd.concat([frame, every]).groupby(["engine", "lengths"]).apply(by, include_groups=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", type=Path, required=True,
                        help="sharegpt_opt_text_completion_length.pkl from sosp-ae-39/sosp-ae-astra")
    args = parser.parse_args(argv)
    pairs = vllm_filtered(args.lengths)
    print(describe(pairs))
    with pd.option_context("display.width", 200):
        print(summary(compare(pairs / pairs.mean(axis=0))).round(3).to_string())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
