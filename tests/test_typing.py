"""planner/ type-checks (pyproject [tool.mypy]), so the suite every helper runs catches a type error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_planner_type_checks():
    """Source: contract: `mypy planner` reports no issue (typed numpy arguments, no untyped bodies
    skipped)."""
    r = subprocess.run(
        [sys.executable, "-m", "mypy", "planner"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
