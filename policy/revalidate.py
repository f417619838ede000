"""Re-validation of a planned action just before it runs.

A plan is a snapshot of yesterday's truth by the time an actuator gets to it: the node
may have recovered, been cordoned by someone else, taken the do-not-disrupt label, gone
out for repair, or the disruption budget may be used up by the actions that ran first.
:func:`revalidate` re-checks the plan's guards that still apply against a
:class:`CurrentView` read just before the action runs (as Karpenter does with every
command) and answers None (run it) or a :class:`~policy.guards.Verdict`:

- ``WAIT_FOR_CHECKPOINT``: ``not_before`` is still ahead — defer, a later run does it;
- anything else: drop the action, with the typed reason (``REVALIDATION_FAILED`` when
  it expired, ``BELOW_THRESHOLD`` when the node's current risk no longer pays for the
  drain, ``DO_NOT_DISRUPT``, ``ALREADY_CORDONED``, ``UNDER_REPAIR``, ``HYSTERESIS``,
  ``STALE_DATA``, ``UNKNOWN_NODE``, ``PDB_BLOCKED``, ``BUDGET_EXHAUSTED``, and for an
  uncordon ``NOT_NEEDED`` / ``NOT_OWNED``).

Pure: the caller reads the cluster and passes the view and the clock's time in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from predops.allocator.topology import Topology
from predops.core.actions import Action, Cordon, Drain, SkipReason, Uncordon
from predops.core.contracts import FailureRisk
from predops.policy.budgets import BudgetLedger
from predops.policy.config import Budgets, DisruptionConfig
from predops.policy.costs import inspection_cost
from predops.policy.fleet import NodeState, PdbState
from predops.policy.guards import PdbLedger, Verdict


@dataclass(frozen=True)
class CurrentView:
    """What is true just before an action runs.

    ``state`` is the target node's state now (None: the node is gone); ``disrupted``
    every node disrupted now (cordoned, draining, in repair), including the ones this
    apply run already disrupted; ``cordon_key`` the idempotency key the target's cordon
    carries (so a drain interrupted after its cordon may resume); ``risk`` the node's
    current failure risk when a model is scoring (None: unknown, no health check).
    """

    now: datetime
    topology: Topology
    state: NodeState | None
    disrupted: frozenset[str] = frozenset()
    cordon_key: str | None = None
    risk: FailureRisk | None = None
    pdbs: Mapping[str, PdbState] = field(default_factory=dict)
    pdb_pods: Mapping[str, Mapping[str, int]] = field(default_factory=dict)


def revalidate(
    action: Action, view: CurrentView, budgets: Budgets, config: DisruptionConfig
) -> Verdict | None:
    """None when ``action`` may run now; else why not (see the module docstring)."""
    v = _timing(action, view.now, config)
    if v is not None:
        return v
    if isinstance(action, Drain | Cordon):
        return _disruption(action, view, budgets, config)
    if isinstance(action, Uncordon):
        return _uncordon(action, view, config)
    return None  # pool sizing, lending, buying: only the time window applies


def _timing(action: Action, now: datetime, cfg: DisruptionConfig) -> Verdict | None:
    if action.expires is not None and now >= action.expires:
        return Verdict(SkipReason.REVALIDATION_FAILED, f"expired at {action.expires.isoformat()}")
    if action.not_before is not None and action.not_before > now + cfg.max_clock_skew:
        return Verdict(
            SkipReason.WAIT_FOR_CHECKPOINT, f"not before {action.not_before.isoformat()}"
        )
    return None


def _known(topology: Topology, node_id: str) -> bool:
    try:
        topology.node(node_id)
    except KeyError:
        return False
    return True


def _node(view: CurrentView, cfg: DisruptionConfig) -> Verdict | None:
    st = view.state
    if st is None or not _known(view.topology, st.node_id):
        return Verdict(SkipReason.UNKNOWN_NODE, "node no longer in the cluster / inventory")
    if view.now - st.observed_at > cfg.max_data_age:
        return Verdict(
            SkipReason.STALE_DATA, f"node state observed at {st.observed_at.isoformat()}"
        )
    return None


def _disruption(
    action: Action, view: CurrentView, budgets: Budgets, cfg: DisruptionConfig
) -> Verdict | None:
    v = _node(view, cfg)
    if v is not None:
        return v
    st = view.state
    assert st is not None
    node_id = st.node_id
    if st.do_not_disrupt:
        return Verdict(SkipReason.DO_NOT_DISRUPT, "node now carries the do-not-disrupt label")
    if st.under_repair:
        return Verdict(SkipReason.UNDER_REPAIR, "node is out for repair now")
    resuming = st.cordoned and view.cordon_key == action.idempotency_key
    if st.cordoned and not resuming:
        by = st.cordon_owner or "unknown"
        return Verdict(SkipReason.ALREADY_CORDONED, f"node already cordoned (by {by})")
    if st.uncordoned_at is not None and view.now - st.uncordoned_at < cfg.min_hold:
        return Verdict(SkipReason.HYSTERESIS, f"uncordoned at {st.uncordoned_at.isoformat()}")
    if st.repaired_at is not None and view.now - st.repaired_at < cfg.repair_hold:
        return Verdict(SkipReason.HYSTERESIS, f"repaired at {st.repaired_at.isoformat()}")
    v = _still_at_risk(action, view, cfg)
    if v is not None:
        return v
    if isinstance(action, Drain):
        v = PdbLedger(view.pdbs, view.pdb_pods).blocked(node_id)
        if v is not None:
            return v
    others = view.disrupted - {node_id}
    why = BudgetLedger(budgets, view.topology.nodes, others).blocked(node_id)
    if why is not None:
        return Verdict(SkipReason.BUDGET_EXHAUSTED, why)
    return None


def _still_at_risk(action: Action, view: CurrentView, cfg: DisruptionConfig) -> Verdict | None:
    """A drain planned on a risk that has since fallen below the cost threshold is
    dropped; the planned economics supply the costs and the capacity share the pool's
    headroom gave, the node's capacity the inspection window's value at the current
    p_fail."""
    r = view.risk
    econ: Any = action.evidence.get("economics")
    if r is None or r.provenance is None or not isinstance(econ, Mapping):
        return None
    if view.now - r.as_of > cfg.max_risk_age or r.as_of > view.now + cfg.max_clock_skew:
        return None  # not a current reading: it can neither confirm nor clear the node
    try:
        failure = float(econ["failure_cost"])
        migration = float(econ["migration_cost"])
    except (KeyError, TypeError, ValueError):
        return None
    try:
        share = float(econ.get("capacity_share", 1.0))
    except (TypeError, ValueError):
        share = 1.0
    spec = view.topology.node(r.node_id)
    inspection = inspection_cost(spec, r.p_fail, cfg.costs, share)
    drain_cost = migration + inspection
    if r.p_fail * failure <= cfg.benefit_margin * drain_cost:
        return Verdict(
            SkipReason.BELOW_THRESHOLD,
            f"current p_fail {r.p_fail:.3f} x failure cost {failure:.2f} <= drain cost "
            f"{drain_cost:.2f}: the node looks healthy now",
        )
    return None


def _uncordon(action: Action, view: CurrentView, cfg: DisruptionConfig) -> Verdict | None:
    v = _node(view, cfg)
    if v is not None:
        return v
    st = view.state
    assert st is not None
    if not st.cordoned:
        return Verdict(SkipReason.NOT_NEEDED, "node is not cordoned any more")
    if st.cordon_owner != cfg.owner:
        return Verdict(
            SkipReason.NOT_OWNED, f"cordoned by {st.cordon_owner or 'unknown'}, not by us"
        )
    if st.under_repair:
        return Verdict(SkipReason.UNDER_REPAIR, "node went (back) out for repair")
    repaired = st.repaired_at is not None and (
        st.cordoned_at is None or st.repaired_at >= st.cordoned_at
    )
    if not repaired and st.cordoned_at is not None and view.now - st.cordoned_at < cfg.min_hold:
        return Verdict(SkipReason.HYSTERESIS, f"cordoned at {st.cordoned_at.isoformat()}")
    return None
