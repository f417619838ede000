"""Small telemetry / inventory / events frames for feature tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl

from predops.core.schemas import EVENTS, INVENTORY, TELEMETRY
from predops.features.definitions import COUNTERS

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def telemetry(
    rng: np.random.Generator,
    *,
    nodes: int = 4,
    hours: float = 30,
    step_s: int = 60,
    drop: float = 0.1,
    start: datetime = T0,
) -> pl.DataFrame:
    """Irregular telemetry: jittered sample times, dropped samples, null gauges, counter
    resets and occasional not-ready samples."""
    frames = []
    n_steps = int(hours * 3600 / step_s)
    for k in range(nodes):
        base = np.arange(n_steps) * step_s + rng.integers(0, step_s // 2, n_steps)
        keep = rng.random(n_steps) >= drop
        secs = np.sort(np.unique(base[keep]))
        m = len(secs)
        temp = 55 + 5 * np.sin(secs / 7200) + rng.normal(0, 1.5, m) + k
        temp[rng.random(m) < 0.05] = np.nan
        counters = {}
        for c in COUNTERS:
            inc = rng.poisson(0.02, m)
            vals = np.cumsum(inc)
            reset_at = rng.integers(0, m) if rng.random() < 0.5 else None
            if reset_at is not None:
                vals[reset_at:] -= vals[reset_at]
            counters[c] = vals
        frames.append(
            pl.DataFrame(
                {
                    "ts": [start + timedelta(seconds=int(s)) for s in secs],
                    "node_id": f"n{k}",
                    "cpu_util_pct": rng.uniform(0, 100, m).astype(np.float32),
                    "mem_used_bytes": rng.integers(1 << 30, 1 << 36, m),
                    "gpu_util_pct": rng.uniform(0, 100, m).astype(np.float32),
                    "gpu_temp_c": pl.Series(temp.astype(np.float32)).fill_nan(None),
                    "gpu_power_w": rng.uniform(100, 700, m).astype(np.float32),
                    **counters,
                    "node_ready": rng.random(m) > 0.02,
                }
            )
        )
    df = pl.concat(frames)
    return (
        df.with_columns(pl.col("ts").cast(pl.Datetime("us", "UTC")))
        .select(TELEMETRY.names)
        .cast(TELEMETRY.polars_schema())
    )


def inventory(nodes: int = 4, start: datetime = T0) -> pl.DataFrame:
    rows = {
        "ts": [start] * nodes,
        "node_id": [f"n{k}" for k in range(nodes)],
        "pool": ["train" if k % 2 == 0 else "infer" for k in range(nodes)],
        "sku": ["h100x8"] * nodes,
        "gpu_model": ["H100"] * nodes,
        "gpus": [8] * nodes,
        "cpu_milli": [192000] * nodes,
        "memory_mib": [2 << 20] * nodes,
        "numa_nodes": [2] * nodes,
        "nvlink_domain": [f"n{k}/nvl" for k in range(nodes)],
        "region": ["eu"] * nodes,
        "zone": ["eu-a"] * nodes,
        "spine": ["s1"] * nodes,
        "rack": [f"r{k // 2}" for k in range(nodes)],
        "installed_at": [start - timedelta(days=30 * (k + 1)) for k in range(nodes)],
    }
    return pl.DataFrame(rows).cast(INVENTORY.polars_schema())


def events(rows: list[tuple[str, str, datetime]]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "node_id": [r[0] for r in rows],
            "kind": [r[1] for r in rows],
            "at": [r[2] for r in rows],
            "cause": [None] * len(rows),
            "detail": [None] * len(rows),
        },
        schema=EVENTS.polars_schema(),
    )
