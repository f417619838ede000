"""The append-only audit log: one JSON object per line in ``<workspace>/audit.jsonl``.

Every decision an actuator takes is one entry — who (the operator / service running
it), what (action kind, target, parameters), why (the plan's reason or the re-validation
verdict), when (the injected clock, UTC), the outcome and the action's idempotency key.
Lines are only ever appended (``O_APPEND``) and each is fsynced before the call returns,
so an entry that was reported written survives a crash; nothing rewrites the file. It
records who approved which plan, so it is the owner's only (mode 0600, set on every
append: see :mod:`predops.pipelines.workspace.private`).

A process killed in the middle of a write, or a write cut short by a full disk (the
append then raises: the entry was not written), can leave a torn last line; the next
append starts on a fresh line, and readers skip any line that is not a JSON object and report
its line number (``AuditRead.bad_lines``) rather than refuse the whole log.

Outcomes: ``planned`` (a plan was written), ``approved`` (someone approved it through
the API), ``apply_requested`` (an apply was asked for through the API), ``started`` /
``done`` / ``failed`` (an action ran), ``would_run`` (dry-run: re-validated, nothing
touched), ``dropped`` (failed re-validation), ``deferred`` (not due yet), ``already_done``
(its key is recorded done), ``unsupported`` (no actuator for that kind). Only ``done``
makes a key done.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from predops.pipelines.workspace.private import PRIVATE_FILE

OUTCOMES = frozenset(
    {
        "planned",
        "approved",
        "apply_requested",
        "break_glass",
        "started",
        "done",
        "failed",
        "would_run",
        "dropped",
        "deferred",
        "already_done",
        "unsupported",
        "published",
    }
)


@dataclass(frozen=True, slots=True)
class AuditRead:
    """Entries of the log in order, and the line numbers skipped as not JSON objects
    (torn writes of a killed process)."""

    entries: tuple[dict[str, Any], ...]
    bad_lines: tuple[int, ...]


class AuditLog:
    """Append-only JSON-lines audit log at ``path``; ``who`` is recorded on every entry."""

    def __init__(self, path: Path, *, who: str) -> None:
        if not who:
            raise ValueError("audit log: 'who' must name the operator or service")
        self.path = path
        self.who = who

    def append(
        self,
        *,
        at: datetime,
        outcome: str,
        what: dict[str, Any],
        why: str,
        key: str | None = None,
        plan_id: str | None = None,
        mode: str | None = None,
        detail: str = "",
        report: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Write one entry and fsync it; returns the entry as written."""
        if outcome not in OUTCOMES:
            raise ValueError(f"audit log: unknown outcome {outcome!r}")
        if at.tzinfo is None:
            raise ValueError("audit log: 'at' must be UTC-aware")
        entry: dict[str, Any] = {
            "at": at.isoformat(),
            "who": self.who,
            "what": what,
            "why": why,
            "outcome": outcome,
            "key": key,
            "plan_id": plan_id,
            "mode": mode,
            "detail": detail,
        }
        if report is not None:
            entry["report"] = report
        line = json.dumps(entry, sort_keys=True, default=str, separators=(",", ":"))
        self._write_line(line)
        return entry

    def _write_line(self, line: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        created = not self.path.exists()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, PRIVATE_FILE)
        try:
            os.fchmod(fd, PRIVATE_FILE)  # it records approvals: owner only, older logs too
            prefix = b""
            size = os.fstat(fd).st_size
            if size:
                with open(self.path, "rb") as f:  # a torn last write must not swallow ours
                    f.seek(size - 1)
                    if f.read(1) != b"\n":
                        prefix = b"\n"
            data = memoryview(prefix + line.encode() + b"\n")
            while data:  # a short write (disk full) goes on until it raises ENOSPC
                data = data[os.write(fd, data) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        if created:  # make the new file's directory entry durable too
            dfd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)

    def read(self) -> AuditRead:
        if not self.path.exists():
            return AuditRead((), ())
        entries: list[dict[str, Any]] = []
        bad: list[int] = []
        for i, line in enumerate(self.path.read_bytes().split(b"\n"), start=1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                entry = None
            if isinstance(entry, dict):
                entries.append(entry)
            else:
                bad.append(i)
        return AuditRead(tuple(entries), tuple(bad))

    def entries(self) -> Iterator[dict[str, Any]]:
        yield from self.read().entries

    def soft_tainted(self) -> set[str]:
        """Nodes whose last done soft-taint action added the taint (the lake does not
        record taints; the plan reads them from here)."""
        out: set[str] = set()
        for e in self.entries():
            what = e.get("what") or {}
            if e.get("outcome") == "done" and what.get("kind") == "soft_taint":
                out.add(str(what.get("target")))
            elif e.get("outcome") == "done" and what.get("kind") == "remove_soft_taint":
                out.discard(str(what.get("target")))
        return out

    def done_keys(self) -> set[str]:
        """Idempotency keys recorded as done (executed successfully)."""
        return {e["key"] for e in self.entries() if e.get("outcome") == "done" and e.get("key")}
