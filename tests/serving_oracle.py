"""The oracle: a discrete-event simulation of vLLM V1's scheduler, one engine step at a time, written from
the engine's source and documented behaviour, not from the planner.

What it follows (read in vllm-project/vllm, vllm/v1/core/sched/scheduler.py at commit 00024d3:
`Scheduler.schedule`, `Scheduler._preempt_request`, `Scheduler._update_after_schedule`; the KV pool of
vllm/v1/core/kv_cache_manager.py, `KVCacheManager.allocate_slots`, which answers None when the free blocks
cannot hold the new tokens). No line of vLLM is copied: the rules below are restated and coded here.

  * One token budget per step, `max_num_batched_tokens`, shared by every request scheduled in it (there is
    no prefill phase and decode phase: each request is given the tokens that bring its computed tokens up
    to its known tokens).
  * RUNNING requests first, in the order they were admitted: a decoding request takes 1 token, a partially
    prefilled one the rest of its prompt, cut to what the budget leaves. Each first needs KV slots for its
    new tokens (blocks of `block_size` tokens); when the pool is short, the most recently admitted running
    request is preempted (blocks freed, computed tokens back to 0, put at the head of the waiting queue),
    again until the request fits or was itself the one preempted.
  * Then WAITING requests, first come first served, unless a request was preempted this step: while the
    budget lasts and fewer than `max_num_seqs` requests run; a request gets min(its uncomputed tokens, the
    budget left), so a long prompt's first chunk is what the budget leaves; it is admitted only if the pool
    holds that chunk's blocks, else admission stops (nobody behind it goes first).
  * At the end of the step every request whose computed tokens reached its known tokens samples one token:
    a prompt's last chunk gives the first token (TTFT), a decode the next; a request with all its output
    tokens finishes and frees its blocks. A preempted request recomputes its prompt and the tokens it had
    generated, then samples its next token; with prefix caching (on by default in V1) its full blocks stay
    cached in the free pool until an allocation takes them (vllm/v1/core/kv_cache_utils.py,
    `FreeKVCacheBlockQueue`: allocations take the head, freed blocks join the tail;
    single_type_kv_cache_manager.py, `SingleTypeKVCacheManager.free`: a request's blocks go back last one
    first, so its prefix survives longest), and it recomputes only what was evicted meanwhile.

Simplifications, stated: every running decode fits the budget (max_num_seqs <= max_num_batched_tokens; the
oracle refuses other limits); no prefix-cache sharing between requests (a request's cached prefix is given
as tokens it does not compute but whose blocks it holds), only a preempted request's reuse of its own; no
speculative decoding, no `long_prefill_token_threshold`, no encoder inputs, no asynchronous scheduling.

The boundary with the planner. The oracle checks the QUEUEING: who is admitted when, how chunks and decodes
share a step, how long requests wait. It takes the duration of each step from a step-time function it is
given, `step_ms(decode_tokens, chunks)`; `planner_step_time` below builds one from the planner's physics
(planner.physics.latency.decode_step at the workload's mean context, prefill_chunk_work_ms spread evenly
over a prompt's tokens), so that a disagreement is the scheduling's, not the step times'. Nothing else of the
planner is used: not its queue model (planner/serving/replica.py) nor its step-by-step closed-loop client
(planner/serving/benchmark_client.py), and no line is shared with them (`duplicates --repo` on a tree
holding both finds no pair).

Arrivals: an open loop (gamma gaps of a given CV at a rate; CV 1 is Poisson) or a closed loop of N clients,
each sending its next request the moment its last one ends, all starting at once (`vllm bench serve
--max-concurrency N --request-rate inf`). The engine takes new requests only between steps: vLLM V1's
busy loop (vllm/v1/engine/core.py, `EngineCore.run_busy_loop`: `_process_input_queue`, then
`_process_engine_step`) drains its input queue before each step and blocks on it only when it has nothing
to run. A request that arrives while a step runs waits for that step to end. A closed-loop client's next
request is sent when its last token reaches the client, after the step that made it has ended, and by then
the busy loop has scheduled its next step: that request is taken in at the step after, unless the engine
had nothing left to run, in which case it takes the request at once.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

# step_ms(decode tokens, [(request index, prompt tokens computed in this step), ...]) -> step duration, ms
StepTime = Callable[[int, Sequence[tuple[int, int]]], float]


@dataclass(frozen=True)
class EngineLimits:
    """The scheduler's limits, as vLLM is launched with them."""

    max_num_batched_tokens: int
    max_num_seqs: int
    kv_blocks: int  # blocks in the KV pool (num_gpu_blocks)
    block_size: int = 16


