"""helios: the real Earth VC sequences, re-ingest, and hand-made VC files."""

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
    "time",
    "total_job_num",
    "total_gpu_num",
    "running_gpu_num",
    "pending_gpu_num",
    "idle_gpu_num",
]


@pytest.fixture(scope="module")
def earth(shared_data: Path) -> Path:
    return shared_data / "helios-philly-demand" / "Earth_vcs"


@pytest.fixture(scope="module")
def real(earth: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    ws = tmp_path_factory.mktemp("helios")
    return ws, cli_ingest(ws, "helios", earth)


def test_real_vcs_match_provenance(real: tuple[Path, dict[str, Any]], earth: Path) -> None:
    ws, report = real
    vcs = sorted(p.parent.name for p in earth.glob("*/cluster_sequence_vc.csv.gz"))
    assert len(vcs) == 16
    # PROVENANCE.md: 2020-05-01 -> 05-24, 34,560 minutes per VC.
    d = report["tables"]["demand"]
    assert d["rows_in"] == d["rows_written"] == 16 * 34_560
    assert d["rows_quarantined"] == 0
    stored = rows(Lake(ws / "lake"), "demand")
    assert sorted(stored["series_id"].unique()) == sorted(f"helios/{vc}/gpus" for vc in vcs)
    assert stored["ts"].min() == datetime(2020, 5, 1, tzinfo=UTC)
    assert stored["ts"].max() == datetime(2020, 5, 24, 23, 59, tzinfo=UTC)
    stats = cli(ws, "lake", "stats")["tables"]["demand"]
    assert stats["rows"] == 16 * 34_560 and stats["sources"] == ["helios"]


def test_real_demand_is_running_plus_pending(
    real: tuple[Path, dict[str, Any]], earth: Path
) -> None:
    ws, _ = real
    vc = "vchbv"
    raw = pl.read_csv(earth / vc / "cluster_sequence_vc.csv.gz")
    want = raw.select(
        (pl.col("running_gpu_num") + pl.col("pending_gpu_num")).cast(pl.Float64).alias("value"),
        pl.col("total_gpu_num").cast(pl.Float64).alias("capacity"),
    )
    got = (
        Lake(ws / "lake")
        .scan("demand")
        .filter(pl.col("series_id") == f"helios/{vc}/gpus")
        .sort("ts")
        .select("value", "capacity")
        .collect()
    )
    assert got.equals(want)
    assert (want["value"] > want["capacity"]).any()  # queued demand beyond the quota shows


def test_real_reingest_adds_nothing(real: tuple[Path, dict[str, Any]], earth: Path) -> None:
    ws, _ = real
    again = cli_ingest(ws, "helios", earth.parent)  # the folder above: other CSVs skipped
    d = again["tables"]["demand"]
    assert d["rows_written"] == 0 and d["rows_quarantined"] == 0
    assert d["rows_already_present"] == d["rows_in"] == 16 * 34_560


def test_hand_made_vc_quarantines_the_bad_value(
    tmp_path: Path, lake: Lake, clock: FixedClock
) -> None:
    f = write_csv(
        tmp_path / "Mars_vcs" / "vcX" / "cluster_sequence_vc.csv",
        HEADER,
        [
            ["2021-03-01 00:00:00", 3, 16, 8, 4, 8],
            ["2021-03-01 00:01:00", 3, 16, "eight", 4, 8],
            ["2021-03-01 00:02:00", 3, 16, 16, 24, 0],
        ],
    )
    rep = run_adapter(lake, clock, "helios", f.parent.parent)
    assert rep.tables["demand"].rows_written == 2
    [(row, field, reason)] = quarantined(lake, "demand")
    assert (row, field) == (2, "value")
    assert "running_gpu_num=eight" in reason and "pending_gpu_num=4" in reason
    got = rows(lake, "demand").sort("ts")
    assert got.select("series_id", "value", "running", "pending", "capacity", "pool").rows() == [
        ("helios/vcX/gpus", 12.0, 8.0, 4.0, 16.0, "vcX"),
        ("helios/vcX/gpus", 40.0, 16.0, 24.0, 16.0, "vcX"),
    ]


def test_quota_table_and_wrong_files_are_refused(
    tmp_path: Path, earth: Path, lake: Lake, clock: FixedClock
) -> None:
    with pytest.raises(IngestError, match=r"Earth_gpu_number\.csv: a daily GPU quota table"):
        run_adapter(lake, clock, "helios", earth / "Earth_gpu_number.csv")
    f = write_csv(tmp_path / "x.csv", ["time", "active", "total"], [["2021-03-01", 1, 2]])
    with pytest.raises(IngestError, match=r"x\.csv: not a Helios VC sequence"):
        run_adapter(lake, clock, "helios", f)
    with pytest.raises(IngestError, match="no cluster_sequence"):
        run_adapter(lake, clock, "helios", tmp_path)
