"""Share links: every scenario field is a query parameter of the same name (nested ones dotted:
`memory.utilization`); a custom model or GPU travels as its JSON object. Pure functions, no Streamlit.

Reading a link is forgiving: a bad parameter gets a message naming it, falls back to its default,
and the rest of the link still applies.
"""

from __future__ import annotations

import json
from typing import Any

from planner import ScenarioError, parse_scenario
from planner.core.errors import loads_json
from planner.scenario.scenario import resolve
from planner.serving.operating_point import DEFAULT_OBJECTIVE

DEFAULT_SCENARIO: dict[str, Any] = {
    "model": "llama-3.1-70b", "gpu": "h100-sxm", "tp": 4, "weights": "fp8", "kv_cache": "fp8",
    "context_len": 8192, "prompt_len": 2000, "output_len": 400,
    # the default operating point: the goodput under the default objective (planner.serving.operating_point)
    "load": {"at_goodput": True, "slo": DEFAULT_OBJECTIVE.model_dump(exclude_none=True)},
}

INT_FIELDS = (
    "tp", "context_len", "prompt_len", "output_len", "batch", "pp", "ep", "max_model_len", "block_size",
    "max_num_seqs",
)
FLOAT_FIELDS = ("usd_per_gpu_hour", "memory.utilization", "memory.reserve_gb")
STR_FIELDS = ("weights", "kv_cache", "compute", "engine", "vllm_version", "vllm_sampler")
BOOL_FIELDS = ("enforce_eager",)
JSON_OR_STR_FIELDS = ("model", "gpu", "efficiency")
JSON_FIELDS = ("speculative", "calibration", "load")
FIELDS = ("model", "gpu", *INT_FIELDS, *STR_FIELDS, *BOOL_FIELDS, *FLOAT_FIELDS, "efficiency", *JSON_FIELDS)
COMPARE_PARAM = "compare"
SIZE_PARAM = "size"  # the sizing page's search, read by ui/sizing_page.py
FLEET_PARAM = "fleet"  # a disaggregated option opened in the Plan view: its sizing request and its two pools
FLEET_POOL_KEYS = ("gpu", "tp", "pp", "ep", "weights", "kv_cache")  # what tells one option's pool from others
# A link's whole query string, in characters. Far above any scenario typed in the sidebar (~300) or a
# dozen pins (~4,000), below the 64 KiB request line the web server accepts; a longer link is refused
# whole with a message instead of being parsed (a pasted 1 MB config must not ride along in it).
MAX_LINK_CHARS = 32_000
MAX_PINS = 12


def link_length(params: dict[str, str]) -> int:
    """Characters of the query string these parameters make (as the address bar holds it)."""
    from urllib.parse import urlencode

    return len(urlencode(params))


def link_too_long(params: dict[str, str]) -> str | None:
    """The refusal message when a link is over MAX_LINK_CHARS, else None."""
    n = link_length(params)
    if n <= MAX_LINK_CHARS:
        return None
    return f"is {n:,} characters long, over the limit of {MAX_LINK_CHARS:,}"


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def scenario_to_query(scenario: dict[str, Any]) -> dict[str, str]:
    params: dict[str, str] = {}
    for key, value in scenario.items():
        if value is None:
            continue
        if key == "memory":
            for sub, v in value.items():
                if v is not None:
                    params[f"memory.{sub}"] = repr(float(v))
        elif isinstance(value, bool):
            params[key] = "true" if value else "false"
        elif isinstance(value, dict):
            params[key] = _compact(value)
        elif isinstance(value, float):
            params[key] = repr(value)
        else:
            params[key] = str(value)
    return params


def _json(raw: str, field: str) -> Any:
    """A parameter's JSON through the one safe reader (depth, size, digits); ValueError with its reason."""
    try:
        return loads_json(raw, field, max_bytes=MAX_LINK_CHARS)
    except ScenarioError as err:
        raise ValueError(err.reason) from None


