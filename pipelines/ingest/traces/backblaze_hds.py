"""Backblaze start-stop ``hds`` table (R package dynamichazard) -> ``drive_smart`` + ``events``.

``predops ingest backblaze-hds PATH``: PATH is ``hds.csv`` / ``hds.csv.gz`` or a
directory of such files. A row is one interval ``[tstart, tstop)`` of one drive,
measured in power-on hours (SMART 9), during which its SMART covariates were
constant (last value carried forward); ``fails`` = 1 if the drive failed at ``tstop``.

Mapping (choices):

- ``drive_smart``: one row per interval, observed at its start. ``node_id`` =
  ``serial_number``; ``power_on_hours`` and ``smart_9_raw`` = ``tstart``; raw
  ``smart_5, 10, 12, 187, 188, 189, 196, 197, 198`` -> ``smart_N_raw``; ``smart_1_raw``
  and ``smart_194_raw`` are not in the table (null). ``capacity_bytes`` is null: the
  table gives ``size_tb`` rounded to 0.1 TB (a 160 GB drive shows 0.2), too coarse to
  pass off as a byte count; ``model`` identifies the capacity.
- **Timestamps, point in time.** The table has power-on hours, not dates; each drive
  also carries ``min_date`` / ``max_date`` (first and last day seen) and ``min_hours`` /
  ``max_hours``. An interval starting at power-on hour ``h`` is placed at ``min_date``
  00:00 UTC plus ``h - min_hours`` hours: what was known when the drive was first seen
  and the row's own counter, nothing later. A row that would land after ``max_date``
  (the counter ran fast, e.g. a SMART 9 jump) is placed on ``max_date``, the drive's
  last day: it is not visible before the drive's end, so it informs no feature of an
  earlier time; of several such rows of one drive the latest is kept and the others
  are quarantined as superseded (60 rows of the dynamichazard table). A drive whose
  hours run slow (powered off) goes quiet before its last day, last values carried
  forward.

  An earlier version scaled the hours by each drive's calendar span
  ``(max_date - min_date) / (max_hours - min_hours)``. That pins the failure to its
  date, but the span is only known at the drive's end, so the time of every SMART row
  (and with it every feature on earlier days) depended on when and whether the drive
  would fail. On the 4,702 failures of the dynamichazard table, 77 % of unscaled failure
  times fall within a day of the recorded last day, 530 (11 %) more than a week away
  (up to 577 days early, 144 days late); those are the drives whose rows now sit
  differently.
- ``events``: a ``failure`` event with cause ``disk`` for each row with ``fails`` = 1, on
  the drive's ``max_date`` when ``tstop`` is its last power-on hour (in the published
  table that is always the case: Backblaze flags a failure on the drive's last day), at
  the point-in-time placement of ``tstop`` otherwise. The label time may come from the
  drive's end — that is what a label is; features never do.

Where a timestamp cannot be derived (a bad ``tstart``, date, ...) the row is quarantined
with the source values in the reason (see :mod:`pipelines.ingest.traces.derived`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import polars as pl

from predops.core.schemas import DRIVE_SMART, UTC_TS
from predops.pipelines.ingest.batch import Batch
from predops.pipelines.ingest.options import IngestOptions
from predops.pipelines.ingest.traces.derived import explained, iso_text
from predops.pipelines.ingest.traces.drive_failures import failure_events, with_input_row
from predops.pipelines.ingest.traces.publisher_files import (
    csv_files,
    header,
    read_table,
    require_columns,
)

SOURCE = "backblaze-hds"
HELP = "Backblaze start-stop hds table (dynamichazard) -> drive_smart + disk failure events"
REQUIRED = (
    "serial_number",
    "model",
    "min_date",
    "max_date",
    "min_hours",
    "max_hours",
    "tstart",
    "tstop",
    "fails",
)
WHAT = (
    "a Backblaze start-stop hds table (serial_number, model, min_date, max_date, "
    "min_hours, max_hours, tstart, tstop, fails, smart_N...)"
)
TIME_SOURCES = ("min_date", "max_date", "min_hours", "max_hours")
SMART_IDS = tuple(
    int(c.removeprefix("smart_").removesuffix("_raw"))
    for c in DRIVE_SMART.names
    if c.startswith("smart_")
)


def _number(col: str) -> pl.Expr:
    return pl.col(col).str.strip_chars().cast(pl.Float64, strict=False)


def _day(col: str) -> pl.Expr:
    return (
        pl.col(col)
        .str.strip_chars()
        .str.to_date("%Y-%m-%d", strict=False)
        .cast(pl.Datetime("us"))
        .dt.replace_time_zone("UTC")
    )


def observed_time(hours_col: str) -> pl.Expr:
    """When power-on hour ``hours_col`` of a drive was reached, from what was known at
    the drive's first observation (see the module docstring); never after its last day."""
    first, last = _day("min_date"), _day("max_date")
    h, h0, h1 = _number(hours_col), _number("min_hours"), _number("max_hours")
    t = first + pl.duration(seconds=((h - h0) * 3600.0).round(0).cast(pl.Int64))
    ok = (h >= h0) & (h <= h1) & (last >= first)
    return pl.when(ok).then(pl.min_horizontal(t, last)).otherwise(pl.lit(None, dtype=UTC_TS))


