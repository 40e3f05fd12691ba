#!/usr/bin/env python3
"""Server load benchmark (issue 13, item 6): starts `streamlit run app.py` and opens Streamlit sessions
over the websocket, as a browser does, but without one. Figures, not assertions:

  * first page: server CPU seconds per new session (cold first session, then fresh sessions on the
    default link: cached scenario, and on distinct links: nothing cached)         target <= 250 ms
  * rerun after an input change (output_len changed, one session, one at a time)  target <= 150 ms
  * N sessions opened at once: wall time from connect to script finished, p50/p95 target p95 <= 2 s (N=20)

    python benchmarks/bench_load.py [--sessions 20] [--reruns 15]

Server CPU is read from /proc for the server process (user + system), so it counts every thread.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_server() -> tuple[subprocess.Popen, str]:
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
            "--server.headless", "true", "--server.address", "127.0.0.1", "--browser.gatherUsageStats",
            "false", "--server.fileWatcherType", "none",
        ],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"127.0.0.1:{port}"
    deadline = time.time() + 90
    while time.time() < deadline:
        try:
            if urllib.request.urlopen(f"http://{url}/_stcore/health", timeout=2).read() == b"ok":
                return proc, url
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise SystemExit("streamlit did not start")


class Session:
    """One browser tab's worth of protocol: connect, run the script with a query string, rerun with a
    changed widget, wait for each run to finish."""

    def __init__(self, url: str):
        self.url = url
        self.ws = None
        self.widget_ids: dict[str, str] = {}

    async def open(self, query: str) -> float:
        import websockets
        from streamlit.proto.BackMsg_pb2 import BackMsg

        t0 = time.perf_counter()
        self.ws = await websockets.connect(f"ws://{self.url}/_stcore/stream", subprotocols=["streamlit"],
                                           origin=f"http://{self.url}", max_size=None)
        msg = BackMsg()
        msg.rerun_script.query_string = query
        msg.rerun_script.page_script_hash = ""
        await self.ws.send(msg.SerializeToString())
        await self._until_finished()
        return time.perf_counter() - t0

    async def change(self, key: str, value: int) -> float:
        from streamlit.proto.BackMsg_pb2 import BackMsg

        t0 = time.perf_counter()
        msg = BackMsg()
        msg.rerun_script.page_script_hash = ""
        state = msg.rerun_script.widget_states.widgets.add()
        state.id = self.widget_ids[key]
        state.int_value = value
        await self.ws.send(msg.SerializeToString())
        await self._until_finished()
        return time.perf_counter() - t0

    async def _until_finished(self) -> None:
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        while True:
            raw = await asyncio.wait_for(self.ws.recv(), timeout=120)
            fwd = ForwardMsg()
            fwd.ParseFromString(raw)
            kind = fwd.WhichOneof("type")
            if kind == "delta" and fwd.delta.WhichOneof("type") == "new_element":
                element = fwd.delta.new_element
                inner = getattr(element, element.WhichOneof("type") or "", None)
                wid = getattr(inner, "id", "")
                if isinstance(wid, str) and wid:
                    self.widget_ids[wid.rsplit("-", 1)[-1]] = wid
            elif kind == "script_finished":
                return

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()


def _query(output_len: int) -> str:
    return urlencode(
        {
            "model": "llama-3.1-70b", "gpu": "h100-sxm", "tp": 4, "weights": "fp8", "kv_cache": "fp8",
            "context_len": 8192, "prompt_len": 2000, "output_len": output_len,
        }
    )


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


async def run(sessions: int, reruns: int) -> None:
    proc, url = start_server()
    try:
        pid = proc.pid
        # 1. the very first session (cold: lazy imports, empty caches)
        cpu0 = _cpu_s(pid)
        s = Session(url)
        wall = await s.open(_query(400))
        print(
            f"first session ever (cold): {(_cpu_s(pid) - cpu0) * 1e3:.0f} ms server CPU, {wall * 1e3:.0f} "
            "ms wall"
        )
        await s.close()

        # 2. fresh sessions one at a time: the default link (cached scenario), then distinct links
        for label, queries in (("same link (scenario cached)", [_query(400)] * 5),
                               ("distinct links (nothing cached)", [_query(401 + i) for i in range(5)])):
            cpus, walls = [], []
            for q in queries:
                cpu0 = _cpu_s(pid)
                s = Session(url)
                walls.append(await s.open(q))
                cpus.append(_cpu_s(pid) - cpu0)
                await s.close()
            print(f"new session, {label}: median {statistics.median(cpus) * 1e3:.0f} ms server CPU, "
                  f"{statistics.median(walls) * 1e3:.0f} ms wall  (target <= 250 ms CPU)")

        # 3. rerun after an input change, one session
        s = Session(url)
        await s.open(_query(400))
        cpus, walls = [], []
        for i in range(reruns):
            cpu0 = _cpu_s(pid)
            walls.append(await s.change("output_len", 500 + i))
            cpus.append(_cpu_s(pid) - cpu0)
        await s.close()
        print(f"rerun after an input change: median {statistics.median(walls) * 1e3:.0f} ms wall, "
              f"{statistics.median(cpus) * 1e3:.0f} ms server CPU (target <= 150 ms)")

        # 4. N sessions opened at once, the same link and distinct links
        for label, queries in (("same link", [_query(400)] * sessions),
                               ("distinct links", [_query(600 + i) for i in range(sessions)])):
            group = [Session(url) for _ in range(sessions)]
            t0 = time.perf_counter()
            walls = await asyncio.gather(*(g.open(q) for g, q in zip(group, queries, strict=True)))
            total = time.perf_counter() - t0
            await asyncio.gather(*(g.close() for g in group))
            print(
                f"{sessions} sessions at once, {label}: p50 {_pct(walls, 0.5):.2f} s, p95 "
                f"{_pct(walls, 0.95):.2f} s, "
                f"all done after {total:.2f} s  (target p95 <= 2 s)"
            )
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--reruns", type=int, default=15)
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPU cores visible, load average {os.getloadavg()[0]:.1f} at start")
    asyncio.run(run(args.sessions, args.reruns))


if __name__ == "__main__":
    main()