def _convert(field: str, raw: str) -> Any:
    """Query text to a typed value; raises ValueError with a reason."""
    if field in INT_FIELDS:
        if len(raw.strip()) > 20:  # no count has 20 digits; int() of thousands of digits is quadratic
            raise ValueError("must be a whole number of at most 20 digits")
        try:
            return int(raw)
        except ValueError:
            raise ValueError("must be a whole number") from None
    if field in BOOL_FIELDS:
        if raw.lower() in ("true", "1"):
            return True
        if raw.lower() in ("false", "0"):
            return False
        raise ValueError("must be true or false")
    if field in FLOAT_FIELDS:
        try:
            return float(raw)
        except ValueError:
            raise ValueError("must be a number") from None
    if field in JSON_OR_STR_FIELDS:
        if raw.lstrip().startswith("{"):
            return _json(raw, field)
        return raw
    if field in JSON_FIELDS:
        return _json(raw, field)
    return raw


def _set(scenario: dict[str, Any], field: str, value: Any) -> dict[str, Any]:
    out = json.loads(json.dumps(scenario))
    if field.startswith("memory."):
        out.setdefault("memory", {})[field.split(".", 1)[1]] = value
    else:
        out[field] = value
    return out


def _reason(err: ValueError, param: str) -> str:
    """The planner's reason, prefixed with its field unless that is the parameter already named
    (no "model: model: …")."""
    if not isinstance(err, ScenarioError):
        return str(err)
    return err.reason if err.field == param else f"{err.field}: {err.reason}"


def _check(scenario: dict[str, Any]) -> None:
    resolve(parse_scenario(scenario))


def scenario_from_query(params: dict[str, str], default: dict[str, Any] | None = None
                        ) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """The scenario a link describes, and (parameter, reason) for each parameter that was dropped."""
    scenario = json.loads(json.dumps(default or DEFAULT_SCENARIO))
    problems: list[tuple[str, str]] = []
    typed: dict[str, Any] = {}
    for field, raw in params.items():
        if field in (COMPARE_PARAM, SIZE_PARAM, FLEET_PARAM):
            continue
        if field not in FIELDS:
            problems.append((field, "is not a scenario field; ignored"))
            continue
        try:
            typed[field] = _convert(field, raw)
        except ValueError as err:
            problems.append((field, f"{err}; using the default"))
    if "gpu" in typed and "usd_per_gpu_hour" not in typed:
        scenario.pop("usd_per_gpu_hour", None)
    # Apply what we can; fields that only fit together with later ones (context_len before
    # prompt_len) are retried until nothing more applies.
    pending = dict(typed)
    last_error: dict[str, str] = {}
    progress = True
    while pending and progress:
        progress = False
        for field, value in list(pending.items()):
            trial = _set(scenario, field, value)
            try:
                _check(trial)
            except ValueError as err:  # ScenarioError is a ValueError
                last_error[field] = _reason(err, field)
                continue
            scenario = trial
            del pending[field]
            progress = True
    for field in pending:
        problems.append((field, f"{last_error[field]}; using the default"))
    return scenario, problems


def comparison_to_query(pins: list[dict[str, Any]]) -> str:
    return _compact(pins)


def comparison_from_query(raw: str) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    try:
        pins = loads_json(raw, COMPARE_PARAM, max_bytes=MAX_LINK_CHARS)
    except ScenarioError as err:
        return [], [(COMPARE_PARAM, f"{err.reason}; no comparison loaded")]
    if not isinstance(pins, list):
        return [], [(COMPARE_PARAM, "must be a JSON list of scenarios; no comparison loaded")]
    good: list[dict[str, Any]] = []
    problems: list[tuple[str, str]] = []
    if len(pins) > MAX_PINS:
        problems.append((COMPARE_PARAM, f"holds {len(pins)} pins; only the first {MAX_PINS} are loaded"))
    for i, pin in enumerate(pins[:MAX_PINS]):
        if not isinstance(pin, dict):
            problems.append(
                (f"{COMPARE_PARAM}[{i}]", "must be a JSON object (a scenario); that pin is skipped")
            )
            continue
        try:
            _check(pin)
            good.append(pin)
        except ValueError as err:
            problems.append((f"{COMPARE_PARAM}[{i}]", f"{_reason(err, '')}; that pin is skipped"))
    return good, problems


