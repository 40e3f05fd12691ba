"""The app never shows a traceback, whatever a link or an upload holds (issue 22).

Hypothesis drives every query parameter and every uploader (tests/app_fuzz.py) through AppTest. Each
example runs the whole app (about a second), so CI runs a few dozen; RIDGELINE_APP_FUZZ_EXAMPLES (or
tools/fuzz_app.py, which runs it at 1,000 and more) scales it.
"""

from __future__ import annotations

import os
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.app_fuzz import CRAFTED, UPLOADS, VIEWS, case, invalid_text, run_case, run_crafted

EXAMPLES = int(os.environ.get("RIDGELINE_APP_FUZZ_EXAMPLES", "12"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None, print_blob=True,
                suppress_health_check=list(HealthCheck))


@FUZZ
@given(st.randoms(use_true_random=False))
def test_no_link_or_upload_shows_an_exception(rng: random.Random):
    """Random parameters and uploads, valid or broken: never an exception element on the page.
    Source: ui: the app's behaviour under AppTest (issue 22).
    """
    run_case(*case(rng))


@FUZZ
@given(
    st.sampled_from(
        [
            "model", "gpu", "tp", "weights", "batch", "efficiency", "load", "speculative", "calibration",
            "memory.utilization", "compare", "size", "compare_at", "compare_rate", "size_order",
            "size_option", "commands", "size_commands",
        ]
    ),
    st.randoms(use_true_random=False),
)
def test_a_refused_link_parameter_is_named(param: str, rng: random.Random):
    """A value the parameter cannot take: no exception, and a warning line names the parameter.
    Source: ui: the app's behaviour under AppTest (issue 22).
    """
    value = invalid_text(rng)
    view = rng.choice(VIEWS)  # named on whatever view is open (issue 32: `size` was named on Size only)
    at = run_case({param: value}, {}, view)
    text = " ".join(e.value for e in (*at.warning, *at.error)).replace("`", "")
    refused_whole = (
        "Link parameter link" in text.replace("*", "") and "over the limit" in text
    )  # over MAX_LINK_CHARS
    assert param in text or refused_whole, (param, value[:40], text[:300])


@FUZZ
@given(st.sampled_from(sorted(UPLOADS)), st.randoms(use_true_random=False))
def test_a_refused_upload_is_named(key: str, rng: random.Random):
    """An upload no reader accepts: no exception, and an error line names what was uploaded.
    Source: ui: the app's behaviour under AppTest (issue 22).
    """
    value = invalid_text(rng)
    at = run_case({}, {key: value.encode()}, "Plan")
    text = " ".join(e.value for e in (*at.warning, *at.error)).replace("`", "")
    assert UPLOADS[key] in text, (key, value[:40], text[:300])


@pytest.mark.parametrize(("what", "params", "view", "search", "named"), CRAFTED, ids=[c[0] for c in CRAFTED])
def test_issue_32_crafted_links(what, params, view, search, named):
    """The pareto_mask crash request and the ends of the sizing ranges, searched from the form; an unpriced
    custom-GPU Compare pin (no NaN in any chart, a note instead); the 22 KB size link refused for its output
    and named on every view; duplicate keys named. Never an exception element.
    Source: ui: the app's behaviour under AppTest (issue 32).
    """
    at = run_crafted(params, view, search, named)
    if what.startswith("an unpriced"):
        assert any("Left out of the $ chart" in c.value for c in at.caption)
    if search and named is None:
        assert at.session_state["sz_result"] is not None or any(e.value for e in at.error)
