"""The step-time predictor interface (issue 30, item 1): Vidur's split between an execution-time predictor and
the scheduler that asks it.

The scheduler side (planner.serving: the replica's queue model, the closed-loop benchmark client, sizing)
asks for two times only, through planner.physics.latency's entry points: a decode step of `batch` sequences
at `context` cached tokens (`decode_step`) and a prompt's prefill (`prefill`, whose difference with an empty
iteration is a chunk's work, `prefill_chunk_work_ms`). Which predictor answers is named by the deployment's
efficiency, and every predictor's step is at least the roofline of its work (`StepTime.bound_ms`):

- "roofline": the pure roofline (`efficiency: "ideal"`), the floor every other one sits on;
- "graph": our compiled-step physics (fractions of peak fitted on our own measurements);
- "production": the graph physics with an engine's terms fitted on public serving runs of its GPU generation
  (planner/data/engine_profiles.json, tools/fit_production_engines.py);
- "kernel_tables": the engine's own measured kernels, interpolated by the model's layer shapes
  (planner.physics.kernel_step, planner/data/kernel_tables/), plus the engine's fitted per-step host cost;
- "calibration": the user's calibration fitted on their own benchmark (planner.physics.calibration).
"""

from __future__ import annotations

from typing import Literal, Protocol

import numpy.typing as npt

from planner.core.deployment import Deployment
from planner.core.efficiency import EngineEfficiency
from planner.core.model_shapes import ModelSpec
from planner.engines.base import ENGINES
from planner.engines.profile_records import EXTRAPOLATED, band_quantiles
from planner.engines.profiles import gpu_generation, profiles
from planner.physics import latency
from planner.physics.kernel_step import tables_key
from planner.physics.kernel_tables import kernel_terms
from planner.physics.latency import StepTime

PredictorName = Literal["roofline", "graph", "production", "kernel_tables", "calibration", "custom"]
PREDICTORS: tuple[str, ...] = ("roofline", "graph", "production", "kernel_tables", "calibration", "custom")


class StepPredictor(Protocol):
    """What the scheduler asks an execution-time predictor."""

    name: str

    def decode_step(self, d: Deployment, batch: npt.ArrayLike, context: npt.ArrayLike,
                    tokens_per_sequence: int = 1) -> StepTime: ...

    def prefill(self, d: Deployment, prompt_len: npt.ArrayLike, busy_groups: int = 1) -> StepTime: ...


class DeploymentPredictor:
    """The predictor a deployment names through its efficiency (physics fractions of peak, or kernel tables):
    planner.physics.latency dispatches on it, so this is the one implementation callers need."""

    def __init__(self, name: str) -> None:
        self.name = name

    def decode_step(self, d: Deployment, batch: npt.ArrayLike, context: npt.ArrayLike,
                    tokens_per_sequence: int = 1) -> StepTime:
        return latency.decode_step(d, batch, context, tokens_per_sequence)

    def prefill(self, d: Deployment, prompt_len: npt.ArrayLike, busy_groups: int = 1) -> StepTime:
        return latency.prefill(d, prompt_len, busy_groups)


def predictor_name(efficiency: EngineEfficiency, calibrated: bool = False) -> str:
    """The predictor a plan names (`latency.step_predictor`)."""
    if efficiency.kernel_tables is not None:
        return "kernel_tables"
    if calibrated:
        return "calibration"
    if efficiency.name == "ideal":
        return "roofline"
    if efficiency.name == "graph":
        return "graph"
    return "production" if efficiency.name in ENGINES else "custom"


def predictor_for(d: Deployment, calibrated: bool = False) -> StepPredictor:
    return DeploymentPredictor(predictor_name(d.efficiency, calibrated))


def with_kernel_tables(efficiency: EngineEfficiency, gpu_id: str | None,
                       engine: str) -> EngineEfficiency | None:
    """`efficiency` answering from the kernel tables of the GPU x engine, with the kernel predictor's own
    fitted host and frontend costs on the GPU's generation where they exist (planner/data/kernel_tables/
    kernel_terms.json); None where there are no tables (AMD GPUs, GPUs the source did not measure): the plan
    keeps the fitted physics and says so."""
    key = tables_key(gpu_id, engine)
    if key is None:
        return None
    # issue 30: the expert all-to-all's terms fitted on this predictor's own residuals, where the engine's
    # production record holds them (tools/fit_production_engines.ep_terms_from_tables)
    record = profiles()["engines"][engine].get("production", {}).get(gpu_generation(gpu_id) or "", {})
    return efficiency.model_copy(update={"kernel_tables": key, **kernel_host_terms(gpu_id, engine),
                                         **record.get("kernel_table_terms", {})})


def kernel_host_terms(gpu_id: str | None, engine: str) -> dict[str, float]:
    """The kernel-table predictor's fitted host and frontend costs on the GPU's generation ({} where none)."""
    terms = kernel_terms(engine, gpu_generation(gpu_id))
    if terms is None:
        return {}
    names = ("step_overhead_us", "ttft_overhead_ms", "ttft_per_running_ms")
    return {name: float(terms[name]) for name in names}


# Engines whose default plan of a model outside its production record's fitted families ("extrapolated") is
# answered by the kernel tables, held out by architecture family on public runs (docs/ACCURACY.md, where the
# figures behind this choice are regenerated): on vLLM and TensorRT-LLM the tables' held-out TPOT error is a
# fraction of the production fit's on the families it was not fitted on. SGLang keeps the production fit: its
# tables' figures are DeepSeek-R1's, an MLA model this default never plans from the tables; on the other
# families it ran the tables read the decode kernels short (Qwen3-8B on H100, and the SGLang cookbook's
# Qwen3-235B, GLM-4.6 and MiniMax-M2.5 on B200: the raw sum 21-44% under the measured TPOT), where a host
# cost fitted on DeepSeek-R1 does not carry over.
KERNEL_DEFAULT_ENGINES = ("vllm", "trt-llm")


def default_efficiency(base: EngineEfficiency, gpu_id: str | None, engine: str, model: ModelSpec,
                       gpus: int, ep: int) -> EngineEfficiency:
    """The default plan's efficiency: the engine's production fit where the model's family is inside its
    record's fit, the kernel tables where the plan would extrapolate the fit, within what the tables and
    their validation cover: one node (<= 8 GPUs, expert parallelism <= 8: the tables' MoE splits and
    all-reduces; no expert all-to-all across nodes) and no MLA (no public vLLM run of an MLA model here)."""
    if engine not in KERNEL_DEFAULT_ENGINES or gpus > 8 or ep > 8 or model.mla is not None:
        return base
    _, where = band_quantiles(engine, gpu_id, model, "tpot")
    if where != EXTRAPOLATED:
        return base
    return with_kernel_tables(base, gpu_id, engine) or base
