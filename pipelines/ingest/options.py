"""What every ingest adapter is given and what it must expose.

Apart from :mod:`predops.pipelines.ingest.registry` (which imports the adapters) so that
the adapters can import these without importing the registry back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from predops.core.clock import Clock
from predops.pipelines.ingest.batch import Batch
from predops.pipelines.ingest.identity import KnownNodes


@dataclass(frozen=True, slots=True)
class IngestOptions:
    """Options every adapter may read; ``extra`` holds adapter-specific KEY=VALUE pairs.

    ``source`` is the lake source the ingest writes; ``inventory(source)`` gives a source's
    known nodes (None: it has no inventory), for adapters that reconcile node names.
    """

    clock: Clock
    table: str | None = None
    start: datetime | None = None
    end: datetime | None = None
    step_s: float | None = None
    extra: Mapping[str, str] = field(default_factory=dict)
    source: str | None = None
    inventory: Callable[[str], KnownNodes | None] | None = None


class AdapterModule(Protocol):
    SOURCE: str
    HELP: str

    def read(self, path: str, options: IngestOptions) -> Iterator[Batch]: ...
