"""Grid'5000 availability intervals (Failure Trace Archive ``event_trace.tab[.gz]``) ->
node unavailability intervals with their topology.

The file is whitespace separated with a ``#`` header line. Kept: ``node_id``,
``node_name`` (``G1/siteS/cC/nodeN``: ``site`` and ``cluster`` = ``siteS/cC`` are
derived from it), ``event_type`` (FTA: 1 available, 0 unavailable), ``start`` /
``stop`` (Unix seconds -> UTC). A row whose numbers do not parse, whose type is not 0
or 1, whose stop precedes its start or whose name is not a ``G1/site/cluster/node``
path is quarantined and named. Memory: the decompressed text once (about 40 MB for
the development part) and the typed intervals.
"""

from __future__ import annotations

import gzip
import io
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from predops.pipelines.ingest.traces.failure_records import (
    Field,
    Quarantine,
    TraceError,
    files_named,
    integer,
    parse_fields,
    text,
)

FILE = "event_trace.tab.gz"
COLUMNS = (
    "event_id",
    "component_id",
    "node_id",
    "platform_id",
    "node_name",
    "event_type",
    "event_start_time",
    "event_stop_time",
    "event_end_reason",
)
FIELDS = (
    Field("node_id", "node", integer, "an integer node id"),
    Field("node_name", "node_name", text, "a node name"),
    Field(
        "event_type",
        "event_type",
        lambda e: pl.when(e.is_in(["0", "1"])).then(e.cast(pl.Int8)).otherwise(None),
        "0 or 1",
    ),
    Field("event_start_time", "start_s", integer, "Unix seconds"),
    Field("event_stop_time", "stop_s", integer, "Unix seconds"),
)


@dataclass(frozen=True)
class Intervals:
    frame: pl.DataFrame
    quarantine: Quarantine
    file: str


def read_grid5000(path: str | Path) -> Intervals:
    """Intervals at ``path`` (the ``.tab[.gz]`` file or its folder), sorted by start."""
    p = Path(path)
    f = files_named(p, FILE)
    if p.is_dir() and not f.is_file():
        f = p / "event_trace.tab"
    if not f.is_file():
        raise TraceError(f"{f}: no such file")
    raw_bytes = f.read_bytes()
    body = gzip.decompress(raw_bytes) if f.suffix == ".gz" else raw_bytes
    lines = [ln for ln in body.decode().splitlines() if ln.strip() and not ln.startswith("#")]
    cells = "\n".join("\t".join(ln.split()) for ln in lines)
    raw = pl.read_csv(
        io.StringIO(cells),
        separator="\t",
        has_header=False,
        new_columns=list(COLUMNS),
        infer_schema_length=0,
        truncate_ragged_lines=True,
    )
    q = Quarantine()
    df = parse_fields(raw, FIELDS, file_name=f.name, quarantine=q)
    parts = pl.col("node_name").str.extract_groups(r"^G1/(site\d+)/(c\d+)/node\d+$")
    df = df.with_columns(
        parts.struct.field("1").alias("site"),
        pl.format("{}/{}", parts.struct.field("1"), parts.struct.field("2")).alias("cluster"),
    )
    why = (
        pl.when(pl.col("site").is_null())
        .then(
            pl.format(
                "{} row {} field node_name: '{}' is not G1/site/cluster/node",
                pl.lit(f.name),
                pl.col("__row"),
                pl.col("node_name"),
            )
        )
        .when(pl.col("stop_s") < pl.col("start_s"))
        .then(
            pl.format(
                "{} row {} field event_stop_time: {} is before the start {}",
                pl.lit(f.name),
                pl.col("__row"),
                pl.col("stop_s"),
                pl.col("start_s"),
            )
        )
    )
    df = df.with_columns(why.alias("__why"))
    bad = df.filter(pl.col("__why").is_not_null())
    if bad.height:
        q.add(bad["__why"].head(20).to_list(), bad.height)
    df = df.filter(pl.col("__why").is_null()).drop("__why")
    if df.height == 0:
        raise TraceError(f"{f.name}: no readable intervals ({q.rows} quarantined)")
    df = df.with_columns(
        pl.from_epoch("start_s", time_unit="s").dt.replace_time_zone("UTC").alias("start"),
        pl.from_epoch("stop_s", time_unit="s").dt.replace_time_zone("UTC").alias("stop"),
    )
    return Intervals(df.sort("start"), q, f.name)
