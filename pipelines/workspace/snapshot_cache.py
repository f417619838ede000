"""The allocator's snapshot of running pods, kept between cycles while its inputs hold.

The plan's snapshot (:func:`predops.pipelines.workspace.pod_snapshot.snapshot_of`: every
pod running at ``now`` placed on its node, about 37,000 pods on 10,000 nodes) is a
function of the topology (each node's latest ``inventory`` row at or before ``now``) and
of the running pods (the ``pods`` rows scheduled at or before ``now`` and not deleted by
then), so of the two tables' files and of where ``now`` falls among their times alone.
When it is built, the earliest inventory ``ts``, pod ``scheduled_at`` or ``deleted_at``
after ``now`` is kept as ``until``: a later cycle whose ``now`` lies in ``[built, until)``
over the same files (no file added, none gone or rewritten) reads exactly the same rows,
and gets the saved snapshot back; anything else rebuilds and saves. So does a change to
the code that builds or holds the snapshot (the key holds a digest of the allocator
package, of ``pod_snapshot.py`` and of ``fleet_state.py``), and a file that cannot be read.

When pods started or stopped (or the time passed ``until``) but the code and the
inventory are the same and no inventory row came since it was built, the kept snapshot
is brought up to date node by node instead of rebuilt (``load(stale=True)``, then
:func:`predops.pipelines.workspace.pod_snapshot.update_snapshot` and :func:`keep`); the
result equals a new snapshot. A cluster whose pods start or stop every few minutes
updates every cycle; a quiet one (or the benchmark's lake, whose pods are known up to
its end) builds once.

The file (``<features>/online/snapshot_cache.pickle``, replaced atomically) holds two
pickles: the key, then the snapshot, its placement counts and the topology it was built
on (so a hit reads no inventory either) — it is read only when the key matches. Like
the registry's models, it is a pickle: the workspace is trusted.

Beside it, ``snapshot_cache.memo.json`` holds what the plan worked out on that very
snapshot (pool sizing's node counts, :class:`predops.policy.sizing.PoolSizingPolicy`),
tagged with the snapshot's token (a digest of the pickle's head: key and build time); a
memo with another token is ignored.

A long-running process (the scheduler) also keeps the last snapshot it read or wrote in
memory (:class:`predops.pipelines.workspace.file_memo.FileMemo`): while the file is the
one it was kept for, the next cycle skips unpickling it (about 0.4 CPU-s at 10,000
nodes) and checks the same key. The snapshot is lent to one plan at a time, which runs
on a fork of it and reverts (:func:`predops.pipelines.jobs.plan.plan_in_workspace`), so
the kept one stays as it was read, built or brought up to date (an update is kept in
memory only, and written when a quarter of the nodes changed; a process reading the
file brings it up to date the same way); :func:`give_back` returns it.

Memory: one snapshot (two while a plan borrows the kept one and another reads the
file).
"""

from __future__ import annotations

import hashlib
import json
import pickle
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

import polars as pl

import predops.allocator
from predops.allocator.snapshot import ClusterSnapshot
from predops.allocator.topology import Topology
from predops.pipelines.workspace.atomic import atomic_write_text
from predops.pipelines.workspace.file_memo import FileMemo, identity
from predops.pipelines.workspace.lake import Lake

FILE = "snapshot_cache.pickle"
VERSION = 3
_MEMO = FileMemo(capacity=2)
"""This process's last snapshots read or written (module docstring)."""


