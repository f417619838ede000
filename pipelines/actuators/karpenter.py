"""Pool resizes of Karpenter NodePools: the NodePool's limits are the ceiling, the
pool's placeholders (:mod:`~pipelines.actuators.placeholders`) the headroom.

- **Which NodePool.** The ``karpenter.sh/v1`` NodePool named like the pool (its nodes
  carry ``karpenter.sh/nodepool=<name>``, the first pool label the ingest reads) or
  labelled ``predops.io/pool=<pool>``; none or more than one is an error that names
  what was found. A static NodePool (``spec.replicas``) is refused: its node count is
  its replicas, not a limit.
- **Limits.** ``spec.limits`` of ``cpu``, ``memory`` and the GPU resource become the
  target node count times the pool's largest node (``capacity``: what Karpenter sums
  into ``status.resources`` and holds against the limits); other limit keys are kept.
  With nodes of several shapes the limit bounds resources, not nodes: more nodes of a
  smaller shape fit under it.
- **Karpenter launches nodes only for pending pods,** so a limit alone is a ceiling,
  not a size: the resize also sets the pool's placeholders, whose pending pods are what
  makes Karpenter launch the headroom now. Between plans a real pod that preempts a
  placeholder leaves it pending; Karpenter replaces its node only under the limit, so
  with Karpenter the pool holds at most ``to_nodes`` nodes until the next plan.
- **Scale-in.** Karpenter does not remove a node because a limit dropped: a limit only
  stops it launching while the NodePool is at or over it. Nodes leave through
  consolidation (``spec.disruption``: ``WhenEmpty`` or ``WhenEmptyOrUnderutilized``
  after ``consolidateAfter``), so the scale-in lowers the placeholders first — the
  nodes they held become empty and are consolidated — and then the limit. A NodePool
  whose ``consolidateAfter`` is ``Never`` keeps its nodes; the report says so
  (``consolidation``). Until consolidation brings the pool under the new limit,
  Karpenter launches nothing for it: no node for a real pending pod, no replacement of
  a drifted or expired one.
- **Order.** A scale-up raises the limit, then the placeholders (they find room under
  the new limit); a scale-in lowers the placeholders, then the limit.
- **Re-validation** is the placeholders' (the node count must still be ``from_nodes``,
  ...) plus the NodePool lookup; a NodePool already carrying this action's key
  (:data:`~pipelines.actuators.clusterapi.RESIZE_KEY_ANNOTATION`) with the
  placeholders resumed is the same action resumed. Limits are merge patches of absolute
  values (NodePools are custom resources: no strategic merge), safe to repeat.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from predops.core.actions import Action, ResizePool, SkipReason
from predops.core.clock import Clock
from predops.pipelines.actuators.apply import ActionFailed
from predops.pipelines.actuators.clusterapi import (
    POOL_LABEL,
    RESIZE_KEY_ANNOTATION,
    RESIZED_AT_ANNOTATION,
)
from predops.pipelines.actuators.kube import MERGE_PATCH, KubeApi, api_error, client_errors
from predops.pipelines.actuators.placeholders import PlaceholderResizer
from predops.pipelines.actuators.resize_check import checked_resize
from predops.policy.guards import Verdict

GROUP = "karpenter.sh"
GI = Decimal(1 << 30)
MI = Decimal(1 << 20)


class KarpenterApi:
    """The raw NodePool calls, JSON in and out, over a :class:`KubeApi`'s client."""

    def __init__(self, kube: KubeApi, version: str = "v1") -> None:
        from kubernetes import client

        self.kube = kube
        self.version = version
        self.custom = client.CustomObjectsApi(kube.client)

    def nodepools(self) -> list[dict[str, Any]]:
        """Every NodePool; none when the cluster does not serve the API (404)."""
        from kubernetes.client.exceptions import ApiException

        call = functools.partial(
            self.custom.list_cluster_custom_object, GROUP, self.version, "nodepools"
        )
        try:
            return self.kube.list_all(call)
        except ApiException as exc:
            if exc.status == 404:
                return []
            raise

    def patch(self, name: str, body: dict[str, Any]) -> None:
        self.custom.patch_cluster_custom_object(
            GROUP,
            self.version,
            "nodepools",
            name,
            body,
            _content_type=MERGE_PATCH,
            _preload_content=False,
            _request_timeout=self.kube.opt.request_timeout,
        )


