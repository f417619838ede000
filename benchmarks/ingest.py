"""Benchmark: simulate a fleet and write it into a fresh lake through the ingest path.

Prints one JSON object: telemetry rows, all rows, seconds, rows/s and peak RSS (MiB,
``ru_maxrss``) for ``simulate_to_lake`` (simulation, validation, quarantine check,
atomic Parquet writes) into a temporary lake; the machine's load average before and
after (the machine is shared; a loaded machine is slower). Default: 10,000 nodes x
1 day at 1-minute resolution = 14.4 M telemetry rows. Targets on a 2-core machine:
< 60 s and < 4 GiB peak RSS.

    python benchmarks/ingest.py --json
    python benchmarks/ingest.py --nodes 2000 --days 1 --interval 5m --json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from core.clock import FixedClock
from pipelines.cli import parse_duration
from pipelines.lake import Lake
from pipelines.synthetic.run import SimConfig, simulate_to_lake

START = datetime(2026, 1, 5, tzinfo=UTC)


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(nodes: int, days: float, interval: str, seed: int) -> dict[str, object]:
    cfg = SimConfig(
        nodes=nodes, days=days, interval=parse_duration(interval), seed=seed, start=START
    )
    load_before = os.getloadavg()
    root = Path(tempfile.mkdtemp(prefix="predops-bench-"))
    try:
        t0 = time.perf_counter()
        summary = simulate_to_lake(
            Lake(root / "lake"), cfg, clock=FixedClock(cfg.end), progress=False
        )
        seconds = time.perf_counter() - t0
        lake_bytes = sum(f.stat().st_size for f in (root / "lake").rglob("*.parquet"))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    tables = summary["tables"]
    assert isinstance(tables, dict)
    rows = sum(int(t["rows_written"]) for t in tables.values())
    tel_rows = int(tables["telemetry"]["rows_written"])
    return {
        "benchmark": "simulate_to_lake",
        "nodes": nodes,
        "days": days,
        "interval": interval,
        "telemetry_rows": tel_rows,
        "rows": rows,
        "rows_by_table": {k: int(v["rows_written"]) for k, v in tables.items()},
        "rows_quarantined": summary["rows_quarantined"],
        "seconds": round(seconds, 2),
        "rows_per_s": round(rows / seconds),
        "telemetry_rows_per_s": round(tel_rows / seconds),
        "peak_rss_mib": round(peak_rss_mib(), 1),
        "lake_mib": round(lake_bytes / 2**20, 1),
        "targets": {"seconds": 60, "peak_rss_mib": 4096},
        "cpus": os.cpu_count(),
        "load_avg_1m_before": round(load_before[0], 2),
        "load_avg_1m_after": round(os.getloadavg()[0], 2),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--days", type=float, default=1.0)
    ap.add_argument("--interval", default="1m")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", action="store_true", help="print one JSON object (default)")
    args = ap.parse_args(argv)
    out = run(args.nodes, args.days, args.interval, args.seed)
    print(json.dumps(out, sort_keys=True) if args.json else json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
