"""pytest plugin for tools/mutation_check.py: multiplies one planner function's result by 1.1.

`RIDGELINE_MUTATION=module:function` names it. Every planner module is imported first, then every module
attribute bound to that function (its own module and each `from ... import` of it) is replaced by the
mutated one, before any test module imports the planner. A result that is a number or an array is scaled;
a dataclass (a step's times or work) has each of its numeric fields scaled.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import os
import pkgutil
import sys
from typing import Any

import numpy as np

FACTOR = 1.1


def _scaled(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float, np.floating, np.integer, np.ndarray)):
        return value * FACTOR
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: _scaled(getattr(value, f.name)) for f in dataclasses.fields(value)
                   if isinstance(getattr(value, f.name), (int, float, np.floating, np.ndarray))
                   and not isinstance(getattr(value, f.name), bool)}
        return dataclasses.replace(value, **changes)
    raise TypeError(f"cannot scale a {type(value).__name__}")


def _import_all() -> None:
    for package in ("planner", "gpu_catalog"):
        pkg = importlib.import_module(package)
        for info in pkgutil.iter_modules(pkg.__path__, package + "."):
            if not info.name.endswith("__main__"):
                importlib.import_module(info.name)


def apply(target: str) -> int:
    """Replace every binding of `module:function` by its 1.1x version; return how many were replaced."""
    module_name, _, attr = target.partition(":")
    _import_all()
    original = getattr(importlib.import_module(module_name), attr)
    cache_clear = getattr(original, "cache_clear", None)

    @functools.wraps(original)
    def mutated(*args: Any, **kwargs: Any) -> Any:
        return _scaled(original(*args, **kwargs))

    replaced = 0
    for name, module in list(sys.modules.items()):
        if module is None or not (name.startswith("planner") or name.startswith("gpu_catalog")
                                  or name.startswith("tools")):
            continue
        for key, value in list(vars(module).items()):
            if value is original:
                setattr(module, key, mutated)
                replaced += 1
    if cache_clear:
        cache_clear()
    return replaced


def pytest_configure(config: Any) -> None:  # noqa: ARG001
    target = os.environ.get("RIDGELINE_MUTATION")
    if target and apply(target) == 0:
        raise RuntimeError(f"mutation target {target} not found")