def nodepools_for(pool: str, nodepools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The NodePools named like ``pool`` or labelled for it."""
    out = []
    for n in nodepools:
        md = n.get("metadata") or {}
        if md.get("name") == pool or (md.get("labels") or {}).get(POOL_LABEL) == pool:
            out.append(n)
    return out


def quantity(value: Decimal, resource: str) -> str:
    """A limit as Kubernetes writes it: whole cores or millicores, memory in the largest
    binary unit it divides exactly (bytes otherwise), devices as a count."""
    if resource == "cpu":
        return str(int(value)) if value == value.to_integral_value() else f"{int(value * 1000)}m"
    if resource == "memory":
        for unit, size in (("Gi", GI), ("Mi", MI)):
            if value % size == 0:
                return f"{int(value / size)}{unit}"
        return str(int(value))
    return str(int(value))


def limits_for(to_nodes: int, largest: Mapping[str, Decimal]) -> dict[str, str]:
    """``to_nodes`` times the largest node, per resource of ``largest``."""
    return {r: quantity(to_nodes * v, r) for r, v in largest.items()}


@dataclass(frozen=True, slots=True)
class Resolved:
    nodepool: str
    limits: dict[str, str]
    previous: dict[str, Any]
    resumed: bool
    consolidate_after: str | None


class NodePoolResizer:
    """Runs ``resize_pool`` actions on Karpenter NodePools (module docstring)."""

    name = "karpenter"

    def __init__(
        self,
        api: KarpenterApi,
        placeholders: PlaceholderResizer,
        clock: Clock,
        sleep: Callable[[float], None],
    ) -> None:
        self.api = api
        self.placeholders = placeholders
        self.clock = clock
        self.sleep = sleep
        self._checked: dict[str, Resolved] = {}

    def _resolve(self, action: ResizePool, now: datetime) -> Resolved | Verdict:
        fail = SkipReason.REVALIDATION_FAILED
        found = nodepools_for(action.target, self.placeholders.call(self.api.nodepools))
        if len(found) != 1:
            names = ", ".join(str((n.get("metadata") or {}).get("name")) for n in found)
            return Verdict(
                fail,
                f"pool {action.target}: NodePools named or labelled {POOL_LABEL}="
                f"{action.target}: {f'{len(found)} ({names})' if found else 'none'}; "
                "exactly one is needed",
            )
        np_ = found[0]
        name = str(np_["metadata"]["name"])
        spec = np_.get("spec") or {}
        if spec.get("replicas") is not None:
            return Verdict(fail, f"NodePool {name} is static (spec.replicas); not resized here")
        verdict = self.placeholders.check(action, now)
        if verdict is not None:
            return verdict
        checked = self.placeholders.checked(action)
        assert checked is not None  # the check just passed
        limits = limits_for(action.to_nodes, self._largest(checked.view.largest))
        notes = (np_["metadata"].get("annotations") or {}).get(RESIZE_KEY_ANNOTATION)
        return Resolved(
            name,
            limits,
            dict(spec.get("limits") or {}),
            notes == action.idempotency_key,
            (spec.get("disruption") or {}).get("consolidateAfter"),
        )

    def _largest(self, largest: Mapping[str, Decimal]) -> dict[str, Decimal]:
        gpu = self.placeholders.opt.gpu_resource
        return {r: v for r, v in largest.items() if r != gpu or v > 0}

    def check(self, action: Action, now: datetime) -> Verdict | None:
        """None when ``action`` may run now; else why not (module docstring)."""
        return checked_resize(action, lambda a: self._resolve(a, now), self._checked, "NodePools")

    def _report(self, action: ResizePool, got: Resolved) -> dict[str, Any]:
        out: dict[str, Any] = {
            "nodepool": got.nodepool,
            "limits": got.limits,
            "previous_limits": got.previous,
        }
        if action.to_nodes < action.from_nodes:
            out["consolidation"] = (
                "Never: Karpenter keeps the freed nodes (consolidateAfter is Never)"
                if got.consolidate_after == "Never"
                else f"freed nodes leave when consolidation finds them empty "
                f"(consolidateAfter {got.consolidate_after or 'default'})"
            )
        return out

    def preview(self, action: Action) -> dict[str, Any]:
        got = self._checked.get(action.idempotency_key)
        if got is None or not isinstance(action, ResizePool):
            return {}
        out = {**self._report(action, got), "placeholders": self.placeholders.preview(action)}
        if not got.resumed:
            out["would"] = {"nodepool_patch": self._patch(action, got, "<apply time>")}
        return out

    def _patch(self, action: Action, got: Resolved, now: str) -> dict[str, Any]:
        notes = {RESIZE_KEY_ANNOTATION: action.idempotency_key, RESIZED_AT_ANNOTATION: now}
        return {"metadata": {"annotations": notes}, "spec": {"limits": got.limits}}

    def run(self, action: Action, plan_id: str) -> dict[str, Any]:
        if not isinstance(action, ResizePool):
            raise ActionFailed(f"the karpenter actuator does not run {action.kind} actions")
        try:
            got = self._checked.pop(action.idempotency_key, None) or self._resolve(
                action, self.clock.now()
            )
        except client_errors() as exc:
            status, msg = api_error(exc)
            raise ActionFailed(f"resize_pool {action.target}: HTTP {status}: {msg}") from exc
        if isinstance(got, Verdict):
            raise ActionFailed(f"resize_pool {action.target}: {got.reason.value}: {got.detail}")
        report = self._report(action, got)
        patch = self._patch(action, got, self.clock.now().isoformat())
        scale_in = action.to_nodes < action.from_nodes
        try:
            if not scale_in:
                report["limits_action"] = self._set_limits(got, patch)
            report["placeholders"] = self.placeholders.run(action, plan_id)
            if scale_in:
                report["limits_action"] = self._set_limits(got, patch)
        except client_errors() as exc:
            status, msg = api_error(exc)
            raise ActionFailed(
                f"resize_pool {action.target} (NodePool {got.nodepool}): HTTP {status}: {msg}",
                report,
            ) from exc
        return report

    def _set_limits(self, got: Resolved, patch: dict[str, Any]) -> str:
        if got.resumed:
            return "already set under this key"
        self.placeholders.call(lambda: self.api.patch(got.nodepool, patch))
        return "patched"
