"""azure-vm: the four real wide files, re-ingest, and a hand-made wide file."""

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


@pytest.fixture(scope="module")
def vm_dir(shared_data: Path) -> Path:
    return shared_data / "azure-v1-vm-cpu"


@pytest.fixture(scope="module")
def real(vm_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    ws = tmp_path_factory.mktemp("azure_vm")
    return ws, cli_ingest(ws, "azure-vm", vm_dir)


def test_real_files_match_provenance(real: tuple[Path, dict[str, Any]], vm_dir: Path) -> None:
    ws, report = real
    # PROVENANCE.md: microsoft_* 100 VMs x 5,988 steps, periodic_* 78 columns x 6,384 steps.
    shapes = {}
    for f in sorted(vm_dir.glob("*.csv.gz")):
        head = pl.read_csv(f, n_rows=1)
        vms = {c.split()[0] for c in head.columns if c != "step_5min"}
        steps = pl.read_csv(f, columns=["step_5min"]).height
        shapes[f.name.removesuffix(".csv.gz")] = (len(head.columns) - 1, len(vms), steps)
    assert shapes["microsoft_avg_100"] == (100, 100, 5988)
    assert shapes["periodic_max_78"][0::2] == (78, 6384)
    # One VM is listed twice in the periodic files (two periods, identical values): once.
    cells = sum(n_vms * steps for _, n_vms, steps in shapes.values())
    d = report["tables"]["demand"]
    assert d["rows_in"] == d["rows_written"] == cells
    assert d["rows_quarantined"] == 0
    stats = cli(ws, "lake", "stats")["tables"]["demand"]
    assert stats["sources"] == ["azure-vm"]
    assert stats["time_min"].startswith("2017-01-01T00:00:00")


def test_real_values_follow_the_columns(real: tuple[Path, dict[str, Any]], vm_dir: Path) -> None:
    ws, _ = real
    raw = pl.read_csv(vm_dir / "microsoft_max_100.csv.gz", columns=["step_5min", "1633748"])
    got = (
        Lake(ws / "lake")
        .scan("demand")
        .filter(pl.col("series_id") == "azure-vm/microsoft_max_100/1633748")
        .sort("ts")
        .collect()
    )
    assert got["value"].to_list() == raw["1633748"].to_list()
    epoch = datetime(2017, 1, 1, tzinfo=UTC)
    assert got["ts"].to_list() == [epoch + timedelta(minutes=5 * s) for s in raw["step_5min"]]
    assert set(got["capacity"]) == {100.0} and set(got["resource"]) == {"cpu_pct"}


def test_real_reingest_adds_nothing(real: tuple[Path, dict[str, Any]], vm_dir: Path) -> None:
    ws, _ = real
    d = cli_ingest(ws, "azure-vm", vm_dir)["tables"]["demand"]
    assert d["rows_written"] == 0 and d["rows_quarantined"] == 0
    assert d["rows_already_present"] == d["rows_in"]


def test_hand_made_wide_file_quarantines_the_bad_value(
    tmp_path: Path, lake: Lake, clock: FixedClock
) -> None:
    f = write_csv(
        tmp_path / "vms" / "mysample_avg_3.csv",
        ["step_5min", "11 24", "22 8", "33 1"],
        [
            [0, 10.0, 20.0, 30.0],
            [1, 11.0, 120.0, 31.0],
            [2, 12.0, 22.0, "oops"],
        ],
    )
    rep = run_adapter(lake, clock, "azure-vm", f, epoch="2021-06-01T00:00:00")
    assert rep.tables["demand"].rows_written == 7
    # Rows count cells in reading order: file row ceil(r / 3), VM column (r - 1) % 3 + 1.
    assert quarantined(lake, "demand") == [
        (5, "value", "cannot read 120.0 (out of range 0..100 %) as Float64"),
        (9, "value", "cannot read oops as Float64"),
    ]
    got = rows(lake, "demand").sort("series_id", "ts")
    assert got.filter(pl.col("series_id") == "azure-vm/mysample_avg_3/22").select(
        "ts", "value"
    ).rows() == [
        (datetime(2021, 6, 1, tzinfo=UTC), 20.0),
        (datetime(2021, 6, 1, 0, 10, tzinfo=UTC), 22.0),
    ]


def test_differing_repeats_of_a_vm_are_quarantined_not_merged(
    tmp_path: Path, lake: Lake, clock: FixedClock
) -> None:
    f = write_csv(
        tmp_path / "rep.csv", ["step_5min", "7 1", "7 24"], [[0, 1.0, 1.0], [1, 2.0, 9.0]]
    )
    rep = run_adapter(lake, clock, "azure-vm", f)
    assert rep.tables["demand"].rows_written == 2
    assert [(r, fld) for r, fld, _ in quarantined(lake, "demand")] == [
        (2, "series_id"),
        (4, "series_id"),
    ]


def test_wrong_format_is_refused(tmp_path: Path, lake: Lake, clock: FixedClock) -> None:
    f = write_csv(tmp_path / "x.csv", ["step", "1"], [[0, 1.0]])
    with pytest.raises(IngestError, match=r"x\.csv: not an Azure VM CPU table.*step_5min"):
        run_adapter(lake, clock, "azure-vm", f)
    g = write_csv(tmp_path / "y.csv", ["step_5min"], [[0]])
    with pytest.raises(IngestError, match=r"y\.csv: no VM columns"):
        run_adapter(lake, clock, "azure-vm", g)
