"""Validate adapter batches, quarantine bad rows, write good ones, log the ingest."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from predops.core.clock import Clock
from predops.core.schemas import schema_for
from predops.core.validation import EARLIEST_TS, validate
from predops.pipelines.ingest.batch import Batch, IngestError
from predops.pipelines.workspace.lake import Lake, check_source


@dataclass(slots=True)
class TableReport:
    rows_in: int = 0
    rows_written: int = 0
    rows_already_present: int = 0
    rows_quarantined: int = 0
    ignored_columns: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows_in": self.rows_in,
            "rows_written": self.rows_written,
            "rows_already_present": self.rows_already_present,
            "rows_quarantined": self.rows_quarantined,
            "ignored_columns": self.ignored_columns,
        }


@dataclass(slots=True)
class IngestReport:
    source: str
    input: str
    tables: dict[str, TableReport] = field(default_factory=dict)
    notes: dict[str, Any] = field(default_factory=dict)
    """What the adapter reported besides rows (e.g. ``identity``), keyed by topic."""

    @property
    def rows_quarantined(self) -> int:
        return sum(t.rows_quarantined for t in self.tables.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "input": self.input,
            "tables": {k: v.to_dict() for k, v in sorted(self.tables.items())},
            **self.notes,
        }


def file_digest(path: Path) -> str:
    """sha256 of a file or of every file under a directory (in name order)."""
    h = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for f in files:
        h.update(str(f.relative_to(path) if f != path else f.name).encode())
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


ENTITY_CHECKED_TABLES = frozenset({"telemetry", "events", "node_addresses"})


def ingest(
    lake: Lake,
    source: str,
    batches: Iterable[Batch],
    *,
    clock: Clock,
    input_name: str,
    future_tolerance: timedelta = timedelta(hours=1),
    earliest: datetime | None = EARLIEST_TS,
    check_entities: bool = True,
) -> IngestReport:
    """Validate each batch, quarantine bad rows, write good ones to the lake.

    Telemetry, events and addresses of a node the same source's inventory does not know are
    quarantined (when that source has an inventory; adapters yield inventory first), and so
    are timestamps before ``earliest`` (any time column) or more than ``future_tolerance``
    after the clock (the table's time column).
    """
    check_source(source)
    now = clock.now()
    report = IngestReport(source=source, input=input_name)
    known: set[str] | None = None
    known_loaded = False
    # One ingest is one lake commit: readers see all of it or none of it, and a failure
    # anywhere (a bad file late in a folder, a kill) leaves the lake as it was.
    with lake.transaction():
        for batch in batches:
            origin = batch.origin or input_name
            report.notes.update(batch.notes or {})
            schema = schema_for(batch.table)
            t = report.tables.setdefault(batch.table, TableReport())
            entities = None
            if check_entities and batch.table in ENTITY_CHECKED_TABLES:
                if not known_loaded:
                    known, known_loaded = lake.node_ids(source), True
                entities = known
            try:
                res = validate(
                    batch.frame,
                    schema,
                    now=now,
                    future_tolerance=future_tolerance,
                    earliest=earliest,
                    known_entities=entities,
                    first_row=batch.first_row,
                )
            except pl.exceptions.PolarsError as exc:
                raise IngestError(f"{origin}: cannot check its {batch.table} rows ({exc})") from exc
            if batch.table == "inventory":
                known_loaded = False  # the inventory changed: reload before the next check
            w = lake.write(batch.table, source, res.good)
            q = lake.quarantine(
                batch.table, source, res.quarantined, input_name=origin, ingested_at=now
            )
            t.rows_in += batch.frame.height
            t.rows_written += w.rows_written
            t.rows_already_present += w.rows_already_present
            t.rows_quarantined += q
            t.ignored_columns = sorted(set(t.ignored_columns) | set(res.ignored_columns))
        lake.log_ingest({"at": now.isoformat(), **report.to_dict()})
    return report
