"""Microsoft Philly active-node sequence (HeliosArtifact CES data) -> one ``demand`` series.

``predops ingest philly PATH``: PATH is ``philly_node_sequence.csv[.gz]`` (one minute per
row: ``time, active, total``) or a folder holding it; in a folder, files named
``philly_node_sequence*`` are read and other CSVs are skipped with a message.

Mapping (choices): ``series_id`` = ``philly/nodes``, ``pool`` = ``philly``, ``resource``
= ``nodes``; ``value`` = ``running`` = ``active`` (nodes running at least one job: the
trace has no queue, so ``pending`` is null and the value is served demand, not
unconstrained demand); ``capacity`` = ``total`` as published (420 nodes in 81,421 of the
84,361 published minutes; 552 on 2017-11-01/02 and 174 in the hour from 2017-11-05
01:00, the US daylight-saving fall-back hour, a hint that times are US local).
**Time zone**: ``time`` is naive (zone not published); it is read as UTC.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import polars as pl

from predops.pipelines.ingest.batch import Batch, IngestError
from predops.pipelines.ingest.options import IngestOptions
from predops.pipelines.ingest.traces.publisher_files import (
    csv_files,
    csv_stem,
    header,
    read_table,
    require_columns,
)

SOURCE = "philly"
HELP = "Philly active/total node sequence -> demand series philly/nodes"
REQUIRED = ("time", "active", "total")
WHAT = "a Philly node sequence CSV (time, active, total)"
FILE_PREFIX = "philly_node_sequence"
SERIES_ID = "philly/nodes"

log = logging.getLogger(__name__)


def demand_frame(raw: pl.DataFrame) -> pl.DataFrame:
    """The node sequence (text columns) as ``demand`` columns, text typed for validation."""
    return raw.select(
        pl.lit(SERIES_ID).alias("series_id"),
        pl.col("time").alias("ts"),
        pl.col("active").alias("value"),
        pl.col("active").alias("running"),
        pl.lit(None, dtype=pl.String).alias("pending"),
        pl.col("total").alias("capacity"),
        pl.lit("philly").alias("pool"),
        pl.lit("nodes").alias("resource"),
        pl.lit(None, dtype=pl.String).alias("gpu_model"),
    )


def select_files(path: Path) -> list[Path]:
    files = csv_files(path, WHAT)
    if not path.is_file():
        chosen = [f for f in files if csv_stem(f).startswith(FILE_PREFIX)]
        others = [f for f in files if f not in chosen]
        if others:
            log.warning(
                "%s: skipped %d CSV file(s) not named %s* (e.g. %s)",
                path,
                len(others),
                FILE_PREFIX,
                others[0].name,
            )
        if not chosen:
            raise IngestError(f"{path}: no {FILE_PREFIX}*.csv files; expected {WHAT}")
        files = chosen
    for f in files:
        require_columns(header(f), REQUIRED, f, WHAT)
    return files


def read(path: str, options: IngestOptions) -> Iterator[Batch]:
    for f in select_files(Path(path)):
        yield Batch("demand", demand_frame(read_table(f, REQUIRED, WHAT)))
