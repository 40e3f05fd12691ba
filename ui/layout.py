"""Page-wide layout: tiles and column charts readable from 1,024 px up (issue 31: at 1,024 px the tiles
were cut to "4.45…" and "$14…", chart titles to "TTFT vs request rate (p50, p90, …"). A fixed style sheet,
no user text in it."""

from __future__ import annotations

from typing import Any

import streamlit as st

# A tile's value and label wrap instead of being cut with an ellipsis, and the value's size follows the
# window (1.3rem at 1,024 px, Streamlit's 2.25rem from about 1,560 px).
STYLE = """<style>
[data-testid="stMetricValue"] { font-size: clamp(1.3rem, 2.3vw, 2.25rem); line-height: 1.25; }
[data-testid="stMetricValue"] .stMarkdownEllipsis, [data-testid="stMetricValue"] p,
[data-testid="stMetricLabel"] .stMarkdownEllipsis, [data-testid="stMetricLabel"] p {
  white-space: normal !important; overflow: visible !important; text-overflow: clip !important;
}
</style>"""


def apply() -> None:
    st.html(STYLE)


# Characters of a chart title per line in a half-width column: a column is about 270 px wide at a 1,024 px
# window, where a longer title was cut with an ellipsis.
COLUMN_TITLE_CHARS = 32


def in_column(spec: dict[str, Any], chars: int = COLUMN_TITLE_CHARS) -> dict[str, Any]:
    """The spec laid out for a half-width column: its title in lines of at most `chars` characters (Vega-Lite
    draws a list of strings as lines) and legends of two columns, instead of both cut at the edge."""
    import textwrap

    config = {**spec.get("config", {})}
    config["legend"] = {**config.get("legend", {}), "columns": 2}
    out = {**spec, "config": config}
    title = spec.get("title")
    if isinstance(title, dict) and isinstance(title.get("text"), str) and len(title["text"]) > chars:
        out["title"] = {**title, "text": textwrap.wrap(title["text"], chars)}
    return out
