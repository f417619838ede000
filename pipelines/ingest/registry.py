"""Which adapter reads which source: ``predops ingest <name> <path>``.

Each adapter module exposes ``SOURCE`` (the lake source name it writes under by
default), ``HELP`` (one line) and ``read(path, options) -> Iterator[Batch]``. Modules are
imported only when used, so a slow import (kubernetes) costs nothing elsewhere.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import ModuleType
from typing import Protocol, cast

from core.clock import Clock
from pipelines.ingest.batch import Batch


@dataclass(frozen=True, slots=True)
class IngestOptions:
    """Options every adapter may read; ``extra`` holds adapter-specific KEY=VALUE pairs."""

    clock: Clock
    table: str | None = None
    start: datetime | None = None
    end: datetime | None = None
    step_s: float | None = None
    extra: Mapping[str, str] = field(default_factory=dict)


class AdapterModule(Protocol):
    SOURCE: str
    HELP: str

    def read(self, path: str, options: IngestOptions) -> Iterator[Batch]: ...


ADAPTERS: dict[str, str] = {
    "files": "pipelines.ingest.files",
    "prometheus": "pipelines.ingest.prometheus",
    "kubernetes": "pipelines.ingest.kubernetes",
    "openb": "pipelines.ingest.traces.openb",
    "backblaze-daily": "pipelines.ingest.traces.backblaze_daily",
    "backblaze-hds": "pipelines.ingest.traces.backblaze_hds",
    "nab": "pipelines.ingest.traces.nab",
    "helios": "pipelines.ingest.traces.helios",
    "philly": "pipelines.ingest.traces.philly",
    "datacenter": "pipelines.ingest.traces.datacenter",
    "azure-vm": "pipelines.ingest.traces.azure_vm",
}


def adapter(name: str) -> AdapterModule:
    try:
        module_name = ADAPTERS[name]
    except KeyError:
        raise KeyError(f"unknown source {name!r}; known: {', '.join(sorted(ADAPTERS))}") from None
    module: ModuleType = importlib.import_module(module_name)
    return cast(AdapterModule, module)
