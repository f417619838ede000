"""philly: the real node sequence, re-ingest, and a hand-made file."""

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


@pytest.fixture(scope="module")
def philly_file(shared_data: Path) -> Path:
    return shared_data / "helios-philly-demand" / "philly_node_sequence.csv.gz"


@pytest.fixture(scope="module")
def real(
    philly_file: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, dict[str, Any]]:
    ws = tmp_path_factory.mktemp("philly")
    return ws, cli_ingest(ws, "philly", philly_file)


def test_real_sequence(real: tuple[Path, dict[str, Any]], philly_file: Path) -> None:
    ws, report = real
    raw = pl.read_csv(philly_file)
    d = report["tables"]["demand"]
    assert d["rows_in"] == d["rows_written"] == raw.height
    assert d["rows_quarantined"] == 0
    got = rows(Lake(ws / "lake"), "demand").sort("ts")
    assert set(got["series_id"]) == {"philly/nodes"}
    # PROVENANCE.md: 2017-10-03 -> 11-30, total = 420 nodes (most minutes; kept as
    # published where the file says otherwise).
    assert got["ts"].min() == datetime(2017, 10, 3, tzinfo=UTC)
    assert got["ts"].max() < datetime(2017, 12, 1, tzinfo=UTC)
    assert got["capacity"].mode().to_list() == [420.0]
    assert got["capacity"].to_list() == raw["total"].cast(pl.Float64).to_list()
    assert got["value"].to_list() == raw["active"].cast(pl.Float64).to_list()
    assert cli(ws, "lake", "stats")["tables"]["demand"]["sources"] == ["philly"]


def test_real_reingest_adds_nothing(real: tuple[Path, dict[str, Any]], philly_file: Path) -> None:
    ws, _ = real
    d = cli_ingest(ws, "philly", philly_file.parent)["tables"]["demand"]
    assert d["rows_written"] == 0 and d["rows_quarantined"] == 0
    assert d["rows_already_present"] == d["rows_in"]


def test_hand_made_file_quarantines_the_bad_value(
    tmp_path: Path, lake: Lake, clock: FixedClock
) -> None:
    f = write_csv(
        tmp_path / "copy" / "philly_node_sequence.csv",
        ["time", "active", "total"],
        [
            ["2018-01-01 00:00:00", 300, 420],
            ["2018-01-01 00:01:00", -3, 420],
            ["2018-01-01 00:02:00", 310, 420],
        ],
    )
    rep = run_adapter(lake, clock, "philly", f)
    assert rep.tables["demand"].rows_written == 2
    assert quarantined(lake, "demand") == [(2, "value", "value -3.0 below minimum 0.0")]
    assert rows(lake, "demand")["pending"].null_count() == 2  # the trace has no queue


def test_wrong_file_is_refused(tmp_path: Path, lake: Lake, clock: FixedClock) -> None:
    f = write_csv(tmp_path / "philly_node_sequence.csv", ["time", "nodes"], [["2018-01-01", 1]])
    with pytest.raises(
        IngestError,
        match=r"philly_node_sequence\.csv: not a Philly node "
        r"sequence CSV.*missing column\(s\) active, total",
    ):
        run_adapter(lake, clock, "philly", f)
