"""What a request's first token waits for besides its own prompt: each serving engine's scheduling policy
(issue 30), as its scheduler's source code runs it. planner.serving.benchmark_client follows it.

Three terms, each read from the engine's own loop:

  * **The step running when a request arrives.** An engine's busy loop takes in new requests only between
    iterations, and an iteration that has started is never widened. With an overlap (async) scheduler the
    next iteration is also formed before the current one's results are processed, so a request that arrives
    while the engine runs misses the iteration in flight *and* the one already formed. In a closed loop
    this is every request but the first wave's: a client sends its next request when its last token
    arrives, and by then the engine has moved on to its next iteration (the other clients' decodes).
      - vLLM V1 `EngineCore.step` (vllm/v1/engine/core.py): schedule -> execute -> `future.result()` ->
        `update_from_output`; the busy loop drains the input queue only between steps. With
        `--async-scheduling` (`step_with_batch_queue`, a batch queue of 2: "fulfilling the batch queue has a
        higher priority than getting model outputs") one batch more is formed ahead. Off by default in
        vLLM 0.10-0.13: 1 missed iteration; on by default from 0.14, and set by InferenceX's vLLM launch
        scripts (`load.scheduler.async_scheduling`, `launched_scheduling`): 2.
      - SGLang `Scheduler.event_loop_overlap` (python/sglang/srt/managers/scheduler.py): `recv_requests` ->
        `get_next_batch_to_run` -> `run_batch` -> the *previous* batch's `process_batch_result`; the overlap
        scheduler is on by default (`--disable-overlap-schedule` off): 2 missed iterations.
      - TensorRT-LLM PyTorch backend `PyExecutor._executor_loop_overlap`
        (tensorrt_llm/_torch/pyexecutor/py_executor.py): new requests are fetched at the top of each
        iteration, the batch is scheduled and launched, then the previous batch's responses are handled;
        `disable_overlap_scheduler` defaults to false: 2 missed iterations.
    An idle engine (nothing running, nothing waiting) takes a request at once. The benchmark client
    composes the two parts with SGLang's polling (`--scheduler-recv-interval`): a request is received at
    the first poll after the iteration in flight, and an overlap scheduler runs it one iteration later.
  * **Who shares an iteration with the prompt.** vLLM V1's scheduler (vllm/v1/core/sched/scheduler.py,
    "First, schedule the RUNNING requests", then the WAITING ones) gives the running decodes their token
    first and fills the rest of `max_num_batched_tokens` with prompt chunks (decode-first, mixed). SGLang's
    `get_next_batch_to_run` builds a prefill batch from the waiting queue first ("Run prefill first if
    possible") and runs decodes only when no prompt waits; the prefill batch holds no decodes (mixed
    chunks only with `--enable-mixed-chunk`, off by default) and up to `--chunked-prefill-size` prompt
    tokens (prefill-first, separate). TensorRT-LLM's micro-batch scheduler fills `max_num_tokens` with the
    generation requests and whole context requests (context chunking, `enable_chunked_prefill`, is off by
    default: a prompt that does not fit the rest of the budget waits for the next iteration).
  * **Admission against the KV pool** (`admitted_sequences`). vLLM V1 allocates a request's KV blocks as
    its tokens are written (`KVCacheManager.allocate_slots` for the tokens scheduled this step; a running
    request that finds no free block preempts the newest one, vllm/v1/core/sched/scheduler.py), and SGLang
    takes a prompt while its tokens and a decaying share of the running requests' remaining output fit the
    token pool (`PrefillAdder`, `new_token_ratio` from 0.7 down to 0.1), retracting decodes when the pool runs
    out: in a closed loop the pool holds each sequence at its current length, prompt plus half its output on
    average. TensorRT-LLM's default capacity scheduler (`CapacitySchedulerPolicy.GUARANTEED_NO_EVICT`,
    tensorrt_llm/llmapi/llm_args.py `SchedulerConfig`) admits a request only with blocks for its prompt and
    all of its `max_tokens` reserved. Concurrency beyond what the pool admits waits in the queue, in TTFT.
  * **The frontend** (HTTP, tokenization, detokenization) is the profile's per-request serving cost
    (`EngineEfficiency.ttft_overhead_ms`), fitted on the runs; it no longer has to stand in for the waits
    above.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from planner.core.deployment import Deployment
from planner.engines.rules import max_batch_for_context
from planner.hardware.parallelism import sharding
from planner.physics.memory import MemoryPlan
from planner.scenario.scenario import SchedulerSettings


@dataclass(frozen=True)
class EngineScheduling:
    """How one engine's loop admits a prompt and what rides its iteration."""

    missed_iterations: int  # iterations a request arriving at a busy engine misses (1 + overlap)
    prefill_first: bool  # prompts run in their own iterations, decodes paused (SGLang)
    chunked_prefill: bool  # a prompt may be split across iterations (vLLM, SGLang); else it waits whole
    kv_on_demand: bool = True  # KV allocated as tokens are written (vLLM, SGLang); else reserved to the end