def failure_time(hours_col: str) -> pl.Expr:
    """A failure at power-on hour ``hours_col``: on the drive's last day when that is its
    last hour, else :func:`observed_time`."""
    at_end = _number(hours_col) == _number("max_hours")
    return (
        pl.when(at_end & (_day("max_date") >= _day("min_date")))
        .then(_day("max_date"))
        .otherwise(observed_time(hours_col))
    )


def timestamp_text(time: pl.Expr, hours_col: str) -> pl.Expr:
    """``time`` as text, or the source values where it cannot be derived."""
    return explained(iso_text(time), hours_col, *TIME_SOURCES)


def _placed_text() -> pl.Expr:
    """The ``ts`` text of each interval: :func:`observed_time` of ``tstart``; for an
    interval that shares its time with a later interval of the same drive (several
    intervals of a fast counter all wait for the last day) a note validation cannot
    read, so it is quarantined as superseded instead of clashing on the lake's key."""
    t = observed_time("tstart")
    later = t.shift(-1).over("serial_number", order_by=_number("tstart"))
    superseded = t.is_not_null() & (t == later)
    note = pl.format(
        "(superseded: tstart={} lands on max_date={} with a later interval of the drive)",
        pl.col("tstart"),
        pl.col("max_date"),
    )
    return pl.when(superseded).then(note).otherwise(timestamp_text(t, "tstart"))


def smart_frame(raw: pl.DataFrame) -> pl.DataFrame:
    """hds rows (text columns) as ``drive_smart`` columns, text typed for validation."""
    has = set(raw.columns)

    def smart(n: int) -> pl.Expr:
        if n == 9:
            return pl.col("tstart").alias("smart_9_raw")
        src = f"smart_{n}"
        return (pl.col(src) if src in has else pl.lit(None, pl.String)).alias(f"smart_{n}_raw")

    return raw.select(
        _placed_text().alias("ts"),
        pl.col("serial_number").alias("node_id"),
        pl.col("model"),
        pl.lit(None, dtype=pl.Int64).alias("capacity_bytes"),
        pl.col("tstart").alias("power_on_hours"),
        *(smart(n) for n in SMART_IDS),
    )


def read_file(path: Path) -> Iterator[Batch]:
    raw = read_table(path, REQUIRED, WHAT)
    yield Batch("drive_smart", smart_frame(raw))
    events = failure_events(
        with_input_row(raw),
        flag="fails",
        node="serial_number",
        at=timestamp_text(failure_time("tstop"), "tstop"),
        file_name=path.name,
    )
    if events.height:
        yield Batch("events", events)


def read(path: str, options: IngestOptions) -> Iterator[Batch]:
    files = csv_files(Path(path), WHAT)
    for f in files:
        require_columns(header(f), REQUIRED, f, WHAT)
    for f in files:
        yield from read_file(f)
