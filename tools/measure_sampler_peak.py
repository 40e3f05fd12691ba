#!/usr/bin/env python3
"""Peak GPU memory of vLLM V1's dummy sampler run, per logit, on whatever CUDA GPU this runs on.

vLLM sizes the KV cache after a profiling run whose torch peak includes `_dummy_sampler_run`: the
logits of `min(max_num_seqs, max_num_batched_tokens)` dummy requests go through the sampler with
top-k = vocab - 1 and top-p = 0.9, so the PyTorch-native path sorts the whole vocabulary. This script
replays that path's tensor operations (vLLM v0.11.0 `vllm/v1/sample/sampler.py` `Sampler.forward`/
`sample` and `vllm/v1/sample/ops/topk_topp_sampler.py` `forward_native`, `apply_top_k_top_p`,
`random_sample`; function boundaries kept, since a function's locals are freed when it returns) and
prints the peak allocated bytes per logit element (rows x vocab), with the bf16 logits counted, as the
profiler counts them. Variant `inplace_scatter` is the later `logits.scatter_` form of the re-sort.

    python tools/measure_sampler_peak.py --out data/measurements/vllm_sampler_peak.json
"""

from __future__ import annotations

import argparse
import json

import torch

# python3 tools/measure_sampler_peak.py has tools/ on the path; python -m
# tools.measure_sampler_peak the repository root
try:
    from gpu_timing import device_meta
except ImportError:
    from tools.gpu_timing import device_meta


def apply_top_k_top_p(logits: torch.Tensor, k: torch.Tensor, p: torch.Tensor, inplace: bool) -> torch.Tensor:
    logits_sort, logits_idx = logits.sort(dim=-1, descending=False)
    top_k_mask = logits_sort.size(1) - k.to(torch.long)
    top_k_mask = logits_sort.gather(1, top_k_mask.unsqueeze(dim=1))
    top_k_mask = logits_sort < top_k_mask
    logits_sort.masked_fill_(top_k_mask, -float("inf"))
    probs_sort = logits_sort.softmax(dim=-1)
    probs_sum = torch.cumsum(probs_sort, dim=-1, out=probs_sort)
    top_p_mask = probs_sum <= 1 - p.unsqueeze(dim=1)
    top_p_mask[:, -1] = False
    logits_sort.masked_fill_(top_p_mask, -float("inf"))
    if inplace:
        return logits.scatter_(dim=-1, index=logits_idx, src=logits_sort)
    return logits_sort.scatter(dim=-1, index=logits_idx, src=logits_sort)


def random_sample(probs: torch.Tensor) -> torch.Tensor:
    q = torch.empty_like(probs)
    q.exponential_()
    return probs.div_(q).argmax(dim=-1).view(-1)


def forward_native(logits: torch.Tensor, k: torch.Tensor, p: torch.Tensor, inplace: bool) -> torch.Tensor:
    logits = apply_top_k_top_p(logits, k, p, inplace)
    probs = logits.softmax(dim=-1, dtype=torch.float32)
    return random_sample(probs)


def sample(
    logits: torch.Tensor, temperature: torch.Tensor, k: torch.Tensor, p: torch.Tensor, inplace: bool
) -> torch.Tensor:
    greedy_sampled = logits.argmax(dim=-1).view(-1)
    logits = logits.div_(temperature.unsqueeze(dim=1))
    random_sampled = forward_native(logits, k, p, inplace)
    return torch.where(temperature < 1e-5, greedy_sampled, random_sampled, out=greedy_sampled)


def sampler_forward(
    logits_bf16: torch.Tensor, temperature: torch.Tensor, k: torch.Tensor, p: torch.Tensor, inplace: bool
) -> torch.Tensor:
    logits = logits_bf16.to(torch.float32)
    return sample(logits, temperature, k, p, inplace)


def peak_bytes(rows: int, vocab: int, inplace: bool) -> int:
    torch.cuda.empty_cache()
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    logits = torch.randn(rows, vocab, device="cuda", dtype=torch.bfloat16)  # compute_logits' output
    full = lambda v: torch.full((rows,), v, device="cuda")  # noqa: E731 - as _dummy_sampler_run builds them
    out = sampler_forward(logits, full(0.5), full(vocab - 1).to(torch.int32), full(0.9), inplace)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    del logits, out
    return peak


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    meta = device_meta(
        "peak torch-allocated bytes of vLLM V1's PyTorch-native dummy sampler run, bf16 logits included"
    )
    rows_out = []
    for vocab in (50272, 128256, 151936, 201088):
        for rows in (256, 1024):
            for inplace in (False, True):
                peak = peak_bytes(rows, vocab, inplace)
                row = {"rows": rows, "vocab": vocab, "inplace_scatter": inplace, "peak_bytes": peak,
                       "bytes_per_logit": round(peak / (rows * vocab), 3)}
                rows_out.append(row)
                print(json.dumps(row), flush=True)
    result = {"meta": meta, "rows": rows_out}
    print(json.dumps(meta))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
