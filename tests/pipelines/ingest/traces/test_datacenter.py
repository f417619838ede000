"""datacenter: the real DataCenter-Traces tree, re-ingest, and hand-made files."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
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

ALIBABA_COLS = ["cpu_util_percent", "mem_util_percent", "net_in", "net_out", "disk_io_percent"]
GOOGLE_COLS = ["avg_cpu", "avg_mem", "avg_assigned_mem", "avg_cycles_per_instruction"]
NOT_METRICS = {"timestamp", "hour"}


@pytest.fixture(scope="module")
def tree(shared_data: Path) -> Path:
    return shared_data / "datacenter-traces"


@pytest.fixture(scope="module")
def real(tree: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    ws = tmp_path_factory.mktemp("datacenter")
    return ws, cli_ingest(ws, "datacenter", tree)


def test_real_tree(real: tuple[Path, dict[str, Any]], tree: Path) -> None:
    ws, report = real
    files = sorted(p for p in tree.rglob("*") if p.name.endswith((".csv", ".csv.gz")))
    frames = {p: pl.read_csv(p) for p in files}
    cells = sum(f.height * len(set(f.columns) - NOT_METRICS) for f in frames.values())
    # alibaba2018 day files: 8,640 / 2,880 / 288 buckets per day (PROVENANCE.md); rows
    # beyond that (day 1 has one more) are quarantined, one per metric.
    per_day = {"10": 8640, "30": 2880, "300": 288}
    alibaba = {p: f for p, f in frames.items() if p.name.startswith("machine_usage")}
    overflow = sum(
        max(0, f.height - per_day[p.name.split("_grouped_")[1].split("_")[0]]) * 5
        for p, f in alibaba.items()
    )
    kept_alibaba = sum(
        min(f.height, per_day[p.name.split("_grouped_")[1].split("_")[0]]) * 5
        for p, f in alibaba.items()
    )
    # google2019 days 1-21 and azure_v2 weeks 1-3 at 5 min: 6,048 buckets per series,
    # whether they come from day files, week files or both.
    distinct = kept_alibaba + 4 * 6048 + 2 * 6048
    d = report["tables"]["demand"]
    assert overflow == 15
    assert d["rows_in"] == cells
    assert d["rows_quarantined"] == overflow
    assert d["rows_written"] == distinct
    assert d["rows_already_present"] == cells - distinct - overflow
    q = Lake(ws / "lake").read_quarantine("demand")
    assert set(q["field"]) == {"ts"} and all("after the end of day 1" in r for r in q["reason"])
    stats = cli(ws, "lake", "stats")["tables"]["demand"]
    assert stats["sources"] == ["datacenter"] and stats["rows"] == distinct


def test_real_day_and_week_files_agree_in_the_lake(
    real: tuple[Path, dict[str, Any]], tree: Path
) -> None:
    ws, _ = real
    lake = Lake(ws / "lake")
    days = pl.concat([pl.read_csv(p) for p in sorted(tree.glob("google2019/*/*_day_*.csv"))])
    cpu = (
        lake.scan("demand")
        .filter(pl.col("series_id") == "datacenter/google2019/300s/avg_cpu")
        .sort("ts")
        .collect()
    )
    assert cpu["value"].to_list() == days["avg_cpu"].to_list()
    assert cpu["ts"][0] == datetime(2019, 5, 1, tzinfo=UTC)
    assert cpu["ts"].diff().drop_nulls().unique().to_list() == [timedelta(minutes=5)]
    week2 = pl.read_csv(
        tree / "azure_v2" / "week2" / "vm_cpu_readings_week2_aggregated_cpu_mem.csv"
    )
    az = (
        lake.scan("demand")
        .filter(pl.col("series_id") == "datacenter/azure_v2/300s/cpu_usage")
        .sort("ts")
        .collect()
    )
    epoch = datetime(2019, 1, 1, tzinfo=UTC)
    want = [epoch + timedelta(seconds=s) for s in week2["timestamp"]]
    got = az.filter(pl.col("ts").is_in(want))
    assert got["value"].to_list() == week2["cpu_usage"].to_list()


def test_real_reingest_adds_nothing(real: tuple[Path, dict[str, Any]], tree: Path) -> None:
    ws, first = real
    d = cli_ingest(ws, "datacenter", tree)["tables"]["demand"]
    assert d["rows_written"] == 0 and d["rows_quarantined"] == 0
    assert d["rows_already_present"] == d["rows_in"] - first["tables"]["demand"]["rows_quarantined"]


def test_hand_made_alibaba_day_quarantines_abnormal_values(
    tmp_path: Path, lake: Lake, clock: FixedClock
) -> None:
    f = write_csv(
        tmp_path / "mine" / "day_2" / "machine_usage_day_2_grouped_300_seconds.csv.gz",
        ALIBABA_COLS,
        [
            [20.5, 80.0, 30.0, 25.0, 4.0],
            [101, 81.0, 30.0, 25.0, 4.0],
            [21.0, 82.0, 30.0, 25.0, -1],
        ],
    )
    rep = run_adapter(lake, clock, "datacenter", f.parent.parent, alibaba2018_epoch="2020-03-01")
    assert rep.tables["demand"].rows_written == 13
    assert quarantined(lake, "demand") == [
        (2, "value", "cannot read 101 (out of range 0..100 %) as Float64"),
        (3, "value", "cannot read -1 (out of range 0..100 %) as Float64"),
    ]
    cpu = rows(lake, "demand").filter(pl.col("resource") == "cpu_util_percent").sort("ts")
    day2 = datetime(2020, 3, 2, tzinfo=UTC)  # day 2 of a trace placed at 2020-03-01
    assert cpu.select("series_id", "ts", "value", "capacity").rows() == [
        ("datacenter/alibaba2018/300s/cpu_util_percent", day2, 20.5, 100.0),
        ("datacenter/alibaba2018/300s/cpu_util_percent", day2 + timedelta(minutes=10), 21.0, 100.0),
    ]


def test_hand_made_day_and_week_dedupe_and_conflicts_are_kept_apart(
    tmp_path: Path, lake: Lake, clock: FixedClock
) -> None:
    day = [[0.40, 0.3, 0.6, 150.0], [0.41, 0.3, 0.6, 151.0]]
    week = [[0.40, 0.3, 0.6, 150.0], [0.41, 0.3, 0.6, 999.0], [0.5, 0.3, 0.6, 152.0]]
    write_csv(tmp_path / "g" / "instance_usage_grouped_300_seconds_day_01.csv", GOOGLE_COLS, day)
    write_csv(tmp_path / "g" / "instance_usage_grouped_300_seconds_week1.csv.gz", GOOGLE_COLS, week)
    rep = run_adapter(lake, clock, "datacenter", tmp_path / "g")
    d = rep.tables["demand"]
    assert (d.rows_in, d.rows_written, d.rows_already_present, d.rows_quarantined) == (20, 12, 7, 1)
    [(row, field, reason)] = quarantined(lake, "demand")
    assert (row, field) == (2, "value")
    assert (
        "999.0 (conflicts with 151.0 in instance_usage_grouped_300_seconds_day_01.csv row 2)"
        in reason
    )
    cpi = rows(lake, "demand").filter(pl.col("resource") == "avg_cycles_per_instruction")
    assert sorted(cpi["value"]) == [150.0, 151.0, 152.0]


def test_hand_made_hour_column_must_match_position(
    tmp_path: Path, lake: Lake, clock: FixedClock
) -> None:
    rows_ = [[0, 0.4, 0.3, 0.6, 150.0]] * 12 + [[5, 0.4, 0.3, 0.6, 150.0]]
    f = write_csv(
        tmp_path / "instance_usage_grouped_300_seconds_week1_with_hour.csv",
        ["hour", *GOOGLE_COLS],
        rows_,
    )
    rep = run_adapter(lake, clock, "datacenter", f)
    assert rep.tables["demand"].rows_quarantined == 4
    assert {(r, fld) for r, fld, _ in quarantined(lake, "demand")} == {(13, "ts")}
    assert all(
        "hour column says 5 but bucket 13 falls in hour 1" in reason
        for _, _, reason in quarantined(lake, "demand")
    )


def test_unknown_file_name_is_refused(tmp_path: Path, lake: Lake, clock: FixedClock) -> None:
    write_csv(
        tmp_path / "d" / "machine_usage_day_1_grouped_300_seconds.csv",
        ALIBABA_COLS,
        [[1, 2, 3, 4, 5]],
    )
    write_csv(tmp_path / "d" / "usage.csv", ALIBABA_COLS, [[1, 2, 3, 4, 5]])
    with pytest.raises(IngestError, match=r"usage\.csv: unrecognised file name; expected"):
        run_adapter(lake, clock, "datacenter", tmp_path / "d")
    assert not lake.files("demand")
