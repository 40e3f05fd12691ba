"""Vega-Lite chart specs, written as plain dicts: building them through Altair cost ~120 ms of server
time per rerun (schema objects and validation), these cost under a millisecond. The numbers come from
planner/contract/chart_data.py (and the planner's sweeps); this module only lays them out.

Conventions: log axes get ticks at powers of ten only; a legend never truncates its labels; the
title sits above the plot with room for it.
"""

from __future__ import annotations

import math
from typing import Any

from planner.contract.chart_data import ChartData, ServingSeries
from ui import palette


def show(spec: dict[str, Any], container=None) -> None:
    """Render a Vega-Lite spec (Streamlit does not re-validate a dict against the schema); in a column
    (`container`), its title wraps instead of being cut."""
    import streamlit as st

    from ui.layout import in_column

    (container or st).vega_lite_chart(spec if container is None else in_column(spec), width="stretch")


def _base(title: str, height: int = 260, **extra: Any) -> dict[str, Any]:
    return {"$schema": "https://vega.github.io/schema/vega-lite/v5.json",
            "title": {"text": title, "anchor": "start", "offset": 10},
            "height": height, "padding": {"top": 8, "left": 5, "right": 5, "bottom": 5},
            "config": {"legend": {"labelLimit": 0, "titleLimit": 0}, "axis": {"labelFlush": False}}, **extra}


def log_ticks(low: float, high: float) -> list[float]:
    """Powers of ten from below `low` to above `high`: regular ticks on a log axis."""
    low, high = max(low, 1e-12), max(high, low * 10)
    return [10.0 ** k for k in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)]


def _log_axis(field: str, title: str, values: list[float], fmt: str = "~s", **extra: Any) -> dict[str, Any]:
    """A log axis fitted to the data (domain = its range), ticked at powers of ten (1, 2, 5 x them when
    it holds fewer than two); a range of less than a decade gets a linear axis instead."""
    finite = [v for v in values if v is not None and v > 0 and math.isfinite(v)] or [1.0]
    low, high = min(finite), max(finite)
    if high <= low:
        low, high = low / 2, high * 2
    if high / low < 10:  # less than a decade: a linear axis reads better than one or two log ticks
        return {
            "field": field, "type": "quantitative", "title": title, "scale": {"zero": False, "nice": True},
            "axis": {"format": fmt, "grid": True, "tickCount": 6},
            **extra,
        }
    ticks = [t for t in log_ticks(low, high) if low <= t <= high]
    if len(ticks) < 2:
        ticks = [m * t for t in log_ticks(low, high) for m in (1, 2, 5) if low <= m * t <= high]
    return {"field": field, "type": "quantitative", "title": title,
            "scale": {"type": "log", "domain": [low, high], "nice": False},
            "axis": {"values": ticks, "format": fmt, "grid": True}, **extra}


def _records(
    columns: dict[str, list[Any]], names: list[str], where: str | None = None
) -> list[dict[str, Any]]:
    rows = []
    for i in range(len(columns["batch"])):
        if where is not None and not columns[where][i]:
            continue
        rows.append({n: _round(columns[n][i]) for n in names})
    return rows


def _round(v: Any) -> Any:
    if isinstance(v, float):
        return round(v, 6) if math.isfinite(v) else None
    return v


# --- plan page ------------------------------------------------------------------------------------

