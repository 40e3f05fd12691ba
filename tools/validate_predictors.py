#!/usr/bin/env python3
"""Leave-one-family-out validation of the step-time predictors on public closed-loop runs (issue 30, item 6).

    python -m tools.validate_predictors [--runs data/reference/serving_runs_published.csv]

Every run of data/reference/serving_runs_published.csv the planner can plan is simulated by the closed-loop
benchmark client (planner.serving.benchmark_client) under three predictors:
- "roofline": the pure roofline (efficiency "ideal"), for scale: no fitted value at all;
- "production": the shipped profile (fitted terms per engine x GPU generation); its figures on a family that
  the profile was fitted on are in-sample (marked `in_fit`);
- "kernel_tables": the engine's measured kernels (planner.physics.kernel_step) plus ONE fitted term per
  engine, the per-step host cost (`step_overhead_us`: scheduling, input preparation, sampling, the same on
  every GPU since it is CPU work), and for TTFT the frontend's fixed and per-request-in-flight cost. Both are
  fitted leaving the run's own architecture family out (LOFO): the held-out family's runs are predicted with
  terms fitted on the engine's other families only.

Rows imported for validation only (tools.engine_fidelity.validation_only: GPUStack's performance-lab runs and
any burst) are predicted and scored, never fitted on: no LOFO fit, shipped term or band learns from them.

Writes data/predictor_residuals.csv (one row per run x predictor); tools/accuracy_report.py turns it into
docs/ACCURACY.md's headline tables.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.contract.planning import closed_loop_benchmark  # noqa: E402
from planner.core.efficiency import ideal  # noqa: E402
from planner.engines.profile_records import record  # noqa: E402
from planner.engines.profiles import with_efficiency  # noqa: E402
from planner.physics.step_predictor import with_kernel_tables  # noqa: E402
from planner.scenario.scenario import resolve_efficiency  # noqa: E402
from tools.engine_fidelity import RUNS_CSV, fits_frontend, is_burst, validation_only  # noqa: E402
from tools.fit_production_engines import Run, load_runs  # noqa: E402

OUT = ROOT / "data" / "predictor_residuals.csv"
TERMS = ROOT / "planner" / "data" / "kernel_tables" / "kernel_terms.json"
# Architecture families (issue 30): a model's family is what its layers share with other models
FAMILIES = {
    "deepseek-r1": "deepseek-mla-moe", "deepseek-v3": "deepseek-mla-moe", "kimi-k2": "deepseek-mla-moe",
    "llama-3.3-70b": "llama-dense", "llama-3.1-70b": "llama-dense", "llama-3.1-8b": "llama-dense",
    "llama-3.3-70b-fp8": "llama-dense", "qwen3-8b": "qwen3-dense", "qwen3-32b": "qwen3-dense",
    "qwen3-14b": "qwen3-dense", "qwen3-235b-a22b": "qwen3-moe", "qwen3-30b-a3b": "qwen3-moe",
    "gpt-oss-120b": "gpt-oss", "gpt-oss-20b": "gpt-oss",
    # GLM-4.5/4.6: GQA attention and a MoE with a shared expert and dense first layers. Its layers are close
    # to Qwen3 MoE's (GQA + routed experts, no MLA), but it is its own model line (issue 30 lists it apart),
    # so it is held out on its own: its held-out fit may still learn from Qwen3 MoE, its nearest neighbour.
    "glm-4.5-air": "glm-moe", "glm-4.6": "glm-moe", "minimax-m2.5": "minimax-moe",
}
# the per-step host cost's grid (us): each run is simulated once per value, the fit interpolates between
HOST_GRID_US = np.array([0.0, 1000.0, 2500.0, 5000.0])


def family(model: str) -> str:
    return FAMILIES.get(model, model)


def _benchmark(run: Run, efficiency):  # type: ignore[no-untyped-def]
    """The run as the closed-loop benchmark client plans it under `efficiency`."""
    d = with_efficiency(run.base, efficiency)
    bench = closed_loop_benchmark(run.scenario, d, run.memory)
    assert bench is not None
    return bench[1]


def _simulate(run: Run, efficiency, result=None) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """TPOT (the statistic the run published) and TTFT: the median where the run published one, else the
    mean (GPUStack's rows print means only: data/reference/serving_runs_published.md). `result`: the run's
    _benchmark under `efficiency`, when the caller holds it."""
    result = result if result is not None else _benchmark(run, efficiency)
    tpot = result.tpot_ms.mean if run.tpot_is_mean else result.tpot_ms.p50
    ttft = result.ttft_ms.mean if _ttft_is_mean(run) else result.ttft_ms.p50
    return float(tpot), float(ttft)


def _ttft_is_mean(run: Run) -> bool:
    return not np.isfinite(run.ttft_median_ms) and np.isfinite(float(run.row.get("ttft_mean_ms", np.nan)))


def _fit_host(train: pd.DataFrame) -> float:
    """The host cost on the grid (linear between its points) with the least L1 log error of TPOT."""
    fine = np.linspace(HOST_GRID_US[0], HOST_GRID_US[-1], 601)
    preds = np.array([np.interp(fine, HOST_GRID_US, row) for row in np.stack(train.kernel_grid.to_numpy())])
    loss = np.abs(np.log(preds / train.tpot_ms.to_numpy()[:, None])).mean(axis=0)
    return float(fine[int(np.argmin(loss))])


def ttft_at_host(frame: pd.DataFrame, host_us: float) -> np.ndarray:
    """Each run's simulated TTFT without a frontend cost at the per-step host cost `host_us` (linear between
    the grid's simulations)."""
    grid = frame[[f"kernel_ttft_h{int(h)}" for h in HOST_GRID_US]].to_numpy(dtype=float)
    return np.array([np.interp(host_us, HOST_GRID_US, row) for row in grid])


def _fit_frontend(train: pd.DataFrame, host_us: float) -> tuple[float, float]:
    """Frontend cost (fixed ms, ms per other request in flight) with the least L1 log error of TTFT, each
    run's TTFT being its simulation's at the fitted host cost without a frontend cost, plus these; the median
    where the run published one, else its mean against the simulated mean (`ttft_ms`, like with like)."""
    timed = train[np.isfinite(train.ttft_ms)]
    if timed.empty:
        return 0.0, 0.0
    base = ttft_at_host(timed, host_us)
    others = timed.concurrency.to_numpy() - 1.0
    measured = timed.ttft_ms.to_numpy()
    best, best_loss = (0.0, 0.0), np.inf
    # a cost per request in flight needs runs at more than one concurrency to be told from the fixed cost
    pers = np.concatenate([[0.0], np.geomspace(0.01, 20.0, 40)]) if len(np.unique(others)) > 1 else [0.0]
    for fixed in np.concatenate([[0.0], np.geomspace(1.0, 400.0, 40)]):
        for per in pers:
            loss = float(np.mean(np.abs(np.log(np.maximum(base + fixed + per * others, 1e-6) / measured))))
            if loss < best_loss:
                best, best_loss = (float(fixed), float(per)), loss
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=RUNS_CSV)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--terms-only", action="store_true",
                        help="rebuild planner/data/kernel_tables/kernel_terms.json from --out's residuals")
    args = parser.parse_args(argv)
    if args.terms_only:
        write_terms(pd.read_csv(args.out))
        return 0
    runs = load_runs(args.runs)
    rows = []
    for i, r in enumerate(runs):
        if i % 200 == 0:
            print(f"{i} of {len(runs)} runs", flush=True)
        # the production fit itself (the default plan answers an extrapolated family from the kernel tables)
        production = resolve_efficiency(r.scenario, r.gpu)
        kernel = with_kernel_tables(production, r.gpu, r.engine)
        if kernel is not None:  # the frontend's cost is refitted below, leaving the family out
            kernel = kernel.model_copy(update={"ttft_overhead_ms": 0.0, "ttft_per_running_ms": 0.0})
        roof_tpot, roof_ttft = _simulate(r, ideal())
        prod_run = _benchmark(r, production)
        prod_tpot, prod_ttft = _simulate(r, production, prod_run)
        row = {"engine": r.engine, "generation": r.generation, "gpu": r.gpu, "model": r.model,
               "family": family(r.model), "weights": r.weights, "tp": r.base.tp, "ep": r.base.ep,
               "concurrency": int(r.row["concurrency"]), "prompt_len": int(r.row["prompt_len"]),
               "output_len": int(r.row["output_len"]), "tpot_ms": r.tpot_ms, "tpot_is_mean": r.tpot_is_mean,
               "ttft_median_ms": r.ttft_median_ms, "run_id": r.row["run_id"], "burst": is_burst(r.row),
               "validation_only": validation_only(r.row), "fits_frontend": fits_frontend(r.row),
               # the TTFT the kernel-table columns compare with: the median, else the published mean
               "ttft_is_mean": _ttft_is_mean(r),
               "ttft_ms": float(r.row["ttft_mean_ms"]) if _ttft_is_mean(r) else r.ttft_median_ms,
               "roofline_tpot_ms": roof_tpot, "roofline_ttft_ms": roof_ttft,
               "production_tpot_ms": prod_tpot, "production_ttft_ms": prod_ttft,
               # the step and the run around it (docs/ACCURACY.md's bursts): ITL median and output tokens/s,
               # measured and as the production fit plans them
               "itl_median_ms": float(r.row.get("itl_median_ms", np.nan)),
               "output_tok_s": float(r.row.get("output_throughput", np.nan)),
               "production_itl_median_ms": float(prod_run.itl_ms.p50),
               "production_output_tok_s": float(prod_run.output_throughput)}
        if kernel is not None:
            grid = [_simulate(r, kernel.model_copy(update={"step_overhead_us": float(h)}))
                    for h in HOST_GRID_US]
            row["kernel_grid"] = [g[0] for g in grid]
            # TTFT without a frontend cost (refitted below), at each host cost: every iteration a prompt waits
            # through or rides carries the same per-step host time as the decode steps TPOT fits it on
            row["kernel_ttft_grid"] = [g[1] for g in grid]
        rows.append(row)
    frame = pd.DataFrame(rows)
    if "kernel_grid" in frame:
        for j, h in enumerate(HOST_GRID_US):
            frame[f"kernel_tpot_h{int(h)}"] = [g[j] if isinstance(g, list) else np.nan
                                               for g in frame.kernel_grid]
            frame[f"kernel_ttft_h{int(h)}"] = [g[j] if isinstance(g, list) else np.nan
                                               for g in frame.kernel_ttft_grid]
        frame = frame.drop(columns=["kernel_grid", "kernel_ttft_grid"])
    # production is in-sample where the run's family is in its record's fit
    frame["production_in_fit"] = [
        f in ((record(e, gpu) or {}).get("fitted_on", {}).get("families", []))
        for e, gpu, f in zip(frame.engine, frame.gpu, frame.family, strict=True)]
    frame = leave_family_out(frame)
    frame.round(4).to_csv(args.out, index=False)
    write_terms(frame.round(4))
    print(summary(frame).to_string())
    return 0