def code_digest() -> str:
    """SHA-256 of the source of the allocator package and of ``pod_snapshot.py`` and
    ``fleet_state.py`` (its neighbours here, which build the snapshot)."""
    files = sorted(Path(predops.allocator.__file__).parent.rglob("*.py"))
    here = Path(__file__)
    h = hashlib.sha256()
    for f in [*files, here.with_name("pod_snapshot.py"), here.with_name("fleet_state.py")]:
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def _next_times(lake: Lake, now: datetime) -> dict[str, datetime | None]:
    """Per table, the earliest inventory ``ts`` / pod ``scheduled_at`` or ``deleted_at``
    after ``now`` (None: none)."""
    out: dict[str, datetime | None] = {}
    parts = [("inventory", ["ts"]), ("pods", ["scheduled_at", "deleted_at"])]
    for table, cols in parts:
        out[table] = None
        if not lake.files(table):
            continue
        row = (
            lake.scan(table)
            .select([pl.col(c).filter(pl.col(c) > now).min().alias(c) for c in cols])
            .collect()
            .row(0)
        )
        times = [t for t in row if isinstance(t, datetime)]
        out[table] = min(times) if times else None
    return out


def next_change(lake: Lake, now: datetime) -> datetime | None:
    """The earliest inventory ``ts``, pod ``scheduled_at`` or ``deleted_at`` after
    ``now``: until then the topology and the running pods at any time are those at
    ``now`` (None: no later time in either table)."""
    times = [t for t in _next_times(lake, now).values() if t is not None]
    return min(times) if times else None


def _key(lake: Lake) -> dict[str, Any]:
    return {
        "version": VERSION,
        "code": code_digest(),
        "inventory": lake.fingerprint("inventory"),
        "pods": lake.fingerprint("pods"),
    }


class Cached(NamedTuple):
    snapshot: ClusterSnapshot
    counts: dict[str, int]
    token: str
    """Names this snapshot (see :func:`read_memo`)."""
    topology: Topology
    """The topology it was built on (each node's latest inventory row)."""
    inventory_at: datetime
    """The newest of those rows' times."""
    lent: bool = False
    """The snapshot is this process's kept one: change it only on a fork, revert, and
    hand it back with :func:`give_back`."""
    current: bool = True
    """False: built on the same topology, but the running pods may have changed since
    (``load(stale=True)``)."""


def _token(head: dict[str, Any]) -> str:
    return hashlib.sha256(pickle.dumps(head, protocol=pickle.HIGHEST_PROTOCOL)).hexdigest()


def _usable(head: Any, key: dict[str, Any], now: datetime) -> bool:
    if not isinstance(head, dict) or head.get("key") != key:
        return False
    built, until = head["built"], head["until"]
    return bool(built <= now and (until is None or now < until))


def _updatable(head: Any, key: dict[str, Any], now: datetime) -> bool:
    """Built by this code on the same inventory, and no inventory row came between its
    time and ``now``: the topology is the same, only the running pods may differ."""
    if not isinstance(head, dict) or not isinstance(head.get("key"), dict):
        return False
    kept = head["key"]
    same = all(kept.get(k) == key[k] for k in ("version", "code", "inventory"))
    inv_until = head.get("inventory_until")
    return bool(same and head["built"] <= now and (inv_until is None or now < inv_until))


def load(path: Path, lake: Lake, now: datetime, *, stale: bool = False) -> Cached | None:
    """The saved snapshot and counts when they hold at ``now`` (see the module
    docstring); None on a miss. ``stale``: also one built on the same topology whose
    running pods may differ (:attr:`Cached.current` False: the caller brings it up to
    date, :func:`predops.pipelines.workspace.pod_snapshot.update_snapshot`, and keeps it
    with :func:`keep`). A :attr:`Cached.lent` answer goes back with :func:`give_back`."""
    key = _key(lake)
    kept = _MEMO.borrow(path)
    if kept is not None:
        head, cached = kept
        if _usable(head, key, now):
            return cached  # type: ignore[no-any-return]
        if stale and _updatable(head, key, now):
            return cached._replace(current=False)  # type: ignore[no-any-return]
        _MEMO.give_back(path, kept)
        return None
    ident = identity(path)
    try:
        with path.open("rb") as fh:
            head = pickle.load(fh)
            current = _usable(head, key, now)
            if not current and not (stale and _updatable(head, key, now)):
                return None
            snap, counts, topology, inv_at = pickle.load(fh)
    except (OSError, EOFError, pickle.UnpicklingError, KeyError, TypeError, ValueError):
        return None
    except (AttributeError, ImportError, IndexError):  # pickled by other code
        return None
    if not isinstance(snap, ClusterSnapshot) or not isinstance(counts, dict):
        return None
    if not isinstance(topology, Topology) or not isinstance(inv_at, datetime):
        return None
    cached = Cached(snap, counts, _token(head), topology, inv_at, lent=True)
    _MEMO.put(path, (head, cached), ident, lent=True)
    return cached if current else cached._replace(current=False)


