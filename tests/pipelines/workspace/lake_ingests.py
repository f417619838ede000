"""Synthetic telemetry written into a lake the way a scheduled ingest writes it: one
lake write (one commit, one part file per day it touches) per ingest interval, with
every telemetry column (shared by the maintenance tests and ``benchmarks/bench_lake.py``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl

from predops.core.schemas import TELEMETRY
from predops.pipelines.workspace.lake import Lake

COUNTERS = tuple(c.name for c in TELEMETRY.columns if c.name.endswith("_total"))


def telemetry_batch(
    node_ids: list[str], times: list[datetime], rng: np.random.Generator
) -> pl.DataFrame:
    """Every node at every time in ``times``: plausible gauges, slowly rising counters."""
    n, k = len(node_ids), len(times)
    rows = n * k
    naive = [t.astimezone(UTC).replace(tzinfo=None) for t in times]
    ts = np.repeat(np.array(naive, dtype="datetime64[us]"), n)
    ids = pl.Series("node_id", node_ids * k)
    tick = np.repeat(np.array([t.timestamp() // 300 for t in times], dtype=np.int64), n)
    cols: dict[str, object] = {
        "ts": pl.Series("ts", ts).dt.replace_time_zone("UTC"),
        "node_id": ids,
        "cpu_util_pct": rng.uniform(0, 100, rows).astype(np.float32),
        "mem_used_bytes": rng.integers(1 << 30, 1 << 38, rows),
        "gpu_util_pct": rng.uniform(0, 100, rows).astype(np.float32),
        "gpu_temp_c": rng.normal(60, 8, rows).clip(20, 110).astype(np.float32),
        "gpu_power_w": rng.uniform(200, 5600, rows).astype(np.float32),
        "node_ready": rng.random(rows) > 0.001,
    }
    for i, name in enumerate(COUNTERS):
        cols[name] = (tick // (50 + 7 * i)).astype(np.int64)
    return pl.DataFrame(cols).select(TELEMETRY.names).cast(TELEMETRY.polars_schema())


def ingest_every(
    lake: Lake,
    *,
    nodes: int,
    start: datetime,
    end: datetime,
    every: timedelta = timedelta(minutes=5),
    source: str = "prometheus",
    seed: int = 0,
) -> int:
    """One lake write per ``every`` from ``start`` (inclusive) to ``end`` (exclusive);
    returns the ingests written."""
    rng = np.random.default_rng(seed)
    ids = [f"node-{i:05d}" for i in range(nodes)]
    n, t = 0, start
    while t < end:
        lake.write("telemetry", source, telemetry_batch(ids, [t], rng))
        n += 1
        t += every
    return n
