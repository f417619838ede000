"""Actions the policy engine may propose, and the Plan that carries them.

A Plan names every candidate it considered exactly once: as an Action (with reason,
evidence and an idempotency key) or as a Skip (with a typed reason).

Each type's ``to_dict`` has its inverse here: :func:`action_from_dict`,
:meth:`Skip.from_dict` and :meth:`Plan.from_dict`. An action read back must have the
idempotency key its dict recorded — a plan edited by hand, or written by a version that
computes keys differently, is refused rather than applied with keys that no longer
match the audit log.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import date, datetime
from enum import StrEnum
from typing import Any, ClassVar

from predops.core.contracts import Provenance, _iso, _require_utc


class SkipReason(StrEnum):
    """Why a candidate action was not taken; one value per guard."""

    BELOW_THRESHOLD = "below_threshold"
    BUDGET_EXHAUSTED = "budget_exhausted"
    STORM_BREAKER = "storm_breaker"
    PACED = "paced"
    DOMAIN_PAUSED = "domain_paused"
    PDB_BLOCKED = "pdb_blocked"
    DO_NOT_DISRUPT = "do_not_disrupt"
    ALREADY_CORDONED = "already_cordoned"
    UNDER_REPAIR = "under_repair"
    STALE_DATA = "stale_data"
    NO_PROVENANCE = "no_provenance"
    HYSTERESIS = "hysteresis"
    WOULD_STRAND_GANG = "would_strand_gang"
    DOES_NOT_FIT = "does_not_fit"
    COOLDOWN = "cooldown"
    NOT_NEEDED = "not_needed"
    REVALIDATION_FAILED = "revalidation_failed"
    UNKNOWN_NODE = "unknown_node"
    NO_FORECAST = "no_forecast"
    NOT_OWNED = "not_owned"
    USAGE_FLOOR = "usage_floor"
    WAIT_FOR_CHECKPOINT = "wait_for_checkpoint"
    STILL_AT_RISK = "still_at_risk"
    POOL_CHANGED = "pool_changed"


@dataclass(frozen=True, slots=True, kw_only=True)
class Action:
    """Base of every action. ``target`` is what it acts on (node, pool or SKU)."""

    kind: ClassVar[str] = "action"
    target: str
    reason: str
    evidence: dict[str, Any] = field(default_factory=dict)
    not_before: datetime | None = None
    expires: datetime | None = None
    expected_benefit: float | None = None
    expected_cost: float | None = None

    def __post_init__(self) -> None:
        if not self.target:
            raise ValueError(f"{self.kind}: target is empty")
        if not self.reason:
            raise ValueError(f"{self.kind} {self.target}: every action needs a reason")
        for name in ("not_before", "expires"):
            v = getattr(self, name)
            if v is not None:
                _require_utc(name, v)
        if self.not_before and self.expires and self.expires <= self.not_before:
            raise ValueError(f"{self.kind} {self.target}: expires before not_before")

    def params(self) -> dict[str, Any]:
        """What the action does beyond its target (used in the idempotency key)."""
        return {}

    @property
    def candidate(self) -> str:
        """What makes this a distinct candidate of its kind in a Plan (the target; a
        purchase adds its region, so one SKU may be bought in several regions)."""
        return self.target

    @property
    def idempotency_key(self) -> str:
        """Same action on the same target with the same parameters and window: same key."""
        body = json.dumps(
            {
                "kind": self.kind,
                "target": self.target,
                "params": _iso(self.params()),
                "not_before": _iso(self.not_before),
            },
            sort_keys=True,
        )
        return f"{self.kind}:{self.target}:{hashlib.sha256(body.encode()).hexdigest()[:16]}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "target": self.target,
            "params": _iso(self.params()),
            "reason": self.reason,
            "evidence": _iso(self.evidence),
            "not_before": _iso(self.not_before),
            "expires": _iso(self.expires),
            "expected_benefit": self.expected_benefit,
            "expected_cost": self.expected_cost,
            "idempotency_key": self.idempotency_key,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Cordon(Action):
    """Mark a node unschedulable (Kubernetes ``spec.unschedulable``)."""

    kind: ClassVar[str] = "cordon"


@dataclass(frozen=True, slots=True, kw_only=True)
class Uncordon(Action):
    """Make a node schedulable again after repair or a clean window."""

    kind: ClassVar[str] = "uncordon"


@dataclass(frozen=True, slots=True, kw_only=True)
class Drain(Action):
    """Evict a node's pods through the Eviction API, honouring PDBs."""

    kind: ClassVar[str] = "drain"
    grace_period_s: int = 300

    def params(self) -> dict[str, Any]:
        return {"grace_period_s": self.grace_period_s}


