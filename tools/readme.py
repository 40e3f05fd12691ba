"""The README's generated blocks: the plan and sizing examples (run through the CLI) and the accuracy table
(read from docs/ACCURACY.md), so the README never drifts from the code.

    .venv/bin/python -m tools.readme           # exit 1 and name each block that differs from the code
    .venv/bin/python -m tools.readme --write   # rewrite the blocks in README.md

A block sits between `<!-- generated: NAME -->` and `<!-- /generated: NAME -->`; everything between the two
markers is this module's output. tests/test_readme.py runs the same check.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
ACCURACY = ROOT / "docs" / "ACCURACY.md"
PYTHON_SHOWN = ".venv/bin/python"  # what the README tells a reader to type (make app / make test create it)

PLAN_ARGS = ["plan", "data/examples/llama70b_h100_fp8_at_objective.json"]
SIZE_ARGS = ["size", "data/examples/llama70b_sizing.json"]

# The figures a buyer reads first, by section of the plan's JSON
# (docs/CONTRACT.md); the rest is in the output.
PLAN_EXCERPT: dict[str, tuple[str, ...]] = {
    "memory": ("weights_gib_per_gpu", "kv_budget_gib_per_gpu", "max_batch"),  # GiB, as vLLM logs it
    "serving": ("at_goodput", "request_rate", "max_request_rate", "output_tokens_per_s", "ttft_ms", "itl_ms",
                "tpot_ms"),
    "cost": ("usd_per_replica_hour", "usd_per_million_output_tokens"),
}
SIZE_OPTION_KEYS = (
    "gpu", "tp", "weights", "kv_cache", "replicas", "gpus_total", "percentile", "ttft_ms", "itl_ms",
    "usd_per_hour", "usd_per_million_output_tokens",
)
SIZE_OPTIONS_SHOWN = 1

# Rows of docs/ACCURACY.md's production table the README quotes (public closed-loop runs, issue 20).
PRODUCTION_ROWS = (
    "vllm, all GPUs: leave one GPU out",
    "vllm, all GPUs: fitted (in-sample)",
    "sglang, all GPUs: fitted (in-sample)",
    "trt-llm, all GPUs: fitted (in-sample)",
    "trt-llm, all GPUs: leave one model out",
)
# Rows of docs/ACCURACY.md's tables the README quotes, by their first cell.
ACCURACY_ROWS = (
    "graph: decode ITL, held-out shape", "graph: prefill 1,024+ tokens, held-out shape",
    "vllm: public itl, held-out row", "vllm: public ttft, held-out row",
)


def run_cli(args: list[str]) -> Any:
    """The CLI's JSON for `args`, run as a reader would run it (a subprocess, default rounding)."""
    out = subprocess.run([sys.executable, "-m", "planner", *args], cwd=ROOT, capture_output=True, text=True,
                         timeout=600, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"python -m planner {' '.join(args)} failed: {out.stderr.strip()}")
    return json.loads(out.stdout)


def plan_excerpt(plan: dict[str, Any]) -> dict[str, Any]:
    return {section: {k: plan[section][k] for k in keys if k in plan[section]}
            for section, keys in PLAN_EXCERPT.items() if isinstance(plan.get(section), dict)}


def size_excerpt(result: dict[str, Any]) -> dict[str, Any]:
    return {
        "searched": result["searched"], "feasible": result["feasible"],
        "options": [
            {k: o[k] for k in SIZE_OPTION_KEYS if k in o} for o in result["options"][:SIZE_OPTIONS_SHOWN]
        ],
    }


def _example(args: list[str], excerpt: dict[str, Any], what: str) -> str:
    return (f"```bash\n{PYTHON_SHOWN} -m planner {' '.join(args)}\n```\n\n{what}\n\n"
            f"```json\n{json.dumps(excerpt, indent=2)}\n```")


