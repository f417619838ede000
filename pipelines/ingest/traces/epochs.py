"""Calendar anchors for traces whose times are offsets (seconds, steps, row numbers).

Several publishers give no calendar date, only "day 1", "week 2" or a step index. An
adapter places such a trace at a documented default epoch, which the user overrides
with ``-o epoch=ISO-8601`` (or a trace-specific key such as ``-o azure_v2_epoch=...``).
"""

from __future__ import annotations

from datetime import UTC, datetime

from predops.pipelines.ingest.batch import IngestError
from predops.pipelines.ingest.options import IngestOptions


def parse_epoch(text: str, key: str) -> datetime:
    """An ISO-8601 date or time as a UTC-aware datetime (naive values are UTC)."""
    try:
        t = datetime.fromisoformat(text.strip())
    except ValueError:
        raise IngestError(f"option {key}={text!r} is not an ISO-8601 date or time") from None
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def epoch_option(options: IngestOptions, default: datetime, *keys: str) -> datetime:
    """The first of ``keys`` given with ``-o``, else ``default``."""
    for key in keys:
        if key in options.extra:
            return parse_epoch(options.extra[key], key)
    return default
