"""The sheet of figures `vllm bench serve` should print for a plan, read from the plan's own figures."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from planner.scenario.scenario import Scenario
from planner.serving.distributions import PERCENTILES


@dataclass(frozen=True)
class ExpectedFigure:
    """One line `vllm bench serve` prints, with the plan's value and its error band where one exists."""

    label: str
    result_key: str  # the key in the --save-result JSON
    unit: str
    predicted: float | None
    band_low: float | None = None
    band_high: float | None = None


Span = tuple[float, float] | None  # a figure's (low, high) band, or None


def _band(band: Any) -> Span:
    if isinstance(band, dict) and band.get("low") is not None and band.get("high") is not None:
        return float(band["low"]), float(band["high"])
    return None


def _figure(label: str, key: str, unit: str, value: float | None, band: Span = None) -> ExpectedFigure:
    return ExpectedFigure(label, key, unit, value, *(band if band is not None else (None, None)))


def _relative(band: Span, estimate: float) -> tuple[float, float] | None:
    """A plan band as factors of its estimate (error bands are the estimate over fixed residual quantiles)."""
    return (band[0] / estimate, band[1] / estimate) if band is not None and estimate > 0 else None


def _times(value: float | None, factors: tuple[float, float] | None) -> Span:
    return (value * factors[0], value * factors[1]) if value is not None and factors is not None else None


