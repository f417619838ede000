"""What a what-if run counts, and the independent disruption-budget check.

:class:`Tally` accumulates the run's figures (GPU-hours, node-hours, counts). Units are
in the names; :func:`unreplaced` says which needlessly drained nodes their pool could
not replace in an hour (the drain cost that bit). :class:`BudgetAuditor` re-counts
disrupted nodes per pool / rack / spine from the loop's own node state each time the
policy disrupts a node, without the engine's ledger or guards, and records a violation
whenever the disruption takes a domain past what ``policy.config.Budgets`` allows — so a
bug in a guard, or a fleet state handed to the engine wrongly, shows up as a non-zero
count.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from predops.allocator.topology import NodeSpec
from predops.policy.config import Budgets


@dataclass
class Tally:
    """Figures of one run over the evaluated ticks."""

    failures: int = 0
    failures_on_busy_nodes: int = 0
    failures_averted: int = 0
    interrupted_jobs: int = 0
    interrupted_pods: int = 0
    lost_gpu_hours: float = 0.0
    drains: int = 0
    drains_needless: int = 0
    drains_caught: int = 0
    drain_evicted_jobs: int = 0
    drain_lost_gpu_hours: float = 0.0
    needless_out_gpu_hours: float = 0.0
    """Node GPU-hours (CPU nodes: cost units) a needless drain kept out of service,
    from the drain to the uncordon."""
    needless_out_unreplaced_gpu_hours: float = 0.0
    """The part of ``needless_out_gpu_hours`` its pool could not replace: hours in which
    the pool had pending pods a node of its kind could run and no spare node of that
    kind (:func:`unreplaced`)."""
    capacity_value: float = 1.0
    """The engine's ``CostModel.capacity_value``: the share of an out-of-service
    node-hour that hurts, used to price needless drains as the engine does."""
    uncordons: int = 0
    budget_violations: int = 0
    provisioned_node_hours: float = 0.0
    idle_node_hours: float = 0.0
    provisioned_gpu_hours: float = 0.0
    used_gpu_hours: float = 0.0
    provisioned_core_hours: float = 0.0
    used_core_hours: float = 0.0
    pending_pod_hours: float = 0.0
    pending_pod_hours_by_pool: Counter[str] = field(default_factory=Counter)
    pending_within_hour_by_pool: dict[str, float] = field(default_factory=dict)
    """Waits shorter than the hour, per pool: pods placed within the hour on nodes the
    what-if's autoscaler brought (:mod:`~pipelines.whatif.autoscaler`); in
    ``pending_pod_hours`` and added to ``pending_pod_hours_by_pool`` in the figures."""
    idle_node_hours_by_pool: Counter[str] = field(default_factory=Counter)
    pods_gave_up: int = 0
    stockout_node_hours: float = 0.0
    resizes: int = 0
    purchases: list[dict[str, Any]] = field(default_factory=list)
    purchase_cost: float = 0.0
    skips: Counter[str] = field(default_factory=Counter)
    revalidation_drops: Counter[str] = field(default_factory=Counter)
    alerts: int = 0
    missed: Counter[str] = field(default_factory=Counter)
    """Why failures on busy nodes were not drained in time (engine skip reason of the
    node's last plan before the failure, or 'no_plan_in_time')."""
    inspections: Counter[str] = field(default_factory=Counter)
    """Drains by their inspection's final outcome (fault_found, no_fault_found, unknown)."""

    def to_dict(self) -> dict[str, Any]:
        r = 4
        full_cost = self.needless_out_gpu_hours + self.drain_lost_gpu_hours
        cost = self.capacity_value * self.needless_out_gpu_hours + self.drain_lost_gpu_hours
        bit = self.needless_out_unreplaced_gpu_hours + self.drain_lost_gpu_hours
        whole, within = self.pending_pod_hours_by_pool, self.pending_within_hour_by_pool
        pending_by_pool = {
            k: round(whole[k] + within.get(k, 0), r) for k in sorted({*whole, *within})
        }
        return {
            "failures": self.failures,
            "failures_on_busy_nodes": self.failures_on_busy_nodes,
            "failures_averted_by_drains": self.failures_averted,
            "interrupted_jobs": self.interrupted_jobs,
            "interrupted_pods": self.interrupted_pods,
            "lost_gpu_hours": round(self.lost_gpu_hours, r),
            "drains": self.drains,
            "drains_needless": self.drains_needless,
            "drains_caught_failure": self.drains_caught,
            "drain_evicted_jobs": self.drain_evicted_jobs,
            "drain_lost_gpu_hours": round(self.drain_lost_gpu_hours, r),
            "needless_drain_out_gpu_hours": round(self.needless_out_gpu_hours, r),
            "drain_cost_gpu_hours": round(cost, r),
            "drain_cost_gpu_hours_full_capacity": round(full_cost, r),
            "needless_drain_out_unreplaced_gpu_hours": round(
                self.needless_out_unreplaced_gpu_hours, r
            ),
            "drain_cost_gpu_hours_unreplaced": round(bit, r),
            "uncordons": self.uncordons,
            "budget_violations": self.budget_violations,
            "provisioned_node_hours": round(self.provisioned_node_hours, r),
            "idle_node_hours": round(self.idle_node_hours, r),
            "capacity_hours": {
                "gpu_provisioned": round(self.provisioned_gpu_hours, r),
                "gpu_used": round(self.used_gpu_hours, r),
                "cpu_core_provisioned": round(self.provisioned_core_hours, r),
                "cpu_core_used": round(self.used_core_hours, r),
            },
            "pending_pod_hours": round(self.pending_pod_hours, r),
            "pending_pod_hours_by_pool": pending_by_pool,
            "idle_node_hours_by_pool": dict(sorted(self.idle_node_hours_by_pool.items())),
            "pods_gave_up": self.pods_gave_up,
            "stockout_node_hours": round(self.stockout_node_hours, r),
            "resizes": self.resizes,
            "purchases": self.purchases,
            "purchase_cost": round(self.purchase_cost, r),
            "drain_skips": dict(sorted(self.skips.items())),
            "revalidation_drops": dict(sorted(self.revalidation_drops.items())),
            "alerts": self.alerts,
            "missed_failures_by_reason": dict(sorted(self.missed.items())),
            "inspections": dict(sorted(self.inspections.items())),
        }


def unreplaced(
    out: np.ndarray,
    kinds: Sequence[tuple[str, str | None]],
    spare: np.ndarray,
    wanted: set[tuple[str, str | None]],
) -> np.ndarray:
    """Which of the out-of-service node rows ``out`` their pool could not replace this
    hour (a bool per row of ``out``). A node's kind is (pool, GPU model; None for CPU
    nodes). Per kind, the out nodes are replaced one each by the ``spare`` rows of that
    kind (idle in service, or parked and healthy) in row order; the ones left over
    count only when the pool had pending pods a node of that kind could run
    (``wanted`` kinds) — otherwise nobody was waiting for the node."""
    free = Counter(kinds[i] for i in np.flatnonzero(spare).tolist())
    bit = np.zeros(out.size, dtype=bool)
    for j in np.argsort(out, kind="stable").tolist():
        k = kinds[int(out[j])]
        if free[k] > 0:
            free[k] -= 1
        elif k in wanted:
            bit[j] = True
    return bit


def _domains(spec: NodeSpec) -> dict[str, tuple[str, str]]:
    """scope -> (full domain key, the name a budget's ``domain`` matches)."""
    rack = f"{spec.region}/{spec.zone}/{spec.spine}/{spec.rack}"
    spine = f"{spec.region}/{spec.zone}/{spec.spine}"
    return {"pool": (spec.pool, spec.pool), "rack": (rack, spec.rack), "spine": (spine, spec.spine)}


class BudgetAuditor:
    """Counts budget violations from the loop's node state (module docstring)."""

    def __init__(self, budgets: Budgets, specs: tuple[NodeSpec, ...]) -> None:
        self.budgets = budgets
        self.keys = [_domains(s) for s in specs]
        self.checks = 0

    def violates(self, row: int, disrupted: np.ndarray, in_service: np.ndarray) -> str | None:
        """Would disrupting node ``row`` now break a budget? ``disrupted``: nodes out
        (cordoned, draining, in repair or maintenance); ``in_service``: the nodes the
        pools hold (the domain sizes)."""
        self.checks += 1
        for scope, (key, leaf) in self.keys[row].items():
            members = [i for i in self._members(scope, key)]
            size = int(in_service[members].sum())
            out = int(disrupted[members].sum()) - int(disrupted[row]) + 1
            allowed = self.budgets.allowed(scope, leaf, size)
            if allowed is not None and out > allowed:
                return f"{scope} {key}: {out} disrupted > {allowed} allowed of {size}"
        return None

    def _members(self, scope: str, key: str) -> list[int]:
        cache = self.__dict__.setdefault("_cache", {})
        if (scope, key) not in cache:
            cache[(scope, key)] = [i for i, k in enumerate(self.keys) if k[scope][0] == key]
        members: list[int] = cache[(scope, key)]
        return members
