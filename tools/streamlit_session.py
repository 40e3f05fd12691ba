"""A browser tab's worth of Streamlit's websocket protocol, for the load tests (benchmarks/bench_load.py,
tools/load_team.py): connect to /_stcore/stream, run the script with a query string, rerun with a changed
widget, wait for each run to finish. Loopback only; every wait is bounded."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

RECV_TIMEOUT_S = 120
MAX_MESSAGES_PER_RUN = 100_000  # a run is a few hundred messages


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_streamlit(root: Path, timeout_s: float = 90.0) -> tuple[subprocess.Popen, int]:
    """`streamlit run app.py` from `root` on a free loopback port, once its /_stcore/health answers ok:
    (the process, its port). Exits with one line when it does not start in `timeout_s`."""
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
            "--server.headless", "true", "--server.address", "127.0.0.1", "--browser.gatherUsageStats",
            "false", "--server.fileWatcherType", "none",
        ],
        cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2).read() == b"ok":
                return proc, port
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise SystemExit("streamlit did not start")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a live process (0 once it has gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def plan_query(output_len: int) -> str:
    """The default scenario's share link with one field changed (distinct links defeat the cache)."""
    return urlencode({"model": "llama-3.1-70b", "gpu": "h100-sxm", "tp": 4, "weights": "fp8",
                      "kv_cache": "fp8", "context_len": 8192, "prompt_len": 2000, "output_len": output_len})


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))] if ordered else float("nan")


class Session:
    """One tab. `sticky`: first fetch the page for the proxy's session cookie and send it with the
    websocket, as a browser does behind `make team`'s nginx."""

    def __init__(self, address: str, sticky: bool = False):
        self.address = address  # 127.0.0.1:PORT
        self.sticky = sticky
        self.ws = None
        self.cookie = ""
        self.widget_ids: dict[str, str] = {}
        self.button_ids: dict[str, str] = {}  # label -> widget id (form submit buttons have no key)

    def _get_cookie(self) -> None:
        with urllib.request.urlopen(f"http://{self.address}/", timeout=30) as r:
            cookies = [h.split(";", 1)[0] for k, h in r.headers.items() if k.lower() == "set-cookie"]
        self.cookie = "; ".join(cookies)

    async def open(self, query: str) -> float:
        import websockets
        from streamlit.proto.BackMsg_pb2 import BackMsg

        t0 = time.perf_counter()
        headers = {}
        if self.sticky:
            await asyncio.to_thread(self._get_cookie)
            headers = {"Cookie": self.cookie}
        self.ws = await websockets.connect(f"ws://{self.address}/_stcore/stream", subprotocols=["streamlit"],
                                           origin=f"http://{self.address}", max_size=None,
                                           additional_headers=headers)
        msg = BackMsg()
        msg.rerun_script.query_string = query
        msg.rerun_script.page_script_hash = ""
        await self.ws.send(msg.SerializeToString())
        await self._until_finished()
        return time.perf_counter() - t0

    async def change(self, key: str, value: int | str) -> float:
        """Rerun with one widget changed: a number input's int, or a radio's option label (a string)."""
        from streamlit.proto.BackMsg_pb2 import BackMsg

        t0 = time.perf_counter()
        msg = BackMsg()
        msg.rerun_script.page_script_hash = ""
        state = msg.rerun_script.widget_states.widgets.add()
        state.id = self.widget_ids[key]
        if isinstance(value, str):
            state.string_value = value
        else:
            state.int_value = value
        await self.ws.send(msg.SerializeToString())
        await self._until_finished()
        return time.perf_counter() - t0

    async def submit(self, button: str, doubles: dict[str, float]) -> float:
        """Press a form's submit button (by its label) with these number inputs set, as the browser sends a
        submitted form: the widgets' values and the button's trigger in one rerun."""
        from streamlit.proto.BackMsg_pb2 import BackMsg

        t0 = time.perf_counter()
        msg = BackMsg()
        msg.rerun_script.page_script_hash = ""
        for key, value in doubles.items():
            state = msg.rerun_script.widget_states.widgets.add()
            state.id = self.widget_ids[key]
            state.double_value = value
        trigger = msg.rerun_script.widget_states.widgets.add()
        trigger.id = self.button_ids[button]
        trigger.trigger_value = True
        await self.ws.send(msg.SerializeToString())
        await self._until_finished()
        return time.perf_counter() - t0

    async def _until_finished(self) -> None:
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        for _ in range(MAX_MESSAGES_PER_RUN):
            raw = await asyncio.wait_for(self.ws.recv(), timeout=RECV_TIMEOUT_S)
            fwd = ForwardMsg()
            fwd.ParseFromString(raw)
            kind = fwd.WhichOneof("type")
            if kind == "delta" and fwd.delta.WhichOneof("type") == "new_element":
                element = fwd.delta.new_element
                inner = getattr(element, element.WhichOneof("type") or "", None)
                wid = getattr(inner, "id", "")
                if isinstance(wid, str) and wid:
                    self.widget_ids[wid.rsplit("-", 1)[-1]] = wid
                    if element.WhichOneof("type") == "button":
                        self.button_ids[inner.label] = wid
            elif kind == "script_finished":
                return
        raise RuntimeError("no script_finished")

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()
