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
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tools.streamlit_session import Session, cpu_s, percentile, plan_query, start_streamlit  # noqa: E402


def start_server() -> tuple[subprocess.Popen, str]:
    proc, port = start_streamlit(ROOT)
    return proc, f"127.0.0.1:{port}"


async def run(sessions: int, reruns: int) -> None:
    proc, url = start_server()
    try:
        pid = proc.pid
        # 1. the very first session (cold: lazy imports, empty caches)
        cpu0 = cpu_s(pid)
        s = Session(url)
        wall = await s.open(plan_query(400))
        print(
            f"first session ever (cold): {(cpu_s(pid) - cpu0) * 1e3:.0f} ms server CPU, {wall * 1e3:.0f} "
            "ms wall"
        )
        await s.close()

        # 2. fresh sessions one at a time: the default link (cached scenario), then distinct links
        for label, queries in (("same link (scenario cached)", [plan_query(400)] * 5),
                               ("distinct links (nothing cached)", [plan_query(401 + i) for i in range(5)])):
            cpus, walls = [], []
            for q in queries:
                cpu0 = cpu_s(pid)
                s = Session(url)
                walls.append(await s.open(q))
                cpus.append(cpu_s(pid) - cpu0)
                await s.close()
            print(f"new session, {label}: median {statistics.median(cpus) * 1e3:.0f} ms server CPU, "
                  f"{statistics.median(walls) * 1e3:.0f} ms wall  (target <= 250 ms CPU)")

        # 3. rerun after an input change, one session
        s = Session(url)
        await s.open(plan_query(400))
        cpus, walls = [], []
        for i in range(reruns):
            cpu0 = cpu_s(pid)
            walls.append(await s.change("output_len", 500 + i))
            cpus.append(cpu_s(pid) - cpu0)
        await s.close()
        print(f"rerun after an input change: median {statistics.median(walls) * 1e3:.0f} ms wall, "
              f"{statistics.median(cpus) * 1e3:.0f} ms server CPU (target <= 150 ms)")

        # 4. N sessions opened at once, the same link and distinct links
        for label, queries in (("same link", [plan_query(400)] * sessions),
                               ("distinct links", [plan_query(600 + i) for i in range(sessions)])):
            group = [Session(url) for _ in range(sessions)]
            t0 = time.perf_counter()
            walls = await asyncio.gather(*(g.open(q) for g, q in zip(group, queries, strict=True)))
            total = time.perf_counter() - t0
            await asyncio.gather(*(g.close() for g in group))
            print(
                f"{sessions} sessions at once, {label}: p50 {percentile(walls, 0.5):.2f} s, p95 "
                f"{percentile(walls, 0.95):.2f} s, "
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
