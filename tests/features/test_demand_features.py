from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl
import pytest

from predops.core.schemas import CALENDAR, DEMAND
from predops.features.demand import (
    HOURLY,
    WEEKLY,
    add_calendar_features,
    add_trend_features,
    demand_features,
    demand_from_pods,
    resample_demand,
)

T0 = datetime(2026, 3, 2, tzinfo=UTC)  # a Monday


def demand(hours: int = 400, every_min: int = 5, series: str = "train/gpus/H100") -> pl.DataFrame:
    n = hours * 60 // every_min
    ts = [T0 + timedelta(minutes=every_min * (i + 1)) for i in range(n)]
    rng = np.random.default_rng(0)
    running = 100 + 20 * np.sin(np.arange(n) * 2 * np.pi / (24 * 60 / every_min))
    pending = np.where(running > 115, rng.uniform(0, 10, n), 0.0)
    return (
        pl.DataFrame(
            {
                "series_id": series,
                "ts": ts,
                "value": running + pending,
                "running": running,
                "pending": pending,
                "capacity": 118.0,
                "pool": "train",
                "resource": "gpus",
                "gpu_model": "H100",
            }
        )
        .cast(DEMAND.polars_schema())
        .select(DEMAND.names)
    )


def test_resample_is_a_complete_grid_with_nulls_for_gaps() -> None:
    d = demand(48)
    gap = d.filter(
        ~pl.col("ts").is_between(T0 + timedelta(hours=10), T0 + timedelta(hours=13), closed="right")
    )
    r = resample_demand(gap.lazy(), HOURLY).collect()
    assert r.height == 48
    assert r.filter(pl.col("ts") == T0 + timedelta(hours=12))["value"].to_list() == [None]
    # bucket (t - 1h, t]: the mean of the 12 five-minute samples ending at t
    first = d.filter(pl.col("ts") <= T0 + timedelta(hours=1))["value"].mean()
    assert r["value"][0] == pytest.approx(first)


def test_a_trailing_bucket_is_emitted_once_the_data_covers_it() -> None:
    # samples stamped at the start of their minute, to 23:59: the hour (23:00, 00:00] is whole
    start = demand(48, every_min=1).with_columns(pl.col("ts") - timedelta(minutes=1))
    r = resample_demand(start.lazy(), HOURLY).collect()
    assert r["ts"].max() == T0 + timedelta(hours=48)
    # five-minute samples to 13:25: the hour (13:00, 14:00] is still filling
    part = demand(48).filter(pl.col("ts") <= T0 + timedelta(hours=13, minutes=25))
    r = resample_demand(part.lazy(), HOURLY).collect()
    assert r["ts"].max() == T0 + timedelta(hours=13)
    # a cutoff is the most that is known: five-minute data to 13:55 completes 14:00 alone
    near = demand(48).filter(pl.col("ts") <= T0 + timedelta(hours=13, minutes=55))
    assert resample_demand(near.lazy(), HOURLY).collect()["ts"].max() == T0 + timedelta(hours=14)
    cut = T0 + timedelta(hours=13, minutes=57)
    r = resample_demand(near.lazy(), HOURLY, cutoff=cut).collect()
    assert r["ts"].max() == T0 + timedelta(hours=13)


def test_lags_and_rolling_use_only_the_past() -> None:
    r = resample_demand(demand(400).lazy(), HOURLY)
    f = demand_features(r).collect()
    v = f["value"].to_numpy()
    i = 300
    row = f.row(i, named=True)
    assert row["value__lag_0"] == pytest.approx(v[i])
    assert row["value__lag_24"] == pytest.approx(v[i - 24])
    assert row["value__lag_168"] == pytest.approx(v[i - 168])
    assert row["value__mean_24"] == pytest.approx(v[i - 23 : i + 1].mean(), rel=1e-5)
    assert row["value__max_168"] == pytest.approx(v[i - 167 : i + 1].max(), rel=1e-5)
    # Changing the future leaves row i alone.
    later = demand(400).with_columns(
        pl.when(pl.col("ts") > row["ts"])
        .then(pl.col("value") * 3)
        .otherwise(pl.col("value"))
        .alias("value")
    )
    g = demand_features(resample_demand(later.lazy(), HOURLY)).collect()
    assert g.row(i, named=True) == row


