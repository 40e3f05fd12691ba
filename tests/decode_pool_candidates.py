"""Decode-pool candidates the decode-pool tests share (tests/test_sizing_search_steps.py,
tests/test_pool_walk_pause.py)."""

from __future__ import annotations

from planner.scenario.scenario import Scenario, resolve
from planner.serving.layout_memo import LayoutMemo, layout_key


def llama70b_decode_candidates(weights: tuple[str, ...]) -> list:
    """Decode-pool candidates (floor, candidate, deployment, price, memory, prefill work) of Llama-3.1-70B
    with fp8 KV over five GPUs and TP 1-8, floored by the sizing bound at a 40 ms ITL, in that order."""
    from planner.hardware.parallelism import sharding
    from planner.serving.goodput_search import rate_bound_per_s
    from planner.serving.sizing_request import LayoutCandidate

    candidates = []
    prices = {"h100-sxm": 2.5, "h200": 3.5, "b200": 5.0, "a100-sxm-80gb": 1.5, "l40s": 0.9}  # $/GPU-hour, any
    for gpu, price in prices.items():
        for tp in (1, 2, 4, 8):
            for w in weights:
                c = LayoutCandidate(gpu, gpu, tp, w, "fp8")
                s = Scenario.model_validate({"model": "llama-3.1-70b", "prompt_len": 2000, "output_len": 400,
                                             **c.scenario_fields()})
                try:
                    d = resolve(s)
                except Exception:
                    continue
                mem = LayoutMemo().memory(layout_key(gpu, tp, 1, 1, w, "fp8"), d, 2400)
                if not mem.fits:
                    continue
                bound = rate_bound_per_s(d, 2200.0, mem.max_batch, 400, 40.0, 0.0)
                floor = 0.0 if bound is None else price * sharding(d).gpus_per_replica / bound
                candidates.append((floor, c, d, price, mem, None))
    return candidates
