"""Build feature frames from the lake: offline (training) and online (latest).

The feature functions are pure (``features/``); this module reads the lake, picks the
engine (local polars, or Dask partitions of nodes) and writes the feature store.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import polars as pl

from predops.features.definitions import NodeFeatureSpec, node_feature_set
from predops.features.demand import HOURLY, DemandFeatureSpec, demand_features, resample_demand
from predops.features.frames import (
    DEFAULT_HORIZONS,
    finish_node_features,
    node_features,
)
from predops.features.labels import add_failure_labels, label_name
from predops.features.node import floor_to_bucket
from predops.features.sampling import NegativeSampling, apply_negative_sampling
from predops.pipelines.jobs.inspections import training_inspections
from predops.pipelines.jobs.labels import label_source, training_events
from predops.pipelines.jobs.lake_inputs import LakeInputs, local_part, node_ids
from predops.pipelines.jobs.node_frame import GRID_CELLS, build_node_training, frame_report
from predops.pipelines.workspace.feature_store import FeatureStore
from predops.pipelines.workspace.lake import Lake

NODE_TRAINING = "node_training"
NODE_ONLINE = "node"
DEMAND_OFFLINE = "demand_hourly"
DEMAND_ONLINE = "demand"


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
                local_part,
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
    """Telemetry at or before this is not read for the latest features: one bucket
    before the reach of the longest window, counted from the last complete bucket end
    ``E`` (so the oldest bucket read, ``(E - reach - bucket, E - reach]``, is whole). It
    depends on ``E`` alone, not on where in the bucket ``cutoff`` falls: the online rows
    of every cutoff with the same ``E`` are equal, which the incremental cycle
    (:mod:`predops.pipelines.jobs.cycle`) relies on."""
    reach = max((*spec.windows, *spec.missing_windows))
    return floor_to_bucket(cutoff - spec.ingestion_delay, spec.bucket) - reach - spec.bucket


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
    out: dict[str, Any] = {}
    out["nodes"] = materialise_node_online(
        lake, store, as_of=as_of, spec=spec, engine=engine, scheduler=scheduler
    )
    series = materialise_demand_online(lake, store, as_of=as_of, demand_spec=demand_spec)
    if series:
        out["series"] = series
    return out


def materialise_node_online(
    lake: Lake,
    store: FeatureStore,
    *,
    as_of: datetime,
    spec: NodeFeatureSpec,
    engine: str = "local",
    scheduler: str | Any | None = None,
) -> int:
    """Latest node features as of ``as_of`` (over the bounded tail of
    :func:`online_window_start`) into the online store; returns the node count."""
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
        fs_hash = node_feature_set(spec).hash
        store.materialise_online(
            NODE_ONLINE, nodes, as_of=as_of, feature_set_hash=fs_hash, key="node_id"
        )
    return nodes.height


def materialise_demand_online(
    lake: Lake, store: FeatureStore, *, as_of: datetime, demand_spec: DemandFeatureSpec = HOURLY
) -> int:
    """Latest demand features per series as of ``as_of`` into the online store; returns
    the number of series (0: the lake has no demand, nothing written)."""
    demand = _demand_frame(lake, as_of, demand_spec)
    if not demand.height:
        return 0
    latest = demand.group_by("series_id").agg(pl.all().sort_by("ts").last())
    latest = latest.with_columns(pl.col("ts").alias("last_sample_ts"))
    store.materialise_online(
        DEMAND_ONLINE, latest, as_of=as_of, feature_set_hash=demand_spec.hash, key="series_id"
    )
    return latest.height


def _demand_frame(lake: Lake, as_of: datetime, spec: DemandFeatureSpec) -> pl.DataFrame:
    calendar = lake.scan("calendar").drop("source").collect()
    series = resample_demand(lake.scan("demand").drop("source"), spec, cutoff=as_of)
    return demand_features(series, spec, calendar=calendar if calendar.height else None).collect()


SAMPLE_ABOVE_ROWS = 2_000_000
"""The default sampling rule: a node training frame of more rows than this (e.g. 2,000
nodes x 42 days of hourly rows) keeps the failure model's own share of negatives
(``MODEL_PARAMS["negative_rate"]``) outside the latest rows (see :func:`sampling_rule`);
a smaller one keeps every row."""
RECENT_KEPT = timedelta(days=9)
"""Rows this close to the cutoff are never sampled: they hold the failure job's backtest
window (the last 7 days whose 24 h labels are known) with a day to spare."""


def expected_rows(
    lake: Lake, *, as_of: datetime, since: datetime | None, eval_every: timedelta
) -> int:
    """Nodes x evaluation times between the first telemetry (or ``since``) and ``as_of``:
    what the node training frame would hold unsampled, at most."""
    span = lake.scan("telemetry").select(
        pl.col("node_id").n_unique().alias("n"), pl.col("ts").min().alias("first")
    )
    row = span.collect(engine="streaming").row(0, named=True)
    if not row["n"] or row["first"] is None:
        return 0
    first = max(row["first"], since) if since is not None else row["first"]
    return int(row["n"]) * max(0, int((as_of - first) / eval_every) + 1)


def sampling_rule(
    lake: Lake,
    *,
    as_of: datetime,
    since: datetime | None,
    eval_every: timedelta,
    negative_rate: float | None = None,
    seed: int = 0,
) -> NegativeSampling:
    """The negative-sampling rule of the node training frame: ``negative_rate`` when
    given (1.0: keep every row), else the default of :data:`SAMPLE_ABOVE_ROWS`."""
    from predops.models.failure.config import MODEL_PARAMS

    if negative_rate is None:
        big = expected_rows(lake, as_of=as_of, since=since, eval_every=eval_every)
        negative_rate = float(MODEL_PARAMS["negative_rate"]) if big > SAMPLE_ABOVE_ROWS else 1.0
    return NegativeSampling(negative_rate, seed=seed, keep_from=as_of - RECENT_KEPT)


def _node_training_in_memory(
    lake: Lake,
    store: FeatureStore,
    *,
    as_of: datetime,
    spec: NodeFeatureSpec,
    eval_every: timedelta,
    since: datetime | None,
    engine: str,
    scheduler: str | Any | None,
    horizons: tuple[timedelta, ...],
    sampling: NegativeSampling,
) -> dict[str, Any] | None:
    """The node training frame collected whole (the Dask engine's way: its partitions
    are gathered here), then sampled and written."""
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
    if not feats.height:
        return None
    events = training_events(lake)
    labels = [label_name(h) for h in horizons]
    training = apply_negative_sampling(
        add_failure_labels(
            feats.lazy(),
            events,
            horizons=horizons,
            label_cutoff=as_of,
            inspections=training_inspections(lake),
        ).collect(),
        sampling,
        label_columns=labels,
    )
    del feats
    path = store.write_offline_lazy(
        NODE_TRAINING,
        training.lazy(),
        as_of=as_of,
        feature_set_hash=fs.hash,
        extra_meta={"negative_sampling": sampling.to_dict()},
    )
    report = frame_report(training.lazy(), fs.names, labels)
    report.update(
        {
            "features": len(fs.names),
            "feature_set_hash": fs.hash,
            "path": str(path),
            "seconds": round(time.perf_counter() - t0, 2),
            "negative_sampling": sampling.to_dict(),
        }
    )
    return report


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
    negative_rate: float | None = None,
    sample_seed: int = 0,
    grid_cells: int = GRID_CELLS,
    partitioned: bool = True,
) -> dict[str, Any]:
    """Offline frames (node features + failure labels; demand features) as of ``as_of``
    into the store, then the online latest values. Returns a JSON-able report.

    The local engine builds the node frame by partitions of nodes streamed to disk
    (:mod:`predops.pipelines.jobs.node_frame`; at most ``grid_cells`` nodes x buckets
    at a time; ``partitioned=False``: collected whole, the way it was built before, for
    comparisons); the Dask engine gathers its partitions. Both apply the same
    negative-sampling rule (:func:`sampling_rule`; ``negative_rate`` 1.0 keeps every
    row) and write the same frame."""
    spec = spec or NodeFeatureSpec()
    t0 = time.perf_counter()
    sampling = sampling_rule(
        lake,
        as_of=as_of,
        since=since,
        eval_every=eval_every,
        negative_rate=negative_rate,
        seed=sample_seed,
    )
    report: dict[str, Any] = {
        "as_of": as_of.isoformat(),
        "engine": engine,
        "label_source": label_source(lake) or "every source",
    }
    if engine == "local" and partitioned:
        nodes = build_node_training(
            lake,
            store,
            NODE_TRAINING,
            as_of=as_of,
            spec=spec,
            eval_every=eval_every,
            since=since,
            horizons=horizons,
            sampling=sampling,
            grid_cells=grid_cells,
        )
    else:
        nodes = _node_training_in_memory(
            lake,
            store,
            as_of=as_of,
            spec=spec,
            eval_every=eval_every,
            since=since,
            engine=engine,
            scheduler=scheduler,
            horizons=horizons,
            sampling=sampling,
        )
    if nodes is not None:
        report["nodes"] = nodes
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
