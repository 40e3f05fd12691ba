"""The team set-up (tools/team.py): nginx in front of Streamlit workers starts, serves /_stcore/health,
sets its sticky cookie, upgrades the websocket so one session renders, and stops cleanly on Ctrl-C.
A smoke test without timings (tools/load_team.py measures them). Skipped where nginx is not installed.
Source: contract: README "Run it for your team".
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

pytestmark = pytest.mark.skipif(not (shutil.which("nginx") or os.access("/usr/sbin/nginx", os.X_OK)),
                                reason="nginx is not installed (make nginx-deps)")


def test_team_serves_health_and_a_session_then_stops(tmp_path):
    """Source: contract: README "Run it for your team"."""
    from streamlit_session import Session, free_port, plan_query

    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable, str(ROOT / "tools" / "team.py"), "--workers", "1", "--port", str(port),
            "--address", "127.0.0.1", "--run-dir", str(tmp_path / "run"),
        ],
        cwd=ROOT,
    )
    try:
        deadline = time.time() + 180
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                    body, headers = r.read(), r.headers
                break
            except OSError:
                assert time.time() < deadline and proc.poll() is None, "the team did not start"
                time.sleep(0.5)
        assert body == b"ok"
        assert headers["Server"].startswith("nginx")
        assert any(v.startswith("ridgeline_worker=") for k, v in headers.items() if k.lower() == "set-cookie")
        assert "proxy_set_header Upgrade" in (tmp_path / "run" / "nginx.conf").read_text()

        async def one_session():
            user = Session(f"127.0.0.1:{port}", sticky=True)
            await user.open(plan_query(400))
            await user.close()
            return user

        user = asyncio.run(one_session())
        assert "output_len" in user.widget_ids  # the page rendered its inputs through the proxy
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2)
