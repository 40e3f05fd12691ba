"""What prompts sharing an engine iteration pay (the closed-loop client's step composition).

An engine flattens an iteration's prompt chunks and decodes into one token batch for its GEMMs, all-reduces
and expert reads (planner.physics.latency.pass_token_terms_ms), but a prompt's work alone
(latency.prefill_chunk_work_ms: its prefill less an empty iteration) carries those terms at its own length.
Under MoE a 128-token prompt reads nearly every expert, so summing prompts paid that read once per prompt
(Qwen3-235B-A22B at TP 8 on H100: 64 prompts of 128 tokens 1,791 ms, one of 8,192 tokens 275 ms; GPUStack's
128-token bursts planned 3-13x their TPOT). So under MoE each prompt keeps the rest of its work (attention,
fixed costs) and the iteration pays those terms once, for its tokens beyond its decodes'; a prompt alone in
an iteration still pays exactly its prefill. A dense model's prompt shares the same way in principle (its
compute hides under its own copy of the weight read), but its read is in the empty iteration already and
its step times are validated as sums: not changed here. Under attention DP each rank's dense layers take
its own prompts and the experts every rank's tokens: the client's own rule (latency.attention_dp_share_ms).
"""

from __future__ import annotations

import numpy as np

from planner.core.deployment import Deployment
from planner.physics.latency import own_pass_terms_ms, pass_token_terms_ms, prefill_chunk_work_ms


def prompt_work_ms(d: Deployment, prompts: np.ndarray, cached: np.ndarray, budget: int,
                   attention_ranks: int = 1) -> tuple[np.ndarray, list[float]]:
    """Each prompt's own work in an iteration (ms) and the table, by the tokens an iteration carries, of
    the terms it pays once for all of them (`[0.0]` where prompts keep their whole work)."""
    lengths = np.asarray(prompts, dtype=float)
    work = np.asarray(prefill_chunk_work_ms(d, lengths, cached), dtype=float)
    if d.model.moe is None or attention_ranks > 1:
        return work, [0.0]
    return np.maximum(work - own_pass_terms_ms(d, lengths, cached), 0.0), pass_terms_table(d, budget)


def pass_terms_table(d: Deployment, budget: int) -> list[float]:
    """latency.pass_token_terms_ms at every token count an iteration carries (decodes and chunks, at most
    the budget; a table up to 131,072 tokens, linear between points 1 apart up to 512 and budget / 256
    apart past it)."""
    top = min(max(budget, 1), 1 << 17)
    grid = np.unique(np.concatenate([np.arange(min(top, 512) + 1.0), np.linspace(0.0, top, 257).round()]))
    terms = np.asarray(pass_token_terms_ms(d, grid), dtype=float)
    return np.asarray(np.interp(np.arange(top + 1.0), grid, terms), dtype=float).tolist()
