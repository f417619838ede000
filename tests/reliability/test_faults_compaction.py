"""A compaction is one lake commit per partition. ``predops lake compact`` killed
(SIGKILL) before each of its file-system steps in turn — every fsync, link, unlink and
log append — leaves every partition as its readers saw it before (its small files) or
after (its compacted file), never both and never neither, with every row; the next run
removes the dead run's files and finishes, and a run after that does nothing."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from predops.pipelines.cli.main import main
from predops.pipelines.workspace.lake import Lake
from predops.pipelines.workspace.lake_commits import tx_of
from predops.pipelines.workspace.lake_maintenance import status
from tests.pipelines.workspace.lake_ingests import ingest_every
from tests.reliability.test_faults_ingest_commit import _CHILD

T0 = datetime(2026, 3, 1, tzinfo=UTC)
DAYS, PER_DAY, NODES = 2, 4, 3
ENV = {"PREDOPS_LAKE__KEEP_REMOVED": "0s", "PREDOPS_LAKE__COMPACT_MIN_FILES": "2"}
"""Removed files are deleted in the same run, so the kills reach those steps too."""


def build(ws: Path) -> None:
    lake = Lake(ws / "lake")
    every = timedelta(days=1) / PER_DAY
    ingest_every(lake, nodes=NODES, start=T0, end=T0 + timedelta(days=DAYS), every=every)


def args(ws: Path) -> list[str]:
    return ["--workspace", str(ws), "lake", "compact", "--table", "telemetry", "--json"]


def run_child(ws: Path, limit: int) -> int:
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(limit), *args(ws)],
        capture_output=True,
        timeout=120,
        env={**os.environ, **ENV, "PYTHONWARNINGS": "ignore"},
    )
    return proc.returncode


def visible(ws: Path) -> dict[str, set[str]]:
    """Per partition, the files a fresh reader sees."""
    out: dict[str, set[str]] = {}
    for f in Lake(ws / "lake").files("telemetry"):
        out.setdefault(f.parent.name, set()).add(f.name)
    return out


def table(ws: Path) -> pl.DataFrame:
    return Lake(ws / "lake").scan("telemetry").collect().sort("node_id", "ts")


def debris(ws: Path) -> dict[str, int]:
    lake = ws / "lake"
    committed = Lake(lake)._commits.committed()
    parts = list(lake.rglob("part-*.parquet"))
    return {
        "uncommitted_files": sum(tx_of(p.name) not in committed for p in parts),
        "pending_lists": sum(1 for _ in (lake / "_pending").glob("*")),
        "staged_files": sum(1 for _ in (lake / "_staging").rglob("*.parquet")),
        "removed_files_on_disk": status(Lake(lake))["removed_files_on_disk"],
    }


def test_a_kill_at_any_compaction_step_shows_one_whole_set_and_the_rerun_finishes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    seed = tmp_path / "seed"
    build(seed)
    old = visible(seed)
    expected = table(seed)
    assert [len(v) for v in old.values()] == [PER_DAY] * DAYS
    limit, states = 1, Counter[str]()
    while True:
        ws = tmp_path / f"ws-{limit}"
        shutil.copytree(seed, ws)
        code = run_child(ws, limit)
        if code != -signal.SIGKILL:
            assert code == 0, f"the uninterrupted run failed (exit {code})"
            break
        for day, files in visible(ws).items():
            compacted = len(files) == 1 and files.isdisjoint(old[day])
            assert files == old[day] or compacted, f"killed at step {limit}: {day} shows {files}"
            states["compacted" if compacted else "small files"] += 1
        assert set(visible(ws)) == set(old), f"killed at step {limit}: a partition vanished"
        assert table(ws).equals(expected), f"killed at step {limit}: rows differ"
        res = CliRunner().invoke(main, args(ws))
        assert res.exit_code == 0, res.output
        assert [len(v) for v in visible(ws).values()] == [1] * DAYS
        assert table(ws).equals(expected)
        assert debris(ws) == dict.fromkeys(debris(ws), 0), f"killed at step {limit}"
        again = CliRunner().invoke(main, args(ws))
        assert '"changed": 0' in again.output
        limit += 1
    # Kills landed before and after the commit points, over a few dozen steps.
    assert states["compacted"] and states["small files"] and limit > 10
