"""Assemble node feature frames: offline (every evaluation time up to a cutoff, with
labels) and online (the latest row per node). Both come from the same definitions and
the same steps, so a model sees in serving exactly what it saw in training."""

from __future__ import annotations

from datetime import datetime, timedelta

import polars as pl

from predops.features.carry import exact_buckets
from predops.features.definitions import FeatureSet, NodeFeatureSpec, node_feature_set
from predops.features.labels import add_failure_labels, label_name
from predops.features.node import (
    END,
    NODE,
    ORIGIN,
    add_event_features,
    add_peer_features,
    add_static_features,
    add_window_features,
    bucket_grid,
    bucket_telemetry,
    latest_window_features,
)

DEFAULT_HORIZONS = (timedelta(hours=6), timedelta(hours=24), timedelta(hours=72))


def _on_every(every: timedelta) -> pl.Expr:
    us = int(every.total_seconds() * 1_000_000)
    return ((pl.col(END) - pl.lit(ORIGIN)).dt.total_microseconds() % us) == 0


def node_local_features(
    telemetry: pl.LazyFrame,
    inventory: pl.LazyFrame,
    events: pl.LazyFrame,
    *,
    cutoff: datetime,
    spec: NodeFeatureSpec,
    eval_every: timedelta | None = None,
    latest_only: bool = False,
    since: datetime | None = None,
    buckets: pl.LazyFrame | None = None,
) -> pl.LazyFrame:
    """Everything that needs only one node's own rows (so it can run per partition of
    nodes, e.g. on Dask): windows, static attributes, events. Peers come after.
    ``buckets``: the telemetry's buckets already aggregated (``telemetry`` unread;
    :mod:`features.carry`), with ``latest_only``."""
    visible = cutoff - spec.ingestion_delay
    if buckets is None and latest_only:  # summed as the carried buckets are
        buckets = exact_buckets(telemetry, spec, cutoff=visible).lazy()
    elif buckets is None:
        buckets = bucket_telemetry(telemetry, spec, cutoff=visible)
    elif not latest_only:
        raise ValueError("buckets are handed in for the latest rows only")
    if latest_only:  # the online rows: the grid's last column alone, without the grid
        lf = latest_window_features(buckets, spec, cutoff=visible)
    else:
        lf = add_window_features(bucket_grid(buckets, spec, cutoff=visible), spec)
        if eval_every is not None:
            lf = lf.filter(_on_every(eval_every))
    if since is not None:
        lf = lf.filter(pl.col(END) + spec.ingestion_delay >= since)
    lf = add_static_features(lf, inventory.filter(pl.col("ts") <= cutoff))
    lf = add_event_features(lf, events.filter(pl.col("at") <= visible), spec)
    have = set(lf.collect_schema().names())
    keep = [n for n in node_feature_set(spec).names if n in have]  # all but peer features
    return lf.select(NODE, END, *keep, pl.col("last_ts").alias("last_sample_ts"))


def finish_node_features(
    local: pl.LazyFrame,
    spec: NodeFeatureSpec,
    medians: dict[str, pl.LazyFrame] | None = None,
) -> pl.LazyFrame:
    """Cross-node features (peer deviations at the same time) and the final columns.

    ``medians``: the fleet's peer medians (:func:`features.node.peer_medians`) when
    ``local`` is one partition of the fleet's nodes."""
    fs = node_feature_set(spec)
    lf = add_peer_features(local, spec, medians)
    return lf.select(
        NODE,
        (pl.col(END) + spec.ingestion_delay).alias("ts"),
        *[pl.col(n).cast(pl.Categorical) if n in fs.categorical else pl.col(n) for n in fs.names],
        "last_sample_ts",
    ).sort(NODE, "ts")


def node_features(
    telemetry: pl.LazyFrame,
    inventory: pl.LazyFrame,
    events: pl.LazyFrame,
    *,
    cutoff: datetime,
    spec: NodeFeatureSpec | None = None,
    eval_every: timedelta | None = None,
    latest_only: bool = False,
    since: datetime | None = None,
    buckets: pl.LazyFrame | None = None,
) -> pl.LazyFrame:
    """Node features as of ``cutoff``.

    Uses only telemetry and events with time ``<= cutoff - spec.ingestion_delay`` and
    inventory snapshots ``<= cutoff``. Rows are at bucket ends, stamped
    ``ts = bucket_end + ingestion_delay``; ``eval_every`` keeps only bucket ends on that
    grid (e.g. hourly training rows); ``latest_only`` keeps only the last bucket end;
    ``since`` drops rows before it (the windows still see earlier data); ``buckets``: as
    :func:`node_local_features` takes them.
    """
    spec = spec or NodeFeatureSpec()
    local = node_local_features(
        telemetry,
        inventory,
        events,
        cutoff=cutoff,
        spec=spec,
        eval_every=eval_every,
        latest_only=latest_only,
        since=since,
        buckets=buckets,
    )
    return finish_node_features(local, spec)


def training_frame(
    telemetry: pl.LazyFrame,
    inventory: pl.LazyFrame,
    events: pl.LazyFrame,
    *,
    cutoff: datetime,
    spec: NodeFeatureSpec | None = None,
    eval_every: timedelta = timedelta(hours=1),
    horizons: tuple[timedelta, ...] = DEFAULT_HORIZONS,
    since: datetime | None = None,
) -> pl.LazyFrame:
    """Features every ``eval_every`` up to ``cutoff`` with failure labels known by
    ``cutoff`` and the ``usable`` mask (node not down, not in maintenance)."""
    feats = node_features(
        telemetry, inventory, events, cutoff=cutoff, spec=spec, eval_every=eval_every, since=since
    )
    return add_failure_labels(feats, events, horizons=horizons, label_cutoff=cutoff)


def feature_set(spec: NodeFeatureSpec | None = None) -> FeatureSet:
    return node_feature_set(spec)


__all__ = [
    "DEFAULT_HORIZONS",
    "feature_set",
    "finish_node_features",
    "label_name",
    "node_features",
    "node_local_features",
    "training_frame",
]
