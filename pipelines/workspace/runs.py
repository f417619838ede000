"""The run table: one row per attempt of a scheduled job at a cutoff (SQLite).

Lives in the workspace's ``scheduler.db`` beside APScheduler's job store, so a dashboard
reads one file. Columns: ``id, job, cutoff, attempt, status, started_at, ended_at,
owner, rows, error, steps`` (``steps`` is a JSON list of ``{step, status, rows,
seconds, detail}``; times are ISO-8601 UTC).

Statuses: ``running`` -> ``done`` | ``failed`` | ``skipped``; ``abandoned`` is a
``running`` attempt whose process is gone (killed, crashed, node lost). A unique partial
index allows at most one ``done`` attempt per (job, cutoff), so "exactly once" is kept
by the database, not only by the runner's care.

``owner`` is ``host:pid:start`` where ``start`` is the process start time in clock
ticks since boot (``/proc/<pid>/stat``), so a recycled pid (every container's pid 1)
is not mistaken for the process that wrote the row.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RUNNING, DONE, FAILED, SKIPPED, ABANDONED = "running", "done", "failed", "skipped", "abandoned"
ALREADY_DONE = "already done"
"""Why an attempt is not started when its (job, cutoff) is ``done`` already."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job TEXT NOT NULL,
    cutoff TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    status TEXT NOT NULL,
    started_at TEXT NOT NULL,
    ended_at TEXT,
    owner TEXT NOT NULL,
    rows INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    steps TEXT NOT NULL DEFAULT '[]'
);
CREATE UNIQUE INDEX IF NOT EXISTS runs_one_done ON runs (job, cutoff) WHERE status = 'done';
CREATE INDEX IF NOT EXISTS runs_job_cutoff ON runs (job, cutoff);
"""


def _start_ticks(pid: int) -> str | None:
    """The process start time (clock ticks since boot), or None when not readable."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    return stat.rsplit(")", 1)[1].split()[19]


