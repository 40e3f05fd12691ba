"""A disaggregated fleet as a sizing option: the contract's option fields from its pools' workers and counts
(planner.serving.disaggregation sizes them), and the layout summary each pool shows."""

from __future__ import annotations

from typing import Any, Protocol

from planner.core.deployment import Deployment
from planner.economics.cost import usd_per_million_tokens
from planner.engines.kv_transfer import KvTransferPath
from planner.hardware.parallelism import sharding
from planner.serving.pool_checks import DecodeSide

Priced = tuple[float, Any, str, float]  # (cost per unit of work, worker, GPU key, $/GPU-hour)


class SizedFleet(Protocol):
    """A fleet's worker counts (planner.serving.disaggregation._Sized), its TTFT figures on demand."""

    @property
    def decode(self) -> DecodeSide: ...

    @property
    def prefill_workers(self) -> int: ...

    @property
    def transfer_ms(self) -> float: ...

    @property
    def prefill_utilization(self) -> float: ...

    def fleet(self) -> Any: ...


def layout_summary(d: Deployment, gpu_key: str) -> dict[str, Any]:
    s = sharding(d)
    return {"gpu": gpu_key, "tp": s.tp, "pp": s.pp, "ep": s.ep, "weights": d.weights, "kv_cache": d.kv_cache,
            "gpus_per_worker": s.gpus_per_replica, "nodes_per_worker": s.nodes_per_replica}


def fleet_option(sized: SizedFleet, prefill: Priced, decode: Priced, requests_per_s: float,
                 output_len: int, percentile: int, path: KvTransferPath) -> dict[str, Any]:
    """One disaggregated fleet as a sizing option (the contract's option fields). Each pool carries its GPU
    count and $/hour, which sum to the option's `gpus_total` and `usd_per_hour`: the banner, the table and
    the opened fleet all read these. Its TTFT figures wait for its private `_finish()` (None until then)."""
    side = sized.decode
    _, pw, p_key, p_price = prefill
    _, dw, d_key, d_price = decode
    gpus_p, gpus_d = sized.prefill_workers * pw.gpus, side.workers * dw.gpus
    usd_p, usd_d = gpus_p * p_price, gpus_d * d_price
    usd = usd_p + usd_d
    option: dict[str, Any] = {
        "mode": "disaggregated", "prefill_workers": sized.prefill_workers,
        "decode_workers": side.workers,
        "prefill_decode_ratio": sized.prefill_workers / side.workers,
        "prefill": {**layout_summary(pw.deployment, p_key), "prefill_ms": pw.prefill_ms,
                    "prompts_per_s_per_worker": pw.prompts_per_s,
                    "utilization": sized.prefill_utilization, "usd_per_gpu_hour": p_price,
                    "request_rate_per_worker": requests_per_s / sized.prefill_workers,
                    "workers": sized.prefill_workers, "gpus": gpus_p, "usd_per_hour": usd_p},
        "decode": {**layout_summary(dw.deployment, d_key),
                   "batch": max(1, round(float(side.point.population))),
                   "itl_ms": side.itl_ms,
                   "max_running": dw.max_running, "goodput_request_rate": dw.goodput_per_s,
                   "utilization": side.utilization, "itl_ms_simulated_high": side.itl_high_ms,
                   "slot_wait_probability": side.wait_probability, "slot_wait_mean_ms": side.wait_mean_ms,
                   "request_rate_per_worker": requests_per_s / side.workers,
                   "output_tokens_per_s_per_worker": dw.output_tokens_per_s,
                   "usd_per_gpu_hour": d_price,
                   "workers": side.workers, "gpus": gpus_d, "usd_per_hour": usd_d},
        "gpus_total": gpus_p + gpus_d, "ttft_ms": None, "itl_ms": side.itl_ms,
        "percentile": percentile,
        # issue 31: judged as an aggregated option is (the busier pool's utilization; the range's tops)
        "utilization": max(sized.prefill_utilization, side.utilization),
        "ttft_ms_simulated_high": None, "itl_ms_simulated_high": side.itl_high_ms,
        "slot_wait_probability": side.wait_probability, "slot_wait_mean_ms": side.wait_mean_ms,
        "kv_transfer_ms": sized.transfer_ms, "kv_transfer_path": path.as_dict(),
        "usd_per_hour": usd,
        "usd_per_million_output_tokens": usd_per_million_tokens(usd, requests_per_s * output_len),
    }

    def finish() -> None:
        fleet = sized.fleet()
        option.update(ttft_ms=fleet.ttft_ms, ttft_ms_simulated_high=fleet.ttft_simulated_high_ms)
    option["_finish"] = finish
    return option
