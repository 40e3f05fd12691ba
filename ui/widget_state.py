"""The scenario in the sidebar's widget state: widget state lives in st.session_state under the keys below;
`seed_widgets` writes a scenario into them and `read_scenario` turns them back into one. Changes for widgets
already drawn are queued for the next run (`queue_scenario`, `apply_queued`)."""

from __future__ import annotations

from typing import Any

import streamlit as st

from gpu_catalog import DEFAULT_INTERCONNECT_GB_S, custom_gpu_template, load_catalog
from planner.engines.base import DEFAULT_MAX_NUM_BATCHED_TOKENS
from planner.scenario.scenario import DEFAULT_MEMORY_UTILIZATION, DEFAULT_RESERVE_GB
from planner.serving.operating_point import DEFAULT_OBJECTIVE

CUSTOM = "custom"
# Streamlit drops a widget's value on a run that does not draw it (another view shown): the views' inputs keep
# theirs for the session (`**KEEP`), so that the view, and the share link, hold them as the user left them.
KEEP: dict[str, Any] = {"persist_state": "session"}


AT_OBJECTIVE = "at objective"


ENGINE_KNOBS = ("max_model_len", "block_size", "max_num_seqs", "vllm_sampler")


GIB_PER_GB = 1e9 / 2**30  # the reserve input is in GiB; the contract's memory.reserve_gb stays decimal GB


# (min, max) of every numeric widget: the planner's own accepted
# range (planner/scenario/scenario.py), or wider,
# so that any value a link or a file can hold is shown as it is and the planner judges it.
WIDGET_BOUNDS: dict[str, tuple[float, float]] = {
    "m_n_layers": (1, 1_000_000), "m_d_model": (1, 100_000_000), "m_n_heads": (1, 10_000_000),
    "m_n_kv_heads": (1, 10_000_000), "m_head_dim": (1, 100_000_000), "m_d_ff": (1, 1_000_000_000),
    "m_vocab_size": (1, 1_000_000_000), "m_n_params_b": (0.0, 1e9), "g_memory_gb": (0.0, 1e6),
    "g_hbm_tb_s": (0.0, 1e6), "g_bf16": (0.0, 1e9), "g_fp8": (0.0, 1e9), "g_fp4": (0.0, 1e9),
    "g_link": (0.0, 1e9), "context_len": (1, 100_000_000), "prompt_len": (1, 100_000_000),
    "output_len": (1, 100_000_000), "batch": (1, 10_000_000), "utilization": (0.0, 1.0),
    "reserve_gib": (0.0, 10_000.0 * GIB_PER_GB), "pp": (1, 256), "ep": (1, 1024), "load_rate": (0.0, 1e6),
    "traffic_rps": (1e-6, 1e7), "load_concurrency": (1, 10_000_000), "slo_ttft": (0.0, 1e7),
    "slo_itl": (0.0, 1e7), "slo_tpot": (0.0, 1e7), "arrival_cv": (0.0, 10.0), "prompt_len_cv": (0.0, 10.0),
    "output_len_cv": (0.0, 10.0), "prefix_cache_hit": (0.0, 1.0), "max_num_batched_tokens": (16, 10_000_000),
    "price": (0.0, 100_000.0), "spec_k": (1, 64), "spec_p": (0.0, 1.0), "spec_draft_b": (0.0, 10_000.0),
}


MODEL_FIELDS = ("n_layers", "d_model", "n_heads", "n_kv_heads", "head_dim", "d_ff", "vocab_size")


CUSTOM_MODEL_DEFAULT = {"name": "my-model", "n_layers": 32, "d_model": 4096, "n_heads": 32, "n_kv_heads": 8,
                        "head_dim": 128, "d_ff": 14336, "vocab_size": 128256, "tied_embeddings": False}


# No source: the price input's starting value for a GPU that has none (a custom GPU given without
# usd_per_hour). The plan itself never invents a price: without one it warns and leaves costs empty.
PLACEHOLDER_USD_PER_GPU_HOUR = 2.0


def _reserve_gb(ss: Any) -> float:
    """memory.reserve_gb of the GiB input: the seeded link's own figure while the input still shows it (a
    GB -> GiB -> GB round trip can move the last digit, and a link must reproduce itself), else converted."""
    gib, seed = float(ss["reserve_gib"]), ss.get("reserve_seed")
    return float(seed[1]) if seed is not None and seed[0] == gib else gib / GIB_PER_GB


def catalog_price(gpu_id: str) -> float:
    gpu = load_catalog().get(gpu_id)
    return float(gpu.usd_per_hour) if gpu and gpu.usd_per_hour else PLACEHOLDER_USD_PER_GPU_HOUR