@dataclass(frozen=True, slots=True, kw_only=True)
class SoftTaint(Action):
    """Put a ``PreferNoSchedule`` taint on a risky node: new pods go elsewhere when they
    fit, nothing is evicted (no disruption)."""

    kind: ClassVar[str] = "soft_taint"


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveSoftTaint(Action):
    """Take predops' soft taint off a node whose risk fell."""

    kind: ClassVar[str] = "remove_soft_taint"


@dataclass(frozen=True, slots=True, kw_only=True)
class ResizePool(Action):
    """Hold ``to_nodes`` nodes in pool ``target`` (currently ``from_nodes``)."""

    kind: ClassVar[str] = "resize_pool"
    from_nodes: int
    to_nodes: int

    def __post_init__(self) -> None:
        Action.__post_init__(self)
        if self.from_nodes < 0 or self.to_nodes < 0:
            raise ValueError(f"resize_pool {self.target}: node counts must be >= 0")

    def params(self) -> dict[str, Any]:
        return {"from_nodes": self.from_nodes, "to_nodes": self.to_nodes}


@dataclass(frozen=True, slots=True, kw_only=True)
class Buy(Action):
    """Buy ``quantity`` nodes of SKU ``target`` in ``region``, delivered by ``by_date``."""

    kind: ClassVar[str] = "buy"
    region: str
    quantity: int
    by_date: date

    def __post_init__(self) -> None:
        Action.__post_init__(self)
        if self.quantity <= 0:
            raise ValueError(f"buy {self.target}: quantity must be positive")

    def params(self) -> dict[str, Any]:
        return {
            "region": self.region,
            "quantity": self.quantity,
            "by_date": self.by_date.isoformat(),
        }

    @property
    def candidate(self) -> str:
        return f"{self.target}@{self.region}"


@dataclass(frozen=True, slots=True, kw_only=True)
class LendNodes(Action):
    """Lend ``nodes`` nodes of pool ``target`` to pool ``to_pool`` between ``not_before``
    and ``expires`` (pools whose daily peaks fall at different hours); ``node_ids``
    names them (the cheapest drains, :mod:`policy.lending`; empty: a count only, as
    plans written before nodes were named)."""

    kind: ClassVar[str] = "lend_nodes"
    to_pool: str
    nodes: int
    node_ids: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        Action.__post_init__(self)
        if self.nodes <= 0:
            raise ValueError(f"lend_nodes {self.target}: nodes must be positive")
        if self.to_pool == self.target:
            raise ValueError(f"lend_nodes {self.target}: cannot lend a pool to itself")
        if self.node_ids and len(set(self.node_ids)) != self.nodes:
            raise ValueError(f"lend_nodes {self.target}: {self.nodes} nodes, named {self.node_ids}")

    def params(self) -> dict[str, Any]:
        out: dict[str, Any] = {"to_pool": self.to_pool, "nodes": self.nodes}
        if self.node_ids:  # absent when empty: the keys of count-only plans stay as they were
            out["node_ids"] = list(self.node_ids)
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class ReturnNodes(Action):
    """Give nodes ``node_ids`` lent by pool ``target`` back from pool ``from_pool``: the
    loan expired, or the lender's own forecast rose."""

    kind: ClassVar[str] = "return_nodes"
    from_pool: str
    node_ids: tuple[str, ...]

    def __post_init__(self) -> None:
        Action.__post_init__(self)
        if not self.node_ids or len(set(self.node_ids)) != len(self.node_ids):
            raise ValueError(f"return_nodes {self.target}: node_ids must be distinct, not empty")
        if self.from_pool == self.target:
            raise ValueError(f"return_nodes {self.target}: from_pool is the pool itself")

    def params(self) -> dict[str, Any]:
        return {"from_pool": self.from_pool, "node_ids": list(self.node_ids)}

    @property
    def candidate(self) -> str:
        return f"{self.target}<-{self.from_pool}"


