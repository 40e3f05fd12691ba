"""The oracle: a discrete-event simulation of the scheduler planner/serving/serving.py models, one engine
iteration at a time (vLLM V1's default: running decodes first, then prompt chunks first come first
served up to the token budget, at most `max_running` sequences admitted). Same step physics as the
fast model (latency.decode_step for the decode batch of each iteration, latency.prefill_chunk_work_ms
spread evenly over a prompt's tokens), but real random arrivals and lengths instead of formulas."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from planner.core.deployment import Deployment
from planner.physics.latency import decode_step, prefill_chunk_work_ms
from planner.serving.replica import Workload


@dataclass(frozen=True)
class SimResult:
    ttft_ms: np.ndarray  # per request, after warm-up
    e2e_ms: np.ndarray
    itl_ms: np.ndarray  # iteration durations of the measured window
    itl_weight: np.ndarray  # decode tokens of each (ITL is pooled per token)

    def ttft(self, q: float) -> float:
        return float(np.percentile(self.ttft_ms, q))

    def itl(self, q: float) -> float:
        order = np.argsort(self.itl_ms)
        cum = np.cumsum(self.itl_weight[order])
        return float(self.itl_ms[order][np.searchsorted(cum, q / 100.0 * cum[-1])])


def _lengths(rng: np.random.Generator, mean: float, cv: float, n: int) -> np.ndarray:
    if cv <= 0:
        return np.full(n, max(round(mean), 1), dtype=np.int64)
    sigma = np.sqrt(np.log1p(cv * cv))
    return np.maximum(np.round(rng.lognormal(np.log(mean) - sigma * sigma / 2, sigma, n)), 1).astype(np.int64)


def simulate(d: Deployment, w: Workload, rate_per_s: float, n_requests: int, seed: int,
             warmup: float = 0.1) -> SimResult:
    rng = np.random.default_rng(seed)
    mean_gap_ms = 1000.0 / rate_per_s
    if w.arrival_cv <= 0:
        gaps = np.full(n_requests, mean_gap_ms)
    else:
        shape = 1.0 / w.arrival_cv ** 2
        gaps = rng.gamma(shape, mean_gap_ms / shape, n_requests)
    arrivals = np.cumsum(gaps).tolist()
    prompts = _lengths(rng, w.prompt_len, w.prompt_len_cv, n_requests)
    outputs = _lengths(rng, w.output_len, w.output_len_cv, n_requests).tolist()
    computed = np.maximum(np.round(prompts * (1.0 - w.prefix_cache_hit)), 1).astype(np.int64)
    per_token = (
        np.asarray(prefill_chunk_work_ms(d, prompts.astype(float), (prompts - computed).astype(float)))
        / computed
    ).tolist()
    computed_l = computed.tolist()
    context = w.context if w.context is not None else w.prompt_len + w.output_len / 2
    decode_ms = np.asarray(
        decode_step(d, np.arange(w.max_running + 1, dtype=float), context).total_ms
    ).tolist()
    budget_total, cap = w.max_num_batched_tokens, w.max_running

    t, it, a, running, started, done = 0.0, 0, 0, 0, 0, 0
    queue: deque[list] = deque()  # [request, tokens left, started]
    ends: dict[int, int] = {}
    ttft = [0.0] * n_requests
    first_iter = [0] * n_requests
    durations: list[float] = []
    batches: list[int] = []
    clock: list[float] = []
    while done < n_requests:
        while a < n_requests and arrivals[a] <= t:
            queue.append([a, computed_l[a], False])
            a += 1
        if running == 0 and not queue:
            t = arrivals[a]
            continue
        budget = budget_total - running
        work = 0.0
        finished = []
        for item in queue:
            if budget <= 0:
                break
            if not item[2]:
                if running + started >= cap:
                    break
                item[2] = True
                started += 1
            c = min(item[1], budget)
            budget -= c
            item[1] -= c
            work += c * per_token[item[0]]
            if item[1] == 0:
                finished.append(item[0])
        for _ in finished:
            queue.popleft()
        b = running
        t += decode_ms[b] + work
        it += 1
        durations.append(decode_ms[b] + work)
        batches.append(b)
        clock.append(t)
        running -= ends.pop(it, 0)
        for i in finished:
            started -= 1
            ttft[i] = t - arrivals[i]
            first_iter[i] = it
            if outputs[i] > 1:
                running += 1
                ends[it + outputs[i] - 1] = ends.get(it + outputs[i] - 1, 0) + 1
            done += 1
    # drain the decodes still running so every E2E is known
    while running > 0:
        t += decode_ms[running]
        it += 1
        durations.append(decode_ms[running])
        batches.append(running)
        clock.append(t)
        running -= ends.pop(it, 0)
    first = int(warmup * n_requests)
    clock_a = np.array(clock)
    last_iter = np.array(first_iter) + np.array(outputs) - 1
    e2e = clock_a[last_iter - 1] - np.array(arrivals)
    start, stop = arrivals[first], arrivals[-1]
    window = (clock_a > start) & (clock_a <= stop) & (np.array(batches) > 0)
    return SimResult(
        np.array(ttft[first:]), e2e[first:], np.array(durations)[window], np.array(batches)[window]
    )
