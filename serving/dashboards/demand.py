"""The demand pages' data: the lake's demand series, the served demand champion's
forecast of each (p10 / p50 / p90 per hour ahead), and each pool's capacity.

Forecasts come from the server's shared cache (:mod:`serving.forecasts`: computed as
``predops forecast demand`` does, with the model object the server holds, once per model
version and state of the lake's demand files).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import polars as pl

from predops.pipelines.workspace.lake import Lake
from predops.serving.context import ServeContext
from predops.serving.forecasts import ForecastUnavailable, all_forecasts

UTC_US = pl.Datetime("us", "UTC")


@dataclass(frozen=True, slots=True)
class ServedForecast:
    """Every series' forecast from one model version, or why there is none."""

    frame: pl.DataFrame
    """series_id, issued_at, valid_at, horizon, p10, p50, p90, method."""
    model: str | None = None
    problem: str | None = None
    selection: dict[str, Any] | None = None
    """How a combination made the forecasts (``served_selection``), None otherwise."""


EMPTY = pl.DataFrame(
    schema={
        "series_id": pl.String,
        "issued_at": UTC_US,
        "valid_at": UTC_US,
        "p10": pl.Float64,
        "p50": pl.Float64,
        "p90": pl.Float64,
    }
)


def demand_frame(ctx: ServeContext) -> pl.DataFrame:
    """The lake's demand rows up to now (one row per series and time)."""
    lake = Lake(ctx.settings.lake_dir)
    if not lake.files("demand"):
        return pl.DataFrame(
            schema={
                "series_id": pl.String,
                "ts": UTC_US,
                "value": pl.Float64,
                "capacity": pl.Float64,
                "pool": pl.String,
                "resource": pl.String,
                "gpu_model": pl.String,
            }
        )
    return (
        lake.scan("demand")
        .filter(pl.col("ts") <= ctx.clock.now())
        .select("series_id", "ts", "value", "capacity", "pool", "resource", "gpu_model")
        .unique(["series_id", "ts"], keep="first")
        .sort("series_id", "ts")
        .collect()
    )


def series_table(demand: pl.DataFrame) -> list[dict[str, Any]]:
    """One row per series: its pool, resource, last time, last value and capacity."""
    if demand.height == 0:
        return []
    last = demand.group_by("series_id").agg(
        pl.col("pool").last(),
        pl.col("resource").last(),
        pl.col("gpu_model").last(),
        pl.col("ts").min().alias("first_ts"),
        pl.col("ts").max().alias("last_ts"),
        pl.col("value").last().alias("last_value"),
        pl.col("capacity").last().alias("capacity"),
        pl.len().alias("rows"),
    )
    return last.sort("series_id").to_dicts()


def served_forecast(ctx: ServeContext, demand: pl.DataFrame) -> ServedForecast:
    """The served champion's forecast of every series, from the server's shared cache
    (:mod:`serving.forecasts`, the rows ``/v1/demand/forecast`` serves)."""
    loaded = ctx.demand.current
    if demand.height == 0:
        return ServedForecast(EMPTY, problem="the lake has no demand rows")
    try:
        _, series, selection = all_forecasts(ctx)
    except ForecastUnavailable as exc:
        return ServedForecast(EMPTY, problem=str(exc))
    label = None if loaded is None else f"{loaded.name} v{loaded.version}"
    rows = [r for found in series.values() for r in found]
    if not rows:
        return ServedForecast(EMPTY, label, "the model forecast no series")
    frame = pl.DataFrame(rows).with_columns(
        pl.col("issued_at").str.to_datetime(time_zone="UTC").cast(UTC_US),
        pl.col("valid_at").str.to_datetime(time_zone="UTC").cast(UTC_US),
    )
    return ServedForecast(frame.sort("series_id", "valid_at"), label, selection=selection)