def _within_bounds(ss: Any) -> list[tuple[str, str]]:
    """Values a widget cannot show are brought into its range, and each such change is reported."""
    problems = []
    for key, (low, high) in WIDGET_BOUNDS.items():
        if key not in ss:
            continue
        value = ss[key]
        if not low <= value <= high:
            kept = type(value)(min(max(value, low), high))
            ss[key] = kept
            problems.append(
                (key, f"{value:g} is outside the input's range {low:g} to {high:g}; shown as {kept:g}")
            )
    return problems


def _seed_model(ss: Any, model: Any) -> None:
    """The model inputs: a preset's name, an imported config.json carried whole, or a custom shape."""
    ss["model_extra"] = None
    if isinstance(model, str):
        ss["model_choice"] = model
        custom = dict(CUSTOM_MODEL_DEFAULT)
    else:
        ss["model_choice"] = CUSTOM
        custom = dict(CUSTOM_MODEL_DEFAULT)
        if set(model) == {"hf_config"}:
            ss["model_extra"] = model  # imported config travels whole
        else:
            extra = {
                k: v
                for k, v in model.items()
                if k not in (*MODEL_FIELDS, "name", "tied_embeddings", "n_params")
            }
            ss["model_extra"] = extra or None
            custom.update(
                {
                    k: v
                    for k, v in model.items()
                    if k in (*MODEL_FIELDS, "name", "tied_embeddings", "n_params")
                }
            )
            if model.get("head_dim") is None and "d_model" in model and "n_heads" in model:
                custom["head_dim"] = model["d_model"] // model["n_heads"]
    for field in MODEL_FIELDS:
        ss[f"m_{field}"] = int(custom[field])
    ss["m_name"] = str(custom.get("name", "my-model"))
    ss["m_tied"] = bool(custom.get("tied_embeddings", False))
    ss["m_n_params_b"] = float(custom.get("n_params") or 0.0) / 1e9


def _seed_gpu(ss: Any, gpu: Any) -> dict[str, Any]:
    """The GPU inputs: a catalog id, or a custom GPU's figures; returns the custom GPU's figures."""
    g = custom_gpu_template()  # the catalog's H100 SXM figures
    if isinstance(gpu, str):
        ss["gpu_choice"] = gpu
    else:
        ss["gpu_choice"] = CUSTOM
        g.update(gpu)
    ss["g_name"] = str(g["name"])
    ss["g_memory_gb"] = float(g["memory_gb"])
    ss["g_hbm_tb_s"] = float(g["hbm_tb_s"])
    ss["g_bf16"] = float(g["tflops"].get("bf16", 0.0))
    ss["g_fp8"] = float(g["tflops"].get("fp8", 0.0))
    ss["g_fp4"] = float(g["tflops"].get("fp4", 0.0))
    ss["g_link"] = float(g.get("interconnect_gb_s") or DEFAULT_INTERCONNECT_GB_S)
    return g


def _seed_deployment(ss: Any, scenario: dict[str, Any]) -> None:
    """Layout, precisions, lengths, batch, memory and engine inputs."""
    ss["tp"] = int(scenario.get("tp", 1))
    ss["weights"] = scenario.get("weights", "bf16")
    ss["kv_cache"] = scenario.get("kv_cache", "bf16")
    ss["compute"] = scenario.get("compute") or "auto"
    prompt, output = int(scenario.get("prompt_len", 1024)), int(scenario.get("output_len", 256))
    ss["prompt_len"], ss["output_len"] = prompt, output
    ss["context_len"] = int(scenario.get("context_len") or prompt + output)
    ss["batch_auto"] = scenario.get("batch") is None
    ss["batch"] = int(scenario.get("batch") or 64)
    memory = scenario.get("memory") or {}
    ss["utilization"] = float(memory.get("utilization", DEFAULT_MEMORY_UTILIZATION))
    ss["reserve_auto"] = memory.get("reserve_gb") is None  # None: the engine's overheads are modelled
    reserve_gb = memory.get("reserve_gb") if memory.get("reserve_gb") is not None else DEFAULT_RESERVE_GB
    ss["reserve_gib"] = float(reserve_gb) * GIB_PER_GB  # shown in GiB, as vLLM logs memory (issue 31)
    ss["reserve_seed"] = (ss["reserve_gib"], float(reserve_gb))  # the link's own GB while the input is kept
    ss["pp"] = int(scenario.get("pp", 1))
    ss["ep"] = int(scenario.get("ep", 1))
    ss["engine"] = str(scenario.get("engine", "vllm"))
    ss["enforce_eager"] = bool(scenario.get("enforce_eager", False))
    ss["vllm_version"] = str(scenario.get("vllm_version") or "")
    # engine knobs with no sidebar widget (a link or file may set them): carried whole, not dropped
    ss["engine_knobs"] = {k: scenario[k] for k in ENGINE_KNOBS if scenario.get(k) is not None} or None


