"""Lake commits: the files of one write become visible together, at one fsynced line.

A write (one ``predops ingest``, every table and partition it touches, its quarantined
rows) runs as a transaction with an id. Each file it publishes is named
``part-<n>-<tx>.parquet`` and, before it is linked into its partition, listed in
``_pending/<tx>.list``. The write ends by appending ``{"tx": ...}`` to
``_commits.jsonl`` (fsynced): that line is the commit. Readers list the commit log
first and then the partitions, and skip a tagged file whose transaction is not in the
log, so they see a write whole or not at all (untagged ``part-<n>.parquet`` files are
from before commits existed and always count).

A commit may also remove files (a compaction replacing a partition's small files by
one large one, a retention dropping old partitions): its line lists them under
``"removes"`` (``{partition dir: [file names]}``), and from that line on readers skip
them, so the new files and the removal become visible at the same instant. The removed
files stay on disk until a later maintenance run deletes them (after a grace time, so a
reader that listed them just before the commit can still read them).

A writer killed mid-way leaves tagged files nobody reads and its pending list; the next
writer (holding the lake lock, so no live writer can own them) deletes the files of every
pending transaction that never committed. A torn last line of either log (a kill inside
the append) is cut off before the next append, so it never glues onto the next entry.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from predops.pipelines.workspace.atomic import atomic_write_text

COMMIT_LOG: Final = "_commits.jsonl"
PENDING_DIR: Final = "_pending"
_TAGGED = re.compile(r"^part-\d+-(?P<tx>[0-9a-f]{24})\.parquet$")


def new_tx_id() -> str:
    """A fresh transaction id (24 hex characters)."""
    return uuid.uuid4().hex[:24]


def tx_of(name: str) -> str | None:
    """The transaction that published the file called ``name`` (None: untagged)."""
    m = _TAGGED.match(name)
    return m["tx"] if m else None


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _cut_torn_tail(fd: int, size: int) -> int:
    """Truncate the file after its last newline when it does not end in one."""
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return size
    keep, pos = 0, size
    while pos > 0:
        start = max(0, pos - (1 << 16))
        cut = os.pread(fd, pos - start, start).rfind(b"\n")
        if cut >= 0:
            keep = start + cut + 1
            break
        pos = start
    os.ftruncate(fd, keep)
    return keep


def append_line(path: Path, entry: dict[str, Any]) -> None:
    """Append one JSON line and fsync it, first cutting off a torn last line (callers
    hold the lake lock, so nobody else appends meanwhile)."""
    line = (json.dumps(entry, sort_keys=True, default=str) + "\n").encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        size = _cut_torn_tail(fd, os.fstat(fd).st_size)
        while line:
            n = os.pwrite(fd, line, size)
            line, size = line[n:], size + n
        os.fsync(fd)
    finally:
        os.close(fd)


def read_lines(path: Path) -> list[dict[str, Any]]:
    """The complete JSON-object lines of a log (a torn last line is skipped)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    out = []
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            out.append(entry)
    return out


class CommitLog:
    """``_commits.jsonl`` of one lake: which transactions are committed."""

    def __init__(self, root: Path) -> None:
        self.path = Path(root) / COMMIT_LOG
        self._sig: tuple[int, int] | None = None
        self._committed: frozenset[str] = frozenset()
        self._removed: frozenset[str] = frozenset()
        self._removals: tuple[tuple[str, str, tuple[str, ...]], ...] = ()
        self._last: dict[str, Any] | None = None

    def _load(self) -> None:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            self._sig, self._committed, self._last = None, frozenset(), None
            self._removed, self._removals = frozenset(), ()
            return
        sig = (st.st_size, st.st_mtime_ns)
        if sig == self._sig:
            return
        lines = read_lines(self.path)
        self._committed = frozenset(str(e["tx"]) for e in lines if "tx" in e)
        removals = []
        for e in lines:
            removes = e.get("removes")
            if "tx" in e and isinstance(removes, dict):
                for folder, names in removes.items():
                    removals.append((str(e.get("at", "")), str(folder), tuple(map(str, names))))
        self._removals = tuple(removals)
        self._removed = frozenset(f"{d}/{n}" for _, d, names in removals for n in names)
        self._last = lines[-1] if lines else None
        self._sig = sig

    def committed(self) -> frozenset[str]:
        self._load()
        return self._committed

    def visible_sets(self) -> tuple[frozenset[str], frozenset[str]]:
        """``(committed transactions, removed files)`` from one reading of the log. A
        reader must take both from the same reading: read apart, a compaction committing
        in between gives the old committed set with the new removals, and the partition
        shows neither its old files nor the new one."""
        self._load()
        return self._committed, self._removed

    def removed(self) -> frozenset[str]:
        """Files (paths relative to the lake root) a committed transaction removed."""
        self._load()
        return self._removed

    def removals(self) -> tuple[tuple[str, str, tuple[str, ...]], ...]:
        """``(commit time, partition dir, file names)`` of every committed removal."""
        self._load()
        return self._removals

    def entries(self) -> list[dict[str, Any]]:
        """Every complete line of the log, oldest first."""
        return read_lines(self.path)

    def last(self) -> dict[str, Any] | None:
        self._load()
        return self._last

    def commit(
        self,
        tx: str,
        ingest: dict[str, Any] | None,
        *,
        removes: dict[str, list[str]] | None = None,
        maintenance: dict[str, Any] | None = None,
    ) -> None:
        entry: dict[str, Any] = {"tx": tx, "at": datetime.now(UTC).isoformat()}
        if ingest is not None:
            entry["ingest"] = ingest
        if removes:
            entry["removes"] = removes
        if maintenance is not None:
            entry["maintenance"] = maintenance
        append_line(self.path, entry)


