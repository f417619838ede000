"""The demand pages' data: the lake's demand series, the served demand champion's
forecast of each (p10 / p50 / p90 per hour ahead), and each pool's capacity.

Forecasts are computed the way ``predops forecast demand`` does (the last ``lookback``
buckets of every series, plus the calendar), with the model object the server holds
(``ctx.demand.current``), and cached per (model version, demand partitions in the lake).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import polars as pl

from pipelines.lake import Lake
from serving.context import ServeContext

UTC_US = pl.Datetime("us", "UTC")


@dataclass(frozen=True, slots=True)
class ServedForecast:
    """Every series' forecast from one model version, or why there is none."""

    frame: pl.DataFrame
    """series_id, issued_at, valid_at, horizon, p10, p50, p90, method."""
    model: str | None = None
    problem: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)


_cache: dict[tuple[Any, ...], ServedForecast] = {}
_lock = threading.Lock()
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
    """The served champion's forecast of every series (cached, see the module docstring)."""
    loaded = ctx.demand.current
    if loaded is None:
        why = ctx.demand.last_error or "not loaded yet"
        return ServedForecast(EMPTY, problem=f"no demand model is served: {why}")
    if demand.height == 0:
        return ServedForecast(EMPTY, problem="the lake has no demand rows")
    label = f"{loaded.name} v{loaded.version}"
    end = demand["ts"].max()
    key = (loaded.version, end, demand.height)
    with _lock:
        hit = _cache.get(key)
        if hit is not None:
            return hit
        out = _forecast(ctx, loaded.model, label, demand)
        _cache.clear()
        _cache[key] = out
        return out


def _forecast(ctx: ServeContext, model: Any, label: str, demand: pl.DataFrame) -> ServedForecast:
    end = demand["ts"].max()
    assert isinstance(end, datetime)
    recent = demand
    forecaster = _forecaster(model)
    if forecaster is not None:  # only the last lookback buckets matter (+1 of slack)
        since = end - (forecaster.lookback + 1) * forecaster.config_.freq
        recent = demand.filter(pl.col("ts") > since)
    lake = Lake(ctx.settings.lake_dir)
    calendar = lake.scan("calendar").collect() if lake.files("calendar") else None
    try:
        raw = model.predict(
            {
                "demand": recent.to_pandas(),
                "calendar": None if calendar is None else calendar.to_pandas(),
            }
        )
    except Exception as exc:  # a model that cannot forecast this data: say why
        return ServedForecast(EMPTY, label, f"the model could not forecast: {exc}")
    frame = pl.from_pandas(raw).with_columns(
        pl.col("issued_at").cast(UTC_US), pl.col("valid_at").cast(UTC_US)
    )
    return ServedForecast(frame.sort("series_id", "valid_at"), label, meta={"data_end": end})


def _forecaster(model: Any) -> Any:
    """The fitted forecaster inside the pyfunc model (to trim the input to its lookback),
    or None when the wrapper is of a kind this page does not know."""
    inner = model.unwrap_python_model()
    for candidate in (getattr(inner, "forecaster", None), getattr(inner, "obj", None)):
        if hasattr(candidate, "lookback") and hasattr(candidate, "config_"):
            return candidate
    return None


def series_view(
    demand: pl.DataFrame, forecast: ServedForecast, series_id: str, *, history: timedelta
) -> dict[str, Any]:
    """One series: the last ``history`` of actuals and capacity, and its forecast."""
    rows = demand.filter(pl.col("series_id") == series_id)
    end = rows["ts"].max()
    assert isinstance(end, datetime)
    recent = rows.filter(pl.col("ts") > end - history)
    fc = forecast.frame.filter(pl.col("series_id") == series_id)
    return {"actual": recent, "forecast": fc, "end": end}


def pool_capacity(demand: pl.DataFrame) -> dict[str, float]:
    """Each series' latest capacity (the pool's allocatable units of that resource)."""
    if demand.height == 0:
        return {}
    last = demand.group_by("series_id").agg(pl.col("capacity").last())
    return {r["series_id"]: float(r["capacity"] or 0.0) for r in last.iter_rows(named=True)}


SERIES_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,252}$")


def valid_series_id(series_id: str) -> bool:
    """Series ids are ``<pool>/<resource>[/<gpu model>]``: letters, digits, ``._:/-``."""
    return bool(SERIES_ID.match(series_id)) and ".." not in series_id