def sizing_request_from_link(raw: str) -> tuple[dict[str, Any] | None, str | None]:
    """The sizing request a link's `size` parameter holds once the search accepts its fields, or None and
    the reason (one line naming the field) when it does not."""
    from planner.serving.request_bounds import check_work, dedupe_lists
    from planner.serving.serving_modes import MODE_FIELDS, check_modes
    from planner.serving.sizing import families, parse_sizing

    try:
        candidate = loads_json(raw, SIZE_PARAM, max_bytes=MAX_LINK_CHARS)
        if not isinstance(candidate, dict):
            raise ScenarioError(SIZE_PARAM, "must be a JSON object (a sizing request)")
        unique = dedupe_lists(candidate)
        req = parse_sizing({k: v for k, v in unique.items() if k not in MODE_FIELDS})
        modes = check_modes(unique)
        # the search's bounds too, so that a link past them is named on arrival, not at the button (issue 32)
        pools = ([families(req, modes.prefill_gpus), families(req, modes.decode_gpus)]
                 if modes.disaggregation else [])
        check_work([families(req), *pools], req.max_options)
    except ScenarioError as err:
        return None, f"{err.field}: {err.reason}"
    return candidate, None


def _fleet_pools(option: dict[str, Any]) -> dict[str, Any]:
    return {role: {k: option[role].get(k, 1 if k in ("pp", "ep") else None) for k in FLEET_POOL_KEYS}
            for role in ("prefill", "decode")}


def fleet_to_query(request: dict[str, Any], option: dict[str, Any]) -> str:
    """The `fleet` parameter of a disaggregated option: the sizing request it came from and its two pools
    (the figures are not carried: the link's reader sizes the request again and finds the option)."""
    return _compact({"request": request, **_fleet_pools(option)})


LinkedFleet = tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]  # option, request, all options


def fleet_from_link(raw: str, scenario: dict[str, Any]) -> tuple[LinkedFleet | None, str | None]:
    """(option, sizing request, every option of that request) of a link's `fleet` parameter, or None and the
    reason (one line). The option must be a disaggregated option of the request with the linked pools, and
    its decode worker the linked scenario (the Plan view shows that worker under the fleet)."""
    from planner.serving.serving_modes import decode_worker_scenario, size_with_modes

    fallback = "; the single-pool fleet is shown"
    try:
        data = loads_json(raw, FLEET_PARAM, max_bytes=MAX_LINK_CHARS)
    except ScenarioError as err:
        return None, err.reason + fallback
    if not isinstance(data, dict) or not all(isinstance(data.get(k), dict) for k in ("request", "prefill",
                                                                                      "decode")):
        return None, "must be a JSON object with request, prefill and decode objects" + fallback
    request, problem = sizing_request_from_link(json.dumps(data["request"]))
    if request is None:
        return None, f"request: {problem}{fallback}"
    try:
        options = size_with_modes(request)["options"]
    except ScenarioError as err:
        return None, f"request: {err.field}: {err.reason}{fallback}"
    wanted = {role: data[role] for role in ("prefill", "decode")}
    option = next((o for o in options
                   if o.get("mode") == "disaggregated" and _fleet_pools(o) == wanted), None)
    if option is None:
        return None, "no disaggregated option of its sizing request has these pools" + fallback
    try:
        same = (parse_scenario(decode_worker_scenario(option, request)).model_dump()
                == parse_scenario(scenario).model_dump())
    except ScenarioError:
        same = False
    if not same:
        return None, "the linked scenario is not this fleet's decode worker" + fallback
    return (option, request, options), None

