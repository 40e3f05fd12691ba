"""MLPerf Inference SERVER / INTERACTIVE results as a held-out check of the planner's goodput
(data/reference/mlperf_server_published.csv, planned by tools/mlperf_check.py; nothing was fitted on them).

The tolerance: the planned tokens/s of the submission's 8 GPUs within 1.5x of the published figure either
way (0.67 <= planned / published <= 1.5). The issue's bar is that a planner 2x off is worse than none, so the
check must fail before that; 1.5x is about half of the 2x in log terms. Tighter would test the rows more than
the planner: the same hardware and software reached 113-117 (H200 Llama-2-70B Server), 67-79 (H200
Interactive) and 320-503 (H200 Llama-3.1-8B Server) samples/s in the hands of different v5.1 submitters, and
the datasets' mean input lengths are assumed (data/reference/mlperf_server_published.md), which moves the
405B rows' plan by 2x and more between the CSV's low and high inputs.
"""

from __future__ import annotations

import pytest

from tools.mlperf_check import at_published_rate, check_row, read_rows

LOW, HIGH = 1 / 1.5, 1.5
ROWS = {row["row_id"]: row for row in read_rows()}

# Interactive rows whose plan, at the published rate, decodes faster than the log by more than the tolerance
# (planned / measured mean TPOT, at the planner's load share); numbers from `python -m tools.mlperf_check`.
# At the assumed input means only: at the CSV's high inputs the same rows sit at 83-99% of the planned
# capacity or past it and decode slower than the logs (docs/MLPERF.md), so a miss says the assumed mean and
# the planner do not agree together, not which is wrong.
TPOT_MISSES = {
    "mlp-01": "Llama-2-70B B200 fp4 Interactive: planned TPOT 17.5 ms, measured 34.2 ms (0.51x) at 63% load",
    "mlp-03": "Llama-3.1-8B B200 fp4 Interactive: planned 9.7 ms, measured 23.4 ms (0.41x) at 73% load",
    "mlp-05": "Llama-3.1-405B B200 fp4 Interactive: planned 35.1 ms, measured 62.3 ms (0.56x) at 53% load",
    "mlp-09": "Llama-3.1-8B H200 fp8 Interactive: planned 14.9 ms, measured 24.0 ms (0.62x) at 81% load",
    # Server rows near the planned capacity, where TPOT is a cliff (a 10% capacity error moves it many-fold)
    "mlp-00": "Llama-2-70B B200 fp4 Server: planned 35.9 ms, measured 123.3 ms (0.29x) at 88% load",
    "mlp-06": "Llama-2-70B H200 fp8 Server: planned 50.5 ms, measured 183.3 ms (0.28x) at 89% load",
    # the H100 row at 72% of the planned capacity: its goodput is also the highest of the set (1.37x)
    "mlp-12": "Llama-2-70B H100 fp8 Server (v4.1 software): planned 28.1 ms, measured 155.0 ms (0.18x) at "
              "72% load",
}


def _interactive(row_id: str) -> bool:
    return ROWS[row_id]["scenario"] == "Interactive"


