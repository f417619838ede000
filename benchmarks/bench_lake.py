"""Benchmark: a lake after 30 days of 5-minute ingests, read before and after compaction.

Builds a lake the way the scheduled pipeline fills it: one lake write (one commit, one
part file per day touched) per 5-minute ingest, synthetic telemetry with every telemetry
column for ``--nodes`` nodes over ``--days`` days (default 1,000 x 30 = 8,640 ingests,
8.64 M rows). Then reads two windows, each three ways, in the same run:

- ``today``: the reader as it was, listing every part file of the table and filtering
  the time column (``lake.scan(t).filter(...)``);
- ``pruned``: ``lake.scan(t, start=, end=)``: only the day partitions the window
  overlaps are listed, the filter goes into the scan (row-group statistics);
- ``compacted``: the same pruned read after the compaction job, run as scheduled just
  after the last ingest: the last day is still being written, so it stays as small
  files, as in a running cluster (the 30-minute tail lies in it).

Windows: the whole 30 days (a per-node aggregate of every column) and the last 30
minutes (the rows the scheduled cycle re-reads). For each: wall and CPU seconds (best
of ``--repeat``), files listed, their bytes, the bytes of row groups whose statistics
overlap the window (what a reader has to fetch), and ratios against ``today``. The
compaction runs in a child process: its wall / CPU seconds and its own peak RSS
(``VmHWM``). The page cache is warm for every read (the files were just written). The
machine is shared; CPU seconds are the steadier figure on a loaded machine.

    python -m benchmarks.bench_lake --json
    python -m benchmarks.bench_lake --nodes 100 --days 3 --json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq

from predops.pipelines.workspace.lake import Lake
from tests.pipelines.workspace.lake_ingests import COUNTERS, ingest_every

START = datetime(2026, 1, 5, tzinfo=UTC)
GAUGES = ("cpu_util_pct", "mem_used_bytes", "gpu_util_pct", "gpu_temp_c", "gpu_power_w")

_COMPACT = r"""
import json, resource, sys, time
from datetime import datetime
from predops.core.clock import FixedClock
from predops.pipelines.workspace.lake import Lake
from predops.pipelines.workspace.lake_maintenance import LakeSettings, maintain
t0 = time.perf_counter()
now = FixedClock(datetime.fromisoformat(sys.argv[2]))
report = maintain(Lake(sys.argv[1]), LakeSettings(), clock=now, tables=["telemetry"])
wall = time.perf_counter() - t0
r = resource.getrusage(resource.RUSAGE_SELF)
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")]
print(json.dumps({"wall_s": wall, "cpu_s": r.ru_utime + r.ru_stime,
                  "peak_rss_mib": int(hwm[0].split()[1]) / 1024 if hwm else None,
                  "partitions": len(report["compacted"]),
                  "files_replaced": sum(c["files_before"] for c in report["compacted"]),
                  "files_written": sum(c["files_after"] for c in report["compacted"])}))
