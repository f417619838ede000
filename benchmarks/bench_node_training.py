"""Benchmark: the node training frame built from a real lake and the failure model trained
from it, at fleet size, in bounded memory; today's way (the frame collected whole) as the
named peer where it fits.

What runs, each part in its own process so each peak RSS is its own:

1. ``simulate``: a seeded synthetic fleet of ``--nodes`` x ``--days`` of 5-minute
   telemetry (the full metric set) into a lake;
2. ``build``: the node training frame (features + labels) as of the lake's last sample,
   every hour of the history, by partitions of nodes streamed to disk, under the default
   negative-sampling rule (``jobs.features.sampling_rule``);
3. ``train``: the production failure model (``jobs.failure.train``, not registered) from
   that on-disk frame;
4. the peer at ``--peer-nodes`` x ``--peer-days`` (default 2,000 x 14, which today's way
   fits): the same simulate, then ``build`` + ``train`` both ways: ``partitioned``
   (default rule) and ``whole`` (today's: the frame collected in memory, every row).
   Ratios are whole / partitioned. When the peer's size is the fleet's, both ways run on
   the fleet's lake.

Prints one JSON object: per part, wall and CPU seconds and peak RSS (MiB), rows,
partitions, the sampling rule, boosting rounds and the backtest PR-AUC (24 h).

    python -m benchmarks.bench_node_training --nodes 10000 --days 30 --json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

START = datetime(2026, 1, 5, tzinfo=UTC)


def _usage() -> dict[str, float]:
    me = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "cpu_seconds": round(me.ru_utime + me.ru_stime, 1),
        "peak_rss_mib": round(me.ru_maxrss / 1024),
    }


def part_simulate(ws: Path, nodes: int, days: float, seed: int) -> dict[str, Any]:
    from predops.core.clock import FixedClock
    from predops.pipelines.synthetic.run import SimConfig, simulate_to_lake
    from predops.pipelines.workspace.lake import Lake

    cfg = SimConfig(nodes=nodes, days=days, interval=timedelta(minutes=5), seed=seed, start=START)
    t = time.perf_counter()
    rep = simulate_to_lake(Lake(ws / "lake"), cfg, clock=FixedClock(cfg.end), progress=False)
    return {
        "seconds": round(time.perf_counter() - t, 1),
        "telemetry_rows": rep["tables"]["telemetry"]["rows_written"],
        **_usage(),
    }


def part_build(ws: Path, variant: str, negative_rate: float | None) -> dict[str, Any]:
    import polars as pl

    from predops.features.definitions import NodeFeatureSpec
    from predops.features.frames import DEFAULT_HORIZONS
    from predops.pipelines.jobs.features import (
        NODE_TRAINING,
        _node_training_in_memory,
        sampling_rule,
    )
    from predops.pipelines.jobs.node_frame import build_node_training
    from predops.pipelines.workspace.feature_store import FeatureStore
    from predops.pipelines.workspace.lake import Lake

    lake = Lake(ws / "lake")
    store = FeatureStore(ws / variant / "features")
    as_of = lake.scan("telemetry").select(pl.col("ts").max()).collect().item()
    every = timedelta(hours=1)
    spec = NodeFeatureSpec()
    rule = sampling_rule(
        lake, as_of=as_of, since=None, eval_every=every, negative_rate=negative_rate
    )
    t = time.perf_counter()
    if variant == "whole":
        rep = _node_training_in_memory(
            lake,
            store,
            as_of=as_of,
            spec=spec,
            eval_every=every,
            since=None,
            engine="local",
            scheduler=None,
            horizons=DEFAULT_HORIZONS,
            sampling=rule,
        )
    else:
        rep = build_node_training(
            lake,
            store,
            NODE_TRAINING,
            as_of=as_of,
            spec=spec,
            eval_every=every,
            since=None,
            horizons=DEFAULT_HORIZONS,
            sampling=rule,
        )
    assert rep is not None, "the lake has no telemetry"
    return {
        "seconds": round(time.perf_counter() - t, 1),
        "rows": rep["rows"],
        "columns": rep["columns"],
        "nodes": rep["nodes"],
        "positive_rate": rep["positive_rate"],
        "partitioning": rep.get("partitioning"),
        "negative_sampling": rep["negative_sampling"],
        "file_mib": round(Path(rep["path"]).stat().st_size / 2**20),
        **_usage(),
    }


def part_train(ws: Path, variant: str) -> dict[str, Any]:
    from predops.pipelines.jobs import failure as fj
    from predops.pipelines.workspace.settings import Settings

    settings = Settings(workspace=ws / variant, shared_data=ws)
    t = time.perf_counter()
    rep = fj.train(settings, register=False)
    m = rep["metrics"]
    return {
        "seconds": round(time.perf_counter() - t, 1),
        "training_rows": rep["training_rows"],
        "negative_sample_rate": rep["negative_sample_rate"],
        "boosting_rounds": rep["params"]["best_iterations"],
        "backtest_pr_auc_24h": round(m.get("pr_auc_24h", float("nan")), 4),
        "backtest_positives_24h": m.get("positives_24h"),
        **_usage(),
    }


def _run(args: list[str]) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "benchmarks.bench_node_training", *args]
    done = subprocess.run(cmd, check=True, capture_output=True, text=True)
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def _fleet(
    ws: Path, nodes: int, days: float, seed: int, variants: list[str], rate: float | None
) -> dict[str, Any]:
    base = ["--workspace", str(ws), "--seed", str(seed)]
    if rate is not None:
        base += ["--negative-rate", str(rate)]
    out: dict[str, Any] = {"nodes": nodes, "days": days}
    if not (ws / "lake").exists():
        out["simulate"] = _run(
            ["--part", "simulate", "--nodes", str(nodes), "--days", str(days), *base]
        )
    for v in variants:
        b = _run(["--part", "build", "--variant", v, *base])
        tr = _run(["--part", "train", "--variant", v, *base])
        out[v] = {
            "build": b,
            "train": tr,
            "seconds": round(b["seconds"] + tr["seconds"], 1),
            "peak_rss_mib": max(b["peak_rss_mib"], tr["peak_rss_mib"]),
        }
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--days", type=float, default=30)
    ap.add_argument("--peer-nodes", type=int, default=2_000)
    ap.add_argument("--peer-days", type=float, default=14)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--workspace", type=Path, help="Reuse (or fill) this workspace's lake.")
    ap.add_argument("--part", choices=("all", "simulate", "build", "train"), default="all")
    ap.add_argument("--variant", choices=("partitioned", "whole"), default="partitioned")
    ap.add_argument("--skip-peer", action="store_true")
    ap.add_argument(
        "--negative-rate",
        type=float,
        default=None,
        help="The partitioned build's sampling rate (default: the default rule).",
    )
    ap.add_argument("--json", action="store_true", help="Print one JSON object.")
    a = ap.parse_args()
    if a.part == "simulate":
        result: dict[str, Any] = part_simulate(a.workspace, a.nodes, a.days, a.seed)
    elif a.part == "build":
        rate = 1.0 if a.variant == "whole" else a.negative_rate
        result = part_build(a.workspace, a.variant, rate)
    elif a.part == "train":
        result = part_train(a.workspace, a.variant)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            root = a.workspace or Path(tmp)
            result = {"cpus": os.cpu_count()}
            same = (a.peer_nodes, a.peer_days) == (a.nodes, a.days)
            both = ["partitioned", "whole"] if same and not a.skip_peer else ["partitioned"]
            result["fleet"] = _fleet(root / "fleet", a.nodes, a.days, a.seed, both, a.negative_rate)
            if not a.skip_peer:
                peer = (
                    result["fleet"]
                    if same
                    else _fleet(
                        root / "peer", a.peer_nodes, a.peer_days, a.seed, ["partitioned", "whole"]
                    )
                )
                p, w = peer["partitioned"], peer["whole"]
                peer["whole_over_partitioned"] = {
                    "seconds": round(w["seconds"] / p["seconds"], 2),
                    "peak_rss": round(w["peak_rss_mib"] / p["peak_rss_mib"], 2),
                    "build_peak_rss": round(
                        w["build"]["peak_rss_mib"] / p["build"]["peak_rss_mib"], 2
                    ),
                }
                if not same:
                    result["peer"] = peer
    print(json.dumps(result, sort_keys=True, indent=None if a.json else 2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