def _pct(section: Any, key: str, p: int) -> float | None:
    pcts = section.get(key) if isinstance(section, dict) else None
    value = pcts.get(f"p{p}") if isinstance(pcts, dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _benchmark_figures(bench: dict[str, Any]) -> tuple[ExpectedFigure, ...]:
    """A closed loop at load.concurrency: the plan's benchmark section is what the run reports, under the same
    definitions (TPOT per request, ITL pooled over tokens, throughputs over the run)."""
    def number(value: Any) -> float | None:
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    out = [
        _figure("Request throughput", "request_throughput", "req/s", number(bench.get("request_throughput"))),
        _figure(
            "Output token throughput", "output_throughput", "tok/s", number(bench.get("output_throughput"))
        ),
    ]
    for key, label, result in (
        ("ttft_ms", "TTFT", "ttft"), ("tpot_ms", "TPOT", "tpot"), ("itl_ms", "ITL", "itl"),
        ("e2e_ms", "E2EL", "e2el"),
    ):
        out.append(
            _figure(f"Mean {label}", f"mean_{result}_ms", "ms", number((bench.get(key) or {}).get("mean")))
        )
        for p in PERCENTILES:
            name = "Median" if p == 50 else f"P{p}"
            out.append(_figure(f"{name} {label}", f"{'median' if p == 50 else f'p{p}'}_{result}_ms", "ms",
                               _pct(bench, key, p)))
    return tuple(out)


def _queue_band(serving: dict[str, Any], metric: str, p: int) -> Span:
    """The plan's simulated range of a TTFT or ITL percentile under load (`serving.queue_bands`), if any."""
    bands = serving.get("queue_bands")
    return _band(bands.get(f"{metric}_p{p}_ms")) if isinstance(bands, dict) else None


def _widened(value: float | None, factors: tuple[float, float] | None, queue: Span) -> Span:
    """A percentile's band: the step-time error band (`factors` of the estimate) applied to the simulated
    queue range where the plan has one (both errors compound), else to the estimate; it holds the estimate."""
    if value is None or (factors is None and queue is None):
        return None
    low_f, high_f = factors if factors is not None else (1.0, 1.0)
    low, high = (min(queue[0], value), max(queue[1], value)) if queue is not None else (value, value)
    return low * low_f, high * high_f


def _serving_figures(
    s: Scenario, plan_json: dict[str, Any], serving: dict[str, Any]
) -> tuple[ExpectedFigure, ...]:
    """From the plan's `serving` section (the replica at its operating point): throughputs, the means and the
    TTFT / TPOT / ITL / E2E percentiles, each the section's own figure. TPOT is the section's `tpot_ms`, the
    per-request time per output token vllm bench serve reports (not the ITL median, which leaves out the
    prompt chunks a decode waits through); with speculative decoding TPOT and ITL are the speculative
    section's per-token and per-round times. Bands: the plan's TTFT and ITL bands as factors of their
    estimates, applied to the section's simulated queue range (`queue_bands`) where it has one; TPOT takes
    the ITL factors; throughput the inverse of the ITL factors (none for an open loop below saturation,
    whose rate is given)."""
    lat = plan_json["latency"]
    bench = serving.get("benchmark")
    if isinstance(bench, dict) and not plan_json.get("speculative"):
        return _benchmark_figures(bench)
    ttft_f = _relative(_band(lat.get("ttft_band_ms")), float(lat["ttft_ms"]))
    itl_f = _relative(_band(lat.get("itl_band_ms")), float(lat["itl_ms"]))
    tput_f = (1 / itl_f[1], 1 / itl_f[0]) if itl_f is not None else None
    if serving.get("mode") == "request_rate" and serving.get("stable"):
        tput_f = (
            None  # an open loop below saturation completes what arrives: the rate is given, not predicted
        )
    rate, tokens = _number(serving.get("request_rate")), _number(serving.get("output_tokens_per_s"))
    spec = plan_json.get("speculative")
    itl50 = _pct(serving, "itl_ms", 50)
    tpot_p50 = _pct(serving, "tpot_ms", 50)
    tpot: float | None
    itl: float | None
    if spec:
        tpot, itl = float(spec["itl_ms"]), float(spec["round_ms"])
    else:
        tpot, itl = (tpot_p50 if tpot_p50 is not None else itl50), itl50
    spec_f = None if spec else itl_f
    out = [
        _figure("Request throughput", "request_throughput", "req/s", rate, _times(rate, tput_f)),
        _figure("Output token throughput", "output_throughput", "tok/s", tokens, _times(tokens, tput_f)),
    ]
    out += _metric_figures(serving, "ttft_ms", "TTFT", ttft_f, None, True)
    if spec or tpot_p50 is None:  # TPOT from the step figures: the median only
        out.append(_figure("Median TPOT", "median_tpot_ms", "ms", tpot, _times(tpot, spec_f)))
    else:
        out += _metric_figures(serving, "tpot_ms", "TPOT", spec_f, None, True)
    out += _metric_figures(serving, "itl_ms", "ITL", spec_f, itl, not spec)
    out += _metric_figures(serving, "e2e_ms", "E2EL", None, None, True)
    return tuple(out)


def _metric_figures(serving: dict[str, Any], key: str, label: str, factors: tuple[float, float] | None,
                    median: float | None, with_mean: bool) -> list[ExpectedFigure]:
    """One metric's mean (when `with_mean`) and percentiles from the `serving` section (`median` in place of
    its p50 when given); bands as _serving_figures says, none for E2E."""
    result = {"ttft_ms": "ttft", "tpot_ms": "tpot", "itl_ms": "itl", "e2e_ms": "e2el"}[key]
    banded = key != "e2e_ms"
    out = []
    if with_mean:
        mean = _number((serving.get(key) or {}).get("mean"))
        out.append(_figure(f"Mean {label}", f"mean_{result}_ms", "ms", mean,
                           _widened(mean, factors, None) if banded else None))
    for p in PERCENTILES:
        value = median if p == 50 and median is not None else _pct(serving, key, p)
        queue = _queue_band(serving, key.removesuffix("_ms"), p) if key in ("ttft_ms", "itl_ms") else None
        name, prefix = ("Median", "median") if p == 50 else (f"P{p}", f"p{p}")
        out.append(_figure(f"{name} {label}", f"{prefix}_{result}_ms", "ms", value,
                           _widened(value, factors, queue) if banded else None))
    return out


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def expected_figures(s: Scenario, plan_json: dict[str, Any]) -> tuple[ExpectedFigure, ...]:
    """What `vllm bench serve` should print for this plan, from the plan's own figures (no recomputation).

    With a `serving` section (the plan at its operating point) its figures are used. Without one, the
    batch-step figures stand for the medians of a closed loop at that batch: TPOT is the decode step time
    (ITL); with speculative decoding a step emits several tokens, so TPOT is the per-token time and the
    streamed ITL is the round time. E2E = TTFT + (output_len - 1) x TPOT. Request throughput is the arrival
    rate in an open loop (below saturation) and batch / E2E in a closed loop (Little's law)."""
    serving = plan_json.get("serving")
    if isinstance(serving, dict) and _pct(serving, "ttft_ms", 50) is not None:
        return _serving_figures(s, plan_json, serving)
    lat, thr = plan_json["latency"], plan_json["throughput"]
    spec = plan_json.get("speculative")
    ttft = float(lat["ttft_ms"])
    ttft_band = _band(lat.get("ttft_band_ms"))
    tpot_band: Span = None
    if spec:
        tpot, itl, tokens_per_s = (
            float(spec["itl_ms"]), float(spec["round_ms"]), float(spec["output_tokens_per_s"]),
        )
    else:
        tpot = itl = float(lat["itl_ms"])
        tpot_band = _band(lat.get("itl_band_ms"))
        tokens_per_s = float(thr["output_tokens_per_s"])
    steps = s.output_len - 1
    e2e = ttft + steps * tpot
    e2e_band: Span = ((ttft_band[0] + steps * tpot_band[0], ttft_band[1] + steps * tpot_band[1])
                      if ttft_band is not None and tpot_band is not None else None)
    rps_band: Span = None
    if s.load is not None and s.load.request_rate is not None:
        # open loop below saturation: every arriving request completes, so throughput is the arrival rate
        requests_per_s = min(tokens_per_s / s.output_len, s.load.request_rate)
    else:
        # closed loop (Little's law): `batch` requests in flight, each lasting one E2E
        batch = int(lat["batch"])
        requests_per_s = batch * 1000.0 / e2e
        if e2e_band is not None:
            rps_band = (batch * 1000.0 / e2e_band[1], batch * 1000.0 / e2e_band[0])
    tokens_band: Span = (
        (rps_band[0] * s.output_len, rps_band[1] * s.output_len) if rps_band is not None else None
    )
    out = [
        _figure("Request throughput", "request_throughput", "req/s", requests_per_s, rps_band),
        _figure(
            "Output token throughput", "output_throughput", "tok/s", requests_per_s * s.output_len,
            tokens_band,
        ),
        _figure("Median TTFT", "median_ttft_ms", "ms", ttft, ttft_band),
        _figure("Median TPOT", "median_tpot_ms", "ms", tpot, tpot_band),
        _figure("Median ITL", "median_itl_ms", "ms", itl, tpot_band),
        _figure("Median E2EL", "median_e2el_ms", "ms", e2e, e2e_band),
    ]
    for key, label in (("ttft", "TTFT"), ("itl", "ITL"), ("e2el", "E2EL")):
        out += [_figure(f"P{p} {label}", f"p{p}_{key}_ms", "ms", None) for p in PERCENTILES[1:]]
    return tuple(out)
