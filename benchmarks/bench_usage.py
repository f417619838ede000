"""Benchmark: the usage forecaster's fit and predict on a large fleet in bounded memory.

Writes a seeded synthetic history (``--nodes`` x ``--days`` of 5-minute CPU usage,
daily cycles, per-node levels and bursts) to Parquet block by block (never whole in
memory), then fits :class:`models.usage.forecaster.UsageForecaster` on a lazy scan of
it and predicts every node. Prints one JSON object: rows, the bytes the history would
take held whole as a polars frame (the named peer: what an all-in-memory fit would hold
before its first feature), fit / predict wall and CPU seconds, the process's peak RSS
after each stage, and ``peak_rss_over_whole_history`` (< 1: the fit never held the
history whole).

    python benchmarks/bench_usage.py --nodes 10000 --days 8 --json
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from predops.models.usage.forecaster import UsageForecaster

T0 = datetime(2026, 1, 5, tzinfo=UTC)
STEP = timedelta(minutes=5)
BLOCK = 500


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def write_history(folder: Path, nodes: int, days: float, seed: int) -> tuple[int, int]:
    """Parquet files of the history, BLOCK nodes each; (rows, bytes held whole)."""
    rng = np.random.default_rng(seed)
    b = int(days * 288)
    ts = pl.datetime_range(T0, T0 + (b - 1) * STEP, STEP, eager=True, time_zone="UTC")
    t = np.arange(b)
    rows = size = 0
    for lo in range(0, nodes, BLOCK):
        n = min(BLOCK, nodes - lo)
        level = rng.uniform(0.05, 0.6, n)[:, None]
        amp = rng.uniform(0.0, 0.3, n)[:, None]
        phase = rng.uniform(0, 1, n)[:, None]
        u = level + amp * np.sin(2 * np.pi * (t[None, :] / 288 + phase))
        u = u + rng.gamma(1.5, 0.02, (n, b)) + (rng.random((n, b)) < 0.01) * 0.3
        u = np.clip(u, 0, 1) * 64.0
        df = pl.DataFrame(
            {
                "series_id": np.repeat([f"node-{lo + i:05d}" for i in range(n)], b),
                "ts": pl.concat([ts] * n),
                "usage": u.ravel(),
                "max": np.minimum(u * 1.3, 64.0).ravel(),
                "allocatable": np.full(n * b, 64.0),
            }
        )
        df.write_parquet(folder / f"part-{lo // BLOCK:04d}.parquet")
        rows += df.height
        size += df.estimated_size()
    return rows, size


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--days", type=float, default=8)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--chunk-series", type=int, default=256)
    ap.add_argument("--n-estimators", type=int, default=100)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    out: dict[str, Any] = {"nodes": a.nodes, "days": a.days, "chunk_series": a.chunk_series}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        t = time.perf_counter()
        rows, whole = write_history(folder, a.nodes, a.days, a.seed)
        out["write_s"] = time.perf_counter() - t
        out["rows"] = rows
        out["whole_history_mb"] = whole / 2**20
        out["rss_after_write_mb"] = _rss_mb()
        scan = pl.scan_parquet(folder / "*.parquet")
        model = UsageForecaster(
            n_estimators=a.n_estimators, chunk_series=a.chunk_series, n_jobs=a.threads
        )
        t, c = time.perf_counter(), time.process_time()
        model.fit(scan)
        out["fit"] = {
            "wall_s": time.perf_counter() - t,
            "cpu_s": time.process_time() - c,
            "train_rows": model.n_train_rows_,
            "rss_mb": _rss_mb(),
        }
        t, c = time.perf_counter(), time.process_time()
        pred = model.predict(scan)
        out["predict"] = {
            "wall_s": time.perf_counter() - t,
            "cpu_s": time.process_time() - c,
            "nodes": pred.height,
            "rss_mb": _rss_mb(),
        }
    out["peak_rss_mb"] = _rss_mb()
    out["peak_rss_over_whole_history"] = out["peak_rss_mb"] / out["whole_history_mb"]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
