"""A node's state in words wherever a page names a node: whether it serves work now,
who took it out of service and why, and whether it is on loan to another pool.

From the lake (only the named nodes' rows are read):

- events up to now: ``failure`` until its ``repair`` is **in repair**;
  ``maintenance_start`` until ``maintenance_end`` is **in maintenance**; ``cordon``
  until ``uncordon`` is **cordoned by <who>**; ``drain`` until ``uncordon`` is
  **draining by <who>** while pods still run on it and **drained by <who>** once none
  do (a drain is a cordon plus evictions: the lake records when it was asked, the pods
  table whether it finished);
- pods: how many run on the node now (scheduled by now, not deleted) — a node in
  service with none is **idle**, with some **busy**;
- loans: the nodes predops lent to another pool and has not brought back
  (:func:`predops.pipelines.jobs.sharing_state.from_audit`, the audit log of executed
  plans; a workspace without cluster access has no other record) are **lent to
  <pool>**, with the time they are due back.

A pool's *parked* capacity (room below its maximum that a scale-up brings back) is not a
node: it has no row to show here, and the capacity page counts it per pool.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import polars as pl
from markupsafe import Markup, escape

from predops.pipelines.jobs.sharing_state import from_audit
from predops.pipelines.workspace.audit import AuditLog
from predops.pipelines.workspace.fleet_state import BACK_IN_SERVICE, OUT_OF_SERVICE
from predops.pipelines.workspace.lake import Lake
from predops.policy.lending import Loan
from predops.serving.dashboards.formatting import num, when

WORDS = ("ready", "lent", "cordoned", "draining", "drained", "in maintenance", "in repair")
"""A state's one-word form, as the plan page's state filter offers it."""
IN_SERVICE = frozenset({"ready", "lent"})
"""States in which a node runs work (a lent node runs its borrower's)."""


@dataclass(frozen=True, slots=True)
class NodeState:
    """One node's state: ``word`` (one of :data:`WORDS`), ``text`` (the words shown,
    e.g. ``cordoned by alice``), ``pods`` running on it now (None when the lake has no
    pods table, so busy or idle is unknown) and ``due`` (a lent node's return time)."""

    word: str
    text: str
    pods: int | None = None
    due: datetime | None = None

    @property
    def in_service(self) -> bool:
        return self.word in IN_SERVICE

    @property
    def busy(self) -> bool | None:
        """In service with pods running (None: unknown, no pods table)."""
        return None if self.pods is None else self.in_service and self.pods > 0

    def __str__(self) -> str:
        return self.text


READY = NodeState("ready", "ready")


@dataclass(frozen=True, slots=True)
class _Running:
    """Pods running per node at ``at`` over one version of the pods table (``files``),
    valid until ``until``: the first scheduling or deletion after ``at`` (None: none)."""

    files: tuple[tuple[str, int, int], ...]
    at: datetime
    until: datetime | None
    counts: dict[str, int]


_running: dict[str, _Running] = {}
RUNNING_KEPT = 8
"""Lakes whose running-pod counts are kept (a server has one; tests make many)."""
_running_lock = threading.Lock()


def _files_version(lake: Lake) -> tuple[tuple[str, int, int], ...]:
    """The pods table's version: its files with their sizes and modification times."""
    return tuple((f, size, mtime) for f, (size, mtime) in sorted(lake.fingerprint("pods").items()))


def _count_running(lake: Lake, files: tuple[tuple[str, int, int], ...], now: datetime) -> _Running:
    """One pass over the pods table: the running pods per node at ``now`` and the next
    time that count can change (a pod scheduled or deleted after ``now``)."""
    pods = lake.scan("pods").filter(
        pl.col("node_id").is_not_null() & pl.col("scheduled_at").is_not_null()
    )
    running, nxt = pl.collect_all(
        [
            pods.filter(
                (pl.col("scheduled_at") <= now)
                & (pl.col("deleted_at").is_null() | (pl.col("deleted_at") > now))
            )
            .group_by("node_id")
            .agg(pl.col("pod_id").n_unique().alias("pods")),
            pods.select(
                pl.col("scheduled_at").filter(pl.col("scheduled_at") > now).min().alias("s"),
                pl.col("deleted_at").filter(pl.col("deleted_at") > now).min().alias("d"),
            ),
        ]
    )
    changes = [t for t in nxt.row(0) if t is not None]
    counts = dict(zip(running["node_id"].to_list(), running["pods"].to_list(), strict=True))
    return _Running(files, now, min(changes) if changes else None, counts)


def running_pod_counts(lake: Lake, ids: Iterable[str], now: datetime) -> dict[str, int] | None:
    """Pods running at ``now`` on each of ``ids`` (0 for none); None when the lake has
    no pods table.

    The counts of every node come from one pass over the table, kept while the table's
    files are the same and ``now`` is before the next scheduling or deletion it holds
    (one pass per ingest, not per page: a month of a 10,000-node fleet's pods is about
    10 M rows, over a second to scan)."""
    wanted = sorted(set(ids))
    if not lake.files("pods"):
        return None
    files = _files_version(lake)
    key = str(lake.root)
    with _running_lock:
        known = _running.get(key)
        fresh = (
            known is not None
            and known.files == files
            and known.at <= now
            and (known.until is None or now < known.until)
        )
        if not fresh:
            _running.pop(key, None)
            while len(_running) >= RUNNING_KEPT:  # the oldest lake's counts go first
                _running.pop(next(iter(_running)))
            known = _running[key] = _count_running(lake, files, now)
    assert known is not None
    return {n: known.counts.get(n, 0) for n in wanted}


_loans: dict[tuple[str, int, int], tuple[Loan, ...]] = {}
_loans_lock = threading.Lock()


def open_loans(audit_log: Path, plans_dir: Path) -> dict[str, Loan]:
    """Node id -> its loan not yet brought back, from the audit log (module docstring).
    Read once per change of the log (its size and modification time)."""
    try:
        st = audit_log.stat()
    except OSError:
        return {}
    key = (str(audit_log), st.st_size, st.st_mtime_ns)
    with _loans_lock:
        if key not in _loans:
            _loans.clear()
            _loans[key] = from_audit(AuditLog(audit_log, who="dashboards"), plans_dir).loans
        return {loan.node_id: loan for loan in _loans[key]}


def node_states(
    lake_dir: Path,
    ids: Iterable[str],
    now: datetime,
    *,
    loans: Mapping[str, Loan] | None = None,
) -> dict[str, NodeState]:
    """Each of ``ids``' state at ``now`` (module docstring); ``loans`` from
    :func:`open_loans` (none when not given)."""
    wanted = sorted(set(ids))
    lake = Lake(lake_dir)
    pods = running_pod_counts(lake, wanted, now)
    taken: dict[str, tuple[str, str]] = {}  # node -> (cordon | drain, by whom)
    out_of_service: dict[str, str] = {}  # node -> "in repair" | "in maintenance"
    if wanted and lake.files("events"):
        # The node filter after the read: pushed into the Parquet scan, ``is_in`` costs
        # ~70 ms on a few thousand events (it tests row-group statistics per value),
        # against ~3 ms in memory; the events table is small (failures, drains...).
        ev = (
            lake.scan("events")
            .filter(pl.col("at") <= now)
            .select("node_id", "kind", "at", "cause")
            .collect()
            .filter(pl.col("node_id").is_in(wanted))
            .sort("at", "node_id", "kind")
        )
        for node_id, kind, _at, cause in ev.iter_rows():
            if kind in ("cordon", "drain"):
                taken[node_id] = (kind, cause or "someone")
            elif kind == "uncordon":
                taken.pop(node_id, None)
            elif kind in OUT_OF_SERVICE:
                if OUT_OF_SERVICE[kind]:
                    out_of_service[node_id] = (
                        "in maintenance" if kind == "maintenance_start" else "in repair"
                    )
                else:
                    out_of_service.pop(node_id, None)
            elif kind in BACK_IN_SERVICE:
                out_of_service.pop(node_id, None)
    states: dict[str, NodeState] = {}
    for node_id in wanted:
        n = None if pods is None else pods.get(node_id, 0)
        loan = (loans or {}).get(node_id)
        if node_id in out_of_service:
            word = out_of_service[node_id]
            states[node_id] = NodeState(word, word, n)
        elif node_id in taken:
            kind, who = taken[node_id]
            word = "cordoned" if kind == "cordon" else "drained" if n == 0 else "draining"
            states[node_id] = NodeState(word, f"{word} by {who}", n)
        elif loan is not None:
            states[node_id] = NodeState("lent", f"lent to {loan.borrower}", n, loan.until)
        else:
            states[node_id] = NodeState("ready", "ready", n)
    return states


def state_text(state: NodeState | None) -> Markup:
    """A state as a page shows it: its words, a lent node's return time, and the pods
    running (``cordoned by alice · 3 pods``, ``ready · idle``)."""
    if state is None:
        return Markup("—")
    out = escape(state.text)
    if state.due is not None:
        out += Markup(", due back ") + when(state.due)
    if state.pods is not None:
        pods = "idle" if state.pods == 0 and state.in_service else f"{num(state.pods)} pods"
        out += Markup(" · ") + escape("1 pod" if state.pods == 1 else pods)
    return out


__all__ = [
    "IN_SERVICE",
    "READY",
    "WORDS",
    "NodeState",
    "node_states",
    "open_loans",
    "running_pod_counts",
    "state_text",
]