def test_the_rows_are_what_the_logs_say() -> None:
    """Source: published: mlcommons/inference_results_v5.1@965182b0 and v4.1@a2f5d66d, each row's
    mlperf_log_summary.txt: 13 valid closed-division 8-GPU TensorRT-LLM results, three models on B200, H200
    and H100 SXM; tokens/s over samples/s is the run's output length (272-274 with fp4, 290-293 with fp8
    against the dataset's reference 294.45 for Llama-2-70B); each scenario's limits as its log states them."""
    rows = list(ROWS.values())
    assert len(rows) == 13 and all(r["result"] == "VALID" and r["engine"] == "trt-llm" for r in rows)
    assert {(r["model"], r["gpu"]) for r in rows} >= {
        (m, g) for m in ("llama-2-70b", "llama-3.1-8b", "llama-3.1-405b") for g in ("b200", "h200")}
    limits = {(r["model"], r["scenario"]): (float(r["ttft_limit_ms"]), float(r["tpot_limit_ms"]))
              for r in rows}
    assert limits == {
        ("llama-2-70b", "Server"): (2000, 200), ("llama-2-70b", "Interactive"): (450, 40),
        ("llama-3.1-8b", "Server"): (2000, 100), ("llama-3.1-8b", "Interactive"): (500, 30),
        ("llama-3.1-405b", "Server"): (6000, 175), ("llama-3.1-405b", "Interactive"): (4500, 80)}
    for r in rows:
        per_sample = float(r["tokens_per_s"]) / float(r["samples_per_s"])
        assert float(r["output_tokens_per_sample"]) == pytest.approx(per_sample, abs=0.06)
        assert float(r["ttft_p99_ms"]) <= float(r["ttft_limit_ms"])
        assert float(r["tpot_p99_ms"]) <= float(r["tpot_limit_ms"])
        assert int(r["gpus_total"]) % (int(r["tp"]) * int(r["pp"])) == 0
    fp8 = [float(r["output_tokens_per_sample"]) for r in rows
           if r["model"] == "llama-2-70b" and r["weights"] == "fp8"]
    assert all(290 <= x <= 294.45 for x in fp8)


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_planned_goodput_within_1_5x_of_the_published_tokens_per_s(row_id: str) -> None:
    """Source: published: the row's mlperf_log_summary.txt "Completed tokens per second" (8 GPUs at the
    highest rate the submitter ran within the scenario's p99 TTFT and TPOT limits); the plan is the
    submission's layout, precisions, running cap and token budget at its goodput under those limits (p99 TTFT,
    mean TPOT), at the assumed input mean. Tolerance 0.67-1.5x: the module docstring."""
    check = check_row(ROWS[row_id])
    assert LOW <= check.ratio <= HIGH, (
        f"{row_id} {check.model} {check.gpu} {check.scenario}: planned {check.planned_tok_s:,.0f} tok/s, "
        f"published {check.published_tok_s:,.0f} ({check.ratio:.2f}x), binding {check.binding}")


@pytest.mark.parametrize("row_id", [
    pytest.param(r, marks=pytest.mark.xfail(strict=True, reason=TPOT_MISSES[r])) if r in TPOT_MISSES else r
    for r in sorted(ROWS)])
def test_tpot_at_the_published_rate_within_1_5x(row_id: str) -> None:
    """Source: published: the row's mlperf_log_summary.txt "Mean Time to Output Token" at its completed
    samples/s; the plan at that rate per replica (open loop, Poisson). Five of the seven Server runs sit at
    87-99% of the planned capacity, where TPOT is a cliff (a 10% capacity error moves it several-fold); the
    misses, Server and Interactive, are strict xfails with their numbers. Tolerance as the goodput's."""
    point = at_published_rate(ROWS[row_id])
    assert LOW <= point.tpot_ratio <= HIGH, (
        f"{row_id}: planned mean TPOT {point.tpot_mean_ms:.1f} ms, measured "
        f"{point.measured_tpot_mean_ms:.1f} ms ({point.tpot_ratio:.2f}x) at {point.utilization:.0%} "
        "of the planned capacity")


def test_the_page_prints_the_tools_figures() -> None:
    """Source: contract: docs/MLPERF.md's two tables are `python -m tools.mlperf_check --write`'s rows, and
    the ranges its prose quotes (goodput 0.80-1.37x, median 1.11; the confirmed rate 0.57-1.11x) are the
    rows'."""
    from statistics import median

    from tools.mlperf_check import DOC, check_all, markdown_rows

    checks = check_all()
    page = [line for line in DOC.read_text().splitlines() if line.startswith("| mlp-")]
    assert page == markdown_rows(checks)
    ratios = [c.ratio for c in checks]
    confirmed = [c.confirmed_tok_s / c.published_tok_s for c in checks]
    text = DOC.read_text()
    assert f"{min(ratios):.2f}-{max(ratios):.2f}x, median {median(ratios):.2f}" in text
    assert f"{min(confirmed):.2f}-{max(confirmed):.2f}x the published figure" in text
    smaller = [c for c in checks if c.model in ("llama-2-70b", "llama-3.1-8b")]
    low = min(c.planned_high_input_tok_s / c.published_tok_s for c in smaller)
    high = max(c.planned_low_input_tok_s / c.published_tok_s for c in smaller)
    assert f"The Llama-2-70B and 8B rows move {low:.2f}-{high:.2f}x" in text
    assert f"The planner is high on {sum(r > 1.0 for r in ratios)} rows" in text
