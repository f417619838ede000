"""OLCF Alpine (Summit's file system) disk failures (``alpine_formatted_data.csv``,
George, Hanley, Zimmer, FTXS 2024) -> one row per detected disk failure.

Columns kept: ``at`` (``Timestamp``, ISO 8601 with zone, converted to UTC; required),
``ssc`` (scalable storage cluster), ``ssu`` (storage unit letter), ``enclosure``,
``slot``, ``rack`` (``Rack id``), ``enclosure_uid`` (``Unique enclosure``), all
required: they are the failure's position. There is no disk model column, so spares
are forecast for the whole population.
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

FILE = "alpine_formatted_data.csv"
FIELDS = (
    Field("Timestamp", "at", timestamp("%Y-%m-%dT%H:%M:%S%z"), "an ISO 8601 time with zone"),
    Field("SSC", "ssc", integer, "an integer"),
    Field("SSU", "ssu", text, "a storage unit letter"),
    Field("Enclosure", "enclosure", integer, "an integer"),
    Field("Slot", "slot", integer, "an integer"),
    Field("Rack id", "rack", integer, "an integer"),
    Field("Unique enclosure", "enclosure_uid", integer, "an integer"),
)


@dataclass(frozen=True)
class DiskFailures:
    frame: pl.DataFrame
    quarantine: Quarantine
    file: str

    def installed_base_proxy(self) -> dict[str, int]:
        """Disks in the positions the failures reveal: distinct (SSC, SSU, enclosure)
        x the highest slot number seen (every enclosure is the same model). A lower
        bound where a whole enclosure never lost a disk."""
        f = self.frame
        enclosures = f.select("ssc", "ssu", "enclosure").unique().height
        slots = int(f["slot"].max())  # type: ignore[arg-type]
        return {"enclosures": enclosures, "slots_per_enclosure": slots, "disks": enclosures * slots}


def read_olcf_alpine(path: str | Path) -> DiskFailures:
    """Alpine disk failures at ``path`` (the CSV or its folder)."""
    f = files_named(Path(path), FILE)
    frame, q = read_records(f, FIELDS)
    return DiskFailures(frame.sort("at"), q, f.name)
