"""What a long-running process read from a workspace file, kept while the file holds.

The scheduler runs the cycle in one process for months (its jobs in a thread pool), and
some of what a cycle reads back from its own state files costs more to parse than to
keep: the allocator's snapshot of 37,000 running pods is about 0.4 CPU-s of unpickling
at 10,000 nodes. A :class:`FileMemo` keeps the parsed value of a file beside the file's
identity when it was read or written (device, inode, size, modification time in
nanoseconds); a later read in the same process gets the value back only while
``os.stat`` still gives that identity. Every writer here replaces files atomically (a
new inode each time, :mod:`predops.pipelines.workspace.atomic`), so a file another
process rewrote, removed or put back is a miss, and the caller reads the file as before.
(A file rewritten in place to the same size within one tick of the filesystem's clock
would look the same; nothing here writes in place.)

A value that its user changes while using it (the snapshot: a plan places and removes
pods on it, then reverts) is *lent*: :meth:`FileMemo.borrow` hands it to one caller at a
time and :meth:`FileMemo.give_back` returns it, so two threads never share it (the
second reads the file). The memo holds at most ``capacity`` files (the least recently
used leaves first).

Memory: the values of at most ``capacity`` files.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from predops.pipelines.workspace.atomic import atomic_write

Identity = tuple[int, int, int, int]


def identity(path: Path) -> Identity | None:
    """The file's (device, inode, size, mtime_ns), None when it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


@dataclass
class _Entry:
    ident: Identity
    value: Any
    lent: bool = False


class FileMemo:
    """Parsed values of files, each valid while its file keeps the identity it had."""

    def __init__(self, capacity: int = 4) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def _valid(self, path: Path) -> _Entry | None:
        key = str(path)
        entry = self._entries.get(key)
        if entry is None:
            return None
        if identity(path) != entry.ident:
            if not entry.lent:
                del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return entry

    def get(self, path: Path) -> Any | None:
        """The value kept for ``path`` while the file is the one it was kept for."""
        with self._lock:
            entry = self._valid(path)
            return None if entry is None else entry.value

    def borrow(self, path: Path) -> Any | None:
        """Like :meth:`get`, for a value its user changes: None also while another
        caller has it; the caller hands it back with :meth:`give_back`."""
        with self._lock:
            entry = self._valid(path)
            if entry is None or entry.lent:
                return None
            entry.lent = True
            return entry.value

    def give_back(self, path: Path, value: Any) -> None:
        """The borrowed (or kept with ``lent=True``) ``value`` is free again."""
        with self._lock:
            entry = self._entries.get(str(path))
            if entry is not None and entry.value is value:
                entry.lent = False

    def put(self, path: Path, value: Any, ident: Identity | None, *, lent: bool = False) -> None:
        """Keep ``value`` for ``path`` as the file with identity ``ident`` (taken right
        after writing it, or before reading it; None keeps nothing). ``lent``: the
        caller goes on using it and hands it back with :meth:`give_back`."""
        if ident is None:
            return
        with self._lock:
            key = str(path)
            self._entries.pop(key, None)
            self._entries[key] = _Entry(ident, value, lent)
            while len(self._entries) > self.capacity:
                oldest = next(iter(self._entries))
                del self._entries[oldest]

    def write(
        self, path: Path, write: Callable[[Path], object], value: Any, *, lent: bool = False
    ) -> None:
        """Replace ``path`` atomically with what ``write(tmp)`` writes, and keep ``value``
        as its parsed content (the temporary file's identity is the published file's: a
        rename keeps the inode, size and mtime). ``lent`` as :meth:`put`."""
        written: list[Identity | None] = []

        def fill(tmp: Path) -> None:
            write(tmp)
            written.append(identity(tmp))

        atomic_write(path, fill)
        self.put(path, value, written[-1] if written else None, lent=lent)

    def discard(self, path: Path) -> None:
        """Forget ``path`` (its file is being removed)."""
        with self._lock:
            self._entries.pop(str(path), None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


__all__ = ["FileMemo", "Identity", "identity"]
