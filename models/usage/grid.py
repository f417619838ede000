"""Per-node usage on a regular time grid: the (series x steps) arrays every usage
model and rule reads.

A history frame (one row per series and sample) holds ``series_id``, ``ts`` (UTC),
``usage`` (what the node's online work used in the step: CPU cores, bytes, or %), and
optionally ``max`` (the highest usage inside the step, as Azure's 5-minute maxima) and
``allocatable`` (what the node offers; the last value of a series is used). Samples
are placed on the grid ``t0 + k * step`` (rounded down); a step with no sample (or a
null / NaN usage) is NaN; two samples in one step keep the later one.

Pure: numpy / polars; no I/O, no clock, no environment.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
import polars as pl

from predops.core.schemas import UTC_TS

SERIES = "series_id"
REQUIRED = (SERIES, "ts", "usage")
OPTIONAL = ("max", "allocatable")


@dataclass(frozen=True)
class UsageGrid:
    """Usage of ``series`` on the grid ``t0_us + k * step_us`` (k = column)."""

    series: list[str]
    t0_us: int
    step_us: int
    usage: np.ndarray
    """(series, steps) float64; NaN where no sample."""
    peak: np.ndarray | None
    """(series, steps) float64 in-step maxima (``max``), or None when not given."""
    allocatable: np.ndarray
    """(series,) what each node offers (1.0 when not given: usage is then a share)."""

    @property
    def steps(self) -> int:
        return int(self.usage.shape[1])

    def ts_us(self, cols: np.ndarray) -> np.ndarray:
        """Start time (epoch microseconds) of grid columns ``cols``."""
        return self.t0_us + np.asarray(cols, dtype=np.int64) * self.step_us

    def rows(self, keep: np.ndarray) -> UsageGrid:
        """The grid of the series at row indices ``keep``."""
        return UsageGrid(
            [self.series[i] for i in keep],
            self.t0_us,
            self.step_us,
            self.usage[keep],
            None if self.peak is None else self.peak[keep],
            self.allocatable[keep],
        )

    def to_frame(self, stop: int | None = None) -> pl.DataFrame:
        """The long history frame of columns ``[0, stop)`` (observed samples only)."""
        b = self.steps if stop is None else stop
        n = len(self.series)
        ts = pl.Series("ts", np.tile(self.ts_us(np.arange(b)), n)).cast(UTC_TS)
        cols = {
            SERIES: pl.Series(SERIES, self.series).gather(np.repeat(np.arange(n), b)),
            "ts": ts,
            "usage": self.usage[:, :b].ravel(),
            "allocatable": np.repeat(self.allocatable, b),
        }
        if self.peak is not None:
            cols["max"] = self.peak[:, :b].ravel()
        return pl.DataFrame(cols).filter(pl.col("usage").is_not_nan())


def history_columns(history: pl.DataFrame | pl.LazyFrame) -> pl.LazyFrame:
    """The history frame's columns, checked (a missing column is named)."""
    lf = history.lazy()
    names = lf.collect_schema().names()
    missing = [c for c in REQUIRED if c not in names]
    if missing:
        raise ValueError(
            f"usage history lacks column(s) {', '.join(missing)}; "
            f"needs {', '.join(REQUIRED)} (optionally {', '.join(OPTIONAL)})"
        )
    keep = [c for c in (*REQUIRED, *OPTIONAL) if c in names]
    return lf.select(keep)


