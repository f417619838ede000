"""The demand index's columns: each series in its own units, a sparkline of its recent
actuals against capacity, its forecast p90 against capacity and the days of headroom
left (when the p90 forecast first crosses capacity, or "beyond the horizon").

Sparklines are small inline SVG polylines drawn on the server (at most
:data:`SPARK_POINTS` points each), so a page of hundreds of series stays a few hundred
bytes per row and needs no chart library.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import numpy as np
import polars as pl

from predops.serving.dashboards.demand import ServedForecast

UNITS = {
    "gpus": "GPUs",
    "gpu": "GPUs",
    "cpu_cores": "cores",
    "cores": "cores",
    "nodes": "nodes",
    "cpu_pct": "%",
    "memory_gb": "GB",
    "mem_gb": "GB",
}
"""A series' unit by its ``resource`` (the demand table's column); any other resource
is shown by its own name."""

SPARK_POINTS = 48
SPARK_W, SPARK_H = 120, 28


def unit_of(resource: str | None) -> str:
    """The unit a series is counted in, from its resource (``gpus`` -> ``GPUs``)."""
    if not resource:
        return "units"
    return UNITS.get(resource.lower(), resource)


def view_unit(view: dict[str, Any]) -> str:
    """The unit of a :func:`demand.series_view` (its series' resource)."""
    actual = view["actual"]
    return unit_of(actual["resource"][-1] if actual.height else None)


def quantity(x: float | None, unit: str) -> str:
    """A value with its unit: integers as integers, others whole from 100 up, to one
    decimal from 10, to three significant digits below."""
    if x is None or x != x:
        return "—"
    v = float(x)
    if v.is_integer():
        text = f"{int(v):,}"
    elif abs(v) >= 100:
        text = f"{v:,.0f}"
    elif abs(v) >= 10:
        text = f"{v:.1f}"
    else:
        text = f"{v:.3g}"
    return f"{text}{unit}" if unit == "%" else f"{text} {unit}"


def sparkline(values: np.ndarray, capacity: float | None) -> dict[str, Any] | None:
    """SVG coordinates of the last values (down-sampled to at most
    :data:`SPARK_POINTS` by taking each stretch's maximum, so peaks survive) on a scale
    from 0 to the larger of the peak and the capacity; ``cap_y`` is the capacity line's
    height (None without a capacity). None when there is nothing finite to draw."""
    y = values[np.isfinite(values)]
    if y.size == 0:
        return None
    if y.size > SPARK_POINTS:
        edges = np.linspace(0, y.size, SPARK_POINTS + 1).astype(int)
        y = np.maximum.reduceat(y, edges[:-1])
    cap = capacity if capacity is not None and capacity == capacity and capacity > 0 else None
    top = max(float(y.max()), cap or 0.0) or 1.0
    xs = np.linspace(0, SPARK_W, y.size) if y.size > 1 else np.array([SPARK_W / 2])

    def at(v: float) -> float:
        return round(SPARK_H - 1 - (SPARK_H - 2) * max(v, 0.0) / top, 1)

    points = " ".join(f"{x:.0f},{at(v)}" for x, v in zip(xs, y, strict=True))
    return {
        "points": points,
        "cap_y": None if cap is None else at(cap),
        "w": SPARK_W,
        "h": SPARK_H,
        "peak": float(y.max()),
    }


def headroom(
    fc: pl.DataFrame, capacity: float | None, issued_at: datetime | None
) -> dict[str, Any]:
    """The forecast's peak p90 against ``capacity`` and when p90 first exceeds it.

    ``fc``: one series' forecast rows (valid_at, p90). Keys: ``p90_peak``, ``ratio``
    (peak / capacity, None without a capacity), ``crosses_at`` and ``days`` (from
    ``issued_at`` to the first step above capacity; None when it never crosses),
    ``horizon_days`` (how far the forecast reaches)."""
    out: dict[str, Any] = {
        "p90_peak": None,
        "ratio": None,
        "crosses_at": None,
        "days": None,
        "horizon_days": None,
    }
    if fc.height == 0:
        return out
    fc = fc.sort("valid_at")
    p90 = fc["p90"].cast(pl.Float64).to_numpy()
    out["p90_peak"] = float(np.nanmax(p90)) if np.isfinite(p90).any() else None
    start = issued_at or fc["valid_at"][0]
    out["horizon_days"] = (fc["valid_at"][-1] - start) / timedelta(days=1)
    if capacity is None or capacity != capacity or capacity <= 0:
        return out
    if out["p90_peak"] is not None:
        out["ratio"] = out["p90_peak"] / capacity
    over = np.flatnonzero(p90 > capacity)
    if over.size:
        when = fc["valid_at"][int(over[0])]
        out["crosses_at"] = when
        out["days"] = max((when - start) / timedelta(days=1), 0.0)
    return out


def index_rows(
    frame: pl.DataFrame,
    served: ServedForecast,
    rows: list[dict[str, Any]],
    *,
    history: timedelta,
    until: datetime | None = None,
) -> list[dict[str, Any]]:
    """The demand index's rows (``rows`` from :func:`demand.series_table`) with
    ``unit``, ``spark`` (``history`` of actuals up to ``until``, default the newest row)
    and ``headroom``."""
    if not rows:
        return []
    end = frame["ts"].max() if until is None else until
    recent = (
        frame.filter((pl.col("ts") > end - history) & (pl.col("ts") <= end))
        if isinstance(end, datetime)
        else frame
    )
    by_series = {
        str(k[0]): g["value"].cast(pl.Float64).to_numpy()
        for k, g in recent.sort("ts").group_by("series_id", maintain_order=True)
    }
    fc = served.frame
    forecasts = (
        {str(k[0]): g for k, g in fc.group_by("series_id", maintain_order=True)}
        if fc.height
        else {}
    )
    out = []
    for r in rows:
        sid = r["series_id"]
        unit = unit_of(r.get("resource"))
        cap = r.get("capacity")
        cap = float(cap) if cap is not None else None
        mine = forecasts.get(sid)
        issued = mine["issued_at"].max() if mine is not None else None
        out.append(
            {
                **r,
                "unit": unit,
                "spark": sparkline(by_series.get(sid, np.array([])), cap),
                "headroom": headroom(
                    mine if mine is not None else fc.clear(),
                    cap,
                    issued if isinstance(issued, datetime) else None,
                ),
            }
        )
    return out
