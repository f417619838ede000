"""Safety rules for disrupting a node, one small guard each, each with a typed reason.

A guard looks at one :class:`NodeCandidate` and answers None (no objection) or a
:class:`Verdict` naming the :class:`~core.actions.SkipReason` and a sentence of detail.
:data:`NODE_GUARDS` run first, in order, cheapest and most fundamental first; the guards
that need the whole plan (storm breaker, PDBs, budgets, the allocator check) live in
:mod:`policy.disruption` because they depend on what the plan already accepted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

from predops.allocator.requests import PodRequest
from predops.allocator.topology import NodeSpec
from predops.core.actions import SkipReason
from predops.core.contracts import FailureRisk
from predops.policy.config import DisruptionConfig
from predops.policy.fleet import NodeState, PdbState


@dataclass(frozen=True, slots=True)
class Verdict:
    """A guard's objection."""

    reason: SkipReason
    detail: str


@dataclass(frozen=True, slots=True)
class NodeCandidate:
    """One node the failure model scored, with what the engine knows about it."""

    node_id: str
    risk: FailureRisk
    spec: NodeSpec | None
    state: NodeState | None
    pods: tuple[PodRequest, ...]
    now: datetime


Guard = Callable[[NodeCandidate, DisruptionConfig], Verdict | None]


def known_node(c: NodeCandidate, cfg: DisruptionConfig) -> Verdict | None:
    """The node must be in the inventory and the snapshot."""
    if c.spec is None:
        return Verdict(SkipReason.UNKNOWN_NODE, "node not in the inventory / snapshot")
    return None


def has_provenance(c: NodeCandidate, cfg: DisruptionConfig) -> Verdict | None:
    """A risk from an unknown model is never acted on."""
    if c.risk.provenance is None:
        return Verdict(SkipReason.NO_PROVENANCE, "risk carries no model provenance")
    return None


def fresh_data(c: NodeCandidate, cfg: DisruptionConfig) -> Verdict | None:
    """Risk, its data and the node's state must be recent (and not from the future)."""
    now, r = c.now, c.risk
    if r.as_of > now + cfg.max_clock_skew:
        return Verdict(SkipReason.STALE_DATA, f"risk as_of {r.as_of.isoformat()} is in the future")
    if now - r.as_of > cfg.max_risk_age:
        return Verdict(SkipReason.STALE_DATA, f"risk scored at {r.as_of.isoformat()}, too old")
    if r.provenance is not None and now - r.provenance.data_cutoff > cfg.max_data_age:
        cut = r.provenance.data_cutoff.isoformat()
        return Verdict(SkipReason.STALE_DATA, f"model data cutoff {cut} is too old")
    if c.state is None:
        return Verdict(SkipReason.STALE_DATA, "no node state for this node")
    if now - c.state.observed_at > cfg.max_data_age:
        seen = c.state.observed_at.isoformat()
        return Verdict(SkipReason.STALE_DATA, f"node state observed at {seen}, too old")
    return None


def not_do_not_disrupt(c: NodeCandidate, cfg: DisruptionConfig) -> Verdict | None:
    if c.state is not None and c.state.do_not_disrupt:
        return Verdict(SkipReason.DO_NOT_DISRUPT, "node carries the do-not-disrupt label")
    return None


def not_under_repair(c: NodeCandidate, cfg: DisruptionConfig) -> Verdict | None:
    if c.state is not None and c.state.under_repair:
        return Verdict(SkipReason.UNDER_REPAIR, "node is already out for repair")
    return None


def not_cordoned(c: NodeCandidate, cfg: DisruptionConfig) -> Verdict | None:
    if c.state is not None and c.state.cordoned:
        by = c.state.cordon_owner or "unknown"
        return Verdict(SkipReason.ALREADY_CORDONED, f"node already cordoned (by {by})")
    return None


def no_flapping(c: NodeCandidate, cfg: DisruptionConfig) -> Verdict | None:
    """No drain within ``min_hold`` of the node's last uncordon."""
    st = c.state
    if st is not None and st.uncordoned_at is not None and c.now - st.uncordoned_at < cfg.min_hold:
        return Verdict(
            SkipReason.HYSTERESIS,
            f"uncordoned at {st.uncordoned_at.isoformat()}, less than {cfg.min_hold} ago",
        )
    return None


def not_just_repaired(c: NodeCandidate, cfg: DisruptionConfig) -> Verdict | None:
    """No drain within ``repair_hold`` of a finished repair or inspection (off when 0):
    the node was just looked at, and the risk still reads the telemetry from before it."""
    st = c.state
    if st is not None and st.repaired_at is not None and c.now - st.repaired_at < cfg.repair_hold:
        return Verdict(
            SkipReason.HYSTERESIS,
            f"repaired or inspected at {st.repaired_at.isoformat()}, less than "
            f"{cfg.repair_hold} ago",
        )
    return None


NODE_GUARDS: tuple[Guard, ...] = (
    known_node,
    has_provenance,
    fresh_data,
    not_do_not_disrupt,
    not_under_repair,
    not_cordoned,
    no_flapping,
    not_just_repaired,
)


def first_objection(
    c: NodeCandidate, cfg: DisruptionConfig, guards: tuple[Guard, ...] = NODE_GUARDS
) -> Verdict | None:
    for g in guards:
        v = g(c, cfg)
        if v is not None:
            return v
    return None


class PdbLedger:
    """PDB headroom, used up as the plan accepts drains. A drain is blocked when a PDB
    covering one of the node's pods has no disruption left (or an unknown headroom); a
    PDB with less headroom than pods on the node still lets the drain proceed, one
    eviction at a time (the actuator honours 429 with backoff)."""

    def __init__(
        self, pdbs: Mapping[str, PdbState], pdb_pods: Mapping[str, Mapping[str, int]]
    ) -> None:
        self.left = {k: p.disruptions_allowed for k, p in pdbs.items()}
        self.pdb_pods = pdb_pods

    def covering(self, node_id: str) -> dict[str, int]:
        return {k: n for k, n in sorted(self.pdb_pods.get(node_id, {}).items()) if n > 0}

    def blocked(self, node_id: str) -> Verdict | None:
        for key, _n in self.covering(node_id).items():
            if key not in self.left:
                return Verdict(SkipReason.PDB_BLOCKED, f"PDB {key} covers pods here but is unknown")
            left = self.left[key]
            if left is None:
                return Verdict(SkipReason.PDB_BLOCKED, f"PDB {key}: disruption headroom unknown")
            if left <= 0:
                return Verdict(SkipReason.PDB_BLOCKED, f"PDB {key} allows no disruption now")
        return None

    def take(self, node_id: str) -> None:
        for key, n in self.covering(node_id).items():
            left = self.left.get(key)
            if left is not None:
                self.left[key] = max(0, left - n)
