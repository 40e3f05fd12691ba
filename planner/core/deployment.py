"""A resolved deployment: the model, the GPU and every setting the physics needs, presets looked up.

The computing modules (memory, roofline, latency, communication, cost) take this, never the raw
scenario, so they stay free of preset lookups and defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpu_catalog import GpuSpec
from planner.core.efficiency import EngineEfficiency
from planner.core.model_shapes import ModelSpec, ParamCounts, param_counts


@dataclass(frozen=True)
class Deployment:
    model: ModelSpec
    gpu: GpuSpec
    tp: int
    weights: str
    kv_cache: str
    compute: str
    efficiency: EngineEfficiency
    memory_utilization: float
    reserve_gb: float | None  # None: the engine's overheads are modelled (planner.engines.vllm)
    # pipeline stages and expert-parallel size (planner/hardware/parallelism.py shards by them)
    pp: int = 1
    ep: int = 1
    # engine memory knobs (vLLM's names); their defaults live in planner/engines/base.py, so callers give them
    engine: str = field(kw_only=True)
    block_size: int = field(kw_only=True)
    max_num_batched_tokens: int = field(kw_only=True)
    max_model_len: int | None = None  # None: the scenario's context length
    enforce_eager: bool = False
    vllm_version: str | None = None  # None: the latest release whose rules the planner follows
    max_num_seqs: int | None = None  # None: vLLM's default for the GPU
    vllm_sampler: str | None = None  # None: the release's default top-k/top-p sampler
    # The model's parameter counts, computed once when the deployment is resolved (not per formula).
    params: ParamCounts = field(init=False, repr=False, compare=False)
    # The replica's layout (planner.hardware.parallelism.sharding), filled on first use: every physics
    # function asks for it, the sizing search thousands of times. A
    # declared field, so replace() starts it afresh.
    layout: object | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", _params_of(self.model))


# The parameter counts of the models recently resolved, by object: a sizing request resolves thousands of
# layouts of one model (~17 us each to count; issue 31). An entry holds its model, so its id is not reused
# while the entry stands; a model is not changed once a deployment holds it.
_PARAMS: dict[int, tuple[ModelSpec, ParamCounts]] = {}


def _params_of(model: ModelSpec) -> ParamCounts:
    kept = _PARAMS.get(id(model))
    if kept is not None and kept[0] is model:
        return kept[1]
    if len(_PARAMS) >= 64:  # custom models come and go: keep the cache small
        _PARAMS.clear()
    counts = param_counts(model)
    _PARAMS[id(model)] = (model, counts)
    return counts
