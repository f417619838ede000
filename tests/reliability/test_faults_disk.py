"""Injected fault: the workspace's disk fills up while predops writes. A real, small
tmpfs is mounted as the workspace (root only; skipped elsewhere) and filled; the lake, a
plan file and the online feature store are then written. Each write fails with a clear
error, no half-written file is visible (the previous version stays whole), and once
space is free the next run completes.

The feature store's data file and its ``.json`` are two files: the case where only the
second one fails is injected at its lowest write call, since a full disk cannot be made
to fail exactly there."""

from __future__ import annotations

import errno
import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner

from predops.pipelines.cli.main import main
from predops.pipelines.workspace.feature_store import FeatureStore
from predops.pipelines.workspace.lake import Lake
from predops.pipelines.workspace.plans import plan_path, read_plan, write_plan
from tests.pipelines.actuators.conftest import drain, plan_of
from tests.reliability.test_faults_lake import demand_rows

DISK_BYTES = 8 << 20


@contextmanager
def small_disk(mnt: Path) -> Iterator[str | None]:
    """Mount a fresh 8 MiB tmpfs at ``mnt`` for the block; yields None, or why it cannot
    (not root, no mount) — then nothing is mounted."""
    mnt.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(mnt)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        yield f"cannot mount a tmpfs here: {mounted.stderr.strip() or 'not root'}"
        return
    try:
        yield None
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A fresh 8 MiB tmpfs (needs root; the test is skipped without it)."""
    with small_disk(tmp_path / "disk") as cannot:
        if cannot:
            pytest.skip(cannot)
        yield tmp_path / "disk"


def fill(disk: Path, leave: int) -> Path:
    """Fill ``disk`` until ``leave`` bytes are free; returns the filler file."""
    filler = disk / "filler"
    st = os.statvfs(disk)
    with open(filler, "wb") as fh:
        fh.write(b"\0" * max(0, st.f_bavail * st.f_frsize - leave))
    return filler


def visible(root: Path) -> dict[str, int]:
    """Every file under ``root`` with its size."""
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()}


def big_demand(days: int = 30) -> pl.DataFrame:
    """Demand with incompressible values: ~1 MB of Parquet."""
    base = demand_rows(days)
    noise = np.random.default_rng(0).random(base.height)
    return base.with_columns(pl.Series("value", noise))


def test_lake_write_on_a_full_disk_fails_whole_and_the_next_run_completes(disk: Path) -> None:
    lake = Lake(disk / "lake")
    lake.write("demand", "s", demand_rows(1))
    before = visible(lake.root)
    filler = fill(disk, leave=64 << 10)

    rows = big_demand()
    with pytest.raises(OSError, match="No space left on device"):
        lake.write("demand", "s", rows)
    # Nothing half-written is visible: the same files, the same rows, no staging debris.
    assert visible(lake.root) == before
    assert lake.scan("demand").collect().height == demand_rows(1).height

    filler.unlink()
    res = lake.write("demand", "s", rows)
    assert res.rows_written == rows.height - 48  # the first day's 2 x 24 keys were there
    assert lake.scan("demand").collect().height == rows.height


def test_ingest_command_on_a_full_disk_is_one_clear_error(disk: Path, tmp_path: Path) -> None:
    ws = disk / "ws"
    source = tmp_path / "demand.parquet"
    big_demand().write_parquet(source)
    fill(disk, leave=64 << 10)
    args = ["--workspace", str(ws), "ingest", "files", str(source), "--table", "demand"]
    res = CliRunner().invoke(main, [*args, "--json"])
    assert res.exit_code == 1, res.output
    assert "Traceback" not in res.output
    err = json.loads(res.stdout.splitlines()[0])
    assert "No space left on device" in err["error"] and err["type"] == "OSError"
    lake = Lake(ws / "lake")
    assert lake.scan("demand").collect().height == 0 and lake.files("demand") == []

    (disk / "filler").unlink()
    done = CliRunner().invoke(main, [*args, "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["tables"]["demand"]["rows_written"] == big_demand().height


def test_plan_file_on_a_full_disk_is_never_half_written(disk: Path) -> None:
    plans = disk / "plans"
    old = plan_of([drain("n00")], plan_id="plan-a")
    write_plan(plans, old)
    big = plan_of([drain(f"n{i:04d}") for i in range(400)], plan_id="plan-a")
    filler = fill(disk, leave=16 << 10)
    with pytest.raises(OSError) as err:
        write_plan(plans, big)
    assert err.value.errno == errno.ENOSPC
    assert visible(plans) == {"plan-a.json": plan_path(plans, "plan-a").stat().st_size}
    assert read_plan(plan_path(plans, "plan-a")) == old  # the old plan, whole

    filler.unlink()
    write_plan(plans, big)
    assert len(read_plan(plan_path(plans, "plan-a")).actions) == 400


def online_frame(n: int, as_of: datetime) -> pl.DataFrame:
    rng = np.random.default_rng(n)
    return pl.DataFrame(
        {
            "node_id": [f"node-{i:06d}" for i in range(n)],
            "last_sample_ts": [as_of] * n,
            **{f"f{j}": rng.random(n) for j in range(8)},
        }
    )


T1 = datetime(2026, 6, 1, tzinfo=UTC)
T2 = T1 + timedelta(hours=1)


def read_node_frame(store: FeatureStore) -> tuple[datetime, str, int]:
    online = store.read_online("node", now=T2, max_age=timedelta(days=1))
    return online.as_of, online.feature_set_hash, online.frame.height


def test_online_store_on_a_full_disk_keeps_the_previous_frame(disk: Path) -> None:
    store = FeatureStore(disk / "features")
    store.materialise_online(
        "node", online_frame(100, T1), as_of=T1, feature_set_hash="h1", key="node_id"
    )
    before = visible(store.root)
    filler = fill(disk, leave=64 << 10)
    with pytest.raises(OSError, match="No space left on device"):
        store.materialise_online(
            "node", online_frame(20_000, T2), as_of=T2, feature_set_hash="h2", key="node_id"
        )
    assert visible(store.root) == before
    assert read_node_frame(store) == (T1, "h1", 100)

    filler.unlink()
    store.materialise_online(
        "node", online_frame(20_000, T2), as_of=T2, feature_set_hash="h2", key="node_id"
    )
    assert read_node_frame(store) == (T2, "h2", 20_000)


def test_online_data_and_metadata_never_disagree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The data file is replaced, then writing its .json fails (disk full)."""
    store = FeatureStore(tmp_path / "features")
    store.materialise_online(
        "node", online_frame(100, T1), as_of=T1, feature_set_hash="h1", key="node_id"
    )

    def full(self: Path, *args: object, **kw: object) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))

    monkeypatch.setattr(Path, "write_text", full)
    with pytest.raises(OSError, match="No space left on device"):
        store.materialise_online(
            "node", online_frame(300, T2), as_of=T2, feature_set_hash="h2", key="node_id"
        )
    monkeypatch.undo()
    # The new rows are read with their own metadata, never with the old one.
    assert read_node_frame(store) == (T2, "h2", 300)
    assert not [p for p in store.root.rglob("*.tmp")]


