"""One ingest is one lake commit. A ``predops ingest`` killed (SIGKILL) before each of
its publish steps — every fsync, link, unlink and log append of the lake — leaves a lake
that readers see as before the ingest or as after it, never between; the next run
removes the dead run's files and completes the ingest exactly once. A folder whose last
file is bad writes nothing and names that file; quarantine entries name file and row."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from predops.pipelines.cli.main import main
from predops.pipelines.workspace.lake import Lake
from predops.pipelines.workspace.lake_commits import tx_of

T0 = datetime(2026, 3, 1, tzinfo=UTC)
DAYS = 4
BAD_ROWS = 2

_CHILD = r"""
import os, signal, sys
limit = int(sys.argv[1])
calls = 0
def fault(fn):
    def wrapped(*a, **k):
        global calls
        calls += 1
        if calls == limit:
            os.kill(os.getpid(), signal.SIGKILL)
        return fn(*a, **k)
    return wrapped
from predops.pipelines.cli.main import main
for name in ("fsync", "link", "unlink", "rename", "replace", "pwrite", "ftruncate"):
    setattr(os, name, fault(getattr(os, name)))
main(sys.argv[2:], standalone_mode=True)
"""
"""Runs the CLI with every file-system step of interest counted; the ``limit``-th one
kills the process before it happens (0: never)."""


def demand_csv(path: Path, *, bad: int = BAD_ROWS) -> int:
    """Hourly demand over DAYS days (one partition a day) plus ``bad`` rows whose value
    is not a number; returns the good rows."""
    n = 24 * DAYS
    lines = ["series_id,ts,value"]
    lines += [f"pool-a/gpus,{(T0 + timedelta(hours=i)).isoformat()},{i % 7}" for i in range(n)]
    lines += [f"pool-b/gpus,{T0.isoformat()},not-a-number-{i}" for i in range(bad)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return n


def _args(ws: Path, src: Path) -> list[str]:
    return ["--workspace", str(ws), "ingest", "files", str(src), "--table", "demand", "--json"]


def run_child(ws: Path, src: Path, limit: int) -> int:
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(limit), *_args(ws, src)],
        capture_output=True,
        timeout=120,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    return proc.returncode


def seen(ws: Path) -> tuple[int, int]:
    """(stored rows, quarantined rows) as a fresh reader sees them."""
    lake = Lake(ws / "lake")
    return lake.scan("demand").collect().height, lake.read_quarantine("demand").height


def leftovers(ws: Path) -> dict[str, int]:
    """What a dead writer may leave behind: files no commit owns, pending lists, staging."""
    lake_dir = ws / "lake"
    parts = [p for p in lake_dir.rglob("part-*.parquet") if "_files" not in p.parts]
    commits = (lake_dir / "_commits.jsonl").read_text().splitlines()
    committed = {json.loads(x)["tx"] for x in commits}
    return {
        "uncommitted_files": sum(tx_of(p.name) not in committed for p in parts),
        "pending_lists": sum(1 for _ in (lake_dir / "_pending").glob("*")),
        "staged_files": sum(1 for _ in (lake_dir / "_staging").rglob("*.parquet")),
    }


def logged_rows(ws: Path) -> tuple[int, bool]:
    """Rows the ingest log says were written, and whether each commit is logged once."""
    path = ws / "lake" / "_ingest_log.jsonl"
    log = [json.loads(x) for x in path.read_text().splitlines()]
    rows = sum(e["tables"]["demand"]["rows_written"] for e in log)
    return rows, len({e["tx"] for e in log}) == len(log)


def test_a_kill_at_any_publish_step_shows_all_or_nothing_and_the_rerun_completes_once(
    tmp_path: Path,
) -> None:
    src = tmp_path / "demand.csv"
    good = demand_csv(src)
    limit, outcomes = 1, set()
    while True:
        ws = tmp_path / f"ws-{limit}"
        code = run_child(ws, src, limit)
        if code != -signal.SIGKILL:
            assert code == 0, f"the uninterrupted run failed (exit {code})"
            break
        state = seen(ws)
        assert state in ((0, 0), (good, BAD_ROWS)), f"killed at step {limit}: readers saw {state}"
        outcomes.add(state)
        # The next run cleans up the dead one's files and completes exactly once.
        res = CliRunner().invoke(main, _args(ws, src))
        assert res.exit_code == 0, res.output
        assert seen(ws) == (good, BAD_ROWS)
        assert leftovers(ws) == {"uncommitted_files": 0, "pending_lists": 0, "staged_files": 0}
        assert logged_rows(ws) == (good, True)
        limit += 1
    # Kills landed both before and after the commit point, over several dozen steps.
    assert outcomes == {(0, 0), (good, BAD_ROWS)} and limit > 10


def test_a_bad_file_late_in_a_folder_writes_nothing_and_is_named(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    demand_csv(folder / "a.csv", bad=0)
    pl.DataFrame({"series_id": ["s"], "ts": [T0], "value": [[1.0, 2.0]]}).write_parquet(
        folder / "z.parquet"
    )
    ws = tmp_path / "ws"
    res = CliRunner().invoke(main, _args(ws, folder))
    assert res.exit_code != 0
    err = json.loads(res.stdout)
    assert "z.parquet" in json.dumps(err), err
    assert seen(ws) == (0, 0)


def test_identical_bad_rows_in_two_files_are_quarantined_once_each_by_file_and_row(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    for name in ("a.csv", "b.csv"):
        (folder / name).write_text(f"series_id,ts,value\ns,{T0.isoformat()},x\n")
    ws = tmp_path / "ws"
    res = CliRunner().invoke(main, _args(ws, folder))
    assert res.exit_code == 0, res.output
    q = Lake(ws / "lake").read_quarantine("demand").sort("input")
    assert q["input"].to_list() == [str(folder / "a.csv"), str(folder / "b.csv")]
    assert q["row"].to_list() == [1, 1]


def test_a_writer_waits_for_the_lake_lock_a_bounded_time(tmp_path: Path) -> None:
    import fcntl

    from predops.pipelines.workspace.errors import LockHeld

    lake = Lake(tmp_path / "lake", lock_timeout=0.2)
    lake.root.mkdir(parents=True)
    with open(lake.root / ".lake.lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(LockHeld, match="lake lock"):
            lake.log_ingest({"at": T0.isoformat()})
    lake.log_ingest({"at": T0.isoformat()})
    assert (lake.root / "_ingest_log.jsonl").read_text().count("\n") == 1
