"""Real-browser test: Debian's headless Chromium, driven by Playwright, against `streamlit run app.py`.

Opens a share link, checks the headline figures against the CLI's plan, changes an input and checks the
URL followed, pins two scenarios and checks the comparison, and saves screenshots under artifacts/.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "artifacts"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
LINK = {"model": "llama-3.1-70b", "gpu": "h200", "tp": "2", "weights": "fp8", "kv_cache": "fp8",
        "context_len": "8192", "prompt_len": "3000", "output_len": "500"}


# Figures from outside the planner (derivations in tests/test_app.py, W70_FP8_GB and RIDGE):
# Llama-3.1-70B fp8 weights per GPU from its config.json: 68,451,041,280 linear B / TP + 4,202,692,608 B of
# bf16 embedding and head / TP + 2,637,824 B of norms: 36.33 GB at TP 2, 18.17 GB at TP 4.
# Ridge = dense peak / bandwidth (NVIDIA datasheets, sparse TFLOP/s / 2): H100 SXM fp8 1,979 / 3.35 = 590.7,
# bf16 989.5 / 3.35 = 295.4; H200 fp8 1,979 / 4.8 = 412.3.
W70_FP8_GB = {2: 36.33, 4: 18.17}
RIDGE = {"h100-sxm fp8": 590.7, "h100-sxm bf16": 295.4, "h200 fp8": 412.3}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail("Debian chromium is missing: .ci/run must install it")
        pytest.skip("Debian chromium is not installed (apt-get install chromium)")
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
            "--server.headless", "true", "--server.address", "127.0.0.1", "--browser.gatherUsageStats",
            "false",
        ],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                break
        except OSError:
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("streamlit did not start")
    yield url
    proc.terminate()
    proc.wait(timeout=20)


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=CHROMIUM, headless=True,
            args=[
                "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
            ],
        )
        yield b
        b.close()


def _cli_plan(scenario: dict) -> dict:
    r = subprocess.run([sys.executable, "-m", "planner", "plan", "-"], input=json.dumps(scenario), text=True,
                       capture_output=True, cwd=ROOT, timeout=60, check=True)
    return json.loads(r.stdout)


def _metrics(page) -> dict[str, float]:
    out = {}
    for m in page.locator('[data-testid="stMetric"]').all():
        label = m.locator('[data-testid="stMetricLabel"]').inner_text().strip()
        value = m.locator('[data-testid="stMetricValue"]').inner_text().strip()
        digits = re.sub(r"[^0-9.]", "", value.split()[0])
        if digits:
            # memory tiles are in GiB: read back in GB, the unit of the figures below
            out[label] = float(digits) * (2**30 / 1e9 if value.endswith("GiB") else 1.0)
    return out


IDLE = '.stApp[data-test-script-state="notRunning"]'


def _wait_idle(page) -> None:
    """The script run the page asked for has finished (Streamlit marks the app's root element)."""
    page.wait_for_selector(IDLE, timeout=60_000)


def _wait_for_metrics(page, n: int = 8) -> None:
    page.wait_for_function(f"document.querySelectorAll('[data-testid=\"stMetric\"]').length >= {n}",
                           timeout=60_000)
    _wait_idle(page)


def _metric_text(page, label: str) -> str:
    m = page.locator('[data-testid="stMetric"]').filter(has=page.get_by_text(label, exact=True)).first
    return m.locator('[data-testid="stMetricValue"]').inner_text()


def _wait_metric_changed(page, label: str, before: str) -> None:
    """Wait for a change the test caused: the metric's text differs from what it was before."""
    page.wait_for_function(
        """([label, before]) => [...document.querySelectorAll('[data-testid="stMetric"]')].some(m =>
             m.querySelector('[data-testid="stMetricLabel"]')?.innerText.trim() === label &&
             m.querySelector('[data-testid="stMetricValue"]')?.innerText !== before)""",
        arg=[label, before], timeout=60_000)
    _wait_idle(page)


def _query(page) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlparse(page.url).query).items()}