def _head(lake: Lake, now: datetime) -> dict[str, Any]:
    times = _next_times(lake, now)
    found = [t for t in times.values() if t is not None]
    return {
        "key": _key(lake),
        "built": now,
        "until": min(found) if found else None,
        "inventory_until": times["inventory"],
    }


def keep(
    path: Path, lake: Lake, now: datetime, cached: Cached, counts: dict[str, int], *, write: bool
) -> Cached:
    """Keep ``cached`` (as :func:`load` gave it, stale) brought up to date at ``now`` with
    ``counts``: in this process, and on file too when ``write``. Returns it current and
    lent, under a new token."""
    if write:
        return save(path, lake, now, cached.snapshot, counts, cached.topology, cached.inventory_at)
    head = _head(lake, now)
    new = cached._replace(counts=counts, token=_token(head), current=True, lent=True)
    kept = _MEMO.get(path)
    if kept is not None and kept[1].snapshot is cached.snapshot:
        # still the file's entry (a newer state of what it holds), still lent to the caller
        _MEMO.put(path, (head, new), identity(path), lent=True)
    return new


def give_back(path: Path, cached: Cached) -> None:
    """The plan is done with ``cached`` (lent by :func:`load` or :func:`save`), which is
    as it was read: the next call may have it."""
    kept = _MEMO.get(path)
    if kept is not None and kept[1].snapshot is cached.snapshot:
        _MEMO.give_back(path, kept)


def save(
    path: Path,
    lake: Lake,
    now: datetime,
    snap: ClusterSnapshot,
    counts: dict[str, int],
    topology: Topology,
    inventory_at: datetime,
) -> Cached:
    """Keep ``snap`` (as built at ``now`` on ``topology``, whose newest inventory row is
    from ``inventory_at``) and its counts, atomically; returns it as :func:`load` would,
    lent (:func:`give_back`)."""
    head = _head(lake, now)

    def write(p: Path) -> None:
        with p.open("wb") as fh:
            pickle.dump(head, fh, protocol=pickle.HIGHEST_PROTOCOL)
            body = (snap, counts, topology, inventory_at)
            pickle.dump(body, fh, protocol=pickle.HIGHEST_PROTOCOL)

    path.parent.mkdir(parents=True, exist_ok=True)
    cached = Cached(snap, counts, _token(head), topology, inventory_at, lent=True)
    _MEMO.write(path, write, (head, cached), lent=True)
    return cached


def _memo_path(path: Path) -> Path:
    return path.with_name(f"{path.stem}.memo.json")


def read_memo(path: Path, token: str) -> dict[str, Any]:
    """What was worked out on the snapshot named ``token`` (empty: nothing yet, another
    snapshot, or a file that cannot be read)."""
    try:
        data = json.loads(_memo_path(path).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("token") != token:
        return {}
    entries = data.get("entries")
    return dict(entries) if isinstance(entries, dict) else {}


def write_memo(path: Path, token: str, entries: dict[str, Any]) -> None:
    """Replace the memo (atomically) with ``entries`` for the snapshot ``token``."""
    text = json.dumps({"token": token, "entries": entries}, sort_keys=True)
    atomic_write_text(_memo_path(path), text)


__all__ = [
    "FILE",
    "Cached",
    "code_digest",
    "give_back",
    "keep",
    "load",
    "next_change",
    "read_memo",
    "save",
    "write_memo",
]
