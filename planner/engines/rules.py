"""Each serving engine's memory rules by name: the one place that maps an engine name to its module."""

from __future__ import annotations

from types import ModuleType

from planner.core.deployment import Deployment
from planner.engines import sglang, trtllm, vllm
from planner.engines.base import EngineMemory

MEMORY_RULES: dict[str, ModuleType] = {module.NAME: module for module in (vllm, sglang, trtllm)}


def startup_memory(d: Deployment, context_len: int) -> EngineMemory:
    """One GPU's start-up memory as the deployment's engine accounts for it."""
    return MEMORY_RULES[d.engine].startup_memory(d, context_len)


def max_batch_for_context(e: EngineMemory, context_len: int) -> int:
    """Sequences of `context_len` tokens the engine's KV cache holds at once."""
    return MEMORY_RULES[e.engine].max_batch_for_context(e, context_len)