def memory_bar(c: ChartData) -> dict[str, Any]:
    """One GPU's memory, stacked, in GiB; the capacity lines are dashed rules named in their own legend
    (no text labels on the bar: the cap and the device total sit close and their labels collided)."""
    m = c.memory
    to_gib = 1.0 if m.unit == "GiB" else 1e9 / 2**30  # one unit for every memory figure
    rows = [{"gpu": "one GPU", "part": part.name, "gib": round(part.gb * to_gib, 3), "order": i}
            for i, part in enumerate(m.parts)]
    names = [part.name for part in m.parts]
    lines = [
        {
            "gpu": "one GPU", "line": f"{line.name} {line.gb * to_gib:,.1f} GiB",
            "gib": round(line.gb * to_gib, 3),
        }
        for line in m.lines
    ]
    top = max([m.device_gb * to_gib, sum(r["gib"] for r in rows)] + [r["gib"] for r in lines]) * 1.02
    title = ("Per-GPU memory (GiB): what the engine takes, within its utilization cap" if m.unit == "GiB"
             else "Per-GPU memory (GiB): weights, KV cache and reserve within the engine's cap")
    spec = _base(title, height=0)
    spec["height"] = {"step": 44}
    y = {"field": "gpu", "type": "nominal", "title": None, "axis": {"labels": False, "ticks": False}}
    spec["layer"] = [
        {
            "data": {"values": rows}, "mark": {"type": "bar"},
            "encoding": {
                "y": y,
                "x": {
                    "field": "gib", "type": "quantitative", "stack": "zero", "title": "GiB",
                    "scale": {"domain": [0, top], "nice": False},
                },
                "color": {
                    "field": "part", "type": "nominal", "sort": names, "title": None,
                    "scale": palette.scale(names),
                    "legend": {"orient": "bottom", "direction": "horizontal", "columns": 3},
                },
                "order": {"field": "order", "type": "quantitative"},
                "tooltip": [
                    {"field": "part", "title": "part"},
                    {"field": "gib", "type": "quantitative", "format": ",.2f", "title": "GiB"},
                ],
            },
        },
        {
            "data": {"values": lines}, "mark": {"type": "rule", "color": "black", "strokeWidth": 2},
            "encoding": {
                "x": {"field": "gib", "type": "quantitative"},
                "strokeDash": {
                    "field": "line", "type": "nominal", "title": None,
                    "scale": {"range": [[6, 3], [1, 0], [2, 2]]},
                    "legend": {"orient": "top", "direction": "horizontal"},
                },
                "tooltip": [{"field": "line", "title": "capacity"}],
            },
        },
    ]
    return spec


def roofline(c: ChartData) -> dict[str, Any]:
    r = c.roofline
    ceiling = [{"ai": ai, "tflops": t} for ai, t in r.ceiling]
    points = [
        {"kernel": pt.kernel, "ai": round(pt.ai_flop_per_byte, 3), "tflops": round(pt.tflops_per_gpu, 3)}
        for pt in r.points
    ]
    ais = [ai for ai, _ in r.ceiling]
    tflops = [t for _, t in r.ceiling] + [pt.tflops_per_gpu for pt in r.points]
    x = _log_axis("ai", "arithmetic intensity (FLOP/byte)", ais)
    y = _log_axis("tflops", "TFLOP/s per GPU", [min(tflops) / 2, max(tflops) * 2])  # room for the ridge label
    spec = _base(
        f"Roofline ({r.compute_precision} peak {r.peak_tflops:,.0f} TFLOP/s, HBM {r.hbm_tb_s:g} TB/s)", 340
    )
    ridge = [{"ai": round(r.ridge_flop_per_byte, 3), "tflops": r.peak_tflops,
              "label": f"ridge {r.ridge_flop_per_byte:,.0f} FLOP/byte"}]
    spec["layer"] = [
        {
            "data": {"values": [{**pt, "line": "attainable: HBM roof, then compute peak"} for pt in ceiling]},
            "mark": {"type": "line"},
            "encoding": {
                "x": x, "y": y,
                "color": {
                    "field": "line", "type": "nominal", "title": None, "scale": {"range": ["grey"]},
                    "legend": {"orient": "top"},
                },
            },
        },
        {
            "data": {"values": ridge}, "mark": {"type": "rule", "strokeDash": [4, 4], "color": "grey"},
            "encoding": {
                "x": {"field": "ai", "type": "quantitative"},
                "tooltip": [{"field": "label", "title": "ridge"}],
            },
        },
        {
            "data": {"values": ridge},
            "mark": {"type": "text", "align": "left", "dx": 4, "dy": -8, "color": "#555"},
            "encoding": {
                "x": {"field": "ai", "type": "quantitative"},
                "y": {"field": "tflops", "type": "quantitative"}, "text": {"field": "label"},
            },
        },
        {
            "data": {"values": points}, "mark": {"type": "point", "filled": True, "size": 120},
            "encoding": {
                "x": {"field": "ai", "type": "quantitative"},
                "y": {"field": "tflops", "type": "quantitative"},
                "color": {
                    "field": "kernel", "type": "nominal", "title": None,
                    "scale": palette.scale([pt["kernel"] for pt in points]), "legend": {"orient": "bottom"},
                },
                "tooltip": [
                    {"field": "kernel"}, {"field": "ai", "format": ",.1f", "title": "FLOP/byte"},
                    {"field": "tflops", "format": ",.1f", "title": "TFLOP/s reached"},
                ],
            },
        },
    ]
    return _independent_colours(spec)