def anchor(heading: str) -> str:
    """GitHub's anchor for a Markdown heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def accuracy_rows(text: str) -> dict[str, dict[str, str]]:
    """Each table row of docs/ACCURACY.md by its first cell: its cells by column header, and `anchor`, the
    anchor of the heading the row sits under."""
    rows: dict[str, dict[str, str]] = {}
    heading, header = "", []
    for line in text.splitlines():
        if line.startswith("#"):
            heading, header = line.lstrip("#").strip(), []
            continue
        if not line.startswith("|"):
            header = [] if not line.strip() else header
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not header:
            header = cells
        elif set("".join(cells)) <= set("- :"):
            continue
        else:
            rows.setdefault(cells[0], {**dict(zip(header, cells, strict=False)), "anchor": anchor(heading)})
    return rows


def production_block(text: str) -> str:
    rows = accuracy_rows(text)
    missing = [r for r in PRODUCTION_ROWS if r not in rows]
    if missing:
        raise RuntimeError(f"docs/ACCURACY.md has no row {missing[0]!r}: "
                           "update tools/readme.py PRODUCTION_ROWS")
    lines = ["| engine on public serving runs (docs/ACCURACY.md row) | runs | mean TPOT median | TPOT p90 "
             "| TTFT median |",
             "| --- | --- | --- | --- | --- |"]
    for label in PRODUCTION_ROWS:
        r = rows[label]
        lines.append(f"| [{label}](docs/ACCURACY.md#{r['anchor']}) | {r['runs']} | {r['TPOT median']} | "
                     f"{r['TPOT p90']} | {r['TTFT median']} |")
    return "\n".join(lines)


def accuracy_block(text: str) -> str:
    rows = accuracy_rows(text)
    missing = [r for r in ACCURACY_ROWS if r not in rows]
    if missing:
        raise RuntimeError(
            f"docs/ACCURACY.md has no row {missing[0]!r}: update tools/readme.py ACCURACY_ROWS"
        )
    lines = ["| figure (docs/ACCURACY.md row) | rows | median error | worst |", "| --- | --- | --- | --- |"]
    for label in ACCURACY_ROWS:
        r = rows[label]
        lines.append(
            f"| [{label}](docs/ACCURACY.md#{r['anchor']}) | {r['rows']} | {r['median']} | {r['worst']} |"
        )
    return "\n".join(lines)


def blocks() -> dict[str, str]:
    """Every generated block's text, from the code and docs/ACCURACY.md as they are now."""
    return {
        "plan": _example(PLAN_ARGS, plan_excerpt(run_cli(PLAN_ARGS)),
                         "prints the whole plan as JSON (docs/CONTRACT.md); among its figures, the replica "
                         "at the "
                         "highest request\nrate that meets an interactive-chat objective (p90 TTFT <= 1 s, "
                         "p90 ITL "
                         "<= 50 ms):"),
        "size": _example(SIZE_ARGS, size_excerpt(run_cli(SIZE_ARGS)),
                         "prints every option, cheapest first; the first:"),
        "accuracy": accuracy_block(ACCURACY.read_text(encoding="utf-8")),
        "production": production_block(ACCURACY.read_text(encoding="utf-8")),
    }


def _pattern(name: str) -> re.Pattern[str]:
    return re.compile(rf"(<!-- generated: {name} -->\n)(.*?)(<!-- /generated: {name} -->)", re.DOTALL)


def readme_blocks(text: str) -> dict[str, str]:
    """The generated blocks as the README holds them."""
    out = {}
    for name in ("plan", "size", "accuracy", "production"):
        m = _pattern(name).search(text)
        if m:
            out[name] = m.group(2).removesuffix("\n")
    return out


def rewrite(text: str, fresh: dict[str, str]) -> str:
    for name, body in fresh.items():
        text, n = _pattern(name).subn(lambda m, b=body: m.group(1) + b + "\n" + m.group(3), text)
        if n != 1:
            raise RuntimeError(f"README.md needs exactly one '<!-- generated: {name} -->' block (found {n})")
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.readme", description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite README.md's generated blocks")
    args = parser.parse_args(argv)
    text = README.read_text(encoding="utf-8")
    fresh = blocks()
    if args.write:
        README.write_text(rewrite(text, fresh), encoding="utf-8")
        return 0
    stale = [name for name, body in fresh.items() if readme_blocks(text).get(name) != body]
    for name in stale:
        print(
            f"README.md: block '{name}' differs from the code; run: .venv/bin/python -m tools.readme --write",
            file=sys.stderr,
        )
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
