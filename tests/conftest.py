"""Shared fixtures: the seeds' napkin-math setting (Llama-3-70B at 70e9 params, an 80 GB H100)."""

from __future__ import annotations

import pytest

# The seeds' H100: 80 GB read as 80e9 bytes, 3.35 TB/s, dense 989.4 / 1978.9 TFLOP/s, NVLink 450 GB/s/dir.
SEED_H100 = {"name": "seed H100 (80 GB, 3.35 TB/s)", "memory_gb": 80.0, "hbm_tb_s": 3.35,
             "tflops": {"bf16": 989.4, "fp16": 989.4, "fp8": 1978.9}, "interconnect_gb_s": 450.0}

# Llama-3-70B's shape with the seeds' rounded 70e9 parameters.
SEED_LLAMA_70B = {"name": "Llama-3-70B (70e9)", "n_layers": 80, "d_model": 8192, "n_heads": 64,
                  "n_kv_heads": 8, "head_dim": 128, "d_ff": 28672, "vocab_size": 128256, "n_params": 70e9}


@pytest.fixture
def seed_scenario() -> dict:
    return {"model": dict(SEED_LLAMA_70B), "gpu": dict(SEED_H100), "tp": 8, "weights": "fp16",
            "kv_cache": "fp16", "context_len": 4096, "prompt_len": 1, "output_len": 1, "efficiency": "ideal"}


@pytest.fixture
def sample_scenario() -> dict:
    return {"model": "llama-3.1-70b", "gpu": "h100-sxm", "tp": 4, "weights": "fp8", "kv_cache": "fp8",
            "context_len": 8192, "prompt_len": 2000, "output_len": 400}
