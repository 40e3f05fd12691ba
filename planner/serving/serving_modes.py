"""Serving modes: the sizing search over aggregated replicas and disaggregated prefill/decode fleets.

A sizing request with `disaggregation: true` runs the aggregated search (planner.serving.sizing) and the
disaggregated one (planner.serving.disaggregation) on the same traffic and objectives, tags every option with
its `mode`, and says in `assumptions.modes` which mode wins and why. Extra request fields:
`disaggregation` (false), `prefill_gpus` / `decode_gpus` (each pool's GPU list; default: `gpus`),
`pp` ([1]) and `ep` ([1]; MoE models only) for the disaggregated pools. Disaggregated pools pair within one
vendor over a documented KV-transfer path (planner.serving.disaggregation).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gpu_catalog import load_catalog
from planner.core.errors import ScenarioError, from_validation_error
from planner.economics.cost import gpu_price
from planner.engines.base import ENGINE_LABELS
from planner.hardware.validated import is_validated
from planner.scenario.scenario import resolve_gpu, resolve_model
from planner.serving.cost_cutoff import shown_below_usd
from planner.serving.disaggregation import PoolCandidate, TrafficShape, disaggregated_options
from planner.serving.layout_memo import LayoutMemo, layout_key
from planner.serving.request_bounds import check_work, dedupe_lists
from planner.serving.sizing import (
    _finish,
    families,
    fit_hints,
    gpu_key,
    parse_sizing,
    prepared_families,
    size,
)
from planner.serving.sizing_request import SizingRequest

Options = list[dict[str, Any]]
MODE_FIELDS = ("disaggregation", "prefill_gpus", "decode_gpus")  # pp and ep are the sizing request's own
KV_TRANSFER_ASSUMPTION = (
    "prefill and decode pools pair only on one vendor's accelerators, on an engine with a documented "
    "KV-transfer path (planner/data/kv_transfer_paths.toml); each disaggregated option names its path; "
    "both pools are confirmed as replicas are (the simulated range's top, the decode slot wait, the "
    "headroom: planner/serving/pool_checks.py) and each shows its utilization")


class ModeSettings(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    disaggregation: bool = False
    prefill_gpus: list[str | dict[str, Any]] | None = Field(default=None, min_length=1, max_length=100)
    decode_gpus: list[str | dict[str, Any]] | None = Field(default=None, min_length=1, max_length=100)


def _pool(gpus, tps, pps, eps, weights, kvs, compute=None) -> list[PoolCandidate]:
    return [PoolCandidate(gpu_key(g), g, tp, w, kv, pp=pp, ep=ep, compute=compute)
            for g in gpus for tp in tps for pp in pps for ep in eps for w in weights for kv in kvs]


def check_modes(data: dict[str, Any]) -> ModeSettings:
    """The request's serving-mode fields, validated (ScenarioError naming the field)."""
    try:
        return ModeSettings.model_validate({k: data[k] for k in MODE_FIELDS if k in data})
    except ValidationError as err:
        raise from_validation_error(err) from None


def _parsed(data: Any) -> tuple[ModeSettings, SizingRequest]:
    """The request's modes and sizing request, within the work bound (ScenarioError names a field)."""
    if not isinstance(data, dict):
        raise ScenarioError("sizing", "must be a JSON object")
    data = dedupe_lists(data)
    modes = check_modes(data)
    req = parse_sizing({k: v for k, v in data.items() if k not in MODE_FIELDS})
    check_work([families(req)] + ([families(req, modes.prefill_gpus), families(req, modes.decode_gpus)]
                                  if modes.disaggregation else []), req.max_options)
    return modes, req


def prepared_layouts(data: Any, max_families: int | None = None) -> LayoutMemo | None:
    """The per-layout figures the request's search plans first (each family's deployment, memory plan,
    decode-step table and prompt-work floor: sizing.prepared_families; and a lone prompt's prefill), computed
    ahead of the search:
    size_with_modes(data, this) answers as size_with_modes(data) does, each figure being the one the plain
    call gives (planner.serving.layout_memo), without that work. The app prepares them while the user reads
    the form (ui/search_runner.py). None past `max_families` (a bound on work done before anyone asked)."""
    _, req = _parsed(data)
    if max_families is not None and families(req) > max_families:
        return None
    memo, hints = LayoutMemo(), fit_hints(req)
    kept = prepared_families(req, hints, memo)
    memo.keep_families(hints, kept)  # the search takes them as they are: no family prepared twice
    for p in kept[0]:  # a lone prompt's prefill, which the exact cost floors and the prefill pools read (not
        # the prompt's work itself: held, it would stand in for the bound that orders the families)
        f = p.fam
        memo.prefill_ms(layout_key(f.gpu_value, f.tp, f.pp, f.ep, f.weights, f.kv_cache), p.d,
                        float(req.traffic.prompt_len))
    return memo