def test_share_link_figures_match_cli_then_inputs_update_url_and_pins_compare(server, browser):
    """The link's Llama-3.1-70B fp8 on two H200s shows 36.33 GB of weights per GPU and the H200's fp8
    ridge of 412.3 FLOP/byte (W70_FP8_GB, RIDGE above); the other figures match the CLI's plan, an input
    change reaches the URL and the figures, and two pins compare.
    Source: datasheet: NVIDIA H200 SXM datasheet (4.8 TB/s, 3,958 sparse fp8 TFLOP/s); weights by hand from
    Llama-3.1-70B's config.json.
    """
    ARTIFACTS.mkdir(exist_ok=True)
    page = browser.new_page(viewport={"width": 1500, "height": 2000})
    page.goto(server + "/?" + "&".join(f"{k}={v}" for k, v in LINK.items()))
    _wait_for_metrics(page)

    # a link without `load` takes the default operating point, the goodput under the default objective
    from ui.links import DEFAULT_SCENARIO

    scenario = {
        **{k: int(v) if v.isdigit() else v for k, v in LINK.items()},
        "load": DEFAULT_SCENARIO["load"],
    }
    plan = _cli_plan(scenario)
    m = _metrics(page)
    assert m["Weights per GPU"] == pytest.approx(W70_FP8_GB[2], abs=0.006)
    assert m["Ridge FLOP/byte"] == pytest.approx(RIDGE["h200 fp8"], rel=2e-3)
    assert m["Weights per GPU"] == pytest.approx(plan["memory"]["weights_gb_per_gpu"], abs=0.006)
    assert m["KV budget per GPU"] == pytest.approx(plan["memory"]["kv_budget_gb_per_gpu"], abs=0.006)
    assert m["Max batch"] == plan["memory"]["max_batch"]
    assert m["ITL, decode only"] == pytest.approx(plan["latency"]["itl_ms"], rel=0.006)
    assert m["TTFT, one request alone"] == pytest.approx(plan["latency"]["ttft_ms"], rel=0.006)
    assert m["Goodput per replica"] == pytest.approx(plan["serving"]["request_rate"], abs=0.006)
    page.screenshot(path=str(ARTIFACTS / "browser_plan.png"), full_page=True)

    # pin, then change an input: the URL and the figures follow
    page.get_by_role("button", name="Pin for comparison").click()
    page.wait_for_function("window.location.search.includes('compare=')", timeout=30_000)
    _wait_idle(page)
    itl_before = _metric_text(page, "ITL, decode only")
    output = page.get_by_label("Output", exact=True)
    output.fill("300")
    output.press("Enter")
    page.wait_for_function("window.location.search.includes('output_len=300')", timeout=30_000)
    _wait_metric_changed(
        page, "ITL, decode only", itl_before
    )  # shorter outputs: a shorter mean context, a faster step
    assert _query(page)["output_len"] == "300"
    plan_300 = _cli_plan({**scenario, "output_len": 300})
    assert _metrics(page)["ITL, decode only"] == pytest.approx(plan_300["latency"]["itl_ms"], rel=0.006)

    # pin the second scenario and compare
    page.get_by_role("button", name="Pin for comparison").click()
    page.wait_for_function(
        "(new URLSearchParams(window.location.search).get('compare') || '').split('gpu').length == 3",
        timeout=30_000,
    )
    pins = json.loads(_query(page)["compare"])
    assert [p["output_len"] for p in pins] == [500, 300]
    page.get_by_text("Compare what-ifs", exact=True).click()
    table = page.locator('[data-testid="stDataFrame"]')
    table.first.wait_for(timeout=30_000)
    _wait_idle(page)
    page.screenshot(path=str(ARTIFACTS / "browser_compare.png"), full_page=True)
    page.close()


def test_bad_link_parameter_is_named_and_rest_applies(server, browser):
    """The bad `gpu` and `model` are named and fall back to the defaults while TP 4 applies: the page shows
    Llama-3.1-70B fp8 at TP 4 on an H100, 18.17 GB of weights per GPU and a ridge of 590.7 FLOP/byte.
    Source: hand: weights from Llama-3.1-70B's config.json, ridge from the NVIDIA H100 SXM datasheet (above).
    """
    page = browser.new_page()
    page.goto(server + "/?gpu=h900&tp=4&output_len=123&model=%3Cscript%3Ealert(1)%3C/script%3E")
    _wait_for_metrics(page)
    alerts = page.locator('[data-testid="stAlert"]').all_inner_texts()
    joined = " ".join(alerts)
    assert "gpu" in joined and "unknown GPU" in joined
    assert "model" in joined and "unknown preset" in joined
    assert page.locator("script:has-text('alert(1)')").count() == 0  # no HTML from user text
    assert _query(page)["output_len"] == "123"
    m = _metrics(page)
    assert m["Weights per GPU"] == pytest.approx(W70_FP8_GB[4], abs=0.006)
    assert m["Ridge FLOP/byte"] == pytest.approx(RIDGE["h100-sxm fp8"], rel=2e-3)
    page.close()


EVIL = "[Log in again](https://evil.example/login) ![p](https://evil.example/pixel.png) <img src=https://evil.example/i.png>"


