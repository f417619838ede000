"""backblaze-hds: the real start-stop table, re-ingest, and a hand-made table."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from predops.core.clock import FixedClock
from predops.models.failure.drives import drive_features
from predops.pipelines.ingest.batch import IngestError
from predops.pipelines.workspace.lake import Lake
from tests.pipelines.ingest.traces.builders import (
    cli,
    cli_ingest,
    quarantined,
    rows,
    run_adapter,
    write_csv,
)

HEADER = [
    "serial_number",
    "model",
    "manufacturer",
    "n_fails",
    "n_records",
    "size_tb",
    "min_date",
    "max_date",
    "min_hours",
    "max_hours",
    "tstart",
    "tstop",
    "fails",
    "smart_5",
    "smart_10",
    "smart_12",
    "smart_187",
    "smart_188",
    "smart_189",
    "smart_196",
    "smart_197",
    "smart_198",
    "smart_197_bin",
]


def drive_row(
    serial: str,
    dates: tuple[str, str],
    hours: tuple[int, int],
    t: tuple[Any, Any],
    fails: str,
    smart_5: str = "0.0",
) -> list[object]:
    return [
        serial,
        "ST4000DM000",
        "ST",
        0,
        3,
        4.0,
        *dates,
        *hours,
        *t,
        fails,
        smart_5,
        "0.0",
        "5.0",
        "",
        "0.0",
        "",
        "",
        "0.0",
        "",
        "False",
    ]


@pytest.fixture(scope="module")
def hds_file(shared_data: Path) -> Path:
    return shared_data / "backblaze" / "dynamichazard-hds" / "hds.csv.gz"


@pytest.fixture(scope="module")
def real(hds_file: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    ws = tmp_path_factory.mktemp("bb_hds")
    return ws, cli_ingest(ws, "backblaze-hds", hds_file)


def _superseded(hds_file: Path) -> int:
    """Intervals that land on their drive's last day behind a later one, counted from the
    raw table: all but the latest of those whose hours reach past ``max_date``."""
    raw = pl.read_csv(
        hds_file,
        columns=["serial_number", "min_date", "max_date", "min_hours", "tstart"],
        schema_overrides={"min_date": pl.Date, "max_date": pl.Date},
    )
    hours_left = (pl.col("max_date") - pl.col("min_date")).dt.total_hours()
    late = raw.filter(pl.col("tstart") - pl.col("min_hours") >= hours_left)
    return late.height - late["serial_number"].n_unique()


def test_real_table_matches_provenance(real: tuple[Path, dict[str, Any]], hds_file: Path) -> None:
    ws, report = real
    smart, events = report["tables"]["drive_smart"], report["tables"]["events"]
    # PROVENANCE.md: 536,290 rows, 48,830 drives, 4,702 failures, 2013-04-10 -> 2016-09-30.
    superseded = _superseded(hds_file)
    assert smart["rows_in"] == 536_290 and 0 < superseded < 100
    assert smart["rows_written"] == 536_290 - superseded
    assert smart["rows_quarantined"] == superseded
    reasons = Lake(ws / "lake").read_quarantine("drive_smart")["reason"]
    assert reasons.str.contains("superseded: tstart=").all()
    assert events["rows_in"] == events["rows_written"] == 4_702
    assert events["rows_quarantined"] == 0
    stats = cli(ws, "lake", "stats")["tables"]
    assert stats["drive_smart"]["rows"] == 536_290 - superseded
    assert stats["drive_smart"]["time_min"].startswith("2013-04-10")
    assert stats["events"]["time_max"].startswith("2016-09-30")
    n = Lake(ws / "lake").scan("drive_smart").select(pl.col("node_id").n_unique()).collect()
    assert n.item() == 48_830


def test_real_times_stay_within_each_drives_recorded_days(
    real: tuple[Path, dict[str, Any]], hds_file: Path
) -> None:
    """First observation on min_date, nothing after max_date, failures on max_date
    (the raw table read independently here)."""
    ws, _ = real
    raw = pl.read_csv(
        hds_file,
        columns=["serial_number", "min_date", "max_date", "fails"],
        schema_overrides={"min_date": pl.Date, "max_date": pl.Date},
    )
    drives = (
        raw.group_by("serial_number")
        .agg(
            pl.col("min_date").first(),
            pl.col("max_date").first(),
            (pl.col("fails") == 1).any().alias("failed"),
        )
        .rename({"serial_number": "node_id"})
    )
    lake = Lake(ws / "lake")
    seen = (
        lake.scan("drive_smart")
        .group_by("node_id")
        .agg(pl.col("ts").min().alias("first"), pl.col("ts").max().alias("last"))
        .collect()
    )
    j = drives.join(seen, on="node_id", how="inner")
    assert j.height == drives.height
    assert j.filter(pl.col("first").dt.date() != pl.col("min_date")).height == 0
    assert j.filter(pl.col("last").dt.date() > pl.col("max_date")).height == 0
    ev = rows(lake, "events").join(drives, on="node_id", how="left")
    assert ev.height == drives["failed"].sum()
    assert ev.filter(pl.col("at") != pl.col("max_date").cast(pl.Datetime("us", "UTC"))).height == 0


def test_real_reingest_adds_nothing(real: tuple[Path, dict[str, Any]], hds_file: Path) -> None:
    ws, _ = real
    kept = Lake(ws / "lake").read_quarantine("drive_smart").height
    again = cli_ingest(ws, "backblaze-hds", hds_file.parent)
    for t in again["tables"].values():
        assert t["rows_written"] == 0
        assert t["rows_already_present"] + t["rows_quarantined"] == t["rows_in"]
    # The superseded rows are found again, the same ones.
    assert again["tables"]["drive_smart"]["rows_quarantined"] == kept


def test_hand_made_table_places_hours_from_the_first_observation(
    tmp_path: Path, lake: Lake, clock: FixedClock
) -> None:
    f = write_csv(
        tmp_path / "mine" / "drives.csv",
        HEADER,
        [
            # A: 240 power-on hours over 10 calendar days: hours are wall-clock hours.
            drive_row("A", ("2020-01-01", "2020-01-11"), (1000, 1240), (1000, 1100), "0.0"),
            drive_row("A", ("2020-01-01", "2020-01-11"), (1000, 1240), (1100, 1240), "1.0", "8.0"),
            # B: 240 power-on hours over 20 days (powered off half the time): the rows
            # are where the hours put them; B goes quiet before its last day.
            drive_row("B", ("2020-01-01", "2020-01-21"), (0, 240), (0, 120), "0.0"),
            drive_row("B", ("2020-01-01", "2020-01-21"), (0, 240), (120, 240), "1.0"),
            # C: an unreadable tstart.
            drive_row("C", ("2020-01-01", "2020-01-05"), (0, 96), ("x", 96), "0.0"),
            # D: 240 hours in 2 days (a SMART 9 jump): the late row waits for the last day.
            drive_row("D", ("2020-01-01", "2020-01-03"), (0, 240), (0, 120), "0.0"),
            drive_row("D", ("2020-01-01", "2020-01-03"), (0, 240), (120, 200), "0.0"),
            drive_row("D", ("2020-01-01", "2020-01-03"), (0, 240), (200, 240), "0.0", "2.0"),
        ],
    )
    rep = run_adapter(lake, clock, "backblaze-hds", f)
    assert rep.tables["drive_smart"].rows_written == 6
    (row, field, reason), _ = quarantined(lake, "drive_smart")
    assert (row, field) == (5, "ts")
    assert "tstart=x" in reason and "min_date=2020-01-01" in reason
    got = rows(lake, "drive_smart").sort("node_id", "ts")
    day0 = datetime(2020, 1, 1, tzinfo=UTC)
    assert got.select("node_id", "ts", "power_on_hours", "smart_5_raw").rows() == [
        ("A", day0, 1000.0, 0.0),
        ("A", day0 + timedelta(hours=100), 1100.0, 8.0),
        ("B", day0, 0.0, 0.0),
        ("B", day0 + timedelta(hours=120), 120.0, 0.0),
        ("D", day0, 0.0, 0.0),
        ("D", day0 + timedelta(days=2), 200.0, 2.0),  # the latest of the late rows
    ]
    assert got["capacity_bytes"].null_count() == 6  # size_tb is too coarse to convert
    [(row, field, reason)] = [q for q in quarantined(lake, "drive_smart") if q[0] != 5]
    assert (row, field) == (7, "ts") and "superseded: tstart=120" in reason
    ev = rows(lake, "events").sort("node_id")
    assert ev.select("node_id", "kind", "at", "detail").rows() == [
        ("A", "failure", datetime(2020, 1, 11, tzinfo=UTC), "drives.csv row 2"),
        ("B", "failure", datetime(2020, 1, 21, tzinfo=UTC), "drives.csv row 4"),
    ]


def _drive_frame(tmp_path: Path, name: str, table: list[list[object]]) -> pl.DataFrame:
    """The drive-day features (7-day stride, 30-day labels) of an hds table, through the
    adapter and a lake of its own."""
    lake = Lake(tmp_path / name / "lake")
    f = write_csv(tmp_path / name / "hds.csv", HEADER, table)
    run_adapter(lake, FixedClock(datetime(2021, 1, 1, tzinfo=UTC)), "backblaze-hds", f)
    smart, events = rows(lake, "drive_smart"), rows(lake, "events")
    return drive_features(
        smart,
        events,
        stride=timedelta(days=7),
        cutoff=datetime(2020, 12, 31, tzinfo=UTC),
        smart_ids=(5,),
    )


def test_no_feature_depends_on_rows_after_its_time(tmp_path: Path) -> None:
    """Two lives of one drive, identical for its first 2,000 power-on hours: one keeps
    running and is last seen in December, the other is switched off for months and fails
    in June. Every feature of every day before hour 2,000 is the same in both: nothing
    that happens later (the end date, the hour count, the failure) moves earlier rows."""
    first = ("2020-01-01", "")
    early = [((0, 1000), "0.0"), ((1000, 2000), "3.0")]

    def life(last_day: str, last_hour: int, failed: bool) -> list[list[object]]:
        late = [((2000, last_hour), "40.0" if failed else "3.0")]
        return [
            drive_row(
                "S1",
                (first[0], last_day),
                (0, last_hour),
                t,
                "1.0" if failed and t[1] == last_hour else "0.0",
                smart_5,
            )
            for t, smart_5 in early + late
        ]

    kept = _drive_frame(tmp_path, "kept", life("2020-12-20", 8500, failed=False))
    failed = _drive_frame(tmp_path, "failed", life("2020-06-30", 2600, failed=True))
    known_until = datetime(2020, 1, 1, tzinfo=UTC) + timedelta(hours=2000)
    feats = [c for c in kept.columns if "__" in c and not c.startswith("fails_within")]
    before = [f.filter(pl.col("ts") < known_until).select("ts", *feats) for f in (kept, failed)]
    assert before[0].height >= 10
    assert before[0].equals(before[1])
    # The labels do differ: they are allowed to know the future.
    assert failed["fails_within_30d"].sum() > 0 == kept["fails_within_30d"].sum()


def test_wrong_format_is_refused_naming_the_file(
    tmp_path: Path, lake: Lake, clock: FixedClock
) -> None:
    f = write_csv(tmp_path / "hds.csv", ["serial_number", "model", "tstart"], [["A", "M", "1"]])
    with pytest.raises(IngestError, match=r"hds\.csv: not a Backblaze start-stop hds table"):
        run_adapter(lake, clock, "backblaze-hds", f)
