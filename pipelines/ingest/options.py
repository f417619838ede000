"""What every ingest adapter is given and what it must expose.

Apart from :mod:`predops.pipelines.ingest.registry` (which imports the adapters) so that
the adapters can import these without importing the registry back.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from predops.core.clock import Clock
from predops.pipelines.ingest.batch import Batch


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
