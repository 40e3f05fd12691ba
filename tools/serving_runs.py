"""Public measured closed-loop serving runs of production engines (data/reference/serving_runs_published.csv).

    python -m tools.serving_runs            # counts per engine x GPU x model x precision
    python -m tools.serving_runs --all      # the same, flagged rows included
    python -m tools.serving_runs --reflag   # recompute the `flag` column from the laws and rewrite the CSV

Each row is one `bench serve`-style run (fixed --max-concurrency, --request-rate inf) as its source
published it; data/reference/serving_runs_published.md says what each column means and where each row
comes from. The laws below are the internal-consistency checks every row must pass; a row that fails one
carries the reason in `flag` and `load_serving_runs()` leaves it out unless asked.
"""

from __future__ import annotations

import argparse
import math
import sys
import tomllib
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
RUNS_CSV = ROOT / "data" / "reference" / "serving_runs_published.csv"
GPU_CATALOG = ROOT / "gpu_catalog" / "gpus.toml"
MODELS_TOML = ROOT / "planner" / "data" / "models.toml"

# GPUs that public runs cover but gpu_catalog/gpus.toml does not list yet (no sourced datasheet entry).
GPUS_NOT_IN_CATALOG: frozenset[str] = frozenset()

# Closed loop, Little's law: mean requests in flight = throughput x mean latency <= concurrency. The
# ratio falls below 1 by the ramp-down: with num_prompts = 10 x concurrency the last wave drains with
# fewer than N requests in flight, which costs up to ~1 wave in 10 (about 10%), more where TTFT queueing
# stretches the last wave; random lengths in [0.8L, L] desynchronise the waves further. Rows whose
# throughput is derived from a per-GPU token rate divided by the expected mean length (0.9 L) also carry
# that expectation's sampling error (under 1% at 40+ requests). Where only medians are published, the
# median E2E stands in for the mean (within a few percent for the narrow length ranges here).
LITTLE_RATIO_MIN = 0.70
LITTLE_RATIO_MAX = 1.10
# TPOT of one request is (E2E - TTFT) / (output - 1); the benchmark reports its mean over requests.
# mean((E2E - TTFT)) / (mean(output) - 1) equals it when TPOT and output length are uncorrelated; with
# lengths uniform in [0.8L, L] the weighting moves it by a few percent. Medians are not additive: the
# median E2E and the median TTFT may come from different requests, which matters little only while decode
# dominates E2E, so the median form is checked (at 25%) only where median TTFT <= 20% of median E2E.
TPOT_REL_TOL_MEAN = 0.15
TPOT_REL_TOL_MEDIAN = 0.25
MEDIAN_TPOT_LAW_MAX_TTFT_SHARE = 0.20
# Non-disaggregated runs: input tokens / output tokens = mean prompt / mean output, both drawn with the
# same range ratio; a chat template shortens the prompt by a few tokens.
TOKEN_RATIO_REL_TOL = 0.10
PERCENTILE_EPS = 1e-6

METRICS = ("ttft", "tpot", "itl", "e2el")
REQUIRED = ("run_id", "source", "source_ref", "engine", "gpu", "prompt_len", "output_len", "concurrency")
DUPLICATE_KEY = (
    "source", "source_run_url", "date", "engine", "serving_stack", "gpu", "gpus_total", "tp", "ep",
    "dp_attention", "disaggregated", "prefill_gpus", "decode_gpus", "decode_workers", "model_hf_id",
    "weights", "spec_decode", "prompt_len", "output_len", "concurrency", "request_rate",
)


def catalog_gpu_ids() -> set[str]:
    with GPU_CATALOG.open("rb") as fh:
        return set(tomllib.load(fh))


def model_preset_ids() -> set[str]:
    with MODELS_TOML.open("rb") as fh:
        return set(tomllib.load(fh))


def read_runs_csv(path: Path = RUNS_CSV) -> pd.DataFrame:
    frame = pd.read_csv(path, keep_default_na=True, low_memory=False)
    frame["flag"] = frame["flag"].astype(object).where(frame["flag"].notna(), "").astype(str)
    return frame


def mean_length(length: float, range_ratio: float) -> float:
    """Mean of integers uniform in [floor(L * r), L], the random dataset's draw (r = 1: fixed length)."""
    low = math.floor(length * range_ratio)
    return (low + length) / 2.0


def _num(value: object) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def request_throughput_per_s(row: pd.Series) -> float | None:
    """The published request rate, else the one derived from published token rates."""
    return _num(row.get("request_throughput")) or _num(row.get("derived_request_throughput"))


def little_ratio(row: pd.Series) -> float | None:
    """throughput x mean E2E / concurrency (1 = the loop always full)."""
    rate = request_throughput_per_s(row)
    e2e_ms = _num(row.get("e2el_mean_ms")) or _num(row.get("e2el_median_ms"))
    conc = _num(row.get("concurrency"))
    if rate is None or e2e_ms is None or not conc:
        return None
    return rate * e2e_ms / 1000.0 / conc


