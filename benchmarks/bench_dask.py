"""Benchmark: the Dask paths against the local ones, on one simulated fleet.

Prints one JSON object. Per job (failure training, batch scoring, the demand backtest),
wall seconds, CPU seconds (the client process plus every worker's, read from the
workers themselves) and peak RSS (client; largest worker) of the local engine and of a
``LocalCluster`` of ``--workers`` single-threaded processes, their ratio
(``dask_over_local_wall``) and whether the results were equal. Cluster start-up is
reported apart. Workers run with one thread each and Dask sets their BLAS / OpenMP
threads to one, while the local engine uses the machine's defaults. On one machine the
cluster adds pickling and process hops and gains no cores; the point of the Dask paths
is the second machine, so read the ratio as their overhead.

    python benchmarks/bench_dask.py --nodes 100 --days 12 --json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any


def _self_usage() -> tuple[float, float]:
    """CPU seconds and peak RSS (MiB) of this process. The peak is the kernel's
    high-water mark of this process's own memory: a worker's ``ru_maxrss`` would start
    at what the process it was forked from held."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    peak = r.ru_maxrss / 1024
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                peak = int(line.split()[1]) / 1024
    return r.ru_utime + r.ru_stime, peak


def _workers_usage(client: Any) -> dict[str, tuple[float, float]]:
    out: dict[str, tuple[float, float]] = client.run(_self_usage)
    return out


def _measure(fn: Callable[[], Any], client: Any = None) -> tuple[Any, dict[str, float]]:
    before = _workers_usage(client) if client is not None else {}
    cpu0, _ = _self_usage()
    t0 = time.perf_counter()
    result = fn()
    wall = time.perf_counter() - t0
    cpu1, rss = _self_usage()
    fig = {
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu1 - cpu0, 2),
        "client_peak_rss_mib": round(rss),
    }
    if client is not None:
        after = _workers_usage(client)
        fig["cpu_s"] = round(fig["cpu_s"] + sum(after[w][0] - before[w][0] for w in after), 2)
        fig["worker_peak_rss_mib"] = round(max(v[1] for v in after.values()))
    return result, fig


def _strip(report: dict[str, Any]) -> dict[str, Any]:
    drop = {"seconds", "version", "alias", "engine", "workers", "sample"}
    out = {k: v for k, v in report.items() if k not in drop}
    if "metrics" in out and isinstance(out["metrics"], dict):
        out["metrics"] = {k: v for k, v in out["metrics"].items() if k != "fit_seconds"}
    out.pop("fit_seconds", None)
    out.pop("predict_seconds", None)
    return out


def run(nodes: int, days: float, workers: int) -> dict[str, Any]:
    from distributed import Client, LocalCluster

    from predops.core.clock import FixedClock
    from predops.features.definitions import NodeFeatureSpec
    from predops.models.demand.config import HOURLY_CONFIG
    from predops.pipelines.jobs import distributed as dj
    from predops.pipelines.jobs import failure as fj
    from predops.pipelines.jobs.demand import evaluate, load_source, with_horizon
    from predops.pipelines.jobs.features import build_features
    from predops.pipelines.synthetic.run import SimConfig, simulate_to_lake
    from predops.pipelines.workspace.feature_store import FeatureStore
    from predops.pipelines.workspace.lake import Lake
    from predops.pipelines.workspace.settings import Settings

    start = datetime(2026, 2, 2, tzinfo=UTC)
    out: dict[str, Any] = {"nodes": nodes, "days": days, "workers": workers}
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{ws}/mlflow.db"
        cfg = SimConfig(
            nodes=nodes,
            days=days,
            interval=timedelta(minutes=15),
            seed=5,
            start=start,
            failure_rate_scale=20.0,
        )
        lake = Lake(ws / "lake")
        simulate_to_lake(lake, cfg, clock=FixedClock(cfg.end), progress=False)
        spec = NodeFeatureSpec(sample_interval=cfg.interval)
        build_features(lake, FeatureStore(ws / "features"), as_of=cfg.end, spec=spec)
        settings = Settings(workspace=ws, shared_data=ws)
        t0 = time.perf_counter()
        with (
            LocalCluster(
                n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
            ) as cluster,
            Client(cluster) as client,
        ):
            out["cluster_start_s"] = round(time.perf_counter() - t0, 2)
            local, lf = _measure(lambda: fj.train(settings, backtest_days=3.0))
            dask, df = _measure(
                lambda: dj.train_failure(settings, client, backtest_days=3.0), client
            )
            out["train_failure"] = {
                "rows": local["training_rows"],
                "local": lf,
                "dask": df,
                "dask_over_local_wall": round(df["wall_s"] / lf["wall_s"], 2),
                "equal": _strip(local) == _strip(dask),
            }
            half = local["training_rows"] // 2
            sampled, sf = _measure(
                lambda: dj.train_failure(
                    settings, client, backtest_days=3.0, max_rows=half, register=False
                ),
                client,
            )
            out["train_failure_sampled"] = {"sample": sampled["sample"], "dask": sf}
            a, sl = _measure(lambda: fj.score_online(settings, as_of=cfg.end, reasons_for=200))
            b, sd = _measure(
                lambda: fj.score_online(settings, as_of=cfg.end, reasons_for=200, client=client),
                client,
            )
            out["score_failure"] = {
                "nodes": a.scored,
                "local": sl,
                "dask": sd,
                "dask_over_local_wall": round(sd["wall_s"] / sl["wall_s"], 2),
                "equal": a.risks == b.risks,
            }
            data = load_source(
                "synthetic", None, clock=FixedClock(cfg.end), synthetic={"nodes": 40, "days": 10}
            )
            kw: dict[str, Any] = {
                "config": with_horizon(HOURLY_CONFIG, 24),
                "cutoffs": 4,
                "models": ("seasonal_naive_24", "ets"),
            }
            el, dl = _measure(lambda: evaluate(data, **kw))
            ed, dd = _measure(lambda: evaluate(data, client=client, **kw), client)
            out["eval_demand"] = {
                "models": list(kw["models"]),
                "cutoffs": kw["cutoffs"],
                "series": el["series"],
                "local": dl,
                "dask": dd,
                "dask_over_local_wall": round(dd["wall_s"] / dl["wall_s"], 2),
                "equal": json.dumps(_strip(el), sort_keys=True, default=str)
                == json.dumps(_strip(ed), sort_keys=True, default=str),
            }
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--days", type=float, default=12)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", action="store_true", help="print one JSON object (the default)")
    args = ap.parse_args()
    print(json.dumps(run(args.nodes, args.days, args.workers)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
