"""vLLM's start-up memory rules (planner.engines.vllm) against public start-up logs and by hand.

Reference set and method: data/reference/vllm_startup_logs.csv/.md. Nothing is fitted per case.
"""

from __future__ import annotations

import pytest

from planner import plan
from planner.engines.vllm_kv_cache import format_log_lines
from tools.vllm_log_accuracy import BUDGET_ABS_GIB, BUDGET_REL, TOKENS_REL, evaluate_row, load_rows

ROWS = load_rows()
HELD_OUT = [r for r in ROWS if r["split"] == "held-out"]


def _row_id(row):
    return row["id"]


def _xfail_expected_miss(request, row, misses: dict[str, str] | None = None) -> None:
    """Rows recorded as outside the target (a known gap of vllm_startup_logs.md, or a named miss) are
    strict expected failures: the check still runs, and a row that comes within its target fails the
    suite until its record is updated."""
    reason = None
    if row["known_gap"]:
        reason = f"known gap, recorded in vllm_startup_logs.md: {row['known_gap']}"
    elif misses and row["id"] in misses:
        reason = misses[row["id"]]
    if reason:
        request.node.add_marker(pytest.mark.xfail(reason=reason, strict=True))


@pytest.mark.parametrize("row", [r for r in HELD_OUT if r["logged_kv_gib"] and r["utilization"]
                                 and r["gpu"] != "unknown" and not r["budget_rank"]], ids=_row_id)
def test_held_out_kv_budget_within_3_percent_or_075_gib(request, row):
    """Source: published: public vLLM start-up logs, data/reference/vllm_startup_logs.csv (held-out part)."""
    _xfail_expected_miss(request, row)
    r = evaluate_row(row)
    tolerance = max(BUDGET_REL * abs(r.budget_logged_gib), BUDGET_ABS_GIB)
    assert r.budget_model_gib == pytest.approx(r.budget_logged_gib, abs=tolerance)


# held-out rows whose budget is within its target but whose token count misses 3%: a small pool makes
# the token target the stricter one (stated in data/reference/vllm_startup_logs.md)
# (Qwen2.5-72B and Kimi-Dev-72B at TP 2 missed by 3.2% on their 3 GiB
# pools until the allocator's rounding of the
# weights was modelled)
TOKEN_MISSES = {
    "v1-qwen3-235b-fp8-h100-tp4": "budget 0.52 GiB over on an 8 GiB pool (within its 0.75 GiB target) and "
    "the token "
    "line 0.09 GiB below the budget line it was printed with (another rank's): +7.6%",
}


@pytest.mark.parametrize("row", [r for r in HELD_OUT if (r["logged_kv_tokens"] or r["logged_gpu_blocks"])
                                 and r["utilization"] and r["gpu"] != "unknown"], ids=_row_id)
def test_held_out_kv_token_count_from_the_planned_budget_within_3_percent(request, row):
    """Source: published: the logged "GPU KV cache size" of the held-out public start-up logs, against the
    token count the plan prints from its own budget (the figure a user reads)."""
    _xfail_expected_miss(request, row, TOKEN_MISSES)
    r = evaluate_row(row)
    assert r.tokens_predicted == pytest.approx(r.tokens_logged, rel=TOKENS_REL)


@pytest.mark.parametrize("row", [r for r in HELD_OUT if r["logged_concurrency"] and r["max_model_len"]
                                 and r["utilization"] and r["gpu"] != "unknown"], ids=_row_id)
def test_held_out_concurrency_line_within_3_percent(request, row):
    """Source: published: the "Maximum concurrency for L tokens per request: C x" line of the held-out public
    start-up logs, against the plan's own line (its block pool over the blocks one max_model_len request
    takes)."""
    _xfail_expected_miss(request, row, TOKEN_MISSES)
    r = evaluate_row(row)
    assert r.concurrency_predicted == pytest.approx(r.concurrency_logged, rel=TOKENS_REL)


@pytest.mark.parametrize("row", [r for r in ROWS if r["logged_activation_gib"] and r["vllm_version"] >= "0.1"
                                 and r["split"] == "held-out" and not r["budget_rank"]], ids=_row_id)
def test_held_out_activation_peak_within_0_5_gib(row):
    """Source: published: "peak activation" / "PyTorch activation peak memory" printed by the held-out logs
    (V1 releases 0.10-0.19), against the profiled peak of the release's rules: the forward or the sampler run
    (sort 38 B/logit, Triton 15 B/logit), whichever is larger. 0.5 GiB is a tenth of the largest peak printed
    (5.64 GiB) and a quarter of the sampler's smallest, so a sampler term off by 10% on the big-vocabulary
    rows, or summed with the forward instead of taken after it, fails."""
    r = evaluate_row(row)
    assert r.activation_model_gib == pytest.approx(float(row["logged_activation_gib"]), abs=0.5)


