"""Page-wide layout: tiles that stay readable from 1,024 px up (issue 31: at 1,024 px the tiles were cut to
"4.45…" and "$14…"). A fixed style sheet, no user text in it."""

from __future__ import annotations

import streamlit as st

# A tile's value and label wrap instead of being cut with an ellipsis, and the value's size follows the
# window (1.3rem at 1,024 px, Streamlit's 2.25rem from about 1,560 px); less empty space above the title.
STYLE = """<style>
[data-testid="stMetricValue"] { font-size: clamp(1.3rem, 2.3vw, 2.25rem); line-height: 1.25; }
[data-testid="stMetricValue"] .stMarkdownEllipsis, [data-testid="stMetricValue"] p,
[data-testid="stMetricLabel"] .stMarkdownEllipsis, [data-testid="stMetricLabel"] p {
  white-space: normal !important; overflow: visible !important; text-overflow: clip !important;
}
[data-testid="stMainBlockContainer"] { padding-top: 2.5rem; }
</style>"""


def apply() -> None:
    st.html(STYLE)
