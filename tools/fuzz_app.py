"""Fuzz the app once at scale: N random links and uploads (tests/app_fuzz.py) through AppTest.

    .venv/bin/python tools/fuzz_app.py --cases 1000 [--seed 0]

Each case runs the whole app (about a second on two cores). Every case must show no exception element and no
NaN or infinity in any chart's data; one case in three uses a value no field accepts and must also be named
in a warning or error line, on whichever view the case opens. Issue 32's crafted links (tests/app_fuzz.py
CRAFTED and CRAFTED_SLOW) run first; one random case in four with a `size` link presses the search button.
Prints one line per failure and a summary; exit 1 if any case failed.
"""

from __future__ import annotations

import argparse
import logging
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.app_fuzz import (  # noqa: E402
    CRAFTED,
    CRAFTED_SLOW,
    LINK_PARAMS,
    UPLOADS,
    VIEWS,
    case,
    invalid_text,
    run_case,
    run_crafted,
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    logging.getLogger("streamlit").setLevel(logging.ERROR)
    rng = random.Random(args.seed)
    failures, links, uploads, named = 0, 0, 0, 0
    start = time.monotonic()
    for what, params, view, search, must_name in (*CRAFTED, *CRAFTED_SLOW):
        try:
            run_crafted(params, view, search, must_name)
        except Exception as err:  # noqa: BLE001 - reported, then the run goes on
            failures += 1
            print(f"crafted {what!r}: {type(err).__name__}: {str(err)[:300]}", flush=True)
    crafted = len(CRAFTED) + len(CRAFTED_SLOW)
    print(f"{crafted} crafted cases, {failures} failures, {time.monotonic() - start:.0f} s", flush=True)
    for i in range(args.cases):
        params, ups, view = case(rng)
        check_named = i % 3 == 0
        if check_named:  # one refused value, in a parameter or an uploader
            if rng.random() < 0.5:
                name = rng.choice(LINK_PARAMS)
                params, ups, view = {name: invalid_text(rng)}, {}, rng.choice(VIEWS)
            else:
                key = rng.choice(list(UPLOADS))
                params, ups, view = {}, {key: invalid_text(rng).encode()}, "Plan"
        links += bool(params)
        uploads += bool(ups)
        try:
            at = run_case(params, ups, view, search="size" in params and rng.random() < 0.25)
            if check_named:
                text = " ".join(e.value for e in (*at.warning, *at.error)).replace("`", "").replace("*", "")
                wanted = [*params, *(UPLOADS[k] for k in ups)]
                ok = all(w in text for w in wanted) or (
                    "Link parameter link" in text and "over the limit" in text
                )
                assert ok, f"not named: {wanted} in {text[:200]!r}"
                named += 1
        except Exception as err:  # noqa: BLE001 - a fuzz failure of any kind is reported, then the run goes on
            failures += 1
            print(
                f"case {i}: {type(err).__name__}: {str(err)[:300]} "
                f"params={ {k: v[:60] for k, v in params.items()} } "
                f"uploads={ {k: v[:60] for k, v in ups.items()} } view={view}", flush=True,
            )
        if (i + 1) % 100 == 0:
            print(f"{i + 1} cases, {failures} failures, {time.monotonic() - start:.0f} s", flush=True)
    print(
        f"{args.cases} random cases and {crafted} crafted ({links} with link parameters, {uploads} with "
        f"uploads, {named} refusals checked for a named line): {failures} failures in "
        f"{time.monotonic() - start:.0f} s"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