def shipped_terms(frame: pd.DataFrame) -> dict:
    """The kernel-table predictor's shipped terms per engine x GPU generation: the per-step host cost and the
    frontend cost fitted on all of that group's runs (every family), and the held-out band of the same
    design (leave-one-family-out residuals, predicted / measured - 1, 10th and 90th percentiles)."""
    out: dict = {}
    has = frame[frame["kernel_tpot_h0"].notna()] if "kernel_tpot_h0" in frame else frame.iloc[:0]
    front = has[_frontend_rows(has)]
    if "validation_only" in has:  # fitted and banded on the fitted sources only (VALIDATION_ONLY_RUN_IDS)
        has = has[~has["validation_only"].astype(bool)]
    for (engine, generation), group in has.groupby(["engine", "generation"]):
        _, host = _fit_kernel_terms(group, np.array([1.0]))
        group_front = front[(front.engine == engine) & (front.generation == generation)]
        fixed, per = _fit_frontend(group_front, host)
        record: dict = {"step_overhead_us": host, "ttft_overhead_ms": round(fixed, 3),
                        "ttft_per_running_ms": round(per, 4),
                        "fitted_on": {"families": sorted(group.family.unique()),
                                      "models": sorted(group.model.unique()),
                                      "gpus": sorted(group.gpu.unique()), "runs": len(group)},
                        # the frontend's cost is also fitted on runs that inform it alone (fits_frontend)
                        "frontend_fitted_on": {"families": sorted(group_front.family.unique()),
                                               "runs": len(group_front)}}
        band = {}
        for metric, pred, measured in (("tpot", "kernel_tpot_ms", "tpot_ms"),
                                       ("ttft", "kernel_ttft_ms", "ttft_median_ms")):
            r = (group[pred] / group[measured] - 1).replace([np.inf, -np.inf], np.nan).dropna()
            if len(r) >= 10:
                band[metric] = {"q10": round(float(r.quantile(0.1)), 4),
                                "q90": round(float(r.quantile(0.9)), 4), "n": len(r)}
        record["lofo_band"] = band
        out.setdefault(engine, {})[generation] = record
    return out


