"""Actions the policy engine may propose, and the Plan that carries them.

A Plan names every candidate it considered exactly once: as an Action (with reason,
evidence and an idempotency key) or as a Skip (with a typed reason).
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
    and ``expires`` (pools whose daily peaks fall at different hours)."""

    kind: ClassVar[str] = "lend_nodes"
    to_pool: str
    nodes: int

    def __post_init__(self) -> None:
        Action.__post_init__(self)
        if self.nodes <= 0:
            raise ValueError(f"lend_nodes {self.target}: nodes must be positive")
        if self.to_pool == self.target:
            raise ValueError(f"lend_nodes {self.target}: cannot lend a pool to itself")

    def params(self) -> dict[str, Any]:
        return {"to_pool": self.to_pool, "nodes": self.nodes}


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
    """Things a human should look at (a tripped storm breaker, missing inputs)."""

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
        }