@dataclass(frozen=True)
class Requests:
    """Per request: prompt tokens, output tokens, and prompt tokens already cached (not computed)."""

    prompt: np.ndarray
    output: np.ndarray
    cached: np.ndarray


@dataclass(frozen=True)
class OpenLoop:
    arrival_ms: np.ndarray  # one arrival time per request, non-decreasing


@dataclass(frozen=True)
class ClosedLoop:
    clients: int


@dataclass(frozen=True)
class SimResult:
    ttft_ms: np.ndarray  # per measured request
    e2e_ms: np.ndarray
    itl_ms: np.ndarray  # gaps between two tokens of a request: each step's duration, and resumed tokens' gaps
    itl_weight: np.ndarray  # tokens that saw each gap (ITL is pooled per token, as vllm bench serve does)
    duration_ms: float  # first arrival to the last token
    output_tokens: int
    preemptions: int

    def ttft(self, q: float) -> float:
        return float(np.percentile(self.ttft_ms, q))

    def itl(self, q: float) -> float:
        """The q-th percentile of the pooled token gaps: the smallest gap at or below which q% of the
        tokens lie."""
        gaps, counts = np.asarray(self.itl_ms), np.asarray(self.itl_weight, dtype=float)
        rank = np.argsort(gaps, kind="stable")
        share = np.cumsum(counts[rank]) / counts.sum()
        return float(gaps[rank][min(np.searchsorted(share, q / 100.0), len(gaps) - 1)])


def gamma_arrivals(rng: np.random.Generator, rate_per_s: float, cv: float, n: int) -> np.ndarray:
    """Arrival times (ms) of a renewal process with gamma gaps of coefficient of variation `cv` (1: Poisson,
    0: evenly spaced)."""
    gap_ms = 1000.0 / rate_per_s
    if cv <= 0:
        return gap_ms * np.arange(1, n + 1, dtype=float)
    k = cv ** -2
    return np.cumsum(rng.gamma(k, gap_ms / k, size=n))


def lognormal_tokens(rng: np.random.Generator, mean: float, cv: float, n: int) -> np.ndarray:
    """Token counts of mean `mean` and coefficient of variation `cv` (0: all equal), at least 1 each."""
    if cv <= 0:
        return np.full(n, max(int(round(mean)), 1), dtype=np.int64)
    s2 = np.log(1.0 + cv * cv)
    drawn = np.exp(rng.normal(np.log(mean) - 0.5 * s2, np.sqrt(s2), size=n))
    return np.clip(np.rint(drawn), 1, None).astype(np.int64)