def test_audit_entry_cut_short_by_a_full_disk_is_an_error_not_a_torn_success(
    disk: Path,
) -> None:
    """The log's last page has room for part of the next entry only: the write is short.
    The append must fail (the entry is not written), and later entries still read."""
    from predops.pipelines.workspace.audit import AuditLog

    log = AuditLog(disk / "audit.jsonl", who="tester")
    what = {"kind": "drain", "target": "n00", "params": {}}
    first = log.append(at=T1, outcome="planned", what=what, why="x")
    size = log.path.stat().st_size
    # A second entry like the first with a longer ``why``, so that the file ends 40 bytes
    # before a page boundary (tmpfs allocates whole pages).
    why = "y" * (4096 - 40 - 2 * size + 1)
    second = log.append(at=T1, outcome="planned", what=what, why=why)
    assert log.path.stat().st_size == 4096 - 40
    filler = fill(disk, leave=0)
    with pytest.raises(OSError) as err:
        log.append(at=T2, outcome="started", what=what, why="z" * 200, key="k")
    assert err.value.errno == errno.ENOSPC
    filler.unlink()
    third = log.append(at=T2, outcome="done", what=what, why="after", key="k")
    read = log.read()
    assert list(read.entries) == [first, second, third]  # the cut entry never counts
    assert len(read.bad_lines) <= 1
