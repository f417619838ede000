"""Lake maintenance: compaction of small part files, retention per table, deletion of
removed files. Each change is one lake commit, crash-safe exactly like an ingest.
Over 500 lines: the settings, the choice of partitions, the compaction, the retention
and the deletion share one rule of which files a run may touch, kept side by side.

Ingesting every few minutes adds one part file per table and day partition per ingest
(288 a day at 5 minutes). :func:`maintain` rewrites each settled day partition that has
at least ``min_files`` files smaller than ``target_file_mb`` into a few large files, and
drops whole partitions older than the table's retention:

- **One commit per partition.** The lake lock is taken for one partition at a time (an
  ingest waits for one partition, never for the whole job); the new files are staged,
  linked under the transaction's tagged names (invisible), and one commit line makes
  them visible and lists the old files as removed (:mod:`.lake_commits`). A kill before
  that line leaves the old set (the next writer deletes the new files); after it, the
  new set. Readers never see both or neither.
- **Removed files are deleted later.** They stay on disk for ``keep_removed`` after
  their commit, so a reader that listed them just before it can still read them; a later
  run deletes them (and the emptied folders), then checkpoints the commit log: the lines
  of transactions none of whose files is left on disk are dropped
  (:func:`.lake_commits.checkpoint`), so 30 days of 5-minute ingests, once compacted,
  leave a few lines per day partition instead of one per ingest.
- **Bounded memory.** A partition is rewritten in slices of whole hours of its time
  column, as few slices as keep each under ``bucket_rows`` (default 1,000,000 rows): only
  the small files whose statistics overlap a slice are read, its rows are sorted by
  hour, then the key (``node_id`` then time for telemetry), and written as row groups of
  ``row_group_rows``. Peak memory is about three copies of one slice (10,000 nodes at
  5-minute telemetry: a day is 2.88 M rows, so three 8-hour slices of 960,000 rows),
  whatever the history. Row groups then carry narrow time ranges (an hour or two) and,
  within the hour, narrow key ranges, so a time-window read and a one-node read both
  skip most of them.
- **Idempotent.** A compacted partition has at most one file under the target size, so
  a second run finds nothing to do and writes no commit. Rows are checked: the files
  written hold exactly as many rows as the files replaced, else nothing is committed.
- **Settled partitions only.** A day is compacted once it ended ``settle`` ago (late
  rows for yesterday still arrive just after midnight), unless ``include_current``.

Every maintenance commit records what it did in its commit line (``"maintenance"``:
action, table, partition, files and rows), the lake's own audit trail of compactions
and drops; :func:`status` lists the latest ones.
"""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any, Final

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from predops.core.clock import Clock
from predops.core.schemas import SCHEMAS, schema_for
from predops.pipelines.workspace.config import (
    ConfigTable,
    check_sections,
    merge_env,
    read_toml,
)
from predops.pipelines.workspace.errors import LakeError
from predops.pipelines.workspace.lake import (
    PARQUET_COMPRESSION,
    QUARANTINE_DIR,
    Lake,
    partition_day,
)
from predops.pipelines.workspace.lake_commits import checkpoint

log = logging.getLogger("predops.lake")
LAKE_ENV_PREFIX: Final = "PREDOPS_LAKE__"
HOUR: Final = timedelta(hours=1)
CHECKPOINT_BYTES: Final = 1 << 20
"""A run that deletes nothing still checkpoints a commit log longer than this."""
"""Rows are ordered by this slice of their time first, so row groups span little time."""


