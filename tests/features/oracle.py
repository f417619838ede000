"""A slow, obvious reference for node features: plain Python over one node's samples.

It knows nothing of buckets, rolling sums or bucket-index algebra; it filters the raw
samples in ``(E - W, E]`` and computes each statistic directly.
"""

from __future__ import annotations

import math
import statistics
from datetime import datetime, timedelta

import numpy as np
import polars as pl


def _window(rows: list[dict], end: datetime, w: timedelta) -> list[dict]:
    return [r for r in rows if end - w < r["ts"] <= end]


def gauge_stats(rows: list[dict], col: str, end: datetime, w: timedelta) -> dict[str, float | None]:
    vals = [
        (r["ts"], r[col])
        for r in _window(rows, end, w)
        if r[col] is not None and not (isinstance(r[col], float) and math.isnan(r[col]))
    ]
    if not vals:
        return {"mean": None, "max": None, "std": None, "slope": None}
    xs = [float(v) for _, v in vals]
    hours = [(t - end).total_seconds() / 3600 for t, _ in vals]
    out: dict[str, float | None] = {"mean": statistics.fmean(xs), "max": max(xs)}
    out["std"] = statistics.stdev(xs) if len(xs) > 1 else None
    out["slope"] = (
        float(np.polyfit(hours, xs, 1)[0]) if len(xs) > 1 and len(set(hours)) > 1 else None
    )
    return out


def counter_increase(rows: list[dict], col: str, end: datetime, w: timedelta) -> float:
    total, prev = 0.0, None
    for r in rows:  # rows sorted by ts
        if r["ts"] > end:
            break
        x = r[col]
        if x is None:
            continue
        if prev is not None and end - w < r["ts"]:
            total += x - prev if x >= prev else x
        prev = x
    return total


def samples_in(rows: list[dict], end: datetime, w: timedelta) -> int:
    return len(_window(rows, end, w))


def node_rows(telemetry: pl.DataFrame, node: str) -> list[dict]:
    return telemetry.filter(pl.col("node_id") == node).sort("ts").to_dicts()
