"""Drive-day rows: last value carried forward, increases, recency, labels, no future."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from predops.core.schemas import DRIVE_SMART, EVENTS
from predops.models.failure.drives import drive_features, model_family

D0 = datetime(2015, 1, 1, tzinfo=UTC)


def smart(rows: list[tuple[str, int, float, float]]) -> pl.DataFrame:
    """(serial, day, smart_5, smart_197) snapshots in the drive_smart contract."""
    base = DRIVE_SMART.empty()
    data = pl.DataFrame(
        {
            "ts": [D0 + timedelta(days=d) for _, d, _, _ in rows],
            "node_id": [s for s, _, _, _ in rows],
            "model": ["ST4000DM000"] * len(rows),
            "capacity_bytes": [4_000_787_030_016] * len(rows),
            "power_on_hours": [1000.0 + 24 * d for _, d, _, _ in rows],
            "smart_5_raw": [a for _, _, a, _ in rows],
            "smart_197_raw": [b for _, _, _, b in rows],
        }
    )
    return pl.concat([base, data], how="diagonal_relaxed").select(DRIVE_SMART.names)


def failures(rows: list[tuple[str, int]]) -> pl.DataFrame:
    data = pl.DataFrame(
        {
            "node_id": [s for s, _ in rows],
            "kind": ["failure"] * len(rows),
            "at": [D0 + timedelta(days=d) for _, d in rows],
            "cause": ["disk"] * len(rows),
            "detail": [None] * len(rows),
        },
        schema_overrides={"detail": pl.String},
    )
    return pl.concat([EVENTS.empty(), data], how="diagonal_relaxed")


@pytest.fixture
def frame() -> pl.DataFrame:
    # hds-like: drive A changes on days 0, 10, 20 and fails on day 40; B never fails.
    s = smart([("A", 0, 0, 0), ("A", 10, 8, 0), ("A", 20, 8, 3), ("B", 0, 0, 0), ("B", 60, 0, 0)])
    return drive_features(
        s, failures([("A", 40)]), stride=timedelta(days=1), horizons=(timedelta(days=30),)
    )


def row(frame: pl.DataFrame, serial: str, day: int) -> dict[str, object]:
    return frame.filter(
        (pl.col("node_id") == serial) & (pl.col("ts") == D0 + timedelta(days=day))
    ).row(0, named=True)


def test_values_are_carried_forward_and_increases_look_back(frame: pl.DataFrame) -> None:
    r = row(frame, "A", 15)
    assert r["smart_5_raw__last"] == 8
    assert r["smart_5_raw__increase_7d"] == 8  # day 8 still showed 0
    assert r["smart_5_raw__days_since_increase"] == 5
    r = row(frame, "A", 25)
    assert r["smart_5_raw__increase_7d"] == 0
    assert r["smart_197_raw__increase_30d"] == 3  # since the first snapshot
    assert r["drive__power_on_hours"] == pytest.approx(1000 + 24 * 25)
    assert row(frame, "B", 30)["smart_5_raw__days_since_increase"] is None


def test_rule_counter_history_and_restlessness(frame: pl.DataFrame) -> None:
    # A: smart_5 0 -> 8 on day 10, smart_197 0 -> 3 on day 20.
    r = row(frame, "A", 25)
    assert r["smart_5_raw__days_since_nonzero"] == 15
    assert r["smart_197_raw__days_since_nonzero"] == 5
    assert r["smart_rule__nonzero"] == 2 and r["smart_rule__total"] == 11
    assert r["drive__days_since_growth"] == 5
    assert r["drive__growth_snapshots_30d"] == 2  # days 10 and 20
    assert r["drive__days_since_snapshot"] == 5
    assert r["drive__family"] == "ST"
    assert row(frame, "A", 11)["smart_5_raw__increase_1d"] == 0  # grew on day 10, not 11
    assert row(frame, "A", 10)["smart_5_raw__increase_1d"] == 8
    later = row(frame, "A", 39)  # 19 days after the day-20 growth, 29 after day 10
    assert later["drive__growth_snapshots_30d"] == 2
    b = row(frame, "B", 30)
    assert b["smart_5_raw__days_since_nonzero"] is None
    assert b["smart_rule__nonzero"] == 0 and b["drive__days_since_growth"] is None
    assert b["drive__growth_snapshots_90d"] == 0


def test_labels_and_rows_stop_at_the_failure(frame: pl.DataFrame) -> None:
    assert row(frame, "A", 9)["fails_within_30d"] == 0  # failure on day 40 is 31 d away
    assert row(frame, "A", 10)["fails_within_30d"] == 1
    assert row(frame, "A", 39)["fails_within_30d"] == 1
    a = frame.filter(pl.col("node_id") == "A")
    assert a["ts"].max() == D0 + timedelta(days=40)
    assert not row(frame, "A", 40)["usable"]
    # B: labels known only while day + 30 <= the last day seen (60).
    assert row(frame, "B", 30)["fails_within_30d"] == 0
    assert row(frame, "B", 31)["fails_within_30d"] is None


def test_a_later_snapshot_never_changes_an_earlier_row(frame: pl.DataFrame) -> None:
    s = smart(
        [
            ("A", 0, 0, 0),
            ("A", 10, 8, 0),
            ("A", 20, 8, 3),
            ("A", 22, 500, 9),
            ("B", 0, 0, 0),
            ("B", 60, 0, 0),
        ]
    )
    later = drive_features(
        s, failures([("A", 40)]), stride=timedelta(days=1), horizons=(timedelta(days=30),)
    )
    for day in range(0, 22):
        assert row(later, "A", day) == row(frame, "A", day), day
    assert row(later, "A", 22)["smart_5_raw__last"] == 500


def test_a_stride_samples_grid_days_shared_by_all_drives() -> None:
    s = smart([("A", 0, 0, 0), ("A", 29, 1, 0), ("B", 3, 0, 0), ("B", 29, 0, 0)])
    f = drive_features(s, failures([]), stride=timedelta(days=7))
    days = set(f["ts"].to_list())
    assert len(days) <= 5
    assert all(((d - datetime(2000, 1, 1, tzinfo=UTC)).days % 7) == 0 for d in days)


def test_model_family_is_the_vendor_prefix() -> None:
    models = pl.Series("m", ["ST4000DM000", "WDC WD30EFRX", "Hitachi HDS5C3030ALA630", None])
    fam = pl.select(model_family(pl.lit(models))).to_series().cast(pl.String).to_list()
    assert fam == ["ST", "WDC", "Hitachi", None]


def test_fleet_model_failure_rate_counts_only_failures_seen_so_far() -> None:
    # A, B, C are one model, D another; A fails on day 40.
    s = smart([(d, day, 0, 0) for d in "ABCD" for day in (0, 60)]).with_columns(
        pl.when(pl.col("node_id") == "D")
        .then(pl.lit("WDC WD30EFRX"))
        .otherwise(pl.col("model"))
        .alias("model")
    )
    s = s.filter(~((pl.col("node_id") == "A") & (pl.col("ts") > D0 + timedelta(days=40))))
    f = drive_features(s, failures([("A", 40)]), stride=timedelta(days=1))
    rate = "fleet__model_afr_90d"
    assert row(f, "B", 39)[rate] == 0
    # Day 40: one failure over 3 drives x 41 grid days of the model.
    assert row(f, "B", 40)[rate] == pytest.approx(365.25 / 123, rel=1e-5)
    assert row(f, "C", 60)[rate] == pytest.approx(365.25 / (41 + 61 + 61), rel=1e-5)
    assert row(f, "D", 50)[rate] == 0
    # A failure after the day never shows: the same fleet with A failing on day 55.
    later = drive_features(
        smart([(d, day, 0, 0) for d in "ABC" for day in (0, 60)]),
        failures([("A", 55)]),
        stride=timedelta(days=1),
    )
    for day in range(0, 55):
        assert row(later, "B", day)[rate] == 0, day
