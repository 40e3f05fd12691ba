"""The KV-cache transfer paths between a prefill and a decode worker each engine documents, per accelerator
vendor (planner/data/kv_transfer_paths.toml, each with its source). A disaggregated fleet needs one: both
pools on one vendor's accelerators, and the engine it is planned on able to move the KV cache between them.
"""

from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from planner.engines.base import DEFAULT_ENGINE, SERVING_ENGINES

PATHS_FILE = Path(__file__).parent.parent / "data" / "kv_transfer_paths.toml"


@dataclass(frozen=True)
class KvTransferPath:
    vendor: str
    engine: str
    path: str  # what the engine calls it (connector, transfer backend)
    transport: str
    launch: str  # the engine's switch for it
    source: str

    def as_dict(self) -> dict[str, Any]:
        return {"vendor": self.vendor, "engine": self.engine, "path": self.path, "transport": self.transport,
                "launch": self.launch, "source": self.source}


@functools.cache
def kv_transfer_paths() -> tuple[KvTransferPath, ...]:
    rows = tomllib.loads(PATHS_FILE.read_text())["path"]
    return tuple(KvTransferPath(**row) for row in rows)


def vendor_key(vendor: str | None) -> str | None:
    """A GPU's vendor as the table names it ("NVIDIA" and "nvidia" are one vendor); None when not given."""
    if vendor is None or not vendor.strip():
        return None
    return vendor.strip().split()[0].lower()


def kv_transfer_path(vendor: str | None, engine: str) -> KvTransferPath | None:
    """The documented path of `engine` between two workers of `vendor`'s accelerators, or None. The "graph"
    floor is no serving engine: its fleets would be served by the default engine."""
    key = vendor_key(vendor)
    name = engine if engine in SERVING_ENGINES else DEFAULT_ENGINE
    return next((p for p in kv_transfer_paths() if p.vendor == key and p.engine == name), None)


__all__ = ["KvTransferPath", "kv_transfer_path", "kv_transfer_paths", "vendor_key"]