def test_vllm_profiled_activation_peak_of_llama_8b_by_release():
    """Source: hand: vLLM's profiling run for Llama-3.1-8B at 8,192 batched tokens and 1,024 sequences on
    H100. Forward: the widest layer holds the residual and normed input (2 x 4,096) and the MLP's gate_up and
    activation (3 x 14,336): 51,200 bf16 values per token x 8,192 = 838,860,800 B. Sampler run: 1,024 rows x
    128,256 logits x bytes per logit, plus the forward's 8,192 x 4,096 bf16 hidden states (67,108,864 B): the
    sort (0.16, 38 B measured on an H200) 5,057,806,336 B = 4.710449 GiB, against 4.76 GiB that a January 2026
    log prints; the Triton kernel (0.19, 15 B) 2,037,121,024 B = 1.897217 GiB, against the
    1.89 GiB every 0.19.0 Llama-3.1-8B log prints; FlashInfer (0.21, 14 B) 1,905,786,880 B = 1.774902 GiB.
    Each exceeds the forward, so it is the peak."""
    from planner.engines.vllm import activation_peak_gib, default_sampler
    from planner.model.presets import load_presets

    m = load_presets()["llama-3.1-8b"]
    expected = {"0.16": 4.710449, "0.19": 1.897217, "0.21": 1.774902}
    for version, gib in expected.items():
        assert activation_peak_gib(m, 1, 8192, 1024, default_sampler(version)) == pytest.approx(gib, rel=1e-6)
    assert activation_peak_gib(m, 1, 8192, 1024, "none") == pytest.approx(838_860_800 / 2**30, rel=1e-9)


def test_moe_workspace_held_through_the_sampler_run():
    """Source: hand: Qwen3-30B-A3B (config.json: hidden 2,048, 128 experts, top-8, expert width 768,
    vocab 151,936) under 0.19 rules: the Triton sampler 1,024 x 151,936 x 15 B + hidden states 8,192 x
    2,048 x 2 B = 2,367,356,928 B, plus fused MoE's caches still held, 8,192 tokens x 8 x (3 x 768 + 2,048)
    x 2 B = 570,425,344 B: 2.735962 GiB (the 0.19.0 log prints 2.68; without the workspace 2.204712)."""
    from planner.engines.vllm import activation_peak_gib, holds_moe_workspace
    from planner.model.presets import load_presets

    m = load_presets()["qwen3-30b-a3b"]
    assert holds_moe_workspace(m, "bf16", "0.19.0") and not holds_moe_workspace(m, "bf16", "0.10.2")
    assert not holds_moe_workspace(load_presets()["gpt-oss-20b"], "fp4", "0.19.0")
    assert activation_peak_gib(m, 1, 8192, 1024, "triton", True) == pytest.approx(2.735962, rel=1e-6)


def test_vllm_kv_budget_of_llama_8b_on_h100_term_by_term():
    """Source: published: vLLM 0.19.0's start-up log of Llama-3.1-8B bf16 on one H100 80GB at utilization
    0.95,
    8,192 batched tokens and 1,024 sequences (llm-d-planner's accuracy sweep, data/reference/
    vllm_startup_logs.csv row v1-019-llama31-8b-h100-tp1, DEBUG per-term line): total 79.19 GiB, requested
    75.23, "Model loading took 14.99 GiB", activation 1.89, non-torch 0.25, KV cache 58.11 GiB, 29,751 GPU
    blocks, 476,016 tokens; the CUDA-graph estimate printed but not subtracted (0.19), and "graph capturing
    took 0.91 GiB" after the KV cache was sized, which 0.21 subtracts first (vLLM PR #38284). vllm#10517
    prints "Model loading took 14.9888 GiB" for this model. The rotary table, by hand from config.json:
    131,072 positions (max_position_embeddings) x 128 x 2 B = 0.03125 GiB. Tolerances: the log's two decimals
    (0.005 GiB a figure; 0.01 where a figure sums two terms); the budget
    0.02 GiB (its four printed terms' rounding), hence 5e-4 of the blocks and tokens."""
    from planner.engines.vllm import cuda_graph_pool_gib, plan_engine_memory
    from planner.scenario.scenario import parse_scenario, resolve

    d = resolve(parse_scenario({"model": "llama-3.1-8b", "gpu": "h100-sxm", "memory": {"utilization": 0.95}}))
    e = plan_engine_memory(d, 8192, 8192, 16, max_num_seqs=1024, vllm_version="0.19.0")
    assert e.visible_total_gib == pytest.approx(79.19, abs=0.01)
    assert e.requested_gib == pytest.approx(75.23, abs=0.01)
    assert e.model_loading_gib == pytest.approx(14.99, abs=0.005)
    assert e.activation_peak_gib == pytest.approx(1.89, abs=0.01)
    assert e.non_torch_gib == pytest.approx(0.25, abs=0.005)
    assert e.cuda_graph_gib == 0.0 and cuda_graph_pool_gib(d.model) == pytest.approx(0.91, abs=0.005)
    assert e.kv_budget_gib == pytest.approx(58.11, abs=0.02)
    assert e.num_gpu_blocks == pytest.approx(29_751, rel=5e-4)
    assert e.kv_cache_tokens == pytest.approx(476_016, rel=5e-4)
    latest = plan_engine_memory(d, 8192, 8192, 16, max_num_seqs=1024)  # 0.21: the graph pool comes out first
    assert latest.cuda_graph_gib == pytest.approx(0.91, abs=0.005)
    assert latest.rotary_cache_gib == pytest.approx(131_072 * 128 * 2 / 2**30, rel=1e-12)
    assert latest.model_loading_gib == pytest.approx(14.9888, abs=5e-5)


