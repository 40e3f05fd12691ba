"""One error type for every bad input: a field path and a reason, printable as one line.

User text that an error echoes (a preset id, an unknown key, an HF `model_type`) goes through
`quote()`: escaped like a Python repr (a newline shows as `\\n`) and cut, so the error is always one
short line, whatever the input.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import ValidationError

MAX_ERROR_CHARS = 300  # the whole `error: <field>: <reason>` line stays readable in a terminal
MAX_QUOTED_CHARS = 60  # one echoed piece of user text
MAX_JSON_DEPTH = 100  # deeper than any scenario or config.json; Python's parser would recurse ~1000 deep
# The CLI's input limit (contract.cli.MAX_INPUT_BYTES); the app passes its own, smaller ones.
MAX_JSON_BYTES = 16_000_000
# Every integer an input holds has under 20 digits. Up to 1,000 digits parse (cheaply) and the field's own
# range names it; longer literals are refused whole, well below Python's 4,300-digit limit and int()'s
# quadratic cost on longer ones.
MAX_INT_DIGITS = 1000


def quote(value: Any, limit: int = MAX_QUOTED_CHARS) -> str:
    """`value` as an escaped, quoted, one-line snippet of at most ~`limit` characters."""
    text = value if isinstance(value, str) else f"<{type(value).__name__}>"
    cut = len(text) > limit
    shown = repr(text[:limit])  # escapes newlines, control and non-printable characters
    return shown + ("..." if cut else "")


def one_line(text: str, limit: int) -> str:
    """Escape what would break the line (repr-like, printable text kept) and cut to `limit`."""
    text = text[: limit * 2]  # bound the work on huge inputs before escaping
    if not text.isprintable():
        text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class ScenarioError(ValueError):
    def __init__(self, field: str, reason: str):
        self.field = one_line(str(field or "scenario"), 120)
        self.reason = one_line(str(reason), MAX_ERROR_CHARS - len("error: : ") - len(self.field))
        super().__init__(f"{self.field}: {self.reason}")

    def line(self) -> str:
        """The CLI's one line (no newline at the end)."""
        return f"error: {self.field}: {self.reason}"


def _clean(msg: str) -> str:
    return msg.removeprefix("Value error, ").removeprefix("Assertion failed, ")


# pydantic names each branch of a union in the error path ('capex.dict[str,constrained-float]'): not a field.
_UNION_TAG = re.compile(
    r"^(constrained-\w+|(dict|list|tuple|function-\w+|nullable)\[.*\]|str|int|float|bool|none)$"
)


def _field_path(loc: tuple) -> tuple:
    return tuple(part for part in loc if not (isinstance(part, str) and _UNION_TAG.match(part)))


def from_validation_error(err: ValidationError, prefix: str = "") -> ScenarioError:
    """The most telling pydantic error as a ScenarioError with a dotted field path: the first one, unless
    it only says a union branch had the wrong type and another branch of the same field says why."""
    errors = err.errors(include_url=False, include_input=False)
    first = errors[0]
    if first["type"].endswith("_type"):
        path = _field_path(first["loc"])
        first = next((e for e in errors if _field_path(e["loc"])[:len(path)] == path
                      and not e["type"].endswith("_type")), first)
    dotted = ".".join(str(part) for part in _field_path(first["loc"]))
    field = ".".join(part for part in (prefix, dotted) if part)
    reason = _clean(first["msg"])
    if first["type"] == "extra_forbidden":
        reason = "unknown field"
    elif first["type"] == "missing":
        reason = "required field is missing"
    elif first["type"] == "finite_number":
        reason = "must be a finite number"
    return ScenarioError(field, reason)


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number")


def _depth_within(value: Any, limit: int) -> bool:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return False
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return True


def _refuse_long_int(limit: int):
    def parse_int(literal: str) -> int:
        digits = len(literal.lstrip("-"))
        if digits > limit:
            raise ValueError(
                f"an integer literal is too long: {digits:,} digits, over the limit of {limit:,}"
            )
        return int(literal)
    return parse_int


class _DuplicateKey(ValueError):
    """A JSON object names a key twice (json.loads would keep the last silently)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(f"duplicate key {quote(key)}: give each key once")
            seen.add(key)
    return out


def _finite_float(literal: str) -> float:
    value = float(literal)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"a number is out of range ({literal[:20]}...)")
    return value


def loads_json(text: str | bytes, field: str = "scenario", max_bytes: int | None = MAX_JSON_BYTES,
               max_depth: int = MAX_JSON_DEPTH, max_int_digits: int = MAX_INT_DIGITS) -> Any:
    """Parse JSON as an input, the one reader for every JSON the CLI and the app accept (files, stdin,
    share-link parameters, uploads, pasted config.json). Refused as a ScenarioError naming `field`
    (never a RecursionError, a ValueError or a hang): text over `max_bytes`, NaN/Infinity, numbers that
    overflow a float, integer literals over `max_int_digits` digits, nesting deeper than `max_depth`, an
    object that names a key twice (the key named: which of the two values was meant is not ours to guess)."""
    size = len(text)  # characters of a str: a lower bound of its UTF-8 bytes, checked before encoding
    if max_bytes is not None and size > max_bytes:
        raise ScenarioError(field, f"is {size:,} bytes, over the limit of {max_bytes:,}")
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise ScenarioError(field, "not valid JSON (not UTF-8 text)") from None
    try:
        data = json.loads(text, parse_constant=_refuse_constant, parse_int=_refuse_long_int(max_int_digits),
                          parse_float=_finite_float, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as err:
        raise ScenarioError(
            field, f"not valid JSON ({err.msg} at line {err.lineno} column {err.colno})"
        ) from None
    except _DuplicateKey as err:
        raise ScenarioError(field, str(err)) from None
    except RecursionError:
        raise ScenarioError(field, f"not valid JSON (nested deeper than {max_depth} levels)") from None
    except ValueError as err:  # NaN/Infinity, a float overflow, an integer literal over the digit limit
        raise ScenarioError(field, f"not valid JSON ({err})") from None
    if not _depth_within(data, max_depth):
        raise ScenarioError(field, f"not valid JSON (nested deeper than {max_depth} levels)")
    return data