@dataclass(frozen=True, slots=True)
class LakeSettings:
    """``[lake]`` of ``predops.toml``: compaction knobs and ``[lake.retention]``."""

    min_files: int = 8
    """A partition is compacted when it has at least this many small files."""
    target_file_mb: int = 256
    """Files under this size are small; a rewritten file is closed once it reaches it."""
    row_group_rows: int = 65_536
    bucket_rows: int = 1_000_000
    """About the most rows of a partition held in memory at once: a partition is
    rewritten in slices of whole hours of its time column, as few as keep each slice
    under this (the memory budget: about three copies of this many rows)."""
    settle: timedelta = timedelta(hours=1)
    """A day partition is compacted only once it ended this long ago."""
    keep_removed: timedelta = timedelta(minutes=15)
    """Removed files stay on disk this long after their commit (for running readers)."""
    retention: Mapping[str, timedelta] = field(default_factory=dict)
    """Per table: partitions whose day ended longer ago than this are dropped. A table
    not listed is kept whole. The key ``_quarantine`` (:data:`QUARANTINE_KEY`) does the
    same for the quarantined rows of every table, by the day they were ingested."""

    @property
    def target_bytes(self) -> int:
        return self.target_file_mb * 1024 * 1024


QUARANTINE_KEY: Final = QUARANTINE_DIR
"""``[lake.retention] _quarantine = "180d"``: quarantined rows ingested on a day that
ended longer ago are dropped (default: kept whole, like every table). Files found corrupt
and moved aside (``_quarantine/_files``) are evidence of a damaged disk and never dropped."""


def parse_lake_settings(document: Mapping[str, Any], where: str) -> LakeSettings:
    """The :class:`LakeSettings` of a parsed TOML document's ``[lake]`` table (defaults
    when there is none); errors name the file, the table and the key."""
    if "lake" not in document:
        return LakeSettings()
    t = ConfigTable(document["lake"], where, "lake")
    d = LakeSettings()
    raw_ret = t.get("retention") or {}
    if not isinstance(raw_ret, dict):
        raise t.fail("retention", "must be a table of <table> = '<duration>' ('90d')")
    rt = ConfigTable(raw_ret, where, "lake.retention")
    retention = {}
    for name in sorted(raw_ret):
        if name not in SCHEMAS and name != QUARANTINE_KEY:
            known = ", ".join([*sorted(SCHEMAS), QUARANTINE_KEY])
            raise rt.fail(name, f"is not a lake table ({known})")
        keep = rt.duration(name, None)
        if keep is None or keep <= timedelta(0):
            raise rt.fail(name, "must be a positive duration such as '90d'")
        retention[name] = keep
    rt.done()
    settle = t.duration("settle", d.settle, allow_zero=True)
    keep_removed = t.duration("keep_removed", d.keep_removed, allow_zero=True)
    assert settle is not None and keep_removed is not None
    out = LakeSettings(
        min_files=t.integer("compact_min_files", d.min_files, 2),
        target_file_mb=t.integer("target_file_mb", d.target_file_mb, 1),
        row_group_rows=t.integer("row_group_rows", d.row_group_rows, 1024),
        bucket_rows=t.integer("bucket_rows", d.bucket_rows, 10_000),
        settle=settle,
        keep_removed=keep_removed,
        retention=retention,
    )
    t.done()
    return out


def load_lake_settings(path: Path | None, env: Mapping[str, str]) -> LakeSettings:
    """``[lake]`` of the TOML file ``path`` (None: defaults) with ``PREDOPS_LAKE__*``
    overrides, for the CLI (which reads nothing else of the file)."""
    where, document = read_toml(path)
    check_sections(document, where)
    merge_env(document, {k: v for k, v in env.items() if k.startswith(LAKE_ENV_PREFIX)}, where)
    return parse_lake_settings(document, where)


# ---------------------------------------------------------------- planning
@dataclass(slots=True)
class Partition:
    """One ``<table>/source=<s>/date=<day>`` folder and its visible files."""

    table: str
    folder: Path
    day: date
    files: list[Path]
    bytes: int

    def name(self, root: Path) -> str:
        return str(self.folder.relative_to(root))


def partitions(lake: Lake, table: str) -> list[Partition]:
    """The table's day partitions with their visible (committed, not removed) files."""
    return _by_day(table, lake.files(table))


def quarantine_partitions(lake: Lake, table: str) -> list[Partition]:
    """The day partitions (ingest day) of ``table``'s quarantined rows; their
    :attr:`Partition.table` is ``_quarantine/<table>``."""
    return _by_day(f"{QUARANTINE_DIR}/{table}", lake.quarantine_files(table))