def test_scenario_picks_the_release_rules():
    """Source: docs: vLLM's release history (data/reference/vllm_startup_logs.md): 0.19 sorts nothing with
    its Triton sampler and subtracts no graph pool; 0.21 subtracts it. Llama-3.1-8B on H100 at defaults:
    0.19 activation 1.897217 GiB (hand, test above) and no graphs; 0.21 0.909956 GiB of graphs;
    `vllm_sampler: native` forces the sort, 4.710449 GiB."""
    base = {
        "model": "llama-3.1-8b", "gpu": "h100-sxm", "context_len": 8192, "prompt_len": 1000,
        "output_len": 200,
    }
    w19 = plan({**base, "vllm_version": "0.19.0"}).memory.waterfall_gib
    w21 = plan(base).memory.waterfall_gib
    sort = plan({**base, "vllm_version": "0.19.0", "vllm_sampler": "native"}).memory.waterfall_gib
    assert w19 is not None and w21 is not None and sort is not None
    assert w19["activation_peak"] == pytest.approx(1.897217, rel=1e-5) and w19["cuda_graphs"] == 0.0
    assert w21["cuda_graphs"] == pytest.approx(0.909956, rel=1e-5)
    assert sort["activation_peak"] == pytest.approx(4.710449, rel=1e-5)


@pytest.mark.parametrize("row", [r for r in ROWS if r["tokens_checkable"] == "yes"], ids=_row_id)
def test_kv_token_count_from_the_logged_budget_within_3_percent(row):
    """Source: published: the logged "GPU KV cache size" / GPU blocks against the logged KV budget."""
    r = evaluate_row(row)
    assert r.tokens_model == pytest.approx(r.tokens_logged, rel=TOKENS_REL)


def test_log_lines_are_printed_as_vllm_prints_them():
    """Source: published: vllm PR #24577 log lines (Qwen3-0.6B on A100)."""
    # vllm#24577 (Qwen3-0.6B, A100): "GPU KV cache size: 652,144 tokens" /
    # "Maximum concurrency for 4,096 tokens per request: 159.21x"
    assert format_log_lines(652_144, 4096, 159.2148) == (
        "GPU KV cache size: 652,144 tokens", "Maximum concurrency for 4,096 tokens per request: 159.21x")


def test_qwen3_14b_concurrency_line_from_the_logged_budget():
    """Source: published: LMCache#1739 start-up lines; block arithmetic by hand below."""
    # LMCache#1739: 6.51 GiB -> 42,656 tokens and 1.30x at 32,768. By hand: one 16-token block of one
    # layer is 16 x 2 x 8 heads x 128 x 2 B = 65,536 B; 6.51 GiB // 65,536 // 40 layers = 2,666 blocks.
    from planner.engines.vllm_kv_cache import kv_tokens_and_concurrency
    from planner.model.presets import load_presets

    blocks, tokens, concurrency, _, page = kv_tokens_and_concurrency(
        load_presets()["qwen3-14b"], 1, "bf16", 6.51, 16, 32768, 8192)
    assert page == 65_536 and blocks == 2666 and tokens == 42_656
    assert f"{concurrency:.2f}" == "1.30"


def test_plan_exposes_the_waterfall_and_the_log_lines():
    """Source: invariant: the waterfall closes, the log lines carry the plan's own figures; torch's total
    range from public logs (79.11-79.25 GiB on H100 80GB)."""
    p = plan({"model": "llama-3.1-8b", "gpu": "h100-sxm", "context_len": 8192})
    m = p.memory
    w = m.waterfall_gib
    assert m.engine_rules == "vllm" and m.vllm_version
    # the waterfall closes: cap - weights - rotary tables - activation - non-torch - graphs = KV
    assert w["utilization_cap"] - w["weights"] - w["rotary_tables"] - w["allocator_rounding"] - w[
        "activation_peak"
    ] - w["non_torch"] - w["cuda_graphs"] == pytest.approx(w["kv_cache"], abs=1e-9)
    # torch sees less than nvidia-smi's 81,559 MiB (79.65 GiB): public logs print 79.11-79.25 GiB
    assert 79.0 <= w["framework_total"] <= 79.4
    assert m.engine_log_lines[0] == f"GPU KV cache size: {m.kv_cache_tokens:,} tokens"
    assert m.engine_log_lines[1].startswith("Maximum concurrency for 8,192 tokens per request: ")
    assert m.kv_budget_gb_per_gpu == pytest.approx(w["kv_cache"] * 2**30 / 1e9)


