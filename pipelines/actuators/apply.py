"""Apply a plan: re-validate every action just before it runs, run it at most once per
idempotency key, and record every decision in the audit log.

For each action, in plan order with uncordons first (they give budget back):

1. its key already recorded ``done`` in the audit log -> ``already_done``, nothing runs
   (a process killed mid-apply and run again applies each action at most once);
2. the cluster is re-read (:class:`StateSource`) and :func:`policy.revalidate.revalidate`
   re-checks the plan's guards that apply, then the kind's actuator its own (``check``,
   see :class:`Actuator`) -> ``deferred`` (not due yet) or ``dropped`` with the typed
   reason;
3. dry-run (the default) records ``would_run`` and touches nothing; with ``execute`` the
   kind's :class:`Actuator` runs it between a ``started`` and a ``done`` / ``failed``
   entry. A failed action's disruption budget is released: it is not counted as used
   by the rest of the run (the Kubernetes actuator also undoes its own cordon).

An action interrupted after ``started`` (the process died) is not done: the next run
re-validates it and runs it again; every actuator operation is idempotent (a cordon
patch, an eviction of a pod already gone), and a drain that finds the node cordoned
under its own key resumes. One apply runs at a time per workspace (a lock file beside
the audit log).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from predops.allocator.topology import Topology
from predops.core.actions import Action, Cordon, Drain, Plan, SkipReason, Uncordon
from predops.core.clock import Clock
from predops.core.contracts import FailureRisk
from predops.pipelines.workspace.audit import AuditLog
from predops.pipelines.workspace.errors import LockHeld
from predops.pipelines.workspace.private import PRIVATE_FILE
from predops.policy.config import Budgets, DisruptionConfig
from predops.policy.fleet import FleetState, NodeState, PdbState
from predops.policy.revalidate import CurrentView, revalidate

DISRUPTIVE = (Drain, Cordon)


class ActionFailed(Exception):
    """An action that ran and did not succeed; ``report`` says what happened."""

    def __init__(self, reason: str, report: dict[str, Any] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.report = report or {}


class Actuator(Protocol):
    """Runs one kind of action; returns a report, raises :class:`ActionFailed`.

    An actuator may also have ``check(action, now) -> Verdict | None``: re-validation
    against what only it can read (a pool's MachineDeployment), run after the plan's
    guards, before a dry-run as before a real run."""

    name: str

    def run(self, action: Action, plan_id: str) -> dict[str, Any]: ...


class StateSource(Protocol):
    """The cluster as it is now, read just before each action."""

    def topology(self) -> Topology: ...

    def node(self, node_id: str, now: datetime) -> tuple[NodeState | None, str | None]:
        """The node's state now and the idempotency key its cordon carries (if ours)."""
        ...

    def disrupted(self, now: datetime) -> frozenset[str]:
        """Nodes disrupted now (cordoned, draining or in repair)."""
        ...

    def pdbs(self) -> tuple[Mapping[str, PdbState], Mapping[str, Mapping[str, int]]]: ...


class FleetStateSource:
    """A :class:`FleetState` as the state source (dry-runs from the lake, tests). It does
    not change by itself; the apply loop adds what the run disrupted."""

    def __init__(self, fleet: FleetState, cordon_keys: Mapping[str, str] | None = None) -> None:
        self.fleet = fleet
        self.cordon_keys = dict(cordon_keys or {})

    def topology(self) -> Topology:
        return self.fleet.topology

    def node(self, node_id: str, now: datetime) -> tuple[NodeState | None, str | None]:
        return self.fleet.nodes.get(node_id), self.cordon_keys.get(node_id)

    def disrupted(self, now: datetime) -> frozenset[str]:
        return frozenset(n for n, st in self.fleet.nodes.items() if st.disrupted)

    def pdbs(self) -> tuple[Mapping[str, PdbState], Mapping[str, Mapping[str, int]]]:
        return self.fleet.pdbs, self.fleet.pdb_pods


@dataclass(frozen=True, slots=True)
class ActionOutcome:
    """What became of one action in this run."""

    key: str
    kind: str
    target: str
    outcome: str
    reason: str = ""
    detail: str = ""
    report: dict[str, Any] = field(default_factory=dict)
    why: str = ""
    """The action's own reason (from the plan); ``reason`` is why this run skipped it."""
    params: dict[str, Any] = field(default_factory=dict)
    """What the action does beyond its target (``Action.params``)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "kind": self.kind,
            "target": self.target,
            "outcome": self.outcome,
            "reason": self.reason,
            "detail": self.detail,
            "report": self.report,
            "why": self.why,
            "params": self.params,
        }


@dataclass(frozen=True, slots=True)
class ApplyReport:
    plan_id: str
    mode: str
    outcomes: tuple[ActionOutcome, ...]
    audit_bad_lines: tuple[int, ...] = ()

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for o in self.outcomes:
            out[o.outcome] = out.get(o.outcome, 0) + 1
        return dict(sorted(out.items()))

    def to_dict(self) -> dict[str, Any]:
        return {
            "plan_id": self.plan_id,
            "mode": self.mode,
            "counts": self.counts(),
            "actions": [o.to_dict() for o in self.outcomes],
            "audit_bad_lines": list(self.audit_bad_lines),
        }


@dataclass
class RunLedger:
    """Disruptions this run added and removed, on top of what the state source reads
    (a static source such as the lake does not see them; a live one does, harmlessly)."""

    added: set[str] = field(default_factory=set)
    released: set[str] = field(default_factory=set)

    def took(self, action: Action) -> None:
        if isinstance(action, DISRUPTIVE):
            self.added.add(action.target)
            self.released.discard(action.target)
        elif isinstance(action, Uncordon):
            self.released.add(action.target)
            self.added.discard(action.target)

    def disrupted(self, now_read: frozenset[str]) -> frozenset[str]:
        return (now_read | self.added) - self.released


@contextmanager
def apply_lock(path: Path) -> Iterator[None]:
    """One apply at a time per workspace; a second one fails at once, saying why."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, PRIVATE_FILE)  # beside the audit log
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LockHeld(f"another apply holds {path}; try again when it is done") from None
        yield
    finally:
        os.close(fd)


def _what(action: Action) -> dict[str, Any]:
    return {"kind": action.kind, "target": action.target, "params": action.to_dict()["params"]}


def ordered(actions: tuple[Action, ...]) -> list[Action]:
    """Uncordons first (they free budget), then the plan's order."""
    return [a for a in actions if isinstance(a, Uncordon)] + [
        a for a in actions if not isinstance(a, Uncordon)
    ]


def apply_plan(
    plan: Plan,
    *,
    state: StateSource,
    actuators: Mapping[str, Actuator],
    audit: AuditLog,
    clock: Clock,
    execute: bool = False,
    budgets: Budgets | None = None,
    config: DisruptionConfig | None = None,
    risk: Mapping[str, FailureRisk] | None = None,
) -> ApplyReport:
    """Apply ``plan`` as the module docstring says; dry-run unless ``execute``."""
    budgets = budgets or Budgets()
    config = config or DisruptionConfig()
    mode = "execute" if execute else "dry_run"
    outcomes: list[ActionOutcome] = []
    with apply_lock(audit.path.with_name(audit.path.name + ".lock")):
        read = audit.read()
        done = {e["key"] for e in read.entries if e.get("outcome") == "done" and e.get("key")}
        topology = state.topology()
        run = RunLedger()
        for action in ordered(plan.actions):
            out = _one(
                action,
                plan,
                state,
                topology,
                actuators,
                audit,
                clock,
                execute,
                budgets,
                config,
                risk or {},
                done,
                run,
            )
            outcomes.append(out)
        return ApplyReport(plan.plan_id, mode, tuple(outcomes), read.bad_lines)


def _one(
    action: Action,
    plan: Plan,
    state: StateSource,
    topology: Topology,
    actuators: Mapping[str, Actuator],
    audit: AuditLog,
    clock: Clock,
    execute: bool,
    budgets: Budgets,
    config: DisruptionConfig,
    risk: Mapping[str, FailureRisk],
    done: set[str],
    run: RunLedger,
) -> ActionOutcome:
    key, mode = action.idempotency_key, "execute" if execute else "dry_run"

    def record(
        outcome: str, why: str, detail: str = "", report: dict[str, Any] | None = None
    ) -> None:
        audit.append(
            at=clock.now(),
            outcome=outcome,
            what=_what(action),
            why=why,
            key=key,
            plan_id=plan.plan_id,
            mode=mode,
            detail=detail,
            report=report,
        )

    def result(outcome: str, reason: str = "", detail: str = "", **report: Any) -> ActionOutcome:
        return ActionOutcome(
            key,
            action.kind,
            action.target,
            outcome,
            reason,
            detail,
            report,
            why=action.reason,
            params=action.params(),
        )

    if key in done:
        record("already_done", action.reason, "idempotency key already recorded done")
        return result("already_done")
    now = clock.now()
    node_state, cordon_key = (None, None)
    try:
        if isinstance(action, Drain | Cordon | Uncordon):
            node_state, cordon_key = state.node(action.target, now)
        disrupted = state.disrupted(now)
        pdbs, pdb_pods = state.pdbs()
    except ActionFailed as exc:  # the cluster could not be read: never act blind
        why = SkipReason.REVALIDATION_FAILED.value
        record("dropped", f"re-validation: {why}", exc.reason)
        return result("dropped", why, exc.reason)
    view = CurrentView(
        now=now,
        topology=topology,
        state=node_state,
        disrupted=run.disrupted(disrupted),
        cordon_key=cordon_key,
        risk=risk.get(action.target),
        pdbs=pdbs,
        pdb_pods=pdb_pods,
    )
    verdict = revalidate(action, view, budgets, config)
    actuator = actuators.get(action.kind)
    check = getattr(actuator, "check", None)
    if verdict is None and check is not None:
        verdict = check(action, now)
    if verdict is not None:
        outcome = "deferred" if verdict.reason is SkipReason.WAIT_FOR_CHECKPOINT else "dropped"
        record(outcome, f"re-validation: {verdict.reason.value}", verdict.detail)
        return result(outcome, verdict.reason.value, verdict.detail)
    if not execute:
        record("would_run", action.reason, "dry-run: re-validated, nothing touched")
        run.took(action)
        return result("would_run")
    if actuator is None:
        detail = f"no actuator for {action.kind} in this run"
        record("unsupported", action.reason, detail)
        return result("unsupported", detail=detail)
    record("started", action.reason, f"by the {actuator.name} actuator")
    try:
        report = actuator.run(action, plan.plan_id)
    except ActionFailed as exc:
        # The budget is released: a failed disruption is not counted by the run.
        record("failed", action.reason, exc.reason, exc.report)
        return result("failed", "action_failed", exc.reason, **exc.report)
    record("done", action.reason, "", report)
    done.add(key)
    run.took(action)
    return result("done", **report)
