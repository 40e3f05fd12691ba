"""Parallelism: how tp x pp x ep shard one replica, which link each collective crosses, and the checks.

Layout (as vLLM and SGLang place ranks): TP innermost (adjacent GPUs), then the expert-parallel group,
then pipeline stages outermost. One replica is `pp` stages of `max(tp, ep)` GPUs each.
  * TP shards attention heads, dense MLPs, embeddings and the LM head over `tp` GPUs.
  * PP splits the layers into `pp` stages of ceil(n_layers / pp) layers; the first stage also holds the
    embedding, the last the LM head. A token crosses every stage, so PP adds capacity (KV per GPU shrinks)
    and throughput (pp micro-batches in flight), never lower latency.
  * EP (MoE only) places n_experts / ep routed experts on each GPU; when ep does not divide n_experts
    each GPU gets ceil(n_experts / ep) slots, the spare ones holding redundant copies of hot experts (SGLang
    runs DeepSeek's 256 experts on EP 72 as 288 = 256 + 32 redundant). Attention is data-parallel across the
    EP group in ep / tp groups of tp GPUs each (SGLang `--enable-dp-attention`, vLLM DP + EP), so each
    attention group keeps its own sequences and KV cache. Without EP, experts are TP-sharded.
  * Expert load is never perfectly even: the busiest GPU gets EXPERT_IMBALANCE x the mean routed tokens
    (see the constant's evidence below).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from pydantic import BaseModel

from gpu_catalog import GpuSpec
from planner.core.deployment import Deployment
from planner.core.errors import ScenarioError
from planner.core.model_shapes import ModelSpec

# Busiest-GPU / mean routed-token load under EP with an EPLB-class balancer (redundant hot experts).
# Evidence: DeepSeek's EPLB and SGLang's large-scale EP write-up (LMSYS, 2025-05-05) report that balancing
# speeds prefill up 1.49x and decode 2.54x at EP 32-72, i.e. unbalanced routing leaves the busiest rank
# 1.5-2.5x the mean; with EPLB their simulated perfect balance lands within 5.6% of DeepSeek's profile and
# SGLang's later dispatch-time balancers (Waterfill/LPLB) still win 1-7% from residual imbalance.
# 1.2 sits between the balanced residual and the unbalanced figures; it is an assumption, not a fit.
EXPERT_IMBALANCE = 1.2


@dataclass(frozen=True)
class Link:
    """The slowest link a collective over `gpus` GPUs crosses."""

    kind: str  # "none" | "scale-up" | "pcie" | "network"
    gb_s: float
    gpus: int

    @property
    def crosses_nodes(self) -> bool:
        return self.kind == "network"


def link_for_group(gpu: GpuSpec, gpus: int) -> Link:
    """A group of adjacent GPUs: inside the scale-up domain it rides NVLink / Infinity Fabric, inside one
    server PCIe through the host, beyond that the network (one NIC per GPU)."""
    if gpus <= 1:
        return Link("none", math.inf, gpus)
    if gpus <= gpu.scale_up_gpus:
        return Link("scale-up" if gpu.scale_up_gpus > 1 else "pcie", gpu.link_gb_s, gpus)
    if gpus <= gpu.node_gpus:
        return Link("pcie", gpu.host_link_gb_s, gpus)
    return Link("network", gpu.network_gb_s, gpus)


@dataclass(frozen=True)
class Sharding:
    tp: int
    pp: int
    ep: int
    n_layers: int
    layers_per_stage: int
    attention_dp: int  # attention groups of tp GPUs inside one stage (ep / tp with EP, else 1)
    expert_shards: int  # GPUs one MoE layer's routed experts are spread over (ep, or tp without EP)
    expert_weight_fraction: float  # share of the routed-expert weights one GPU holds
    expert_imbalance: float
    gpus_per_stage: int
    gpus_per_replica: int
    nodes_per_replica: int
    tp_link: Link
    ep_link: Link
    pp_link: Link

    @property
    def stage_layer_fraction(self) -> float:
        """Share of the layers (and of per-layer weights and KV) the busiest stage holds."""
        return self.layers_per_stage / self.n_layers


def sharding(d: Deployment) -> Sharding:
    """The layout of `d`, computed once per Deployment (kept in its `layout` field: every physics function
    asks for it, and the sizing search asks thousands of times)."""
    layout = d.layout
    if layout is None:
        layout = _sharding(d)
        object.__setattr__(d, "layout", layout)
    return cast(Sharding, layout)


def _sharding(d: Deployment) -> Sharding:
    tp, pp, ep = d.tp, d.pp, d.ep
    per_stage = max(tp, ep)
    gpus = per_stage * pp
    return Sharding(
        tp=tp, pp=pp, ep=ep, n_layers=d.model.n_layers, layers_per_stage=math.ceil(d.model.n_layers / pp),
        attention_dp=ep // tp if ep > 1 else 1, expert_shards=ep if ep > 1 else tp,
        expert_weight_fraction=(math.ceil(d.model.moe.n_experts / ep) / d.model.moe.n_experts
                                if ep > 1 and d.model.moe is not None else 1.0 / tp),
        expert_imbalance=EXPERT_IMBALANCE if ep > 1 else 1.0, gpus_per_stage=per_stage, gpus_per_replica=gpus,
        nodes_per_replica=math.ceil(gpus / d.gpu.node_gpus),
        tp_link=link_for_group(d.gpu, tp), ep_link=link_for_group(d.gpu, ep if ep > 1 else 1),
        # the slowest stage boundary sets the pipeline: the whole replica's span decides it
        pp_link=link_for_group(d.gpu, gpus) if pp > 1 else Link("none", math.inf, 1),
    )


# Which layouts each engine loads (read in their sources, 2026-11):
#  * TP: every engine splits the attention heads evenly over TP ranks and the KV heads evenly, or, when
#    TP exceeds the KV heads, gives each rank one KV head replicated TP / KV-heads times. vLLM:
#    vllm/config/model.py `verify_with_parallel_config` ("Total number of attention heads (..) must be
#    divisible by tensor parallel size") and vllm/model_executor/layers/linear.py `QKVParallelLinear`
#    (`divide(tp_size, total_num_kv_heads)` when tp_size >= KV heads, else `divide(total_num_kv_heads,
#    tp_size)`); SGLang: python/sglang/srt/layers/linear.py `QKVParallelLinear`, the same two divides;
#    TensorRT-LLM shards heads the same way (one KV head per rank, replicated, when TP > KV heads).
#  * PP: uneven splits load in all three. vLLM vllm/distributed/utils.py `get_pp_indices` spreads the
#    remainder over the stages (or VLLM_PP_LAYER_PARTITION); SGLang python/sglang/srt/distributed/utils.py
#    `get_pp_indices` likewise (SGLANG_PP_LAYER_PARTITION); TensorRT-LLM tensorrt_llm/mapping.py
#    `pp_layers` uses torch.tensor_split ("first n ranks get one extra layer"). Only pp <= layers.
#  * EP: vLLM vllm/model_executor/layers/fused_moe/layer.py `determine_expert_map` gives the remainder
#    experts to the first ranks (uneven allowed); SGLang pads with redundant experts
#    (`--ep-num-redundant-experts`, the layout this planner models for an uneven ep); TensorRT-LLM
#    tensorrt_llm/mapping.py `ep_experts` takes num_experts // moe_ep_size per rank, so ep must divide the
#    experts there.
_EP_MUST_DIVIDE_EXPERTS = frozenset({"trt-llm"})


def valid_tp(model: ModelSpec, tp: int) -> bool:
    """Whether `tp` splits the attention heads evenly and the KV heads evenly or by replication."""
    kv = model.n_kv_heads
    return tp >= 1 and model.n_heads % tp == 0 and (kv % tp == 0 or tp % kv == 0)


def valid_tps(model: ModelSpec) -> list[int]:
    return [t for t in range(1, model.n_heads + 1) if valid_tp(model, t)]


def nearest_valid_tps(model: ModelSpec, tp: int) -> list[int]:
    """The closest valid TP below and above `tp` (one of them when the other does not exist)."""
    options = valid_tps(model)
    below = [t for t in options if t < tp]
    above = [t for t in options if t > tp]
    return ([below[-1]] if below else []) + ([above[0]] if above else [])


def _or_list(values: list[int]) -> str:
    return " or ".join(str(v) for v in values)


def layout_problem(model: ModelSpec, tp: int, pp: int, ep: int, engine: str = "vllm") -> ScenarioError | None:
    """Why no engine (or `engine`) loads this layout, naming the nearest valid values; None when it loads."""
    if tp > model.n_heads:
        return ScenarioError(
            "tp",
            f"{tp} cannot exceed the model's {model.n_heads} attention heads: nearest valid "
            f"{valid_tps(model)[-1]}",
        )
    if not valid_tp(model, tp):
        heads = f"{model.n_heads} attention heads"
        if model.n_kv_heads < model.n_heads:
            heads += f" and {model.n_kv_heads} KV heads (or be a multiple of the KV heads)"
        nearest = nearest_valid_tps(model, tp)
        return ScenarioError("tp", f"{tp} must divide the model's {heads}: nearest valid {_or_list(nearest)}")
    if pp > model.n_layers:
        return ScenarioError("pp", f"{pp} cannot exceed the model's {model.n_layers} layers: nearest valid "
                                   f"{model.n_layers}")
    if ep > 1 and model.moe is not None:
        # a dense model has no experts to spread: engines ignore the flag, and so does resolve()
        n = model.moe.n_experts
        ep_fits = not (ep > n or ep % tp != 0 or (engine in _EP_MUST_DIVIDE_EXPERTS and n % ep != 0))
        # the valid sizes only name the nearest in an error (every layout of a sizing request asks)
        multiples = [] if ep_fits else [e for e in range(tp, n + 1, tp)
                                        if engine not in _EP_MUST_DIVIDE_EXPERTS or n % e == 0]
        if ep > n:
            return ScenarioError("ep", f"{ep} cannot exceed the model's {n} routed experts: nearest valid "
                                       f"{_or_list(multiples[-1:])}")
        if ep % tp != 0 or (engine in _EP_MUST_DIVIDE_EXPERTS and n % ep != 0):
            below = [e for e in multiples if e < ep][-1:]
            above = [e for e in multiples if e > ep][:1]
            why = (
                f"must be a multiple of tp ({tp}): attention runs data-parallel over ep / tp groups of tp "
                "GPUs"
                if ep % tp != 0
                else f"must divide the model's {n} routed experts on TensorRT-LLM"
            )
            near = f": nearest valid {_or_list(below + above)}" if below + above else ""
            return ScenarioError("ep", f"{ep} {why}{near}")
    return None


def validate_parallelism(model: ModelSpec, tp: int, pp: int, ep: int, engine: str = "vllm") -> None:
    """One-line errors for layouts the engine does not load (layout_problem), raised."""
    problem = layout_problem(model, tp, pp, ep, engine)
    if problem is not None:
        raise problem


def effective_ep(model: ModelSpec, ep: int) -> int:
    """Expert parallelism only applies to a mixture-of-experts model."""
    return ep if model.moe is not None else 1


def parallelism_warnings(d: Deployment, requested_ep: int = 1) -> list[str]:
    s = sharding(d)
    notes = []
    if requested_ep > 1 and d.model.moe is None:
        notes.append(
            f"ep {requested_ep} ignored: {d.model.name} is dense (no experts to spread); the plan uses ep 1"
        )
    if s.tp_link.crosses_nodes:
        notes.append(
            f"tp {s.tp} spans {math.ceil(s.tp / d.gpu.node_gpus)} nodes of {d.gpu.node_gpus} GPUs: every "
            "all-reduce "
            f"crosses the network ({d.gpu.network_gb_s:g} GB/s per GPU against {d.gpu.link_gb_s:g} GB/s "
            "inside the "
            "node); keep tp inside a node and put pp (or ep) across nodes"
        )
    if s.ep_link.crosses_nodes:
        notes.append(f"ep {s.ep} spans nodes: expert dispatch/combine all-to-alls cross the network "
                     f"({d.gpu.network_gb_s:g} GB/s per GPU)")
    if s.pp_link.crosses_nodes:
        notes.append(f"pp {s.pp}: stage boundaries cross the network (point-to-point activations, small)")
    return notes


class ParallelismSection(BaseModel):
    """The plan's `parallelism` section: the layout and the link each collective crosses."""

    tp: int
    pp: int
    ep: int
    gpus_per_replica: int
    nodes_per_replica: int
    attention_dp: int
    layers_per_stage: int
    expert_imbalance: float
    links: dict[str, str]  # collective -> "none" | "scale-up" | "pcie" | "network"
    link_gb_s: dict[str, float | None]  # per GPU per direction; null where there is no link


