"""Demand features per series (pool x resource x GPU model).

``resample_demand`` puts each series on a regular grid (bucket ``(t - freq, t]``
labelled ``t``; a missing bucket stays null, never zero). ``demand_features`` adds, at
each issue time ``t``: lags ``value`` at ``t - k * freq``, trailing rolling statistics,
the pending share (unmet demand is still demand) and capacity utilisation, and calendar
features. ``add_calendar_features`` describes any timestamp column (the issue time, or a
forecast's target time) with hour / weekday / month and the known-in-advance events
(promotions, launches) of the ``calendar`` table. ``add_trend_features`` adds the local
linear trend (slope per step) that long-horizon forecasts extrapolate explicitly, and
``demand_from_pods`` turns a pod list (requests with created / scheduled / deleted
times) into unconstrained GPU demand series.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timedelta

import polars as pl

from predops.features.definitions import window_label

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
        out = ["value__last", *(f"value__lag_{k}" for k in self.lags)]
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


def _bucket_mean(column: str) -> pl.Expr:
    """The mean of a bucket's non-null values, the same to the last bit in every run.

    ``pl.col(c).mean()`` in a group-by comes out different in the last bit from one
    process to the next (on the Azure VM panel, about 1 bucket in 90). Gathered into a
    list first, the bucket's values keep their row order, so the same rows give the
    same mean in every run (the forecast cache's grid digest, and a backtest's figures,
    depend on it). Null where the bucket has no value."""
    return pl.col(column).implode().list.mean()


def resample_demand(
    demand: pl.LazyFrame, spec: DemandFeatureSpec, *, cutoff: datetime | None = None
) -> pl.LazyFrame:
    """Each series on a complete ``freq`` grid up to its last bucket (or ``cutoff``).

    A bucket is only emitted once the data covers it: the newest sample stands for its
    sampling interval (the median spacing of the distinct sample times), so data to
    23:59 every minute completes ``(23:00, 00:00]``, while data to 13:25 every 5 minutes
    leaves ``(13:00, 14:00]`` still filling; such a bucket would both stamp features and
    forecasts with a time the data has not reached and pass a part of an hour off as the
    whole of it. With a ``cutoff``, data is known up to it at most.

    Values in a bucket are averaged (``agg='mean'``) or their peak kept (``'max'``);
    ``value`` is unconstrained demand (running + pending) as the lake stores it.
    ``value_last`` is the bucket's latest sample: at a step change (a job of 64 GPUs
    just started) it is the state at ``t``, where the mean still lags behind.
    """
    lf = demand
    if cutoff is not None:
        lf = lf.filter(pl.col("ts") <= cutoff)
    every = polars_every(spec.freq)
    end = (pl.col("ts") - timedelta(microseconds=1)).dt.truncate(every).dt.offset_by(every)
    step = pl.col("ts").unique().sort().diff().median().fill_null(timedelta(0))
    known = pl.col("ts").max() + step
    if cutoff is not None:
        known = pl.min_horizontal(known, pl.lit(cutoff))
    lf = lf.filter(end <= known)  # complete buckets only (see above)
    keys = [SERIES, "pool", "resource", "gpu_model"]
    b = (
        lf.with_columns(end.alias("__end"))
        .group_by(SERIES, "__end")
        .agg(
            *[
                (_bucket_mean(c) if spec.agg == "mean" else pl.col(c).max()).alias(c)
                for c in VALUE_COLUMNS
            ],
            pl.col("value").sort_by("ts").last().alias("value_last"),
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
    exprs = [pl.col("value_last").cast(pl.Float32).alias("value__last")]
    exprs += [v.shift(k).over(SERIES).cast(pl.Float32).alias(f"value__lag_{k}") for k in spec.lags]
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


def trend_feature_name(window: int) -> str:
    return f"value__slope_{window}"


def add_trend_features(series: pl.LazyFrame, windows: tuple[int, ...]) -> pl.LazyFrame:
    """``value__slope_<w>``: least-squares slope of ``value`` on the step index over the
    trailing ``w`` buckets ending at ``t`` (value units per step), null until two buckets
    are seen. Gaps are carried forward from the last observed bucket, so a missing
    bucket neither breaks the window nor reads as a drop to zero.

    Uses only buckets ending at or before ``t`` (as :func:`demand_features`).
    """
    if any(w < 2 for w in windows):
        raise ValueError("a trend window needs at least 2 buckets")
    y = pl.col("value").forward_fill().over(SERIES)
    k = pl.int_range(pl.len()).over(SERIES).cast(pl.Float64)
    seen = y.is_not_null()
    kk = pl.when(seen).then(k)
    exprs = []
    for w in windows:

        def s(e: pl.Expr, w: int = w) -> pl.Expr:
            return e.rolling_sum(w, min_samples=1).over(SERIES)

        n = s(seen.cast(pl.Float64))
        sk, sy, sky, skk = s(kk), s(y), s(kk * y), s(kk * kk)
        var = skk - sk * sk / n
        slope = pl.when((n >= 2) & (var > 0)).then((sky - sk * sy / n) / var)
        exprs.append(slope.cast(pl.Float32).alias(trend_feature_name(w)))
    return series.sort(SERIES, "ts").with_columns(exprs)


def pod_gpus() -> pl.Expr:
    """GPUs one pod asks for: ``num_gpu``, or the ``gpu_milli`` share of one GPU."""
    share = pl.when(pl.col("gpu_milli") > 0).then(pl.col("gpu_milli") / 1000.0).otherwise(1.0)
    return pl.when(pl.col("num_gpu") == 1).then(share).otherwise(pl.col("num_gpu").cast(pl.Float64))


def demand_from_pods(
    pods: pl.DataFrame, freq: timedelta, *, prefix: str = "pods", by_spec: bool = True
) -> pl.DataFrame:
    """Unconstrained GPU demand at each ``freq`` grid instant from a pod list.

    At grid time ``t`` a pod asks for its GPUs if ``created_at <= t`` and it is not yet
    deleted (``deleted_at`` null or later than ``t``); it is *running* once
    ``scheduled_at <= t``, *pending* before (a queued pod is demand the pool did not
    serve, so ``value`` = running + pending never stops at capacity). Series: one for
    the whole list (``<prefix>/gpus/all``) and, with ``by_spec``, one per allowed GPU
    model set (``<prefix>/gpus/<gpu_spec>``, ``any`` when unconstrained). CPU-only pods
    are left out. Demand-contract columns; capacity is null (a pod list has none).
    """
    need = {"num_gpu", "gpu_milli", "created_at", "scheduled_at", "deleted_at"}
    missing = sorted(need - set(pods.columns))
    if missing:
        raise ValueError(f"pods frame lacks column(s) {', '.join(missing)}")
    gpu = pods.filter(pl.col("num_gpu") > 0).with_columns(
        pod_gpus().alias("__gpus"),
        pl.col("gpu_spec").fill_null("any").alias("__spec")
        if "gpu_spec" in pods.columns
        else pl.lit("any").alias("__spec"),
    )
    if gpu.height == 0:
        raise ValueError("no GPU pods in the pod list; nothing to forecast")
    every = polars_every(freq)
    start = gpu["created_at"].min()
    end_candidates = [gpu["created_at"].max(), gpu["deleted_at"].max(), gpu["scheduled_at"].max()]
    end = max(t for t in end_candidates if t is not None)
    grid = pl.datetime_range(
        pl.lit(start).dt.truncate(every), pl.lit(end).dt.truncate(every), every, eager=True
    ).alias("ts")
    groups = [("all", gpu)]
    if by_spec:
        groups += [(str(k[0]), g) for k, g in gpu.partition_by("__spec", as_dict=True).items()]
    frames = []
    for name, g in groups:
        frames.append(
            _alive_on_grid(g, grid).with_columns(
                pl.lit(f"{prefix}/gpus/{name}").alias(SERIES),
                pl.lit(prefix).alias("pool"),
                pl.lit("gpus").alias("resource"),
                pl.lit(None if name in ("all", "any") else name, pl.String).alias("gpu_model"),
            )
        )
    return pl.concat(frames).select(
        SERIES, "ts", "value", "running", "pending", "capacity", "pool", "resource", "gpu_model"
    )


def _sweep(pods: pl.DataFrame, start: str, stop: str, grid: pl.Series) -> pl.Series:
    """Sum of ``__gpus`` over pods with ``start <= t`` and (``stop`` null or ``stop > t``)
    at each grid time ``t``: +gpus at start, -gpus at stop, cumulated, read backwards."""
    ev = pl.concat(
        [
            pods.select(pl.col(start).alias("t"), pl.col("__gpus").alias("d")),
            pods.filter(pl.col(stop).is_not_null()).select(
                pl.col(stop).alias("t"), (-pl.col("__gpus")).alias("d")
            ),
        ]
    ).filter(pl.col("t").is_not_null())
    cum = ev.group_by("t").agg(pl.col("d").sum()).sort("t").with_columns(pl.col("d").cum_sum())
    out = grid.to_frame().join_asof(cum, left_on="ts", right_on="t", strategy="backward")
    # Float sums of shares can leave -1e-15 where nothing is alive.
    return out["d"].fill_null(0.0).clip(lower_bound=0.0)


def _alive_on_grid(pods: pl.DataFrame, grid: pl.Series) -> pl.DataFrame:
    value = _sweep(pods, "created_at", "deleted_at", grid)
    # A pod deleted before it was scheduled never ran.
    ran = pods.filter(
        pl.col("scheduled_at").is_not_null()
        & (pl.col("deleted_at").is_null() | (pl.col("scheduled_at") < pl.col("deleted_at")))
    )
    running = _sweep(ran, "scheduled_at", "deleted_at", grid).clip(upper_bound=value)
    return pl.DataFrame(
        {
            "ts": grid,
            "value": value,
            "running": running,
            "pending": value - running,
            "capacity": pl.Series([None] * grid.len(), dtype=pl.Float64),
        }
    )


__all__ = [
    "HOURLY",
    "WEEKLY",
    "DemandFeatureSpec",
    "add_calendar_features",
    "add_trend_features",
    "calendar_feature_names",
    "demand_features",
    "demand_from_pods",
    "resample_demand",
    "window_label",
]
