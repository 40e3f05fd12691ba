"""What a closed-loop `bench serve` run reports: `vllm bench serve --max-concurrency N --request-rate inf`,
SGLang's bench_serving and TensorRT-LLM's serving benchmark all drive the engine the same way.

The steady-state queue of planner.serving.serving answers "what does a replica do at a rate"; a benchmark
is not in steady state. Its clients all start together (request-rate inf), each sends its next request
the moment its last one ends, lengths are fixed or uniform in a range, and the run is short (InferenceX
sends 10 x concurrency prompts), so the first wave's prefill pile-up and the lock-step of equal outputs
are a large part of what it measures: at concurrency 64 of 1k prompts, a request's TTFT is mostly the
other prompts of its wave. So this module runs the engine's scheduler itself, one engine iteration at a
time, with the same step physics as the fast model (latency.decode_step of each iteration's decode
batch, latency.prefill_chunk_work_ms spread over a prompt's tokens), and reports the run's statistics
as the benchmark computes them:

  * TTFT: arrival -> first token, per request (+ the engine's per-request serving cost);
  * TPOT: (E2E - TTFT) / (output - 1), per request, requests with one output token left out;
  * ITL: every gap between two tokens of a request, pooled over all tokens of all requests;
  * E2E: arrival -> last token; throughputs over the run's duration (start -> last response).

Scheduler (vLLM V1's default, which SGLang's and TensorRT-LLM's in-flight batching resemble): each
iteration carries one token of every decoding sequence, then prompt chunks first come first served up
to `max_num_batched_tokens`, admitting at most `max_running` sequences. Pure-decode stretches (no prompt
waiting, or none admissible) are jumped to the next completion in one step, so a run costs a few Python
operations per request. Runs longer than `MAX_SIMULATED_REQUESTS` are simulated up to that many
requests: the waves after the first repeat, and their statistics are those of the whole run.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass

import numpy as np

from planner.core.deployment import Deployment
from planner.physics.latency import decode_step, prefill_chunk_work_ms
from planner.serving.replica import Workload

# InferenceX's runs send 10 x concurrency prompts (`--num-prompts $(( $CONC * 10 ))`); the benchmark
# commands Ridgeline generates send at least MIN_PROMPTS, enough for a stable median and a meaningful p99.
PROMPTS_PER_CLIENT = 10
MIN_PROMPTS = 200
# A bound on the simulated requests, so that a plan stays fast: 4 waves of 512 clients.
MAX_SIMULATED_REQUESTS = 2048


@dataclass(frozen=True)
class BenchmarkClient:
    """How the benchmark client sends requests.

    `length_low` .. `length_high`: prompt and output lengths are uniform integers in
    [length_low x L, length_high x L] (vLLM's `--random-range-ratio r` gives [L(1 - r), L(1 + r)] since
    0.10 and [r L, L] in the older benchmark_serving.py that InferenceX runs; 1 and 1: fixed lengths)."""

    concurrency: int
    num_prompts: int | None = None  # None: default_num_prompts(concurrency)
    length_low: float = 1.0
    length_high: float = 1.0
    seed: int = 0

    @property
    def prompts(self) -> int:
        return self.num_prompts if self.num_prompts is not None else default_num_prompts(self.concurrency)


def default_num_prompts(concurrency: int) -> int:
    """Requests a closed-loop benchmark sends unless told: ~10 per client, at least MIN_PROMPTS."""
    return max(MIN_PROMPTS, PROMPTS_PER_CLIENT * concurrency)


@dataclass(frozen=True)
class Summary:
    """One metric as a benchmark prints it (ms)."""

    mean: float
    p50: float
    p90: float
    p99: float


@dataclass(frozen=True)
class BenchmarkRun:
    """A simulated benchmark run's report."""

    requests: int  # requests the statistics stand on (simulated)
    duration_s: float
    request_throughput: float  # requests/s
    output_throughput: float  # output tokens/s
    total_token_throughput: float  # prompt + output tokens/s
    ttft_ms: Summary
    tpot_ms: Summary
    itl_ms: Summary
    e2e_ms: Summary
    mean_decode_batch: float  # decode tokens per iteration, token-weighted


def _summary(values: np.ndarray) -> Summary:
    if len(values) == 0:
        return Summary(0.0, 0.0, 0.0, 0.0)
    p50, p90, p99 = np.percentile(values, (50, 90, 99))
    return Summary(float(np.mean(values)), float(p50), float(p90), float(p99))


def _weighted_summary(values: np.ndarray, weights: np.ndarray) -> Summary:
    """Percentiles of values each repeated `weights` times (pooled ITL: an iteration's duration is the
    gap of every decode token it produced)."""
    keep = weights > 0
    values, weights = values[keep], weights[keep]
    if len(values) == 0:
        return Summary(0.0, 0.0, 0.0, 0.0)
    order = np.argsort(values)
    values, weights = values[order], weights[order]
    cumulative = np.cumsum(weights)
    total = cumulative[-1]

    def at(q: float) -> float:
        return float(values[min(int(np.searchsorted(cumulative, q * total)), len(values) - 1)])

    return Summary(float(np.sum(values * weights) / total), at(0.50), at(0.90), at(0.99))


