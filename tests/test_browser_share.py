"""Real-browser test of the share link's view parameters (issue 31 item 4): Compare what-ifs at one request
rate, set by clicks in Debian's headless Chromium (Playwright, against `streamlit run app.py`; fixtures from
tests/test_browser.py), travels in the address bar and a fresh page opened on it shows the same mode and
rate."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, quote, urlparse

import pytest
from test_browser import ARTIFACTS, _query, _wait_idle, browser, server  # noqa: F401 (fixtures)

from ui.links import DEFAULT_SCENARIO

pytestmark = pytest.mark.browser
RATE_LABEL = "Compare every pin at this request rate (req/s per replica)"
ONE_RATE = "At one request rate"


def _compare_page(browser, url: str):  # noqa: F811
    page = browser.new_page(viewport={"width": 1440, "height": 2000})
    page.goto(url)
    page.get_by_role("button", name="Clear pins").wait_for(timeout=60_000)
    _wait_idle(page)
    return page


def _shown(page) -> tuple[bool, str, str]:
    """(one-rate mode chosen, the rate input's text, the caption that states the rate)."""
    rate = page.get_by_role("spinbutton", name=RATE_LABEL)
    rate.wait_for(timeout=60_000)
    caption = page.locator('[data-testid="stCaptionContainer"]', has_text="Every column below is one replica")
    return (page.get_by_role("radio", name=ONE_RATE).is_checked(), rate.input_value(),
            caption.first.inner_text())


def test_compare_at_one_rate_round_trips_through_the_address_bar(server, browser):  # noqa: F811
    """Two pins (Llama-3.1-70B fp8 at TP 4 on an H100 and an H200): choosing "At one request rate" and
    typing 1.5 req/s per replica puts `compare_at=rate` and `compare_rate=1.5` in the address bar; a fresh
    page on that address opens Compare in that mode at 1.500 req/s, with the same query string.
    Source: ui: the app's link round trip in a real browser (issue 31: the mode was in no link)."""
    pins = [{**DEFAULT_SCENARIO, "gpu": g} for g in ("h100-sxm", "h200")]
    page = _compare_page(browser, f"{server}/?view=compare&compare={quote(json.dumps(pins))}")
    page.get_by_text(ONE_RATE, exact=True).click()
    rate = page.get_by_role("spinbutton", name=RATE_LABEL)
    rate.wait_for(timeout=60_000)
    _wait_idle(page)
    rate.fill("1.5")
    rate.press("Enter")
    page.wait_for_function("new URLSearchParams(window.location.search).get('compare_rate') === '1.5'",
                           timeout=60_000)
    _wait_idle(page)
    link, before = page.url, _shown(page)
    assert _query(page)["compare_at"] == "rate"
    assert before[0] and before[1] == "1.500" and "1.500 req/s" in before[2]
    page.close()

    fresh = _compare_page(browser, link)
    after = _shown(fresh)
    ARTIFACTS.mkdir(exist_ok=True)
    fresh.screenshot(path=str(ARTIFACTS / "browser_compare_one_rate_from_link.png"), full_page=True)
    assert after == before
    assert fresh.locator('[data-testid="stAlert"]').count() == 0  # no parameter refused
    assert _query(fresh) == {k: v[0] for k, v in parse_qs(urlparse(link).query).items()}
    fresh.close()
