"""What a closed-loop `bench serve` run reports: `vllm bench serve --max-concurrency N --request-rate inf`,
SGLang's bench_serving and TensorRT-LLM's serving benchmark all drive the engine the same way.

The steady-state queue of planner.serving.replica answers "what does a replica do at a rate"; a benchmark is
not in steady state. Its clients all start together (request-rate inf), each sends its next request the moment
its last one ends, lengths are fixed or uniform in a range, and the run is short (InferenceX sends 10 x
concurrency prompts), so the first wave's prefill pile-up and the lock-step of equal outputs are a large part
of what it measures: at concurrency 64 of 1k prompts, a request's TTFT is mostly the other prompts of its
wave. So this module runs the engine's scheduler itself, one engine iteration at a time, with the same step
physics as the fast model (latency.decode_step of each iteration's decode batch, latency.prefill_chunk_work_ms
spread over a prompt's tokens; under MoE an iteration's GEMMs, all-reduces and expert reads once over all its
tokens, planner.serving.shared_pass), and reports the run's statistics as the benchmark computes them:

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

What a prompt waits for (issue 30, planner.serving.scheduler_wait): a request sent while the engine runs
is received at the first poll after the iteration in flight and, under an overlap scheduler, runs one
iteration after that (the one already formed; `missed_iterations` 2);
SGLang runs prompts in prefill-only iterations of up to its chunk size while the decodes pause
(`prefill_first`); TensorRT-LLM takes a prompt only whole into the rest of its token budget
(`chunked_prefill` off). The decodes of each sequence are counted in decode iterations (`step_index`), which
a prefill-only iteration does not advance.

Admission (`Workload.scheduler`, issue 20): production launches hold a new prompt behind the running decodes.
SGLang's scheduler polls for requests only every k decode iterations (`--scheduler-recv-interval`,
`--num-continuous-decode-steps`; at once after a prefill or when idle); TensorRT-LLM holds waiting prompts up
to k iterations until enough tokens (batch waiting) or one prompt per attention-DP rank wait. A request sent
meanwhile waits whole decode steps before its prefill: TTFT grows with the decode step, so with concurrency.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, replace

import numpy as np

from planner.core.deployment import Deployment
from planner.hardware.parallelism import sharding
from planner.physics.latency import (
    attention_dp_share_ms,
    decode_step,
)
from planner.physics.roofline import compute_floor_ms, prefill_compute_floor_ms, weights_read_ms
from planner.serving.distributions import Percentiles
from planner.serving.replica import Workload
from planner.serving.scheduler_wait import EngineScheduling, launched_scheduling
from planner.serving.serving import ServingPoint
from planner.serving.shared_pass import prompt_work_ms

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
    max_running: int = 0  # sequences the engine ran at once at most (the KV pool's admission, max_num_seqs)


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


def _attention_dp_shares(d: Deployment, prompts: np.ndarray, computed: np.ndarray) -> tuple[int, list[float]]:
    """Attention DP: each rank prefills its own prompts side by side (its own token budget) and the experts
    serve all of their tokens. The ranks, and each prompt's share per token of an iteration every rank
    prefills in (planner.physics.latency.attention_dp_share_ms; none without attention DP)."""
    ranks = sharding(d).attention_dp
    if ranks <= 1:
        return 1, []
    return ranks, (attention_dp_share_ms(d, prompts.astype(float)) / computed).tolist()


class _ClosedLoop:
    """The engine's scheduler under a closed loop of clients, one iteration at a time: the requests' lengths
    and step-time tables, the queue, the decoding sequences, and what the run records."""

    def __init__(self, d: Deployment, w: Workload, client: BenchmarkClient,
                 policy: EngineScheduling) -> None:
        n = max(1, min(client.prompts, MAX_SIMULATED_REQUESTS))
        self.n, self.clients = n, max(1, min(client.concurrency, n))
        rng = np.random.default_rng(client.seed)
        self.prompts = _lengths(rng, w.prompt_len, client, n)
        self.outputs = _lengths(rng, w.output_len, client, n)
        computed = np.maximum(np.round(self.prompts * (1.0 - w.prefix_cache_hit)), 1).astype(np.int64)
        cached = (self.prompts - computed).astype(float)
        self.ranks, self.share_per_token_ms = _attention_dp_shares(d, self.prompts, computed)
        self.budget_total = int(w.max_num_batched_tokens) * self.ranks  # the budget is each rank's
        # an MoE iteration reads its experts once for all its prompts (planner.serving.shared_pass); its
        # roofline floor (planner.physics.roofline): its decodes' and its chunks' compute
        work, self.pass_tokens_ms = prompt_work_ms(d, self.prompts, cached, self.budget_total, self.ranks)
        per_token = work / computed
        per_token_floor = prefill_compute_floor_ms(d, self.prompts.astype(float), cached) / computed
        self.per_token_ms, self.per_token_floor_ms = per_token.tolist(), per_token_floor.tolist()
        self.cap = max(int(w.max_running), 1)
        context = w.context if w.context is not None else w.prompt_len + w.output_len / 2
        steps = decode_step(d, np.arange(self.cap + 1, dtype=float), context)
        decode = np.asarray(steps.total_ms, dtype=float)
        decode_floor = np.broadcast_to(compute_floor_ms(d, steps.work), decode.shape)
        self.decode_ms, self.decode_floor_ms = decode.tolist(), decode_floor.tolist()
        # Under MoE a pass reads each expert some token routes to; a cached prefix's prefill, subtracted
        # from a prompt's work, read them, and the empty pass reads none: the pass's weight read by its
        # tokens (a table up to 65,536 tokens, by then every expert: a lower bound past it)
        self.pass_read_ms = (weights_read_ms(d, np.arange(min(self.budget_total, 1 << 16) + 1)).tolist()
                             if d.model.moe is not None else [0.0])
        # the floor binds only where a prompt's work per token is below its compute, or under MoE (reads)
        self.floored = bool(np.any(per_token_floor > per_token) or np.any(decode_floor > decode)
                            or d.model.moe is not None)
        self.computed_l, self.outputs_l = computed.tolist(), self.outputs.tolist()
        self.arrival = [0.0] * n
        self.found = [0] * n  # requests in flight that an arrival finds (the frontend serves them before it)
        self.first_token = [0.0] * n
        self.end = [0.0] * n
        # [request, prompt tokens left, admitted (0/1), iteration from which it may be scheduled]
        self.queue: deque[list[int]] = deque()
        # requests sent but not yet received by the scheduler, which polls every `recv_every` decodes and
        # receives a request only after the iteration in flight when it arrived (its last field)
        self.arrived: deque[list[int]] = deque()
        self.policy = policy
        # an overlap scheduler has formed the next iteration when it polls: what it receives runs one later
        self.ahead = max(int(policy.missed_iterations) - 1, 0)
        self.resend = 0  # clients whose request ended this iteration, to send once the iteration is retired
        self.stall_ms = 0.0  # prefill-only iterations since the decodes last advanced (their tokens' gap)
        self.stalled = 0  # decoding sequences those iterations held back
        self.admission = w.scheduler
        self.recv_every = int(w.scheduler.recv_interval_steps)
        self.since_recv = self.recv_every  # decode iterations since the scheduler last polled
        self.held = 0  # iterations the waiting prompts have been held behind the decodes
        # attention DP: this iteration's prompt work and compute floor on each rank, its prompts' shares
        self.ranks_busy, self.ranks_floor, self.shares = [0.0] * 0, [0.0] * 0, 0.0
        self.ends: list[int] = []  # heap of iterations at which decodes finish
        self.finishing: dict[int, list[int]] = {}
        self.durations: list[float] = []
        self.tokens: list[float] = []  # decode tokens each record produced (its duration is each one's gap)
        self.batches: list[float] = []
        self.t, self.iteration, self.sent, self.done, self.running, self.prefilling = 0.0, 0, 0, 0, 0, 0
        self.step_index = 0  # decode iterations so far: a sequence's tokens count these

    def busy(self, now: float | None = None) -> bool:
        """The engine has work: running or prefilling sequences, received requests, or (at `now`) requests
        sent before now and still on their way in (a request sent at an iteration's end behind others sent at
        the one before finds the engine busy with them; requests sent together to an idle engine do not)."""
        if self.running > 0 or self.prefilling > 0 or self.queue:
            return True
        return now is not None and bool(self.arrived) and self.arrival[self.arrived[0][0]] < now

    def send(self, now: float) -> None:
        if self.sent < self.n:
            self.arrival[self.sent] = now
            self.found[self.sent] = self.sent - self.done
            # a busy engine has started its next iteration without it
            visible = self.iteration + (min(self.policy.missed_iterations, 1) if self.busy(now) else 0)
            self.arrived.append([self.sent, self.computed_l[self.sent], 0, visible])
            self.sent += 1

    def complete(self, i: int, now: float) -> None:
        self.end[i] = now
        self.done += 1
        self.resend += 1  # the client sends its next request at once (after the iteration is retired)

    def prefill_iteration(self, budget: int) -> list[int]:
        """One iteration with prompt chunks (first come first served up to the budget); the prompts it
        finishes. Prefill-first (SGLang): the iteration carries no decodes; without chunked prefill
        (TensorRT-LLM) a prompt that does not fit the rest of the budget waits for the next iteration."""
        work, floor, offered = 0.0, 0.0, budget
        finished: list[int] = []
        per_token_ms, running, prefilling, cap = self.per_token_ms, self.running, self.prefilling, self.cap
        per_token_floor_ms, floored = self.per_token_floor_ms, self.floored
        whole = not self.policy.chunked_prefill
        iteration = self.iteration
        for item in self.queue:
            if budget <= 0 or item[3] > iteration:
                break
            if whole and item[1] > budget and work > 0.0:
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
            if self.ranks > 1:  # the iteration's prompts spread over the ranks, in turn
                self.rank_work(len(finished), chunk, item[0])
            if floored:
                floor += chunk * per_token_floor_ms[item[0]]
            if item[1] == 0:
                finished.append(item[0])
        self.prefilling = prefilling
        for _ in finished:
            self.queue.popleft()
        if self.ranks > 1:
            work, floor = self.attention_dp_work(floor)
        # prompts riding one pass share its weight read, never their FLOPs: at least the pass's compute, and
        # the weights its tokens touch (a prefill-first iteration carries no decodes)
        riding = 0 if self.policy.prefill_first else running
        terms = self.pass_tokens_ms
        top = len(terms) - 1
        step = (self.decode_ms[riding] + work + terms[min(riding + offered - budget, top)]
                - terms[min(riding, top)])
        if floored:
            reads = self.pass_read_ms
            step = max(step, self.decode_floor_ms[riding] + floor,
                       reads[min(riding + offered - budget, len(reads) - 1)])
        if self.policy.prefill_first:  # the decodes pause: their next token's gap takes this iteration too
            if running:
                self.stall_ms += step
                self.stalled = max(self.stalled, running)
        else:
            self.durations.append(step)
            self.tokens.append(float(running))
            self.batches.append(float(running))
            self.step_index += 1
        self.t += step
        self.iteration += 1
        return finished

    def receive(self) -> None:
        """The scheduler's poll: every `recv_every` decode iterations (SGLang counts a prefill as a full
        interval, so it polls right after one), it takes in every request sent since the last poll."""
        if self.since_recv >= self.recv_every:
            self.since_recv = 0
            arrived, iteration = self.arrived, self.iteration
            while arrived and arrived[0][3] <= iteration:
                item = arrived.popleft()
                item[3] = iteration + (self.ahead if self.busy() else 0)
                self.queue.append(item)

    def holding(self) -> bool:
        """Whether the engine holds its waiting prompts behind the running decodes this iteration:
        TensorRT-LLM's batch waiting (until enough prompt tokens wait, or a timeout in iterations) and its
        attention-DP balance (until every rank has a prompt: one prompt per rank waiting, or a timeout)."""
        a = self.admission
        if a.prefill_wait_steps <= 0 or self.running == 0 or self.held >= a.prefill_wait_steps:
            return False
        if not self.queue or self.queue[0][2]:  # a prompt already being prefilled goes on
            return False
        if a.prefill_wait_prompts and len(self.queue) >= a.prefill_wait_prompts:
            return False
        return not (a.prefill_wait_tokens
                    and sum(item[1] for item in self.queue) + self.running >= a.prefill_wait_tokens)

    def rank_work(self, position: int, chunk: int, request: int) -> None:
        """Record a chunk of the iteration's prompt at `position` (from 0) on its rank (round robin, as
        TensorRT-LLM's router balances a wave of new requests) and its share of an every-rank prefill."""
        if not self.ranks_busy:
            self.ranks_busy, self.ranks_floor = [0.0] * self.ranks, [0.0] * self.ranks
        self.ranks_busy[position % self.ranks] += chunk * self.per_token_ms[request]
        self.ranks_floor[position % self.ranks] += chunk * self.per_token_floor_ms[request]
        self.shares += chunk * self.share_per_token_ms[request]

    def attention_dp_work(self, floor: float) -> tuple[float, float]:
        """The iteration's prompt work under attention DP: at least its busiest rank's prompts alone, and at
        least the sum of the prompts' shares (the experts serve every rank's tokens); and its compute floor,
        the busiest rank's (every GPU its own rank's dense layers and a share of every rank's experts), at
        least the iteration's over the ranks. `floor`: the prompts' floors one after another."""
        work = max(max(self.ranks_busy, default=0.0), self.shares)
        floor = max(max(self.ranks_floor, default=0.0), floor / self.ranks)
        self.ranks_busy, self.ranks_floor, self.shares = [], [], 0.0
        return work, floor

    def decode_until(self, holding: bool) -> None:
        """No prompt runs: every iteration until the next completion, the scheduler's next poll for a
        request sent meanwhile, or the end of a hold is the same decode step."""
        steps = self.ends[0] - self.step_index
        if self.queue and self.queue[0][3] > self.iteration:  # received, in the iteration after next
            steps = min(steps, self.queue[0][3] - self.iteration)
        if self.arrived:
            # the next poll, or the iteration the oldest request becomes visible, whichever is later
            steps = min(steps, max(self.recv_every - self.since_recv, self.arrived[0][3] - self.iteration, 1))
        if holding:
            steps = min(steps, self.admission.prefill_wait_steps - self.held)
            self.held += steps
        step = self.decode_ms[self.running]
        if self.stall_ms > 0.0:  # the first token after prefill-only iterations waited through them too
            stalled = min(self.stalled, self.running)
            self.durations += [step + self.stall_ms, step]
            self.tokens += [float(stalled), float(self.running * steps - stalled)]
            self.batches += [float(self.running), float(self.running)]
            self.stall_ms, self.stalled = 0.0, 0
        else:
            self.durations.append(step)
            self.tokens.append(float(self.running * steps))
            self.batches.append(float(self.running))
        self.t += step * steps
        # the poll counter runs on through the stretch: polls fall every recv_every iterations
        self.since_recv = (self.since_recv + steps - 1) % self.recv_every + 1
        self.iteration += steps
        self.step_index += steps

    def retire(self, finished: list[int]) -> None:
        """Sequences whose last token this iteration made end; prompts it finished start decoding."""
        while self.ends and self.ends[0] == self.step_index:
            heapq.heappop(self.ends)
            for i in self.finishing.pop(self.step_index):
                self.running -= 1
                self.complete(i, self.t)
        for i in finished:
            self.prefilling -= 1
            self.first_token[i] = self.t
            if self.outputs_l[i] > 1:
                self.running += 1
                last = self.step_index + self.outputs_l[i] - 1
                if last not in self.finishing:
                    self.finishing[last] = []
                    heapq.heappush(self.ends, last)
                self.finishing[last].append(i)
            else:
                self.complete(i, self.t)
        resend, self.resend = self.resend, 0
        for _ in range(resend):
            self.send(self.t)

    def run(self) -> None:
        for _ in range(self.clients):
            self.send(0.0)
        while self.done < self.n:
            self.receive()
            # decode-first engines give the running decodes their token out of the budget first
            budget = self.budget_total - (0 if self.policy.prefill_first else self.running)
            queue = self.queue
            holding = self.holding()
            ready = bool(queue) and queue[0][3] <= self.iteration
            if (ready and budget > 0 and (queue[0][2] == 1 or self.running + self.prefilling < self.cap)
                    and not holding):
                finished = self.prefill_iteration(budget)
                self.since_recv, self.held = self.recv_every, 0
            elif self.ends:
                self.decode_until(holding)
                finished = []
            elif self.arrived or (queue and not ready):  # an idle engine takes what has arrived at once
                self.since_recv = self.recv_every
                for item in (*self.arrived, *queue):
                    item[3] = min(item[3], self.iteration)
                continue
            else:  # unreachable while work remains; guards against an inconsistent workload
                break
            self.retire(finished)

    def report(self, w: Workload) -> BenchmarkRun:
        """The run's statistics, as the benchmark computes them."""
        n, outputs = self.n, self.outputs
        arrival_a, first_a, end_a = np.array(self.arrival), np.array(self.first_token), np.array(self.end)
        overhead = float(w.ttft_overhead_ms) + float(w.ttft_per_running_ms) * np.array(
            self.found, dtype=float
        )
        ttft = first_a - arrival_a + overhead
        e2e = end_a - arrival_a + overhead
        many = outputs > 1
        tpot = (e2e[many] - ttft[many]) / (outputs[many] - 1)
        duration_s = max(float(end_a.max()), 1e-9) / 1000.0
        weights = np.array(self.tokens)
        return BenchmarkRun(
            requests=n, duration_s=duration_s, request_throughput=n / duration_s,
            output_throughput=float(outputs.sum()) / duration_s,
            total_token_throughput=float(outputs.sum() + self.prompts.sum()) / duration_s,
            ttft_ms=_summary(ttft), tpot_ms=_summary(tpot),
            itl_ms=_weighted_summary(np.array(self.durations), weights), e2e_ms=_summary(e2e),
            mean_decode_batch=float(
                np.sum(weights * np.array(self.batches)) / max(float(np.sum(weights)), 1e-12)
            ),
            max_running=int(w.max_running),
        )


