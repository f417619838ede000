"""What the cluster shares now: the nodes on loan between pools and the reclaimable
capacity each node publishes — the ``loans`` and ``published`` inputs of a plan.

Two sources, the report says which (``inputs.sharing.source``):

- ``kubernetes`` (:func:`from_cluster`, when the plan is given a kubeconfig): the node
  list read through the same client the actuators use — the loan annotations the
  lending actuator writes (``predops.io/lent-from``, ``lent-to``, ``lent-until``;
  :func:`predops.pipelines.actuators.lending.loans_of`) and the
  ``predops.io/reclaimable`` annotation of the reclaim actuator
  (:func:`predops.pipelines.actuators.reclaim.published_of`). The truth, whoever moved
  the nodes since.
- ``audit_log`` (:func:`from_audit`, otherwise): what predops' own applies executed, in
  order — a ``done`` ``lend_nodes`` opens a loan of each node it named until the
  action's ``expires`` (read from its plan file), a ``done`` ``return_nodes`` closes
  them; the last ``done`` ``set_reclaimable`` of a node is what it publishes. The lake
  records neither annotations nor labels' history, so this is the record a workspace
  without cluster access has; a node moved by hand is not in it. The log is read one
  line at a time; what is kept is one value per node.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from predops.pipelines.workspace.audit import AuditLog
from predops.pipelines.workspace.errors import PlanError
from predops.pipelines.workspace.plans import plan_path, read_plan
from predops.policy.lending import Loan


@dataclass(frozen=True)
class SharingState:
    """Loans now, each node's published (cpu_milli, memory_bytes), and where they came
    from (``notes``: unreadable records, by what)."""

    source: str
    loans: tuple[Loan, ...] = ()
    published: Mapping[str, tuple[int, int | None]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def to_dict(self, now: datetime) -> dict[str, Any]:
        due = sum(1 for x in self.loans if x.until <= now)
        return {
            "source": self.source,
            "loans": len(self.loans),
            "loans_due": due,
            "nodes_publishing": len(self.published),
            "notes": list(self.notes[:20]),
        }


def from_cluster(nodes: Iterable[Mapping[str, Any]]) -> SharingState:
    """From a Kubernetes node list (module docstring)."""
    from predops.pipelines.actuators.lending import loans_of
    from predops.pipelines.actuators.reclaim import published_of

    listed = list(nodes)
    published: dict[str, tuple[int, int | None]] = {}
    for n in listed:
        value = published_of(n)
        if value is not None:
            published[str((n.get("metadata") or {}).get("name"))] = value
    return SharingState("kubernetes", tuple(loans_of(listed)), published)


def from_audit(audit: AuditLog, plans_dir: Path) -> SharingState:
    """From the audit log's executed actions (module docstring)."""
    loans: dict[str, Loan] = {}
    published: dict[str, tuple[int, int | None]] = {}
    notes: list[str] = []
    expiry: dict[str, dict[str, datetime | None]] = {}
    for e in _entries(audit.path):
        what = e.get("what") or {}
        if e.get("outcome") != "done":
            continue
        kind, target, params = what.get("kind"), str(what.get("target")), what.get("params") or {}
        try:
            if kind == "set_reclaimable":
                mem = params.get("memory_bytes")
                published[target] = (int(params["cpu_milli"]), None if mem is None else int(mem))
            elif kind == "lend_nodes":
                until = _expires(plans_dir, str(e.get("plan_id")), str(e.get("key")), expiry)
                if until is None:
                    notes.append(f"lend {e.get('key')}: its plan file gives no expiry")
                    continue
                for node in params.get("node_ids") or ():
                    loans[str(node)] = Loan(str(node), target, str(params["to_pool"]), until)
            elif kind == "return_nodes":
                for node in params.get("node_ids") or ():
                    loans.pop(str(node), None)
        except (KeyError, TypeError, ValueError) as exc:
            notes.append(f"audit entry {e.get('key')}: unreadable {kind} ({exc})")
    ordered = tuple(loans[n] for n in sorted(loans))
    return SharingState("audit_log", ordered, published, tuple(notes))


def _entries(path: Path) -> Iterator[dict[str, Any]]:
    """The audit log's entries one line at a time (the log only grows: never held
    whole); unreadable lines are skipped, as :meth:`AuditLog.read` counts them."""
    if not path.exists():
        return
    with path.open("rb") as fh:
        for line in fh:
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict):
                yield entry


def _expires(
    plans_dir: Path, plan_id: str, key: str, cache: dict[str, dict[str, datetime | None]]
) -> datetime | None:
    if plan_id not in cache:
        try:
            plan = read_plan(plan_path(plans_dir, plan_id))
            cache[plan_id] = {a.idempotency_key: a.expires for a in plan.actions}
        except (PlanError, ValueError):
            cache[plan_id] = {}
    return cache[plan_id].get(key)
