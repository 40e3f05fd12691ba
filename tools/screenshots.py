"""Screenshots of every view, taken in headless Chromium (Playwright, Debian's /usr/bin/chromium) against
`streamlit run app.py`:

    .venv/bin/python -m tools.screenshots   # docs/screenshots/<view>_<width>.png, docs/screenshot.png

Each view opens from a share link alone (a sizing link runs its search, a `power` link its tool) at 1,440
and 1,024 px wide. docs/screenshot.png, the README's picture, is the top of the
Plan view at 1,440 px. docs/screenshots/manifest.json records each link and the tiles and table headers
the page showed; tests/test_readme.py checks them against the app, so a screenshot that no longer shows what
the app shows fails the suite until this tool is run again.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from tools.streamlit_session import start_streamlit

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "screenshots"
README_SHOT = ROOT / "docs" / "screenshot.png"
MANIFEST = OUT / "manifest.json"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
WIDTHS = (1440, 1024)
HEIGHT = 900
MAX_HEIGHT = 9000  # px: a longer view is cut here (the Plan view with its charts is about 6,000)


def _compare_pins() -> list[dict[str, Any]]:
    """The buyer's case of issue 31: Llama-3.1-70B fp8, 2,000 -> 400 tokens, on H100, H200, B200, MI355X."""
    from ui.links import DEFAULT_SCENARIO

    return [{**DEFAULT_SCENARIO, "gpu": gpu, "tp": tp}
            for gpu, tp in (("h100-sxm", 4), ("h200", 2), ("b200", 2), ("mi355x", 1))]


def _size_request() -> dict[str, Any]:
    """The sizing form's request from the default sidebar (ui/shared_scenario.py), over the four GPUs."""
    return {"model": "llama-3.1-70b",
            "traffic": {"requests_per_s": 50.0, "prompt_len": 2000, "output_len": 400},
            "slo": {"ttft_ms": 1000.0, "itl_ms": 50.0, "percentile": 90},
            "gpus": ["h100-sxm", "h200", "b200", "mi355x"], "tp": [1, 2, 4, 8], "weights": ["fp8"],
            "kv_cache": ["fp8"], "context_len": 8192, "cost_mode": "rent"}


def views() -> dict[str, dict[str, str]]:
    """Each view's share link (query parameters)."""
    return {
        "plan": {},
        "compare": {"compare": json.dumps(_compare_pins(), separators=(",", ":"), sort_keys=True),
                    "view": "compare"},
        "size": {"size": json.dumps(_size_request(), separators=(",", ":")), "view": "size"},
        "power": {"view": "power", "power": json.dumps({"pw_tool": "Power-capped sizing"})},
    }


def start_app() -> tuple[subprocess.Popen[bytes], str]:
    proc, port = start_streamlit(ROOT)
    return proc, f"http://127.0.0.1:{port}"


# The page is drawn: the script is not running, no element is still a loading skeleton, and the main block
# holds something (right after a load the state reads "notRunning" before the first run has begun).
DRAWN = """() => document.querySelector('.stApp[data-test-script-state="notRunning"]') !== null
  && document.querySelector('[data-testid="stSkeleton"]') === null
  && document.querySelectorAll('[data-testid="stMain"] [data-testid="stElementContainer"]').length > 3"""


def _settle(page: Any) -> None:
    """The run the page asked for has finished and its charts are drawn (checked twice, 2 s apart: a link
    that rewrites the address bar runs the script once more)."""
    for _ in range(2):
        page.wait_for_function(DRAWN, timeout=180_000)
        page.wait_for_timeout(2000)
    page.wait_for_function(DRAWN, timeout=180_000)


def _shown(page: Any) -> dict[str, Any]:
    """The tiles (label -> value) and the table headers the page shows."""
    tiles = {}
    for m in page.locator('[data-testid="stMetric"]').all():
        label = m.locator('[data-testid="stMetricLabel"]').inner_text().strip()
        tiles[label] = m.locator('[data-testid="stMetricValue"]').inner_text().strip()
    headers = page.locator('[data-testid="stDataFrame"]').count()
    return {"tiles": tiles, "tables": headers}


def shoot(page: Any, url: str, name: str, params: dict[str, str], width: int) -> dict[str, Any]:
    page.set_viewport_size({"width": width, "height": HEIGHT})
    page.goto(url + "/?" + urlencode(params))
    _settle(page)
    if name == "size":  # a sizing link fills the form; the search runs when the button is pressed (issue 32)
        page.get_by_role("button", name="Find the cheapest fleet").click()
    if name in ("size", "power"):  # the search / the tool the link asked for
        page.wait_for_selector('[data-testid="stDataFrame"]', timeout=180_000)
        _settle(page)
    if name == "plan" and width == WIDTHS[0]:
        page.screenshot(path=str(README_SHOT))
    # Streamlit scrolls inside its main block, not the document: the whole view is a window that tall
    for _ in range(2):
        page.set_viewport_size({"width": width, "height": min(_page_height(page), MAX_HEIGHT)})
        _settle(page)
    path = OUT / f"{name}_{width}.png"
    page.screenshot(path=str(path))
    return {"link": params, "width": width, "file": path.name, **_shown(page)}


def _page_height(page: Any) -> int:
    """The height the main block and the sidebar need to show whole."""
    return int(page.evaluate(
        """() => Math.max(...['stMain', 'stSidebarContent'].map(id =>
             document.querySelector(`[data-testid="${id}"]`)?.scrollHeight || 0), 900)"""))


def main() -> None:
    from playwright.sync_api import sync_playwright

    OUT.mkdir(parents=True, exist_ok=True)
    proc, url = start_app()
    shots = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                        args=["--no-sandbox", "--disable-gpu", "--no-first-run"])
            for width in WIDTHS:
                for name, params in views().items():
                    page = browser.new_page(device_scale_factor=1)
                    shots.append({"view": name, **shoot(page, url, name, params, width)})
                    print(f"{name} at {width} px: {shots[-1]['file']}", flush=True)
                    page.close()
            browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    manifest = {"readme_screenshot_sha256": hashlib.sha256(README_SHOT.read_bytes()).hexdigest(),
                "shots": shots}
    MANIFEST.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