def size_with_modes(data: Any, memo: LayoutMemo | None = None) -> dict[str, Any]:
    """The sizing search with its serving modes; `memo`: prepared_layouts(data)'s, when the caller holds it
    (a memo of another request would hold its figures: only this request's may be passed)."""
    modes, req = _parsed(data)
    memo = memo if memo is not None else LayoutMemo()  # the aggregated and disaggregated searches share it
    disagg: list[Options] = []  # the disaggregated options, searched once the aggregated layouts are prepared
    searched = [0]

    def shown_below() -> float:  # no aggregated option dearer than this is shown, but its mode's cheapest
        options, searched[0] = _disaggregated(req, modes, memo)
        disagg.append(options)
        return shown_below_usd(options, req.max_options)
    # with disaggregation only the aggregated options shown are finished (TTFT, E2E, slot wait, range)
    result = size(req, memo, finish=not modes.disaggregation,
                  shown_below=shown_below if modes.disaggregation else None)
    for option in result["options"]:  # an aggregated replica prefills and decodes: no separate workers
        option.setdefault("mode", "aggregated")
        option.setdefault("prefill_workers", None)
        option.setdefault("decode_workers", None)
        option["validated"] = is_validated(option["gpu"])
    if not modes.disaggregation:
        return result
    shown = _shown(result["options"], disagg[0], req.max_options)
    result.update(options=shown, feasible=result["feasible"] + len(disagg[0]),
                  searched=result["searched"] + searched[0])
    result["assumptions"]["modes"] = modes_verdict(shown)
    result["assumptions"]["kv_transfer"] = KV_TRANSFER_ASSUMPTION
    return result


def _disaggregated(req: SizingRequest, modes: ModeSettings, memo: LayoutMemo) -> tuple[Options, int]:
    """The request's disaggregated options (each with `validated`) and the configurations searched."""
    model = resolve_model(req.model)
    if model.moe is None and any(e > 1 for e in req.ep):
        raise ScenarioError("ep", "expert parallelism needs a mixture-of-experts model; this one is dense")
    gpus = req.gpus if req.gpus is not None else list(load_catalog())
    for field, pool in (("prefill_gpus", modes.prefill_gpus), ("decode_gpus", modes.decode_gpus)):
        for i, g in enumerate(pool or []):
            resolve_gpu(g, f"{field}.{i}")
    t = req.traffic
    context = req.context_len or t.prompt_len + t.output_len
    base = {"model": req.model, "context_len": context, "prompt_len": t.prompt_len,
            "output_len": t.output_len,
            "memory": req.memory.model_dump(), "efficiency": req.efficiency}
    prices = req.usd_per_gpu_hour or {}

    def price_of(key: str, value: Any) -> float | None:
        return gpu_price(prices.get(key), resolve_gpu(value)[0])

    prefill_pool = _pool(modes.prefill_gpus or gpus, req.tp, req.pp, req.ep, req.weights, req.kv_cache,
                         req.compute)
    decode_pool = _pool(modes.decode_gpus or gpus, req.tp, req.pp, req.ep, req.weights, req.kv_cache,
                        req.compute)
    disagg, searched = disaggregated_options(base, prefill_pool, decode_pool, t.requests_per_s, t.prompt_len,
                                             t.output_len, context, req.slo.ttft_ms, req.slo.itl_ms, price_of,
                                             TrafficShape(t.prompt_len, t.output_len, t.arrival_cv,
                                                          t.prompt_len_cv,
                                                          t.output_len_cv, t.prefix_cache_hit),
                                             req.slo.percentile, memo, req.max_utilization,
                                             req.max_options, req.slo.tpot_ms)
    for option in disagg:  # validated only when both pools run on validated GPUs
        option["validated"] = is_validated(option["prefill"]["gpu"]) and is_validated(option["decode"]["gpu"])
    return disagg, searched



def _shown(aggregated: Options, disagg: Options, max_options: int) -> Options:
    """Both modes' options by $/hour then ITL, the first `max_options` with each mode's cheapest kept; only
    the aggregated options shown are finished (planner.serving.sizing._finish: TTFT, E2E, slot wait, simulated
    range; their ranking ITL is final already), their fields in the order size gives them."""
    unfinished = {id(o): o.pop("_finish") for o in aggregated}
    options = sorted(aggregated + disagg, key=lambda o: (o["usd_per_hour"], o["itl_ms"]))
    shown = options[:max_options]
    for mode in ("aggregated", "disaggregated"):  # each mode's cheapest stays listed: the verdict names it
        best = next((o for o in options if o["mode"] == mode), None)
        if best is not None and best not in shown and len(shown) > 1:
            shown[-1] = best  # dearer than every option before it, so the order holds
    for option in shown:
        if id(option) in unfinished:
            option["_finish"] = unfinished[id(option)]
            _finish(option)
            for key in ("mode", "prefill_workers", "decode_workers", "validated"):  # the mode fields last
                option[key] = option.pop(key)
    return shown