def write_terms(frame: pd.DataFrame) -> None:
    import json

    terms = {"source": "tools/validate_predictors.py on data/predictor_residuals.csv",
             "engines": shipped_terms(frame)}
    TERMS.write_text(json.dumps(terms, indent=1) + "\n")


def _grid(frame: pd.DataFrame) -> np.ndarray:
    return frame[[f"kernel_tpot_h{int(h)}" for h in HOST_GRID_US]].to_numpy(dtype=float)


SCALES = np.linspace(0.3, 1.5, 49)
HOSTS = np.linspace(0.0, 5000.0, 51)


def _fit_kernel_terms(train: pd.DataFrame, scales: np.ndarray = SCALES) -> tuple[float, float]:
    """The kernel-time scale (what the engine's fused kernels in a CUDA graph take of the kernels' time
    measured alone) and the per-step host cost that fit `train`'s TPOT best (L1 in log space, every family
    weighing the same)."""
    grid = _grid(train)
    measured = train.tpot_ms.to_numpy()
    weight = 1.0 / train.groupby("family").family.transform("size").to_numpy()
    best, best_loss = (1.0, 0.0), np.inf
    for host in HOSTS:
        added = np.array([np.interp(host, HOST_GRID_US, row) - row[0] for row in grid])
        pred = scales[:, None] * grid[:, 0][None, :] + added[None, :]
        loss = (np.abs(np.log(pred / measured[None, :])) * weight[None, :]).sum(axis=1)
        i = int(np.argmin(loss))
        if loss[i] < best_loss:
            best, best_loss = (float(scales[i]), float(host)), float(loss[i])
    return best


