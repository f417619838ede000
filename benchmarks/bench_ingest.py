"""Benchmark: simulate a fleet and write it into a fresh lake through the ingest path.

Prints one JSON object: telemetry rows, all rows, seconds (wall and CPU), rows/s and
peak RSS (MiB, ``ru_maxrss``) for ``simulate_to_lake`` (simulation, validation,
quarantine check, atomic Parquet writes) into a temporary lake; beside it, in the same
run, a reference that simulates the same telemetry and writes it with a bare
``write_parquet`` per block (the ratio is the cost of the ingest path); the machine's
load average before and after (the machine is shared; CPU seconds are the steadier
figure on a loaded machine). Default: 10,000 nodes x
1 day at 1-minute resolution = 14.4 M telemetry rows. Targets on a 2-core machine:
< 60 s and < 4 GiB peak RSS.

    python benchmarks/bench_ingest.py --json
    python benchmarks/bench_ingest.py --nodes 2000 --days 1 --interval 5m --json
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
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from predops.core.clock import FixedClock
from predops.pipelines.synthetic.run import SimConfig, build, simulate_to_lake
from predops.pipelines.workspace.lake import Lake
from predops.pipelines.workspace.timeparse import parse_duration

START = datetime(2026, 1, 5, tzinfo=UTC)


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def reference(cfg: SimConfig, root: Path) -> tuple[float, float]:
    """(wall, CPU) seconds to simulate the same telemetry and write it with a bare
    ``write_parquet`` per block: no validation, no key check, no partitioning."""
    t0, c0 = time.perf_counter(), cpu_seconds()
    sim = build(cfg)
    for i, frame in enumerate(sim.telemetry_blocks()):
        frame.write_parquet(root / f"ref-{i:05d}.parquet", compression="zstd")
    return time.perf_counter() - t0, cpu_seconds() - c0


def run(
    nodes: int,
    days: float,
    interval: str,
    seed: int,
    with_reference: bool,
    chunk_rows: int | None = None,
) -> dict[str, object]:
    cfg = SimConfig(
        nodes=nodes, days=days, interval=parse_duration(interval), seed=seed, start=START
    )
    if chunk_rows:
        cfg = replace(cfg, chunk_rows=chunk_rows)
    load_before = os.getloadavg()
    root = Path(tempfile.mkdtemp(prefix="predops-bench-"))
    try:
        t0, c0 = time.perf_counter(), cpu_seconds()
        summary = simulate_to_lake(
            Lake(root / "lake"), cfg, clock=FixedClock(cfg.end), progress=False
        )
        seconds = time.perf_counter() - t0
        cpu = cpu_seconds() - c0
        peak = peak_rss_mib()  # before the reference run
        lake_bytes = sum(f.stat().st_size for f in (root / "lake").rglob("*.parquet"))
        shutil.rmtree(root / "lake")
        ref = reference(cfg, root) if with_reference else None
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
        "chunk_rows": cfg.chunk_rows,
        "telemetry_rows": tel_rows,
        "rows": rows,
        "rows_by_table": {k: int(v["rows_written"]) for k, v in tables.items()},
        "rows_quarantined": summary["rows_quarantined"],
        "seconds": round(seconds, 2),
        "cpu_seconds": round(cpu, 2),
        "rows_per_s": round(rows / seconds),
        "telemetry_rows_per_s": round(tel_rows / seconds),
        "peak_rss_mib": round(peak, 1),
        # Reference: the same simulation written with bare write_parquet per block.
        "reference_seconds": round(ref[0], 2) if ref else None,
        "reference_cpu_seconds": round(ref[1], 2) if ref else None,
        "ingest_over_reference_cpu": round(cpu / ref[1], 2) if ref else None,
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
    ap.add_argument(
        "--no-reference", action="store_true", help="skip the bare write_parquet reference run"
    )
    ap.add_argument(
        "--chunk-rows",
        type=int,
        default=None,
        help="telemetry rows per lake write (default: SimConfig's)",
    )
    args = ap.parse_args(argv)
    out = run(
        args.nodes, args.days, args.interval, args.seed, not args.no_reference, args.chunk_rows
    )
    print(json.dumps(out, sort_keys=True) if args.json else json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
