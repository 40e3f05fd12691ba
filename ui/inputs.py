"""Sidebar inputs for every scenario field; the widget state they keep, and the scenario it stands for, are
ui/widget_state.py's."""

from __future__ import annotations

from typing import Any

import streamlit as st

from gpu_catalog import load_catalog
from planner.contract.equal_service import DEFAULT_TRAFFIC_REQUESTS_PER_S
from planner.core.model_shapes import ModelSpec
from planner.core.precision import (
    COMPUTE_PRECISIONS,
    KV_PRECISIONS,
    WEIGHT_PRECISIONS,
    default_compute_precision,
)
from planner.engines.base import ENGINE_LABELS, FLOOR_ENGINE, SERVING_ENGINES
from planner.engines.vllm import VLLM_RELEASES as VLLM_RELEASE_CHOICES
from planner.engines.vllm import VLLM_RULES_VERSION
from planner.hardware.parallelism import nearest_valid_tps, valid_tp
from planner.model.hf_import import SUPPORTED_MODEL_TYPES
from planner.model.presets import load_presets
from planner.serving.operating_point import DEFAULT_OBJECTIVE_SOURCE
from ui.text import plain
from ui.widget_state import AT_OBJECTIVE, CUSTOM, KEEP, WIDGET_BOUNDS, catalog_price, queue_updates

ENGINES = [*SERVING_ENGINES, FLOOR_ENGINE]
# vLLM releases whose memory rules differ (planner/engines/vllm.py); "" = the latest the planner follows
VLLM_RELEASES = ["", *VLLM_RELEASE_CHOICES]
TP_CHOICES = [1, 2, 4, 8, 16, 32, 64]
WEIGHTS = list(WEIGHT_PRECISIONS)
KV = list(KV_PRECISIONS)
COMPUTE = ["auto", *COMPUTE_PRECISIONS]
# A pasted or uploaded config.json, checked before it is read: real ones are 1-10 kB (the largest,
# with long lists of unquantized layers, stay well under this).
HF_MAX_BYTES = 64_000


def _bounds(key: str) -> tuple[Any, Any]:
    return WIDGET_BOUNDS[key]


def with_current(choices: list[Any], current: Any) -> list[Any]:
    """The choices, plus the current value when a link or file holds one outside them (TP 3): a
    selectbox would otherwise fall back to its first choice without a word."""
    return choices if current in choices or current is None else [*choices, current]


def _on_gpu_change() -> None:
    ss = st.session_state
    if ss["gpu_choice"] != CUSTOM:
        ss["price"] = catalog_price(ss["gpu_choice"])
    ss["price_explicit"] = False


def _on_model_change() -> None:
    """A preset opens in its checkpoint's native precision (gpt-oss: MXFP4, DeepSeek-R1: fp8, else bf16),
    not the previous model's; on a GPU without tensor cores for it, computed weight-only in bf16 as the
    engines' dequantizing kernels do (planner.scenario.scenario.resolve does the same)."""
    ss = st.session_state
    model = load_presets().get(ss["model_choice"])
    if model is None:
        return
    weights = model.checkpoint_weights or "bf16"
    ss["weights"] = weights
    gpu = load_catalog().get(ss.get("gpu_choice", ""))
    native_compute = default_compute_precision(weights)
    ss["compute"] = "auto" if gpu is None or native_compute in gpu.tflops else "bf16"


def _on_price_change() -> None:
    st.session_state["price_explicit"] = True


def read_hf_config(text: str, upload: Any) -> Any:
    """The config.json pasted (`text`) or uploaded (`upload`, which wins), parsed; its size is checked
    before a byte of it is read or parsed. Raises ScenarioError with the reason."""
    from planner import ScenarioError

    size = upload.size if upload is not None else len(text.encode("utf-8"))
    if size > HF_MAX_BYTES:
        raise ScenarioError("config.json", f"is {size:,} bytes, over the limit of {HF_MAX_BYTES:,}")
    raw = upload.getvalue().decode("utf-8", errors="replace") if upload is not None else text
    if not raw.strip():
        raise ScenarioError("config.json", "paste or upload a config.json first")
    from planner.core.errors import loads_json

    return loads_json(raw, "config.json", max_bytes=HF_MAX_BYTES)