def test_pending_is_demand_and_its_share_is_a_feature() -> None:
    f = demand_features(resample_demand(demand(72).lazy(), HOURLY)).collect()
    capped = f.filter(pl.col("pending") > 0)
    assert capped.height > 0
    assert (capped["value"] > capped["running"]).all()
    assert (capped["pending__share"] > 0).all()


def test_calendar_events_apply_to_their_scope() -> None:
    cal = pl.DataFrame(
        {
            "name": ["double11", "launch"],
            "kind": ["promotion", "launch"],
            "starts_at": [T0 + timedelta(days=1), T0 + timedelta(days=2)],
            "ends_at": [T0 + timedelta(days=2), T0 + timedelta(days=3)],
            "scope": [None, "infer"],
            "magnitude": [2.5, None],
        }
    ).cast(CALENDAR.polars_schema())
    rows = pl.DataFrame(
        {
            "ts": [T0 + timedelta(hours=h) for h in (12, 30, 50, 50)],
            "pool": ["train", "train", "train", "infer"],
        }
    ).with_columns(pl.col("ts").cast(pl.Datetime("us", "UTC")))
    out = add_calendar_features(rows.lazy(), calendar=cal, prefix="target").collect()
    assert out["target__event_active"].to_list() == [0, 1, 0, 1]
    assert out["target__event_magnitude"].to_list() == [0.0, 2.5, 0.0, 1.0]
    assert out["target__hours_to_event"].to_list()[0] == 12.0
    assert out["target__dow"].to_list()[0] == 1 and out["target__hour"].to_list()[0] == 12


def test_weekly_config_for_procurement() -> None:
    d = demand(24 * 7 * 12, every_min=60)
    f = demand_features(resample_demand(d.lazy(), WEEKLY), WEEKLY).collect()
    assert f.height == 12
    assert f["value__lag_4"].null_count() == 4
    assert HOURLY.hash != WEEKLY.hash
    assert set(WEEKLY.names) <= set(f.columns)


def test_bucket_keeps_its_latest_sample() -> None:
    d = demand(6)
    f = demand_features(resample_demand(d.lazy(), HOURLY)).collect()
    last_of_first_hour = d.filter(pl.col("ts") == T0 + timedelta(hours=1))["value"][0]
    assert f["value__last"][0] == pytest.approx(last_of_first_hour, rel=1e-6)
    assert "value__last" in HOURLY.names


def test_trend_slope_matches_least_squares() -> None:
    rng = np.random.default_rng(3)
    n = 60
    y = 5.0 + 0.7 * np.arange(n) + rng.normal(0, 2, n)
    y[[10, 11, 30]] = np.nan  # missing buckets (null on the grid) are carried forward
    r = pl.DataFrame(
        {
            "series_id": "s",
            "ts": [T0 + timedelta(hours=i) for i in range(n)],
            "value": pl.Series(y).fill_nan(None),
        }
    )
    out = add_trend_features(r.lazy(), (13,)).collect()["value__slope_13"].to_numpy()
    filled = pl.Series(y).fill_nan(None).forward_fill().to_numpy()
    for i in (12, 20, 35, 59):
        window = filled[i - 12 : i + 1]
        expected = np.polyfit(np.arange(13), window, 1)[0]
        assert out[i] == pytest.approx(expected, rel=1e-4)
    assert np.isnan(out[0])  # one bucket: no slope
    with pytest.raises(ValueError, match="at least 2"):
        add_trend_features(r.lazy(), (1,))