def run_benchmark(d: Deployment, w: Workload, client: BenchmarkClient,
                  policy: EngineScheduling | None = None) -> BenchmarkRun:
    """Simulate a closed-loop benchmark of `client.concurrency` clients against one replica, scheduled as
    `policy` says (default: the deployment's engine's as launched, planner.serving.scheduler_wait)."""
    loop = _ClosedLoop(d, w, client, launched_scheduling(d.engine, w.scheduler) if policy is None else policy)
    loop.run()
    return loop.report(w)


def at_benchmark(point: ServingPoint, run: BenchmarkRun) -> ServingPoint:
    """A closed loop at a concurrency as its benchmark reports it: the run's throughputs and its TTFT, ITL,
    E2E and TPOT statistics replace the steady-state queue's (a benchmark never reaches steady state: its
    clients start together and it ends with a drain). Capacity, prefill share and goodput stay the queue's.
    Every client's request completes, so the run is stable; `saturated` still says whether more clients
    were sent than the replica runs at once (they queued inside the engine, in TTFT)."""

    def pct(s: Summary) -> Percentiles:
        return Percentiles(s.p50, s.p90, s.p99)

    # the run's running cap, not the queue's: the run admits sequences at the length the engine holds them
    # (planner.serving.scheduler_wait.admitted_sequences), so its throughput is that many per step
    clients = math.ceil(point.concurrency or 0)
    return replace(point, request_rate=run.request_throughput, output_tokens_per_s=run.output_throughput,
                   total_tokens_per_s=run.total_token_throughput, stable=True,
                   max_running=max(min(run.max_running, clients), point.max_running),
                   saturated=point.saturated and (point.concurrency or 0) > run.max_running,
                   ttft_ms=pct(run.ttft_ms), itl_ms=pct(run.itl_ms), e2e_ms=pct(run.e2e_ms),
                   ttft_mean_ms=run.ttft_ms.mean, itl_mean_ms=run.itl_ms.mean, e2e_mean_ms=run.e2e_ms.mean,
                   tpot_ms=pct(run.tpot_ms), tpot_mean_ms=run.tpot_ms.mean)
