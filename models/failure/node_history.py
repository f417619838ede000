"""Node-time rows from a failure history alone (no telemetry): the node's own past
failures, its neighbours', its position and hardware.

Inputs (one trace, read by its adapter):

- ``failures``: ``node_id``, ``at`` (UTC), ``repair_hours`` (null: unknown), and the
  node's position groups ``group_a`` (wide: LANL system, Grid'5000 site, Titan
  cabinet) and ``group_b`` (narrow: LANL system, Grid'5000 cluster, Titan cage);
- ``spans``: when each node is observed (``node_id``, ``start``, ``end``, the two
  groups, ``installed`` (null: unknown) and numeric hardware / position columns named
  ``hw__*``). Rows exist every ``stride`` from a fixed origin inside each span.

Features of a row at ``t`` (only failures with ``at <= t``):

- ``node__failures_{7,30,90}d``: the node's failures in ``(t - w, t]``;
- ``node__failures_total``, ``node__days_since_failure`` (null: none yet),
  ``node__repair_hours_last``, ``node__repair_hours_mean``;
- ``group_b__failures_{1,7}d`` / ``group_a__failures_{1,7}d``: failures of *other*
  nodes of the same narrow / wide group in the window;
- ``node__age_days`` (since ``installed``) and the ``hw__*`` columns.

Labels: ``fails_within_<h>`` = a failure in ``(t, t + h]``; rows inside a repair (``t``
before the last failure's ``at + repair``) are not ``usable``. Built with sorted as-of
joins (no per-node Python loop); the frame is float32 features.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl

from predops.features.definitions import FeatureDef
from predops.features.labels import label_name

ORIGIN = datetime(1990, 1, 1, tzinfo=UTC)
NODE_WINDOWS = (7, 30, 90)
GROUP_WINDOWS = (1, 7)
RULE_COLUMN = "node__failures_30d"
"""The repeat-offender rule: a failure in the last 30 days."""


def history_defs(hw_columns: tuple[str, ...], *, age: bool) -> list[FeatureDef]:
    d = [
        FeatureDef(f"node__failures_{w}d", ("failure",), "count", timedelta(days=w), "float32")
        for w in NODE_WINDOWS
    ]
    d += [
        FeatureDef("node__failures_total", ("failure",), "count", None, "float32"),
        FeatureDef("node__days_since_failure", ("failure",), "since", None, "float32"),
        FeatureDef("node__repair_hours_last", ("repair",), "last", None, "float32"),
        FeatureDef("node__repair_hours_mean", ("repair",), "mean", None, "float32"),
    ]
    for g in ("group_b", "group_a"):
        d += [
            FeatureDef(f"{g}__failures_{w}d", ("failure",), "count", timedelta(days=w), "float32")
            for w in GROUP_WINDOWS
        ]
    if age:
        d.append(FeatureDef("node__age_days", ("installed",), "age", None, "float32"))
    d += [FeatureDef(c, (c,), "static", None, "float32") for c in hw_columns]
    return d


def grid_rows(spans: pl.DataFrame, stride: timedelta) -> pl.DataFrame:
    """One row per node every ``stride`` (from :data:`ORIGIN`) inside its spans."""
    step = int(stride.total_seconds() * 1_000_000)
    origin = int(ORIGIN.timestamp() * 1_000_000)

    def on_grid(col: str, up: bool) -> pl.Expr:
        us = pl.col(col).dt.epoch("us") - origin
        k = (us + (step - 1 if up else 0)) // step
        return (pl.lit(origin) + k * step).cast(pl.Datetime("us")).dt.replace_time_zone("UTC")

    s = spans.with_columns(on_grid("start", True).alias("__a"), on_grid("end", False).alias("__b"))
    s = s.filter(pl.col("__a") <= pl.col("__b"))
    rows = s.with_columns(
        pl.datetime_ranges("__a", "__b", interval=f"{step}us", time_unit="us").alias("ts")
    ).explode("ts")
    return rows.drop("__a", "__b", "start", "end")


def _counts_before(
    rows: pl.LazyFrame, ev: pl.LazyFrame, by: str, lag: timedelta | None, name: str
) -> pl.LazyFrame:
    """``name`` = failures of ``by`` with ``at <= ts - lag`` (cumulative, as-of)."""
    cum = (
        ev.select(by, "at")
        .sort("at")
        .with_columns(pl.int_range(1, pl.len() + 1).over(by).alias(name))
    )
    key = "__k"
    left = rows.with_columns((pl.col("ts") - (lag or timedelta(0))).alias(key))
    out = left.sort(key).join_asof(
        cum.rename({"at": key}), on=key, by=by, strategy="backward", check_sortedness=False
    )
    return out.with_columns(pl.col(name).fill_null(0)).drop(key)


def history_frame(
    failures: pl.DataFrame,
    spans: pl.DataFrame,
    *,
    stride: timedelta,
    horizon: timedelta,
) -> pl.DataFrame:
    """Feature rows and labels (module doc), sorted by time."""
    hw = tuple(c for c in spans.columns if c.startswith("hw__"))
    ev = failures.select("node_id", "group_a", "group_b", "at", "repair_hours").sort("at")
    rows = grid_rows(spans, stride).lazy()
    evl = ev.lazy()
    # Node history: cumulative counts now and at each lag.
    rows = _counts_before(rows, evl, "node_id", None, "__n0")
    for w in NODE_WINDOWS:
        rows = _counts_before(rows, evl, "node_id", timedelta(days=w), f"__n{w}")
    for w in GROUP_WINDOWS:
        rows = _counts_before(rows, evl, "node_id", timedelta(days=w), f"__m{w}")
    for g in ("group_a", "group_b"):
        rows = _counts_before(rows, evl, g, None, f"__{g}0")
        for w in GROUP_WINDOWS:
            rows = _counts_before(rows, evl, g, timedelta(days=w), f"__{g}{w}")
    last = ev.with_columns(
        pl.col("repair_hours").cum_sum().over("node_id").alias("__rsum"),
        pl.col("repair_hours").is_not_null().cum_sum().over("node_id").alias("__rn"),
    ).select(
        "node_id",
        pl.col("at").alias("__last"),
        pl.col("repair_hours").alias("__rlast"),
        (pl.col("__rsum") / pl.col("__rn")).alias("__rmean"),
    )
    rows = rows.sort("ts").join_asof(
        last.lazy(),
        left_on="ts",
        right_on="__last",
        by="node_id",
        strategy="backward",
        check_sortedness=False,
    )
    nxt = ev.select("node_id", pl.col("at").alias("__next"))
    rows = rows.sort("ts").join_asof(
        nxt.lazy(),
        left_on="ts",
        right_on="__next",
        by="node_id",
        strategy="forward",
        allow_exact_matches=False,
        check_sortedness=False,
    )
    day = 86400.0
    f32 = pl.Float32
    feats = [
        *[
            (pl.col("__n0") - pl.col(f"__n{w}")).cast(f32).alias(f"node__failures_{w}d")
            for w in NODE_WINDOWS
        ],
        pl.col("__n0").cast(f32).alias("node__failures_total"),
        ((pl.col("ts") - pl.col("__last")).dt.total_seconds() / day)
        .cast(f32)
        .alias("node__days_since_failure"),
        pl.col("__rlast").cast(f32).alias("node__repair_hours_last"),
        pl.col("__rmean").cast(f32).alias("node__repair_hours_mean"),
    ]
    for g in ("group_b", "group_a"):
        for w in GROUP_WINDOWS:
            own = pl.col("__n0") - pl.col(f"__m{w}")
            feats.append(
                (pl.col(f"__{g}0") - pl.col(f"__{g}{w}") - own)
                .cast(f32)
                .alias(f"{g}__failures_{w}d")
            )
    age = "installed" in spans.columns and spans["installed"].null_count() < spans.height
    if age:
        feats.append(
            ((pl.col("ts") - pl.col("installed")).dt.total_seconds() / day)
            .cast(f32)
            .alias("node__age_days")
        )
    repair_end = pl.col("__last") + pl.duration(
        seconds=(pl.col("__rlast").fill_null(0.0) * 3600).cast(pl.Int64)
    )
    label = (pl.col("__next").is_not_null() & (pl.col("__next") <= pl.col("ts") + horizon)).cast(
        pl.Int8
    )
    out = rows.select(
        "node_id",
        "ts",
        "group_a",
        "group_b",
        *feats,
        *[pl.col(c).cast(f32) for c in hw],
        label.alias(label_name(horizon)),
        (pl.col("__last").is_null() | (pl.col("ts") >= repair_end)).alias("usable"),
    )
    return out.sort("ts").collect()


def history_feature_defs(frame: pl.DataFrame) -> list[FeatureDef]:
    hw = tuple(c for c in frame.columns if c.startswith("hw__"))
    return history_defs(hw, age="node__age_days" in frame.columns)
