"""OLCF Titan GPU lives (``gc_full.csv[.gz]``, Ostrouchov et al., SC '20) -> one row per
life of one GPU at one slot.

Kept: ``sn``, ``location`` (``c{col}-{row}c{cage}s{slot}n{node}``, parsed into
``col``, ``row``, ``cage``, ``slot``, ``node``), ``insert`` / ``remove`` (UTC),
``out`` (the GPU's last record and removed before the final inventory), ``event``
(``DBE`` double-bit ECC, ``OTB`` off the bus, null: none). An empty ``insert`` (and
``out``) is kept as null (930 lives of the development part, every one ending in an
event): the removal and its event are known, the start is not. A life whose location
does not parse, whose times do not parse or whose event is another value is
quarantined and named. A failure is a life that ends with an event (at ``remove``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from predops.pipelines.ingest.traces.failure_records import (
    Field,
    Quarantine,
    boolean,
    files_named,
    read_records,
    text,
    timestamp,
)

FILE = "data/gc_full.csv.gz"
_T = timestamp("%Y-%m-%d %H:%M:%S")
_LOC = r"^c(\d+)-(\d+)c(\d)s(\d+)n(\d)$"
FIELDS = (
    Field("SN", "sn", text, "a serial number"),
    Field(
        "location",
        "location",
        lambda e: pl.when(e.str.contains(_LOC)).then(e).otherwise(None),
        "a location c{col}-{row}c{cage}s{slot}n{node}",
    ),
    Field("insert", "insert", _T, "a time YYYY-MM-DD HH:MM:SS", required=False),
    Field("remove", "remove", _T, "a time YYYY-MM-DD HH:MM:SS"),
    Field("out", "out", boolean, "True or False", required=False),
    Field(
        "event",
        "event",
        lambda e: pl.when(e.is_in(["DBE", "OTB"])).then(e).otherwise(None),
        "DBE, OTB or empty",
        required=False,
    ),
)


@dataclass(frozen=True)
class GpuLives:
    frame: pl.DataFrame
    quarantine: Quarantine
    file: str


def read_titan(path: str | Path) -> GpuLives:
    """GPU lives at ``path`` (``gc_full.csv[.gz]`` or the data set folder)."""
    p = Path(path)
    f = (
        p
        if p.is_file()
        else next(
            (c for c in (p / FILE, p / "gc_full.csv.gz", p / "data/gc_full.csv") if c.is_file()),
            p / FILE,
        )
    )
    f = files_named(f, FILE)
    frame, q = read_records(f, FIELDS)
    parts = pl.col("location").str.extract_groups(_LOC)
    names = ("col", "row", "cage", "slot", "node")
    frame = frame.with_columns(
        [parts.struct.field(str(i + 1)).cast(pl.Int32).alias(n) for i, n in enumerate(names)]
    )
    return GpuLives(frame.sort("insert", nulls_last=True), q, f.name)