def process_owner(pid: int | None = None) -> str:
    """``host:pid:start`` of this (or another local) process."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{_start_ticks(pid) or '?'}"


def owner_alive(owner: str) -> bool:
    """Whether the process that wrote ``owner`` still runs.

    Another host's process counts as gone: one scheduler serves a workspace (the
    scheduler holds a lock file; the Deployment has one replica, strategy Recreate).
    """
    host, _, rest = owner.partition(":")
    pid_text, _, start = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    now_start = _start_ticks(pid)
    if now_start is not None:
        return start in ("?", now_start)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True, slots=True)
class Begun:
    """A new attempt was recorded as ``running``."""

    run_id: int
    attempt: int
    abandoned: int
    """Earlier attempts of the same (job, cutoff) found dead and marked ``abandoned``."""


@dataclass(frozen=True, slots=True)
class NotStarted:
    """No attempt was started: ``done`` already, or a live attempt is running."""

    reason: str
    run_id: int


class RunStore:
    """The run table in ``path`` (created on first use)."""

    def __init__(self, path: Path, *, alive: Callable[[str], bool] = owner_alive) -> None:
        self.path = Path(path)
        self.alive = alive
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            db.executescript(_SCHEMA)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        db.row_factory = sqlite3.Row
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            yield db
        finally:
            db.close()

    @contextmanager
    def _txn(self) -> Iterator[sqlite3.Connection]:
        """One write transaction that takes the lock first (no check-then-insert race)."""
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def begin(self, job: str, cutoff: str, *, owner: str, at: datetime) -> Begun | NotStarted:
        """Start an attempt of (job, cutoff) unless it is done or live elsewhere."""
        with self._txn() as db:
            rows = db.execute(
                "SELECT id, status, owner, attempt FROM runs WHERE job = ? AND cutoff = ? "
                "ORDER BY id",
                (job, cutoff),
            ).fetchall()
            abandoned = 0
            for r in rows:
                if r["status"] == DONE:
                    return NotStarted(ALREADY_DONE, r["id"])
                if r["status"] == RUNNING:
                    if self.alive(r["owner"]):
                        return NotStarted(f"running in {r['owner']}", r["id"])
                    db.execute(
                        "UPDATE runs SET status = ?, ended_at = ?, error = ? WHERE id = ?",
                        (ABANDONED, at.isoformat(), f"process {r['owner']} is gone", r["id"]),
                    )
                    abandoned += 1
            attempt = 1 + max((r["attempt"] for r in rows), default=0)
            cur = db.execute(
                "INSERT INTO runs (job, cutoff, attempt, status, started_at, owner) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (job, cutoff, attempt, RUNNING, at.isoformat(), owner),
            )
            assert cur.lastrowid is not None
            return Begun(cur.lastrowid, attempt, abandoned)

    def add_step(self, run_id: int, step: dict[str, Any]) -> None:
        """Append one step record to a running attempt."""
        with self._txn() as db:
            row = db.execute("SELECT steps FROM runs WHERE id = ?", (run_id,)).fetchone()
            steps = json.loads(row["steps"])
            steps.append(step)
            db.execute(
                "UPDATE runs SET steps = ? WHERE id = ?", (json.dumps(steps, default=str), run_id)
            )

    def finish(
        self, run_id: int, status: str, *, at: datetime, rows: int = 0, error: str | None = None
    ) -> None:
        """Close an attempt. ``done`` must come only after the run's output is in place."""
        if status not in (DONE, FAILED, SKIPPED):
            raise ValueError(f"cannot finish a run as {status!r}")
        with self._txn() as db:
            db.execute(
                "UPDATE runs SET status = ?, ended_at = ?, rows = ?, error = ? "
                "WHERE id = ? AND status = ?",
                (status, at.isoformat(), rows, error, run_id, RUNNING),
            )

    def abandon_dead(self, at: datetime) -> list[str]:
        """Mark every ``running`` attempt whose process is gone; returns their jobs."""
        jobs = []
        with self._txn() as db:
            for r in db.execute("SELECT id, job, owner FROM runs WHERE status = ?", (RUNNING,)):
                if not self.alive(r["owner"]):
                    db.execute(
                        "UPDATE runs SET status = ?, ended_at = ?, error = ? WHERE id = ?",
                        (ABANDONED, at.isoformat(), f"process {r['owner']} is gone", r["id"]),
                    )
                    jobs.append(r["job"])
        return sorted(set(jobs))

    def last_done(self) -> dict[str, str]:
        """Each job's newest ``done`` attempt's end time (ISO-8601)."""
        with self._connect() as db:
            rows = db.execute(
                "SELECT job, MAX(ended_at) AS ended FROM runs WHERE status = ? GROUP BY job",
                (DONE,),
            ).fetchall()
        return {r["job"]: r["ended"] for r in rows if r["ended"]}

    def runs(
        self,
        job: str | None = None,
        limit: int = 100,
        *,
        status: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[dict[str, Any]]:
        """The latest attempts (newest first), steps decoded; only ``job``'s, those in
        ``status``, and those started in ``[since, until]`` (UTC) when given."""
        where: list[str] = []
        args: list[Any] = []
        for clause, value in (
            ("job = ?", job),
            ("status = ?", status),
            ("started_at >= ?", None if since is None else since.astimezone(UTC).isoformat()),
            ("started_at <= ?", None if until is None else until.astimezone(UTC).isoformat()),
        ):
            if value is not None:
                where.append(clause)
                args.append(value)
        sql = "SELECT * FROM runs" + (" WHERE " + " AND ".join(where) if where else "")
        with self._connect() as db:
            rows = db.execute(sql + " ORDER BY id DESC LIMIT ?", (*args, limit)).fetchall()
        return [{**dict(r), "steps": json.loads(r["steps"])} for r in rows]

    def jobs(self) -> list[str]:
        """The jobs that have recorded an attempt, sorted."""
        with self._connect() as db:
            return [r["job"] for r in db.execute("SELECT DISTINCT job FROM runs ORDER BY job")]
