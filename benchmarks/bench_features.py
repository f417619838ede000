"""Benchmark: the full node feature set over N nodes x H hours of 1-minute telemetry.

Prints one JSON object: rows, seconds, rows/s and peak RSS of predops' polars path; in
the same run on the same input, the time of a straightforward pandas groupby-rolling
implementation of the same window features (``speedup_vs_pandas``); and the time to
read the online store for every node.

    python benchmarks/bench_features.py --nodes 10000 --hours 24 --json
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl

from predops.core.schemas import INVENTORY, TELEMETRY
from predops.features.definitions import COUNTERS, NodeFeatureSpec, node_feature_set
from predops.features.frames import node_features
from predops.pipelines.workspace.feature_store import FeatureStore

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def make_input(nodes: int, hours: int, seed: int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
    """1-minute telemetry (1 % of samples dropped) and a matching inventory."""
    rng = np.random.default_rng(seed)
    steps = hours * 60
    n = nodes * steps
    node_idx = np.repeat(np.arange(nodes, dtype=np.int64), steps)
    minute = np.tile(np.arange(1, steps + 1, dtype=np.int64), nodes)
    keep = rng.random(n) >= 0.01
    node_idx, minute = node_idx[keep], minute[keep]
    m = len(minute)
    ts = np.datetime64(T0.replace(tzinfo=None), "us") + minute.astype("timedelta64[m]").astype(
        "timedelta64[us]"
    )
    ids = np.array([f"n{i:05d}" for i in range(nodes)])
    cols: dict[str, object] = {
        "ts": ts,
        "node_id": ids[node_idx],
        "cpu_util_pct": rng.uniform(0, 100, m).astype(np.float32),
        "mem_used_bytes": rng.integers(1 << 32, 1 << 38, m),
        "gpu_util_pct": rng.uniform(0, 100, m).astype(np.float32),
        "gpu_temp_c": (60 + rng.normal(0, 3, m)).astype(np.float32),
        "gpu_power_w": rng.uniform(500, 5000, m).astype(np.float32),
    }
    for c in COUNTERS:
        inc = rng.poisson(0.001, m)
        cs = np.cumsum(inc)
        first = np.searchsorted(node_idx, np.arange(nodes))
        base = cs[first] - inc[first]
        cols[c] = cs - base[node_idx]
    cols["node_ready"] = rng.random(m) > 0.001
    tel = pl.DataFrame(cols).with_columns(pl.col("ts").dt.replace_time_zone("UTC"))
    tel = tel.select(TELEMETRY.names).cast(TELEMETRY.polars_schema())
    inv = pl.DataFrame(
        {
            "ts": [T0] * nodes,
            "node_id": ids,
            "pool": [f"pool{i % 8}" for i in range(nodes)],
            "sku": "h100x8",
            "gpu_model": "H100",
            "gpus": 8,
            "cpu_milli": 192000,
            "memory_mib": 2 << 20,
            "numa_nodes": 2,
            "nvlink_domain": None,
            "region": "r",
            "zone": "z",
            "spine": [f"s{i // 400}" for i in range(nodes)],
            "rack": [f"r{i // 20}" for i in range(nodes)],
            "installed_at": [T0 - timedelta(days=100)] * nodes,
        }
    ).cast(INVENTORY.polars_schema())
    return tel, inv


def pandas_features(tel: pl.DataFrame, spec: NodeFeatureSpec) -> pd.DataFrame:
    """The window features the obvious pandas way: groupby(node).rolling(time window)
    at every sample, then the rows at bucket ends. Gauge mean / max / std / slope and
    counter increases over every window, and sample counts."""
    df = tel.select("node_id", "ts", *spec.gauges, *spec.counters).to_pandas()
    df = df.sort_values(["node_id", "ts"]).reset_index(drop=True)
    df["t_h"] = (df["ts"] - df["ts"].min()).dt.total_seconds() / 3600
    g = df.groupby("node_id", sort=False)
    for c in spec.counters:
        prev = g[c].shift(1)
        d = df[c] - prev
        df[f"{c}__d"] = np.where(prev.isna(), 0.0, np.where(d < 0, df[c], d))
    for x in spec.gauges:
        df[f"{x}__tx"] = df["t_h"] * df[x]
        df[f"{x}__tt"] = np.where(df[x].notna(), df["t_h"] ** 2, np.nan)
        df[f"{x}__t"] = np.where(df[x].notna(), df["t_h"], np.nan)
    # Rows at bucket ends (the grid our features live on); keep only those of every
    # rolling result, so memory stays bounded.
    on_grid = ((df["ts"].dt.minute % 15 == 0) & (df["ts"].dt.second == 0)).to_numpy()
    out: dict[str, np.ndarray] = {}

    def keep(name: str, series: pd.Series) -> None:
        out[name] = series.to_numpy()[on_grid]

    for w in spec.windows:
        r = df.groupby("node_id", sort=False).rolling(f"{int(w.total_seconds())}s", on="ts")
        for x in spec.gauges:
            mean = r[x].mean()
            keep(f"{x}_mean_{w}", mean)
            keep(f"{x}_max_{w}", r[x].max())
            keep(f"{x}_std_{w}", r[x].std())
            st, stt, stx = r[f"{x}__t"].mean(), r[f"{x}__tt"].mean(), r[f"{x}__tx"].mean()
            keep(f"{x}_slope_{w}", (stx - st * mean) / (stt - st * st))
        for c in spec.counters:
            keep(f"{c}_inc_{w}", r[f"{c}__d"].sum())
        keep(f"count_{w}", r[spec.gauges[0]].count())
    res = pd.DataFrame(out)
    res.insert(0, "ts", df["ts"].to_numpy()[on_grid])
    res.insert(0, "node_id", df["node_id"].to_numpy()[on_grid])
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--hours", type=int, default=24)
    ap.add_argument("--skip-pandas", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    spec = NodeFeatureSpec()
    tel, inv = make_input(args.nodes, args.hours)
    ev = pl.DataFrame(
        schema={
            "node_id": pl.String,
            "kind": pl.String,
            "at": pl.Datetime("us", "UTC"),
            "cause": pl.String,
            "detail": pl.String,
        }
    )
    cutoff = T0 + timedelta(hours=args.hours)
    gc.collect()
    rss_before = peak_rss_mib()
    t, cpu = time.perf_counter(), time.process_time()
    feats = node_features(tel.lazy(), inv.lazy(), ev.lazy(), cutoff=cutoff, spec=spec).collect()
    polars_s, polars_cpu = time.perf_counter() - t, time.process_time() - cpu
    rss_after = peak_rss_mib()
    result: dict[str, object] = {
        "nodes": args.nodes,
        "hours": args.hours,
        "input_rows": tel.height,
        "output_rows": feats.height,
        "features": len(node_feature_set(spec).names),
        "seconds": round(polars_s, 2),
        "cpu_seconds": round(polars_cpu, 2),
        "rows_per_s": round(tel.height / polars_s),
        "peak_rss_mib": round(rss_after),
        "peak_rss_mib_before_features": round(rss_before),
        "cpus": os.cpu_count(),
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }
    latest = feats.filter(pl.col("ts") == feats["ts"].max())
    feats_sample = feats.select("node_id", "ts", "gpu_temp_c__mean_1h")
    with tempfile.TemporaryDirectory() as d:
        store = FeatureStore(Path(d))
        store.materialise_online(
            "node", latest, as_of=cutoff, feature_set_hash="bench", key="node_id"
        )
        times = []
        for _ in range(5):
            t = time.perf_counter()
            got = store.read_online("node", now=cutoff, max_age=timedelta(minutes=10))
            times.append(time.perf_counter() - t)
        result["online_read_nodes"] = got.frame.height
        result["online_read_ms"] = round(1000 * min(times), 2)
        result["online_read_ms_median"] = round(1000 * sorted(times)[2], 2)
    del feats
    gc.collect()
    if not args.skip_pandas:
        t, cpu = time.perf_counter(), time.process_time()
        pdf = pandas_features(tel, spec)
        pandas_s, pandas_cpu = time.perf_counter() - t, time.process_time() - cpu
        result["pandas_cpu_seconds"] = round(pandas_cpu, 2)
        result["pandas_seconds"] = round(pandas_s, 2)
        result["pandas_output_rows"] = len(pdf)
        result["pandas_features"] = pdf.shape[1]
        result["speedup_vs_pandas"] = round(pandas_s / polars_s, 2)
        # Same features: compare one on the rows both have.
        ours = feats_sample.to_pandas()
        both = ours.merge(pdf[["node_id", "ts", "gpu_temp_c_mean_1:00:00"]], on=["node_id", "ts"])
        diff = (both["gpu_temp_c__mean_1h"] - both["gpu_temp_c_mean_1:00:00"]).abs().max()
        result["check_rows_compared"] = len(both)
        result["check_max_abs_diff_gpu_temp_c_mean_1h"] = float(diff)
    print(json.dumps(result) if args.json else json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
