"""Demand features per series (pool x resource x GPU model).

``resample_demand`` puts each series on a regular grid (bucket ``(t - freq, t]``
labelled ``t``; a missing bucket stays null, never zero). ``demand_features`` adds, at
each issue time ``t``: lags ``value`` at ``t - k * freq``, trailing rolling statistics,
the pending share (unmet demand is still demand) and capacity utilisation, and calendar
features. ``add_calendar_features`` describes any timestamp column (the issue time, or a
forecast's target time) with hour / weekday / month and the known-in-advance events
(promotions, launches) of the ``calendar`` table.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timedelta

import polars as pl

from features.definitions import window_label

SERIES = "series_id"
VALUE_COLUMNS = ("value", "running", "pending", "capacity")


@dataclass(frozen=True, slots=True)
class DemandFeatureSpec:
    """Grid step, lags and rolling windows (both in steps of ``freq``)."""

    freq: timedelta = timedelta(hours=1)
    lags: tuple[int, ...] = (0, 1, 2, 3, 6, 12, 23, 24, 47, 48, 167, 168)
    windows: tuple[int, ...] = (6, 24, 168)
    agg: str = "mean"

    def __post_init__(self) -> None:
        if self.freq <= timedelta(0):
            raise ValueError("freq must be positive")
        if any(k < 0 for k in self.lags) or any(w < 1 for w in self.windows):
            raise ValueError("lags must be >= 0 and windows >= 1")
        if self.agg not in ("mean", "max"):
            raise ValueError("agg must be 'mean' or 'max'")

    @property
    def hash(self) -> str:
        body = json.dumps(
            {
                "freq": self.freq.total_seconds(),
                "lags": self.lags,
                "windows": self.windows,
                "agg": self.agg,
                "names": self.names,
            }
        )
        return hashlib.sha256(body.encode()).hexdigest()[:16]

    @property
    def names(self) -> list[str]:
        out = [f"value__lag_{k}" for k in self.lags]
        for w in self.windows:
            out += [f"value__{s}_{w}" for s in ("mean", "max", "std")]
        out += [
            "pending__share",
            "pending__share_mean_24",
            "capacity__util",
            "capacity__value",
            *calendar_feature_names(""),
        ]
        return out


HOURLY = DemandFeatureSpec()
WEEKLY = DemandFeatureSpec(
    freq=timedelta(weeks=1), lags=(0, 1, 2, 3, 4, 8, 13, 26, 52), windows=(4, 13, 26), agg="max"
)


def polars_every(step: timedelta) -> str:
    """A polars duration string; whole weeks become ``Nw`` so weekly buckets start on
    Mondays (a bare 7-day duration would align to the epoch's Thursday)."""
    secs = int(step.total_seconds())
    if secs % (7 * 86400) == 0:
        return f"{secs // (7 * 86400)}w"
    if secs % 86400 == 0:
        return f"{secs // 86400}d"
    return f"{secs}s"


def resample_demand(
    demand: pl.LazyFrame, spec: DemandFeatureSpec, *, cutoff: datetime | None = None
) -> pl.LazyFrame:
    """Each series on a complete ``freq`` grid up to its last bucket (or ``cutoff``).

    Values in a bucket are averaged (``agg='mean'``) or their peak kept (``'max'``);
    ``value`` is unconstrained demand (running + pending) as the lake stores it.
    """
    lf = demand
    if cutoff is not None:
        lf = lf.filter(pl.col("ts") <= cutoff)
    every = polars_every(spec.freq)
    end = (pl.col("ts") - timedelta(microseconds=1)).dt.truncate(every).dt.offset_by(every)
    keys = [SERIES, "pool", "resource", "gpu_model"]
    b = (
        lf.with_columns(end.alias("__end"))
        .group_by(SERIES, "__end")
        .agg(
            *[
                (pl.col(c).mean() if spec.agg == "mean" else pl.col(c).max()).alias(c)
                for c in VALUE_COLUMNS
            ],
            *[pl.col(k).drop_nulls().first().alias(k) for k in keys[1:]],
        )
    )
    span = b.group_by(SERIES).agg(
        pl.col("__end").min().alias("__a"),
        pl.col("__end").max().alias("__b"),
        *[pl.col(k).drop_nulls().first() for k in keys[1:]],
    )
    grid = span.select(
        *keys,
        pl.datetime_ranges("__a", "__b", interval=every, time_unit="us").alias("ts"),
    ).explode("ts")
    return grid.join(b.rename({"__end": "ts"}).drop(keys[1:]), on=[SERIES, "ts"], how="left").sort(
        SERIES, "ts"
    )


def calendar_feature_names(prefix: str) -> list[str]:
    p = f"{prefix}__" if prefix else ""
    return [
        f"{p}hour",
        f"{p}dow",
        f"{p}dom",
        f"{p}month",
        f"{p}is_weekend",
        f"{p}event_active",
        f"{p}event_magnitude",
        f"{p}hours_to_event",
    ]


def add_calendar_features(
    lf: pl.LazyFrame,
    *,
    ts_col: str = "ts",
    prefix: str = "",
    calendar: pl.DataFrame | None = None,
    pool_col: str = "pool",
) -> pl.LazyFrame:
    """Calendar features of ``ts_col`` plus known-in-advance events from ``calendar``
    (rows apply to every pool when ``scope`` is null, else to that pool only).

    ``hours_to_event`` is the time to the next event start (capped at 14 days, null
    beyond): events are planned, so knowing them ahead leaks nothing.
    """
    p = f"{prefix}__" if prefix else ""
    t = pl.col(ts_col)
    exprs = [
        t.dt.hour().cast(pl.Int8).alias(f"{p}hour"),
        t.dt.weekday().cast(pl.Int8).alias(f"{p}dow"),
        t.dt.day().cast(pl.Int8).alias(f"{p}dom"),
        t.dt.month().cast(pl.Int8).alias(f"{p}month"),
        (t.dt.weekday() >= 6).cast(pl.Int8).alias(f"{p}is_weekend"),
    ]
    active: list[pl.Expr] = []
    magnitude: list[pl.Expr] = []
    until: list[pl.Expr] = []
    if calendar is not None:
        for ev in calendar.iter_rows(named=True):
            applies = (
                pl.lit(True) if ev["scope"] is None else pl.col(pool_col) == pl.lit(ev["scope"])
            )
            on = applies & (t >= ev["starts_at"]) & (t < ev["ends_at"])
            active.append(on)
            magnitude.append(pl.when(on).then(pl.lit(ev["magnitude"] or 1.0)).otherwise(0.0))
            ahead = (pl.lit(ev["starts_at"]) - t).dt.total_seconds() / 3600
            until.append(pl.when(applies & (ahead >= 0) & (ahead <= 14 * 24)).then(ahead))
    exprs += [
        (pl.any_horizontal(active) if active else pl.lit(False))
        .cast(pl.Int8)
        .alias(f"{p}event_active"),
        (pl.max_horizontal(magnitude) if magnitude else pl.lit(0.0))
        .cast(pl.Float32)
        .alias(f"{p}event_magnitude"),
        (pl.min_horizontal(until) if until else pl.lit(None, pl.Float64))
        .cast(pl.Float32)
        .alias(f"{p}hours_to_event"),
    ]
    return lf.with_columns(exprs)


def demand_features(
    series: pl.LazyFrame, spec: DemandFeatureSpec = HOURLY, *, calendar: pl.DataFrame | None = None
) -> pl.LazyFrame:
    """Features at each issue time of a resampled series (see :func:`resample_demand`).

    Every feature at ``t`` uses only buckets ending at or before ``t``.
    """
    v = pl.col("value")
    exprs = [v.shift(k).over(SERIES).cast(pl.Float32).alias(f"value__lag_{k}") for k in spec.lags]
    for w in spec.windows:
        exprs += [
            v.rolling_mean(w, min_samples=1)
            .over(SERIES)
            .cast(pl.Float32)
            .alias(f"value__mean_{w}"),
            v.rolling_max(w, min_samples=1).over(SERIES).cast(pl.Float32).alias(f"value__max_{w}"),
            v.rolling_std(w, min_samples=2).over(SERIES).cast(pl.Float32).alias(f"value__std_{w}"),
        ]
    share = pl.when(v > 0).then(pl.col("pending").fill_null(0) / v)
    exprs += [
        share.cast(pl.Float32).alias("pending__share"),
        share.rolling_mean(24, min_samples=1)
        .over(SERIES)
        .cast(pl.Float32)
        .alias("pending__share_mean_24"),
        pl.when(pl.col("capacity") > 0)
        .then(pl.col("running") / pl.col("capacity"))
        .cast(pl.Float32)
        .alias("capacity__util"),
        pl.col("capacity").cast(pl.Float32).alias("capacity__value"),
    ]
    out = series.sort(SERIES, "ts").with_columns(exprs)
    return add_calendar_features(out, calendar=calendar)


__all__ = [
    "HOURLY",
    "WEEKLY",
    "DemandFeatureSpec",
    "add_calendar_features",
    "calendar_feature_names",
    "demand_features",
    "resample_demand",
    "window_label",
]
