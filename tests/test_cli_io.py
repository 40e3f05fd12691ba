"""The command line's I/O failures (issue 22): a closed pipe, a full disk, a closed stdin, and a numeric
warning each give one documented line and exit code, never a Python traceback or numpy text.
Source: contract: docs/CONTRACT_EXTENSIONS.md, "Command line and input ranges" (exit 66 and 74).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(args: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "planner", *args], cwd=ROOT, capture_output=True, timeout=120, **kwargs
    )


def _one_error_line(stderr: bytes, prefix: str) -> None:
    lines = stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith(prefix), lines


def test_a_closed_pipe_is_one_line_and_exit_74():
    """Source: contract: docs/CONTRACT_EXTENSIONS.md, exit 66 and 74 (issue 22)."""
    reader = subprocess.Popen([sys.executable, "-c", "pass"], stdin=subprocess.PIPE)  # reads nothing, exits
    reader.wait(timeout=60)  # its end of the pipe is closed before the planner writes (like `| true`)
    writer = subprocess.run([sys.executable, "-m", "planner", "gpus"], cwd=ROOT, stdout=reader.stdin,
                            stderr=subprocess.PIPE, timeout=120)
    reader.stdin.close()
    assert writer.returncode == 74
    _one_error_line(writer.stderr, "error: output: the reader closed the pipe")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
def test_a_full_disk_is_one_line_and_exit_74():
    """Source: contract: docs/CONTRACT_EXTENSIONS.md, exit 66 and 74 (issue 22)."""
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "planner", "models"], cwd=ROOT, stdout=full, stderr=subprocess.PIPE,
            timeout=120,
        )
    assert done.returncode == 74
    _one_error_line(done.stderr, "error: output: cannot write (No space left on device)")


def test_a_closed_stdin_is_one_line_and_exit_66():
    """Source: contract: docs/CONTRACT_EXTENSIONS.md, exit 66 and 74 (issue 22)."""
    done = subprocess.run(
        [sys.executable, "-m", "planner", "plan", "-"], cwd=ROOT, capture_output=True, timeout=120,
        preexec_fn=lambda: os.close(0),
    )
    assert done.returncode == 66
    _one_error_line(done.stderr, "error: input: standard input is closed")


def test_an_overloaded_bursty_load_plans_without_a_numeric_warning():
    """Issue 22's example: 1,000 req/s of CV 3 on one H100 is far past capacity (an infinite window in the
    gamma arrival model); numpy must not even warn (warnings are errors here), and the plan says unstable.
    Source: contract: docs/CONTRACT_EXTENSIONS.md, exit 66 and 74 (issue 22).
    """
    scenario = {"model": "llama-3.1-8b", "gpu": "h100-sxm", "load": {"request_rate": 1000, "arrival_cv": 3}}
    done = subprocess.run(
        [sys.executable, "-W", "error::RuntimeWarning", "-m", "planner", "plan", "-"], cwd=ROOT,
        input=json.dumps(scenario).encode(), capture_output=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stderr == b""
    assert json.loads(done.stdout)["serving"]["stable"] is False


def _closing(*fds: int):
    def close() -> None:
        for fd in fds:
            os.close(fd)
    return close


def test_a_closed_stdout_exits_74_before_any_work():
    """`python -m planner gpus >&-`: Python starts without a sys.stdout; before issue 32 this was exit 70
    "internal: AttributeError".
    Source: contract: docs/CONTRACT_EXTENSIONS.md, "Command line and input ranges" (exit 74, issue 32).
    """
    done = subprocess.run([sys.executable, "-m", "planner", "gpus"], cwd=ROOT, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, timeout=120, preexec_fn=_closing(1))
    assert done.returncode == 74
    _one_error_line(done.stderr, "error: output: standard output is closed")


@pytest.mark.parametrize(
    ("args", "stdin", "code"),
    [(["plan", "/nonexistent/scenario.json"], None, 2), (["plan", "-"], b'{"tp": 1, "tp": 2}', 2),
     (["gpus"], None, 0)],
)
@pytest.mark.parametrize("stderr_kind", ["closed", "full"])
def test_a_lost_stderr_keeps_the_errors_own_exit_code(args, stdin, code, stderr_kind):
    """With stderr closed (`2>&-`) or full (`2>/dev/full`) the line is lost but the exit code still names
    the error (2: bad input; 0: done), never Python's 1 or the 120 of a failed flush at exit.
    Source: contract: docs/CONTRACT_EXTENSIONS.md, "Command line and input ranges" (issue 32).
    """
    if stderr_kind == "full" and not os.path.exists("/dev/full"):
        pytest.skip("needs /dev/full (Linux)")
    with open(os.devnull if stderr_kind == "closed" else "/dev/full", "w") as err:
        done = subprocess.run(
            [sys.executable, "-m", "planner", *args], cwd=ROOT, input=stdin, stdout=subprocess.PIPE,
            stderr=err, timeout=120, preexec_fn=_closing(2) if stderr_kind == "closed" else None,
        )
    assert done.returncode == code


def test_a_duplicate_key_is_refused_naming_it():
    """`{"tp": 1, "tp": 2}` used to plan TP 2 silently (the last key won).
    Source: contract: docs/CONTRACT_EXTENSIONS.md, "Command line and input ranges" (issue 32).
    """
    scenario = '{"model": "llama-3.1-8b", "gpu": "h100-sxm", "load": {"request_rate": 1, "request_rate": 2}}'
    done = _run(["plan", "-"], input=scenario.encode())
    assert done.returncode == 2 and done.stdout == b""
    _one_error_line(done.stderr, "error: scenario: duplicate key 'request_rate'")