def _by_day(table: str, files_: list[Path]) -> list[Partition]:
    by_folder: dict[Path, list[Path]] = {}
    for f in files_:
        by_folder.setdefault(f.parent, []).append(f)
    out = []
    for folder, files in sorted(by_folder.items()):
        day = partition_day(folder)
        if day is None:
            continue
        out.append(Partition(table, folder, day, files, sum(_size(f) for f in files)))
    return out


def _listing(lake: Lake, table: str) -> list[Partition]:
    """:func:`partitions`, or :func:`quarantine_partitions` for ``_quarantine/<t>``."""
    if table.startswith(f"{QUARANTINE_DIR}/"):
        return quarantine_partitions(lake, table.split("/", 1)[1])
    return partitions(lake, table)


def _size(f: Path) -> int:
    try:
        return f.stat().st_size
    except FileNotFoundError:
        return 0


def _days(d: timedelta) -> str:
    return f"{d / timedelta(days=1):g}d"


def _day_end(day: date) -> datetime:
    return datetime.combine(day, time(), tzinfo=UTC) + timedelta(days=1)


def small_files(p: Partition, settings: LakeSettings) -> list[Path]:
    return [f for f in p.files if _size(f) < settings.target_bytes]


def needs_compaction(
    p: Partition, settings: LakeSettings, now: datetime, include_current: bool
) -> bool:
    if not include_current and _day_end(p.day) + settings.settle > now:
        return False
    return len(small_files(p, settings)) >= settings.min_files


def expired(p: Partition, settings: LakeSettings, now: datetime) -> bool:
    key = QUARANTINE_KEY if p.table.startswith(f"{QUARANTINE_DIR}/") else p.table
    keep = settings.retention.get(key)
    return keep is not None and _day_end(p.day) <= now - keep


# ---------------------------------------------------------------- compaction
def _time_range(f: Path, column: str) -> tuple[Any, Any] | None:
    """(min, max) of ``column`` from the file's row-group statistics (None: unknown)."""
    md = pq.read_metadata(f)
    idx = md.schema.names.index(column)
    lo = hi = None
    for i in range(md.num_row_groups):
        st = md.row_group(i).column(idx).statistics
        if st is None or not st.has_min_max:
            return None
        lo = st.min if lo is None or st.min < lo else lo
        hi = st.max if hi is None or st.max > hi else hi
    return (lo, hi) if lo is not None else None


def _as_utc(v: Any) -> datetime:
    if isinstance(v, datetime):
        return v if v.tzinfo else v.replace(tzinfo=UTC)
    raise TypeError(type(v))


class _RollingWriter:
    """Row groups into staged files, a new file once one reaches the target size."""

    def __init__(self, staging: Path, settings: LakeSettings) -> None:
        self.staging = staging
        self.settings = settings
        self.done: list[Path] = []
        self.rows = 0
        self._path: Path | None = None
        self._writer: pq.ParquetWriter | None = None
        self._schema: pa.Schema | None = None

    def write(self, frame: pl.DataFrame) -> None:
        table = frame.to_arrow()
        if self._schema is None:
            self._schema = table.schema
        table = table.cast(self._schema)
        if self._writer is None:
            self._path = self.staging / f"{uuid.uuid4().hex}.parquet"
            # Dictionaries for text only: on measurements they bloat (ts, floats) by a third.
            text = [
                f.name
                for f in self._schema
                if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)
            ]
            self._writer = pq.ParquetWriter(
                self._path,
                self._schema,
                compression=PARQUET_COMPRESSION,
                write_statistics=True,
                use_dictionary=text,
            )
        self._writer.write_table(table, row_group_size=self.settings.row_group_rows)
        self.rows += table.num_rows
        assert self._path is not None
        if self._path.stat().st_size >= self.settings.target_bytes:
            self.close()

    def close(self) -> None:
        if self._writer is None:
            return
        self._writer.close()
        assert self._path is not None
        with open(self._path, "rb") as fh:
            os.fsync(fh.fileno())
        self.done.append(self._path)
        self._writer = self._path = None