def _hf_import_box() -> None:
    """Paste or upload a Hugging Face config.json; it becomes the custom model."""
    from planner import ScenarioError
    from planner.model.hf_import import model_from_hf_config

    with st.expander("Import a Hugging Face config.json"):
        st.caption("Supported model_type: " + ", ".join(SUPPORTED_MODEL_TYPES) + ". Nothing is downloaded.")
        text = st.text_area("Paste config.json", key="hf_text", height=120, max_chars=HF_MAX_BYTES)
        upload = st.file_uploader("or upload it", type=["json"], key="hf_upload")
        if st.button("Use this config", key="hf_apply"):
            try:
                config = read_hf_config(text, upload)
                model_from_hf_config(config)
            except ScenarioError as err:
                st.session_state["hf_error"] = f"{err.field}: {err.reason}"
            else:
                st.session_state["hf_error"] = None
                queue_updates({"model_choice": CUSTOM, "model_extra": {"hf_config": config}})
                st.rerun()
        if st.session_state.get("hf_error"):
            st.error(plain(st.session_state["hf_error"]), icon="⚠️")


def _set_tp(tp: int) -> None:
    st.session_state["tp"] = tp


def _offer_valid_tp(sb, model: ModelSpec | None, tp: int) -> None:
    """A TP the engines refuse (planner.hardware.parallelism.layout_problem): one button per nearest valid
    TP."""
    if model is None or valid_tp(model, tp):
        return
    nearest = nearest_valid_tps(model, tp)
    # a preset's name (never user text): engines refuse this TP (planner.hardware.parallelism)
    sb.warning(f"TP {tp} does not split {model.name}'s {model.n_heads} attention heads and "
               f"{model.n_kv_heads} KV heads evenly; nearest valid:")
    for col, t in zip(sb.columns(len(nearest)), nearest, strict=True):
        col.button(f"Use TP {t}", key=f"tp_fix_{t}", on_click=_set_tp, args=(t,))


# (label, widget key) of the custom model's and the custom GPU's number inputs, two to a row
MODEL_SHAPE_INPUTS = (("Layers", "m_n_layers"), ("d_model", "m_d_model"), ("Heads", "m_n_heads"),
                      ("KV heads", "m_n_kv_heads"), ("head_dim", "m_head_dim"), ("d_ff", "m_d_ff"),
                      ("Vocab", "m_vocab_size"))
GPU_INPUTS = (("Memory (GB)", "g_memory_gb"), ("HBM (TB/s)", "g_hbm_tb_s"), ("Dense bf16 TFLOP/s", "g_bf16"),
              ("Dense fp8 (0 = none)", "g_fp8"), ("Dense fp4 (0 = none)", "g_fp4"),
              ("Link GB/s per direction", "g_link"))


def _number_grid(fields: tuple[tuple[str, str], ...]) -> Any:
    """Number inputs two to a row, each within its WIDGET_BOUNDS; returns the two columns."""
    columns = st.columns(2)
    for i, (label, key) in enumerate(fields):
        columns[i % 2].number_input(label, *_bounds(key), key=key, **KEEP)
    return columns


def _model_inputs(sb: Any, ss: Any, presets: dict[str, ModelSpec]) -> None:
    """A preset, or a custom shape (typed in, or an imported config.json)."""
    sb.selectbox("Model", [*presets, CUSTOM], key="model_choice", on_change=_on_model_change,
                 format_func=lambda k: presets[k].name if k in presets else "Custom shape…",
                 help="a preset opens in its checkpoint's native weight precision")
    if ss["model_choice"] == CUSTOM:
        with sb.container(border=True):
            if ss.get("model_extra") and set(ss["model_extra"]) == {"hf_config"}:
                st.info("Using an imported config.json.")
                if st.button("Edit the shape instead", key="hf_clear"):
                    queue_updates({"model_extra": None})
                    st.rerun()
            else:
                st.text_input("Name", key="m_name", max_chars=120, **KEEP)
                _, c2 = _number_grid(MODEL_SHAPE_INPUTS)
                c2.number_input("Params (B, 0 = from shape)", *_bounds("m_n_params_b"), key="m_n_params_b",
                                format="%.3f", **KEEP)
                st.checkbox("Tied embeddings", key="m_tied", **KEEP)
                if ss.get("model_extra"):
                    st.caption("Also keeps: " + plain(", ".join(sorted(ss["model_extra"]))))
        with sb:
            _hf_import_box()