def to_grid(frame: pl.DataFrame, *, t0_us: int, step: timedelta, steps: int) -> UsageGrid:
    """Place the rows of a (collected) history frame on ``steps`` columns from ``t0_us``.

    Raises ``ValueError`` naming the first row whose ``usage`` (or ``max``) is negative
    or not finite, or whose ``ts`` is missing."""
    step_us = int(step.total_seconds() * 1_000_000)
    if step_us <= 0:
        raise ValueError(f"step must be positive, got {step}")
    df = frame.with_row_index("__row__")
    for name in ("usage", "max"):
        if name not in df.columns:
            continue
        v = pl.col(name)
        bad = df.filter(v.is_infinite() | (v < 0)).head(1)
        if bad.height:
            r = bad.row(0, named=True)
            raise ValueError(
                f"usage history row {r['__row__']} (series {r[SERIES]!r}, ts {r['ts']}): "
                f"{name} must be finite and >= 0, got {r[name]}"
            )
    df = df.filter(pl.col("usage").is_not_null() & pl.col("usage").is_not_nan())
    if df["ts"].null_count():
        r = df.filter(pl.col("ts").is_null()).row(0, named=True)
        raise ValueError(f"usage history row {r['__row__']} (series {r[SERIES]!r}): ts is null")
    series = sorted(df[SERIES].unique().to_list())
    idx = {s: i for i, s in enumerate(series)}
    ts_us = df["ts"].dt.epoch("us").to_numpy()
    col = (ts_us - t0_us) // step_us
    inside = (col >= 0) & (col < steps)
    row = df[SERIES].replace_strict(idx, return_dtype=pl.Int64).to_numpy()
    order = np.argsort(ts_us, kind="stable")  # later samples overwrite earlier ones
    order = order[inside[order]]
    usage = np.full((len(series), steps), np.nan)
    usage[row[order], col[order]] = df["usage"].to_numpy()[order]
    peak = None
    if "max" in df.columns:
        peak = np.full((len(series), steps), np.nan)
        peak[row[order], col[order]] = df["max"].fill_null(np.nan).to_numpy()[order]
    alloc = np.ones(len(series))
    if "allocatable" in df.columns:
        last = (
            df.filter(pl.col("allocatable").is_not_null())
            .sort("ts")
            .group_by(SERIES)
            .agg(pl.col("allocatable").last())
        )
        for s, a in last.iter_rows():
            if not (np.isfinite(a) and a > 0):
                raise ValueError(f"usage history: allocatable of {s!r} must be > 0, got {a}")
            alloc[idx[s]] = float(a)
    return UsageGrid(series, int(t0_us), step_us, usage, peak, alloc)


def epoch_us(value: datetime) -> int:
    """A UTC datetime as epoch microseconds."""
    return round(value.timestamp() * 1_000_000)


RESOURCES = ("cpu", "memory")


def telemetry_history(
    telemetry: pl.DataFrame | pl.LazyFrame,
    inventory: pl.DataFrame | pl.LazyFrame,
    resource: str = "cpu",
) -> pl.LazyFrame:
    """The usage history of the lake's ``telemetry`` rows (TELEMETRY contract), with
    each node's allocatable from its latest ``inventory`` snapshot (INVENTORY): CPU
    in cores (``cpu_util_pct`` x ``cpu_milli`` / 100,000) or memory in bytes
    (``mem_used_bytes`` against ``memory_mib``). Lazy: a scan stays a scan; a node
    without inventory is left out (nothing to lend against)."""
    if resource not in RESOURCES:
        raise ValueError(f"resource must be one of {RESOURCES}, got {resource!r}")
    alloc = (
        inventory.lazy()
        .sort("ts")
        .group_by("node_id")
        .agg(
            (pl.col("cpu_milli").last() / 1000.0).alias("__cores__"),
            (pl.col("memory_mib").last() * float(2**20)).alias("__bytes__"),
        )
    )
    t = telemetry.lazy().join(alloc, on="node_id", how="inner")
    if resource == "cpu":
        usage = pl.col("cpu_util_pct").cast(pl.Float64) / 100.0 * pl.col("__cores__")
        cap = pl.col("__cores__")
    else:
        usage = pl.col("mem_used_bytes").cast(pl.Float64)
        cap = pl.col("__bytes__")
    return t.select(
        pl.col("node_id").alias(SERIES), "ts", usage.alias("usage"), cap.alias("allocatable")
    )