def _seed_load(ss: Any, load: dict[str, Any]) -> None:
    """The operating point, the latency objective and the traffic shape."""
    ss["load_mode"] = (
        AT_OBJECTIVE
        if load.get("at_goodput")
        else "request rate"
        if load.get("request_rate") is not None
        else "concurrency"
        if load.get("concurrency") is not None
        else "batch"
    )
    ss["load_rate"] = float(load.get("request_rate") or 1.0)
    ss["load_concurrency"] = int(load.get("concurrency") or 64)
    slo = load.get("slo") or {}
    ss["slo_on"] = bool(load.get("slo"))
    ss["slo_ttft"] = float(slo.get("ttft_ms") or DEFAULT_OBJECTIVE.ttft_ms or 1000.0)
    ss["slo_itl"] = float(slo.get("itl_ms") or DEFAULT_OBJECTIVE.itl_ms or 50.0)
    ss["slo_ttft_on"] = not load.get("slo") or slo.get("ttft_ms") is not None
    ss["slo_itl_on"] = not load.get("slo") or slo.get("itl_ms") is not None
    ss["slo_percentile"] = int(slo.get("percentile") or DEFAULT_OBJECTIVE.percentile)
    ss["slo_tpot"] = float(slo.get("tpot_ms") or 0.0)  # 0: no TPOT objective
    for key, default in LOAD_SHAPE_DEFAULTS.items():
        ss[key] = type(default)(load.get(key, default))


def seed_widgets(scenario: dict[str, Any], target: Any = None) -> list[tuple[str, str]]:
    """Write a (valid) scenario into the widgets' session state (or into `target`, a dict); return (input,
    reason) for any value an input could not hold as given."""
    ss = st.session_state if target is None else target
    _seed_model(ss, scenario["model"])
    gpu = scenario["gpu"]
    g = _seed_gpu(ss, gpu)
    _seed_deployment(ss, scenario)
    _seed_load(ss, scenario.get("load") or {})
    eff = scenario.get("efficiency", "default")
    ss["efficiency"] = eff if isinstance(eff, str) else "default"
    ss["efficiency_custom"] = eff if isinstance(eff, dict) else None
    price = scenario.get("usd_per_gpu_hour")
    ss["price_explicit"] = price is not None
    ss["price"] = float(
        price
        if price is not None
        else (
            catalog_price(gpu)
            if isinstance(gpu, str)
            else g.get("usd_per_hour") or PLACEHOLDER_USD_PER_GPU_HOUR
        )
    )
    spec = scenario.get("speculative")
    ss["spec_on"] = spec is not None
    ss["spec_k"] = int((spec or {}).get("draft_tokens", 4))
    ss["spec_p"] = float((spec or {}).get("acceptance", 0.7))
    ss["spec_draft_b"] = float((spec or {}).get("draft_params", 1e9)) / 1e9
    ss["calibration"] = scenario.get("calibration")
    return _within_bounds(ss)


def queue_scenario(scenario: dict[str, Any]) -> None:
    """Load a scenario into the widgets on the next run (widgets drawn in this run can't change)."""
    updates: dict[str, Any] = {}
    seed_widgets(scenario, updates)
    queue_updates(updates)


def queue_updates(updates: dict[str, Any]) -> None:
    st.session_state.setdefault("pending_widget_state", {}).update(updates)


def apply_queued() -> None:
    """Call before any widget is drawn."""
    pending = st.session_state.pop("pending_widget_state", None)
    if pending:
        for key, value in pending.items():
            st.session_state[key] = value


def _custom_model(ss) -> dict[str, Any]:
    if ss.get("model_extra") and set(ss["model_extra"]) == {"hf_config"}:
        return ss["model_extra"]
    model = {"name": ss["m_name"] or "custom", **{f: int(ss[f"m_{f}"]) for f in MODEL_FIELDS},
             "tied_embeddings": bool(ss["m_tied"])}
    if ss["m_n_params_b"] > 0:
        model["n_params"] = float(ss["m_n_params_b"]) * 1e9
    if ss.get("model_extra"):
        model.update(ss["model_extra"])
    return model


