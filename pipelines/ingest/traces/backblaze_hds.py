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
- **Timestamps.** The table has power-on hours, not dates; each drive also carries
  ``min_date`` / ``max_date`` (first and last day seen) and ``min_hours`` /
  ``max_hours``. An interval boundary ``h`` is placed at ``min_date`` 00:00 UTC plus the
  power-on hours elapsed since ``min_hours``, scaled by the drive's calendar span
  ``(max_date - min_date) / (max_hours - min_hours)`` and rounded to the second (a drive
  with ``max_hours == min_hours`` stays at ``min_date``). Unscaled, the hours run
  slow or fast against the calendar whenever a drive was powered off or its SMART 9
  counter jumped: on the 4,702 failures of the dynamichazard table, 77 % of unscaled
  failure times fall within a day of the drive's recorded last day, but 530 (11 %)
  fall more than a week away (up to 577 days early, 144 days late), and SMART rows
  could land after the drive's removal. Scaling pins the first observation to
  ``min_date`` and the failure to ``max_date``, keeps the order, and leaves the offset
  nearly unchanged for the typical drive (median drift 0.2 days per drive).
- ``events``: a ``failure`` event with cause ``disk`` at the scaled ``tstop`` of each
  row with ``fails`` = 1 (in the published table that is always the drive's last
  interval, so the event lands on ``max_date``).

Where a timestamp cannot be derived (a bad ``tstart``, date, ...) the row is quarantined
with the source values in the reason (see :mod:`pipelines.ingest.traces.derived`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import polars as pl

from core.schemas import DRIVE_SMART, UTC_TS
from pipelines.ingest.batch import Batch
from pipelines.ingest.registry import IngestOptions
from pipelines.ingest.traces.derived import explained, iso_text
from pipelines.ingest.traces.drive_failures import failure_events, with_input_row
from pipelines.ingest.traces.publisher_files import csv_files, header, read_table, require_columns

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


def calendar_time(hours_col: str) -> pl.Expr:
    """The UTC time of power-on hour ``hours_col`` of a drive (see the module docstring)."""
    first, last = _day("min_date"), _day("max_date")
    h0, h1 = _number("min_hours"), _number("max_hours")
    span_us = (last - first).dt.total_microseconds().cast(pl.Float64)
    frac = pl.when(h1 > h0).then((_number(hours_col) - h0) / (h1 - h0)).otherwise(0.0)
    offset_s = (frac * span_us / 1e6).round(0)
    ok = (_number(hours_col) >= h0) & (_number(hours_col) <= h1) & (last >= first)
    t = first + pl.duration(seconds=offset_s.cast(pl.Int64))
    return pl.when(ok).then(t).otherwise(pl.lit(None, dtype=UTC_TS))


def timestamp_text(hours_col: str) -> pl.Expr:
    """:func:`calendar_time` as text, or the source values where it cannot be derived."""
    return explained(iso_text(calendar_time(hours_col)), hours_col, *TIME_SOURCES)


def smart_frame(raw: pl.DataFrame) -> pl.DataFrame:
    """hds rows (text columns) as ``drive_smart`` columns, text typed for validation."""
    has = set(raw.columns)

    def smart(n: int) -> pl.Expr:
        if n == 9:
            return pl.col("tstart").alias("smart_9_raw")
        src = f"smart_{n}"
        return (pl.col(src) if src in has else pl.lit(None, pl.String)).alias(f"smart_{n}_raw")

    return raw.select(
        timestamp_text("tstart").alias("ts"),
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
        at=timestamp_text("tstop"),
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
