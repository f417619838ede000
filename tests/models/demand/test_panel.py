"""Panel: fleet-wide outages are found, and are not read as demand by the model."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import polars as pl

from predops.models.demand.config import HOURLY_CONFIG
from predops.models.demand.forecaster import DemandForecaster
from predops.models.demand.panel import (
    OUTAGE_MIN_STEPS,
    build_panel,
    design,
    feature_names,
    training_pairs,
)
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


def test_outage_pairs_can_be_left_out_of_training() -> None:
    data = _zeroed(panel(np.random.default_rng(5), n_series=4, hours=HOURS), 200, 24)
    p = build_panel(data, HOURLY_CONFIG)
    assert p.outage.any()
    o, h = training_pairs(p, HOURLY_CONFIG, np.random.default_rng(0), max_rows=10**6)
    hit = p.outage[o + h] | p.outage[o]
    assert hit.sum() > 0  # kept by default
    o2, h2 = training_pairs(
        p, HOURLY_CONFIG, np.random.default_rng(0), max_rows=10**6, skip_outages=True
    )
    assert not (p.outage[o2 + h2] | p.outage[o2]).any()
    # Exactly the outage pairs go: every other pair is still there.
    np.testing.assert_array_equal(o2, o[~hit])
    np.testing.assert_array_equal(h2, h[~hit])
    # The forecaster leaves them out by default.
    kept = DemandForecaster(n_estimators=5, n_jobs=1, drop_outage_pairs=False).fit(data)
    default = DemandForecaster(n_estimators=5, n_jobs=1).fit(data)
    assert kept.n_train_rows_ == o.size
    assert default.n_train_rows_ == o2.size


def test_outage_gaps_leave_the_zeros_out_of_the_window_statistics() -> None:
    data = _zeroed(panel(np.random.default_rng(6), n_series=4, hours=HOURS), HOURS - 100, 24)
    plain = build_panel(data, HOURLY_CONFIG)
    gaps = build_panel(data, HOURLY_CONFIG, outage_gaps=True)
    # The grid, the values read (targets) and the outage are the same either way.
    np.testing.assert_array_equal(plain.ts_us, gaps.ts_us)
    np.testing.assert_array_equal(plain.value, gaps.value)
    np.testing.assert_array_equal(plain.outage, gaps.outage)
    assert gaps.outage.sum() >= 4 * 20
    last = plain.last_rows()
    mean = plain.issue_names.index("value__mean_168")
    # The last week's mean at the end, in series units: the week's non-outage buckets.
    expected = np.array(
        [
            np.nanmean(np.where(gaps.outage[a : b + 1], np.nan, gaps.value[a : b + 1]))
            for a, b in zip(last - 167, last, strict=True)
        ]
    )
    got = gaps.issue[last, mean] * gaps.scale[last]
    zeros_in = plain.issue[last, mean] * plain.scale[last]
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    assert (zeros_in < 0.9 * got).all()  # the zeros pull the plain mean down
    # Lags that fall in the outage are unknown, not 0.
    lag = gaps.issue_names.index("value__lag_24")
    after = np.flatnonzero(np.roll(gaps.outage, 24) & ~gaps.outage)
    after = after[gaps.series_index()[after] == gaps.series_index()[after - 24]]
    assert after.size > 0
    assert np.isnan(gaps.issue[after, lag]).all()
    assert (plain.issue[after, lag] == 0).all()
    fc = DemandForecaster(n_estimators=40, n_jobs=1, outage_window_gaps=True).fit(data).predict()
    assert fc["method"].unique().to_list() == ["lightgbm"]
    assert fc.height == 4 * len(HOURLY_CONFIG.horizons)