def intensity_vs_batch(c: ChartData) -> dict[str, Any]:
    rows = [{**row, "fits": "fits in memory" if row["fits"] else "beyond the max batch"}
            for row in _records(c.sweep, ["batch", "decode_ai", "fits"])]
    ridge = c.roofline.ridge_flop_per_byte
    x = _log_axis("batch", "batch (concurrent sequences)", [r["batch"] for r in rows], fmt="~s")
    y = _log_axis("decode_ai", "decode FLOP/byte", [r["decode_ai"] for r in rows] + [ridge])
    spec = _base("Decode arithmetic intensity vs batch", 340)
    layers: list[dict[str, Any]] = [
        {"data": {"values": rows}, "mark": {"type": "line", "point": True},
         "encoding": {"x": x, "y": y,
                      "color": {"field": "fits", "type": "nominal", "title": None,
                                "scale": palette.scale(["fits in memory", "beyond the max batch"]),
                                "legend": {"orient": "bottom"}},
                      "tooltip": [{"field": "batch", "format": ","}, {"field": "decode_ai", "format": ",.1f",
                                                                     "title": "FLOP/byte"}]}},
        {"data": {"values": [{"ridge": ridge, "label": f"ridge {ridge:,.0f}"}]},
         "mark": {"type": "rule", "color": palette.colour("ridge")},
         "encoding": {"y": {"field": "ridge", "type": "quantitative"}, "tooltip": [{"field": "label"}]}},
        {"data": {"values": [{"ridge": ridge, "label": f"ridge {ridge:,.0f} FLOP/byte"}]},
         "mark": {"type": "text", "align": "left", "x": 4, "dy": -8, "color": palette.colour("ridge")},
         "encoding": {"y": {"field": "ridge", "type": "quantitative"}, "text": {"field": "label"}}},
    ]
    crossing = c.plan.roofline.ridge_crossing_batch
    if crossing:
        layers.append(
            {
                "data": {
                    "values": [{"batch": crossing, "label": f"crosses the ridge at batch {crossing:,}"}]
                },
                "mark": {"type": "rule", "color": palette.colour("ridge"), "strokeDash": [4, 4]},
                "encoding": {
                    "x": {"field": "batch", "type": "quantitative"}, "tooltip": [{"field": "label"}],
                },
            }
        )
    spec["layer"] = layers
    return spec


def _max_batch_rule(max_batch: int) -> dict[str, Any]:
    """The max batch as a dashed rule with its own legend entry (the chart resolves its colour scales
    independently: see _independent_colours)."""
    label = f"max batch {max_batch:,}"
    return {"data": {"values": [{"batch": max(max_batch, 1), "line": label}]},
            "mark": {"type": "rule", "strokeDash": [4, 4]},
            "encoding": {"x": {"field": "batch", "type": "quantitative"},
                         "color": {"field": "line", "type": "nominal", "title": None,
                                   "scale": {"domain": [label], "range": [palette.colour("capacity")]},
                                   "legend": {"orient": "bottom"}},
                         "tooltip": [{"field": "line"}]}}


def _independent_colours(spec: dict[str, Any]) -> dict[str, Any]:
    """Layers with their own colour scale (a rule's legend beside the series'): one legend each."""
    spec["resolve"] = {"scale": {"color": "independent"}, "legend": {"color": "independent"}}
    return spec