def test_enforce_eager_removes_the_graph_pool():
    """Source: hand: vLLM 0.21 subtracts its CUDA-graph estimate before sizing the KV cache, and
    `--enforce-eager` captures no graphs. For Llama-3.1-8B (32 layers) the pool is 0.3233 + 0.018333 x 32 =
    0.909956 GiB, so eager mode leaves exactly that much more KV per GPU: 53.453400 + 0.909956 =
    54.363356 GiB (the budget worked in test_vllm_kv_budget_of_llama_8b_on_h100_term_by_term)."""
    base = {"model": "llama-3.1-8b", "gpu": "h100-sxm"}
    graphs = plan(base).memory.waterfall_gib["cuda_graphs"]
    eager = plan({**base, "enforce_eager": True}).memory
    assert graphs == pytest.approx(0.909956, rel=1e-6) and eager.waterfall_gib["cuda_graphs"] == 0
    assert eager.waterfall_gib["kv_cache"] == pytest.approx(54.363356, rel=1e-6)


def test_explicit_reserve_overrides_the_modelled_overheads():
    """Source: contract: an explicit memory.reserve_gb replaces the modelled overheads."""
    p = plan({"model": "llama-3.1-8b", "gpu": "h100-sxm", "memory": {"reserve_gb": 3.0}})
    assert p.memory.engine_rules == "napkin" and p.memory.reserve_gb == 3.0


def test_more_batched_tokens_leave_less_kv():
    """Source: hand: Qwen2.5-72B (config.json: hidden 8,192, 64/8 heads, MLP 29,568, vocab 152,064) at TP 2,
    vLLM 0.21. At 2,048 batched tokens the forward's widest layer is 2,048 x (2 x 8,192 + 3 x 29,568 / 2)
    x 2 B = 0.231689 GiB, below the FlashInfer sampler run over 1,024 rows: 1,024 x 152,064 x 14 B + the
    2,048 x 8,192 x 2 B hidden states = 2.061523 GiB, the peak. At 32,768 tokens the forward is 3.707031
    GiB and passes the sampler (2.530273): the peak, 1.645508 GiB more, comes out of the KV budget."""
    base = {"model": "qwen2.5-72b", "gpu": "h100-sxm", "tp": 2}
    small = plan({**base, "load": {"concurrency": 8, "max_num_batched_tokens": 2048}}).memory
    large = plan({**base, "load": {"concurrency": 8, "max_num_batched_tokens": 32768}}).memory
    assert small.waterfall_gib["activation_peak"] == pytest.approx(2.061523, rel=1e-6)
    assert large.waterfall_gib["activation_peak"] == pytest.approx(3.707031, rel=1e-6)
    # bf16 weights of 72B on 2 x 80 GB leave no KV here: the signed
    # budget is kv_cache - kv_shortfall (issue 22)
    signed = {
        k: m.waterfall_gib["kv_cache"] - m.waterfall_gib["kv_shortfall"]
        for k, m in (("small", small), ("large", large))
    }
    assert signed["small"] - signed["large"] == pytest.approx(1.645508, rel=1e-5)


def test_block_size_rounds_the_pool():
    """Source: hand: the 53.453400 GiB budget of Llama-3.1-8B on H100 (term by term above) in pages of
    32 layers x block x 2 x 8 heads x 128 x 2 B: 16-token blocks of 2 MiB -> 27,368 blocks, 437,888 tokens;
    64-token blocks of 8 MiB -> 6,842 blocks, 437,888 tokens (the pool is whole blocks)."""
    p16 = plan({"model": "llama-3.1-8b", "gpu": "h100-sxm", "block_size": 16}).memory
    p64 = plan({"model": "llama-3.1-8b", "gpu": "h100-sxm", "block_size": 64}).memory
    assert (p16.num_gpu_blocks, p16.kv_cache_tokens) == (27_368, 437_888)
    assert (p64.num_gpu_blocks, p64.kv_cache_tokens) == (6_842, 437_888)


def test_gemma3_hybrid_groups_share_one_pool():
    """Source: hand: vLLM uniform-page hybrid allocator, worked below."""
    # 52 sliding-window layers (1024) and 10 full layers: groups of 10 layers, 1 full + 6 window groups.
    m = plan({"model": "gemma-3-27b", "gpu": "h200", "context_len": 32768, "prompt_len": 30000,
              "output_len": 2000}).memory
    kinds = {g["kind"]: g["n_layers"] for g in m.kv_cache_groups}
    assert kinds == {"full_attention": 10, "sliding_window": 52}
    # a 32k request needs 2048 blocks in the full group and 6 x (ceil((1023 + 8192) / 16) + 1) = 6 x 577
    assert m.max_concurrency == pytest.approx(m.num_gpu_blocks / (2048 + 6 * 577))


