"""Safe text: user-supplied strings are shown as plain text, never as HTML or Markdown.

Streamlit renders every message (st.markdown, st.warning, st.error, captions) as GitHub Markdown, which
turns bare addresses into live links even when their punctuation is backslash-escaped (seen in Chromium:
`https\\://…` still became a link). So user text goes into an inline code span, where Markdown renders
nothing: no link, autolink, image, emphasis, HTML, emoji code or formula. The fence is longer than any
run of backticks in the text, line breaks become spaces (one message stays one line), and long text is cut.
"""

from __future__ import annotations

import re

_LINE_BREAKS = re.compile(r"[\r\n\t\v\f\u2028\u2029\x85]+")
_BACKTICK_RUNS = re.compile(r"`+")


def plain(text: object, limit: int = 300) -> str:
    """User text as a Markdown inline code span that renders literally, cut to `limit` characters."""
    s = _LINE_BREAKS.sub(" ", str(text))
    if len(s) > limit:
        s = s[:limit] + "…"
    if not s.strip():
        return "(empty)"
    fence = "`" * (max((len(run) for run in _BACKTICK_RUNS.findall(s)), default=0) + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"