def _estimate_and_bound(
    c: ChartData, estimate: str, bound: str, title: str, y_title: str, fmt: str
) -> dict[str, Any]:
    rows = []
    for row in _records(c.sweep, ["batch", estimate, bound], where="fits"):
        rows.append({"batch": row["batch"], "series": "estimate", "value": row[estimate]})
        rows.append({"batch": row["batch"], "series": "roofline bound", "value": row[bound]})
    x = _log_axis("batch", "batch (concurrent sequences)", [r["batch"] for r in rows] or [1])
    spec = _base(title, 320)
    spec["layer"] = [
        {
            "data": {"values": rows}, "mark": {"type": "line", "point": True},
            "encoding": {
                "x": x, "y": {"field": "value", "type": "quantitative", "title": y_title},
                "color": {
                    "field": "series", "type": "nominal", "title": None,
                    "scale": palette.scale(["estimate", "roofline bound"]), "legend": {"orient": "bottom"},
                },
                "strokeDash": {"field": "series", "type": "nominal", "legend": None},
                "tooltip": [
                    {"field": "batch", "format": ","}, {"field": "series"},
                    {"field": "value", "format": fmt, "title": y_title},
                ],
            },
        },
        _max_batch_rule(c.max_batch),
    ]
    return _independent_colours(spec)


def itl_vs_batch(c: ChartData) -> dict[str, Any]:
    return _estimate_and_bound(c, "itl_ms", "itl_ms_bound", "ITL vs batch, up to the max batch (dashed)",
                               "ITL (ms)", ",.2f")


def tokens_vs_batch(c: ChartData) -> dict[str, Any]:
    return _estimate_and_bound(c, "output_tokens_per_s", "output_tokens_per_s_bound",
                               "Output tokens/s per replica vs batch", "output tokens/s", ",.0f")


def cost_vs_batch(c: ChartData) -> dict[str, Any]:
    rows = _records(c.sweep, ["batch", "usd_per_million_output_tokens"], where="fits")
    values = [r["usd_per_million_output_tokens"] for r in rows]
    spec = _base("$ per million output tokens vs batch (decode only)", 260)
    spec["layer"] = [
        {
            "data": {"values": rows}, "mark": {"type": "line", "point": True},
            "encoding": {
                "x": _log_axis("batch", "batch (concurrent sequences)", [r["batch"] for r in rows] or [1]),
                "y": _log_axis(
                    "usd_per_million_output_tokens", "$ per M output tokens", values or [1.0], fmt="$,.3~g"
                ),
                "tooltip": [
                    {"field": "batch", "format": ","},
                    {"field": "usd_per_million_output_tokens", "format": "$,.3f", "title": "$/M"},
                ],
            },
        },
        _max_batch_rule(c.max_batch),
    ]
    return _independent_colours(spec)


def _rule(values: list[dict[str, Any]], channel: str, field: str, colour: dict[str, Any],
          dash: list[int] | None = None) -> dict[str, Any]:
    """A rule in the legend's colour: vertical on x (a rate), horizontal on y (an objective)."""
    mark: dict[str, Any] = {"type": "rule", **({"strokeDash": dash} if dash else {})}
    return {"data": {"values": values}, "mark": mark,
            "encoding": {channel: {"field": field, "type": "quantitative"}, "color": colour,
                         "tooltip": [{"field": "label"}]}}


def _frontier_colour(names: list[str]) -> dict[str, Any]:
    ranges = [palette.colour("throughput per GPU"), palette.colour("this plan"), palette.colour("objective")]
    return {"field": "series", "type": "nominal", "title": None, "sort": names,
            "scale": {"domain": names, "range": ranges[: len(names)]},
            "legend": {"orient": "bottom", "direction": "horizontal", "symbolOpacity": 1}}


def _frontier_line(rows: list[dict[str, Any]], series: str, colour: dict[str, Any]) -> dict[str, Any]:
    x = {"field": "tokens_per_s_per_user", "type": "quantitative",
         "title": "output tokens/s per user (1000 / mean ITL)", "scale": {"zero": False, "nice": True}}
    return {
        "data": {"values": [{**r, "series": series} for r in rows]}, "mark": {"type": "line", "point": True},
        "encoding": {
            "x": x,
            "y": {
                "field": "output_tokens_per_s_per_gpu", "type": "quantitative",
                "title": "output tokens/s per GPU",
            },
            "color": colour,
            "tooltip": [
                {"field": "request_rate", "format": ",.2f", "title": "req/s per replica"},
                {"field": "decoding_sequences", "format": ",.0f", "title": "decoding sequences"},
                {"field": "tokens_per_s_per_user", "format": ",.1f", "title": "tokens/s per user"},
                {"field": "output_tokens_per_s_per_gpu", "format": ",.0f", "title": "tokens/s per GPU"},
                {"field": "objective"},
            ],
        },
    }