def parallelism_section(d: Deployment) -> ParallelismSection:
    s = sharding(d)
    links = {"tp": s.tp_link, "pp": s.pp_link, "ep": s.ep_link}
    return ParallelismSection(
        tp=s.tp, pp=s.pp, ep=s.ep, gpus_per_replica=s.gpus_per_replica, nodes_per_replica=s.nodes_per_replica,
        attention_dp=s.attention_dp, layers_per_stage=s.layers_per_stage, expert_imbalance=s.expert_imbalance,
        links={k: v.kind for k, v in links.items()},
        link_gb_s={k: (None if v.kind == "none" else v.gb_s) for k, v in links.items()},
    )


MAX_LAYOUT_GPUS = 1024
_POWERS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
PP_CHOICES = (1, 2, 3, 4, 6, 8, 12, 16)


def candidate_layouts(model: ModelSpec, max_gpus: int = MAX_LAYOUT_GPUS) -> list[tuple[int, int, int]]:
    """(tp, pp, ep) layouts that pass validate_parallelism, up to `max_gpus` GPUs."""
    eps = [1] + ([e for e in _POWERS[1:] if e <= model.moe.n_experts] if model.moe is not None else [])
    out = []
    for tp in (t for t in _POWERS if t <= min(model.n_heads, 64) and valid_tp(model, t)):
        for pp in (p for p in PP_CHOICES if p <= model.n_layers):
            for ep in eps:
                if (ep > 1 and ep % tp) or max(tp, ep) * pp > max_gpus:
                    continue
                out.append((tp, pp, ep))
    return out


def cheapest_layout_that_fits(d: Deployment, fits: Callable[[Deployment], bool]) -> Deployment | None:
    """Fewest GPUs first; then fewest nodes, TP kept inside a node, fewer pipeline stages (lower ITL),
    smaller ep. `fits` is the memory check (planner.physics.memory), passed in to keep modules acyclic."""
    def key(layout: tuple[int, int, int]) -> tuple:
        tp, pp, ep = layout
        gpus = max(tp, ep) * pp
        return (gpus, math.ceil(gpus / d.gpu.node_gpus), link_for_group(d.gpu, tp).crosses_nodes, pp, ep)

    for tp, pp, ep in sorted(candidate_layouts(d.model), key=key):
        trial = dataclasses.replace(d, tp=tp, pp=pp, ep=ep)
        if fits(trial):
            return trial
    return None


__all__ = [
    "ParallelismSection", "candidate_layouts", "cheapest_layout_that_fits", "effective_ep",
    "parallelism_section", "EXPERT_IMBALANCE", "Link", "Sharding", "layout_problem", "link_for_group",
    "nearest_valid_tps", "parallelism_warnings", "sharding", "valid_tp", "valid_tps", "validate_parallelism",
]
