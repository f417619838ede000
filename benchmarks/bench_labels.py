"""Benchmark: the labeller job over N nodes x D days of 5-minute telemetry in a lake.

Prints one JSON object: telemetry rows, and for each chunk size the seconds, rows/s and
peak RSS of ``label_lake`` (each run in a fresh process, peak from ``VmHWM``), side by
side with one chunk holding the whole fleet (what an unchunked job would hold) as a
ratio. Telemetry carries NotReady intervals and DBE / XID counter steps, so every rule
has work; the lake is written straight through ``Lake.write`` in blocks of nodes.

    python benchmarks/bench_labels.py --nodes 2000 --days 7 --json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl

from predops.core.schemas import TELEMETRY
from predops.pipelines.workspace.lake import Lake

T0 = datetime(2026, 3, 1, tzinfo=UTC)
STEP = timedelta(minutes=5)
BLOCK = 500

CHILD = """
import json, sys, time
from datetime import UTC, datetime
from pathlib import Path
from predops.core.clock import FixedClock
from predops.pipelines.jobs.labels import label_lake
from predops.pipelines.workspace.lake import Lake
t = time.perf_counter()
r = label_lake(Lake(Path(sys.argv[1])), clock=FixedClock(datetime(2030, 1, 1, tzinfo=UTC)),
               chunk_nodes=int(sys.argv[2]), write=False)
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")]
print(json.dumps({"seconds": round(time.perf_counter() - t, 2), "failures": r["failures"],
                  "chunks": r["chunks"], "peak_rss_mib": int(hwm[0].split()[1]) / 1024}))
"""


def block(lo: int, hi: int, steps: int, rng: np.random.Generator) -> pl.DataFrame:
    """Telemetry of nodes [lo, hi): one NotReady stretch per node-week, DBE / XID steps."""
    n = hi - lo
    ready = np.ones((n, steps), dtype=bool)
    for i in range(n):
        for _ in range(rng.poisson(steps / 2016)):
            a = int(rng.integers(0, steps))
            ready[i, a : a + int(rng.integers(1, 24))] = False
    dbe = np.cumsum(rng.random((n, steps)) < 0.0005, axis=1)
    xid = np.cumsum(rng.random((n, steps)) < 0.002, axis=1)
    ts = np.datetime64(T0.replace(tzinfo=None), "us") + (
        np.arange(steps) * int(STEP.total_seconds() * 1e6)
    ).astype("timedelta64[us]")
    ids = np.array([f"n{i:05d}" for i in range(lo, hi)])
    frame = pl.DataFrame(
        {
            "ts": np.tile(ts, n),
            "node_id": np.repeat(ids, steps),
            "node_ready": ready.ravel(),
            "ecc_dbe_total": dbe.ravel().astype(np.int64),
            "xid_errors_total": xid.ravel().astype(np.int64),
        }
    ).with_columns(pl.col("ts").dt.replace_time_zone("UTC"))
    missing = [c for c in TELEMETRY.names if c not in frame.columns]
    frame = frame.with_columns(
        [pl.lit(None).cast(TELEMETRY.column(c).dtype).alias(c) for c in missing]
    )
    return frame.select(TELEMETRY.names).cast(TELEMETRY.polars_schema())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--days", type=float, default=7)
    ap.add_argument("--chunks", default="250", help="Comma-separated chunk sizes.")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    steps = int(args.days * 86400 / STEP.total_seconds())
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        lake = Lake(Path(tmp) / "lake")
        t0 = time.perf_counter()
        for lo in range(0, args.nodes, BLOCK):
            lake.write("telemetry", "bench", block(lo, min(lo + BLOCK, args.nodes), steps, rng))
        rows = args.nodes * steps
        out: dict[str, object] = {
            "nodes": args.nodes,
            "days": args.days,
            "telemetry_rows": rows,
            "write_seconds": round(time.perf_counter() - t0, 1),
            "runs": {},
        }
        sizes = [int(s) for s in args.chunks.split(",")] + [args.nodes]
        runs: dict[str, dict[str, float]] = {}
        for size in sizes:
            res = subprocess.run(
                [sys.executable, "-c", CHILD, str(lake.root), str(size)],
                check=True,
                capture_output=True,
                text=True,
            )
            r = json.loads(res.stdout.strip().splitlines()[-1])
            r["rows_per_s"] = round(rows / max(r["seconds"], 1e-9))
            r["rows_per_chunk"] = rows * min(size, args.nodes) // args.nodes
            runs[str(size) if size < args.nodes else f"{size} (one chunk)"] = r
        out["runs"] = runs
        whole = runs[f"{args.nodes} (one chunk)"]["peak_rss_mib"]
        first = runs[str(sizes[0])]["peak_rss_mib"] if sizes[0] < args.nodes else whole
        out["peak_rss_ratio_chunked_vs_one_chunk"] = round(first / whole, 3)
    print(json.dumps(out, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
