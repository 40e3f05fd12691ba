"""Collector settings for a process that answers one request and exits: the CLI (`python -m planner`) and
the app's search child (`python -m ui.search_runner`).

What the imports build lives until exit, so the collector need not walk it: they run with the young
generation collected rarely, then `gc.freeze()` moves it out of the collector's sight. A sizing request makes
hundreds of thousands of short-lived objects and few cycles, so the young generation is collected less often
(mypy's setting for the same reason). Issue 9's request: at the default threshold (700) the app's search
child took 2.54-2.60 s of CPU; at 100,000 the young generation was still collected 6-7 times over that
request, walking the memo's live figures each time (~30 ms of CPU); at 250,000 its collections take under
1 ms in all and the peak memory is the same (106 MB; issue 31).
"""

from __future__ import annotations

import gc

YOUNG_GENERATION_THRESHOLD = 250_000


def collect_rarely() -> None:
    """Before the imports: the young generation collected every 250,000 allocations, not 700."""
    gc.set_threshold(YOUNG_GENERATION_THRESHOLD, 50, 100)


def freeze_imports() -> None:
    """After the imports: what they built is never walked again."""
    gc.freeze()
