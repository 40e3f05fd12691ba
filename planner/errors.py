"""One error type for every bad input: a field path and a reason, printable as one line."""

from __future__ import annotations

from pydantic import ValidationError


class ScenarioError(ValueError):
    def __init__(self, field: str, reason: str):
        self.field = field or "scenario"
        self.reason = reason
        super().__init__(f"{self.field}: {self.reason}")


def _clean(msg: str) -> str:
    return msg.removeprefix("Value error, ").removeprefix("Assertion failed, ")


def from_validation_error(err: ValidationError, prefix: str = "") -> ScenarioError:
    """The first pydantic error as a ScenarioError with a dotted field path."""
    first = err.errors()[0]
    path = ".".join(str(part) for part in first["loc"])
    field = ".".join(part for part in (prefix, path) if part)
    reason = _clean(first["msg"])
    if first["type"] == "extra_forbidden":
        reason = "unknown field"
    elif first["type"] == "missing":
        reason = "required field is missing"
    return ScenarioError(field, reason)
