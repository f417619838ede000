"""Build feature frames from the lake: offline (training) and online (latest).

The feature functions are pure (``features/``); this module reads the lake, picks the
engine (local polars, or Dask partitions of nodes) and writes the feature store.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from predops.features.definitions import NodeFeatureSpec, node_feature_set
from predops.features.demand import HOURLY, DemandFeatureSpec, demand_features, resample_demand
from predops.features.frames import (
    DEFAULT_HORIZONS,
    finish_node_features,
    node_features,
    node_local_features,
)
from predops.features.labels import add_failure_labels
from predops.pipelines.jobs.labels import label_source, training_events
from predops.pipelines.workspace.feature_store import FeatureStore
from predops.pipelines.workspace.lake import Lake

NODE_TRAINING = "node_training"
NODE_ONLINE = "node"
DEMAND_OFFLINE = "demand_hourly"
DEMAND_ONLINE = "demand"


@dataclass(frozen=True, slots=True)
class LakeInputs:
    """The lake tables node features read, as lazy frames (optionally one source)."""

    telemetry: pl.LazyFrame
    inventory: pl.LazyFrame
    events: pl.LazyFrame

    @classmethod
    def from_lake(
        cls,
        lake: Lake,
        source: str | None = None,
        node_ids: Sequence[str] | None = None,
        telemetry_after: datetime | None = None,
    ) -> LakeInputs:
        """Events of every source follow the label-source rule (jobs.labels);
        ``telemetry_after``: only telemetry later than this (the lake lists only the day
        partitions from then on)."""

        def scan(table: str) -> pl.LazyFrame:
            if table == "events" and source is None:
                lf = training_events(lake)
            elif table == "telemetry" and telemetry_after is not None:
                lf = lake.scan(table, source, start=telemetry_after).drop("source")
                lf = lf.filter(pl.col("ts") > telemetry_after)
            else:
                lf = lake.scan(table, source).drop("source")
            if node_ids is not None:
                lf = lf.filter(pl.col("node_id").is_in(list(node_ids)))
            return lf

        return cls(scan("telemetry"), scan("inventory"), scan("events"))


def node_ids(lake: Lake, source: str | None = None) -> list[str]:
    ids = lake.scan("telemetry", source).select("node_id").unique().collect()
    return sorted(ids["node_id"].to_list())


# ---------------------------------------------------------------- engines
def _local_part(
    lake_root: str,
    ids: list[str],
    source: str | None,
    cutoff: datetime,
    spec: NodeFeatureSpec,
    eval_every: timedelta | None,
    latest_only: bool,
    since: datetime | None,
    window_start: datetime | None,
) -> pl.DataFrame:
    """One partition of nodes: the node-local features (runs on a Dask worker)."""
    inp = LakeInputs.from_lake(Lake(Path(lake_root)), source, ids, window_start)
    return node_local_features(
        inp.telemetry,
        inp.inventory,
        inp.events,
        cutoff=cutoff,
        spec=spec,
        eval_every=eval_every,
        latest_only=latest_only,
        since=since,
    ).collect()


def node_features_dask(
    lake: Lake,
    *,
    scheduler: str | Any,
    cutoff: datetime,
    spec: NodeFeatureSpec,
    eval_every: timedelta | None = None,
    latest_only: bool = False,
    since: datetime | None = None,
    source: str | None = None,
    partitions: int | None = None,
    window_start: datetime | None = None,
) -> pl.DataFrame:
    """The same features, computed per partition of nodes on a Dask cluster.

    ``scheduler`` is an address (``tcp://host:8786``) or a ``distributed.Client``. Each
    worker reads its nodes from the lake (so the lake must be on storage the workers
    see); cross-node features (peer deviations) are computed here after the gather.
    """
    from distributed import Client

    # distributed is untyped: keep the client as Any.
    client: Any = scheduler if isinstance(scheduler, Client) else Client(scheduler)  # type: ignore[no-untyped-call]
    try:
        ids = node_ids(lake, source)
        n = partitions or max(1, 2 * len(client.nthreads()))
        chunks = [ids[i::n] for i in range(n) if ids[i::n]]
        futures = [
            client.submit(
                _local_part,
                str(lake.root),
                chunk,
                source,
                cutoff,
                spec,
                eval_every,
                latest_only,
                since,
                window_start,
                pure=False,
            )
            for chunk in chunks
        ]
        parts = client.gather(futures)
    finally:
        if client is not scheduler:
            client.close()
    local = pl.concat(parts, how="vertical_relaxed") if parts else None
    if local is None:
        return pl.DataFrame()
    return finish_node_features(local.lazy(), spec).collect()


def compute_node_features(
    lake: Lake,
    *,
    cutoff: datetime,
    spec: NodeFeatureSpec,
    engine: str = "local",
    scheduler: str | Any | None = None,
    eval_every: timedelta | None = None,
    latest_only: bool = False,
    since: datetime | None = None,
    source: str | None = None,
    window_start: datetime | None = None,
) -> pl.DataFrame:
    if engine == "dask":
        if scheduler is None:
            raise ValueError("--engine dask needs --scheduler tcp://host:port")
        return node_features_dask(
            lake,
            scheduler=scheduler,
            cutoff=cutoff,
            spec=spec,
            eval_every=eval_every,
            latest_only=latest_only,
            since=since,
            source=source,
            window_start=window_start,
        )
    if engine != "local":
        raise ValueError(f"unknown engine {engine!r}; use local or dask")
    inp = LakeInputs.from_lake(lake, source, telemetry_after=window_start)
    return node_features(
        inp.telemetry,
        inp.inventory,
        inp.events,
        cutoff=cutoff,
        spec=spec,
        eval_every=eval_every,
        latest_only=latest_only,
        since=since,
    ).collect()


# ---------------------------------------------------------------- jobs
def online_window_start(cutoff: datetime, spec: NodeFeatureSpec) -> datetime:
    """Telemetry older than this cannot affect the latest features."""
    reach = max((*spec.windows, *spec.missing_windows))
    return cutoff - spec.ingestion_delay - reach - spec.bucket


def _mean(s: pl.Series) -> float:
    m = s.cast(pl.Float64).mean()
    return float(m) if isinstance(m, int | float) else 0.0


def null_fractions(frame: pl.DataFrame, columns: Sequence[str]) -> dict[str, float]:
    if frame.height == 0:
        return {c: 1.0 for c in columns}
    counts = frame.select([pl.col(c).null_count() for c in columns]).row(0)
    return {c: round(n / frame.height, 4) for c, n in zip(columns, counts, strict=True)}


def materialise_online(
    lake: Lake,
    store: FeatureStore,
    *,
    as_of: datetime,
    spec: NodeFeatureSpec | None = None,
    engine: str = "local",
    scheduler: str | Any | None = None,
    demand_spec: DemandFeatureSpec = HOURLY,
) -> dict[str, Any]:
    """Latest node and demand features as of ``as_of`` into the online store."""
    spec = spec or NodeFeatureSpec()
    fs = node_feature_set(spec)
    out: dict[str, Any] = {}
    nodes = compute_node_features(
        lake,
        cutoff=as_of,
        spec=spec,
        engine=engine,
        scheduler=scheduler,
        latest_only=True,
        window_start=online_window_start(as_of, spec),
    )
    if nodes.height:
        store.materialise_online(
            NODE_ONLINE, nodes, as_of=as_of, feature_set_hash=fs.hash, key="node_id"
        )
    out["nodes"] = nodes.height
    demand = _demand_frame(lake, as_of, demand_spec)
    if demand.height:
        latest = demand.group_by("series_id").agg(pl.all().sort_by("ts").last())
        latest = latest.with_columns(pl.col("ts").alias("last_sample_ts"))
        store.materialise_online(
            DEMAND_ONLINE, latest, as_of=as_of, feature_set_hash=demand_spec.hash, key="series_id"
        )
        out["series"] = latest.height
    return out


def _demand_frame(lake: Lake, as_of: datetime, spec: DemandFeatureSpec) -> pl.DataFrame:
    calendar = lake.scan("calendar").drop("source").collect()
    series = resample_demand(lake.scan("demand").drop("source"), spec, cutoff=as_of)
    return demand_features(series, spec, calendar=calendar if calendar.height else None).collect()


def build_features(
    lake: Lake,
    store: FeatureStore,
    *,
    as_of: datetime,
    spec: NodeFeatureSpec | None = None,
    eval_every: timedelta = timedelta(hours=1),
    since: datetime | None = None,
    engine: str = "local",
    scheduler: str | Any | None = None,
    horizons: tuple[timedelta, ...] = DEFAULT_HORIZONS,
) -> dict[str, Any]:
    """Offline frames (node features + failure labels; demand features) as of ``as_of``
    into the store, then the online latest values. Returns a JSON-able report."""
    spec = spec or NodeFeatureSpec()
    fs = node_feature_set(spec)
    t0 = time.perf_counter()
    feats = compute_node_features(
        lake,
        cutoff=as_of,
        spec=spec,
        engine=engine,
        scheduler=scheduler,
        eval_every=eval_every,
        since=since,
    )
    events = training_events(lake)
    training = (
        add_failure_labels(feats.lazy(), events, horizons=horizons, label_cutoff=as_of).collect()
        if feats.height
        else feats
    )
    t_nodes = time.perf_counter() - t0
    report: dict[str, Any] = {
        "as_of": as_of.isoformat(),
        "engine": engine,
        "label_source": label_source(lake) or "every source",
    }
    if training.height:
        path = store.write_offline(NODE_TRAINING, training, as_of=as_of, feature_set_hash=fs.hash)
        label_cols = [c for c in training.columns if c.startswith("fails_within_")]
        nulls = null_fractions(training, fs.names)
        report["nodes"] = {
            "rows": training.height,
            "columns": training.width,
            "features": len(fs.names),
            "nodes": training["node_id"].n_unique(),
            "feature_set_hash": fs.hash,
            "path": str(path),
            "seconds": round(t_nodes, 2),
            "positive_rate": {c: round(_mean(training[c]), 5) for c in label_cols},
            "usable_rows": int(training["usable"].sum()),
            "null_fraction_mean": round(sum(nulls.values()) / max(1, len(nulls)), 4),
            "null_fractions": nulls,
        }
    demand = _demand_frame(lake, as_of, HOURLY)
    if demand.height:
        path = store.write_offline(
            DEMAND_OFFLINE, demand, as_of=as_of, feature_set_hash=HOURLY.hash
        )
        report["demand"] = {
            "rows": demand.height,
            "columns": demand.width,
            "series": demand["series_id"].n_unique(),
            "feature_set_hash": HOURLY.hash,
            "path": str(path),
            "null_fractions": null_fractions(demand, HOURLY.names),
        }
    report["online"] = materialise_online(
        lake, store, as_of=as_of, spec=spec, engine=engine, scheduler=scheduler
    )
    report["seconds"] = round(time.perf_counter() - t0, 2)
    return report
