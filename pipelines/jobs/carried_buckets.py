"""The online window's complete buckets, kept between cycles (:mod:`features.carry`).

One Arrow IPC file per bucket end (``<features>/online/buckets/<end>.arrow``, empty when
no node had a sample in it), written atomically. Which of them hold is the cycle state's
business (:mod:`predops.pipelines.jobs.cycle`): it records the feature set and the last
bucket end kept, and a bucket file is only read for an end up to that one, so a cycle
cut short between writing files and recording them leaves nothing that is read.

A long-running process keeps the bucket frames it wrote or read while their files hold
(:class:`predops.pipelines.workspace.file_memo.FileMemo`): reading the window's 97 files
back cost about 0.3 s at every bucket end at 10,000 nodes.

Memory: the window's buckets (about 400 MB for 10,000 nodes and the default metric set,
about as much on disk), which a long-running process keeps between cycles.
"""

from __future__ import annotations

import shutil
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl

from predops.features.node import END
from predops.pipelines.workspace.feature_store import FeatureStore
from predops.pipelines.workspace.file_memo import FileMemo, identity

DIR = "buckets"
STAMP = "%Y%m%dT%H%M%SZ"
_MEMO = FileMemo(capacity=128)
"""This process's bucket frames (a window holds 97 at the default settings)."""


class CarriedBuckets:
    """The bucket files of one feature store."""

    def __init__(self, store: FeatureStore) -> None:
        self.dir = store.root / "online" / DIR

    def _path(self, end: datetime) -> Path:
        return self.dir / f"{end.strftime(STAMP)}.arrow"

    def read(self, first: datetime, last: datetime, bucket: timedelta) -> pl.DataFrame | None:
        """The buckets ending ``first, first + bucket, ..., last``; None when a file is
        missing or cannot be read (then nothing can be carried)."""
        frames = []
        end = first
        while end <= last:
            path = self._path(end)
            frame = _MEMO.get(path)
            if frame is None:
                ident = identity(path)
                try:
                    frame = pl.read_ipc(path)
                except (OSError, pl.exceptions.PolarsError):
                    return None
                _MEMO.put(path, frame, ident)
            frames.append(frame)
            end += bucket
        if not frames:
            return None
        try:
            return pl.concat(frames)
        except pl.exceptions.PolarsError:  # files of another layout
            return None

    def write(self, frame: pl.DataFrame, first: datetime, last: datetime, bucket: timedelta) -> int:
        """One file per bucket end from ``first`` to ``last`` (the rows of ``frame`` at that
        end; none: an empty file); returns the files written."""
        by_end = {k[0]: v for k, v in frame.partition_by(END, as_dict=True).items()}
        self.dir.mkdir(parents=True, exist_ok=True)
        written, end = 0, first
        while end <= last:
            rows = by_end.get(end, frame.clear())
            _MEMO.write(self._path(end), rows.write_ipc, rows)
            written += 1
            end += bucket
        return written

    def prune(self, before: datetime) -> int:
        """Delete the files of bucket ends before ``before``; returns how many."""
        gone = 0
        for path in self.dir.glob("*.arrow") if self.dir.exists() else ():
            try:
                end = datetime.strptime(path.stem, STAMP).replace(tzinfo=before.tzinfo)
            except ValueError:
                continue
            if end < before:
                _MEMO.discard(path)
                path.unlink(missing_ok=True)
                gone += 1
        return gone

    def clear(self) -> None:
        for path in self.dir.glob("*.arrow") if self.dir.exists() else ():
            _MEMO.discard(path)
        shutil.rmtree(self.dir, ignore_errors=True)


__all__ = ["CarriedBuckets"]
