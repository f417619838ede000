"""The node training frame in bounded memory: partitions of nodes streamed to disk.

The in-memory way (features of every node, then labels, then one write) holds the whole
frame and its 15-minute bucket grid at once: about 3 GB per day of 10,000-node history.
Here:

1. the nodes are cut into partitions (consecutive ids) whose bucket grid holds at most
   ``grid_cells`` (nodes x buckets) cells;
2. per partition: its node-local features (windows, static attributes, events; float32)
   go to a spill file;
3. the fleet's peer medians (per bucket end and rack / pool) come from a lazy scan of a
   few columns of the spill files;
4. per partition: the peer deviations from those medians, the failure labels and the
   negative-sampling rule (:mod:`predops.features.sampling`) before anything else is
   kept, then a part file;
5. the parts are streamed into the feature store's one Parquet file, and the report's
   figures are computed by scanning it.

Peak memory is one partition's features and grid plus the medians, whatever the fleet
size; the rows, the values and the sampling equal the in-memory way's
(``tests/pipelines/jobs/test_node_frame.py``).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from predops.features.definitions import NodeFeatureSpec, node_feature_set
from predops.features.frames import finish_node_features
from predops.features.labels import add_failure_labels, label_name
from predops.features.node import peer_medians
from predops.features.sampling import NegativeSampling, apply_negative_sampling
from predops.pipelines.jobs.inspections import training_inspections
from predops.pipelines.jobs.labels import training_events
from predops.pipelines.jobs.lake_inputs import local_part, node_ids
from predops.pipelines.workspace.feature_store import FeatureStore
from predops.pipelines.workspace.lake import Lake

GRID_CELLS = 400_000
"""Nodes x 15-minute buckets per partition. The build's peak RSS measured with it: 1,201
MiB at 500 nodes x 14 days (2 partitions), 1,348 MiB at 1,000 nodes x 30 days (8); the
grid costs about 2.5 KB per cell for the production feature set
(``benchmarks/bench_node_training.py``)."""


@dataclass(frozen=True, slots=True)
class Partitioning:
    """How the fleet was cut: ``partitions`` of at most ``nodes_per_partition`` nodes."""

    nodes: int
    partitions: int
    nodes_per_partition: int
    buckets: int

    def to_dict(self) -> dict[str, int]:
        return {
            "nodes": self.nodes,
            "partitions": self.partitions,
            "nodes_per_partition": self.nodes_per_partition,
            "buckets": self.buckets,
        }


def partition_nodes(
    ids: Sequence[str], *, first: datetime, cutoff: datetime, bucket: timedelta, grid_cells: int
) -> tuple[list[list[str]], Partitioning]:
    """Consecutive runs of ``ids`` whose bucket grid from ``first`` to ``cutoff`` stays
    within ``grid_cells``."""
    buckets = max(1, int((cutoff - first) / bucket) + 1)
    per = max(1, grid_cells // buckets)
    chunks = [list(ids[i : i + per]) for i in range(0, len(ids), per)]
    return chunks, Partitioning(len(ids), len(chunks), per, buckets)


def _local_features(
    lake: Lake,
    ids: list[str],
    *,
    cutoff: datetime,
    spec: NodeFeatureSpec,
    eval_every: timedelta,
    since: datetime | None,
    window_start: datetime | None,
) -> pl.DataFrame:
    return local_part(
        str(lake.root), ids, None, cutoff, spec, eval_every, False, since, window_start
    )


def build_node_training(
    lake: Lake,
    store: FeatureStore,
    name: str,
    *,
    as_of: datetime,
    spec: NodeFeatureSpec,
    eval_every: timedelta,
    since: datetime | None,
    horizons: tuple[timedelta, ...],
    sampling: NegativeSampling,
    grid_cells: int = GRID_CELLS,
) -> dict[str, Any] | None:
    """Write the node training frame ``name`` as of ``as_of`` into ``store`` (see module
    doc); its report, or None when the lake has no telemetry before ``as_of``."""
    t0 = time.perf_counter()
    fs = node_feature_set(spec)
    ids = node_ids(lake)
    # Every sample counts (a counter's increase after a gap in telemetry spans the gap),
    # so the grid spans the whole history even when rows are kept from ``since`` on.
    tel = lake.scan("telemetry").filter(pl.col("ts") <= as_of)
    first = tel.select(pl.col("ts").min()).collect().item()
    if not ids or first is None:
        return None
    chunks, parts = partition_nodes(
        ids, first=first, cutoff=as_of, bucket=spec.bucket, grid_cells=grid_cells
    )
    events = training_events(lake)
    inspections = training_inspections(lake)
    labels = [label_name(h) for h in horizons]
    store.root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".node-frame-", dir=store.root))
    try:
        spills: list[Path] = []
        for i, chunk in enumerate(chunks):
            local = _local_features(
                lake,
                chunk,
                cutoff=as_of,
                spec=spec,
                eval_every=eval_every,
                since=since,
                window_start=None,
            )
            if local.height:
                path = work / f"local-{i:05d}.parquet"
                local.write_parquet(path, compression="lz4")
                spills.append(path)
            del local
        t_local = time.perf_counter() - t0
        if not spills:
            return None
        medians = {
            grp: lf.collect().lazy()
            for grp, lf in peer_medians(pl.scan_parquet(spills), spec).items()
        }
        outs: list[Path] = []
        for path in spills:
            feats = finish_node_features(pl.scan_parquet(path), spec, medians)
            chunk_ids = feats.select("node_id").unique().collect()["node_id"]
            mine = pl.col("node_id").is_in(chunk_ids.implode())
            insp = None if inspections is None else inspections.filter(mine)
            labelled = add_failure_labels(
                feats, events.filter(mine), horizons=horizons, label_cutoff=as_of, inspections=insp
            ).collect()
            kept = apply_negative_sampling(labelled, sampling, label_columns=labels)
            out = path.with_name(path.name.replace("local-", "part-"))
            kept.write_parquet(out, compression="lz4")
            outs.append(out)
            path.unlink()
            del labelled, kept
        written = store.write_offline_lazy(
            name,
            pl.scan_parquet(outs),
            as_of=as_of,
            feature_set_hash=fs.hash,
            extra_meta={"negative_sampling": sampling.to_dict()},
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report = frame_report(pl.scan_parquet(written), fs.names, labels)
    report.update(
        {
            "features": len(fs.names),
            "feature_set_hash": fs.hash,
            "path": str(written),
            "seconds": round(time.perf_counter() - t0, 2),
            "local_features_seconds": round(t_local, 2),
            "partitioning": parts.to_dict(),
            "negative_sampling": sampling.to_dict(),
        }
    )
    return report


def frame_report(
    frame: pl.LazyFrame, features: Sequence[str], labels: Sequence[str]
) -> dict[str, Any]:
    """Rows, columns, nodes, positive rates, usable rows and null fractions of a frame,
    by one streaming pass (the frame is never collected whole)."""
    names = frame.collect_schema().names()
    feats = [f for f in features if f in names]
    row = (
        frame.select(
            pl.len().alias("__rows"),
            pl.col("node_id").n_unique().alias("__nodes"),
            pl.col("usable").sum().alias("__usable"),
            *[pl.col(c).cast(pl.Float64).mean().alias(f"__pos_{c}") for c in labels],
            *[pl.col(c).null_count().alias(f"__null_{c}") for c in feats],
        )
        .collect()
        .row(0, named=True)
    )
    rows = int(row["__rows"])
    nulls = {c: round(row[f"__null_{c}"] / rows, 4) if rows else 1.0 for c in feats}
    return {
        "rows": rows,
        "columns": len(names),
        "nodes": int(row["__nodes"]),
        "positive_rate": {c: round(float(row[f"__pos_{c}"] or 0.0), 5) for c in labels},
        "usable_rows": int(row["__usable"] or 0),
        "null_fraction_mean": round(sum(nulls.values()) / max(1, len(nulls)), 4),
        "null_fractions": nulls,
    }
