#!/usr/bin/env python3
"""Serve Ridgeline to a team from one host: N Streamlit processes behind nginx.

    python tools/team.py --workers 2 --port 8501     (make team WORKERS=2 PORT=8501)

Each worker is `streamlit run app.py` on 127.0.0.1 (ports PORT+1 .. PORT+N). nginx listens on PORT and
  * keeps each browser on one worker (a session's websocket, its uploads and media must reach the
    process that holds its state): a cookie `ridgeline_worker` set on the first response is hashed
    (`hash ... consistent`) to pick the worker; a browser without it is placed by a random key;
  * upgrades /_stcore/stream to a websocket (HTTP/1.1, Upgrade and Connection headers, long timeouts);
  * serves /_stcore/health from a worker; a worker that fails is taken out for 10 s (max_fails).
This launcher waits for every worker's /_stcore/health before nginx starts, restarts a worker that
exits, and on Ctrl-C (or SIGTERM) stops nginx and every worker. Its nginx.conf, pid file and logs are
under the run folder (default .run/team-PORT/); no system configuration is read or written.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

NGINX_CONF = """\
# Written by tools/team.py; nginx runs with -p {run} -c {run}/nginx.conf (no system config).
worker_processes 1;
pid {run}/nginx.pid;
error_log {run}/error.log warn;
daemon off;
events {{ worker_connections 4096; }}
http {{
    access_log {run}/access.log;
    client_body_temp_path {run}/tmp/body;
    proxy_temp_path {run}/tmp/proxy;
    fastcgi_temp_path {run}/tmp/fastcgi;
    uwsgi_temp_path {run}/tmp/uwsgi;
    scgi_temp_path {run}/tmp/scgi;
    client_max_body_size 210m;  # Streamlit's upload limit (server.maxUploadSize, 200 MB) and form overhead

    # Sticky sessions: the cookie's value, or a fresh random key that the response then sets as the cookie.
    map $cookie_ridgeline_worker $ridgeline_key {{
        ""      $request_id;
        default $cookie_ridgeline_worker;
    }}
    map $cookie_ridgeline_worker $ridgeline_set_cookie {{
        ""      "ridgeline_worker=$request_id; Path=/; HttpOnly; SameSite=Lax";
        default "";
    }}
    map $http_upgrade $connection_upgrade {{
        default upgrade;
        ""      close;
    }}
    upstream ridgeline {{
        hash $ridgeline_key consistent;
{servers}
    }}
    server {{
        listen {address}:{port};
        add_header Set-Cookie $ridgeline_set_cookie always;
        proxy_set_header Host $http_host;  # with its port: Streamlit checks the websocket Origin against it
        proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
        proxy_set_header X-Forwarded-Proto $scheme;
        proxy_http_version 1.1;
        location /_stcore/stream {{
            proxy_pass http://ridgeline;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_read_timeout 1d;
            proxy_send_timeout 1d;
            proxy_buffering off;
        }}
        location = /_stcore/health {{
            proxy_pass http://ridgeline;
        }}
        location / {{
            proxy_pass http://ridgeline;
        }}
    }}
}}
"""


def nginx_conf(run: Path, address: str, port: int, worker_ports: list[int]) -> str:
    servers = "\n".join(f"        server 127.0.0.1:{p} max_fails=2 fail_timeout=10s;" for p in worker_ports)
    return NGINX_CONF.format(run=run, address=address, port=port, servers=servers)


def healthy(port: int, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=timeout) as r:
            return r.read() == b"ok"
    except OSError:
        return False


def start_worker(port: int, log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port), "--server.address",
         "127.0.0.1", "--server.headless", "true", "--browser.gatherUsageStats", "false",
         "--server.fileWatcherType", "none"],
        cwd=ROOT, stdout=log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True)


def find_nginx() -> str:
    for candidate in (shutil.which("nginx"), "/usr/sbin/nginx"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise SystemExit("error: nginx not found: run `make team` as root (it installs Debian's nginx), "
                     "or: sudo apt-get install nginx")


def _stop(proc: subprocess.Popen | None, grace_s: float = 10.0) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=max(1, os.cpu_count() or 1))
    ap.add_argument("--port", type=int, default=8501)
    ap.add_argument("--address", default="0.0.0.0", help="where nginx listens (127.0.0.1: this host only)")
    ap.add_argument("--run-dir", type=Path, default=None, help="default: .run/team-PORT")
    args = ap.parse_args(argv)
    if not 1 <= args.workers <= 64:
        raise SystemExit("error: --workers: must be between 1 and 64")
    nginx = find_nginx()
    run = (args.run_dir or ROOT / ".run" / f"team-{args.port}").resolve()
    (run / "tmp").mkdir(parents=True, exist_ok=True)
    ports = [args.port + 1 + i for i in range(args.workers)]
    (run / "nginx.conf").write_text(nginx_conf(run, args.address, args.port, ports))

    workers: dict[int, subprocess.Popen] = {}
    proxy: subprocess.Popen | None = None
    stopping = False

    def stop(signum, frame):  # noqa: ARG001 - signal handler signature
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        for p in ports:
            workers[p] = start_worker(p, run / f"worker-{p}.log")
        deadline = time.monotonic() + 180
        waiting = set(ports)
        while waiting and not stopping:
            if time.monotonic() > deadline:
                raise SystemExit(f"error: workers on ports {sorted(waiting)} did not answer /_stcore/health "
                                 f"in 180 s; see {run}/worker-*.log")
            dead = [p for p in waiting if workers[p].poll() is not None]
            if dead:  # fail at once, with the worker's own words, rather than after the deadline
                tail = (run / f"worker-{dead[0]}.log").read_text(errors="replace").strip().splitlines()[-1:]
                raise SystemExit(
                    f"error: the worker on port {dead[0]} exited ({workers[dead[0]].returncode}): "
                    f"{tail[0][:200] if tail else 'no output'}; see {run}/worker-{dead[0]}.log"
                )
            waiting = {p for p in waiting if not healthy(p)}
            time.sleep(0.5)
        if stopping:
            return 0
        check = subprocess.run([nginx, "-t", "-q", "-p", str(run), "-c", str(run / "nginx.conf")],
                               capture_output=True, text=True)
        if check.returncode != 0:
            raise SystemExit(f"error: nginx refused {run}/nginx.conf: {check.stderr.strip()[:300]}")
        proxy = subprocess.Popen(
            [nginx, "-p", str(run), "-c", str(run / "nginx.conf")], start_new_session=True
        )
        shown = "localhost" if args.address in ("0.0.0.0", "127.0.0.1") else args.address
        print(f"Ridgeline for your team: http://{shown}:{args.port} ({args.workers} workers behind nginx, "
              f"config and logs in {run}); Ctrl-C stops it.", flush=True)
        while not stopping:
            time.sleep(1.0)
            if proxy.poll() is not None:
                raise SystemExit(f"error: nginx exited ({proxy.returncode}); see {run}/error.log")
            for p, proc in list(workers.items()):
                if (
                    proc.poll() is not None and not stopping
                ):  # a crashed worker comes back; nginx skips it meanwhile
                    print(
                        f"worker on port {p} exited ({proc.returncode}); restarting it", file=sys.stderr,
                        flush=True,
                    )
                    workers[p] = start_worker(p, run / f"worker-{p}.log")
        return 0
    finally:
        _stop(proxy)
        for proc in workers.values():
            _stop(proc)
        print("Stopped nginx and the workers.", flush=True)


if __name__ == "__main__":
    sys.exit(main())