def test_sglang_pool_tokens_from_its_logged_k_and_v_sizes():
    """Source: published: vllm#21348 SGLang line for Qwen3-235B-A22B-FP8 at TP 4 ("#tokens: 367404, K size:
    8.23 GB, V size: 8.23 GB"). By hand: one token of all 94 layers on one GPU is 1 KV head x 128 x 2 x 2 B x
    94 = 48,128 B; 16.46 GiB / 48,128 B = 367,2xx tokens (the logged sizes are rounded to 0.01)."""
    from planner.engines.sglang import format_sglang_log_line, sglang_cell_bytes
    from planner.model.presets import load_presets

    cell = sglang_cell_bytes(load_presets()["qwen3-235b-a22b"], 4, "bf16")
    assert cell == 48_128
    assert (8.23 + 8.23) * 2**30 / cell == pytest.approx(367_404, rel=1e-3)
    assert (
        format_sglang_log_line(367_404, 8.23, 8.23)
        == "KV Cache is allocated. #tokens: 367404, K size: 8.23 GB, V size: 8.23 GB"
    )


def test_sglang_rule_reads_utilization_as_mem_fraction_static():
    """Source: docs: SGLang's `profile_max_num_token` (model_runner.py): the pool is (free memory after
    start-up) x mem_fraction_static - weights. By hand on an H100 (85.52e9 B = 79.646707 GiB, less the
    driver's 0.45 and SGLang's 1.5 GiB start-up at TP > 1 = 77.696707 GiB), raising the fraction from
    0.85 to 0.93 adds 0.08 x 77.696707 = 6.215737 GiB of KV per GPU, whatever the weights."""
    base = {"model": "qwen3-235b-a22b", "gpu": "h100-sxm", "tp": 4, "weights": "fp8", "engine": "sglang"}
    lo = plan({**base, "memory": {"utilization": 0.85}}).memory
    hi = plan({**base, "memory": {"utilization": 0.93}}).memory
    w = hi.waterfall_gib
    assert hi.engine_rules == "sglang" and hi.engine_log_lines[0].startswith(
        "KV Cache is allocated. #tokens: "
    )
    assert w["utilization_cap"] - w["weights"] - w["rotary_tables"] - w["allocator_rounding"] - w[
        "non_torch"
    ] == pytest.approx(w["kv_cache"])
    assert hi.waterfall_gib["kv_cache"] - lo.waterfall_gib["kv_cache"] == pytest.approx(6.215737, rel=1e-6)


def test_trtllm_pool_is_the_fraction_of_free_memory_after_loading():
    """Source: published: TensorRT-LLM docs log (H100) "total: 79.10 GiB, available: 70.48 GiB", "Number of
    tokens per block: 64", "Allocated 63.44 GiB for max tokens in paged KV cache (259840)": 0.9 x 70.48 =
    63.43 GiB, 259,840 tokens = 4,060 blocks of 64 (kvCacheManager getMaxNumTokens: fraction x free)."""
    assert pytest.approx(63.44, abs=0.01) == 0.9 * 70.48
    assert 259_840 == 4060 * 64
    from planner.engines.trtllm import format_trtllm_log_lines

    lines = format_trtllm_log_lines(79.10, 70.48, 63.44, 259_840)
    assert lines == (
        "Memory usage when calculating max tokens in paged kv cache: total: 79.10 GiB, available: 70.48 GiB",
        "[MemUsageChange] Allocated 63.44 GiB for max tokens in paged KV cache (259840).",
    )
    p = plan({"model": "llama-3.1-8b", "gpu": "h100-sxm", "engine": "trt-llm", "block_size": 64}).memory
    w = p.waterfall_gib
    available = w["framework_total"] - w["weights"] - w["activation_peak"] - w["non_torch"]
    assert w["kv_cache"] == pytest.approx(0.9 * available)
    assert p.kv_cache_tokens % 64 == 0 and p.engine_rules == "trt-llm"


def test_vllm_refusal_to_start_is_a_warning():
    """Source: published: vLLM refuses to start when one max_model_len request does not fit ("To serve at
    least one request with the models's max seq len ... KV cache is needed", vllm#25350, #34076)."""
    p = plan({"model": "qwen2.5-72b", "gpu": "h100-sxm", "tp": 2, "context_len": 32768, "prompt_len": 30000,
              "output_len": 2000, "memory": {"utilization": 0.95}})
    assert p.memory.max_concurrency < 1
    assert any(w.startswith("vLLM would not start: one 32,768-token request") for w in p.warnings)


