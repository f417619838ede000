"""DataCenter-Traces (Fernández, Zenodo 14564847) whole-cluster usage -> ``demand`` series.

``predops ingest datacenter PATH``: PATH is one of the publisher's CSV files or a
folder of them (searched recursively; e.g. the whole ``datacenter-traces/`` tree). Each
file holds, per time bucket, means or sums over a whole cluster, one metric per
column. Files are recognised by the publisher's names, which carry what the rows
lack (the day or week, the bucket width):

- ``alibaba2018``: ``machine_usage[_day_<d>]_grouped_<s>_seconds.csv[.gz]``; the row
  position gives the time.
- ``google2019``: ``instance_usage_grouped_<s>_seconds[_day_<d>|_week[_]<w>][_with_hour]``
  ``.csv[.gz]``; the row position gives the time (``hour`` is checked against it).
- ``azure_v2``: ``vm_cpu_readings[_week<w>]_aggregated_cpu_mem.csv`` (a ``timestamp``
  column in seconds) and ``..._aggregated_cpu_mem_no_timestamp.csv`` (row position).

Mapping (choices):

- One series per trace, bucket width and metric column: ``series_id`` =
  ``datacenter/<trace>/<s>s/<metric>``, e.g.
  ``datacenter/alibaba2018/300s/cpu_util_percent``.
  The width is part of the id because the 10 s, 30 s and 300 s files of one day give
  different means for the same bucket start. ``pool`` = trace, ``resource`` = metric,
  ``value`` in the publisher's unit (alibaba2018: percent; google2019: fraction of the
  largest machine, except cycles per instruction; azure_v2: summed ``cpu_usage`` and
  ``assigned_mem`` as published); ``capacity`` = 100 for percentages, 1 for fractions,
  null otherwise.
- **Time.** A row-position file's row *i* is the bucket starting ``i * s`` seconds after
  the start of its day ``d`` (``(d-1)`` days after the epoch) or week ``w``
  (``(w-1) * 7`` days after); a name without day or week starts at the epoch. azure_v2's
  ``timestamp`` is seconds from the trace start (week files continue the count), and
  its ``no_timestamp`` twins are 5-minute buckets. None of the three publishes a
  calendar date, so each trace is placed at a documented epoch, overridable with
  ``-o epoch=`` (all traces in the input) or ``-o <trace>_epoch=`` (one trace):
  alibaba2018 at 2018-01-01T00:00Z (arbitrary; the trace covers 8 days), google2019
  at 2019-05-01T00:00Z (the trace is "May 2019, days 1-21"; UTC midnight is a
  convention), azure_v2 at 2019-01-01T00:00Z (arbitrary; a 30-day trace from 2019).
- **Day and week files overlap.** google2019's day files and week files hold the same
  buckets (checked: identical text, except 27 cycles-per-instruction values that the
  ``_with_hour`` file prints one digit shorter), and so do azure_v2's files with and
  without ``timestamp``. They map to the same (series_id, ts) keys, so the lake keeps
  each bucket once (the first file's, in path order). Within one input, a bucket given
  twice with values that differ by more than :data:`SAME_VALUE_RTOL` is not resolved
  silently: the later file's row is quarantined naming the earlier value.
- **Abnormal values.** alibaba2018 marks abnormal readings -1 or 101 (all its columns are
  0..100); google2019's fractions lie in 0..1. The demand contract bounds ``value`` only
  below (0), since most demand series (GPUs, cores) have no natural maximum: -1 would be
  quarantined by it, 101 would be kept. So this adapter checks the per-metric range
  itself and hands an out-of-range value to validation as unreadable text
  (``101 (out of range 0..100 %)``), which quarantines the row with row, field and
  value (see :mod:`pipelines.ingest.traces.derived`). The published files are means
  over all machines and contain no such value; a file with one gets it quarantined.
- **Rows past their period.** alibaba2018's day-1 files hold one bucket more than a day
  (289 x 300 s, 2,881 x 30 s, 8,641 x 10 s); that last bucket would start on day 2 and
  collide, with a different value, with day 2's first row. Which of the two is the
  stray cannot be told from the files, so rows past the end of their day (or week)
  are quarantined as such; the day's own buckets are kept.
- google2019's ``_with_hour`` files carry the hour of day; a row whose ``hour`` disagrees
  with its position is quarantined.

Each (file, metric) is one batch, so quarantine row numbers are the file's data rows.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from predops.core.schemas import UTC_TS
from predops.pipelines.ingest.batch import Batch, IngestError
from predops.pipelines.ingest.options import IngestOptions
from predops.pipelines.ingest.traces.derived import explained, iso_text, within
from predops.pipelines.ingest.traces.epochs import epoch_option
from predops.pipelines.ingest.traces.publisher_files import csv_files, csv_stem, read_table

SOURCE = "datacenter"
HELP = "DataCenter-Traces cluster usage (alibaba2018, google2019, azure_v2) -> demand series"
DAY_S = 86_400
WEEK_S = 7 * DAY_S
AZURE_BUCKET_S = 300
SAME_VALUE_RTOL = 1e-9
"""Values of one bucket in two files that agree to this relative tolerance are the same
reading written with different precision (google2019's ``_with_hour`` week file prints
some values with one digit fewer than its day files)."""
ROW = "__row__"
TS = "__ts__"


@dataclass(frozen=True, slots=True)
class Trace:
    """One of the three traces: how its files are named and what their columns mean."""

    name: str
    pattern: re.Pattern[str]
    metrics: tuple[str, ...]
    epoch: datetime
    bounds: dict[str, tuple[float, float, str]] = field(default_factory=dict)
    """metric -> (low, high, unit) checked by the adapter (the contract cannot)."""


ALIBABA = Trace(
    "alibaba2018",
    re.compile(r"^machine_usage(?:_day_(?P<day>\d+))?_grouped_(?P<bucket>\d+)_seconds$", re.I),
    ("cpu_util_percent", "mem_util_percent", "net_in", "net_out", "disk_io_percent"),
    datetime(2018, 1, 1, tzinfo=UTC),
    {
        m: (0.0, 100.0, "%")
        for m in ("cpu_util_percent", "mem_util_percent", "net_in", "net_out", "disk_io_percent")
    },
)
GOOGLE = Trace(
    "google2019",
    re.compile(
        r"^instance_usage_grouped_(?P<bucket>\d+)_seconds"
        r"(?:_day_(?P<day>\d+)|_week_?(?P<week>\d+))?(?P<hour>_with_hour)?$",
        re.I,
    ),
    ("avg_cpu", "avg_mem", "avg_assigned_mem", "avg_cycles_per_instruction"),
    datetime(2019, 5, 1, tzinfo=UTC),
    {m: (0.0, 1.0, "(fraction)") for m in ("avg_cpu", "avg_mem", "avg_assigned_mem")},
)
AZURE = Trace(
    "azure_v2",
    re.compile(
        r"^vm_cpu_readings(?:_week(?P<week>\d+))?_aggregated_cpu_mem"
        r"(?P<no_ts>_no_timestamp)?$",
        re.I,
    ),
    ("cpu_usage", "assigned_mem"),
    datetime(2019, 1, 1, tzinfo=UTC),
)
TRACES = (ALIBABA, GOOGLE, AZURE)
EXPECTED = (
    "a DataCenter-Traces file: machine_usage_day_<d>_grouped_<s>_seconds.csv "
    "(alibaba2018), instance_usage_grouped_<s>_seconds_day_<d>|_week<w>.csv "
    "(google2019) or vm_cpu_readings_week<w>_aggregated_cpu_mem[_no_timestamp].csv "
    "(azure_v2), optionally .gz"
)


@dataclass(frozen=True, slots=True)
class TraceFile:
    """A recognised file: its trace and where its rows sit in time."""

    path: Path
    trace: Trace
    bucket_s: int
    start_s: int
    """Seconds from the trace epoch to the file's first bucket (row-position files)."""
    period: str | None
    """``day 3`` / ``week 2`` for row-position files named so; None otherwise."""
    period_rows: int | None
    timestamp_column: bool
    hour_column: bool

    def series_id(self, metric: str) -> str:
        return f"datacenter/{self.trace.name}/{self.bucket_s}s/{metric}"


