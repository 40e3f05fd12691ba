#!/usr/bin/env python3
"""Where each test's expected value comes from: read the `Source:` line of every test's docstring.

Convention (tests/README.md): every test function's docstring has one line

    Source: <kind>[: <where exactly>]

with <kind> one of KINDS. The first eight are independent of the planner (the expected value was not
produced by the code under test); the last three are not.

    python3 tools/test_sources.py              # share of test functions per kind, and the total independent
    share python3 tools/test_sources.py --markdown   # the per-function table that tests/README.md carries
    python3 tools/test_sources.py --missing    # test functions with no or an unknown kind (exit 1 if any)
    python3 tools/test_sources.py --readme     # rewrite the generated part of tests/README.md
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"

# kind -> what it means. Order: independent kinds first.
KINDS = {
    "seed": "a figure of the seeds that seed_inconsistencies.md does not flag (or its stated correction)",
    "datasheet": "a vendor datasheet figure (GPU peaks, bandwidth, memory, TDP)",
    "model-card": "an official model card, config.json or paper (parameter counts, shapes)",
    "published": "a published measurement (data/reference/measured_published.*, NCCL/vLLM docs and logs)",
    "hand": "a hand derivation written out in the test's docstring or comments",
    "measured": "our own GPU measurement (data/measurements/, data/reference/vllm_startup_logs*)",
    "docs": "an engine's or library's documentation (CLI flags, defaults, documented rules)",
    "oracle": "an independent simulation written separately from the planner: tests/serving_oracle.py",
    "invariant": "a property the code must keep (monotonicity, bounds, consistency), usually hypothesis",
    "contract": "the contract's format and error lines (keys, exit codes, `error: <field>: <reason>`)",
    "ui": "the app's behaviour (widgets, links, browser)",
}
INDEPENDENT = ("seed", "datasheet", "model-card", "published", "hand", "measured", "docs", "oracle")


@dataclass(frozen=True)
class TestSource:
    file: str
    name: str
    line: int
    kind: str | None
    detail: str


def _source_line(doc: str | None) -> tuple[str | None, str]:
    for line in (doc or "").splitlines():
        text = line.strip()
        if text.startswith("Source:"):
            rest = text[len("Source:"):].strip()
            kind, _, detail = rest.partition(":")
            return kind.strip(), detail.strip()
    return None, ""


def collect(paths: list[Path] | None = None) -> list[TestSource]:
    """Every `test_*` function (module level or in a `Test*` class) of tests/test_*.py."""
    out = []
    for path in paths or sorted(TESTS.glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        nodes: list[ast.AST] = list(tree.body)
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
                nodes.extend(node.body)
        for node in nodes:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test_"):
                kind, detail = _source_line(ast.get_docstring(node))
                name = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
                out.append(TestSource(name, node.name, node.lineno, kind, detail))
    return out


def missing(sources: list[TestSource]) -> list[TestSource]:
    return [s for s in sources if s.kind not in KINDS]


def independent_share(sources: list[TestSource]) -> float:
    return sum(s.kind in INDEPENDENT for s in sources) / max(len(sources), 1)


def figure_share(sources: list[TestSource]) -> float:
    """Among the tests that check a figure the planner computes (independent kinds and invariants, not the
    contract's format or the app's behaviour), the share checked against an independent source."""
    figures = [s for s in sources if s.kind in INDEPENDENT or s.kind == "invariant"]
    return sum(s.kind in INDEPENDENT for s in figures) / max(len(figures), 1)


def summary(sources: list[TestSource]) -> str:
    counts = Counter(s.kind or "(none)" for s in sources)
    lines = [f"{len(sources)} test functions"]
    for kind in [*KINDS, *sorted(set(counts) - set(KINDS))]:
        if counts[kind]:
            tag = "independent" if kind in INDEPENDENT else ""
            lines.append(f"  {kind:<11} {counts[kind]:>4}  {counts[kind] / len(sources):6.1%}  {tag}")
    lines.append(f"independent share, all test functions: {independent_share(sources):.1%}")
    lines.append(f"independent share of the tests that check a planner figure (not contract/ui): "
                 f"{figure_share(sources):.1%}")
    return "\n".join(lines)


def markdown(sources: list[TestSource]) -> str:
    rows = ["| test | kind | source |", "| --- | --- | --- |"]
    for s in sources:
        rows.append(f"| `{s.file}::{s.name}` | {s.kind or '**none**'} | {s.detail.replace('|', '/')} |")
    return "\n".join(rows)


BEGIN = "<!-- generated by tools/test_sources.py --readme: do not edit below -->"
END = "<!-- end of generated part -->"


def write_readme(sources: list[TestSource], path: Path = TESTS / "README.md") -> None:
    """Replace the generated part of tests/README.md: the shares and the per-function table."""
    text = path.read_text(encoding="utf-8")
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    body = f"\n```\n{summary(sources)}\n```\n\n{markdown(sources)}\n"
    path.write_text(f"{head}{BEGIN}\n{body}{END}{tail}", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="print the per-function table")
    parser.add_argument("--missing", action="store_true", help="list tests without a known kind")
    parser.add_argument("--readme", action="store_true", help="rewrite the generated part of tests/README.md")
    args = parser.parse_args(argv)
    sources = collect()
    if args.readme:
        write_readme(sources)
        return 0
    if args.missing:
        bad = missing(sources)
        for s in bad:
            print(f"{s.file}:{s.line}: {s.name}: no `Source: <kind>` line (kinds: {', '.join(KINDS)})")
        return 1 if bad else 0
    print(markdown(sources) if args.markdown else summary(sources))
    return 0


if __name__ == "__main__":
    sys.exit(main())
