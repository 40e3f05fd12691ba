"""Real-browser test of the Plan view at the objective and Compare at equal service (Debian's headless
Chromium through Playwright, against `streamlit run app.py`; fixtures from tests/test_browser.py)."""

from __future__ import annotations

import json
import re
from urllib.parse import quote

import pytest
from test_browser import ARTIFACTS, _wait_for_metrics, _wait_idle, browser, server  # noqa: F401 (fixtures)

from planner.contract.equal_service import DEFAULT_TRAFFIC_REQUESTS_PER_S
from planner.serving.sizing import size
from ui.links import DEFAULT_SCENARIO

pytestmark = pytest.mark.browser
GPUS = ("h100-sxm", "h200", "b200")


def _tiles(page) -> dict[str, str]:
    out = {}
    for m in page.locator('[data-testid="stMetric"]').all():
        out[m.locator('[data-testid="stMetricLabel"]').inner_text().strip()] = (
            m.locator('[data-testid="stMetricValue"]').inner_text().strip())
    return out


def _sizing_usd_per_million(gpu: str) -> float:
    result = size(
        {
            "model": "llama-3.1-70b", "gpus": [gpu], "tp": [4], "weights": ["fp8"], "kv_cache": ["fp8"],
            "context_len": 8192,
            "traffic": {
                "requests_per_s": DEFAULT_TRAFFIC_REQUESTS_PER_S, "prompt_len": 2000, "output_len": 400,
            },
            "slo": {"ttft_ms": 1000.0, "itl_ms": 50.0, "percentile": 90},
        }
    )
    return result["options"][0]["usd_per_million_output_tokens"]


def test_default_plan_judges_its_objective_and_ranks_gpus_as_compare_and_sizing_do(server, browser):  # noqa: F811
    """Llama-3.1-70B fp8 on 4 H100s, H200s and B200s at the default objective: every p90 tile says met or
    missed; the $/hour each needs for the same traffic ranks the three GPUs as Compare's equal-service
    ranking and as the sizing search's cheapest option per GPU do.
    Source: ui: the three views answer from one sizing function (planner.contract.equal_service)."""
    ARTIFACTS.mkdir(exist_ok=True)
    traffic = f"{DEFAULT_TRAFFIC_REQUESTS_PER_S:,.4g}"
    usd_per_hour = {}
    for gpu in GPUS:
        page = browser.new_page(viewport={"width": 1500, "height": 2400})
        page.goto(f"{server}/?gpu={gpu}")
        _wait_for_metrics(page)
        tiles = _tiles(page)
        for name in ("TTFT p90", "ITL p90"):
            assert re.search(r"(✓ met|✗ missed)$", tiles[name]), (gpu, name, tiles[name])
        assert "Mean TPOT" in tiles and "Goodput per replica" in tiles
        usd_per_hour[gpu] = float(tiles[f"$/hour for {traffic} req/s"].lstrip("$").replace(",", ""))
        page.screenshot(path=str(ARTIFACTS / f"browser_plan_objective_{gpu}.png"), full_page=True)
        page.close()
    by_plan = sorted(GPUS, key=lambda g: usd_per_hour[g])  # one traffic: $/h ranks as $/M does

    pins = [{**DEFAULT_SCENARIO, "gpu": g} for g in GPUS]
    page = browser.new_page(viewport={"width": 1500, "height": 2400})
    page.goto(f"{server}/?compare={quote(json.dumps(pins))}")
    _wait_for_metrics(page)
    page.get_by_text("Compare what-ifs", exact=True).click()
    ranking = page.locator('[data-testid="stMarkdown"]', has_text="Cheapest at equal service")
    ranking.first.wait_for(timeout=60_000)
    _wait_idle(page)
    text = ranking.first.inner_text()
    by_compare = sorted(GPUS, key=lambda g: text.index(f"{g} "))
    page.screenshot(path=str(ARTIFACTS / "browser_compare_equal_service.png"), full_page=True)
    page.close()
    assert by_compare == by_plan
    assert by_plan == sorted(GPUS, key=_sizing_usd_per_million)