def decode_worker_scenario(option: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    """The scenario of a disaggregated option's decode worker, at the rate each worker runs: the prompt's KV
    arrives computed from a prefill worker (prefix-cache hit 1, as planner.serving.disaggregation's decode
    worker models it), so its plan shows the decode pool's ITL at the objective's percentile. The fleet's
    TTFT (prefill queue + prefill + KV transfer + first step) is the option's, not this worker's."""
    if option.get("mode") != "disaggregated":
        raise ScenarioError("option", "is not a disaggregated option")
    dec, traffic = option["decode"], request["traffic"]
    slo = request["slo"]
    shape = {k: traffic[k] for k in ("arrival_cv", "prompt_len_cv", "output_len_cv") if k in traffic}
    return {
        "model": request["model"], "gpu": dec["gpu"], "tp": dec["tp"], "pp": dec.get("pp",
                                                                                     1), "ep": dec.get("ep",
                                                                                                       1),
        "weights": dec["weights"], "kv_cache": dec["kv_cache"],
        "context_len": request.get("context_len") or traffic["prompt_len"] + traffic["output_len"],
        "prompt_len": traffic["prompt_len"], "output_len": traffic["output_len"],
        "load": {**shape, "prefix_cache_hit": 1.0, "request_rate": dec["request_rate_per_worker"],
                 "slo": {"itl_ms": slo["itl_ms"], "percentile": option.get("percentile", slo.get("percentile",
                                                                                                 90))}},
    }


def modes_verdict(options: list[dict[str, Any]]) -> dict[str, Any]:
    """Which mode wins among `options` in the order they are shown, and why: the first aggregated option
    against the first disaggregated one, each named by its 1-based number in that list
    (`aggregated_option`, `disaggregated_option`; None when the list has none). The sizing result's
    `assumptions.modes` is this over its own ranking; a page that reorders the options (validated GPUs
    first) asks again over its order, so that the verdict, the table and the option opened are one fleet."""
    def first(mode: str) -> tuple[int | None, dict[str, Any] | None]:
        return next(((i + 1, o) for i, o in enumerate(options) if o.get("mode", "aggregated") == mode),
                    (None, None))

    agg_n, agg = first("aggregated")
    dis_n, dis = first("disaggregated")
    numbers = {"aggregated_option": agg_n, "disaggregated_option": dis_n}
    if agg is None and dis is None:
        return {"winner": None, "why": "neither mode meets the objectives at this traffic", **numbers}
    if agg is not None and (dis is None or agg["usd_per_hour"] <= dis["usd_per_hour"]):
        why = ("no disaggregated fleet meets the objectives" if dis is None else
               f"option {agg_n} (aggregated replicas) costs ${agg['usd_per_hour']:.2f}/h against "
               f"${dis['usd_per_hour']:.2f}/h for option {dis_n} (disaggregated): at this traffic the decode "
               "batch absorbs the prefills and a separate prefill pool (plus the KV transfer) costs more "
               "than it saves")
        return {"winner": "aggregated", "why": why, **numbers}
    assert dis is not None
    pre, dec = dis["prefill"], dis["decode"]
    path = dis.get("kv_transfer_path") or {}
    fleet = (f"option {dis_n}: {dis['prefill_workers']} prefill worker(s) on {pre['gpu']} TP{pre['tp']} "
             f"({pre['gpus']} GPUs, ${pre['usd_per_hour']:.2f}/h) and {dis['decode_workers']} decode "
             f"worker(s) on {dec['gpu']} TP{dec['tp']} ({dec['gpus']} GPUs, ${dec['usd_per_hour']:.2f}/h), "
             f"{dis['gpus_total']} GPUs at ${dis['usd_per_hour']:.2f}/h")
    why = ((f"no aggregated replica meets the objectives (prefills interleaved with decode push ITL or TTFT "
            f"past them); {fleet}") if agg is None else
           f"{fleet}, against ${agg['usd_per_hour']:.2f}/h for option {agg_n} (aggregated): decode workers "
           f"run at batch {dec['batch']} with no prefill interference (ITL {dis['itl_ms']:.1f} ms) while the "
           f"prefill pool keeps TTFT at {dis['ttft_ms']:.0f} ms, KV transfer {dis['kv_transfer_ms']:.1f} ms "
           "included")
    if path:
        why += f"; KV cache transfer: {ENGINE_LABELS.get(path['engine'], path['engine'])} {path['path']}"
    return {"winner": "disaggregated", "why": why, **numbers}


__all__ = ["MODE_FIELDS", "check_modes", "decode_worker_scenario", "fit_hints", "modes_verdict",
           "size_with_modes"]