def _custom_gpu(ss) -> dict[str, Any]:
    tflops = {"bf16": float(ss["g_bf16"])}
    for precision in ("fp8", "fp4"):
        if ss[f"g_{precision}"] > 0:
            tflops[precision] = float(ss[f"g_{precision}"])
    return {"name": ss["g_name"] or "custom", "memory_gb": float(ss["g_memory_gb"]),
            "hbm_tb_s": float(ss["g_hbm_tb_s"]), "tflops": tflops, "interconnect_gb_s": float(ss["g_link"])}


LOAD_SHAPE_DEFAULTS: dict[str, float | int] = {"arrival_cv": 1.0, "prompt_len_cv": 0.0, "output_len_cv": 0.0,
                                                "prefix_cache_hit": 0.0,
                                                "max_num_batched_tokens": DEFAULT_MAX_NUM_BATCHED_TOKENS}


def _read_load(ss: Any) -> dict[str, Any]:
    """The scenario's `load` section: operating point, traffic shape and objective (only what differs)."""
    load: dict[str, Any] = {}
    mode = ss.get("load_mode", "batch")
    if mode == AT_OBJECTIVE:
        load["at_goodput"] = True
    elif mode == "request rate":
        load["request_rate"] = float(ss["load_rate"])
    elif mode == "concurrency":
        load["concurrency"] = int(ss["load_concurrency"])
    for key, default in LOAD_SHAPE_DEFAULTS.items():
        if key in ss and ss[key] != default:
            load[key] = type(default)(ss[key])
    if ss.get("slo_on") or mode == AT_OBJECTIVE:  # the goodput needs its objective
        slo: dict[str, Any] = {"percentile": int(ss["slo_percentile"])}
        if ss.get("slo_ttft_on"):
            slo["ttft_ms"] = float(ss["slo_ttft"])
        if ss.get("slo_itl_on"):
            slo["itl_ms"] = float(ss["slo_itl"])
        if float(ss.get("slo_tpot") or 0.0) > 0:
            slo["tpot_ms"] = float(ss["slo_tpot"])
        load["slo"] = slo
    return load


def read_scenario() -> dict[str, Any]:
    """The scenario the widgets describe (not yet validated)."""
    ss = st.session_state
    scenario: dict[str, Any] = {
        "model": ss["model_choice"] if ss["model_choice"] != CUSTOM else _custom_model(ss),
        "gpu": ss["gpu_choice"] if ss["gpu_choice"] != CUSTOM else _custom_gpu(ss),
        "tp": int(ss["tp"]), "weights": ss["weights"], "kv_cache": ss["kv_cache"],
        "context_len": int(ss["context_len"]), "prompt_len": int(ss["prompt_len"]),
        "output_len": int(ss["output_len"]),
    }
    if ss["compute"] != "auto":
        scenario["compute"] = ss["compute"]
    if not ss["batch_auto"]:
        scenario["batch"] = int(ss["batch"])
    memory: dict[str, float] = {}
    if abs(ss["utilization"] - DEFAULT_MEMORY_UTILIZATION) > 1e-9:
        memory["utilization"] = float(ss["utilization"])
    if not ss.get("reserve_auto", True):
        memory["reserve_gb"] = _reserve_gb(ss)
    if memory:
        scenario["memory"] = memory
    for key in ("pp", "ep"):
        if int(ss.get(key, 1)) != 1:
            scenario[key] = int(ss[key])
    if ss.get("engine", "vllm") != "vllm":
        scenario["engine"] = ss["engine"]
    if ss.get("enforce_eager"):
        scenario["enforce_eager"] = True
    if ss.get("vllm_version"):
        scenario["vllm_version"] = str(ss["vllm_version"])
    scenario.update(ss.get("engine_knobs") or {})
    load = _read_load(ss)
    if load:
        scenario["load"] = load
    if ss.get("efficiency_custom"):
        scenario["efficiency"] = ss["efficiency_custom"]
    elif ss["efficiency"] != "default":
        scenario["efficiency"] = ss["efficiency"]
    if ss["gpu_choice"] == CUSTOM or ss.get("price_explicit"):
        scenario["usd_per_gpu_hour"] = float(ss["price"])
    if ss["spec_on"]:
        scenario["speculative"] = {"draft_tokens": int(ss["spec_k"]), "acceptance": float(ss["spec_p"]),
                                   "draft_params": float(ss["spec_draft_b"]) * 1e9}
    if ss.get("calibration"):
        scenario["calibration"] = ss["calibration"]
    return scenario
