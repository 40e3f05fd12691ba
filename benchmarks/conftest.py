"""Benchmarks double as a smoke run: `pytest` (addopts --benchmark-disable) runs each benchmarked call once,
so they run in CI and cannot rot; `make bench` (--benchmark-enable) times them properly. No timing is asserted
anywhere; the smoke run prints each call's single-round time as a figure."""

from __future__ import annotations

import pytest

_ROUNDS: list[tuple[str, float]] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" and report.passed and "benchmarks/" in report.nodeid.replace("\\", "/"):
        _ROUNDS.append((report.nodeid.split("::", 1)[-1], report.duration * 1e3))


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # noqa: ARG001
    if not _ROUNDS or not config.getoption("benchmark_disable", default=False):
        return
    terminalreporter.section("benchmark smoke (one round each; figures, not assertions)")
    for name, ms in _ROUNDS:
        terminalreporter.write_line(f"{name:<60} {ms:10.1f} ms")
