"""Where the queue model is outside its validated range, a band from the scheduler's simulation.

The fast queue model (planner/serving/replica.py) agrees with a discrete-event simulation of the same
scheduler within 10% (p50) and 15% (p99) at light and moderate Poisson load. Near capacity and under bursty
arrivals it does not: TTFT p50 runs 20-50% low. The plan keeps the fast figure and brackets it with
`planner/data/queue_bands.json` (tools/fit_queue_bands.py): the ratio simulation / fast model over training
scenarios, per arrival class (CV about 1, 2 or 3), length class (fixed, or lognormal lengths), prompt class
(within the chunk budget, or longer) and load (share
of capacity), never narrower than the agreement the model is validated to where it holds (10% on p50, 15% on
p90 and p99). Between two tabulated loads the band is the union of both; outside the table (load over 95% of
capacity, arrival CV below 0.75 or over 3.5) there is no band and the plan says so.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path

import numpy as np
from pydantic import BaseModel

from planner.engines.base import DEFAULT_MAX_NUM_BATCHED_TOKENS
from planner.physics.bands import Band

QUEUE_BANDS_PATH = Path(__file__).parent.parent / "data" / "queue_bands.json"
LOADS = (0.1, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95)  # shares of capacity tabulated
ARRIVAL_CLASSES = {"poisson": 1.0, "bursty-2": 2.0, "bursty-3": 3.0}  # class: the CV it was fitted at
PROMPT_CLASSES = ("fits", "long")  # prompts within the chunk budget, or longer (continuation chunks)
METRICS = ("ttft_p50", "ttft_p90", "ttft_p99", "itl_p50", "itl_p90", "itl_p99")
# the agreement the queue model is validated to (issue 9): every band spans at least this around the figure
AGREEMENT = {"p50": 0.10, "p90": 0.15, "p99": 0.15}


@lru_cache(maxsize=1)
def _table() -> dict:
    if not QUEUE_BANDS_PATH.exists():
        return {}
    return json.loads(QUEUE_BANDS_PATH.read_text())


def arrival_class(arrival_cv: float) -> str | None:
    """The tabulated class of an arrival CV; None below 0.75 or from 3.5 up (not validated)."""
    if not 0.75 <= arrival_cv < 3.5:
        return None
    return "poisson" if arrival_cv < 1.5 else "bursty-2" if arrival_cv < 2.5 else "bursty-3"


def prompt_class(prompt_len: float, max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS) -> str:
    """Prompts longer than the chunk budget fill whole iterations with continuation chunks: a regime of its
    own for ITL (a decode waits a whole chunk's iteration), so its bands are apart."""
    return "long" if prompt_len > max_num_batched_tokens else "fits"


def queue_band(metric: str, estimate_ms: float | None, load_fraction: float, arrival_cv: float,
               variable_lengths: bool, prompts: str = "fits") -> Band | None:
    """The simulated `metric` (ttft_p50 ... itl_p99) bracketed around the fast model's
    `estimate_ms` at `load_fraction` of capacity; None outside the tabulated range."""
    table = _table().get("bands", {})
    cls = arrival_class(arrival_cv)
    if estimate_ms is None or cls is None or cls not in table or not 0.0 <= load_fraction <= LOADS[-1]:
        return None
    cells = table[cls]["lognormal" if variable_lengths else "fixed"].get(prompts)
    if not cells:
        return None
    i = int(np.searchsorted(LOADS, load_fraction))
    if load_fraction <= LOADS[0] or math.isclose(LOADS[i], load_fraction, rel_tol=1e-9):
        near = [LOADS[i]]
    else:
        near = [LOADS[i - 1], LOADS[i]]
    tolerance = AGREEMENT[metric[-3:]]
    low = min([cells[f"{x:g}"][metric][0] for x in near] + [1.0 - tolerance])
    high = max([cells[f"{x:g}"][metric][1] for x in near] + [1.0 + tolerance])
    training = _table().get("training_scenarios", {}).values()
    rows = sum(prompt_class(s["prompt_len"]) == prompts for s in training)
    return Band(low=estimate_ms * max(low, 0.0), high=estimate_ms * high, rows=rows)


class QueueBands(BaseModel):
    """The simulated TTFT and ITL percentiles bracketed around the fast queue model's (open loop)."""

    load_fraction: float  # the request rate over the capacity
    arrival_class: str | None  # poisson, bursty-2, bursty-3; None: arrival CV outside the table
    prompt_class: str = "fits"  # "long": prompts over the chunk budget (continuation chunks), fitted apart
    status: str  # "simulated" or why there is no band
    ttft_p50_ms: Band | None = None
    ttft_p90_ms: Band | None = None
    ttft_p99_ms: Band | None = None
    itl_p50_ms: Band | None = None
    itl_p90_ms: Band | None = None
    itl_p99_ms: Band | None = None


def queue_bands(estimates_ms: dict[str, float | None], load_fraction: float, arrival_cv: float,
                variable_lengths: bool, prompts: str = "fits") -> QueueBands:
    """Bands for the fast model's `estimates_ms` {ttft_p50, ttft_p90, ttft_p99, itl_p50, itl_p90, itl_p99}."""
    cls = arrival_class(arrival_cv)
    if cls is None:
        status = f"no band: arrival CV {arrival_cv:g} outside the simulated 0.75-3.5"
    elif load_fraction > LOADS[-1]:
        status = f"no band: load {load_fraction:.0%} of capacity, over the simulated {LOADS[-1]:.0%}"
    else:
        status = "simulated"
    bands = {f"{k}_ms": queue_band(k, estimates_ms.get(k), load_fraction, arrival_cv, variable_lengths,
                                   prompts) for k in METRICS} if status == "simulated" else {}
    return QueueBands(load_fraction=load_fraction, arrival_class=cls, prompt_class=prompts, status=status,
                      **bands)