def compact_partition(lake: Lake, p: Partition, settings: LakeSettings) -> dict[str, Any]:
    """Rewrite the small files of ``p`` into large ones, as one commit (see the module
    docstring). The caller holds no lock; ``p`` is re-listed under the lock."""
    schema = schema_for(p.table)
    tcol = schema.time_column
    ttype = schema.polars_schema()[tcol]
    sort_cols = [*[k for k in schema.key if k != tcol], tcol]
    with lake.transaction() as tx:
        tx.hold()
        fresh = next((q for q in partitions(lake, p.table) if q.folder == p.folder), None)
        if fresh is None or not needs_compaction(fresh, settings, _day_end(p.day), True):
            return {"partition": p.name(lake.root), "status": "nothing to do"}
        inputs = small_files(fresh, settings)
        rows_in = sum(pq.read_metadata(f).num_rows for f in inputs)
        ranges = {f: _time_range(f, tcol) for f in inputs}
        start = datetime.combine(p.day, time(), tzinfo=UTC)
        staging = lake._staging()
        try:
            writer = _RollingWriter(staging, settings)
            slices = -(-rows_in // settings.bucket_rows)  # ceil
            hours = max(1, 24 // max(1, slices))
            for h in range(0, 24, hours):
                lo, hi = start + h * HOUR, start + min(24, h + hours) * HOUR
                first, last = h == 0, h + hours >= 24  # the edges take anything outside
                files = [
                    f
                    for f, r in ranges.items()
                    if r is None
                    or ((last or _as_utc(r[0]) < hi) and (first or _as_utc(r[1]) >= lo))
                ]
                if not files:
                    continue
                t = pl.col(tcol)
                cond = pl.lit(True)
                if not first:
                    cond = cond & (t >= pl.lit(lo).cast(ttype))
                if not last:
                    cond = cond & (t < pl.lit(hi).cast(ttype))
                if first:
                    cond = cond | t.is_null()
                try:
                    rows = pl.scan_parquet(files).filter(cond).collect()
                except Exception as exc:
                    raise LakeError(f"compaction of {p.name(lake.root)}: {exc}") from exc
                if rows.height:
                    hour = pl.col(tcol).dt.truncate("1h").alias("__hour")
                    order = ["__hour", *sort_cols]
                    rows = rows.with_columns(hour).sort(order, nulls_last=True).drop("__hour")
                    writer.write(rows)
                del rows
            writer.close()
            if writer.rows != rows_in:
                raise LakeError(
                    f"compaction of {p.name(lake.root)}: wrote {writer.rows} rows for "
                    f"{rows_in} stored; nothing committed"
                )
            written = [tx.publish(f, p.folder) for f in writer.done]
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        tx.remove(inputs)
        report = {
            "action": "compact",
            "table": p.table,
            "partition": p.name(lake.root),
            "files_before": len(inputs),
            "files_after": len(written),
            "bytes_before": sum(_size(f) for f in inputs),
            "bytes_after": sum(_size(f) for f in written),
            "rows": rows_in,
        }
        tx.maintenance = report
    log.info(
        "lake: compacted %s: %d files -> %d (%d rows)",
        report["partition"],
        report["files_before"],
        report["files_after"],
        rows_in,
    )
    return {**report, "status": "done"}


# ---------------------------------------------------------------- retention
def drop_partitions(lake: Lake, table: str, ps: list[Partition], why: str) -> dict[str, Any]:
    """Remove every visible file of ``ps`` (one table) in one commit."""
    with lake.transaction() as tx:
        tx.hold()
        wanted = {p.folder for p in ps}
        now_visible = [q for q in _listing(lake, table) if q.folder in wanted]
        files = [f for q in now_visible for f in q.files]
        if not files:
            return {"action": "drop", "table": table, "status": "nothing to do"}
        tx.remove(files)
        report = {
            "action": "drop",
            "table": table,
            "why": why,
            "partitions": [q.name(lake.root) for q in now_visible],
            "files": len(files),
            "bytes": sum(q.bytes for q in now_visible),
            "rows": sum(pq.read_metadata(f).num_rows for f in files),
        }
        tx.maintenance = report
    log.warning(
        "lake: dropped %d partition(s) of %s (%d rows): %s",
        len(report["partitions"]),
        table,
        report["rows"],
        why,
    )
    return {**report, "status": "done"}


# ---------------------------------------------------------------- deletion
def vacuum(lake: Lake, *, now: datetime, keep: timedelta) -> dict[str, int]:
    """Delete removed files whose removal committed at least ``keep`` before ``now``
    (under the lake lock), and the folders that leaves empty. Commit times are the
    writer's wall-clock times, so ``now`` must be one too."""
    files = freed = 0
    due = [
        (folder, names)
        for at, folder, names in lake._commits.removals()
        if at
        and datetime.fromisoformat(at) <= now - keep
        and any((lake.root / folder / n).exists() for n in names)
    ]
    if not due:
        return {"files_deleted": 0, "bytes_freed": 0, **_checkpoint_if_due(lake)}
    with lake.transaction() as tx:
        tx.hold()
        tx.maintenance = {"action": "delete"}  # commits nothing: it adds and removes nothing
        for folder, names in due:
            d = lake.root / folder
            for n in names:
                f = d / n
                size = _size(f)
                try:
                    f.unlink()
                except FileNotFoundError:
                    continue
                files += 1
                freed += size
            for empty in (d, d.parent):
                try:
                    empty.rmdir()  # only when empty
                except OSError:
                    break
        log = checkpoint(lake.root, lake._commits)
    return {"files_deleted": files, "bytes_freed": freed, **_log_report(log)}


def _checkpoint_if_due(lake: Lake) -> dict[str, int]:
    """A log checkpoint without deletions (under the lake lock): when it is long, e.g.
    after an upgrade from before checkpoints; otherwise nothing (no lock taken)."""
    if lake._commits.path.exists() and lake._commits.path.stat().st_size < CHECKPOINT_BYTES:
        return {}
    with lake.transaction() as tx:
        tx.hold()
        tx.maintenance = {"action": "checkpoint"}  # commits nothing, as a deletion
        return _log_report(checkpoint(lake.root, lake._commits))


def _log_report(log: dict[str, int]) -> dict[str, int]:
    return {"log_lines_dropped": log["lines_before"] - log["lines_after"]}


# ---------------------------------------------------------------- the job
def maintain(
    lake: Lake,
    settings: LakeSettings,
    *,
    clock: Clock,
    tables: Iterable[str] | None = None,
    dry_run: bool = False,
    include_current: bool = False,
) -> dict[str, Any]:
    """Retention, then compaction, then deletion of removed files, for ``tables``
    (default: every table). ``dry_run`` reports what would be done and changes nothing.
    Retention and settling are judged at ``clock.now()`` when the job starts, deletion at
    its time when the job gets there (so ``keep_removed = "0s"`` deletes this run's)."""
    now = clock.now()
    names = list(tables) if tables is not None else sorted(SCHEMAS)
    for name in names:
        schema_for(name)
    dropped: list[dict[str, Any]] = []
    compacted: list[dict[str, Any]] = []
    for name in names:
        ps = partitions(lake, name)
        if QUARANTINE_KEY in settings.retention:
            dropped += _retain(lake, f"{QUARANTINE_DIR}/{name}", settings, now, dry_run)
        old = [p for p in ps if expired(p, settings, now)]
        if old:
            keep = settings.retention[name]
            why = (
                f"[lake.retention] {name} = {_days(keep)}: "
                f"day ended before {(now - keep).isoformat(timespec='seconds')}"
            )
            if dry_run:
                dropped.append(
                    {
                        "action": "drop",
                        "table": name,
                        "partitions": [p.name(lake.root) for p in old],
                        "files": sum(len(p.files) for p in old),
                        "bytes": sum(p.bytes for p in old),
                        "status": "dry run",
                    }
                )
            else:
                dropped.append(drop_partitions(lake, name, old, why))
        for p in ps:
            if p in old or not needs_compaction(p, settings, now, include_current):
                continue
            if dry_run:
                small = small_files(p, settings)
                compacted.append(
                    {
                        "action": "compact",
                        "table": name,
                        "partition": p.name(lake.root),
                        "files_before": len(small),
                        "bytes_before": sum(_size(f) for f in small),
                        "status": "dry run",
                    }
                )
            else:
                compacted.append(compact_partition(lake, p, settings))
    deleted = (
        {"files_deleted": 0, "bytes_freed": 0}
        if dry_run
        else vacuum(lake, now=clock.now(), keep=settings.keep_removed)
    )
    return {
        "dry_run": dry_run,
        "tables": names,
        "dropped": dropped,
        "compacted": compacted,
        "deleted": deleted,
        "changed": sum(r["status"] == "done" for r in (*dropped, *compacted)),
    }


def _retain(
    lake: Lake, table: str, settings: LakeSettings, now: datetime, dry_run: bool
) -> list[dict[str, Any]]:
    """Retention of the quarantined rows of one table (``_quarantine/<table>``)."""
    old = [p for p in _listing(lake, table) if expired(p, settings, now)]
    if not old:
        return []
    keep = settings.retention[QUARANTINE_KEY]
    if dry_run:
        names = [p.name(lake.root) for p in old]
        files = sum(len(p.files) for p in old)
        return [{"action": "drop", "table": table, "partitions": names, "files": files,
                 "bytes": sum(p.bytes for p in old), "status": "dry run"}]  # fmt: skip
    why = (
        f"[lake.retention] {QUARANTINE_KEY} = {_days(keep)}: "
        f"ingested on a day that ended before {(now - keep).isoformat(timespec='seconds')}"
    )
    return [drop_partitions(lake, table, old, why)]


def status(lake: Lake, settings: LakeSettings | None = None) -> dict[str, Any]:
    """Files, bytes and partitions per table (from the file system, no data read),
    small files, removed files still on disk, and the latest maintenance commits."""
    settings = settings or LakeSettings()
    tables: dict[str, Any] = {}
    for name in sorted(SCHEMAS):
        ps = partitions(lake, name)
        if not ps:
            continue
        tables[name] = {
            "partitions": len(ps),
            "files": sum(len(p.files) for p in ps),
            "bytes": sum(p.bytes for p in ps),
            "small_files": sum(len(small_files(p, settings)) for p in ps),
            "most_files_in_a_partition": max(len(p.files) for p in ps),
            "first_day": ps[0].day.isoformat() if ps else None,
            "last_day": max(p.day for p in ps).isoformat(),
            "retention": _days(settings.retention[name]) if name in settings.retention else None,
        }
    quarantine: dict[str, Any] = {}
    for name in sorted(SCHEMAS):
        qs = quarantine_partitions(lake, name)
        if qs:
            quarantine[name] = {
                "partitions": len(qs),
                "files": sum(len(p.files) for p in qs),
                "bytes": sum(p.bytes for p in qs),
                "first_day": qs[0].day.isoformat(),
                "last_day": max(p.day for p in qs).isoformat(),
            }
    q_keep = settings.retention.get(QUARANTINE_KEY)
    waiting = waiting_bytes = 0
    for _, folder, names in lake._commits.removals():
        for n in names:
            size = _size(lake.root / folder / n)
            if size or (lake.root / folder / n).exists():
                waiting += 1
                waiting_bytes += size
    recent = [e for e in lake._commits.entries() if isinstance(e.get("maintenance"), dict)]
    return {
        "tables": tables,
        "quarantine": quarantine,
        "quarantine_retention": _days(q_keep) if q_keep is not None else None,
        "removed_files_on_disk": waiting,
        "removed_bytes_on_disk": waiting_bytes,
        "recent_maintenance": [
            {"at": e.get("at"), **{k: v for k, v in e["maintenance"].items() if k != "partitions"}}
            for e in recent[-10:]
        ],
    }