@dataclass(frozen=True, slots=True, kw_only=True)
class SetReclaimable(Action):
    """Publish on node ``target`` the capacity batch (best-effort) work may use:
    ``cpu_milli`` millicores and, when known, ``memory_bytes`` (Koordinator's
    ``kubernetes.io/batch-cpu`` / ``batch-memory`` units; see :mod:`policy.reclaim`)."""

    kind: ClassVar[str] = "set_reclaimable"
    cpu_milli: int
    memory_bytes: int | None = None

    def __post_init__(self) -> None:
        Action.__post_init__(self)
        if self.cpu_milli < 0 or (self.memory_bytes is not None and self.memory_bytes < 0):
            raise ValueError(f"set_reclaimable {self.target}: capacity must be >= 0")

    def params(self) -> dict[str, Any]:
        return {"cpu_milli": self.cpu_milli, "memory_bytes": self.memory_bytes}


@dataclass(frozen=True, slots=True)
class Skip:
    """A candidate the engine considered and did not act on, with a typed reason.
    ``target`` names the candidate as :attr:`Action.candidate` does (``sku@region`` for a
    purchase)."""

    kind: str
    target: str
    reason: SkipReason
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "target": self.target,
            "reason": self.reason.value,
            "detail": self.detail,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Skip:
        """The skip behind one :meth:`to_dict`."""
        return cls(d["kind"], d["target"], SkipReason(d["reason"]), d.get("detail", ""))


@dataclass(frozen=True, slots=True)
class Plan:
    """Actions and skips from one planning run, with the budgets they used."""

    plan_id: str
    created_at: datetime
    data_cutoff: datetime
    actions: tuple[Action, ...] = ()
    skips: tuple[Skip, ...] = ()
    budgets_used: dict[str, int] = field(default_factory=dict)
    provenance: tuple[Provenance, ...] = ()
    dry_run: bool = True
    alerts: tuple[str, ...] = ()
    """Things a human should look at (a paused failure domain, a tripped storm breaker,
    missing inputs)."""
    pacing: dict[str, Any] | None = None
    """Slow-start pacing's state after this plan, for the next round (the JSON form of
    ``policy.pacing.PacingState``; None: ``pacing`` 'breaker'). Not in the plan id."""

    def __post_init__(self) -> None:
        _require_utc("created_at", self.created_at)
        _require_utc("data_cutoff", self.data_cutoff)
        seen: dict[tuple[str, str], str] = {}
        for a in self.actions:
            self._once(seen, (a.kind, a.candidate), "action")
        for s in self.skips:
            self._once(seen, (s.kind, s.target), "skip")

    @staticmethod
    def _once(seen: dict[tuple[str, str], str], cand: tuple[str, str], as_what: str) -> None:
        if cand in seen:
            raise ValueError(
                f"plan names candidate {cand[0]} {cand[1]} twice ({seen[cand]} and {as_what})"
            )
        seen[cand] = as_what

    def to_dict(self) -> dict[str, Any]:
        return {
            "plan_id": self.plan_id,
            "created_at": self.created_at.isoformat(),
            "data_cutoff": self.data_cutoff.isoformat(),
            "dry_run": self.dry_run,
            "actions": [a.to_dict() for a in self.actions],
            "skips": [s.to_dict() for s in self.skips],
            "budgets_used": dict(self.budgets_used),
            "provenance": [p.to_dict() for p in self.provenance],
            "alerts": list(self.alerts),
            "pacing": self.pacing,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: str = "plan") -> Plan:
        """The plan behind one :meth:`to_dict` (fields it does not know are ignored);
        ValueError naming ``where`` and the field otherwise."""
        actions = tuple(
            action_from_dict(a, f"{where} actions[{i}]") for i, a in enumerate(d.get("actions", []))
        )
        skips = tuple(Skip.from_dict(s) for s in d.get("skips", []))
        prov = tuple(Provenance.from_dict(p) for p in d.get("provenance", []))
        created, cutoff = _time(d, "created_at", where), _time(d, "data_cutoff", where)
        if created is None or cutoff is None or not d.get("plan_id"):
            raise ValueError(f"{where}: plan_id, created_at and data_cutoff are required")
        return cls(
            plan_id=str(d["plan_id"]),
            created_at=created,
            data_cutoff=cutoff,
            actions=actions,
            skips=skips,
            budgets_used={str(k): int(v) for k, v in (d.get("budgets_used") or {}).items()},
            provenance=prov,
            dry_run=bool(d.get("dry_run", True)),
            alerts=tuple(d.get("alerts") or ()),
            pacing=d["pacing"] if isinstance(d.get("pacing"), dict) else None,
        )


