"""nab: the real NAB subset with its windows, re-ingest, and hand-made series."""

from __future__ import annotations

import json
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


@pytest.fixture(scope="module")
def nab_root(shared_data: Path) -> Path:
    return shared_data / "numenta-NAB"


@pytest.fixture(scope="module")
def real(nab_root: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    ws = tmp_path_factory.mktemp("nab")
    return ws, cli_ingest(ws, "nab", nab_root)


def raw_series(nab_root: Path) -> pl.DataFrame:
    """Every data row of every series, read independently of the adapter."""
    return pl.concat(
        [
            pl.read_csv(f, infer_schema=False).select(
                pl.lit(f"{f.parent.name}/{f.stem}").alias("series_id"), "timestamp", "value"
            )
            for f in sorted((nab_root / "data").rglob("*.csv"))
        ]
    )


def test_real_series_and_windows(real: tuple[Path, dict[str, Any]], nab_root: Path) -> None:
    ws, report = real
    raw = raw_series(nab_root)
    series = report["tables"]["series"]
    # Repeated timestamps within a series (the data are in US local time: on the
    # 2014-03-09 DST change one series stamps 12 readings 03:00:00) keep the first
    # reading; the repeats are quarantined as duplicate keys, none is lost.
    repeats = raw.height - raw.select("series_id", "timestamp").n_unique()
    assert repeats > 0
    assert series["rows_in"] == raw.height
    assert series["rows_quarantined"] == repeats
    assert series["rows_written"] == raw.height - repeats
    q = Lake(ws / "lake").read_quarantine("series")
    assert set(q["field"]) == {"series_id"}
    assert all(r.startswith("duplicate key") for r in q["reason"])
    windows = json.loads((nab_root / "labels" / "combined_windows.json").read_text())
    n_windows = sum(len(w) for w in windows.values())
    assert report["tables"]["anomaly_windows"]["rows_written"] == n_windows
    stats = cli(ws, "lake", "stats")["tables"]
    assert stats["series"]["sources"] == ["nab"] and stats["anomaly_windows"]["rows"] == n_windows
    taxi = rows(Lake(ws / "lake"), "series").filter(
        pl.col("series_id") == "realKnownCause/nyc_taxi"
    )
    assert taxi["ts"].min() == datetime(2014, 7, 1, tzinfo=UTC)  # naive read as UTC
    assert taxi.height == raw.filter(pl.col("series_id") == "realKnownCause/nyc_taxi").height


def test_real_reingest_adds_nothing(real: tuple[Path, dict[str, Any]], nab_root: Path) -> None:
    ws, _ = real
    again = cli_ingest(ws, "nab", nab_root)
    for t in again["tables"].values():
        assert t["rows_written"] == 0 and t["rows_quarantined"] == 0


def test_one_file_finds_its_labels_in_the_nab_tree(
    nab_root: Path, lake: Lake, clock: FixedClock
) -> None:
    one = nab_root / "data" / "realKnownCause" / "nyc_taxi.csv"
    rep = run_adapter(lake, clock, "nab", one)
    windows = json.loads((nab_root / "labels" / "combined_windows.json").read_text())
    assert rep.tables["anomaly_windows"].rows_written == len(windows["realKnownCause/nyc_taxi.csv"])
    assert set(rows(lake, "anomaly_windows")["series_id"]) == {"realKnownCause/nyc_taxi"}


def test_hand_made_series_quarantines_the_bad_value(
    tmp_path: Path, lake: Lake, clock: FixedClock
) -> None:
    f = write_csv(
        tmp_path / "elsewhere" / "myMetrics" / "cpu_a.csv",
        ["timestamp", "value"],
        [
            ["2015-01-01 00:00:00", "1.5"],
            ["2015-01-01 00:05:00", "n/a"],
            ["2015-01-01 00:10:00", "2.5"],
        ],
    )
    labels = tmp_path / "labels.json"
    labels.write_text(
        json.dumps(
            {
                "myMetrics/cpu_a.csv": [
                    ["2015-01-01 00:04:00.000000", "2015-01-01 00:09:00.000000"]
                ],
                "myMetrics/other.csv": [
                    ["2015-01-02 00:00:00.000000", "2015-01-02 01:00:00.000000"]
                ],
            }
        )
    )
    rep = run_adapter(lake, clock, "nab", f, labels=str(labels))
    assert rep.tables["series"].rows_written == 2
    assert quarantined(lake, "series") == [(2, "value", "cannot read n/a as Float64")]
    assert rows(lake, "anomaly_windows").select("series_id", "starts_at", "ends_at").rows() == [
        (
            "myMetrics/cpu_a",
            datetime(2015, 1, 1, 0, 4, tzinfo=UTC),
            datetime(2015, 1, 1, 0, 9, tzinfo=UTC),
        )
    ]


def test_without_labels_only_series_land(tmp_path: Path, lake: Lake, clock: FixedClock) -> None:
    f = write_csv(tmp_path / "cat" / "s.csv", ["timestamp", "value"], [["2015-01-01", "1"]])
    rep = run_adapter(lake, clock, "nab", f)
    assert set(rep.tables) == {"series"}


def test_wrong_format_and_bad_labels_are_refused(
    tmp_path: Path, lake: Lake, clock: FixedClock
) -> None:
    f = write_csv(tmp_path / "cat" / "s.csv", ["time", "reading"], [["2015-01-01", "1"]])
    with pytest.raises(IngestError, match=r"s\.csv: not a NAB series CSV.*timestamp"):
        run_adapter(lake, clock, "nab", f)
    g = write_csv(tmp_path / "cat2" / "s.csv", ["timestamp", "value"], [["2015-01-01", "1"]])
    bad = tmp_path / "bad.json"
    bad.write_text('{"cat2/s.csv": "2015-01-01"}')
    with pytest.raises(IngestError, match=r"bad\.json: entry 'cat2/s.csv' is not a list"):
        run_adapter(lake, clock, "nab", g, labels=str(bad))


def test_every_bad_row_of_a_folder_is_kept(tmp_path: Path, lake: Lake, clock: FixedClock) -> None:
    for name in ("a.csv", "b.csv"):
        write_csv(
            tmp_path / "in" / "cat" / name,
            ["timestamp", "value"],
            [["2015-01-01 00:00:00", "1"], ["2015-01-01 00:05:00", "n/a"]],
        )
    rep = run_adapter(lake, clock, "nab", tmp_path / "in")
    t = rep.tables["series"]
    assert t.rows_in == t.rows_written + t.rows_quarantined


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("2015-01-01 00:05:00\n2015-01-01 00:10:00,3\n", "line 3: 1 field, header has 2"),
        ("2015-01-01 00:05:00,2,2\n", "line 3: 3 fields, header has 2"),
        ("2015-01-01 00:0", "line 3: the file ends mid-row (1 field, header has 2)"),
    ],
    ids=["short", "long", "cut"],
)
def test_a_row_that_does_not_fit_the_header_refuses_the_file_naming_its_line(
    tmp_path: Path, lake: Lake, clock: FixedClock, text: str, words: str
) -> None:
    f = tmp_path / "cat" / "s.csv"
    f.parent.mkdir(parents=True)
    f.write_text("timestamp,value\n2015-01-01 00:00:00,1\n" + text)
    with pytest.raises(IngestError) as info:
        run_adapter(lake, clock, "nab", f)
    assert str(info.value) == f"{f}: {words}"
    assert lake.files("series") == []