def test_demand_from_pods_counts_running_and_queued_gpus() -> None:
    h = timedelta(hours=1)
    pods = pl.DataFrame(
        {
            "pod_id": ["a", "b", "c", "d", "cpu"],
            "num_gpu": [8, 1, 1, 2, 0],
            "gpu_milli": [1000, 500, 0, 1000, 0],
            "gpu_spec": ["V100", None, None, "V100", None],
            "created_at": [T0, T0, T0 + h, T0 + 2 * h, T0],
            "scheduled_at": [T0, T0 + 2 * h, None, T0 + 2 * h, T0],
            "deleted_at": [T0 + 3 * h, None, T0 + 2 * h, None, None],
        }
    ).with_columns(
        pl.col("created_at", "scheduled_at", "deleted_at").cast(pl.Datetime("us", "UTC"))
    )
    out = demand_from_pods(pods, h, prefix="t").sort("series_id", "ts")
    total = out.filter(pl.col("series_id") == "t/gpus/all")
    # t0: a(8, running) + b(0.5, queued); t1: + c(1, queued, never scheduled);
    # t2: c deleted, b runs, d(2) starts; t3: a deleted
    assert total["value"].to_list() == [8.5, 9.5, 10.5, 2.5]
    assert total["running"].to_list() == [8.0, 8.0, 10.5, 2.5]
    assert total["pending"].to_list() == [0.5, 1.5, 0.0, 0.0]
    v100 = out.filter(pl.col("series_id") == "t/gpus/V100")
    assert v100["value"].to_list() == [8.0, 8.0, 10.0, 2.0]
    assert set(out["series_id"]) == {"t/gpus/all", "t/gpus/V100", "t/gpus/any"}
    with pytest.raises(ValueError, match="lacks column"):
        demand_from_pods(pods.drop("deleted_at"), h)


def test_bucket_means_skip_nulls_and_a_bucket_of_nulls_is_null() -> None:
    d = demand(6, every_min=10)
    rng = np.random.default_rng(5)
    holes = rng.random(d.height) < 0.3
    hour3 = d["ts"].is_between(T0 + timedelta(hours=2), T0 + timedelta(hours=3), closed="right")
    d = d.with_columns(
        pl.when(pl.Series(holes) | hour3).then(None).otherwise(pl.col(c)).alias(c)
        for c in ("value", "running", "pending", "capacity")
    )
    r = resample_demand(d.lazy(), HOURLY).collect()
    assert r.height == 6
    for c in ("value", "running", "pending", "capacity"):
        for k, t in enumerate(r["ts"]):
            rows = d.filter((pl.col("ts") > t - timedelta(hours=1)) & (pl.col("ts") <= t))[c]
            want = rows.drop_nulls()
            if want.len() == 0:
                assert r[c][k] is None, (c, t)  # samples, but no value in them
            else:
                assert r[c][k] == pytest.approx(float(np.mean(want.to_numpy())), rel=1e-12)
    assert r.filter(pl.col("ts") == T0 + timedelta(hours=3))["value"].to_list() == [None]


RESAMPLE_DIGEST = """
import hashlib, sys
from datetime import UTC, datetime, timedelta
import numpy as np, polars as pl
from predops.features.demand import HOURLY, resample_demand
rng = np.random.default_rng(7)
n_series, per_hour, hours = 40, 60, 24
t0 = datetime(2026, 3, 2, tzinfo=UTC)
k = np.arange(n_series * per_hour * hours)
frame = pl.DataFrame({
    "series_id": [f"s{i}" for i in k % n_series],
    "ts": [t0 + timedelta(minutes=int(m) + 1) for m in k // n_series],
    "value": rng.lognormal(3.0, 1.5, k.size),
    "running": rng.lognormal(3.0, 1.5, k.size),
    "pending": rng.lognormal(0.0, 2.0, k.size),
    "capacity": rng.lognormal(4.0, 1.0, k.size),
    "pool": "p", "resource": "gpus", "gpu_model": None,
}).with_columns(pl.col("gpu_model").cast(pl.String)).sample(fraction=1.0, shuffle=True, seed=3)
out = resample_demand(frame.lazy(), HOURLY).collect()
cols = ("value", "running", "pending", "capacity")
sys.stdout.write(hashlib.sha256(b"".join(out[c].to_numpy().tobytes() for c in cols)).hexdigest())
"""


def test_the_same_rows_resample_to_the_same_bits_in_every_process() -> None:
    """A forecast cache keyed on the grid's digest, and a backtest's figures, need the
    same bucket means in every process (polars' group-by mean differed in the last bit
    between processes: summation order)."""
    import subprocess
    import sys

    digests = {
        subprocess.run(
            [sys.executable, "-c", RESAMPLE_DIGEST],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        ).stdout
        for _ in range(3)
    }
    assert len(digests) == 1 and len(next(iter(digests))) == 64