def checkpoint(root: Path, commits: CommitLog, *, keep_maintenance: int = 200) -> dict[str, int]:
    """Under the lake lock: rewrite the commit log without the lines nobody needs any
    more, so that a lake ingesting every few minutes for months does not make every
    reader parse every commit it ever had.

    A line is dropped only when nothing on disk depends on it: no file tagged with its
    transaction exists (anywhere under the lake: tables and quarantine), none of the
    files it removes is still on disk (deleted after ``keep_removed``), it has no pending
    list, it is not the last line (:func:`recover` reads it) and it is not one of the
    newest ``keep_maintenance`` maintenance lines (``predops lake status`` shows them).
    Dropping such a line changes no reader's view: its transaction's files are gone.
    The new log is written beside the old one, fsynced and renamed over it (a reader
    has the old file open or the new one, and both give the same visible files)."""
    lines = commits.entries()
    if not lines:
        return {"lines_before": 0, "lines_after": 0}
    on_disk = {tx for f in Path(root).rglob("part-*.parquet") if (tx := tx_of(f.name))}
    pending_dir = Path(root) / PENDING_DIR
    if pending_dir.exists():
        on_disk |= {p.stem for p in pending_dir.glob("*.list")}
    maintenance = [i for i, e in enumerate(lines) if isinstance(e.get("maintenance"), dict)]
    recent = set(maintenance[-keep_maintenance:]) if keep_maintenance > 0 else set()
    kept = []
    for i, e in enumerate(lines):
        tx = e.get("tx")
        removes = e.get("removes")
        waiting = isinstance(removes, dict) and any(
            (Path(root) / str(d) / str(n)).exists() for d, names in removes.items() for n in names
        )
        if tx is None or tx in on_disk or waiting or i in recent or i == len(lines) - 1:
            kept.append(e)
    if len(kept) < len(lines):
        text = "".join(json.dumps(e, sort_keys=True, default=str) + "\n" for e in kept)
        atomic_write_text(commits.path, text)
    return {"lines_before": len(lines), "lines_after": len(kept)}


class Pending:
    """``_pending/<tx>.list``: the files a transaction publishes, listed before each is
    linked, so whoever finds the transaction uncommitted can remove exactly them."""

    def __init__(self, root: Path, tx: str) -> None:
        self.root = Path(root)
        self.path = self.root / PENDING_DIR / f"{tx}.list"

    def record(self, file: Path) -> None:
        rel = str(file.relative_to(self.root))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(rel + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def files(self) -> list[Path]:
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return []
        out = []
        for rel in text.splitlines():
            p = (self.root / rel).resolve()
            # Only tagged part files inside this lake: a damaged list can delete nothing else.
            if p.is_relative_to(self.root.resolve()) and tx_of(p.name) == self.path.stem:
                out.append(p)
        return out

    def undo(self) -> int:
        """Delete every file listed (a transaction that will never commit)."""
        n = 0
        for f in self.files():
            try:
                f.unlink()
                n += 1
            except FileNotFoundError:
                pass
        self.forget()
        return n

    def forget(self) -> None:
        self.path.unlink(missing_ok=True)
        if self.path.parent.exists():
            _fsync_dir(self.path.parent)


def recover(root: Path, commits: CommitLog, ingest_log: Path) -> dict[str, int]:
    """Under the lake lock: undo every pending transaction that never committed, drop
    the lists of those that did, and finish the ingest-log line of the last commit if a
    kill came between the commit and that line."""
    undone = files = 0
    pending_dir = Path(root) / PENDING_DIR
    committed = commits.committed()
    for lst in sorted(pending_dir.glob("*.list")) if pending_dir.exists() else []:
        p = Pending(root, lst.stem)
        if lst.stem in committed:
            p.forget()
        else:
            files += p.undo()
            undone += 1
    last = commits.last()
    if last is not None and isinstance(last.get("ingest"), dict):
        logged = read_lines(ingest_log)
        if not logged or logged[-1].get("tx") != last["tx"]:
            append_line(ingest_log, {**last["ingest"], "tx": last["tx"]})
    return {"transactions_undone": undone, "files_removed": files}