# held-out logs whose weights as loaded miss 1% though their budget is within target
WEIGHT_MISSES = {
    "v1-019-gpt-oss-20b-h100-tp2": "MXFP4 experts on vLLM 0.19's Triton path at TP 2: 6.91 GiB planned, "
    "7.01 logged "
    "(1.4%); the budget is within 0.05 GiB",
}


@pytest.mark.parametrize(
    "row", [r for r in HELD_OUT if r["logged_weights_gib"] and not r["budget_rank"]], ids=_row_id
)
def test_held_out_model_loading_within_1_percent(request, row):
    """Source: published: "Model loading took X GiB" of the held-out public start-up logs, against the plan's
    weights as loaded plus its rotary tables (engines.vllm.weights_gib_per_gpu + rotary_cache_gib). 1% is a
    third of the KV budget's 3% target: a weights term off by more would use most of a tight pool's slack."""
    _xfail_expected_miss(request, row, WEIGHT_MISSES)
    r = evaluate_row(row)
    assert r.weights_model_gib == pytest.approx(r.weights_logged_gib, rel=0.01)


def test_rotary_tables_loaded_with_the_model():
    """Source: hand: vLLM's `RotaryEmbedding` registers a cos/sin cache of [positions, rotary_dim] in the
    model's 16-bit dtype, one per distinct table, on every rank
    (vllm/model_executor/layers/rotary_embedding/base.py). Llama-4-Scout (config.json text_config:
    max_position_embeddings 10,485,760, llama3 scaling, head_dim 128): 10,485,760 x 128 x 2 B = 2.5 GiB per
    rank, which is why its TP 4 log prints "Model loading took 53.12 GiB" where its 108.6B parameters give
    50.59 per rank. Gemma-3-12B: a local table (131,072 rows) and the linear-x8 global one (1,048,576 rows) of
    head_dim 256: 1,179,648 x 256 x 2 B = 0.5625 GiB. DeepSeek-V3's YaRN table: original 4,096 x factor 40 =
    163,840 rows of qk_rope_head_dim 64: 0.01953125 GiB."""
    from planner.engines.vllm import rotary_cache_gib
    from planner.model.hf_import import model_from_hf_config
    from planner.model.presets import load_presets
    from tests.test_hf_import import fixture

    assert rotary_cache_gib(load_presets()["llama-4-scout"]) == pytest.approx(2.5, rel=1e-12)
    assert rotary_cache_gib(load_presets()["gemma-3-12b"]) == pytest.approx(0.5625, rel=1e-12)
    scout = model_from_hf_config(fixture("llama4__Llama-4-Scout-17B-16E-Instruct"))
    gemma = model_from_hf_config(fixture("gemma3__gemma-3-27b-it"))
    deepseek = model_from_hf_config(fixture("deepseek_v3__DeepSeek-V3"))
    assert scout.rotary_table_rows == [10_485_760]
    assert gemma.rotary_table_rows == [131_072, 1_048_576]
    assert deepseek.rotary_table_rows == [163_840] and deepseek.rotary_dim == 64
    assert rotary_cache_gib(deepseek) == pytest.approx(163_840 * 64 * 2 / 2**30, rel=1e-12)


def test_mxfp4_experts_as_each_backend_lays_them_out():
    """Source: hand: gpt-oss-120b's experts (36 layers x 128, hidden H = 2,880, width I = 2,880) in MXFP4 at
    0.53125 B per value: 3 x 2,880 x 2,880 x 0.53125 = 13,219,200 B per expert as the checkpoint stores them.
    vLLM `mxfp4.py` `create_weights`: Marlin (vLLM 0.10.1 on H100) pads I to 2,944 (128) and H to 3,072
    (256): 3 x 3,072 x 2,944 x 0.53125 = 14,413,824 B. The Triton path (0.14.1 on H100, triton_kernels'
    Hopper layouts) pads each matrix's packed reduction bytes to 64 and its other side to 256: values 1,472 x
    5,888 + 1,472 x 3,072 = 13,189,120 B, scales 5,888 x 90 + 3,072 x 90 = 806,400 B: 13,995,520 B. With the
    bf16 rest (4,254,526,080 B, test_hf_import) and the 131,072 x 64 x 2 B rotary table: Marlin 65.835 GiB
    against the 65.9651 vllm#23278 logs, Triton 64.040 against the 64.38 of vllm#33155 (the checkpoint layout
    would give 60.709 GiB)."""
    from planner.engines.vllm import mxfp4_moe_backend, rotary_cache_gib, weights_gib_per_gpu
    from planner.scenario.scenario import parse_scenario, resolve

    d = resolve(
        parse_scenario({"model": "gpt-oss-120b", "gpu": "h100-sxm", "weights": "fp4", "compute": "bf16"})
    )
    assert [mxfp4_moe_backend(d.gpu, v) for v in ("0.10.1", "0.11.0", "0.11.1", "0.14.1")] == \
        ["marlin", "marlin", "triton", "triton"]
    other = 4_254_526_080
    expected = {"0.10.1": 4608 * 14_413_824 + other, "0.14.1": 4608 * 13_995_520 + other}
    for version, loaded in expected.items():
        assert weights_gib_per_gpu(d, version) == pytest.approx(loaded / 2**30, rel=1e-9)
    assert rotary_cache_gib(d.model) == pytest.approx(0.015625, rel=1e-12)
    b200 = resolve(parse_scenario({"model": "gpt-oss-120b", "gpu": "b200", "weights": "fp4"}))
    assert mxfp4_moe_backend(b200.gpu, "0.21") == "flashinfer"  # I and H both to 3,072
    assert weights_gib_per_gpu(b200, "0.21") == pytest.approx(
        (4608 * 3 * 3072 * 3072 * 0.53125 + other) / 2**30, rel=1e-9
    )