"""
"""The compaction job alone in a fresh process (its peak RSS is its own)."""


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def whole_window(lf: pl.LazyFrame) -> pl.DataFrame:
    """A per-node aggregate of every telemetry column (reads them all)."""
    return (
        lf.group_by("node_id")
        .agg(
            pl.len().alias("samples"),
            *(pl.col(c).mean() for c in GAUGES),
            *(pl.col(c).max() for c in COUNTERS),
            pl.col("node_ready").not_().sum().alias("not_ready"),
        )
        .collect()
    )


def tail_window(lf: pl.LazyFrame) -> pl.DataFrame:
    return lf.collect()


def overlapping_bytes(files: list[Path], start: datetime, end: datetime) -> int:
    """Bytes (as stored, compressed) of the row groups whose time statistics overlap the
    window: what a reader that skips row groups by their statistics has to fetch."""
    total = 0
    for f in files:
        md = pq.read_metadata(f)
        ts = md.schema.names.index("ts")
        for i in range(md.num_row_groups):
            rg = md.row_group(i)
            st = rg.column(ts).statistics
            if st is not None and st.has_min_max:
                lo, hi = (v if v.tzinfo else v.replace(tzinfo=UTC) for v in (st.min, st.max))
                if hi < start or lo > end:
                    continue
            total += sum(rg.column(c).total_compressed_size for c in range(rg.num_columns))
    return total


def measure(
    root: Path, how: str, start: datetime, end: datetime, query: Callable[..., Any], repeat: int
) -> dict[str, Any]:
    best_wall = best_cpu = float("inf")
    rows = 0
    for _ in range(repeat):
        lake = Lake(root)  # a fresh reader: reads the commit log and lists the folders
        t0, c0 = time.perf_counter(), cpu_seconds()
        if how == "today":
            ts = pl.col("ts")
            lf = lake.scan("telemetry").filter((ts >= start) & (ts <= end))
        else:
            lf = lake.scan("telemetry", start=start, end=end)
        out = query(lf)
        best_wall = min(best_wall, time.perf_counter() - t0)
        best_cpu = min(best_cpu, cpu_seconds() - c0)
        rows = out.height if query is tail_window else int(out["samples"].sum())
    lake = Lake(root)
    files = (
        lake.files("telemetry") if how == "today" else lake.files("telemetry", start=start, end=end)
    )
    return {
        "wall_s": round(best_wall, 3),
        "cpu_s": round(best_cpu, 3),
        "rows": rows,
        "files_listed": len(files),
        "bytes_listed": sum(f.stat().st_size for f in files),
        "row_group_bytes_overlapping": overlapping_bytes(files, start, end),
    }


def ratios(a: dict[str, Any], b: dict[str, Any]) -> dict[str, float | None]:
    keys = ("wall_s", "cpu_s", "files_listed", "bytes_listed", "row_group_bytes_overlapping")
    return {k: round(a[k] / b[k], 4) if b[k] else None for k in keys}


def run(nodes: int, days: int, every_min: int, repeat: int) -> dict[str, Any]:
    root_dir = Path(tempfile.mkdtemp(prefix="predops-bench-lake-"))
    root = root_dir / "lake"
    load_before = os.getloadavg()
    try:
        end = START + timedelta(days=days)
        t0, c0 = time.perf_counter(), cpu_seconds()
        ingests = ingest_every(
            Lake(root), nodes=nodes, start=START, end=end, every=timedelta(minutes=every_min)
        )
        build = {
            "wall_s": round(time.perf_counter() - t0, 1),
            "cpu_s": round(cpu_seconds() - c0, 1),
        }
        last = end - timedelta(minutes=every_min)
        windows = {
            f"{days}d": (START, last, whole_window),
            "30m_tail": (last - timedelta(minutes=30), last, tail_window),
        }
        reads: dict[str, dict[str, Any]] = {}
        for name, (s, e, q) in windows.items():
            reads[name] = {
                "today": measure(root, "today", s, e, q, repeat),
                "pruned": measure(root, "pruned", s, e, q, repeat),
            }
        # The job as scheduled just after the last ingest: the last day is still being
        # written (not settled), so it stays as small files, as in a running cluster.
        proc = subprocess.run(
            [sys.executable, "-c", _COMPACT, str(root), end.isoformat()],
            capture_output=True,
            text=True,
            check=True,
            timeout=3600,
        )
        compaction = json.loads(proc.stdout.strip().splitlines()[-1])
        for name, (s, e, q) in windows.items():
            r = reads[name]
            r["compacted"] = measure(root, "compacted", s, e, q, repeat)
            r["same_rows"] = len({r[k]["rows"] for k in ("today", "pruned", "compacted")}) == 1
            r["compacted_vs_today"] = ratios(r["compacted"], r["today"])
            r["pruned_vs_today"] = ratios(r["pruned"], r["today"])
            r["compacted_vs_pruned"] = ratios(r["compacted"], r["pruned"])
        return {
            "benchmark": "lake",
            "nodes": nodes,
            "days": days,
            "ingest_every_min": every_min,
            "ingests": ingests,
            "telemetry_rows": nodes * ingests,
            "build": build,
            "compaction": compaction,
            "reads": reads,
            "repeat": repeat,
            "loadavg_before": [round(x, 2) for x in load_before],
            "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        }
    finally:
        shutil.rmtree(root_dir, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--every", type=int, default=5, help="minutes between ingests")
    ap.add_argument("--repeat", type=int, default=3, help="reads per measurement (best kept)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    out = run(args.nodes, args.days, args.every, args.repeat)
    print(json.dumps(out, indent=None if args.json else 2, sort_keys=True))


if __name__ == "__main__":
    main()
