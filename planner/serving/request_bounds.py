"""Bounds on a sizing request (issues 22 and 32): list fields de-duplicated before they are capped, the
search's work (configuration families the search plans) and its output (options written out) refused past a
bound with one line, so that no legal-looking request holds the CPU for minutes or writes tens of MB.

A family is one GPU x TP x PP x EP x weight precision x KV precision; the search plans each once (its
memory, its step-time tables, its goodput), which costs about 1 ms of CPU on the 2-core reference machine,
and a disaggregated search plans each family once more per pool. MAX_FAMILY_PLANS keeps the worst legal
request near 20 s there; the caps are in docs/CONTRACT_EXTENSIONS.md ("Bounded sizing requests").

Output: each option written out is about 1.5 KB of JSON (its figures and the scenario that plans it), so
`max_options` 100,000 wrote 53 MB (issue 32); MAX_OPTIONS_OUT keeps the options near 1.5 MB. The other
lists of a result are bounded by the families (one `infeasible` line of ~100 B each, at most
MAX_FAMILY_PLANS) and by GPUs x weights (`fit_hints`).
"""

from __future__ import annotations

import json
from typing import Any

from planner.core.errors import ScenarioError

# Fields holding candidate lists; a repeated item adds no option and only repeats work.
LIST_FIELDS = ("gpus", "tp", "pp", "ep", "weights", "kv_cache", "prefill_gpus", "decode_gpus")
MAX_FAMILY_PLANS = 20_000
MAX_OPTIONS_OUT = 1_000
# size-power and mixed-fleet plan every option of every family (no lazy finish, no pruning): about ten times a
# family's cost in the sizing search (2,000 families: 6.1 s of CPU, issue 32), so a tenth of the families
# but for a default lognormal mixed fleet over the whole catalog (6 classes x 600 families)
MAX_FULL_FAMILY_PLANS = 4_000


def _key(item: Any) -> str:
    return json.dumps(item, sort_keys=True, default=str) if isinstance(item, (dict, list)) else repr(item)


def dedupe_lists(data: Any) -> Any:
    """The request with each candidate list's repeated items dropped (first kept, order unchanged);
    anything that is not a dict or a list is returned as is, for validation to name."""
    if not isinstance(data, dict):
        return data
    out = dict(data)
    for field in LIST_FIELDS:
        values = out.get(field)
        if isinstance(values, list):
            seen: set[str] = set()
            unique = []
            for v in values:
                k = f"{type(v).__name__}:{_key(v)}"  # 1 and 1.0 and true stay distinct: validation names them
                if k not in seen:
                    seen.add(k)
                    unique.append(v)
            out[field] = unique
    return out


def check_work(families_per_search: list[int], max_options: int | None = None,
               limit: int = MAX_FAMILY_PLANS) -> int:
    """The family plans a search needs (one count per search: the aggregated one, and each disaggregated
    pool, each length class or context); past `limit` (MAX_FAMILY_PLANS, or MAX_FULL_FAMILY_PLANS where
    every option is planned), or `max_options` past MAX_OPTIONS_OUT, a ScenarioError names the limit and
    how to narrow the request."""
    if max_options is not None and max_options > MAX_OPTIONS_OUT:
        raise ScenarioError(
            "max_options",
            f"{max_options:,} options written out is over the limit of {MAX_OPTIONS_OUT:,} "
            "(about 1.5 KB of JSON each): ask for fewer",
        )
    plans = sum(families_per_search)
    if plans > limit:
        raise ScenarioError(
            "sizing",
            f"needs {plans:,} configuration-family plans (GPUs x tp x pp x ep x weights "
            f"x kv_cache, per search), over the limit of {limit:,}: narrow "
            "the candidate lists",
        )
    return plans
