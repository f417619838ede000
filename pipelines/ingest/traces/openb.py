"""Alibaba GPU cluster trace v2023 ("openb"): node lists -> inventory, pod lists -> pods.

``predops ingest openb PATH``: PATH is an ``openb_node_list_*.csv``, an
``openb_pod_list_*.csv`` or a directory holding them. Pod times in the trace are
seconds from the trace start; they are placed after ``-o epoch=...`` (default
2023-01-01T00:00:00Z). The trace has no topology: region/zone/spine/rack are
``unknown`` and each node is one NUMA node (no alignment constraint can be inferred).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from predops.core.schemas import UTC_TS
from predops.pipelines.ingest.batch import Batch, IngestError
from predops.pipelines.ingest.files import input_files, read_csv_text
from predops.pipelines.ingest.options import IngestOptions

SOURCE = "openb"
HELP = "Alibaba openb node and pod lists (cluster-trace-gpu-v2023)"
DEFAULT_EPOCH = datetime(2023, 1, 1, tzinfo=UTC)
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
UNKNOWN = "unknown"


def _epoch(options: IngestOptions | None) -> datetime:
    if options is None or "epoch" not in options.extra:
        return DEFAULT_EPOCH
    try:
        t = datetime.fromisoformat(options.extra["epoch"])
    except ValueError:
        raise IngestError(f"openb: epoch {options.extra['epoch']!r} is not ISO-8601") from None
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t


def _require(frame: pl.DataFrame, cols: tuple[str, ...], path: Path) -> None:
    missing = [c for c in cols if c not in frame.columns]
    if missing:
        raise IngestError(f"{path}: not an openb list, missing column(s) {', '.join(missing)}")


def nodes_frame(raw: pl.DataFrame, snapshot: datetime) -> pl.DataFrame:
    """An openb node list (text columns) as inventory-contract columns (still text-typed
    where the trace is text, so validation names bad values)."""
    model = pl.col("model").str.strip_chars()
    has_model = model.is_not_null() & (model != "")
    gpu = pl.col("gpu").str.strip_chars()
    return raw.select(
        pl.lit(snapshot, dtype=UTC_TS).alias("ts"),
        pl.col("sn").alias("node_id"),
        pl.when(has_model).then(model).otherwise(pl.lit("cpu")).alias("pool"),
        pl.when(has_model)
        .then(pl.format("{}x{}-{}m", model, gpu, pl.col("cpu_milli").str.strip_chars()))
        .otherwise(pl.format("cpu-{}m", pl.col("cpu_milli").str.strip_chars()))
        .alias("sku"),
        pl.when(has_model).then(model).otherwise(None).alias("gpu_model"),
        pl.col("gpu").alias("gpus"),
        pl.col("cpu_milli"),
        pl.col("memory_mib"),
        pl.lit(1, dtype=pl.Int16).alias("numa_nodes"),
        pl.lit(None, dtype=pl.String).alias("nvlink_domain"),
        *(pl.lit(UNKNOWN).alias(c) for c in ("region", "zone", "spine", "rack")),
        pl.lit(None, dtype=UTC_TS).alias("installed_at"),
    )


def _rel_time(col: str, epoch: datetime) -> pl.Expr:
    secs = pl.col(col).str.strip_chars().cast(pl.Float64, strict=False)
    return pl.lit(epoch, dtype=UTC_TS) + pl.duration(microseconds=(secs * 1e6).round(0))


def workload_name(path: Path) -> str:
    """``openb_pod_list_gpushare40.csv`` -> ``gpushare40``: pod names repeat across the
    trace's workload variants, so pod ids carry the workload."""
    stem = path.name.split(".")[0]
    return stem.removeprefix("openb_pod_list_")


def pods_frame(raw: pl.DataFrame, epoch: datetime, workload: str) -> pl.DataFrame:
    """An openb pod list (text columns) as pods-contract columns; ids are
    ``<workload>/<name>``."""
    has = set(raw.columns)
    spec = pl.col("gpu_spec").str.strip_chars() if "gpu_spec" in has else pl.lit(None, pl.String)

    def text(col: str) -> pl.Expr:
        return pl.col(col) if col in has else pl.lit(None, dtype=pl.String)

    def when(col: str) -> pl.Expr:
        if col not in has:
            return pl.lit(None, dtype=UTC_TS)
        return (
            pl.when(pl.col(col).str.strip_chars() != "").then(_rel_time(col, epoch)).otherwise(None)
        )

    created = (
        pl.when(pl.col("creation_time").str.strip_chars() != "")
        .then(_rel_time("creation_time", epoch))
        .otherwise(None)
        if "creation_time" in has
        else pl.lit(epoch, dtype=UTC_TS)
    )
    return raw.select(
        pl.format("{}/{}", pl.lit(workload), pl.col("name")).alias("pod_id"),
        pl.lit(None, pl.String).alias("job_id"),
        pl.lit(None, pl.String).alias("gang_id"),
        pl.lit(None, pl.Int32).alias("gang_size"),
        pl.lit(None, pl.String).alias("pool"),
        pl.col("cpu_milli"),
        pl.col("memory_mib"),
        pl.col("num_gpu"),
        pl.col("gpu_milli"),
        pl.when(spec != "").then(spec).otherwise(None).alias("gpu_spec"),
        text("qos").alias("qos"),
        pl.lit(None, pl.Int32).alias("priority"),
        text("pod_phase").alias("phase"),
        created.alias("created_at"),
        when("scheduled_time").alias("scheduled_at"),
        when("deletion_time").alias("deleted_at"),
        pl.lit(None, pl.String).alias("node_id"),
    )


def read_nodes(path: Path, snapshot: datetime = DEFAULT_EPOCH) -> pl.DataFrame:
    raw = read_csv_text(path, quarantine_ragged=False)
    _require(raw, NODE_COLUMNS, path)
    return nodes_frame(raw, snapshot)


def read_pods(path: Path, epoch: datetime = DEFAULT_EPOCH) -> pl.DataFrame:
    raw = read_csv_text(path, quarantine_ragged=False)
    _require(raw, POD_COLUMNS, path)
    return pods_frame(raw, epoch, workload_name(path))


def _kind(path: Path, raw: pl.DataFrame) -> str:
    if set(NODE_COLUMNS) <= set(raw.columns):
        return "inventory"
    if set(POD_COLUMNS) <= set(raw.columns):
        return "pods"
    raise IngestError(
        f"{path}: neither an openb node list ({', '.join(NODE_COLUMNS)}) nor a pod list "
        f"({', '.join(POD_COLUMNS)}); got columns {', '.join(raw.columns)}"
    )


def read(path: str, options: IngestOptions) -> Iterator[Batch]:
    epoch = _epoch(options)
    files = [f for f in input_files(Path(path)) if f.name.lower().endswith((".csv", ".csv.gz"))]
    if not files:
        raise IngestError(f"{path}: no openb CSV files")
    frames = [(f, read_csv_text(f, quarantine_ragged=False)) for f in files]
    kinds = [(f, raw, _kind(f, raw)) for f, raw in frames]
    # Inventory first, so pods and later telemetry can refer to known nodes.
    for f, raw, kind in sorted(kinds, key=lambda k: (k[2] != "inventory", str(k[0]))):
        if kind == "inventory":
            yield Batch("inventory", nodes_frame(raw, epoch))
        else:
            yield Batch("pods", pods_frame(raw, epoch, workload_name(f)))
