"""``predops demo``: the main job on the embedded default, end to end.

Each step is one function call on the workspace; later parts of predops add their steps
here (train, score, forecast, plan, serve). Progress goes to stderr.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import polars as pl

from pipelines.clock import SystemClock
from pipelines.feature_jobs import build_features
from pipelines.feature_store import FeatureStore
from pipelines.lake import Lake
from pipelines.settings import Settings
from pipelines.synthetic.run import SimConfig, simulate_to_lake

DEMO_START = datetime(2026, 1, 5, tzinfo=UTC)


def run_demo(
    settings: Settings, *, nodes: int, days: float, seed: int, progress: bool
) -> dict[str, Any]:
    """Simulate a fleet into the lake, build features, and report what is there."""
    lake = Lake(settings.lake_dir)
    out: dict[str, Any] = {"workspace": str(settings.workspace), "steps": {}}

    def step(name: str, fn: Callable[[], Any]) -> Any:
        if progress:
            print(f"[demo] {name} ...", file=sys.stderr, flush=True)
        t = time.perf_counter()
        result = fn()
        out["steps"][name] = round(time.perf_counter() - t, 2)
        return result

    cfg = SimConfig(
        nodes=nodes, days=days, interval=timedelta(minutes=5), seed=seed, start=DEMO_START
    )
    out["simulate"] = step(
        "simulate fleet and ingest into the lake",
        lambda: simulate_to_lake(lake, cfg, clock=SystemClock(), progress=progress),
    )
    as_of = lake.scan("telemetry").select(pl.col("ts").max()).collect().item()
    out["features"] = step(
        "build features (offline and online)",
        lambda: build_features(lake, FeatureStore(settings.features_dir), as_of=as_of),
    )
    out["lake"] = lake.stats()
    return out