def _time(d: dict[str, Any], name: str, where: str) -> datetime | None:
    v = d.get(name)
    if v is None:
        return None
    try:
        return datetime.fromisoformat(v)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: field {name} is not an ISO-8601 time: {v!r}") from None


def action_from_dict(d: dict[str, Any], where: str = "action") -> Action:
    """The typed action behind one :meth:`Action.to_dict` (its key is checked)."""
    kind, params = d.get("kind"), d.get("params") or {}
    common: dict[str, Any] = {
        "target": d.get("target") or "",
        "reason": d.get("reason") or "",
        "evidence": d.get("evidence") or {},
        "not_before": _time(d, "not_before", where),
        "expires": _time(d, "expires", where),
        "expected_benefit": d.get("expected_benefit"),
        "expected_cost": d.get("expected_cost"),
    }
    try:
        action: Action
        if kind == "cordon":
            action = Cordon(**common)
        elif kind == "uncordon":
            action = Uncordon(**common)
        elif kind == "soft_taint":
            action = SoftTaint(**common)
        elif kind == "remove_soft_taint":
            action = RemoveSoftTaint(**common)
        elif kind == "drain":
            action = Drain(**common, grace_period_s=int(params["grace_period_s"]))
        elif kind == "resize_pool":
            action = ResizePool(
                **common, from_nodes=int(params["from_nodes"]), to_nodes=int(params["to_nodes"])
            )
        elif kind == "lend_nodes":
            action = LendNodes(
                **common,
                to_pool=str(params["to_pool"]),
                nodes=int(params["nodes"]),
                node_ids=tuple(str(n) for n in params.get("node_ids") or ()),
            )
        elif kind == "return_nodes":
            action = ReturnNodes(
                **common,
                from_pool=str(params["from_pool"]),
                node_ids=tuple(str(n) for n in params["node_ids"]),
            )
        elif kind == "set_reclaimable":
            mem = params.get("memory_bytes")
            action = SetReclaimable(
                **common,
                cpu_milli=int(params["cpu_milli"]),
                memory_bytes=None if mem is None else int(mem),
            )
        elif kind == "buy":
            action = Buy(
                **common,
                region=str(params["region"]),
                quantity=int(params["quantity"]),
                by_date=date.fromisoformat(str(params["by_date"])),
            )
        else:
            raise ValueError(f"{where}: unknown action kind {kind!r}")
    except KeyError as exc:
        raise ValueError(f"{where}: params lack field {exc.args[0]}") from None
    recorded = d.get("idempotency_key")
    if recorded != action.idempotency_key:
        raise ValueError(
            f"{where}: idempotency key {recorded!r} does not match the action's content "
            f"({action.idempotency_key}); the plan was edited or written by another version"
        )
    return action
