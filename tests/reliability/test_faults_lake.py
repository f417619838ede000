"""Injected fault: a corrupt Parquet file in the lake (truncated, or overwritten with
garbage). Reading the table moves that one file aside with a warning naming it, the rest
stays readable, ``predops lake stats`` reports it, and re-ingesting restores its rows."""

from __future__ import annotations

import json
import logging
import os
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from predops.core.schemas import DEMAND
from predops.pipelines.cli.main import main
from predops.pipelines.workspace.lake import Lake

T0 = datetime(2026, 3, 1, tzinfo=UTC)
DAYS = 3


def demand_rows(days: int = DAYS) -> pl.DataFrame:
    """Hourly demand of two series over ``days`` days (one partition per day)."""
    n = 24 * days
    frame = pl.DataFrame(
        {
            "series_id": ["pool-a/gpus"] * n + ["pool-b/gpus"] * n,
            "ts": [T0 + timedelta(hours=i) for i in range(n)] * 2,
            "value": [float(i % 17) for i in range(2 * n)],
        }
    )
    return frame.with_columns(
        *(
            pl.lit(None, dtype=c.dtype).alias(c.name)
            for c in DEMAND.columns
            if c.name not in frame.columns
        )
    ).select(DEMAND.names)


def damage(path: Path, how: str) -> bytes:
    """Truncate ``path`` or overwrite it with as many random bytes; returns the bytes."""
    if how == "truncated":
        os.truncate(path, path.stat().st_size // 2)
    else:
        path.write_bytes(random.Random(1).randbytes(path.stat().st_size))
    return path.read_bytes()


def sorted_rows(lake: Lake) -> pl.DataFrame:
    return lake.scan("demand").collect().drop("source").sort("series_id", "ts")


@pytest.mark.parametrize("how", ["truncated", "garbage"])
def test_corrupt_part_file_is_set_aside_and_the_rest_still_reads(
    lake: Lake, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    rows = demand_rows()
    lake.write("demand", "synthetic", rows)
    files = lake.files("demand")
    assert len(files) == DAYS
    victim = files[1]
    victim_rows = pl.read_parquet(victim).height
    damaged = damage(victim, how)
    rel = str(victim.relative_to(lake.root))

    with caplog.at_level(logging.WARNING, logger="predops.lake"):
        back = sorted_rows(lake)
    # The rest is readable: every row but the damaged day's, exactly.
    assert back.height == rows.height - victim_rows
    expected = rows.filter(pl.col("ts").dt.date() != (T0 + timedelta(days=1)).date())
    assert back.equals(expected.sort("series_id", "ts"))
    # A clear warning naming the file, once.
    warned = [r.getMessage() for r in caplog.records if r.name == "predops.lake"]
    assert len(warned) == 1 and rel in warned[0] and "not readable Parquet" in warned[0]
    # Nothing lost: the damaged bytes are kept in quarantine, listed in the stats.
    (entry,) = lake.corrupt_files("demand")
    assert entry["file"] == rel and (lake.root / entry["moved_to"]).read_bytes() == damaged
    stats = lake.stats()["demand"]
    assert stats["files"] == DAYS - 1 and stats["rows"] == rows.height - victim_rows
    assert [c["file"] for c in stats["corrupt_files"]] == [rel]
    # Reading again does not warn again (the file is out of the table).
    caplog.clear()
    assert sorted_rows(lake).height == back.height
    assert not [r for r in caplog.records if r.name == "predops.lake"]

    # Re-ingesting the same input restores exactly the lost rows, and no duplicates.
    res = lake.write("demand", "synthetic", rows)
    assert (res.rows_written, res.rows_already_present) == (
        victim_rows,
        rows.height - victim_rows,
    )
    assert sorted_rows(lake).equals(rows.sort("series_id", "ts"))


def test_a_fresh_lake_object_sees_the_same_thing(lake: Lake) -> None:
    """Another process (a new Lake on the same root) after the file was set aside."""
    lake.write("demand", "synthetic", demand_rows())
    damage(lake.files("demand")[0], "truncated")
    first = sorted_rows(lake)
    again = Lake(lake.root)
    assert sorted_rows(again).equals(first)
    assert len(again.corrupt_files()) == 1


def test_lake_stats_command_reports_the_corrupt_file(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake")
    lake.write("demand", "synthetic", demand_rows())
    victim = lake.files("demand")[2]
    damage(victim, "garbage")
    rel = str(victim.relative_to(lake.root))

    res = CliRunner().invoke(main, ["--workspace", str(tmp_path), "lake", "stats", "--json"])
    assert res.exit_code == 0, res.output
    demand = json.loads(res.stdout)["tables"]["demand"]
    assert [c["file"] for c in demand["corrupt_files"]] == [rel]
    assert "not readable Parquet" in demand["corrupt_files"][0]["reason"]
    assert demand["files"] == DAYS - 1

    human = CliRunner().invoke(main, ["--workspace", str(tmp_path), "lake", "stats"])
    assert human.exit_code == 0 and f"CORRUPT {rel}" in human.output
