"""The closed-loop benchmark client (planner.serving.benchmark_client): the scheduler's waves worked by
hand from the step physics, and the laws every closed-loop run obeys (Little's law, the ideal floor)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.physics.latency import decode_step, prefill_chunk_work_ms
from planner.scenario.scenario import SchedulerSettings, parse_scenario, resolve
from planner.serving.benchmark_client import BenchmarkClient, run_benchmark
from planner.serving.replica import Workload

SCENARIO = {"model": "llama-3.1-8b", "gpu": "h100-sxm", "prompt_len": 100, "output_len": 20}


def _deployment(**changes):
    return resolve(parse_scenario({**SCENARIO, **changes}))


def _d_ms(d, batch: int, context: float) -> float:
    return float(decode_step(d, float(batch), context).total_ms)


def _work_per_token_ms(d, prompt: int) -> float:
    return float(prefill_chunk_work_ms(d, float(prompt))) / prompt


def _llama8b_prefill_pass_compute_ms(prompts: int, prompt: int) -> float:
    """A pass prefilling `prompts` prompts of `prompt` tokens at the H100 SXM's dense bf16 peak (989.4
    TFLOP/s, datasheet), from Llama-3.1-8B's config.json (hidden 4096, 32 layers, 32 query and 8 KV heads of
    128, FFN 14336, vocab 128256): 218.1e6 matmul weights a layer (q, o 4096^2; k, v 4096 x 1024; 3 x 4096 x
    14336), 6.979e9 over 32 layers, 2 FLOPs each per token; the LM head (4096 x 128256) once per prompt; and
    attention 4 x 32 heads x 128 FLOPs per causal (query, key) pair per layer, p (p + 1) / 2 pairs."""
    layer = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336
    gemm = 2.0 * prompts * prompt * 32 * layer + prompts * 2.0 * 4096 * 128256
    attention = prompts * 32 * prompt * (prompt + 1) / 2 * 4 * 32 * 128
    return (gemm + attention) / 989.4e12 * 1e3


def test_fixed_lengths_run_in_lock_step_waves():
    """Source: hand: Fixed lengths, a budget that holds every prompt: each wave is one
    iteration prefilling all C prompts (empty step D(0) + C x the prompt's work, but never less than the
    pass's compute at peak: 8 x 100 tokens of Llama-3.1-8B are 11.20 TFLOP, 11.32 ms on an H100, against
    7.2 ms of engine figures, issue 32), then O - 1 decode steps of the whole batch D(C); all C finish
    together and the next wave starts. So every request has TTFT = max(D(0) + C W, the pass's compute),
    TPOT = ITL = D(C), E2E = TTFT + (O - 1) D(C), and the run serves C requests per E2E."""
    d = _deployment()
    clients, prompt, output = 8, 100, 20
    context = prompt + output / 2
    w = Workload(
        prompt_len=prompt, output_len=output, max_running=64, max_num_batched_tokens=8192, context=context
    )
    run = run_benchmark(d, w, BenchmarkClient(clients, num_prompts=5 * clients))
    ttft = max(_d_ms(d, 0, context) + clients * prompt * _work_per_token_ms(d, prompt),
               _llama8b_prefill_pass_compute_ms(clients, prompt))
    assert ttft > 11.0  # the floor binds here
    step = _d_ms(d, clients, context)
    e2e = ttft + (output - 1) * step
    assert run.ttft_ms.mean == pytest.approx(ttft, rel=1e-9)
    assert run.ttft_ms.p99 == pytest.approx(ttft, rel=1e-9)
    assert run.tpot_ms.mean == pytest.approx(step, rel=1e-9)
    assert run.itl_ms.p50 == pytest.approx(step, rel=1e-9)
    assert run.e2e_ms.p50 == pytest.approx(e2e, rel=1e-9)
    assert run.request_throughput == pytest.approx(clients / e2e * 1000.0, rel=1e-9)
    assert run.output_throughput == pytest.approx(clients * output / e2e * 1000.0, rel=1e-9)


def test_chunked_prefill_spreads_a_wave_over_iterations():
    """Source: hand: vLLM V1's chunked prefill. Four 100-token prompts, a 250-token budget:
    iteration 1 carries prompts 0 and 1 whole and 50 tokens of prompt 2 (D(0) + 250 W); iteration 2 the
    two decodes, the rest of prompt 2 and prompt 3 (D(2) + 150 W). So two requests see TTFT = it1 and two
    it1 + it2; the decoding sequences then finish two iterations apart."""
    d = _deployment()
    prompt, output = 100, 20
    context = 110.0
    w = Workload(
        prompt_len=prompt, output_len=output, max_running=64, max_num_batched_tokens=250, context=context
    )
    run = run_benchmark(d, w, BenchmarkClient(4, num_prompts=4))
    per_token = _work_per_token_ms(d, prompt)
    it1 = _d_ms(d, 0, context) + 250 * per_token
    it2 = _d_ms(d, 2, context) + 150 * per_token
    assert run.ttft_ms.mean == pytest.approx((2 * it1 + 2 * (it1 + it2)) / 4, rel=1e-9)
    assert run.ttft_ms.p50 == pytest.approx((it1 + (it1 + it2)) / 2, rel=1e-9)  # numpy's midpoint of 2 and 2


def test_more_clients_than_sequences_queue_for_a_slot():
    """Source: hand: With room for 2 running sequences and 4 clients, the second pair waits a
    whole request of the first pair: its TTFT is the first pair's E2E plus its own prefill."""
    d = _deployment()
    prompt, output, context = 100, 20, 110.0
    w = Workload(
        prompt_len=prompt, output_len=output, max_running=2, max_num_batched_tokens=8192, context=context
    )
    run = run_benchmark(d, w, BenchmarkClient(4, num_prompts=4))
    first = _d_ms(d, 0, context) + 2 * prompt * _work_per_token_ms(d, prompt)
    e2e_first = first + (output - 1) * _d_ms(d, 2, context)
    assert run.ttft_ms.mean == pytest.approx((2 * first + 2 * (e2e_first + first)) / 4, rel=1e-9)


@settings(max_examples=25, deadline=None)
@given(clients=st.integers(1, 96), prompt=st.integers(16, 4000), output=st.integers(2, 600),
       spread=st.sampled_from([(1.0, 1.0), (0.8, 1.0), (0.5, 1.5)]))
def test_a_closed_loop_obeys_littles_law(clients, prompt, output, spread):
    """Source: invariant: Little's law. Over a run, the mean number of requests in flight is the request
    throughput times the mean E2E. Clients keep C in flight except while the run drains (the last wave), so
    the product lies between C x (waves - 1) / waves and C."""
    d = _deployment(prompt_len=prompt, output_len=output)
    w = Workload(prompt_len=prompt, output_len=output, max_running=256, max_num_batched_tokens=8192)
    run = run_benchmark(d, w, BenchmarkClient(clients, length_low=spread[0], length_high=spread[1]))
    in_flight = run.request_throughput / 1000.0 * run.e2e_ms.mean
    waves = run.requests / clients
    assert clients * (waves - 1.5) / waves <= in_flight <= clients * (1 + 1e-9)


@settings(max_examples=20, deadline=None)
@given(clients=st.integers(1, 128), prompt=st.integers(16, 4000), output=st.integers(2, 600))
def test_tpot_never_beats_the_decode_step_of_one(clients, prompt, output):
    """Source: invariant: a token can never come faster than a decode step of a batch of one at the
    shortest context, and TTFT never beats the prompt's own prefill."""
    d = _deployment(prompt_len=prompt, output_len=output)
    w = Workload(prompt_len=prompt, output_len=output, max_running=256, max_num_batched_tokens=8192)
    run = run_benchmark(d, w, BenchmarkClient(clients))
    floor_step = _d_ms(d, 1, w.prompt_len + w.output_len / 2)
    own_prefill = _d_ms(d, 0, 1.0) + prompt * _work_per_token_ms(d, prompt)
    assert run.tpot_ms.mean >= floor_step * (1 - 1e-9)
    assert run.ttft_ms.p50 >= own_prefill * (1 - 1e-9)
    assert math.isfinite(run.output_throughput) and run.output_throughput > 0


def _staggered_run(scheduler: SchedulerSettings, clients: int = 6):
    """Clients out of step (outputs uniform in [0.5 L, 1.5 L]): requests arrive while others decode."""
    d = _deployment(prompt_len=400, output_len=120)
    w = Workload(prompt_len=400, output_len=120, max_running=64, max_num_batched_tokens=8192,
                 scheduler=scheduler)
    return run_benchmark(d, w, BenchmarkClient(clients, num_prompts=60, length_low=0.5, length_high=1.5))


def test_a_scheduler_that_holds_nothing_is_the_default():
    """Source: hand: SchedulerSettings' defaults are every engine's own (SGLang polls for requests every
    iteration, TensorRT-LLM holds no prompt): the run is the one without them. A hold released by one waiting
    prompt, or by fewer waiting tokens than one prompt has, never holds either."""
    base = _staggered_run(SchedulerSettings())
    for scheduler in (SchedulerSettings(recv_interval_steps=1, prefill_wait_steps=0),
                      SchedulerSettings(prefill_wait_steps=50, prefill_wait_prompts=1),
                      SchedulerSettings(prefill_wait_steps=50, prefill_wait_tokens=100)):
        run = _staggered_run(scheduler)
        assert run.ttft_ms == base.ttft_ms and run.tpot_ms == base.tpot_ms


def test_lock_step_waves_never_wait_for_the_scheduler_poll():
    """Source: hand: with fixed lengths the whole wave ends in one iteration and the next arrives at an idle
    engine, whose loop spins through SGLang's recv interval at once (an idle iteration counts like a decode
    and takes no time): the run is the same at any recv_interval_steps."""
    d = _deployment()
    runs = [run_benchmark(d, Workload(prompt_len=100, output_len=20, max_running=64,
                                      scheduler=SchedulerSettings(recv_interval_steps=k)),
                          BenchmarkClient(8, num_prompts=40)) for k in (1, 30)]
    assert runs[0].ttft_ms == runs[1].ttft_ms and runs[0].e2e_ms == runs[1].e2e_ms


@pytest.mark.parametrize("recv_every", [4, 10, 30])
def test_a_sparse_scheduler_poll_delays_the_first_token(recv_every):
    """Source: docs: SGLang's SchedulerRecvSkipper (python/sglang/srt/managers/scheduler_recv_skipper.py):
    with --scheduler-recv-interval k the scheduler takes in new requests once every k decode iterations, so a
    request sent while others decode waits on average about (k - 1) / 2 decode steps more before its prefill.
    The median TTFT grows by at least a quarter of that and at most k decode steps of the largest batch."""
    base = _staggered_run(SchedulerSettings())
    run = _staggered_run(SchedulerSettings(recv_interval_steps=recv_every))
    d = _deployment(prompt_len=400, output_len=120)
    step_ms = _d_ms(d, 6, 460.0)
    extra = run.ttft_ms.mean - base.ttft_ms.mean
    assert (recv_every - 1) / 2 * _d_ms(d, 1, 400.0) / 4 <= extra <= recv_every * step_ms


def test_a_prefill_hold_waits_its_timeout_or_its_batch():
    """Source: docs: TensorRT-LLM's PyExecutor._waiting_requests and _balance_adp_requests: while sequences
    decode, waiting prompts are held until enough tokens or prompts wait, or `prefill_wait_steps` iterations
    pass. A hold of 20 iterations that nothing else releases raises the mean TTFT by up to 20 decode steps;
    one released once two prompts wait holds less."""
    base = _staggered_run(SchedulerSettings())
    timeout = _staggered_run(SchedulerSettings(prefill_wait_steps=20))
    batched = _staggered_run(SchedulerSettings(prefill_wait_steps=20, prefill_wait_prompts=2))
    d = _deployment(prompt_len=400, output_len=120)
    assert base.ttft_ms.mean < batched.ttft_ms.mean < timeout.ttft_ms.mean
    assert timeout.ttft_ms.mean - base.ttft_ms.mean <= 20 * _d_ms(d, 6, 460.0)


# Issue 30: what a prompt waits for under each engine's loop (planner.serving.scheduler_wait).


def _three_requests(policy, budget: int):
    """Two clients, three 100-token prompts of 3 output tokens, a `budget`-token iteration."""
    from planner.serving.scheduler_wait import EngineScheduling

    d = _deployment()
    w = Workload(prompt_len=100, output_len=3, max_running=64, max_num_batched_tokens=budget, context=101.5)
    return d, run_benchmark(d, w, BenchmarkClient(2, num_prompts=3), EngineScheduling(*policy))


@pytest.mark.parametrize("missed", [0, 1, 2])
def test_a_request_sent_to_a_busy_engine_misses_the_iterations_in_flight(missed):
    """Source: docs: vLLM V1 EngineCore.step (schedule -> execute -> update; new requests only between
    steps), SGLang's event_loop_overlap and TensorRT-LLM's _executor_loop_overlap (the next batch is formed
    before the current one's results return): a request sent while the engine runs misses the iteration in
    flight (1), and under an overlap scheduler the one already formed (2). Worked by hand, budget 100:
    it1 = D(0) + 100 W (prompt 0), it2 = D(1) + 99 W, it3 = D(1) + 1 W (prompt 1); request 0 ends with it3
    and its client sends request 2 while request 1 decodes. missed 0: it4 = D(1) + 99 W, it5 = D(1) + 1 W,
    TTFT_2 = 2 D(1) + 100 W. missed 1: it4 = D(1) alone, it5 = D(1) + 99 W, it6 = D(0) + 1 W (request 1 has
    ended). missed 2: two lone decodes, then D(0) + 100 W; the same sum."""
    d, run = _three_requests((missed, False, True), 100)
    ctx, w_tok = 101.5, _work_per_token_ms(d, 100)
    d0, d1 = _d_ms(d, 0, ctx), _d_ms(d, 1, ctx)
    it1 = d0 + 100 * w_tok
    ttft_1 = it1 + (d1 + 99 * w_tok) + (d1 + 1 * w_tok)
    ttft_2 = 2 * d1 + 100 * w_tok + (d0 if missed else 0.0)
    assert run.ttft_ms.mean == pytest.approx((it1 + ttft_1 + ttft_2) / 3, rel=1e-9)


def test_sglang_runs_prompts_in_prefill_only_iterations():
    """Source: docs: SGLang Scheduler.get_next_batch_to_run ("Run prefill first if possible"; a prefill
    batch carries no decodes without --enable-mixed-chunk) and its --chunked-prefill-size budget, which the
    running decodes do not share. Budget 150, by hand: it1 = D(0) + 150 W (prompt 0, 50 tokens of prompt 1),
    it2 = D(0) + 50 W while request 0 waits, then two decode steps D(2); both end together, so request 2
    reaches an idle engine: D(0) + 100 W, then D(1) steps. TPOT: request 0 (it2 + 2 D(2)) / 2, request 1
    D(2), request 2 D(1)."""
    d, run = _three_requests((0, True, True), 150)
    ctx, w_tok = 101.5, _work_per_token_ms(d, 100)
    d0, d1, d2 = _d_ms(d, 0, ctx), _d_ms(d, 1, ctx), _d_ms(d, 2, ctx)
    it1, it2 = d0 + 150 * w_tok, d0 + 50 * w_tok
    assert run.ttft_ms.mean == pytest.approx((it1 + (it1 + it2) + (d0 + 100 * w_tok)) / 3, rel=1e-9)
    assert run.tpot_ms.mean == pytest.approx(((it2 + 2 * d2) / 2 + d2 + d1) / 3, rel=1e-9)


@pytest.mark.parametrize("chunked", [True, False])
def test_trtllm_takes_a_prompt_only_whole_into_the_budget(chunked):
    """Source: docs: TensorRT-LLM's micro-batch scheduler with context chunking off (its default) schedules
    a context request only when its whole prompt fits the rest of max_num_tokens; vLLM chunks it. Budget
    150, by hand: chunked, it1 = D(0) + 150 W (prompt 0, 50 tokens of prompt 1), it2 = D(1) + 50 W; whole,
    it1 = D(0) + 100 W and prompt 1 waits for it2 = D(1) + 100 W. Then a decode step D(2) ends request 0,
    and request 2 rides it4 = D(1) + 100 W beside request 1's last decode."""
    d, run = _three_requests((0, False, chunked), 150)
    ctx, w_tok = 101.5, _work_per_token_ms(d, 100)
    d0, d1 = _d_ms(d, 0, ctx), _d_ms(d, 1, ctx)
    it1, it2 = (d0 + 150 * w_tok, d1 + 50 * w_tok) if chunked else (d0 + 100 * w_tok, d1 + 100 * w_tok)
    assert run.ttft_ms.mean == pytest.approx((it1 + (it1 + it2) + (d1 + 100 * w_tok)) / 3, rel=1e-9)


def test_async_scheduling_adds_an_iteration_to_a_busy_engines_wait():
    """Source: docs: vLLM's `--async-scheduling` forms the next batch before the current one's output is
    processed (vllm/v1/engine/core.py `step_with_batch_queue`, a batch queue of 2), so a request reaching a
    busy engine misses one iteration more (planner.serving.scheduler_wait.launched_scheduling). With clients
    out of step every request but the first wave's finds the engine decoding: its TTFT grows by about one
    decode step (between 0.5 and 2 of the run's median ITL at the median, the wait shared with the other
    prompts of its iteration), and TPOT stays within 5% (only the prompts' place in the iterations moves)."""
    off = _staggered_run(SchedulerSettings())
    on = _staggered_run(SchedulerSettings(async_scheduling=True))
    added = on.ttft_ms.p50 - off.ttft_ms.p50
    assert 0.5 * off.itl_ms.p50 <= added <= 2.0 * off.itl_ms.p50
    assert on.tpot_ms.p50 == pytest.approx(off.tpot_ms.p50, rel=0.05)


def test_attention_dp_ranks_prefill_their_prompts_side_by_side():
    """Source: docs: TensorRT-LLM's attention DP (each rank schedules its own context requests within its own
    max_num_tokens; the MoE layers serve every rank's tokens; its ADP balance blog takes an iteration's time
    as its busiest rank's) and planner.physics.latency.attention_dp_share_ms. DeepSeek-R1 on 8 H200s with
    attention DP, 8 clients of 1,024-token prompts, 1,024 tokens a rank, by hand: the idle engine takes the
    first prompt alone, D(0) + W; the other 7 ride the next iteration together, D(1) plus at least the
    busiest rank's prompt alone (W) and at least their 7 shares (the pass's floor may add), and under half
    of the 7 prompts one after another."""
    from planner.physics.latency import attention_dp_share_ms

    d = resolve(parse_scenario({"model": "deepseek-r1", "gpu": "h200", "tp": 1, "ep": 8, "weights": "fp8",
                                "engine": "trt-llm", "prompt_len": 1024, "output_len": 3}))
    w = Workload(prompt_len=1024, output_len=3, max_running=64, max_num_batched_tokens=1024, context=1025.5)
    run = run_benchmark(d, w, BenchmarkClient(8, num_prompts=8))
    d0, d1, alone = _d_ms(d, 0, 1025.5), _d_ms(d, 1, 1025.5), float(prefill_chunk_work_ms(d, 1024.0))
    shares = 7 * float(attention_dp_share_ms(d, 1024.0))
    first = d0 + alone
    second = run.ttft_ms.p99 - first
    assert run.ttft_ms.p50 == pytest.approx(run.ttft_ms.p99, rel=1e-9)  # the 7 share one iteration
    assert run.ttft_ms.mean == pytest.approx((first + 7 * run.ttft_ms.p99) / 8, rel=1e-9)
    assert second >= d1 + max(alone, shares) - 1e-9
    assert second < 0.5 * (d1 + 7 * alone)