def frontier(s: ServingSeries) -> dict[str, Any]:
    """Output tokens/s per GPU against tokens/s per user, from a trickle to capacity: the curve every
    serving benchmark draws. Shaded: where the latency objective holds; the big point: this plan."""
    rows = [{**r, "objective": "meets the objective" if r["meets_objective"] else "misses it"}
            for r in s.frontier if r["tokens_per_s_per_user"]]
    if not rows:
        return {}
    spec = _base("Throughput per GPU vs speed per user (each point a request rate, up to capacity)", 340)
    met = f"p{s.slo_percentile} objective met" if s.slo_percentile is not None else None
    names = ["tokens/s per GPU at each rate", "this plan"] + ([met] if met else [])
    colour = _frontier_colour(names)
    layers: list[dict[str, Any]] = []
    ok = [r["tokens_per_s_per_user"] for r in rows if r["meets_objective"]] if met is not None else []
    if ok:
        layers.append({"data": {"values": [{"x": min(ok), "x2": max(ok), "series": met}]},
                       "mark": {"type": "rect", "opacity": 0.12},
                       "encoding": {"x": {"field": "x", "type": "quantitative"}, "x2": {"field": "x2"},
                                    "color": colour, "tooltip": [{"field": "series"}]}})
    layers.append(_frontier_line(rows, names[0], colour))
    if s.operating_point:
        layers.append(
            {
                "data": {"values": [{**s.operating_point, "series": "this plan"}]},
                "mark": {"type": "point", "filled": True, "size": 180},
                "encoding": {
                    "x": {"field": "tokens_per_s_per_user", "type": "quantitative"},
                    "y": {"field": "output_tokens_per_s_per_gpu", "type": "quantitative"}, "color": colour,
                    "tooltip": [
                        {"field": "series"},
                        {"field": "request_rate", "format": ",.2f", "title": "req/s per replica"},
                    ],
                },
            }
        )
    spec["layer"] = layers
    return spec


def _percentile_lines(rows: list[dict[str, Any]], label: str, capacity_rate: float,
                      colour: dict[str, Any]) -> dict[str, Any]:
    x = {"field": "request_rate", "type": "quantitative", "title": "requests/s per replica",
         "scale": {"domain": [0, capacity_rate * 1.05]}}
    return {
        "data": {"values": rows}, "mark": {"type": "line", "interpolate": "linear"},
        "encoding": {
            "x": x, "y": {"field": "ms", "type": "quantitative", "title": f"{label} (ms)"}, "color": colour,
            "tooltip": [
                {"field": "request_rate", "format": ",.2f", "title": "req/s"}, {"field": "series"},
                {"field": "ms", "format": ",.1f", "title": f"{label} (ms)"},
            ],
        },
    }


def _goodput_marks(
    s: ServingSeries, rows: list[dict[str, Any]], colour: dict[str, Any]
) -> list[dict[str, Any]]:
    """The goodput: a rule at its rate, and a marker on the objective's percentile curve (the series samples
    the goodput rate)."""
    assert s.goodput_rate is not None
    goodput = s.goodput_rate
    layers = [_rule([{"rate": goodput, "series": "goodput", "label": f"goodput {goodput:,.2f} req/s"}],
                    "x", "rate", colour, [2, 2])]
    on_curve = [r for r in rows if r["series"] == f"p{s.slo_percentile}"
                and abs(r["request_rate"] - goodput) <= 1e-9 * max(goodput, 1.0)]
    if on_curve:
        layers.append({"data": {"values": [{**on_curve[0], "series": "goodput"}]},
                       "mark": {"type": "point", "filled": True, "size": 90},
                       "encoding": {"x": {"field": "request_rate", "type": "quantitative"},
                                    "y": {"field": "ms", "type": "quantitative"}, "color": colour,
                                    "tooltip": [{"field": "series"}, {"field": "ms", "format": ",.1f"}]}})
    return layers