def test_allocator_rounding_of_the_weight_tensors():
    """Source: hand: PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp: kRoundLarge 2 MiB,
    kSmallSize 1 MiB, kMinLargeAlloc 10 MiB; `should_split` keeps a large block whole unless more than 1 MiB
    would be left) charges a 231 MiB tensor (Qwen2.5-72B's down_proj shard at TP 2, 8,192 x 14,784 x 2 B =
    242,221,056 B) its whole 232 MiB segment, but a 64.75 MiB one (Qwen2.5-7B's at TP 2) only its bytes (1.25
    MiB would be left) and an 8 MiB one (below 10 MiB, packed in a shared 20 MiB segment) its bytes.
    Qwen2.5-72B at TP 2: embedding 1,188 MiB, qkv 80, o 64, gate_up 462 MiB per rank, all whole multiples of 2
    MiB; only the 80 down_proj shards round, 80 MiB = 0.078125 GiB. With the 72,705,384,448 bf16 parameters
    halved (67.712166 GiB) and the 32,768 x 128 x 2 B rotary table (0.0078125) that is 67.798 GiB, against the
    67.8 GiB "Model loading took" of the 0.19.0 log (without the rounding 67.72). Llama-3.1-8B's tensors (48,
    32, 224, 112 and 1,002 MiB) round to nothing."""
    from planner.engines.torch_allocator import allocated_bytes
    from planner.engines.vllm import allocator_rounding_gib_per_gpu
    from planner.scenario.scenario import parse_scenario, resolve

    mib = 2**20
    assert allocated_bytes(242_221_056) == 232 * mib
    assert allocated_bytes(67_895_296) == 67_895_296
    assert allocated_bytes(8 * mib) == 8 * mib
    qwen = resolve(parse_scenario({"model": "qwen2.5-72b", "gpu": "h100-sxm", "tp": 2, "weights": "bf16",
                                   "kv_cache": "bf16"}))
    assert allocator_rounding_gib_per_gpu(qwen) == pytest.approx(0.078125, rel=1e-9)
    llama = resolve(
        parse_scenario({"model": "llama-3.1-8b", "gpu": "h100-sxm", "weights": "bf16", "kv_cache": "bf16"})
    )
    assert allocator_rounding_gib_per_gpu(llama) == 0.0
    row = next(r for r in ROWS if r["id"] == "v1-019-qwen25-72b-h100-tp2")
    assert evaluate_row(row).weights_model_gib == pytest.approx(67.798, abs=0.002)


def test_fp32_model_widens_the_activations_logits_and_rotary_table():
    """Source: hand: `--dtype float32` Llama-3.1-8B on one H100 under vLLM 0.19.0 (Triton sampler, 1,024 rows
    of a 128,256 vocabulary): the logits reach the sampler in fp32, 2 B more per logit than the 15 B of the
    bf16 path, and the 8,192 x 4,096 hidden states take 4 B: 1,024 x 128,256 x 17 + 8,192 x 4,096 x 4 =
    2,366,898,176 B = 2.204 GiB, against the 2.21 GiB its log prints (1.89 in bf16); the rotary table 131,072
    x 128 x 4 B =
    0.0625 GiB, so "Model loading took" 29.915 + 0.0625 = 29.98 GiB, as logged."""
    from planner.engines.vllm import activation_peak_gib, model_dtype_bytes, rotary_cache_gib
    from planner.model.presets import load_presets

    m = load_presets()["llama-3.1-8b"]
    assert model_dtype_bytes("fp32") == 4.0 and model_dtype_bytes("fp8") == 2.0
    assert activation_peak_gib(m, 1, 8192, 1024, "triton", dtype_bytes=4.0) == pytest.approx(
        2_366_898_176 / 2**30, rel=1e-9
    )
    assert rotary_cache_gib(m, "fp32") == pytest.approx(0.0625, rel=1e-12)
    row = next(r for r in ROWS if r["id"] == "v1-019-llama31-8b-h100-fp32")
    assert evaluate_row(row).weights_model_gib == pytest.approx(29.98, abs=0.005)