# The planner's default: vLLM V1's loop without async scheduling (the replica model's own assumption).
VLLM = EngineScheduling(missed_iterations=1, prefill_first=False, chunked_prefill=True)
SGLANG = EngineScheduling(missed_iterations=2, prefill_first=True, chunked_prefill=True)
TRT_LLM = EngineScheduling(missed_iterations=2, prefill_first=False, chunked_prefill=False,
                           kv_on_demand=False)
# No wait and vLLM's mixed iterations: the graph floor and any engine without a policy of its own.
NONE = EngineScheduling(missed_iterations=0, prefill_first=False, chunked_prefill=True)

_POLICIES = {"vllm": VLLM, "sglang": SGLANG, "trt-llm": TRT_LLM}


def engine_scheduling(engine: str) -> EngineScheduling:
    """The scheduling policy of a serving engine by its planner name; NONE for the graph floor."""
    return _POLICIES.get(engine, NONE)


def launched_scheduling(engine: str, settings: SchedulerSettings) -> EngineScheduling:
    """The engine's policy as launched: vLLM's `--async-scheduling` (`step_with_batch_queue`, a batch queue
    of 2) forms one iteration ahead, as SGLang's and TensorRT-LLM's overlap schedulers do by default."""
    policy = engine_scheduling(engine)
    if settings.async_scheduling and policy is not NONE:
        return replace(policy, missed_iterations=max(policy.missed_iterations, 2))
    return policy


def prompts_until_every_rank_has_one(ranks: int) -> int:
    """Prompts that arrive, on average, before each of `ranks` attention-DP ranks holds one. TensorRT-LLM's
    attention-DP balance (`attention_dp_config.enable_balance`) holds a rank's context requests until every
    rank has one (or `timeout_iters` pass), and a new request goes to the rank with the fewest requests (the
    one a completion just freed, in a closed loop), so arrivals land on ranks as completions do: at random.
    Covering `ranks` ranks then takes ranks x (1 + 1/2 + ... + 1/ranks) arrivals (the coupon collector):
    22 for 8 ranks, not 8."""
    return max(round(ranks * sum(1.0 / k for k in range(1, ranks + 1))), 1)


def admitted_sequences(d: Deployment, mem: MemoryPlan, prompt_len: float, output_len: float,
                       length_scale: float = 1.0) -> int:
    """Sequences the engine's KV pool admits at once in a closed loop of prompts of `prompt_len` and outputs
    of `output_len` tokens (each drawn at `length_scale` of them on average): at their current length, prompt
    plus half the output, where the engine allocates as tokens are written; at prompt plus all the output
    where it reserves to the end. Never fewer than the plan's sequences at full context (`mem.max_batch`)."""
    policy = engine_scheduling(d.engine)
    if mem.engine is None or mem.max_batch < 1:
        return mem.max_batch
    held = length_scale * (prompt_len + (output_len / 2 if policy.kv_on_demand else output_len))
    admitted = max_batch_for_context(mem.engine, max(math.ceil(held), 1)) * sharding(d).attention_dp
    return max(admitted, mem.max_batch)
