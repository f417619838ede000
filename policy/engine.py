"""``plan()``: risks, forecasts, the cluster snapshot and the fleet state in, a Plan out.

Pure and deterministic: no I/O, no environment, no wall clock (the clock is passed in),
the same inputs give the same Plan (the plan id is a hash of its content). Every
candidate appears exactly once, as an action or as a typed skip:

- a ``drain`` candidate per scored node and an ``uncordon`` candidate per cordoned node
  (:mod:`policy.disruption`);
- a ``resize_pool`` candidate per pool (:mod:`policy.sizing`); with the loans given
  (``loans``), a ``lend_nodes`` candidate per pool with a partner of opposite daily
  peaks naming the nodes lent, and a ``return_nodes`` per lender and borrower with
  loans due back (:mod:`policy.lending`);
- a ``buy`` candidate per SKU and region with a stock position (:mod:`policy.buying`);
- with usage forecasts given (``usage``), a ``set_reclaimable`` candidate per node: the
  capacity batch work may use (:mod:`policy.reclaim`);
- with ``soft_taint_p`` set (off by default), a ``soft_taint`` candidate per scored node
  over it that is not drained, and a ``remove_soft_taint`` per tainted node whose risk
  fell (:mod:`policy.soft_taint`).

The snapshot is used for what-ifs only and is unchanged afterwards.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from predops.allocator.snapshot import ClusterSnapshot
from predops.core.actions import Plan
from predops.core.clock import Clock
from predops.core.contracts import FailureRisk, Forecast, Provenance, UsageForecast
from predops.policy.buying import InventoryBuyPolicy
from predops.policy.config import Budgets, PolicyConfig
from predops.policy.disruption import CordonDrainPolicy, Decisions, latest_risk
from predops.policy.fleet import FleetState
from predops.policy.lending import Loan, TidalLending
from predops.policy.pacing import PacingState
from predops.policy.reclaim import NodeUsage, ReclaimPolicy
from predops.policy.sizing import PoolSizingPolicy
from predops.policy.soft_taint import SoftTaintPolicy


def plan(
    risk: Sequence[FailureRisk],
    forecast: Sequence[Forecast],
    snapshot: ClusterSnapshot,
    inventory: FleetState,
    budgets: Budgets,
    clock: Clock,
    config: PolicyConfig | None = None,
    buy_forecast: Sequence[Forecast] | None = None,
    pacing: PacingState | None = None,
    usage: Reclaiming | None = None,
    loans: Sequence[Loan] | None = None,
    sizing_memo: MutableMapping[str, Any] | None = None,
) -> Plan:
    """One planning run at ``clock.now()``; see the module docstring. ``forecast``
    feeds drains and pool sizing (hours ahead); ``buy_forecast``, when given, feeds the
    buys instead (weeks ahead: the procurement model's forecasts), else ``forecast``
    does. ``pacing``: the slow-start state the previous round left (:mod:`policy.pacing`;
    None: none yet); the plan carries the state for the next round
    (:func:`policy.pacing.pacing_after`).
    ``usage``, when given, feeds the reclaimable capacity; ``loans`` are the
    nodes on loan between pools now (:mod:`policy.lending`): lending is planned only
    when the caller tracks them (``()``: none on loan), so every node lent can come
    back; None plans no lending. ``sizing_memo``: pool sizing's node counts already
    worked out on this snapshot (:class:`policy.sizing.PoolSizingPolicy`)."""
    cfg = config or PolicyConfig()
    now = clock.now()
    drains = CordonDrainPolicy(cfg.disruption, budgets).decide(
        risk, snapshot, inventory, now, forecast, pacing
    )
    drained = frozenset(a.target for a in drains.actions if a.kind == "drain")
    parts: list[Decisions] = [
        drains,
        SoftTaintPolicy(cfg.disruption).decide(latest_risk(risk), inventory, drained, now),
        PoolSizingPolicy(cfg.sizing, sizing_memo).decide(forecast, risk, snapshot, inventory, now),
        InventoryBuyPolicy(cfg.buy).decide(
            forecast if buy_forecast is None else buy_forecast, risk, inventory, now
        ),
    ]
    if loans is not None:
        parts.append(TidalLending(cfg.sizing).decide(forecast, snapshot, inventory, loans, now))
    if usage is not None:
        parts.append(
            ReclaimPolicy(cfg.reclaim).decide(
                usage.forecasts, usage.now, inventory, usage.published, now
            )
        )
    actions = tuple(a for p in parts for a in p.actions)
    skips = tuple(s for p in parts for s in p.skips)
    budgets_used: dict[str, int] = {}
    for p in parts:
        budgets_used.update(p.budgets_used)
    provenance = _unique_provenance(p for part in parts for p in part.provenance)
    alerts = tuple(a for p in parts for a in p.alerts)
    cutoff = _data_cutoff(provenance, inventory.observed_at)
    body = {
        "created_at": now.isoformat(),
        "actions": [a.to_dict() for a in actions],
        "skips": [s.to_dict() for s in skips],
        "budgets_used": budgets_used,
    }
    digest = hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()
    return Plan(
        plan_id=f"plan-{now.strftime('%Y%m%dT%H%M%SZ')}-{digest[:12]}",
        created_at=now,
        data_cutoff=cutoff,
        actions=actions,
        skips=skips,
        budgets_used=budgets_used,
        provenance=provenance,
        alerts=alerts,
        pacing=None if drains.pacing is None else drains.pacing.to_dict(),
    )


@dataclass(frozen=True, slots=True)
class Reclaiming:
    """The reclaimable-capacity inputs of one round: per-node usage forecasts, the usage
    measured now, and what each node publishes now (node -> (cpu_milli, memory_bytes))."""

    forecasts: Sequence[UsageForecast]
    now: Mapping[str, NodeUsage]
    published: Mapping[str, tuple[int, int | None]] = field(default_factory=dict)


def _unique_provenance(items: Iterable[Provenance]) -> tuple[Provenance, ...]:
    seen: dict[tuple[str, str, str, str], Provenance] = {}
    for p in items:
        key = (p.model_name, p.model_version, p.feature_set_hash, p.data_cutoff.isoformat())
        seen.setdefault(key, p)
    return tuple(seen[k] for k in sorted(seen))


def _data_cutoff(provenance: Sequence[Provenance], observed_at: datetime) -> datetime:
    """The oldest data the plan relied on: the earliest model data cutoff, or the fleet
    observation time when it is older (or no model was used)."""
    return min([p.data_cutoff for p in provenance] + [observed_at])