def test_nvls_buffers_before_0_19_only_above_two_gpus_of_an_nvswitch_hopper():
    """Source: published: vLLM PR #21429's DEBUG log (Qwen3-235B-A22B-FP8, TP 4, H200, July 2025) prints 2.04
    GiB of non-torch memory, where TP 2 and PCIe logs of the same era print 0.21-0.55; NCCL enables NVLink
    SHARP only for more than 2 GPUs of a Hopper-or-later NVSwitch domain (vllm#9699), and A100's NVSwitch has
    none. From
    0.19
    every TP > 1 plan takes the 2.07 GiB of that release's all-reduce workspaces. With it the vllm#21348
    budget (same model, TP 4, H100, 0.9.2) is 8.63 GiB planned against 8.11 logged (10.38 with 0.30)."""
    from gpu_catalog import load_catalog
    from planner.engines.vllm import non_torch_gib

    c = load_catalog()
    assert non_torch_gib(4, "0.9.2", c["h100-sxm"]) == 2.04 and non_torch_gib(8, "0.10.2", c["h200"]) == 2.04
    assert non_torch_gib(2, "0.9.2", c["h100-sxm"]) == 0.30
    assert (
        non_torch_gib(8, "0.10.2", c["l40s"]) == 0.30
        and non_torch_gib(8, "0.10.2", c["a100-sxm-80gb"]) == 0.30
    )
    assert non_torch_gib(2, "0.19.0", c["l40s"]) == 2.07 and non_torch_gib(1, "0.9.2", c["h100-sxm"]) == 0.15
    row = next(r for r in ROWS if r["id"] == "v1-qwen3-235b-fp8-h100-tp4")
    assert evaluate_row(row).budget_model_gib == pytest.approx(8.11, abs=0.75)


def test_allocator_rounding_matches_the_allocator_measured_on_an_h100():
    """Source: measured: tools/measure_allocator_rounding.py replays one TP rank's weight tensors of five
    checkpoints in vLLM's creation order with `torch.empty` and reads `max_memory_allocated`, as vLLM's
    "Model loading took" does (NVIDIA H100 80GB HBM3, driver 580.159.04, torch 2.11.0+cu130, 2026-11-26;
    data/measurements/h100_allocator_rounding_2026-11-26.json): the rounding is 0.078125 GiB for Qwen2.5-72B
    at TP 2, 0.1171875 for Kimi-Dev-72B at TP 4, 0.1875 for Qwen2.5-32B at TP 2, 0.0556640625 for Qwen2.5-7B
    and 0 for Llama-3.1-8B; the replayed totals are 67.8001, 34.0067, 30.7097, 14.2487 and 14.9888 GiB
    against the 67.80, 34.01, 30.7098, 14.25 and 14.9888 their vLLM logs print. The planner's rule gives the
    same rounding to the byte and the totals within 0.001 GiB (the replay keeps the qkv biases the parameter
    count leaves out)."""
    import json
    from dataclasses import replace
    from pathlib import Path

    from planner.engines.vllm import allocator_rounding_gib_per_gpu, rotary_cache_gib, weights_gib_per_gpu
    from planner.scenario.scenario import parse_scenario, resolve

    path = (
        Path(__file__).resolve().parents[1]
        / "data"
        / "measurements"
        / "h100_allocator_rounding_2026-11-26.json"
    )
    measured = {m["model"]: m for m in json.loads(path.read_text())["weight_replays"]}
    cases = {
        "Qwen2.5-72B-Instruct TP2": ("qwen2.5-72b", 2, 32768), "Kimi-Dev-72B TP4": ("qwen2.5-72b", 4, 131072),
        "Qwen2.5-32B-Instruct TP2": ("qwen2.5-32b", 2, 32768),
        "Qwen2.5-7B-Instruct TP1": ("qwen2.5-7b", 1, 32768), "Llama-3.1-8B TP1": ("llama-3.1-8b", 1, 131072),
    }
    for name, (preset, tp, positions) in cases.items():
        d = resolve(
            parse_scenario(
                {"model": preset, "gpu": "h100-sxm", "tp": tp, "weights": "bf16", "kv_cache": "bf16"}
            )
        )
        d = replace(d, model=d.model.model_copy(update={"max_position_embeddings": positions}))
        assert allocator_rounding_gib_per_gpu(d) == pytest.approx(measured[name]["rounding_gib"], abs=1e-9), (
            name
        )
        loaded = weights_gib_per_gpu(d) + rotary_cache_gib(d.model) + allocator_rounding_gib_per_gpu(d)
        assert loaded == pytest.approx(measured[name]["charged_gib"], abs=0.001), name
