"""Disruption budget accounting: which domains a node sits in, how many are disrupted.

A :class:`BudgetLedger` starts from the nodes already disrupted (cordoned, draining,
in repair) and counts each drain the plan accepts; :meth:`BudgetLedger.blocked` names
the first domain whose budget one more disruption would exceed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from predops.allocator.topology import NodeSpec
from predops.policy.config import SCOPES, Budgets


def domains_of(spec: NodeSpec) -> dict[str, str]:
    """The node's domain name at each budget scope. Racks and spines are named by their
    path (a rack name is only unique within its spine)."""
    return {
        "pool": spec.pool,
        "spine": "/".join(spec.path[:3]),
        "rack": "/".join(spec.path),
    }


def _leaf(scope: str, domain: str) -> str:
    """What a budget's ``domain`` matches: the pool name, or the rack / spine name."""
    return domain if scope == "pool" else domain.rsplit("/", 1)[-1]


_Table = tuple[dict[str, dict[str, str]], Counter[tuple[str, str]]]
_last: list[tuple[tuple[NodeSpec, ...], _Table]] = []
"""The domain table of the last node tuple seen (a plan and its re-validations ask for
the same topology many times; 10,000 nodes take about 20 ms to name)."""


def _table(nodes: Iterable[NodeSpec]) -> _Table:
    """Each node's domains and each domain's size (read-only to callers)."""
    last = _last[0] if _last else None  # one read: another thread may replace it
    if isinstance(nodes, tuple) and last is not None and last[0] is nodes:
        return last[1]
    domains = {n.node_id: domains_of(n) for n in nodes}
    size: Counter[tuple[str, str]] = Counter()
    for d in domains.values():
        for scope, name in d.items():
            size[(scope, name)] += 1
    if isinstance(nodes, tuple):  # immutable: the same object names the same nodes
        _last[:] = [(nodes, (domains, size))]
    return domains, size


class BudgetLedger:
    """Disrupted nodes per domain against the budgets in force."""

    def __init__(
        self, budgets: Budgets, nodes: Iterable[NodeSpec], disrupted: Iterable[str]
    ) -> None:
        self.budgets = budgets
        self._domains, self.size = _table(nodes)
        self.in_use: Counter[tuple[str, str]] = Counter()
        for node_id in sorted(set(disrupted)):
            for scope, name in self._domains.get(node_id, {}).items():
                self.in_use[(scope, name)] += 1
        self.planned: Counter[tuple[str, str]] = Counter()

    def limit(self, scope: str, domain: str) -> int | None:
        """Nodes the most restrictive matching budget allows at once (None: unlimited)."""
        return self.budgets.allowed(scope, _leaf(scope, domain), self.size[(scope, domain)])

    def blocked(self, node_id: str) -> str | None:
        """Why one more disruption of ``node_id`` breaks a budget, or None."""
        for scope in SCOPES:
            name = self._domains[node_id][scope]
            lim = self.limit(scope, name)
            used = self.in_use[(scope, name)] + self.planned[(scope, name)]
            if lim is not None and used + 1 > lim:
                return (
                    f"{scope} {name}: {used} of {lim} disruptions allowed already in use "
                    f"({self.size[(scope, name)]} nodes)"
                )
        return None

    def take(self, node_id: str) -> None:
        for scope, name in self._domains[node_id].items():
            self.planned[(scope, name)] += 1

    def usage(self, node_id: str) -> dict[str, dict[str, int | None]]:
        """Per scope: domain, disrupted now, planned, limit (for evidence)."""
        out: dict[str, dict[str, int | None]] = {}
        for scope, name in self._domains[node_id].items():
            out[f"{scope}:{name}"] = {
                "disrupted": self.in_use[(scope, name)],
                "planned": self.planned[(scope, name)],
                "limit": self.limit(scope, name),
            }
        return out

    def used(self) -> dict[str, int]:
        """Disruptions this plan adds per ``scope:domain`` (the Plan's budgets_used)."""
        return {f"{s}:{d}": k for (s, d), k in sorted(self.planned.items()) if k}
