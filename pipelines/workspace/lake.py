"""The Parquet lake: hive-partitioned by source and date, atomic, idempotent.
Over 500 lines: the writer's transaction and the readers share one rule of which files
count (committed, own, untagged), kept side by side so the two cannot drift apart.

Layout under the lake root::

    <table>/source=<source>/date=<YYYY-MM-DD>/part-<n>.parquet
    _quarantine/<table>/source=<source>/date=<ingest date>/part-<n>.parquet
    _quarantine/_files/<table>/...       stored files found corrupt, moved aside
    _quarantine/corrupt_files.jsonl      one line per file moved aside (where, why)
    _ingest_log.jsonl                    one line per ingest (input, digest, counts)
    _commits.jsonl, _pending/            commits of writes (see lake_commits)

Every file is written to ``_staging/`` first and linked into place only when complete.
The files of one write (one ingest: every table, partition and quarantined row it
touches) become visible together, at one commit (:mod:`.lake_commits`), so a reader sees
an ingest whole or not at all and a write that fails (disk full, a bad file late in a
folder, a kill) adds nothing; a crash leaves at most staging debris and uncommitted files
that no reader sees and the next write removes. Writers hold the lake lock (waited for at
most ``lock_timeout`` seconds). Re-writing rows whose key (the schema's ``key``) is
already in the partition adds nothing, so re-ingesting the same input is a no-op.

Reads may name a time window (``scan(table, start=, end=)``): only the ``date=`` folders it
overlaps are listed and the filter goes into the scan (row groups are skipped by their
statistics). Many small files per partition are merged, old partitions dropped and
replaced files deleted by :mod:`.lake_maintenance`, through the same commits.

A stored file that is not readable Parquet any more (truncated, overwritten: its footer
does not parse) is moved aside into ``_quarantine/_files/`` the first time a read or a
write lists it, with a warning naming it (logger ``predops.lake``) and a line in
``_quarantine/corrupt_files.jsonl``; the rest of the table stays readable, ``stats()``
lists the file, and re-ingesting its input restores its rows (its keys no longer count
as stored). Files are checked once per (size, mtime) — published files never change.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import shutil
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, Final

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from predops.core.schemas import SCHEMAS, FrameSchema, schema_for
from predops.core.validation import QUARANTINE_SCHEMA
from predops.pipelines.workspace.errors import LakeError, LockHeld
from predops.pipelines.workspace.lake_commits import (
    CommitLog,
    Pending,
    append_line,
    new_tx_id,
    recover,
    tx_of,
)

_SOURCE_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")
QUARANTINE_DIR = "_quarantine"
STAGING_DIR = "_staging"
INGEST_LOG = "_ingest_log.jsonl"
CORRUPT_DIR = "_files"
CORRUPT_LOG = "corrupt_files.jsonl"
log = logging.getLogger("predops.lake")
PARQUET_COMPRESSION: Final = "zstd"
QUARANTINE_KEY = ("input", "row", "field", "reason", "record")
"""A quarantined row is the same one again when all of these match (a folder input
has several files, so the row number alone is not enough)."""


@dataclass(slots=True)
class WriteResult:
    """What one write added: new rows, rows already present, partitions touched."""

    table: str
    source: str
    rows_written: int = 0
    rows_already_present: int = 0
    partitions: list[str] = field(default_factory=list)

    def merge(self, other: WriteResult) -> None:
        self.rows_written += other.rows_written
        self.rows_already_present += other.rows_already_present
        self.partitions.extend(p for p in other.partitions if p not in self.partitions)

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "source": self.source,
            "rows_written": self.rows_written,
            "rows_already_present": self.rows_already_present,
            "partitions": len(self.partitions),
        }


def check_source(source: str) -> str:
    """Source names become directory names: lower-case letters, digits, ``_.-`` only."""
    if not _SOURCE_RE.match(source) or source in (".", ".."):
        raise LakeError(
            f"invalid source name {source!r}: use lower-case letters, digits, '_', '.', '-'"
        )
    return source


class Lake:
    """A Parquet lake rooted at ``root`` (created on first write)."""

    def __init__(self, root: Path, *, lock_timeout: float = 600.0) -> None:
        self.root = Path(root)
        self.lock_timeout = lock_timeout
        self._checked: dict[Path, tuple[int, int]] = {}
        self._commits = CommitLog(self.root)
        self._tx: LakeTransaction | None = None

    # ------------------------------------------------------------------ paths
    def table_dir(self, table: str) -> Path:
        schema_for(table)
        return self.root / table

    def _partition_dir(self, base: Path, source: str, day: date) -> Path:
        return base / f"source={source}" / f"date={day.isoformat()}"

    def _lock(self) -> Any:
        """The lake's writer lock (an open file holding ``flock``), waited for at most
        ``lock_timeout`` seconds; readers never need it."""
        self.root.mkdir(parents=True, exist_ok=True)
        fh = open(self.root / ".lake.lock", "a+")  # noqa: SIM115 - held by the transaction
        deadline = time.monotonic() + self.lock_timeout
        pause = 0.01
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fh
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    fh.close()
                    raise LockHeld(
                        f"lake {self.root}: another write held the lake lock for over "
                        f"{self.lock_timeout:g} s; try again when it has ended"
                    ) from None
                time.sleep(pause)
                pause = min(pause * 2, 0.5)

    def _staging(self) -> Path:
        d = self.root / STAGING_DIR / uuid.uuid4().hex
        d.mkdir(parents=True, exist_ok=True)
        return d

    def clean_staging(self) -> None:
        """Remove files left by interrupted writes (never visible to readers)."""
        shutil.rmtree(self.root / STAGING_DIR, ignore_errors=True)

    @staticmethod
    def _write_staged(frame: pl.DataFrame, staging: Path) -> Path:
        tmp = staging / f"{uuid.uuid4().hex}.parquet"
        try:
            frame.write_parquet(tmp, compression=PARQUET_COMPRESSION, statistics=True)
        except pl.exceptions.ComputeError as exc:  # polars' form of an I/O error (disk full)
            raise OSError(f"lake {staging.parent.parent}: cannot stage a file: {exc}") from exc
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        return tmp

    # ------------------------------------------------------------------ writes
    @contextmanager
    def transaction(self) -> Iterator[LakeTransaction]:
        """One commit for every write inside: ``write``, ``quarantine`` and
        ``log_ingest`` of this lake join it, its reads see its own files, other readers
        see them once the block ends without an exception (any exception, or a kill,
        removes them)."""
        if self._tx is not None:
            raise LakeError(f"lake {self.root}: a transaction is already open")
        tx = LakeTransaction(self)
        self._tx = tx
        try:
            yield tx
            tx.commit()
        except BaseException:
            tx.abort()
            raise
        finally:
            self._tx = None
            tx.release()

    def write(self, table: str, source: str, frame: pl.DataFrame) -> WriteResult:
        """Add ``frame`` (already validated, schema columns) to ``table`` under ``source``.

        Rows whose key is already stored in their partition are skipped. Outside a
        transaction the write is one of its own.
        """
        if self._tx is not None:
            return self._tx.write(table, source, frame)
        with self.transaction() as tx:
            return tx.write(table, source, frame)

    def quarantine(
        self, table: str, source: str, bad: pl.DataFrame, *, input_name: str, ingested_at: datetime
    ) -> int:
        """Keep rejected rows (row, field, reason, original record) with their input."""
        if self._tx is not None:
            return self._tx.quarantine(
                table, source, bad, input_name=input_name, ingested_at=ingested_at
            )
        with self.transaction() as tx:
            return tx.quarantine(table, source, bad, input_name=input_name, ingested_at=ingested_at)

    def log_ingest(self, entry: dict[str, Any]) -> None:
        """One line in the ingest log, written when the open transaction (or one of its
        own) commits."""
        if self._tx is not None:
            self._tx.ingest_entry = entry
            return
        with self.transaction() as tx:
            tx.ingest_entry = entry

    def _new_rows(self, schema: FrameSchema, rows: pl.DataFrame, part_dir: Path) -> pl.DataFrame:
        existing = self._readable(self._visible(part_dir, "part-*.parquet"))
        if not existing:
            return rows
        # Only stored keys in the new rows' range of the first key column can clash;
        # the filter lets the reader skip row groups by their min/max statistics (a
        # chunked writer of disjoint node ranges then never re-reads earlier chunks).
        first = schema.key[0]
        lo, hi = rows[first].min(), rows[first].max()
        within = pl.col(first).is_between(pl.lit(lo), pl.lit(hi))
        t = schema.time_column
        if t in schema.key and t != first:
            # The same for the time range: a partition's earlier ingests are skipped by
            # their statistics, so an ingest every few minutes does not re-read the day.
            within = within & pl.col(t).is_between(pl.lit(rows[t].min()), pl.lit(rows[t].max()))
        try:
            stored = pl.scan_parquet(existing).select(list(schema.key)).filter(within).collect()
        except Exception as exc:  # a corrupt file must not be silently ignored
            raise LakeError(f"cannot read stored keys in {part_dir}: {exc}") from exc
        return rows.join(stored, on=list(schema.key), how="anti", nulls_equal=True)

    def _visible(
        self, base: Path, pattern: str, days: tuple[date | None, date | None] | None = None
    ) -> list[Path]:
        """Files under ``base`` matching ``pattern`` that readers may see: untagged ones,
        committed ones and the open transaction's own, less those a committed
        transaction removed (the commit log is read before the directories, so a commit
        landing meanwhile is seen whole or not at all). ``days``: only the
        ``date=<day>`` folders within ``(first, last)`` are listed (None: unbounded)."""
        committed, removed = self._commits.visible_sets()
        own = self._tx.id if self._tx is not None else None
        out = []
        for f in sorted(_glob_days(base, pattern, days)):
            tx = tx_of(f.name)
            if (tx is None or tx == own or tx in committed) and (
                not removed or str(f.relative_to(self.root)) not in removed
            ):
                out.append(f)
        return out

    # ------------------------------------------------------------------ corrupt files
    def trust(self, fingerprint: dict[str, list[int]]) -> None:
        """Files of an earlier :meth:`fingerprint` of this lake were read as Parquet
        then: a file still of that size and modification time is not read again to
        check it (the incremental cycle's state holds them; a file rewritten since has
        another signature and is checked)."""
        for rel, sig in fingerprint.items():
            if isinstance(sig, list) and len(sig) == 2:
                self._checked[self.root / rel] = (int(sig[0]), int(sig[1]))

    def _readable(self, files: list[Path]) -> list[Path]:
        """``files`` without those that are not readable Parquet (moved aside)."""
        out = []
        for f in files:
            try:
                st = f.stat()
            except FileNotFoundError:  # moved aside by another reader meanwhile
                continue
            sig = (st.st_size, st.st_mtime_ns)
            if self._checked.get(f) == sig:
                out.append(f)
                continue
            try:
                pq.read_metadata(f)
            except PermissionError:
                raise  # unreadable for us is not corrupt
            except (OSError, ValueError, pa.ArrowException) as exc:
                self._set_aside(f, f"not readable Parquet ({exc})")
                continue
            self._checked[f] = sig
            out.append(f)
        return out

    def _set_aside(self, f: Path, why: str) -> None:
        """Move a corrupt stored file into ``_quarantine/_files`` and say so."""
        rel = f.relative_to(self.root)
        dest = (
            self.root
            / QUARANTINE_DIR
            / CORRUPT_DIR
            / rel.parent
            / f"{f.name}.{uuid.uuid4().hex[:8]}"
        )
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            size = f.stat().st_size
            os.rename(f, dest)  # atomic; a second reader finding it gone just skips it
        except FileNotFoundError:
            return
        table = rel.parts[1] if rel.parts[0] == QUARANTINE_DIR else rel.parts[0]
        entry = {
            "table": table,
            "file": str(rel),
            "moved_to": str(dest.relative_to(self.root)),
            "bytes": size,
            "reason": why,
        }
        with open(self.root / QUARANTINE_DIR / CORRUPT_LOG, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry, sort_keys=True) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        log.warning(
            "lake: %s is %s; moved it to %s (the rest of %s stays readable; "
            "re-ingest its input to restore its rows)",
            rel,
            why,
            entry["moved_to"],
            table,
        )

    def corrupt_files(self, table: str | None = None) -> list[dict[str, Any]]:
        """Stored files found corrupt and moved aside (``table``: only that table's)."""
        path = self.root / QUARANTINE_DIR / CORRUPT_LOG
        if not path.exists():
            return []
        out = []
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a torn last line of a killed process
            if isinstance(entry, dict) and (table is None or entry.get("table") == table):
                out.append(entry)
        return out

    # ------------------------------------------------------------------ reads
    def files(
        self,
        table: str,
        source: str | None = None,
        *,
        start: datetime | None = None,
        end: datetime | None = None,
    ) -> list[Path]:
        """The table's readable part files (corrupt ones are moved aside, see above);
        with ``start`` / ``end`` only those of the day partitions the window overlaps."""
        base = self.table_dir(table)
        days = None if start is None and end is None else (_utc_day(start), _utc_day(end))
        pattern = f"source={source or '*'}/date=*/part-*.parquet"
        return self._readable(self._visible(base, pattern, days))

    def fingerprint(self, table: str) -> dict[str, list[int]]:
        """The table's readable files (paths relative to the root) -> ``[size, mtime_ns]``:
        published files never change, so an equal fingerprint means the same rows."""
        out: dict[str, list[int]] = {}
        for f in self.files(table):
            st = f.stat()
            out[str(f.relative_to(self.root))] = [st.st_size, st.st_mtime_ns]
        return out

    def quarantine_files(self, table: str) -> list[Path]:
        base = self.root / QUARANTINE_DIR / table
        return self._readable(self._visible(base, "source=*/date=*/part-*.parquet"))

    def scan(
        self,
        table: str,
        source: str | None = None,
        *,
        start: datetime | None = None,
        end: datetime | None = None,
    ) -> pl.LazyFrame:
        """The stored rows of ``table`` (optionally one source) with a ``source`` column.

        ``start`` / ``end`` (inclusive, UTC-aware) bound the time column: only the day
        partitions the window overlaps are listed, and the filter goes into the scan,
        so row groups whose time statistics lie outside it are not read."""
        schema = schema_for(table)
        files = self.files(table, source, start=start, end=end)
        if not files:
            lf = schema.empty().lazy().with_columns(pl.lit(None, pl.String).alias("source"))
        else:
            lf = pl.scan_parquet(
                files, hive_partitioning=True, hive_schema={"source": pl.String, "date": pl.Date}
            ).drop("date")
        t = pl.col(schema.time_column)
        if start is not None:
            lf = lf.filter(t >= pl.lit(start).cast(schema.polars_schema()[schema.time_column]))
        if end is not None:
            lf = lf.filter(t <= pl.lit(end).cast(schema.polars_schema()[schema.time_column]))
        return lf

    def latest_time(self, table: str, source: str | None = None) -> datetime | None:
        """The table's latest time-column value, read from the newest day partition that
        has visible files only (not the whole history); None when the table is empty."""
        schema = schema_for(table)
        folders = self.table_dir(table).glob(f"source={source or '*'}/date=*")
        days = sorted({d for d in map(partition_day, folders) if d is not None}, reverse=True)
        for day in days:
            start = datetime.combine(day, datetime.min.time(), tzinfo=UTC)
            files = self.files(table, source, start=start, end=start)
            if files:
                t = pl.scan_parquet(files).select(pl.col(schema.time_column).max())
                value = t.collect().item()
                if isinstance(value, datetime):
                    return value
        return None

    def read_quarantine(self, table: str) -> pl.DataFrame:
        files = self.quarantine_files(table)
        if not files:
            return pl.DataFrame(schema=QUARANTINE_SCHEMA)
        return pl.read_parquet(
            files, hive_partitioning=True, hive_schema={"source": pl.String, "date": pl.Date}
        )

    def node_ids(self, source: str) -> set[str] | None:
        """Node ids the inventory of ``source`` knows, or None when it has no inventory."""
        files = self.files("inventory", source)
        if not files:
            return None
        ids = pl.scan_parquet(files).select("node_id").unique().collect()
        return set(ids["node_id"].to_list())

    def stats(self) -> dict[str, Any]:
        """Rows, partitions, sources, time range, quarantined rows and corrupt files
        (moved aside) per table."""
        out: dict[str, Any] = {}
        for name, schema in SCHEMAS.items():
            files = self.files(name)
            qfiles = self.quarantine_files(name)
            corrupt = self.corrupt_files(name)
            if not files and not qfiles and not corrupt:
                continue
            rows = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
            partitions = sorted({str(f.parent.relative_to(self.root)) for f in files})
            sources = sorted({f.parent.parent.name.removeprefix("source=") for f in files})
            tmin = tmax = None
            if files:
                t = schema.time_column
                rng = (
                    pl.scan_parquet(files)
                    .select(pl.col(t).min().alias("min"), pl.col(t).max().alias("max"))
                    .collect()
                )
                tmin, tmax = rng["min"][0], rng["max"][0]
            quarantined = sum(pq.ParquetFile(f).metadata.num_rows for f in qfiles)
            out[name] = {
                "rows": rows,
                "partitions": len(partitions),
                "files": len(files),
                "sources": sources,
                "time_min": tmin.isoformat() if tmin else None,
                "time_max": tmax.isoformat() if tmax else None,
                "quarantined_rows": quarantined,
                "corrupt_files": [
                    {k: c.get(k) for k in ("file", "moved_to", "reason")} for c in corrupt
                ],
            }
        return out


def _utc_day(t: datetime | None) -> date | None:
    if t is None:
        return None
    if t.tzinfo is None:
        raise LakeError(f"lake read window: {t.isoformat()} must be UTC-aware")
    return t.astimezone(UTC).date()


def partition_day(folder: Path) -> date | None:
    """The day of a ``date=<YYYY-MM-DD>`` folder (None when the name is not one)."""
    try:
        return date.fromisoformat(folder.name.removeprefix("date="))
    except ValueError:
        return None


def _glob_days(
    base: Path, pattern: str, days: tuple[date | None, date | None] | None
) -> Iterator[Path]:
    """``base.glob(pattern)``, listing only the ``date=`` folders within ``days``."""
    if days is None:
        yield from base.glob(pattern)
        return
    sources, _, rest = pattern.partition("/date=*/")
    first, last = days
    for folder in base.glob(f"{sources}/date=*"):
        day = partition_day(folder)
        if day is None or (first is not None and day < first):
            continue
        if last is not None and day > last:
            continue
        yield from folder.glob(rest)


class LakeTransaction:
    """The writes of one commit (see :meth:`Lake.transaction`). The lake lock is taken
    at the first write, so an adapter still fetching its input holds nothing."""

    def __init__(self, lake: Lake) -> None:
        self.lake = lake
        self.id = new_tx_id()
        self.pending = Pending(lake.root, self.id)
        self.ingest_entry: dict[str, Any] | None = None
        self.maintenance: dict[str, Any] | None = None
        """What a maintenance commit did (compaction, retention), kept in its line."""
        self.removes: dict[str, list[str]] = {}
        self._lock: Any = None
        self._done = False

    def remove(self, files: list[Path]) -> None:
        """Stop showing ``files`` (stored files of this lake) at this commit: readers see
        them until the commit line lands, and never after."""
        self._begin()
        for f in files:
            rel = f.relative_to(self.lake.root)
            self.removes.setdefault(str(rel.parent), []).append(rel.name)

    def publish(self, staged: Path, part_dir: Path) -> Path:
        """Link a complete staged file into ``part_dir`` (visible at the commit)."""
        self._begin()
        return self._publish(staged, part_dir)

    def hold(self) -> None:
        """Take the lake lock now (and recover a dead writer's transaction)."""
        self._begin()

    def _begin(self) -> None:
        if self._lock is not None:
            return
        self._lock = self.lake._lock()
        # Holding the lock, no live writer owns an uncommitted file or a staging folder.
        recover(self.lake.root, self.lake._commits, self.lake.root / INGEST_LOG)
        self.lake.clean_staging()

    def _publish(self, tmp: Path, part_dir: Path) -> Path:
        """Link a complete staged file into the partition under a fresh tagged name,
        listed as pending first so an uncommitted one can always be found and removed."""
        part_dir.mkdir(parents=True, exist_ok=True)
        n = len(list(part_dir.glob("part-*.parquet")))
        while True:
            dst = part_dir / f"part-{n:05d}-{self.id}.parquet"
            if dst.exists():
                n += 1
                continue
            self.pending.record(dst)
            try:
                os.link(tmp, dst)  # fails if dst exists: never overwrites a reader's file
            except FileExistsError:
                n += 1
                continue
            tmp.unlink()
            return dst

    def write(self, table: str, source: str, frame: pl.DataFrame) -> WriteResult:
        schema = schema_for(table)
        check_source(source)
        result = WriteResult(table, source)
        if frame.height == 0:
            return result
        frame = frame.select(schema.names).cast(schema.polars_schema())
        day = pl.col(schema.time_column).dt.date().alias("__date")
        sort_cols = [*[k for k in schema.key if k != schema.time_column], schema.time_column]
        self._begin()
        staging = self.lake._staging()
        try:
            parts = frame.with_columns(day).partition_by(
                "__date", as_dict=True, maintain_order=True
            )
            for (part_day,), part in sorted(parts.items(), key=lambda kv: kv[0]):
                assert isinstance(part_day, date)
                part_dir = self.lake._partition_dir(self.lake.root / table, source, part_day)
                rows = self.lake._new_rows(schema, part.drop("__date"), part_dir)
                result.rows_already_present += part.height - rows.height
                if rows.height == 0:
                    continue
                rows = rows.sort(sort_cols)
                self._publish(self.lake._write_staged(rows, staging), part_dir)
                result.partitions.append(str(part_dir.relative_to(self.lake.root)))
                result.rows_written += rows.height
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return result

    def quarantine(
        self, table: str, source: str, bad: pl.DataFrame, *, input_name: str, ingested_at: datetime
    ) -> int:
        check_source(source)
        if bad.height == 0:
            return 0
        frame = bad.select(list(QUARANTINE_SCHEMA.names())).with_columns(
            pl.lit(input_name).alias("input"),
            pl.lit(ingested_at).cast(pl.Datetime("us", "UTC")).alias("ingested_at"),
        )
        base = self.lake.root / QUARANTINE_DIR / table
        part_dir = self.lake._partition_dir(base, source, ingested_at.date())
        self._begin()
        # Re-ingesting the same input must not quarantine its bad rows twice.
        pattern = f"source={source}/date=*/part-*.parquet"
        known = self.lake._readable(self.lake._visible(base, pattern))
        if known:
            seen = pl.scan_parquet(known).select(*QUARANTINE_KEY).collect()
            frame = frame.join(seen, on=list(QUARANTINE_KEY), how="anti", nulls_equal=True)
        if frame.height == 0:
            return 0
        staging = self.lake._staging()
        try:
            self._publish(self.lake._write_staged(frame, staging), part_dir)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return frame.height

    def commit(self) -> None:
        """Make every file of this transaction visible (one fsynced line), then log."""
        if self._done:
            return
        if self._lock is None and self.ingest_entry is None:
            self._done = True  # wrote nothing
            return
        self._begin()
        if self.maintenance is not None and not self.removes and not self.pending.files():
            self._done = True  # a maintenance pass that changed nothing needs no line
            return
        self.lake._commits.commit(
            self.id, self.ingest_entry, removes=self.removes, maintenance=self.maintenance
        )
        self._done = True
        self.pending.forget()
        if self.ingest_entry is not None:
            append_line(self.lake.root / INGEST_LOG, {**self.ingest_entry, "tx": self.id})

    def abort(self) -> None:
        """Remove what this transaction published (it will never commit)."""
        if not self._done and self._lock is not None:
            self.pending.undo()
        self._done = True

    def release(self) -> None:
        if self._lock is not None:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None