def test_crafted_compare_link_makes_no_outside_request_no_link_no_image(server, browser):
    """Issue 13: pin names from a `compare=` link once reached a Markdown table header, showing a live
    link to another site and fetching an outside image on page load. Every request the page makes is
    recorded (and any outside one blocked): only the app's own host may be asked. The crafted GPU carries
    the H100 SXM datasheet's figures, so the plan behind the escaped names is real: a bf16 ridge of
    989.5 / 3.35 = 295.4 FLOP/byte.
    Source: datasheet: NVIDIA H100 SXM datasheet (1,979 sparse bf16 TFLOP/s, 3.35 TB/s).
    """
    from urllib.parse import quote

    page = browser.new_page(viewport={"width": 1400, "height": 1600})
    requested: list[str] = []

    def record(route):
        requested.append(route.request.url)
        if urlparse(route.request.url).hostname in ("127.0.0.1", "localhost"):
            route.continue_()
        else:
            route.abort()

    page.route("**/*", record)
    model = {"name": EVIL, "n_layers": 4, "d_model": 512, "n_heads": 8, "n_kv_heads": 2, "d_ff": 2048,
             "vocab_size": 32000}
    gpu = {"name": EVIL, "vendor": "[x](https://evil.example/v)", "memory_gb": 80.0, "hbm_tb_s": 3.35,
           "tflops": {"bf16": 989.4, "fp8": 1978.9}, "usd_per_hour": 2.0}
    base = {
        "context_len": 8192, "prompt_len": 3000, "output_len": 500, "weights": "bf16", "kv_cache": "bf16",
        "tp": 1,
    }
    pins = [{**base, "model": model, "gpu": "h200"}, {**base, "model": "llama-3.1-8b", "gpu": gpu}]
    link = {**{k: str(v) for k, v in base.items()}, "model": json.dumps(model), "gpu": json.dumps(gpu),
            "compare": json.dumps(pins)}
    page.goto(server + "/?" + "&".join(f"{k}={quote(v)}" for k, v in link.items()))
    _wait_for_metrics(page)
    page.screenshot(path=str(ARTIFACTS / "browser_injection_plan.png"), full_page=True)
    assert (
        page.get_by_text("[Log in again](https://evil.example/login)", exact=False).count() > 0
    )  # shown literally
    assert _metrics(page)["Ridge FLOP/byte"] == pytest.approx(RIDGE["h100-sxm bf16"], rel=2e-3)
    page.get_by_text("Compare what-ifs", exact=True).click()
    page.get_by_role("button", name="Clear pins").wait_for(timeout=30_000)
    page.locator('[data-testid="stDataFrame"]').first.wait_for(timeout=30_000)
    _wait_idle(page)
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(ARTIFACTS / "browser_injection.png"), full_page=True)
    outside = [u for u in requested if urlparse(u).hostname not in ("127.0.0.1", "localhost")
               and not u.startswith(("data:", "blob:"))]
    assert outside == []
    assert page.locator('a[href*="evil"]').count() == 0
    assert page.locator('img[src*="evil"]').count() == 0
    page.close()


def test_tp_3_is_refused_and_the_nearest_valid_tp_offered(server, browser):
    """A link asking for TP 3 on Llama-3.1-70B (64 attention heads, 8 KV heads): vLLM would refuse it ("Total
    number of attention heads (64) must be divisible by tensor parallel size (3)", vllm/config/model.py), so
    the page shows the planner's line naming TP 2 or 4, plans a valid TP, and never prints
    `--tensor-parallel-size 3`.
    Source: hand: the TPs that split 64 heads and 8 KV heads around 3 are 2 and 4.
    """
    page = browser.new_page(viewport={"width": 1500, "height": 1600})
    page.goto(server + "/?model=llama-3.1-70b&gpu=h100-sxm&tp=3&weights=fp8&kv_cache=fp8")
    _wait_for_metrics(page)
    joined = " ".join(page.locator('[data-testid="stAlert"]').all_inner_texts())
    assert "tp" in joined and "3 must divide the model's 64 attention heads and 8 KV heads" in joined
    assert "nearest valid 2 or 4" in joined
    assert _query(page).get("tp") in ("2", "4")
    assert "--tensor-parallel-size 3" not in page.content()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "browser_tp3_refused.png"), full_page=False)
    page.close()


CUT_TEXT = """() => [...document.querySelectorAll(
    '[data-testid="stMetricValue"] .stMarkdownEllipsis, [data-testid="stMetricLabel"] .stMarkdownEllipsis')]
  .filter(e => e.offsetParent !== null && e.scrollWidth > e.clientWidth + 1).map(e => e.innerText)"""


@pytest.mark.parametrize("view", ["plan", "power"])
def test_no_tile_is_cut_at_1024_px(server, browser, view):
    """At a 1,024 px window every tile's value and label fits its box: no text runs past it into an ellipsis
    (issue 31: "4.45…", "$14…", "288.5 …" at 1,024 px).
    Source: ui: the page as Chromium lays it out (each tile text's scrollWidth within its clientWidth)."""
    page = browser.new_page(viewport={"width": 1024, "height": 1200})
    page.goto(server + ("/?view=power" if view == "power" else "/"))
    _wait_for_metrics(page, 5)
    assert page.evaluate(CUT_TEXT) == []
    page.screenshot(path=str(ARTIFACTS / f"browser_tiles_1024_{view}.png"))
    page.close()
