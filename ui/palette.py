"""One colour per quantity, across every chart: the KV cache, a percentile or the goodput is drawn in the
same colour wherever it appears. Charts look colours up here by the quantity's name."""

from __future__ import annotations

# Tableau-10 hues (Vega's default), assigned once to a quantity each
COLOURS: dict[str, str] = {
    # memory
    "weights": "#4c78a8", "KV cache": "#f58518", "activation peak": "#b279a2", "CUDA graphs": "#9d755d",
    "non-torch": "#eeca3b", "rotary tables": "#72b7b2", "allocator rounding": "#ff9da6", "reserve": "#bab0ac",
    "free": "#e8e8e8",
    # latency percentiles and their bounds
    "p50": "#4c78a8", "p90": "#f58518", "p99": "#e45756", "mean": "#72b7b2",
    "capacity": "#7f7f7f", "goodput": "#54a24b", "objective": "#2f6f2a",
    # step physics
    "estimate": "#4c78a8", "roofline bound": "#9d755d", "decode step": "#4c78a8", "prefill": "#f58518",
    "ridge": "#e45756", "fits in memory": "#4c78a8", "beyond the max batch": "#b0b0b0",
    "this plan": "#e45756", "throughput per GPU": "#4c78a8", "$ per M output tokens": "#4c78a8",
}
GREY = "#b0b0b0"


def colour(name: str) -> str:
    """The colour of a quantity; a label that starts with a known name takes its colour ('KV cache: 1,274,752
    tokens' is the KV cache; 'p90 objective 50 ms' the objective)."""
    if name in COLOURS:
        return COLOURS[name]
    if "objective" in name:
        return COLOURS["objective"]
    for key in sorted(COLOURS, key=len, reverse=True):
        if name.startswith(key):
            return COLOURS[key]
    return GREY


def scale(names: list[str]) -> dict[str, list[str]]:
    """A Vega-Lite colour scale giving each name its quantity's colour."""
    return {"domain": list(names), "range": [colour(n) for n in names]}
