"""The lake tables node features read, as lazy frames, and the node-local features of
one partition of nodes (what a Dask worker or one step of the partitioned build runs).

Shared by ``jobs.features`` and ``jobs.node_frame`` (neither imports the other back).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl

from predops.features.definitions import NodeFeatureSpec
from predops.features.frames import node_local_features
from predops.pipelines.jobs.labels import training_events
from predops.pipelines.workspace.lake import Lake


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
    # Streamed: the node id column of a 10,000-node month is ~86M values.
    ids = lake.scan("telemetry", source).select("node_id").unique().collect(engine="streaming")
    return sorted(ids["node_id"].to_list())


def local_part(
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