def _gpu_inputs(sb: Any, ss: Any) -> None:
    """A catalog GPU, or a custom one's figures."""
    catalog = load_catalog()
    sb.selectbox("GPU", [*catalog, CUSTOM], key="gpu_choice", on_change=_on_gpu_change,
                 format_func=lambda k: catalog[k].name if k in catalog else "Custom GPU…")
    if ss["gpu_choice"] == CUSTOM:
        with sb.container(border=True):
            st.text_input("GPU name", key="g_name", max_chars=120, **KEEP)
            _number_grid(GPU_INPUTS)


def _layout_inputs(sb: Any, ss: Any, presets: dict[str, ModelSpec]) -> None:
    """Parallelism, precisions, lengths and batch."""
    c1, c2 = sb.columns(2)
    c1.selectbox("TP degree", with_current(TP_CHOICES, ss.get("tp")), key="tp",
                 help="GPUs per replica (tensor parallel)")
    _offer_valid_tp(sb, presets.get(ss["model_choice"]), int(ss["tp"]))
    c2.selectbox("Weights", with_current(WEIGHTS, ss.get("weights")), key="weights")
    model = presets.get(ss["model_choice"])
    if ss.get("weights") == "fp4" and model is not None and model.fp4_format == "mxfp4":
        sb.caption(f"fp4 here is {model.name}'s MXFP4 checkpoint (32 values per E8M0 scale).")
    c1.selectbox("KV cache", with_current(KV, ss.get("kv_cache")), key="kv_cache")
    c2.selectbox("Compute", with_current(COMPUTE, ss.get("compute")), key="compute",
                 help="auto: fp8 for fp8 weights, fp4 for fp4, else bf16")
    c1, c2 = sb.columns(2)
    c1.number_input("PP degree", *_bounds("pp"), key="pp", help="pipeline-parallel stages per replica")
    c2.number_input("EP degree", *_bounds("ep"), key="ep", help="expert-parallel groups (MoE models)")
    c1, c2, c3 = sb.columns(3)
    c1.number_input("Context", *_bounds("context_len"), key="context_len", help="tokens a sequence may hold")
    c2.number_input("Prompt", *_bounds("prompt_len"), key="prompt_len")
    c3.number_input("Output", *_bounds("output_len"), key="output_len")
    sb.checkbox("Batch = max batch that fits", key="batch_auto")
    if not ss["batch_auto"]:
        sb.number_input("Batch (concurrent sequences)", *_bounds("batch"), key="batch", **KEEP)


def _objective_inputs(ss: Any, at_objective: bool) -> None:
    """The latency objective (SLO): TTFT and ITL bounds at a percentile."""
    st.checkbox("Latency objective (SLO)", key="slo_on", disabled=at_objective,
                help="always on at objective: the goodput is the highest load that meets it")
    if ss["slo_on"] or at_objective:
        st.caption(f"Default: {DEFAULT_OBJECTIVE_SOURCE}.")
        c1, c2 = st.columns(2)
        c1.checkbox("TTFT", key="slo_ttft_on", **KEEP)
        c2.checkbox("ITL", key="slo_itl_on", **KEEP)
        c1.number_input("TTFT (ms)", *_bounds("slo_ttft"), key="slo_ttft", disabled=not ss["slo_ttft_on"],
                        **KEEP)
        c2.number_input("ITL (ms)", *_bounds("slo_itl"), key="slo_itl", disabled=not ss["slo_itl_on"], **KEEP)
        st.number_input("Mean TPOT (ms; 0: none)", *_bounds("slo_tpot"), key="slo_tpot", **KEEP,
                        help="time per output token per request, averaged: `vllm bench serve`'s Mean TPOT")
        st.radio(
            "at percentile", [50, 90, 99], key="slo_percentile", horizontal=True, **KEEP,
            format_func=lambda p: f"p{p}",
        )


def _operating_point_inputs(sb: Any, ss: Any) -> None:
    """The operating point (objective, concurrency, rate or batch), its objective and the traffic target."""
    with sb.container(border=True):
        st.radio(
            "Operating point", [AT_OBJECTIVE, "concurrency", "request rate", "batch"], key="load_mode",
            horizontal=True,
            help="at objective: the highest request rate whose latency meets the objective (goodput, open "
            "loop); concurrency: that many clients (closed loop); request rate: requests per second "
            "arriving at one replica (open loop); batch: as many clients as the batch (closed loop)",
        )
        if ss["load_mode"] == "request rate":
            st.number_input(
                "Requests/s per replica", *_bounds("load_rate"), step=0.5, format="%.3f", key="load_rate",
                **KEEP,
            )
        elif ss["load_mode"] == "concurrency":
            st.number_input("Concurrent clients", *_bounds("load_concurrency"), key="load_concurrency",
                            **KEEP)
        _objective_inputs(ss, ss["load_mode"] == AT_OBJECTIVE)
        if "traffic_rps" not in ss:
            ss["traffic_rps"] = DEFAULT_TRAFFIC_REQUESTS_PER_S
        st.number_input(
            "Traffic target (requests/s, all replicas)",
            *_bounds("traffic_rps"),
            format="%.3f", key="traffic_rps",
            help="every view sizes its fleets for this traffic within the objective: Plan, Compare, Size a "
            "fleet and Power & fleets (it travels in the share link)",
        )


