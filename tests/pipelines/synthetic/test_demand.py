"""Demand: daily and weekly seasonality, trend, promotions from the calendar, pending
only above capacity; pods that realise it (gangs, fractional GPUs, priorities)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl

from predops.pipelines.synthetic import calibration as cal
from predops.pipelines.synthetic.demand import promotions
from predops.pipelines.synthetic.noise import stream

LOCAL = timedelta(hours=cal.LOCAL_UTC_OFFSET_H)


def _outside_promotions(d: pl.DataFrame, calendar: pl.DataFrame) -> pl.DataFrame:
    """Rows not within a day of any promotion."""
    mask = pl.lit(True)
    for a, b in calendar.select("starts_at", "ends_at").unique().iter_rows():
        mask = mask & ~pl.col("ts").is_between(a - timedelta(hours=6), b + timedelta(hours=12))
    return d.filter(mask)


def _series(frames: dict[str, pl.DataFrame], series_id: str) -> pl.DataFrame:
    d = frames["demand"].filter(pl.col("series_id") == series_id)
    return d.with_columns((pl.col("ts") + LOCAL).alias("local"))


def test_daily_cycle_matches_the_calibrated_amplitude(
    default_frames: dict[str, pl.DataFrame],
) -> None:
    for series_id, amp, peak in (
        ("online/cpu_cores", cal.AZURE_DAILY_AMPLITUDE, 21),
        ("bigdata/cpu_cores", cal.ALIBABA2018_DAILY_AMPLITUDE, 2),
    ):
        d = _outside_promotions(_series(default_frames, series_id), default_frames["calendar"])
        prof = d.group_by(pl.col("local").dt.hour().alias("h")).agg(pl.col("value").mean())
        v = prof.sort("h")["value"].to_numpy()
        measured = (v.max() - v.min()) / v.mean()
        assert abs(measured - amp) < 0.5 * amp + 0.03, (series_id, measured, amp)
        peak_h = int(prof.sort("value")["h"][-1])
        assert min(abs(peak_h - peak), 24 - abs(peak_h - peak)) <= 3, (series_id, peak_h)


def test_weekends_are_quieter_for_online_services(default_frames: dict[str, pl.DataFrame]) -> None:
    d = _outside_promotions(_series(default_frames, "online/cpu_cores"), default_frames["calendar"])
    weekend = d.filter(pl.col("local").dt.weekday() >= 6)["value"].mean()
    weekday = d.filter(pl.col("local").dt.weekday() < 6)["value"].mean()
    assert isinstance(weekend, float) and isinstance(weekday, float)
    assert weekend / weekday < 0.97


def test_promotion_in_the_calendar_is_a_peak_with_pending_demand(
    default_frames: dict[str, pl.DataFrame],
) -> None:
    cal_ = default_frames["calendar"]
    mega = cal_.filter(pl.col("name").str.starts_with("mega-sale") & (pl.col("scope") == "online"))
    assert mega.height == 1 and mega["magnitude"][0] > 1.5
    start = mega["starts_at"][0]
    d = _series(default_frames, "online/cpu_cores")
    peak = d.filter(pl.col("ts").is_between(start, start + timedelta(hours=3)))
    before = d.filter(
        pl.col("ts").is_between(
            start - timedelta(days=3, hours=1), start - timedelta(days=2, hours=21)
        )
    )
    assert peak["value"].max() > 1.8 * before["value"].mean()  # type: ignore[operator]
    assert peak["pending"].max() > 0  # type: ignore[operator]
    # Promotions are in the calendar for several pools.
    assert set(cal_["scope"]) >= {"online", "inference", "bigdata"}


def test_pending_only_when_demand_exceeds_capacity(default_frames: dict[str, pl.DataFrame]) -> None:
    d = default_frames["demand"]
    assert (d["pending"] > 0).sum() > 0
    over = d["value"] > d["capacity"]
    assert ((d["pending"] > 0) == over).all()
    assert (d["running"] <= d["capacity"] + 1e-9).all()
    assert np.allclose(d["running"] + d["pending"], d["value"], atol=2e-3)


def test_training_demand_is_calibrated_on_helios(default_frames: dict[str, pl.DataFrame]) -> None:
    d = default_frames["demand"].filter(pl.col("pool") == "training")
    pending_share = float(d["pending"].to_numpy().sum() / d["value"].to_numpy().sum())
    assert 0.03 < pending_share < 0.2, pending_share
    utilisation = float(d["running"].to_numpy().sum() / d["capacity"].to_numpy().sum())
    assert 0.55 < utilisation < 0.85, utilisation
    daily = d.sort("ts").group_by_dynamic("ts", every="1d").agg(pl.col("value").sum()).sort("ts")
    v = daily["value"].to_numpy()
    assert v[-4:-1].mean() > v[1:4].mean(), "training demand grows (Helios trend)"


def test_capacity_drops_while_nodes_are_down(default_frames: dict[str, pl.DataFrame]) -> None:
    d = default_frames["demand"]
    nominal = d.group_by("series_id").agg(pl.col("capacity").max())
    dips = d.join(nominal, on="series_id", suffix="_max").filter(
        pl.col("capacity") < pl.col("capacity_max")
    )
    assert dips["series_id"].n_unique() >= 3


def test_pods_have_gangs_fractional_gpus_and_priorities(
    default_frames: dict[str, pl.DataFrame],
) -> None:
    pods = default_frames["pods"]
    gangs = pods.filter(pl.col("gang_id").is_not_null())
    assert gangs.height > 0
    per_gang = gangs.group_by("gang_id").agg(
        pl.len(),
        pl.col("gang_size").first(),
        pl.col("created_at").n_unique().alias("t"),
        pl.col("node_id").drop_nulls().n_unique().alias("nodes"),
        pl.col("node_id").drop_nulls().len().alias("placed"),
    )
    assert (per_gang["len"] == per_gang["gang_size"]).all()
    assert (per_gang["t"] == 1).all()
    assert (per_gang["nodes"] == per_gang["placed"]).all(), "gang members share a node"
    assert (gangs["num_gpu"] == 8).all()
    inference = pods.filter(pl.col("pool") == "inference")
    shared = (inference["gpu_milli"] < 1000).mean()
    assert isinstance(shared, float)
    assert abs(shared - cal.OPENB_GPU_SHARE_PODS) < 0.05
    prio = pods.group_by("pool").agg(pl.col("priority").first())
    assert prio["priority"].n_unique() == 4
    assert set(pods["phase"]) >= {"Succeeded", "Running", "Failed"}


def test_pods_add_up_to_the_demand(default_frames: dict[str, pl.DataFrame]) -> None:
    """Requests of the big-data pods alive at each sample track the series' demand."""
    d = default_frames["demand"].filter(pl.col("series_id") == "bigdata/cpu_cores").sort("ts")
    ts = d["ts"]
    pods = default_frames["pods"].filter(pl.col("pool") == "bigdata")
    end = ts[-1] + timedelta(minutes=5)
    start = pods["created_at"].to_numpy().astype("datetime64[us]").astype(np.int64)
    stop = pods["deleted_at"].fill_null(end).to_numpy().astype("datetime64[us]").astype(np.int64)
    grid = ts.to_numpy().astype("datetime64[us]").astype(np.int64)
    cores = pods["cpu_milli"].to_numpy() / 1000.0
    alive = np.zeros(grid.size + 1)
    np.add.at(alive, np.searchsorted(grid, start, side="left"), cores)
    np.add.at(alive, np.searchsorted(grid, stop, side="left"), -cores)
    load = np.cumsum(alive)[:-1]
    value = d["value"].to_numpy()
    warm = slice(288, None)  # after the first day (pods already running are approximated)
    corr = np.corrcoef(load[warm], value[warm])[0, 1]
    assert corr > 0.8, corr
    assert 0.7 < load[warm].mean() / value[warm].mean() < 1.3


def test_double_11_comes_from_the_calendar_date() -> None:
    start = datetime(2026, 11, 5, tzinfo=UTC)
    promos = promotions(start, 10 * 86400.0, stream(1, "demand", 1))
    d11 = [p for p in promos if p.name == "double11-2026"]
    assert len(d11) == 1, [p.name for p in promos]
    # Local midnight (UTC+8) of 11 November.
    assert start + timedelta(seconds=d11[0].start) == datetime(2026, 11, 10, 16, tzinfo=UTC)
    assert d11[0].magnitude["online"] == max(m["online"] for m in cal.PROMOTION_MAGNITUDE.values())
    assert not any(p.name.startswith("mega-sale") for p in promos)