def _frontend_rows(frame: pd.DataFrame) -> pd.Series:
    """The runs the frontend's cost is fitted on (tools.engine_fidelity.fits_frontend): the fitted runs and
    the validation-only runs whose TTFT still informs it."""
    if "fits_frontend" in frame:
        return frame["fits_frontend"].astype(bool)
    if "validation_only" in frame:
        return ~frame["validation_only"].astype(bool)
    return pd.Series(True, index=frame.index)


def leave_family_out(frame: pd.DataFrame) -> pd.DataFrame:
    """The kernel predictor's fitted terms, per engine x GPU generation (per engine where a generation has one
    family), each family predicted with terms fitted on the others."""
    frame = frame.copy()
    for col in ("kernel_tpot_ms", "kernel_ttft_ms", "kernel_ttft_bare", "kernel_host_us", "kernel_scale",
                "kernel_scaled_tpot_ms", "kernel_scaled_host_us"):
        frame[col] = np.nan
    has = (frame["kernel_tpot_h0"].notna() if "kernel_tpot_h0" in frame
           else pd.Series(False, index=frame.index))
    frame["kernel_fit_group"] = ""
    for engine in sorted(frame.engine.unique()):
        mine = frame[(frame.engine == engine) & has]
        # every run is predicted; the terms are fitted on the fitted sources only (VALIDATION_ONLY_RUN_IDS)
        fit = mine[~mine["validation_only"].astype(bool)] if "validation_only" in mine else mine
        front = mine[_frontend_rows(mine)]
        for held in sorted(mine.family.unique()):
            test = mine[mine.family == held]
            for generation, test_g in test.groupby("generation"):
                same = fit[(fit.generation == generation) & (fit.family != held)]
                train, group = (same, f"{engine} {generation}") if not same.empty else (
                    fit[fit.family != held], f"{engine}, every generation")
                if train.empty:  # the engine's only family: nothing to leave it out of
                    continue
                # the design: measured kernels as they are plus a host cost; and, to show what the tables
                # lack, the same with a fitted scale on the kernels' time
                _, host = _fit_kernel_terms(train, np.array([1.0]))
                scale, scaled_host = _fit_kernel_terms(train)
                # the frontend from the same generation's other families where any informs it, else every one
                front_same = front[(front.generation == generation) & (front.family != held)]
                train_front = front_same if not front_same.empty else front[front.family != held]
                fixed, per = _fit_frontend(train_front, host)
                idx = test_g.index
                grid = _grid(test_g)
                frame.loc[idx, "kernel_tpot_ms"] = test_g.kernel_tpot_h0 + np.array(
                    [np.interp(host, HOST_GRID_US, row) - row[0] for row in grid])
                frame.loc[idx, "kernel_host_us"] = host
                frame.loc[idx, "kernel_scaled_tpot_ms"] = scale * test_g.kernel_tpot_h0 + np.array(
                    [np.interp(scaled_host, HOST_GRID_US, row) - row[0] for row in grid])
                frame.loc[idx, "kernel_scale"] = scale
                frame.loc[idx, "kernel_scaled_host_us"] = scaled_host
                frame.loc[idx, "kernel_fit_group"] = group
                frame.loc[idx, "kernel_ttft_bare"] = ttft_at_host(test_g, host)
                frame.loc[idx, "kernel_ttft_ms"] = (frame.loc[idx, "kernel_ttft_bare"] + fixed
                                                    + per * (test_g.concurrency - 1))
    return frame


def summary(frame: pd.DataFrame, by: tuple[str, ...] = ("engine", "gpu")) -> pd.DataFrame:
    out = []
    for key, g in frame.groupby(list(by)):
        rec = dict(zip(by, key if isinstance(key, tuple) else (key,), strict=True))
        rec["rows"] = len(g)
        for p in ("roofline", "production", "kernel", "kernel_scaled"):
            e = (g[f"{p}_tpot_ms"] / g.tpot_ms - 1).dropna().abs()
            rec[f"{p}_tpot_median"] = float(e.median()) if len(e) else np.nan
            rec[f"{p}_tpot_p90"] = float(e.quantile(0.9)) if len(e) else np.nan
        out.append(rec)
    return pd.DataFrame(out).round(3)


if __name__ == "__main__":
    sys.exit(main())