def run(limits: EngineLimits, requests: Requests, arrivals: OpenLoop | ClosedLoop, step_ms: StepTime,
        warmup: float = 0.1, jump: bool = True) -> SimResult:
    """Serve `requests` (in arrival order) and measure them. `warmup`: the first share of the requests is
    left out of TTFT and E2E, and ITL counts the steps between the first measured arrival and the last
    arrival (open loop); a closed loop measures every request and step, as a benchmark does. `jump`: run
    stretches of identical decode-only steps at once (the same schedule; False steps one at a time)."""
    if limits.max_num_seqs > limits.max_num_batched_tokens:
        raise ValueError("max_num_seqs over max_num_batched_tokens: a step could not carry every decode")
    n = len(requests.prompt)
    bs = limits.block_size
    outputs = [int(x) for x in requests.output]
    # tokens to compute before the request's next sample, and the tokens whose KV it holds
    todo = [int(p - c) for p, c in zip(requests.prompt, requests.cached, strict=True)]
    kv = [int(c) for c in requests.cached]
    prompt_len = [int(p) for p in requests.prompt]
    sampled = [0] * n
    arrival = [0.0] * n
    first_token = [0.0] * n
    finish = [0.0] * n
    paused_at = [0.0] * n  # when a preempted request last produced a token

    waiting: deque[int] = deque()
    running: dict[int, None] = {}  # admission order; decoding ones come before the one still prefilling
    prefilling: list[int] = []  # running requests whose prompt (or recompute) is not done, admission order
    # decoding requests, kept in aggregate: each gains one KV token per step, so with `since` the step count
    # when it began decoding and `kv` its tokens then, it needs a new block in the step that starts after s
    # steps when (kv - since + s) % bs == 0: `by_phase` counts them by (kv - since) % bs
    since = [0] * n
    by_phase = [0] * bs
    decoding = 0
    last_step: dict[int, list[int]] = {}  # step count at whose end decoding requests sample their last token
    last_steps: list[int] = []  # its keys, as a heap (an emptied key stays until its step has passed)

    closed = isinstance(arrivals, ClosedLoop)
    if isinstance(arrivals, ClosedLoop):
        sent = min(arrivals.clients, n)
        waiting.extend(range(sent))
        times: list[float] = []
    else:
        times = [float(x) for x in arrivals.arrival_ms]
        sent = 0
    # the free blocks in the order they are reused (vLLM's free block queue: a freed block joins the end, an
    # allocation takes the oldest): [owner, blocks] runs, owner -1 or a preempted request whose computed full
    # blocks are still cached there (prefix caching, on by default in V1) until an allocation evicts them
    free = limits.kv_blocks
    pool: deque[list[int]] = deque([[-1, free]])
    kept: dict[int, list[int]] = {}  # preempted request -> its run in the pool
    now, steps, done, preemptions = 0.0, 0, 0, 0
    step_end: list[float] = []
    step_len: list[float] = []
    step_tokens: list[int] = []
    resumed_gaps: list[tuple[float, float]] = []  # (time, gap) of tokens after a preemption

    def blocks(tokens: int) -> int:
        return -(-tokens // bs)

    def allocate(count: int) -> None:
        nonlocal free
        free -= count
        while count:
            head = pool[0]
            used = min(head[1], count)
            head[1] -= used
            count -= used
            if not head[1]:
                pool.popleft()
                if head[0] >= 0:
                    kept.pop(head[0], None)

    def release(owner: int, count: int) -> None:
        nonlocal free
        free += count
        if owner < 0 and pool and pool[-1][0] < 0:
            pool[-1][1] += count
        elif count:
            pool.append([owner, count])
            if owner >= 0:
                kept[owner] = pool[-1]

    def held_now(r: int) -> int:
        return kv[r] + (steps - since[r]) if r in running and r not in prefilling else kv[r]

    late: list[int] = []  # closed-loop requests sent at the last step's end: taken in after the next step

    def end_request(r: int) -> None:
        nonlocal done, sent
        finish[r] = now
        done += 1
        if closed and sent < n:  # that client sends its next request now
            arrival[sent] = now
            late.append(sent)
            sent += 1

    def preempt(r: int) -> None:
        nonlocal decoding, preemptions
        preemptions += 1
        held = held_now(r)
        # its blocks go back last one first: the part-filled last block, then its full blocks (cached)
        release(-1, blocks(held) - held // bs)
        release(r, held // bs)
        del running[r]
        if r in prefilling:
            prefilling.remove(r)
        else:
            decoding -= 1
            by_phase[(kv[r] - since[r]) % bs] -= 1
            last_step[since[r] + outputs[r] - sampled[r]].remove(r)
            sampled[r] += steps - since[r]  # the tokens its decode steps gave so far
            paused_at[r] = now
        kv[r] = 0
        todo[r] = prompt_len[r] + sampled[r]
        waiting.appendleft(r)

    def youngest() -> int:
        return next(reversed(running))

    while done < n:
        if late and not running and not waiting:  # an idle engine blocks on its input queue: taken at once
            waiting.extend(late)
            late.clear()
        if not closed:
            while sent < n and times[sent] <= now:
                arrival[sent] = times[sent]
                waiting.append(sent)
                sent += 1
            if not running and not waiting:
                now = times[sent]
                continue
        if (jump and decoding and not prefilling and not late
                and (not waiting or len(running) >= limits.max_num_seqs)):
            # steps in which nothing happens but decodes (no chunk, no admission, no arrival, no request
            # ends) are alike: take all but the last of them at once, KV blocks permitting
            while last_steps[0] <= steps:
                heapq.heappop(last_steps)
            quiet = last_steps[0] - steps - 1
            dt = float(step_ms(decoding, ()))
            if not closed and sent < n:
                quiet = min(quiet, int((times[sent] - now) / dt) - 1)
                while quiet > 0 and now + quiet * dt >= times[sent]:
                    quiet -= 1
            if quiet > 0:
                new_blocks = 0
                for phase, count in enumerate(by_phase):
                    if count:
                        j0 = (-(phase + steps)) % bs
                        new_blocks += count * (0 if j0 >= quiet else 1 + (quiet - 1 - j0) // bs)
                if new_blocks <= free:
                    allocate(new_blocks)
                    steps += quiet
                    now += quiet * dt
                    step_end.append(now)
                    step_len.append(dt)
                    step_tokens.append(decoding * quiet)
                    continue
        preempted = False

        # running decodes: one token each, a new block for those whose last block is full
        wanted = by_phase[(-steps) % bs] if decoding else 0
        if wanted <= free:
            allocate(wanted)
        else:  # short of blocks: go through them in admission order, preempting from the young end
            for r in [x for x in running if x not in prefilling]:
                if r not in running:
                    break  # preempted already, as were all after it
                if (kv[r] - since[r] + steps) % bs:
                    continue
                while free < 1:
                    victim = youngest()
                    preempt(victim)
                    preempted = True
                    if victim == r:
                        break
                if r in running:
                    allocate(1)
        budget = limits.max_num_batched_tokens - decoding
        chunks: list[tuple[int, int]] = []

        # running requests still prefilling continue their chunk
        for r in list(prefilling):
            if budget <= 0 or r not in running:
                break
            take = min(todo[r], budget)
            extra = blocks(kv[r] + take) - blocks(kv[r])
            while extra > free:
                victim = youngest()
                preempt(victim)
                preempted = True
                if victim == r:
                    break
            if r not in running:
                break
            allocate(extra)
            budget -= take
            chunks.append((r, take))

        # waiting requests, first come first served, none on a step that preempted
        while not preempted and waiting and budget > 0 and len(running) < limits.max_num_seqs:
            r = waiting[0]
            run_of_r = kept.get(r)
            # a preempted request finds its full blocks still cached (at least one token is computed anew)
            hit = min(run_of_r[1], (todo[r] - 1) // bs) if run_of_r else 0
            take = min(todo[r] - hit * bs, budget)
            need = blocks(kv[r] + hit * bs + take) - hit
            if need + hit > free:
                break
            waiting.popleft()
            if run_of_r:
                del kept[r]
                run_of_r[0] = -1  # what is left of it is never reused
                run_of_r[1] -= hit
                free -= hit
                kv[r] += hit * bs
                todo[r] -= hit * bs
            allocate(need)
            running[r] = None
            prefilling.append(r)
            budget -= take
            chunks.append((r, take))

        # the requests sent at the last step's end reached the engine while this step was being scheduled
        waiting.extend(late)
        late.clear()
        if not chunks and not decoding:
            if preempted:  # the step freed blocks but may admit nothing: schedule again
                continue
            raise RuntimeError("a request does not fit the empty KV pool")
        step = float(step_ms(decoding, chunks))
        now += step
        steps += 1
        if decoding:
            step_end.append(now)
            step_len.append(step)
            step_tokens.append(decoding)

        for r in last_step.pop(steps, ()):
            decoding -= 1
            by_phase[(kv[r] - since[r]) % bs] -= 1
            release(-1, blocks(kv[r] + steps - since[r]))
            del running[r]
            sampled[r] = outputs[r]
            end_request(r)
        for r, take in chunks:
            todo[r] -= take
            kv[r] += take
            if todo[r]:
                continue
            prefilling.remove(r)
            sampled[r] += 1
            if sampled[r] == 1:
                first_token[r] = now
            else:
                resumed_gaps.append((now, now - paused_at[r]))
            if sampled[r] >= outputs[r]:
                release(-1, blocks(kv[r]))
                del running[r]
                end_request(r)
                continue
            since[r] = steps
            by_phase[(kv[r] - steps) % bs] += 1
            decoding += 1
            key = steps + outputs[r] - sampled[r]
            if key not in last_step:
                last_step[key] = []
                heapq.heappush(last_steps, key)
            last_step[key].append(r)

    first = int(warmup * n) if not closed else 0
    ends = np.array(step_end + [t for t, _ in resumed_gaps])
    gaps = np.array(step_len + [g for _, g in resumed_gaps])
    weights = np.array(step_tokens + [1] * len(resumed_gaps), dtype=float)
    if not closed and first > 0:
        inside = (ends > arrival[first]) & (ends <= arrival[n - 1])
        ends, gaps, weights = ends[inside], gaps[inside], weights[inside]
    arrival_a = np.array(arrival)
    return SimResult(
        ttft_ms=(np.array(first_token) - arrival_a)[first:], e2e_ms=(np.array(finish) - arrival_a)[first:],
        itl_ms=gaps, itl_weight=weights, duration_ms=max(finish) - min(arrival),
        output_tokens=int(sum(outputs)), preemptions=preemptions,
    )


# ---- The planner's step physics, for step TIMES only (see the module docstring for the boundary) ----------


def planner_step_time(d, requests: Requests, context: float, max_decodes: int) -> StepTime:
    """Step times from planner.physics.latency: the decode step of the step's decode tokens at `context`
    cached tokens each, plus each prompt chunk's share of its prompt's prefill work (the prompt's extra
    iteration time, spread evenly over its computed tokens; a recompute after preemption is charged at the
    same rate)."""
    from planner.physics.latency import decode_step, prefill_chunk_work_ms

    prompt = np.asarray(requests.prompt, dtype=float)
    cached = np.asarray(requests.cached, dtype=float)
    work = np.asarray(prefill_chunk_work_ms(d, prompt, cached), dtype=float)
    rate = (work / np.maximum(prompt - cached, 1.0)).tolist()
    decode_steps = decode_step(d, np.arange(max_decodes + 1, dtype=float), context)
    decode = [float(x) for x in np.atleast_1d(decode_steps.total_ms)]

    # A step is a forward pass, and no pass is shorter than its physics (planner.physics.roofline): the
    # compute of everything it carries at the dense peak, and the weights its tokens touch read once (for an
    # MoE model, every expert some token routes to). These are step times, like the figures above.
    from planner.physics.roofline import compute_floor_ms, prefill_compute_floor_ms, weights_read_ms

    decode_compute = np.atleast_1d(compute_floor_ms(d, decode_steps.work)).tolist()
    chunk_compute = (np.asarray(prefill_compute_floor_ms(d, prompt, cached), dtype=float)
                     / np.maximum(prompt - cached, 1.0)).tolist()
    reads: dict[int, float] = {}

    def step_ms(decodes: int, chunks: Sequence[tuple[int, int]]) -> float:
        total = decode[decodes]
        compute = decode_compute[decodes]
        carried = decodes
        for r, tokens in chunks:
            total += tokens * rate[r]
            compute += tokens * chunk_compute[r]
            carried += tokens
        if carried not in reads:
            reads[carried] = float(weights_read_ms(d, float(carried)))
        return max(total, compute, reads[carried])

    return step_ms


def kv_blocks_of(d, context_len: int, block_size: int = 16) -> int:
    """The deployment's KV pool in blocks, as the planner's memory plan gives it (vLLM's num_gpu_blocks;
    the napkin budget over the KV bytes of a token otherwise)."""
    from planner.physics.memory import plan_memory

    mem = plan_memory(d, context_len)
    if mem.engine is not None:
        return int(mem.engine.num_gpu_blocks)
    tokens = mem.kv_budget_gb_per_gpu * 1e9 / max(mem.kv_bytes_per_token_per_gpu, 1e-12)
    return int(tokens // block_size)


def simulate(d, w, rate_per_s: float, n_requests: int, seed: int, warmup: float = 0.1,
             max_num_seqs: int | None = None, kv_blocks: int | None = None) -> SimResult:
    """An open loop at `rate_per_s` of a planner Workload `w`'s traffic (lognormal lengths of its CVs,
    gamma gaps of its arrival CV) on deployment `d`, the engine launched as the plan launches it:
    `max_num_seqs` defaults to w.max_running (planner/contract/launch.py passes the plan's running cap as
    --max-num-seqs), `kv_blocks` to the memory plan's pool."""
    rng = np.random.default_rng(seed)
    times = gamma_arrivals(rng, rate_per_s, w.arrival_cv, n_requests)
    return _serve(d, w, _workload_requests(rng, w, n_requests), OpenLoop(times), warmup, max_num_seqs,
                  kv_blocks)


def simulate_closed(d, w, clients: int, n_requests: int, seed: int = 0, max_num_seqs: int | None = None,
                    kv_blocks: int | None = None) -> SimResult:
    """A closed loop of `clients` clients sending `n_requests` requests of `w`'s lengths in all."""
    rng = np.random.default_rng(seed)
    return _serve(d, w, _workload_requests(rng, w, n_requests), ClosedLoop(clients), 0.0, max_num_seqs,
                  kv_blocks)


def _serve(d, w, reqs: Requests, arrivals: OpenLoop | ClosedLoop, warmup: float, max_num_seqs: int | None,
           kv_blocks: int | None) -> SimResult:
    seqs = int(w.max_running if max_num_seqs is None else max_num_seqs)
    if kv_blocks is None:
        kv_blocks = kv_blocks_of(d, int(w.prompt_len + w.output_len))
    # a request longer than the pool could never run (vLLM refuses it at max_model_len): keep one that fits
    longest = int((reqs.prompt + reqs.output).max())
    limits = EngineLimits(int(w.max_num_batched_tokens), seqs, max(int(kv_blocks), -(-longest // 16)))
    context = float(w.context) if w.context is not None else w.prompt_len + w.output_len / 2
    return run(limits, reqs, arrivals, planner_step_time(d, reqs, context, seqs), warmup)


def _workload_requests(rng: np.random.Generator, w, n: int) -> Requests:
    prompt = lognormal_tokens(rng, w.prompt_len, w.prompt_len_cv, n)
    output = lognormal_tokens(rng, w.output_len, w.output_len_cv, n)
    cached = np.minimum(np.rint(prompt * w.prefix_cache_hit).astype(np.int64), prompt - 1)
    return Requests(prompt, output, cached)