def tpot_relative_gap(row: pd.Series) -> tuple[float, float] | None:
    """(|published - (E2E - TTFT) / (mean output - 1)| / published, tolerance), from means, else medians."""
    ratio = _num(row.get("random_range_ratio"))
    out_mean = mean_length(float(row["output_len"]), ratio if ratio is not None else 1.0)
    if out_mean <= 1:
        return None
    for stat, tol in (("mean", TPOT_REL_TOL_MEAN), ("median", TPOT_REL_TOL_MEDIAN)):
        tpot = _num(row.get(f"tpot_{stat}_ms"))
        e2e = _num(row.get(f"e2el_{stat}_ms"))
        ttft = _num(row.get(f"ttft_{stat}_ms"))
        if stat == "median" and e2e and ttft is not None and ttft > MEDIAN_TPOT_LAW_MAX_TTFT_SHARE * e2e:
            return None
        if tpot and e2e is not None and ttft is not None:
            return abs(tpot - (e2e - ttft) / (out_mean - 1)) / tpot, tol
    return None


def law_violations(row: pd.Series) -> list[str]:
    """The reasons a row breaks a law of closed-loop benchmarks; empty when it breaks none."""
    reasons: list[str] = []
    closed_loop = str(row.get("request_rate")) == "inf"
    ratio = little_ratio(row)
    if closed_loop and ratio is not None and not LITTLE_RATIO_MIN <= ratio <= LITTLE_RATIO_MAX:
        reasons.append(f"little_law_ratio={ratio:.2f}")
    gap = tpot_relative_gap(row)
    if gap is not None and gap[0] > gap[1]:
        reasons.append(f"tpot_vs_e2e_minus_ttft_gap={gap[0]:.2f}")
    published_out = _num(row.get("output_throughput"))
    published_rate = _num(row.get("request_throughput"))
    if published_out and published_rate:
        rr = _num(row.get("random_range_ratio"))
        expected = published_rate * mean_length(float(row["output_len"]), rr if rr is not None else 1.0)
        if abs(published_out - expected) / published_out > TOKEN_RATIO_REL_TOL:
            reasons.append(f"output_tput_vs_requests_gap={abs(published_out - expected) / published_out:.2f}")
    tin, tout = _num(row.get("input_tput_per_gpu")), _num(row.get("output_tput_per_gpu"))
    if tin and tout and str(row.get("disaggregated")).lower() != "true":
        want = float(row["prompt_len"]) / float(row["output_len"])
        if abs(tin / tout - want) / want > TOKEN_RATIO_REL_TOL:
            reasons.append(f"input_output_token_ratio={tin / tout:.2f}_want_{want:.2f}")
    for metric in METRICS:
        values = [_num(row.get(f"{metric}_{p}_ms")) for p in ("median", "p90", "p99")]
        present = [v for v in values if v is not None]
        if any(b < a * (1 - PERCENTILE_EPS) for a, b in zip(present, present[1:], strict=False)):
            reasons.append(f"{metric}_percentiles_unordered")
    return reasons


def compute_flags(frame: pd.DataFrame) -> pd.Series:
    flags = frame.apply(lambda row: ";".join(law_violations(row)), axis=1)
    dup = frame.duplicated(list(DUPLICATE_KEY), keep="first")
    flags = flags.where(~dup, (flags + ";duplicate_run").str.lstrip(";"))
    return flags.astype(str)


def load_serving_runs(include_flagged: bool = False, path: Path = RUNS_CSV) -> pd.DataFrame:
    """The published runs, one row per run; rows carrying a `flag` are left out unless asked for."""
    frame = read_runs_csv(path)
    if not include_flagged:
        frame = frame[frame["flag"] == ""]
    return frame.reset_index(drop=True)


def summary(frame: pd.DataFrame) -> pd.DataFrame:
    keys = ["engine", "gpu", "model_preset", "weights"]
    return frame.fillna({"model_preset": "-"}).groupby(keys).size().rename("rows").reset_index()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.serving_runs", description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="include flagged rows")
    parser.add_argument("--reflag", action="store_true", help="recompute the flag column and rewrite the CSV")
    args = parser.parse_args(argv)
    if args.reflag:
        frame = read_runs_csv()
        frame["flag"] = compute_flags(frame)
        frame.to_csv(RUNS_CSV, index=False)
        print(f"{int((frame['flag'] != '').sum())} of {len(frame)} rows flagged")
        return 0
    frame = load_serving_runs(include_flagged=args.all)
    table = summary(frame)
    print(table.to_string(index=False))
    every = read_runs_csv()
    print(f"\n{len(frame)} rows shown; {len(every)} in the file, {int((every['flag'] != '').sum())} flagged")
    return 0


if __name__ == "__main__":
    sys.exit(main())
