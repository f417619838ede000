"""Backblaze "Hard Drive Data and Stats" daily files -> ``drive_smart`` + failure ``events``.

``predops ingest backblaze-daily PATH``: PATH is one daily CSV (``2013-04-10.csv`` or
``.csv.gz``) or a directory of them (searched recursively, so the publisher's
quarterly folders work too). A row is one drive on one day.

Mapping (choices):

- ``drive_smart``: ``node_id`` = ``serial_number``; ``ts`` = ``date`` at 00:00 UTC
  (Backblaze snapshots are daily and carry no time of day); ``model`` and
  ``capacity_bytes`` as published; ``power_on_hours`` = ``smart_9_raw``; the
  ``smart_N_raw`` columns the contract has, null where the file lacks the column
  or leaves it empty (2013 files fill only SMART 1, 5, 9, 194 and 197). The
  normalised SMART values and the other raw ids are not kept.
- ``events``: one ``failure`` event with cause ``disk`` at ``date`` 00:00 UTC for each
  row with ``failure`` = 1 (Backblaze flags a drive's last day before removal as
  failed); see :mod:`pipelines.ingest.traces.drive_failures` for other flag values.

Every file's header is checked before anything is written; then files are read and
written one at a time (one daily file is one date partition), so memory stays at one
file however long the download. Values are handed over as text: validation types
them and quarantines bad ones with the file's data row number and the field.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import polars as pl

from predops.core.schemas import DRIVE_SMART
from predops.pipelines.ingest.batch import Batch
from predops.pipelines.ingest.options import IngestOptions
from predops.pipelines.ingest.traces.drive_failures import failure_events, with_input_row
from predops.pipelines.ingest.traces.publisher_files import (
    csv_files,
    header,
    read_table,
    require_columns,
)

SOURCE = "backblaze-daily"
HELP = "Backblaze daily drive-stats CSVs -> drive_smart + disk failure events"
REQUIRED = ("date", "serial_number", "model", "capacity_bytes", "failure")
WHAT = (
    "a Backblaze daily drive-stats CSV "
    "(date, serial_number, model, capacity_bytes, failure, smart_N_raw...)"
)
SMART_COLUMNS = tuple(c for c in DRIVE_SMART.names if c.startswith("smart_"))


def smart_frame(raw: pl.DataFrame) -> pl.DataFrame:
    """Daily rows (text columns) as ``drive_smart`` columns, still text for validation."""
    has = set(raw.columns)

    def col(name: str) -> pl.Expr:
        return pl.col(name) if name in has else pl.lit(None, dtype=pl.String)

    return raw.select(
        pl.col("date").alias("ts"),
        pl.col("serial_number").alias("node_id"),
        pl.col("model"),
        pl.col("capacity_bytes"),
        col("smart_9_raw").alias("power_on_hours"),
        *(col(c).alias(c) for c in SMART_COLUMNS),
    )


def read_file(path: Path) -> Iterator[Batch]:
    """One daily file: its ``drive_smart`` batch, then its failure events (if any)."""
    raw = read_table(path, REQUIRED, WHAT)
    yield Batch("drive_smart", smart_frame(raw))
    events = failure_events(
        with_input_row(raw),
        flag="failure",
        node="serial_number",
        at=pl.col("date"),
        file_name=path.name,
    )
    if events.height:
        yield Batch("events", events)


def read(path: str, options: IngestOptions) -> Iterator[Batch]:
    files = csv_files(Path(path), WHAT)
    for f in files:  # refuse a wrong file before anything is written
        require_columns(header(f), REQUIRED, f, WHAT)
    for f in files:
        yield from read_file(f)