def _lengths(rng: np.random.Generator, nominal: float, client: BenchmarkClient, n: int) -> np.ndarray:
    low = max(int(round(nominal * client.length_low)), 1)
    high = max(int(round(nominal * client.length_high)), low)
    if low == high:
        return np.full(n, low, dtype=np.int64)
    return rng.integers(low, high + 1, size=n)


def run_benchmark(d: Deployment, w: Workload, client: BenchmarkClient) -> BenchmarkRun:
    """Simulate a closed-loop benchmark of `client.concurrency` clients against one replica."""
    n = max(1, min(client.prompts, MAX_SIMULATED_REQUESTS))
    clients = max(1, min(client.concurrency, n))
    rng = np.random.default_rng(client.seed)
    prompts = _lengths(rng, w.prompt_len, client, n)
    outputs = _lengths(rng, w.output_len, client, n)
    computed = np.maximum(np.round(prompts * (1.0 - w.prefix_cache_hit)), 1).astype(np.int64)
    per_token_ms = (np.asarray(prefill_chunk_work_ms(d, prompts.astype(float), (prompts - computed).astype(float)),
                               dtype=float) / computed).tolist()
    cap = max(int(w.max_running), 1)
    context = w.context if w.context is not None else w.prompt_len + w.output_len / 2
    decode_ms = np.asarray(decode_step(d, np.arange(cap + 1, dtype=float), context).total_ms, dtype=float).tolist()
    budget_total = int(w.max_num_batched_tokens)
    computed_l, outputs_l = computed.tolist(), outputs.tolist()

    arrival = [0.0] * n
    found = [0] * n  # requests in flight that an arrival finds (the frontend serves them before it)
    first_token = [0.0] * n
    end = [0.0] * n
    queue: deque[list[int]] = deque()  # [request, prompt tokens left, admitted (0/1)]
    ends: list[int] = []  # heap of iterations at which decodes finish
    finishing: dict[int, list[int]] = {}
    durations: list[float] = []
    tokens: list[float] = []  # decode tokens each record produced (its duration is each one's gap)
    batches: list[float] = []
    t, iteration, sent, done, running, prefilling = 0.0, 0, 0, 0, 0, 0

    def send(now: float) -> None:
        nonlocal sent
        if sent < n:
            arrival[sent] = now
            found[sent] = sent - done
            queue.append([sent, computed_l[sent], 0])
            sent += 1

    def complete(i: int, now: float) -> None:
        nonlocal done
        end[i] = now
        done += 1
        send(now)  # the client sends its next request at once

    for _ in range(clients):
        send(0.0)
    while done < n:
        budget = budget_total - running
        admissible = bool(queue) and budget > 0 and (queue[0][2] == 1 or running + prefilling < cap)
        if admissible:
            work, finished = 0.0, []
            for item in queue:
                if budget <= 0:
                    break
                if not item[2]:
                    if running + prefilling >= cap:
                        break
                    item[2] = 1
                    prefilling += 1
                chunk = min(item[1], budget)
                budget -= chunk
                item[1] -= chunk
                work += chunk * per_token_ms[item[0]]
                if item[1] == 0:
                    finished.append(item[0])
            for _ in finished:
                queue.popleft()
            step = decode_ms[running] + work
            durations.append(step)
            tokens.append(float(running))
            batches.append(float(running))
            t += step
            iteration += 1
        elif ends:
            # nothing to prefill: every iteration until the next completion is the same decode step
            stop = ends[0]
            step = decode_ms[running]
            durations.append(step)
            tokens.append(float(running * (stop - iteration)))
            batches.append(float(running))
            t += step * (stop - iteration)
            iteration = stop
            finished = []
        else:  # unreachable while work remains; guards against an inconsistent workload
            break
        while ends and ends[0] == iteration:
            heapq.heappop(ends)
            for i in finishing.pop(iteration):
                running -= 1
                complete(i, t)
        for i in finished:
            prefilling -= 1
            first_token[i] = t
            if outputs_l[i] > 1:
                running += 1
                last = iteration + outputs_l[i] - 1
                if last not in finishing:
                    finishing[last] = []
                    heapq.heappush(ends, last)
                finishing[last].append(i)
            else:
                complete(i, t)

    arrival_a, first_a, end_a = np.array(arrival), np.array(first_token), np.array(end)
    overhead = float(w.ttft_overhead_ms) + float(w.ttft_per_running_ms) * np.array(found, dtype=float)
    ttft = first_a - arrival_a + overhead
    e2e = end_a - arrival_a + overhead
    many = outputs > 1
    tpot = (e2e[many] - ttft[many]) / (outputs[many] - 1)
    duration_s = max(float(end_a.max()), 1e-9) / 1000.0
    weights = np.array(tokens)
    return BenchmarkRun(
        requests=n, duration_s=duration_s, request_throughput=n / duration_s,
        output_throughput=float(outputs.sum()) / duration_s,
        total_token_throughput=float(outputs.sum() + prompts.sum()) / duration_s,
        ttft_ms=_summary(ttft), tpot_ms=_summary(tpot), itl_ms=_weighted_summary(np.array(durations), weights),
        e2e_ms=_summary(e2e),
        mean_decode_batch=float(np.sum(weights * np.array(batches)) / max(float(np.sum(weights)), 1e-12)))