def classify(path: Path) -> TraceFile:
    """Recognise ``path`` by its name, or refuse it saying which names are expected."""
    stem = csv_stem(path)
    for trace in TRACES:
        m = trace.pattern.match(stem)
        if m is None:
            continue
        groups = m.groupdict()
        bucket = int(groups.get("bucket") or AZURE_BUCKET_S)
        if bucket <= 0:
            break
        day, week = groups.get("day"), groups.get("week")
        timestamp_column = trace is AZURE and not groups.get("no_ts")
        period, start_s, span_s = None, 0, None
        if day is not None and int(day) >= 1:
            period, start_s, span_s = f"day {int(day)}", (int(day) - 1) * DAY_S, DAY_S
        elif week is not None and int(week) >= 1:
            period, start_s, span_s = f"week {int(week)}", (int(week) - 1) * WEEK_S, WEEK_S
        elif day is not None or week is not None:
            break
        return TraceFile(
            path=path,
            trace=trace,
            bucket_s=bucket,
            start_s=start_s,
            period=None if timestamp_column else period,
            period_rows=None if timestamp_column or span_s is None else span_s // bucket,
            timestamp_column=timestamp_column,
            hour_column=bool(groups.get("hour")),
        )
    raise IngestError(f"{path}: unrecognised file name; expected {EXPECTED}")


