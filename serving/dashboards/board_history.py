"""What happened on the risk board's nodes in its time range: failures, repairs,
drains, cordons and maintenance from the lake's events, counted per kind, binned over
the range for a chart, and the newest listed — the board's answer to "what broke since
yesterday?" beside "what may break next?".

Only the range's day partitions of the events table are read, and only the shown
nodes' rows when a filter narrows the board. The bins are the coarsest of 15 min, 1 h,
6 h and 1 day that give at most :data:`MAX_BINS` over the range.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from predops.pipelines.workspace.lake import Lake
from predops.serving.dashboards.incidents import MARKED

KINDS = ("failure", "repair", "drain", "cordon", "uncordon", "maintenance_start")
"""Event kinds the board counts (readiness flips are telemetry, not history)."""
LISTED = 50
"""Newest events listed under the chart."""
MAX_BINS = 60
BIN_WIDTHS = (timedelta(minutes=15), timedelta(hours=1), timedelta(hours=6), timedelta(days=1))


@dataclass(frozen=True, slots=True)
class RangeEvents:
    """Events of the shown nodes in ``[since, until]``: ``counts`` per kind (every kind
    of :data:`KINDS`), ``bins`` (starts) with ``per_bin`` counts per kind, ``recent``
    (the newest :data:`LISTED`, newest first) and ``total``."""

    since: datetime
    until: datetime
    counts: dict[str, int]
    bins: list[datetime]
    per_bin: dict[str, list[int]]
    recent: list[dict[str, Any]]
    total: int
    width: timedelta


def bin_width(span: timedelta) -> timedelta:
    """The coarsest of :data:`BIN_WIDTHS` needed to keep ``span`` in :data:`MAX_BINS`."""
    return next((w for w in BIN_WIDTHS if span / w <= MAX_BINS), BIN_WIDTHS[-1])


def _floor(t: datetime, width: timedelta) -> datetime:
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    return epoch + ((t - epoch) // width) * width


def range_events(
    lake_dir: Path, since: datetime, until: datetime, nodes: Collection[str] | None = None
) -> RangeEvents:
    """The events of ``nodes`` (None: every node) in ``[since, until]`` (module
    docstring)."""
    width = bin_width(until - since)
    first = _floor(since, width)
    bins = [first + i * width for i in range(int((until - first) / width) + 1)]
    lake = Lake(lake_dir)
    frame = pl.DataFrame(schema={"node_id": pl.String, "kind": pl.String, "at": pl.Datetime})
    if lake.files("events"):
        frame = (
            lake.scan("events", start=since, end=until)
            .filter(pl.col("kind").is_in(KINDS) & pl.col("at").is_between(since, until))
            .select("node_id", "kind", "at", "cause", "detail")
            .collect()
        )
        if nodes is not None:  # in memory: see node_state.node_states on is_in in a scan
            frame = frame.filter(pl.col("node_id").is_in(sorted(nodes)))
        frame = frame.unique().sort("at", "node_id", "kind", descending=[True, False, False])
    counts = dict.fromkeys(KINDS, 0)
    per_bin = {k: [0] * len(bins) for k in KINDS}
    for kind, at in zip(frame["kind"].to_list(), frame["at"].to_list(), strict=True):
        counts[kind] += 1
        per_bin[kind][min(len(bins) - 1, int((at - first) / width))] += 1
    return RangeEvents(
        since=since,
        until=until,
        counts=counts,
        bins=bins,
        per_bin={k: v for k, v in per_bin.items() if counts[k]},
        recent=frame.head(LISTED).to_dicts(),
        total=frame.height,
        width=width,
    )


def colours() -> dict[str, str]:
    """Each kind's colour, the node page's markers' (:data:`incidents.MARKED`)."""
    return {k: MARKED[k] for k in KINDS if k in MARKED}


__all__ = ["KINDS", "LISTED", "RangeEvents", "bin_width", "colours", "range_events"]
