"""A node pool as the headroom actuators (placeholders, Karpenter) read it from the
cluster, just before a resize runs.

- **Which nodes.** A node's pool is the value of the first pool label it carries, read
  as the Kubernetes ingest adapter and the apply's cluster state read it
  (:data:`~pipelines.ingest.kubernetes.POOL_LABELS`: Karpenter's, EKS's, GKE's and
  AKS's node-group labels, or the one ``pool_label`` given), so the pool a plan names is
  the pool found here. That label is the placeholders' node selector: every node of the
  pool must carry the pool under the same label key, else the pool is not read.
- **Which run work.** A node runs work when a pod bound to it is neither ours (a
  placeholder, :data:`~pipelines.ingest.kubernetes.PLACEHOLDER_LABEL`), nor a DaemonSet
  or mirror pod, nor finished, nor terminating (the drain's rule,
  :func:`~pipelines.actuators.kube.skip_reason`). Nodes cordoned or under repair are
  out of service.
- **How big a placeholder may be.** Per node, its ``allocatable`` less what its
  DaemonSet and mirror (static) pods request — the room a pod can actually get — and
  per resource (CPU, memory, GPUs) the least of that over the pool's nodes
  (:attr:`PoolNodes.free`), so that one placeholder fits any node of the pool, a node
  of a larger shape included. The pool's largest node per resource is read from
  ``capacity`` (:attr:`PoolNodes.largest`), which is what Karpenter counts against a
  NodePool's limits.
- **Which taints.** The union of the pool's nodes' taints, less the ones Kubernetes,
  cloud providers and the autoscalers put on nodes for a while (not ready,
  unreachable, being deleted or disrupted): a placeholder must stay off a node that
  is going away.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from predops.pipelines.actuators.kube import (
    MIRROR_ANNOTATION,
    KubeOptions,
    node_state,
    skip_reason,
)
from predops.pipelines.ingest.kubernetes import (
    PLACEHOLDER_LABEL,
    POOL_LABELS,
    effective_request,
    parse_quantity,
)

TRANSIENT_TAINTS = (
    "node.kubernetes.io/",
    "node.cloudprovider.kubernetes.io/",
    "karpenter.sh/",
    "ToBeDeletedByClusterAutoscaler",
    "DeletionCandidateOfClusterAutoscaler",
)
"""Prefixes of taint keys a placeholder never tolerates (module docstring)."""


class PoolUnreadable(ValueError):
    """The pool cannot be read as one pool of labelled nodes; the message says why."""


@dataclass(frozen=True, slots=True)
class PoolNodes:
    """One pool's nodes as read now (module docstring). Quantities are in base units:
    cores, bytes, devices."""

    pool: str
    label: str
    """The node label whose value is the pool: the placeholders' node selector key."""
    nodes: tuple[str, ...]
    working: frozenset[str]
    out_of_service: frozenset[str]
    free: Mapping[str, Decimal]
    largest: Mapping[str, Decimal]
    taints: tuple[Mapping[str, str], ...]
    placeholders_running: int
    """Our placeholder pods of this pool bound to one of its nodes."""
    work_at_or_below: int
    """Pods running work in the pool whose priority is at or below the placeholders'
    (they cannot preempt a placeholder)."""

    @property
    def taken(self) -> int:
        """Nodes running work or out of service: the ones no placeholder can hold."""
        return len(self.working | self.out_of_service)


def pool_label(labels: Mapping[str, str], keys: Sequence[str]) -> tuple[str, str] | None:
    """(label key, pool) of the first of ``keys`` the labels carry with a value."""
    return next(((k, labels[k]) for k in keys if labels.get(k)), None)


def _bound_to_node(pod: Mapping[str, Any]) -> bool:
    """A DaemonSet or mirror pod: it reserves room on its node for good."""
    md = pod.get("metadata") or {}
    if MIRROR_ANNOTATION in (md.get("annotations") or {}):
        return True
    owners = md.get("ownerReferences") or []
    return any(o.get("kind") == "DaemonSet" and o.get("controller") for o in owners)


def _quantities(res: Mapping[str, Any], resources: Sequence[str]) -> dict[str, Decimal]:
    return {r: parse_quantity(str(res.get(r, "0"))) for r in resources}


def read_pool(
    nodes: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    pool: str,
    *,
    now: datetime,
    options: KubeOptions,
    resources: Sequence[str],
    priority: int,
    label_keys: Sequence[str] = POOL_LABELS,
) -> PoolNodes:
    """Pool ``pool`` of the node list ``nodes`` with the live pods ``pods`` (module
    docstring); ``priority`` is the placeholders' priority. Raises
    :class:`PoolUnreadable` when the pool has no nodes or they name it under different
    label keys."""
    mine: dict[str, Mapping[str, Any]] = {}
    keys: set[str] = set()
    for n in nodes:
        md = n.get("metadata") or {}
        found = pool_label(md.get("labels") or {}, label_keys)
        if found is not None and found[1] == pool:
            mine[str(md.get("name"))] = n
            keys.add(found[0])
    if not mine:
        raise PoolUnreadable(f"pool {pool}: no node carries it ({', '.join(label_keys)})")
    if len(keys) > 1:
        raise PoolUnreadable(
            f"pool {pool}: its nodes name it under different labels ({', '.join(sorted(keys))})"
        )
    free = {
        name: _quantities((n.get("status") or {}).get("allocatable") or {}, resources)
        for name, n in mine.items()
    }
    working: set[str] = set()
    running = low = 0
    for p in pods:
        spec = p.get("spec") or {}
        node = spec.get("nodeName")
        if node not in mine:
            continue
        labels = (p.get("metadata") or {}).get("labels") or {}
        if PLACEHOLDER_LABEL in labels:
            running += labels.get(PLACEHOLDER_LABEL) == pool
        elif _bound_to_node(p):
            for r in resources:
                free[node][r] -= effective_request(spec, r)
        elif skip_reason(p) is None:
            working.add(node)
            got = spec.get("priority")
            low += got is not None and int(got) <= priority
    taints: dict[tuple[str, str, str], Mapping[str, str]] = {}
    for n in mine.values():
        for t in (n.get("spec") or {}).get("taints") or []:
            key = str(t.get("key") or "")
            if not key or key.startswith(TRANSIENT_TAINTS):
                continue
            value, effect = str(t.get("value") or ""), str(t.get("effect") or "")
            taints[(key, value, effect)] = {"key": key, "value": value, "effect": effect}
    capacity = [
        _quantities((n.get("status") or {}).get("capacity") or {}, resources) for n in mine.values()
    ]
    return PoolNodes(
        pool=pool,
        label=keys.pop(),
        nodes=tuple(sorted(mine)),
        working=frozenset(working),
        out_of_service=frozenset(
            name for name, n in mine.items() if node_state(n, now, options).disrupted
        ),
        free={r: max(Decimal(0), min(f[r] for f in free.values())) for r in resources},
        largest={r: max(c[r] for c in capacity) for r in resources},
        taints=tuple(taints[k] for k in sorted(taints)),
        placeholders_running=running,
        work_at_or_below=low,
    )
