#!/usr/bin/env python3
"""Print speed figures that are targets, not assertions (the dev machine is a shared 2-core box):
  * one full page rerun of the app, server side (AppTest, median of 15 after warm-up): target < 150 ms
  * `python -m planner size` as a whole command over the whole catalog: target < 2 s
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def app_rerun_ms(runs: int = 15) -> tuple[float, float]:
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.run()
    times = []
    for i in range(runs):
        # a new value every rerun: nothing comes from the chart cache, each run recomputes everything
        at.sidebar.number_input(key="output_len").set_value(401 + i)
        at.run()
        times.append(at.session_state["_last_run_ms"])  # the script's own time, without AppTest's polling
    return statistics.median(times), min(times)


def app_unchanged_rerun_ms(runs: int = 15) -> float:
    """A rerun that changes no scenario input (a tab, a pin, a download): charts come from the cache."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.run()
    times = []
    for _ in range(runs):
        at.run()
        times.append(at.session_state["_last_run_ms"])
    return statistics.median(times)


def cli_size_s(runs: int = 5) -> tuple[float, int]:
    request = {
        "model": "llama-3.1-70b", "traffic": {"requests_per_s": 10.0, "prompt_len": 2000, "output_len": 400},
        "slo": {"ttft_ms": 2000.0, "itl_ms": 50.0},
    }
    times, searched = [], 0
    for _ in range(runs):
        t = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-m", "planner", "size", "-"], input=json.dumps(request), text=True,
            capture_output=True, cwd=ROOT, check=True,
        ).stdout
        times.append(time.perf_counter() - t)
        searched = json.loads(out)["searched"]
    return statistics.median(times), searched


if __name__ == "__main__":
    median, best = app_rerun_ms()
    print(
        f"app rerun after an input change (AppTest, server side): median {median:.0f} ms, best {best:.0f} ms"
        "  (target < 150 ms)"
    )
    print(f"app rerun with the scenario unchanged: median {app_unchanged_rerun_ms():.0f} ms")
    secs, searched = cli_size_s()
    print(
        f"python -m planner size, whole catalog: median {secs:.2f} s for {searched:,} configurations  "
        "(target < 2 s)"
    )
