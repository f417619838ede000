"""backblaze-daily: the 40 real 2013 daily files, re-ingest, and hand-made files."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from predops.core.clock import FixedClock
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
    "date",
    "serial_number",
    "model",
    "capacity_bytes",
    "failure",
    "smart_1_normalized",
    "smart_1_raw",
    "smart_5_raw",
    "smart_9_raw",
    "smart_194_raw",
    "smart_197_raw",
]


@pytest.fixture(scope="module")
def daily_dir(shared_data: Path) -> Path:
    return shared_data / "backblaze" / "raw-daily-2013"


@pytest.fixture(scope="module")
def real(daily_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    ws = tmp_path_factory.mktemp("bb_daily")
    return ws, cli_ingest(ws, "backblaze-daily", daily_dir)


def test_real_files_match_provenance(real: tuple[Path, dict[str, Any]]) -> None:
    ws, report = real
    smart, events = report["tables"]["drive_smart"], report["tables"]["events"]
    # PROVENANCE.md: 868,524 rows, 22,892 drives, 120 failures, 2013-04-10 -> 2013-05-19.
    assert smart["rows_in"] == smart["rows_written"] == 868_524
    assert events["rows_in"] == events["rows_written"] == 120
    assert smart["rows_quarantined"] == events["rows_quarantined"] == 0
    lake = Lake(ws / "lake")
    s = (
        lake.scan("drive_smart")
        .select(
            pl.col("node_id").n_unique().alias("drives"),
            pl.col("ts").min().alias("first"),
            pl.col("ts").max().alias("last"),
            pl.col("ts").dt.time().n_unique().alias("times_of_day"),
        )
        .collect()
        .row(0, named=True)
    )
    assert s["drives"] == 22_892
    assert s["first"] == datetime(2013, 4, 10, tzinfo=UTC)
    assert s["last"] == datetime(2013, 5, 19, tzinfo=UTC)
    assert s["times_of_day"] == 1
    stats = cli(ws, "lake", "stats")["tables"]
    assert stats["drive_smart"]["rows"] == 868_524
    assert stats["drive_smart"]["partitions"] == 40
    assert stats["events"]["rows"] == 120
    assert stats["events"]["sources"] == ["backblaze-daily"]


def test_real_failures_are_the_flagged_rows(
    real: tuple[Path, dict[str, Any]], daily_dir: Path
) -> None:
    """Every event is a failure=1 row of the raw files (read independently here), on
    its date, with cause disk; and the SMART values of one row survive unchanged."""
    ws, _ = real
    raw = pl.concat(
        [
            pl.read_csv(
                f,
                columns=["date", "serial_number", "failure", "smart_5_raw", "smart_194_raw"],
                schema_overrides={"date": pl.Date},
            )
            for f in sorted(daily_dir.glob("*.csv.gz"))
        ]
    )
    flagged = (
        raw.filter(pl.col("failure") == 1)
        .select(
            pl.col("serial_number").alias("node_id"),
            pl.col("date").cast(pl.Datetime("us")).dt.replace_time_zone("UTC").alias("at"),
        )
        .sort("node_id")
    )
    events = rows(Lake(ws / "lake"), "events")
    assert set(events["kind"]) == {"failure"} and set(events["cause"]) == {"disk"}
    assert events.select("node_id", "at").sort("node_id").equals(flagged)
    one = raw.filter(pl.col("smart_5_raw") == pl.col("smart_5_raw").max()).row(0, named=True)
    stored = (
        Lake(ws / "lake")
        .scan("drive_smart")
        .filter(pl.col("node_id") == one["serial_number"], pl.col("ts").dt.date() == one["date"])
        .collect()
        .row(0, named=True)
    )
    assert stored["smart_5_raw"] == one["smart_5_raw"]
    assert stored["smart_194_raw"] == one["smart_194_raw"]
    assert stored["power_on_hours"] == stored["smart_9_raw"]


def test_real_reingest_adds_nothing(real: tuple[Path, dict[str, Any]], daily_dir: Path) -> None:
    ws, _ = real
    again = cli_ingest(ws, "backblaze-daily", daily_dir)
    for t in again["tables"].values():
        assert t["rows_written"] == 0 and t["rows_quarantined"] == 0
        assert t["rows_already_present"] == t["rows_in"]
    assert cli(ws, "lake", "stats")["tables"]["drive_smart"]["rows"] == 868_524


def test_hand_made_file_quarantines_the_bad_value(
    tmp_path: Path, lake: Lake, clock: FixedClock
) -> None:
    f = write_csv(
        tmp_path / "drops" / "2024-01-02.csv",
        HEADER,
        [
            ["2024-01-02", "S1", "ST4000", "4000787030016", "0", "", "7", "0", "1200", "31", "0"],
            ["2024-01-02", "S2", "ST4000", "4000787030016", "1", "", "9", "24", "1300", "35", "8"],
            ["2024-01-02", "S3", "ST4000", "4000787030016", "0", "", "3", "lots", "900", "30", "0"],
        ],
    )
    rep = run_adapter(lake, clock, "backblaze-daily", f)
    assert rep.tables["drive_smart"].rows_written == 2
    assert quarantined(lake, "drive_smart") == [(3, "smart_5_raw", "cannot read lots as Float64")]
    ev = rows(lake, "events")
    assert ev.select("node_id", "kind", "at", "cause", "detail").rows() == [
        ("S2", "failure", datetime(2024, 1, 2, tzinfo=UTC), "disk", "2024-01-02.csv row 2")
    ]
    smart = rows(lake, "drive_smart").sort("node_id")
    assert smart["smart_9_raw"].to_list() == [1200.0, 1300.0]
    assert smart["smart_187_raw"].null_count() == 2  # not in the file: null, not zero


def test_unreadable_failure_flag_is_quarantined_not_ignored(
    tmp_path: Path, lake: Lake, clock: FixedClock
) -> None:
    f = write_csv(
        tmp_path / "d.csv.gz",
        HEADER,
        [
            ["2024-01-02", "S1", "M", "1000", "0", "", "1", "0", "10", "30", "0"],
            ["2024-01-02", "S2", "M", "1000", "yes", "", "1", "0", "10", "30", "0"],
        ],
    )
    rep = run_adapter(lake, clock, "backblaze-daily", f)
    assert rep.tables["drive_smart"].rows_written == 2
    q = lake.read_quarantine("events")
    assert q.height == 1 and q["field"][0] == "kind"
    assert "unreadable failure flag 'yes'" in q["reason"][0]
    assert "d.csv.gz row 2" in q["record"][0]


def test_wrong_format_is_refused_naming_the_file(
    tmp_path: Path, lake: Lake, clock: FixedClock
) -> None:
    good = write_csv(
        tmp_path / "in" / "a.csv",
        HEADER,
        [["2024-01-02", "S1", "M", "1000", "0", "", "1", "0", "10", "30", "0"]],
    )
    write_csv(tmp_path / "in" / "b.csv", ["timestamp", "value"], [["2024-01-02", "3"]])
    with pytest.raises(IngestError, match=r"b\.csv: not a Backblaze daily.*missing column"):
        run_adapter(lake, clock, "backblaze-daily", good.parent)
    assert not lake.files("drive_smart")  # refused before anything was written
    with pytest.raises(IngestError, match="nothing: no such file"):
        run_adapter(lake, clock, "backblaze-daily", tmp_path / "nothing")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "README.md").write_text("not data")
    with pytest.raises(IngestError, match="notes: directory holds no"):
        run_adapter(lake, clock, "backblaze-daily", tmp_path / "notes")
