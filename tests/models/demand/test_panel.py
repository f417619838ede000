"""Panel: fleet-wide outages are found, and are not read as demand by the model."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import polars as pl

from models.demand.config import HOURLY_CONFIG
from models.demand.forecaster import DemandForecaster
from models.demand.panel import OUTAGE_MIN_STEPS, build_panel, design, feature_names
from tests.models.demand.factories import T0, panel

HOURS = 24 * 16


def _zeroed(
    data: pl.DataFrame, first: int, hours: int, series: list[str] | None = None
) -> pl.DataFrame:
    """``data`` with ``hours`` buckets from hour ``first`` set to 0 (in ``series`` or all)."""
    start, end = T0 + timedelta(hours=first), T0 + timedelta(hours=first + hours)
    hit = (pl.col("ts") >= start) & (pl.col("ts") < end)
    if series is not None:
        hit = hit & pl.col("series_id").is_in(series)
    return data.with_columns(pl.when(hit).then(0.0).otherwise("value").alias("value"))


def _outage_hours(data: pl.DataFrame) -> set[int]:
    p = build_panel(data, HOURLY_CONFIG)
    t0_us = int((T0 - T0.replace(year=1970, month=1, day=1)).total_seconds() * 1e6)
    return {int((t - t0_us) // 3_600_000_000) for t in np.unique(p.ts_us[p.outage])}


def test_a_fleet_wide_run_of_zeros_is_an_outage_and_idle_hours_are_not() -> None:
    data = panel(np.random.default_rng(3), n_series=4, hours=HOURS)
    assert _outage_hours(data) == set()
    down = _zeroed(data, 100, 6)  # every series reads 0 for 6 hours
    short = _zeroed(down, 200, OUTAGE_MIN_STEPS - 1)  # too short to be an outage
    one = _zeroed(short, 250, 10, series=["pool0/gpus"])  # one idle pool is not the fleet
    hours = _outage_hours(one)
    # Bucket labels are bucket ends: the zeros of hours 100-105 fill buckets 101-105
    # whole (the buckets at either edge average a zero and a non-zero sample).
    assert hours and hours <= set(range(100, 107))
    assert len(hours) >= OUTAGE_MIN_STEPS
    two = _zeroed(panel(np.random.default_rng(3), n_series=2, hours=HOURS), 100, 24)
    assert _outage_hours(two) == set()  # two series are too few to call a fleet down


def test_an_outage_a_week_back_is_not_last_weeks_demand() -> None:
    data = _zeroed(panel(np.random.default_rng(4), n_series=4, hours=HOURS), HOURS - 168, 24)
    p = build_panel(data, HOURLY_CONFIG)
    last = p.last_rows()
    h = np.arange(1, 25)
    o = np.repeat(last, h.size)
    x = design(p, HOURLY_CONFIG, o, np.tile(h, last.size))
    week = feature_names(HOURLY_CONFIG).index("value__season_168")
    # The hours that fall in the outage read as unknown, not as zero demand.
    assert np.isnan(x[:, week]).sum() >= 4 * 20
    out = DemandForecaster(n_estimators=40, n_jobs=1).fit(data).predict()
    # The forecast stays near the last day's demand: no outage is forecast for it.
    end = T0 + timedelta(hours=HOURS - 1)
    last_day = data.filter(pl.col("ts") > end - timedelta(days=1))
    ratio = (
        out.group_by("series_id")
        .agg(pl.col("p50").mean())
        .join(last_day.group_by("series_id").agg(pl.col("value").mean()), on="series_id")
        .select(pl.col("p50") / pl.col("value"))
        .to_series()
    )
    assert ratio.len() == 4
    assert (ratio > 0.7).all(), ratio.to_list()
