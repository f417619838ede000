"""Helios (SenseTime, SC '21) per-VC GPU demand -> ``demand`` series.

``predops ingest helios PATH``: PATH is one ``cluster_sequence_vc.csv[.gz]`` (one
minute per row for one virtual cluster), a VC folder, or a folder of them such as
``Earth_vcs/``. In a folder, files named ``cluster_sequence*`` are read; the daily
quota table ``*_gpu_number.csv`` is skipped with a message (see below); any other
CSV is skipped with a message too (e.g. Philly's file beside Helios').

Mapping (choices):

- One series per VC: ``series_id`` = ``helios/<vc>/gpus``, ``pool`` = ``<vc>``,
  ``resource`` = ``gpus``. The VC is the file's folder name (the publisher's layout
  ``<vc>/cluster_sequence_vc.csv``); a file named otherwise is its own VC (its stem).
- ``value`` = ``running_gpu_num`` + ``pending_gpu_num``: unconstrained demand, the GPUs
  in use plus those queued jobs ask for; ``running`` / ``pending`` keep the parts and
  ``capacity`` = ``total_gpu_num`` (the VC's GPU quota that minute). Where the sum
  cannot be formed, the row is quarantined naming both source values.
- **Time zone.** ``time`` is naive (the publisher does not say which zone; the cluster
  is in China); it is read as UTC.
- ``Earth_gpu_number.csv`` (one row per day, one column per VC: quota) is not ingested:
  the per-minute ``total_gpu_num`` of each VC already carries the quota, and a
  quota is not demand. Given alone, it is refused with that explanation.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import polars as pl

from predops.pipelines.ingest.batch import Batch, IngestError
from predops.pipelines.ingest.options import IngestOptions
from predops.pipelines.ingest.traces.derived import explained, number_text
from predops.pipelines.ingest.traces.publisher_files import (
    csv_files,
    csv_stem,
    header,
    read_table,
    require_columns,
)

SOURCE = "helios"
HELP = "Helios per-VC GPU demand (cluster_sequence_vc.csv) -> demand series"
REQUIRED = ("time", "total_gpu_num", "running_gpu_num", "pending_gpu_num")
WHAT = (
    "a Helios VC sequence CSV (time, total_gpu_num, running_gpu_num, pending_gpu_num, "
    "...), as in Earth_vcs/<vc>/cluster_sequence_vc.csv"
)
SEQUENCE_PREFIX = "cluster_sequence"
QUOTA_SUFFIX = "_gpu_number"

log = logging.getLogger(__name__)


def vc_name(path: Path) -> str:
    stem = csv_stem(path)
    if stem.startswith(SEQUENCE_PREFIX) and path.parent.name:
        return path.parent.name
    return stem


def _number(col: str) -> pl.Expr:
    return pl.col(col).cast(pl.String).str.strip_chars().cast(pl.Float64, strict=False)


def demand_frame(raw: pl.DataFrame, vc: str) -> pl.DataFrame:
    """A VC sequence (text columns) as ``demand`` columns, text typed for validation."""
    total = _number("running_gpu_num") + _number("pending_gpu_num")
    return raw.select(
        pl.lit(f"helios/{vc}/gpus").alias("series_id"),
        pl.col("time").alias("ts"),
        explained(number_text(total), "running_gpu_num", "pending_gpu_num").alias("value"),
        pl.col("running_gpu_num").alias("running"),
        pl.col("pending_gpu_num").alias("pending"),
        pl.col("total_gpu_num").alias("capacity"),
        pl.lit(vc).alias("pool"),
        pl.lit("gpus").alias("resource"),
        pl.lit(None, dtype=pl.String).alias("gpu_model"),
    )


def _is_quota_table(path: Path) -> bool:
    return csv_stem(path).endswith(QUOTA_SUFFIX)


def select_files(path: Path) -> list[Path]:
    """The VC sequence files PATH names; quota tables and other CSVs in a folder are
    skipped with a message, a single wrong file is refused."""
    files = csv_files(path, WHAT)
    if path.is_file():
        f = files[0]
        if _is_quota_table(f):
            raise IngestError(
                f"{f}: a daily GPU quota table, not demand; give the "
                "<vc>/cluster_sequence_vc.csv files (their total_gpu_num is the quota)"
            )
        require_columns(header(f), REQUIRED, f, WHAT)
        return files
    chosen: list[Path] = []
    others: list[Path] = []
    for f in files:
        if _is_quota_table(f):
            log.warning(
                "%s: daily GPU quota table skipped (the per-minute total_gpu_num "
                "of each VC already gives its quota)",
                f,
            )
        elif csv_stem(f).startswith(SEQUENCE_PREFIX):
            require_columns(header(f), REQUIRED, f, WHAT)
            chosen.append(f)
        else:
            others.append(f)
    if others:
        log.warning(
            "%s: skipped %d CSV file(s) not named %s* (e.g. %s)",
            path,
            len(others),
            SEQUENCE_PREFIX,
            others[0].name,
        )
    if not chosen:
        raise IngestError(f"{path}: no {SEQUENCE_PREFIX}*.csv files; expected {WHAT}")
    names = [vc_name(f) for f in chosen]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise IngestError(
            f"{path}: several files for VC(s) {', '.join(dup)}; ingest them separately"
        )
    return chosen


def read(path: str, options: IngestOptions) -> Iterator[Batch]:
    for f in select_files(Path(path)):
        yield Batch("demand", demand_frame(read_table(f, REQUIRED, WHAT), vc_name(f)))
