"""The carried bucket files read back what was written, from memory in the process that
wrote or read them while the files hold, from disk otherwise; pruned and cleared files
leave the memory too."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from predops.features.node import END
from predops.pipelines.jobs import carried_buckets
from predops.pipelines.jobs.carried_buckets import CarriedBuckets
from predops.pipelines.workspace.feature_store import FeatureStore

B = timedelta(minutes=15)
T0 = datetime(2026, 3, 1, tzinfo=UTC)


def _frame(ends: list[datetime]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "node_id": [f"n{i}" for i in range(len(ends))],
            END: ends,
            "cpu__s": [i / 3 for i in range(len(ends))],
        }
    ).with_columns(pl.col(END).dt.cast_time_unit("us"))


def test_buckets_come_back_from_memory_or_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    carried = CarriedBuckets(FeatureStore(tmp_path / "features"))
    ends = [T0, T0, T0 + B, T0 + 3 * B]
    frame = _frame(ends)
    assert carried.write(frame, T0, T0 + 3 * B, B) == 4  # T0 + 2B: an empty file
    want = frame.sort(END, "node_id")

    def unread(*a: object, **k: object) -> pl.DataFrame:
        raise AssertionError("a bucket file was read")

    with monkeypatch.context() as m:
        m.setattr(carried_buckets.pl, "read_ipc", unread)
        got = carried.read(T0, T0 + 3 * B, B)
    assert got is not None and got.sort(END, "node_id").equals(want)
    carried_buckets._MEMO.clear()  # another process: the files
    got = carried.read(T0, T0 + 3 * B, B)
    assert got is not None and got.sort(END, "node_id").equals(want)
    # a file replaced behind this process's back is read again
    other = _frame([T0 + B]).with_columns(pl.lit(9.0).alias("cpu__s"))
    path = carried.dir / f"{(T0 + B).strftime(carried_buckets.STAMP)}.arrow"
    path.unlink()
    other.write_ipc(path)
    got = carried.read(T0 + B, T0 + B, B)
    assert got is not None and got["cpu__s"].to_list() == [9.0]
    # pruned: gone from disk and from memory
    assert carried.prune(T0 + B) == 1
    assert carried.read(T0, T0 + 3 * B, B) is None

    def kept() -> set[str]:
        return {k for k in carried_buckets._MEMO._entries if k.startswith(str(carried.dir))}

    assert str(carried.dir / f"{T0.strftime(carried_buckets.STAMP)}.arrow") not in kept()
    assert len(kept()) == 3
    carried.clear()
    assert carried.read(T0 + B, T0 + B, B) is None and kept() == set()
