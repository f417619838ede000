from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from predops.core.schemas import DEMAND
from predops.pipelines.workspace.errors import LakeError
from predops.pipelines.workspace.lake import Lake

T0 = datetime(2026, 3, 1, 22, tzinfo=UTC)


def demand(n: int, start: datetime = T0, series: str = "pool-a/gpus") -> pl.DataFrame:
    return pl.DataFrame(
        {
            "series_id": [series] * n,
            "ts": [start + timedelta(hours=i) for i in range(n)],
            "value": [float(i) for i in range(n)],
        }
    ).with_columns(
        *(
            pl.lit(None, dtype=c.dtype).alias(c.name)
            for c in DEMAND.columns
            if c.name not in ("series_id", "ts", "value")
        )
    )


def test_write_partitions_by_source_and_date(lake: Lake) -> None:
    res = lake.write("demand", "synthetic", demand(5))
    assert res.rows_written == 5
    assert sorted(res.partitions) == [
        "demand/source=synthetic/date=2026-03-01",
        "demand/source=synthetic/date=2026-03-02",
    ]
    back = lake.scan("demand").collect()
    assert back.height == 5 and set(back["source"]) == {"synthetic"}
    assert back.drop("source").sort("ts").equals(demand(5).select(DEMAND.names))


def test_rewriting_the_same_rows_adds_nothing(lake: Lake) -> None:
    lake.write("demand", "s", demand(5))
    res = lake.write("demand", "s", demand(8))
    assert (res.rows_written, res.rows_already_present) == (3, 5)
    assert lake.scan("demand").collect().height == 8
    assert lake.write("demand", "s", demand(8)).rows_written == 0


def test_same_key_in_another_source_is_another_row(lake: Lake) -> None:
    lake.write("demand", "a", demand(2))
    lake.write("demand", "b", demand(2))
    assert lake.scan("demand").collect().height == 4
    assert lake.scan("demand", "b").collect().height == 2


def test_staged_files_are_never_visible(lake: Lake) -> None:
    lake.write("demand", "s", demand(2))
    # Debris of a crashed write: a complete-looking file in staging.
    debris = lake.root / "_staging" / "dead" / "x.parquet"
    debris.parent.mkdir(parents=True)
    demand(50).write_parquet(debris)
    assert lake.scan("demand").collect().height == 2
    assert lake.stats()["demand"]["rows"] == 2
    lake.clean_staging()
    assert not debris.exists()


def test_publish_never_overwrites(lake: Lake, tmp_path: Path) -> None:
    lake.write("demand", "s", demand(1))
    part = lake.files("demand")[0]
    before = part.read_bytes()
    # A second write to the same partition gets a new file name.
    lake.write("demand", "s", demand(1, start=T0 + timedelta(minutes=30)))
    assert part.read_bytes() == before
    assert len(lake.files("demand")) == 2


def test_corrupt_stored_file_is_moved_aside_and_its_rows_restored(lake: Lake) -> None:
    lake.write("demand", "s", demand(1))
    f = lake.files("demand")[0]
    os.truncate(f, 10)
    # Not silently ignored: the file is set aside (tests/reliability has the details) and
    # its keys no longer count as stored, so writing the rows again restores them.
    assert lake.write("demand", "s", demand(1)).rows_written == 1
    assert [c["file"] for c in lake.corrupt_files("demand")] == [str(f.relative_to(lake.root))]


def test_bad_source_names_are_refused(lake: Lake) -> None:
    for bad in ("../etc", "A", "", "a/b", ".."):
        with pytest.raises(LakeError, match="invalid source name"):
            lake.write("demand", bad, demand(1))


def test_stats_report_rows_partitions_range(lake: Lake) -> None:
    lake.write("demand", "s", demand(5))
    s = lake.stats()["demand"]
    assert s["rows"] == 5 and s["partitions"] == 2 and s["sources"] == ["s"]
    assert s["time_min"] == T0.isoformat()
    assert s["time_max"] == (T0 + timedelta(hours=4)).isoformat()
    assert s["quarantined_rows"] == 0
    assert "telemetry" not in lake.stats()


def test_empty_table_scan_has_the_schema(lake: Lake) -> None:
    lf = lake.scan("telemetry")
    assert lf.collect().height == 0
    assert "source" in lf.collect_schema().names()


def test_trusted_files_are_not_read_again_but_a_rewritten_one_is(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    lake.write("demand", "s", demand(3))
    fingerprint = Lake(lake.root).fingerprint("demand")
    assert fingerprint
    again = Lake(lake.root)
    again.trust(fingerprint)
    read: list[Path] = []
    real = pq.read_metadata
    monkeypatch.setattr(pq, "read_metadata", lambda f, *a, **k: read.append(f) or real(f, *a, **k))
    assert again.fingerprint("demand") == fingerprint and read == []
    # corrupted in place: another size (and time), so it is read, found corrupt, set aside
    f, other = again.files("demand")
    os.truncate(f, 10)
    assert again.files("demand") == [other] and read == [f]
    assert [c["file"] for c in again.corrupt_files("demand")] == [str(f.relative_to(lake.root))]
