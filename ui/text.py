"""Safe text: user-supplied strings are shown as plain text, never as HTML or Markdown."""

from __future__ import annotations

import re

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$&:])")


def plain(text: object, limit: int = 300) -> str:
    """Escape Markdown/HTML so user text renders literally inside st.markdown/st.error."""
    s = str(text)
    if len(s) > limit:
        s = s[:limit] + "…"
    return _MARKDOWN_SPECIAL.sub(r"\\\1", s)