def latency_vs_rate(s: ServingSeries, metric: str) -> dict[str, Any]:
    """TTFT or ITL percentiles (p50, the objective's, p99) against the request rate, with capacity, the
    goodput (a marker on the objective's percentile curve) and the objective; every mark in the legend."""
    label = {"ttft": "TTFT", "itl": "ITL"}[metric]
    pcts = sorted({50, 99, s.slo_percentile or 99})
    rows = [{"request_rate": r["request_rate"], "series": f"p{q}", "ms": r[f"{metric}_p{q}_ms"]}
            for r in s.vs_rate for q in pcts if r.get(f"{metric}_p{q}_ms") is not None]
    if not rows:
        return {}
    spec = _base(f"{label} vs request rate ({', '.join(f'p{q}' for q in pcts)}) up to capacity", 340)
    objective = s.slo_ttft_ms if metric == "ttft" else s.slo_itl_ms
    names = [f"p{q}" for q in pcts] + ["capacity"] + (["goodput"] if s.goodput_rate is not None else [])
    obj_name = f"p{s.slo_percentile} objective" if objective is not None and s.slo_percentile else None
    if obj_name:
        names.append(obj_name)
    colour = {
        "field": "series", "type": "nominal", "title": None, "sort": names, "scale": palette.scale(names),
        "legend": {"orient": "bottom", "direction": "horizontal"},
    }
    capacity = {
        "rate": s.capacity_rate, "series": "capacity", "label": f"capacity {s.capacity_rate:,.2f} req/s",
    }
    layers = [_percentile_lines(rows, label, s.capacity_rate, colour),
              _rule([capacity], "x", "rate", colour, [5, 3])]
    if s.goodput_rate is not None:
        layers += _goodput_marks(s, rows, colour)
    if obj_name:
        layers.append(
            _rule(
                [{"ms": objective, "series": obj_name, "label": f"{obj_name} {objective:,.0f} ms"}], "y",
                "ms", colour,
            )
        )
    spec["layer"] = layers
    return spec


def plan_page_specs(c: ChartData) -> dict[str, dict[str, Any]]:
    specs = {"memory": memory_bar(c), "roofline": roofline(c), "intensity": intensity_vs_batch(c),
             "itl": itl_vs_batch(c), "tokens": tokens_vs_batch(c), "cost": cost_vs_batch(c)}
    if c.serving is not None:
        specs.update({"frontier": frontier(c.serving), "ttft_vs_rate": latency_vs_rate(c.serving, "ttft"),
                      "itl_vs_rate": latency_vs_rate(c.serving, "itl")})
    return specs


# --- comparison -----------------------------------------------------------------------------------

def overlay(rows: list[dict[str, Any]], column: str, title: str, y_title: str, log_y: bool = False,
            fmt: str = ",.2f") -> dict[str, Any]:
    """One line per pinned scenario (field `scenario`), batches that fit only; legend below, uncut."""
    values = [r[column] for r in rows]
    y: dict[str, Any] = ({"field": column, "type": "quantitative", "title": y_title} if not log_y
                         else _log_axis(column, y_title, values or [1.0], fmt="$,.3~g"))
    # Streamlit fits the whole chart, legend included, into the height: one legend row per pin on top
    pins = len({r["scenario"] for r in rows})
    spec = _base(title, 300 + 24 * pins)
    spec["layer"] = [{"data": {"values": rows}, "mark": {"type": "line", "point": True},
                      "encoding": {"x": _log_axis("batch", "batch (concurrent sequences)",
                                                  [r["batch"] for r in rows] or [1]),
                                   "y": y,
                                   "color": {"field": "scenario", "type": "nominal", "title": None,
                                             "legend": {"orient": "bottom", "direction": "vertical"}},
                                   "tooltip": [{"field": "scenario"}, {"field": "batch", "format": ","},
                                               {"field": column, "format": fmt, "title": y_title}]}}]
    return spec