CANDIDATE_LABELS = {
    "lightgbm": "LightGBM",
    "ets": "ETS",
    "seasonal_naive": "seasonal naive (shortest season)",
    "seasonal_naive_long": "seasonal naive (longest season)",
    "theta": "Theta",
    "persistence": "persistence (last value)",
}

# How each ``SelectedForecaster.weighting`` turns recent errors into weights, in words.
WEIGHTING_TEXT = {
    "inverse": "in inverse square of each one's recent error on this series",
    "shrunk": (
        "in inverse square of each one's recent error on this series, taken halfway"
        " toward its error relative to the others on every series of the model"
    ),
    "pooled": (
        "in inverse square of each one's recent error relative to the others,"
        " averaged over every series of the model"
    ),
    "best": "all on the one with the smallest recent error on this series",
    "nested": (
        "in two levels: the classical methods among themselves, then LightGBM against"
        " their combination; each in inverse square of its recent error on this series,"
        " taken halfway toward its error relative to the others on every series of the"
        " model"
    ),
}


def series_selection(forecast: ServedForecast, series_id: str) -> dict[str, Any] | None:
    """How the served combination makes ``series_id``'s forecast: per horizon bucket,
    each candidate's weight now and at fit, with the windows they were chosen on; None
    when the served model is not a combination (or the series was not weighted)."""
    sel = forecast.selection
    if not sel:
        return None
    mine = sel.get("series", {}).get(series_id)
    if not mine:
        return None
    cands = list(sel.get("candidates", []))
    now, fit = mine.get("weights", {}), mine.get("weights_at_fit", {})
    rows = [
        {
            "bucket": b,
            "weights": [(now.get(b, {}).get(c), fit.get(b, {}).get(c)) for c in cands],
        }
        for b in sel.get("buckets", [])
        if b in now or b in fit
    ]
    return {
        "candidates": [CANDIDATE_LABELS.get(c, c) for c in cands],
        "weighting": WEIGHTING_TEXT.get(
            str(sel.get("weighting")), f"{sel.get('weighting')} weighting of recent errors"
        ),
        "window_origins": [datetime.fromisoformat(o) for o in sel.get("window_origins", [])],
        "data_cutoff": (
            datetime.fromisoformat(sel["data_cutoff"]) if sel.get("data_cutoff") else None
        ),
        "rows": rows,
    }


def series_view(
    demand: pl.DataFrame,
    forecast: ServedForecast,
    series_id: str,
    *,
    history: timedelta,
    until: datetime | None = None,
) -> dict[str, Any]:
    """One series: ``history`` of actuals and capacity up to ``until`` (default: its
    last row), and its forecast."""
    rows = demand.filter(pl.col("series_id") == series_id)
    end = rows["ts"].max() if until is None else until
    assert isinstance(end, datetime)
    recent = rows.filter((pl.col("ts") > end - history) & (pl.col("ts") <= end))
    fc = forecast.frame.filter(pl.col("series_id") == series_id)
    return {"actual": recent, "forecast": fc, "end": end}


def pool_capacity(demand: pl.DataFrame) -> dict[str, float]:
    """Each series' latest capacity (the pool's allocatable units of that resource)."""
    if demand.height == 0:
        return {}
    last = demand.group_by("series_id").agg(pl.col("capacity").last())
    return {r["series_id"]: float(r["capacity"] or 0.0) for r in last.iter_rows(named=True)}


def issued_at(forecast: ServedForecast) -> datetime | None:
    """When the served forecast was issued (its newest ``issued_at``), None without one."""
    if forecast.frame.height == 0:
        return None
    t = forecast.frame["issued_at"].max()
    return t if isinstance(t, datetime) else None


SERIES_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,252}$")


def valid_series_id(series_id: str) -> bool:
    """Series ids are ``<pool>/<resource>[/<gpu model>]``: letters, digits, ``._:/-``."""
    return bool(SERIES_ID.match(series_id)) and ".." not in series_id
