"""The plan's `economics` section: power and energy at the serving operating point
(planner.economics.power's model; each figure from its one function there)."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel

from planner.core.deployment import Deployment
from planner.economics.power import (
    POWER_MODEL,
    EconomicsSettings,
    energy_usd_per_million_tokens,
    joules_per_token,
    operating_power_w,
    operating_utilization,
    power_spec,
    provisioned_kw,
    replica_power_w,
    site_power_w,
    step_gpu_power_w,
    step_utilization,
    tokens_per_s_per_provisioned_mw,
)
from planner.physics.latency import StepTime, decode_step, prefill
from planner.physics.roofline import compute_floor_ms


class EconomicsSection(BaseModel):
    """Power at the operating point (null figures where the replica serves nothing stable)."""

    electricity_usd_per_kwh: float
    tdp_w: float
    idle_power_w: float
    provisioned_kw_all_in_per_gpu: float
    provisioned_kw_per_replica: float
    utilization: float | None  # time-weighted fraction of peak on the binding resource
    prefill_utilization: float
    decode_utilization: float | None
    gpu_watts_per_replica: float | None  # the GPUs alone
    watts_per_replica: float | None  # all-in: GPUs, host, network, cooling
    joules_per_output_token: float | None  # all-in
    gpu_joules_per_output_token: float | None
    output_tokens_per_s_per_provisioned_mw: float | None
    total_tokens_per_s_per_provisioned_mw: float | None
    energy_usd_per_million_output_tokens: float | None  # all-in draw x electricity price
    power_model: str
    power_origin: dict[str, str]
    # issue 31: what the draw follows from (the HBM traffic and tensor-core load of each phase's step)
    prefill_hbm_tb_s: float = 0.0
    prefill_compute_utilization: float = 0.0
    decode_hbm_tb_s: float | None = None
    decode_compute_utilization: float | None = None


@dataclass(frozen=True)
class StepPower:
    """What one step puts on a GPU: the binding resource's utilization, the HBM traffic, the tensor-core
    load, and the draw that follows."""

    utilization: float  # roofline bound time / step time
    hbm_tb_s: float  # the step's bytes over its time
    compute_utilization: float  # the step's FLOPs at the dense peak over its time
    gpu_w: float


def step_power(d: Deployment, step: StepTime) -> StepPower:
    """One GPU's draw over one step, from the HBM traffic and the tensor-core load of its bytes and FLOPs."""
    step_ms = float(step.total_ms)
    u = step_utilization(float(step.bound_ms), step_ms)
    if not step_ms > 0:
        return StepPower(u, 0.0, 0.0, power_spec(d.gpu).idle_power_w)
    hbm_tb_s = float(step.work.bytes) / (step_ms * 1e-3) / 1e12
    compute_u = step_utilization(float(compute_floor_ms(d, step.work)), step_ms)
    return StepPower(u, hbm_tb_s, compute_u, step_gpu_power_w(power_spec(d.gpu), hbm_tb_s, compute_u))


def economics_section(d: Deployment, prompt_len: int, mean_context: float, gpus: int,
                      prefill_share: float | None, decoding_sequences: float | None,
                      output_tokens_per_s: float | None, total_tokens_per_s: float | None,
                      settings: EconomicsSettings | None) -> EconomicsSection:
    """Power figures of one replica at its operating point (the serving figures given, None when unstable)."""
    settings = settings or EconomicsSettings()
    spec = power_spec(d.gpu)
    prefill_power = step_power(d, prefill(d, prompt_len))
    u_prefill = prefill_power.utilization
    served = (prefill_share is not None and decoding_sequences is not None and output_tokens_per_s is not None
              and output_tokens_per_s > 0)
    kw = provisioned_kw(spec, gpus)
    u_decode = u = gpu_w = site_w = None
    decode_power: StepPower | None = None
    if served:
        assert prefill_share is not None and decoding_sequences is not None  # for mypy: `served` says so
        decode_power = step_power(d, decode_step(d, max(decoding_sequences, 1.0), mean_context))
        u_decode = decode_power.utilization
        u = operating_utilization(prefill_share, u_prefill, u_decode)
        phase_w = operating_power_w(prefill_share, prefill_power.gpu_w, decode_power.gpu_w)
        gpu_w = replica_power_w(phase_w, gpus)
        site_w = site_power_w(spec, gpu_w)
    tokens = output_tokens_per_s or 0.0
    return EconomicsSection(
        electricity_usd_per_kwh=settings.electricity_usd_per_kwh, tdp_w=spec.tdp_w,
        idle_power_w=spec.idle_power_w, provisioned_kw_all_in_per_gpu=spec.provisioned_kw_all_in,
        provisioned_kw_per_replica=kw, utilization=u, prefill_utilization=u_prefill,
        decode_utilization=u_decode, gpu_watts_per_replica=gpu_w, watts_per_replica=site_w,
        joules_per_output_token=joules_per_token(site_w, tokens) if site_w is not None else None,
        gpu_joules_per_output_token=joules_per_token(gpu_w, tokens) if gpu_w is not None else None,
        output_tokens_per_s_per_provisioned_mw=tokens_per_s_per_provisioned_mw(tokens, kw)
        if served
        else None,
        total_tokens_per_s_per_provisioned_mw=(
            tokens_per_s_per_provisioned_mw(total_tokens_per_s or 0.0, kw) if served else None
        ),
        energy_usd_per_million_output_tokens=(
            energy_usd_per_million_tokens(site_w, tokens, settings.electricity_usd_per_kwh)
            if site_w is not None
            else None
        ),
        power_model=POWER_MODEL, power_origin=spec.origin,
        prefill_hbm_tb_s=prefill_power.hbm_tb_s,
        prefill_compute_utilization=prefill_power.compute_utilization,
        decode_hbm_tb_s=decode_power.hbm_tb_s if decode_power else None,
        decode_compute_utilization=decode_power.compute_utilization if decode_power else None,
    )