def timestamps(f: TraceFile, epoch: datetime) -> pl.Expr:
    """Each row's bucket start as ISO text, or text saying why it has none."""
    base = pl.lit(epoch, dtype=UTC_TS)
    if f.timestamp_column:
        secs = pl.col("timestamp").str.strip_chars().cast(pl.Float64, strict=False)
        t = base + pl.duration(microseconds=(secs * 1e6).round(0).cast(pl.Int64))
        return explained(iso_text(t), "timestamp")
    offset = pl.col(ROW) * f.bucket_s
    text = iso_text(base + pl.duration(seconds=f.start_s + offset))
    if f.period_rows is not None:
        past = pl.col(ROW) >= f.period_rows
        text = (
            pl.when(past)
            .then(
                pl.format(
                    "(bucket {} starts after the end of {}, which has {} buckets of {} s)",
                    pl.col(ROW) + 1,
                    pl.lit(f.period),
                    pl.lit(f.period_rows),
                    pl.lit(f.bucket_s),
                )
            )
            .otherwise(text)
        )
    if f.hour_column:
        hour = pl.col("hour").str.strip_chars().cast(pl.Int64, strict=False)
        expected = ((f.start_s + offset) // 3600) % 24
        text = (
            pl.when(hour.is_null())
            .then(pl.format("(hour column '{}' is not an hour)", pl.col("hour").fill_null("")))
            .when(hour != expected)
            .then(
                pl.format(
                    "(hour column says {} but bucket {} falls in hour {})",
                    pl.col("hour"),
                    pl.col(ROW) + 1,
                    expected,
                )
            )
            .otherwise(text)
        )
    return text


def long_frames(f: TraceFile, epoch: datetime, order: int) -> list[pl.DataFrame]:
    """One frame per metric of ``f``: series_id, ts, value (text), the file order and row."""
    required = [
        *f.trace.metrics,
        *(["timestamp"] if f.timestamp_column else []),
        *(["hour"] if f.hour_column else []),
    ]
    raw = read_table(f.path, required, f"{f.trace.name} usage with columns {', '.join(required)}")
    raw = raw.with_row_index(ROW).with_columns(timestamps(f, epoch).alias(TS))
    out = []
    for metric in f.trace.metrics:
        bound = f.trace.bounds.get(metric)
        value = within(metric, *bound) if bound else pl.col(metric)
        # Name the metric in a time explanation: the lake keys quarantine entries of one
        # input by (row, reason), and each metric of a row is a row of its own batch.
        ts = (
            pl.when(pl.col(TS).str.starts_with("("))
            .then(pl.format("({}: {}", pl.lit(metric), pl.col(TS).str.slice(1)))
            .otherwise(pl.col(TS))
        )
        out.append(
            raw.select(
                pl.lit(f.series_id(metric)).alias("series_id"),
                ts.alias("ts"),
                value.alias("value"),
                pl.lit(order, dtype=pl.Int32).alias("__file__"),
                pl.col(ROW),
            )
        )
    return out


def mark_conflicts(frames: list[pl.DataFrame], files: list[TraceFile]) -> list[pl.DataFrame]:
    """Where a (series_id, ts) key repeats across files with a different value, turn the
    later value into text naming the first, so validation quarantines it. Returns the
    frames in the same order, with series_id, ts and value."""
    part = "__part__"
    allrows = pl.concat(
        [f.with_columns(pl.lit(i, dtype=pl.Int32).alias(part)) for i, f in enumerate(frames)]
    )
    num = pl.col("value").str.strip_chars().cast(pl.Float64, strict=False)
    first = (
        allrows.with_columns(num.alias("__num__"))
        .sort("__file__", ROW)
        .group_by("series_id", "ts")
        .agg(
            pl.col("__num__").first().alias("__first_num__"),
            pl.col("value").first().alias("__first_value__"),
            pl.col("__file__").first().alias("__first_file__"),
            pl.col(ROW).first().alias("__first_row__"),
            pl.col("__file__").n_unique().alias("__files__"),
        )
        .filter(pl.col("__files__") > 1)
    )
    names = [f.path.name for f in files]
    first_num = pl.col("__first_num__")
    clash = (
        (pl.col("__file__") != pl.col("__first_file__"))
        & num.is_not_null()
        & first_num.is_not_null()
        & ((num - first_num).abs() > SAME_VALUE_RTOL * first_num.abs().clip(lower_bound=1e-12))
    )
    note = pl.format(
        "{} (conflicts with {} in {} row {})",
        pl.col("value"),
        pl.col("__first_value__"),
        pl.col("__first_file__").replace_strict(
            list(range(len(names))), names, return_dtype=pl.String
        ),
        pl.col("__first_row__") + 1,
    )
    marked = allrows.join(first, on=["series_id", "ts"], how="left", maintain_order="left").select(
        part, "series_id", "ts", pl.when(clash).then(note).otherwise(pl.col("value")).alias("value")
    )
    parts = marked.partition_by(part, as_dict=True, include_key=False, maintain_order=True)
    return [parts[(i,)] for i in range(len(frames))]


def demand_batch(long: pl.DataFrame, f: TraceFile, metric: str) -> Batch:
    bound = f.trace.bounds.get(metric)
    capacity = None if bound is None else bound[1]
    return Batch(
        "demand",
        long.select(
            "series_id",
            "ts",
            "value",
            pl.lit(None, pl.Float64).alias("running"),
            pl.lit(None, pl.Float64).alias("pending"),
            pl.lit(capacity, pl.Float64).alias("capacity"),
            pl.lit(f.trace.name).alias("pool"),
            pl.lit(metric).alias("resource"),
            pl.lit(None, pl.String).alias("gpu_model"),
        ),
    )


def read(path: str, options: IngestOptions) -> Iterator[Batch]:
    files = [classify(p) for p in csv_files(Path(path), EXPECTED)]
    frames: list[pl.DataFrame] = []
    owners: list[tuple[TraceFile, str]] = []
    for order, f in enumerate(files):
        epoch = epoch_option(options, f.trace.epoch, f"{f.trace.name}_epoch", "epoch")
        frames.extend(long_frames(f, epoch, order))
        owners.extend((f, m) for m in f.trace.metrics)
    for long, (f, metric) in zip(mark_conflicts(frames, files), owners, strict=True):
        yield demand_batch(long, f, metric)
