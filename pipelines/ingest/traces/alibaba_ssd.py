"""Alibaba SSD failure tickets (``ssd_failure_tag.csv[.gz]``, Han et al., FAST '21) ->
one row per failed SSD.

Columns kept: ``model`` (drive model A1..C2, required), ``at`` (``failure_time``, naive,
read as UTC; required), ``app``, ``machine_room``, ``rack``, ``node``, ``disk``. The
``failure`` flag must be 1 (the file holds failures only); any other value is
quarantined with its text. SMART columns are not read. There is no population
denominator in the snapshot (the location table of all ~1M SSDs is absent).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from predops.pipelines.ingest.traces.failure_records import (
    Field,
    Quarantine,
    files_named,
    integer,
    read_records,
    text,
    timestamp,
)

FILE = "ssd_failure_tag.csv.gz"
FIELDS = (
    Field("model", "model", text, "a drive model"),
    Field("failure_time", "at", timestamp("%Y-%m-%d %H:%M:%S"), "a time YYYY-MM-DD HH:MM:SS"),
    Field(
        "failure",
        "failure",
        lambda e: pl.when(e.cast(pl.Float64, strict=False) == 1).then(1).otherwise(None),
        "the failure flag 1",
    ),
    Field("app", "app", text, "an application tag", required=False),
    Field("machine_room_id", "machine_room", integer, "an integer id", required=False),
    Field("rack_id", "rack", integer, "an integer id", required=False),
    Field("node_id", "node", integer, "an integer id", required=False),
    Field("disk_id", "disk", integer, "an integer id", required=False),
)
FLEET_SSDS = 1_000_000
"""The fleet the tickets come from: "nearly one million SSDs of 11 drive models" (Han et
al., FAST '21, abstract); the per-model split is not published in the snapshot."""


@dataclass(frozen=True)
class SsdFailures:
    frame: pl.DataFrame
    quarantine: Quarantine
    file: str


def read_alibaba_ssd(path: str | Path) -> SsdFailures:
    """Failed SSDs at ``path`` (the CSV, or a folder holding ``ssd_failure_tag.csv.gz``
    or ``ssd_failure_tag.csv``)."""
    p = Path(path)
    if p.is_dir() and not (p / FILE).is_file():
        p = p / "ssd_failure_tag.csv"
    f = files_named(p, FILE)
    frame, q = read_records(f, FIELDS)
    return SsdFailures(frame.drop("failure").sort("at"), q, f.name)
