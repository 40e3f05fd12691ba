"""Storage bits per value for every precision the contract names.

Group-scale convention (documented in README): 4-bit integer weights are stored in groups of 128 with one bf16
scale per group (AWQ/GPTQ default), so int4 costs 4 + 16/128 = 4.125 bits. fp4 is NVFP4: groups of 16 with one
fp8 scale, 4 + 8/16 = 4.5 bits; a checkpoint in MXFP4 (gpt-oss: `ModelSpec.fp4_format`) stores groups of 32
with one 8-bit power-of-two (E8M0) scale, 4 + 8/32 = 4.25 bits. 8-bit formats use per-channel or per-tensor
scales, negligible next to the data, so they count 8 bits.
"""

from __future__ import annotations

from typing import Literal, get_args

from gpu_catalog import TensorPrecision

# The one list of each: scenario and sizing validation, the app's option lists and the tests read these.
WeightPrecision = Literal["fp32", "fp16", "bf16", "fp8", "int8", "int4", "fp4"]
KvPrecision = Literal["fp32", "fp16", "bf16", "fp8", "int8", "int4"]
ComputePrecision = TensorPrecision  # GEMMs run in a tensor-core format the catalog gives a peak for

WEIGHT_PRECISIONS: tuple[str, ...] = get_args(WeightPrecision)
KV_PRECISIONS: tuple[str, ...] = get_args(KvPrecision)
COMPUTE_PRECISIONS: tuple[str, ...] = get_args(ComputePrecision)

INT4_GROUP_SIZE = 128
INT4_SCALE_BITS = 16
FP4_GROUP_SIZE = 16
FP4_SCALE_BITS = 8
MXFP4_GROUP_SIZE = 32  # OCP Microscaling spec v1.0: a shared E8M0 scale per 32 FP4 (E2M1) values
MXFP4_SCALE_BITS = 8

_BITS = {
    "fp32": 32.0, "fp16": 16.0, "bf16": 16.0, "fp8": 8.0, "int8": 8.0,
    "int4": 4.0 + INT4_SCALE_BITS / INT4_GROUP_SIZE, "fp4": 4.0 + FP4_SCALE_BITS / FP4_GROUP_SIZE,
}


def bits_per_value(precision: str) -> float:
    return _BITS[precision]


def bytes_per_value(precision: str) -> float:
    return _BITS[precision] / 8.0


def embedding_bytes_per_value(weights: str) -> float:
    """Embedding, LM head, norms and the layers a quantized checkpoint keeps unquantized stay in 16 bits (fp32
    checkpoints keep fp32)."""
    return max(bytes_per_value(weights), 2.0)


def weight_bytes_per_value(precision: str, fp4_format: str | None = None) -> float:
    """Bytes per stored weight value: `bytes_per_value`, except fp4 in MXFP4 groups of 32 (4.25 bits)."""
    if precision == "fp4" and fp4_format == "mxfp4":
        return (4.0 + MXFP4_SCALE_BITS / MXFP4_GROUP_SIZE) / 8.0
    return bytes_per_value(precision)


def default_compute_precision(weights: str) -> str:
    """fp8 weights run fp8 GEMMs and fp4 weights fp4 GEMMs; weight-only int8/int4 dequantize to bf16."""
    if weights == "fp8":
        return "fp8"
    if weights == "fp4":
        return "fp4"
    return "bf16"


# Activations move between kernels in 16 bits in every engine we model.
ACTIVATION_BYTES = 2.0