def _traffic_shape_inputs(sb: Any) -> None:
    with sb.expander("Traffic shape and scheduler"):
        st.number_input("Arrival CV (1 = Poisson)", *_bounds("arrival_cv"), step=0.1, key="arrival_cv")
        st.number_input("Prompt length CV", *_bounds("prompt_len_cv"), step=0.1, key="prompt_len_cv")
        st.number_input("Output length CV", *_bounds("output_len_cv"), step=0.1, key="output_len_cv")
        st.number_input(
            "Prefix-cache hit fraction", *_bounds("prefix_cache_hit"), step=0.05, key="prefix_cache_hit"
        )
        st.number_input("max_num_batched_tokens", *_bounds("max_num_batched_tokens"), step=1024,
                        key="max_num_batched_tokens", help="the chunked-prefill token budget per iteration")


def _engine_inputs(sb: Any, ss: Any) -> None:
    """Memory use, the engine and its release, efficiency and the GPU price."""
    with sb.expander("Memory, engine and price"):
        st.number_input(
            "Memory utilization",
            *_bounds("utilization"),
            step=0.01, format="%.3f", key="utilization",
            help="fraction of GPU memory the engine may use (vLLM gpu_memory_utilization)",
        )
        st.checkbox("Model the engine's overheads (activations, NCCL, CUDA graphs)", key="reserve_auto",
                    help="off: one fixed reserve per GPU instead (memory.reserve_gb)")
        if not ss["reserve_auto"]:
            st.number_input("Reserve per GPU (GiB)", *_bounds("reserve_gib"), step=0.5, format="%.2f",
                            key="reserve_gib", **KEEP,
                            help="runtime, activations, CUDA graphs (memory.reserve_gb holds it in GB)")
        st.selectbox("Engine", with_current(ENGINES, ss.get("engine")), key="engine",
                     format_func=lambda e: ENGINE_LABELS.get(e, e),
                     help="whose memory rules and step-time profile the plan follows")
        st.checkbox("Eager mode (no CUDA graphs)", key="enforce_eager", help="vLLM --enforce-eager")
        if ss.get("engine", "vllm") == "vllm":
            st.selectbox(
                "vLLM release", with_current(VLLM_RELEASES, ss.get("vllm_version")), key="vllm_version",
                **KEEP,
                format_func=lambda v: v or f"latest rules ({VLLM_RULES_VERSION})",
                help="whose start-up memory rules to follow: the profiling run's sampler, "
                "the CUDA-graph pool (0.21+), non-torch memory",
            )
        st.radio("Engine efficiency", ["default", "ideal"], key="efficiency", horizontal=True,
                 help="default: an optimized engine (calibrated); ideal: the pure roofline")
        st.number_input(
            "$ per GPU-hour",
            *_bounds("price"),
            step=0.1, format="%.3f", key="price", on_change=_on_price_change,
        )


def _speculative_inputs(sb: Any, ss: Any) -> None:
    with sb.expander("Speculative decoding"):
        st.checkbox("Enable", key="spec_on")
        if ss["spec_on"]:
            st.number_input("Draft tokens k", *_bounds("spec_k"), key="spec_k", **KEEP)
            st.slider("Acceptance p", *_bounds("spec_p"), step=0.01, key="spec_p", **KEEP)
            st.number_input("Draft params (B)", *_bounds("spec_draft_b"), key="spec_draft_b", **KEEP)


def render_sidebar() -> None:
    ss = st.session_state
    presets = load_presets()
    sb = st.sidebar
    sb.header("Scenario")
    _model_inputs(sb, ss, presets)
    _gpu_inputs(sb, ss)
    _layout_inputs(sb, ss, presets)
    _operating_point_inputs(sb, ss)
    _traffic_shape_inputs(sb)
    _engine_inputs(sb, ss)
    _speculative_inputs(sb, ss)
