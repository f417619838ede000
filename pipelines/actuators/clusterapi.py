"""Pool resizes through Cluster API: a pool is a MachineDeployment, resized through its
``scale`` subresource, and a scale-in names the machines to remove first.

- **Which MachineDeployment.** The one labelled ``predops.io/pool=<pool>``
  (:attr:`ClusterApiOptions.pool_label`), in any namespace; Cluster API has no pool
  label of its own, so the platform team labels each MachineDeployment once. None or
  more than one is an error that names what was found. A pool is one MachineDeployment
  whose replicas are its nodes: a pool spread over several, or one that
  cluster-autoscaler also sizes (its min/max-size annotations), is not predops' to size;
  the first shows up as ``pool_changed`` (replicas are not the pool's node count), the
  second is dropped (``revalidation_failed``, naming the annotation) rather than fought
  over.
- **Re-validation** (:meth:`PoolResizer.check`, run by the apply loop before a dry-run
  and before a real run, after the plan's time window):

  - the MachineDeployment's ``spec.replicas`` must still be the plan's ``from_nodes``,
    else ``pool_changed``: an autoscaler, a person or an earlier plan resized it since,
    and the next plan starts from the new size. One already at ``to_nodes`` under this
    action's key (:data:`RESIZE_KEY_ANNOTATION`) is the same action resumed, and passes;
  - a scale-in never goes below the nodes that run work now (``usage_floor``): a node
    runs work when a pod on it is neither a DaemonSet nor a mirror pod, nor finished,
    nor terminating (the same rule the drain uses to pick pods to evict);
  - a scale-in removes idle machines only: first the plan's ``scale_in_order`` nodes
    that are still idle, then the pool's other idle nodes by name, then machines that
    have no node yet. Fewer idle machines than the scale-in needs is ``usage_floor``.
- **Run** (:meth:`PoolResizer.run`): stamp the MachineDeployment with the action's key
  (merge patch), mark each chosen Machine with ``cluster.x-k8s.io/delete-machine`` (the
  MachineSet controller deletes marked machines first, whatever its deletion policy),
  then patch ``spec.replicas`` through ``/scale``. Cluster API cordons and drains each
  removed node itself, through the Eviction API, before deleting its machine. If the
  scale patch fails, the marks this run made are taken off again, so a later scale-in
  by someone else does not pick those machines because of us.

Every call is safe to repeat (absolute values, merge patches); transient API errors
are retried as the Kubernetes actuator retries them (:func:`~pipelines.actuators.kube.
retrying`). Custom resources take merge or JSON patches, not strategic-merge ones.
Tested against ``tests/fakes/kube_api.py``, which serves MachineDeployments and
Machines as stored objects (no MachineSet controller runs there).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from predops.core.actions import Action, ResizePool, SkipReason
from predops.core.clock import Clock
from predops.pipelines.actuators.apply import ActionFailed
from predops.pipelines.actuators.kube import (
    MERGE_PATCH,
    KubeApi,
    api_error,
    client_errors,
    retrying,
    skip_reason,
)
from predops.pipelines.actuators.resize_check import checked_resize
from predops.policy.guards import Verdict

GROUP = "cluster.x-k8s.io"
POOL_LABEL = "predops.io/pool"
DEPLOYMENT_NAME_LABEL = "cluster.x-k8s.io/deployment-name"
DELETE_MACHINE_ANNOTATION = "cluster.x-k8s.io/delete-machine"
RESIZE_KEY_ANNOTATION = "predops.io/resize-key"
RESIZED_AT_ANNOTATION = "predops.io/resized-at"
AUTOSCALER_ANNOTATIONS = (
    "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size",
    "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size",
)


@dataclass(frozen=True, slots=True)
class ClusterApiOptions:
    """``version`` of the ``cluster.x-k8s.io`` API to speak; ``pool_label`` the label
    naming a MachineDeployment's pool."""

    version: str = "v1beta1"
    pool_label: str = POOL_LABEL


class ClusterApi:
    """The raw Cluster API calls, JSON in and out, over a :class:`KubeApi`'s client."""

    def __init__(self, kube: KubeApi, options: ClusterApiOptions | None = None) -> None:
        from kubernetes import client

        self.kube = kube
        self.opt = options or ClusterApiOptions()
        self.custom = client.CustomObjectsApi(kube.client)

    def deployments(self, pool: str) -> list[dict[str, Any]]:
        call = functools.partial(
            self.custom.list_custom_object_for_all_namespaces,
            GROUP,
            self.opt.version,
            "machinedeployments",
        )
        return self.kube.list_all(call, label_selector=f"{self.opt.pool_label}={pool}")

    def machines(self, namespace: str, deployment: str) -> list[dict[str, Any]]:
        call = functools.partial(
            self.custom.list_namespaced_custom_object,
            GROUP,
            self.opt.version,
            namespace,
            "machines",
        )
        return self.kube.list_all(call, label_selector=f"{DEPLOYMENT_NAME_LABEL}={deployment}")

    def live_pods(self) -> list[dict[str, Any]]:
        return self.kube.list_all(
            self.kube.core.list_pod_for_all_namespaces,
            field_selector="status.phase!=Succeeded,status.phase!=Failed",
        )

    def _patch(self, namespace: str, plural: str, name: str, body: dict[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object(
            GROUP,
            self.opt.version,
            namespace,
            plural,
            name,
            body,
            _content_type=MERGE_PATCH,
            _preload_content=False,
            _request_timeout=self.kube.opt.request_timeout,
        )

    def annotate(
        self, namespace: str, plural: str, name: str, notes: Mapping[str, str | None]
    ) -> None:
        self._patch(namespace, plural, name, {"metadata": {"annotations": dict(notes)}})

    def scale(self, namespace: str, deployment: str, replicas: int) -> None:
        self.custom.patch_namespaced_custom_object_scale(
            GROUP,
            self.opt.version,
            namespace,
            "machinedeployments",
            deployment,
            {"spec": {"replicas": replicas}},
            _content_type=MERGE_PATCH,
            _preload_content=False,
            _request_timeout=self.kube.opt.request_timeout,
        )


def _md(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


@dataclass(frozen=True, slots=True)
class Machine:
    name: str
    node: str | None
    busy: bool


@dataclass(frozen=True, slots=True)
class Resolved:
    """A resize action against the cluster as it is now."""

    namespace: str
    deployment: str
    resumed: bool
    busy_nodes: int = 0
    delete_first: tuple[Machine, ...] = field(default_factory=tuple)


def delete_order(machines: Sequence[Machine], planned: Sequence[str]) -> list[Machine]:
    """Idle machines in the order a scale-in removes them (module docstring)."""
    by_node = {m.node: m for m in machines if m.node is not None and not m.busy}
    first = [by_node.pop(n) for n in planned if n in by_node]
    rest = sorted(by_node.values(), key=lambda m: m.node or "")
    nodeless = sorted((m for m in machines if m.node is None), key=lambda m: m.name)
    return first + rest + nodeless


class PoolResizer:
    """Runs ``resize_pool`` actions against a Cluster API management cluster."""

    name = "cluster-api"

    def __init__(self, api: ClusterApi, clock: Clock, sleep: Callable[[float], None]) -> None:
        self.api = api
        self.clock = clock
        self.sleep = sleep
        self._checked: dict[str, Resolved] = {}
        """What ``check`` found for an action that passed, for the ``run`` that follows it
        in the same apply (a scale-in's pod listing is the whole cluster's: read once)."""

    def _call(self, call: Callable[[], Any]) -> Any:
        return retrying(call, self.api.kube.opt, self.sleep)

    # ------------------------------------------------------------------ re-validation
    def _resolve(self, action: ResizePool) -> Resolved | Verdict:
        pool = action.target
        found = self._call(lambda: self.api.deployments(pool))
        if len(found) != 1:
            names = ", ".join(f"{_md(d).get('namespace')}/{_md(d).get('name')}" for d in found)
            what = f"{len(found)} ({names})" if found else "none"
            return Verdict(
                SkipReason.REVALIDATION_FAILED,
                f"pool {pool}: MachineDeployments labelled "
                f"{self.api.opt.pool_label}={pool}: {what}; exactly one is needed",
            )
        md = found[0]
        ns, name = str(_md(md).get("namespace") or "default"), str(_md(md).get("name"))
        replicas = int((md.get("spec") or {}).get("replicas") or 0)
        notes = _md(md).get("annotations") or {}
        autoscaled = [a for a in AUTOSCALER_ANNOTATIONS if a in notes]
        if autoscaled:
            return Verdict(
                SkipReason.REVALIDATION_FAILED,
                f"MachineDeployment {ns}/{name} is sized by cluster-autoscaler "
                f"({autoscaled[0]}); predops does not fight it",
            )
        key = notes.get(RESIZE_KEY_ANNOTATION)
        if replicas == action.to_nodes and key == action.idempotency_key:
            return Resolved(ns, name, resumed=True)
        if replicas != action.from_nodes:
            return Verdict(
                SkipReason.POOL_CHANGED,
                f"MachineDeployment {ns}/{name} has {replicas} replicas now, the plan "
                f"resized from {action.from_nodes}",
            )
        if action.to_nodes >= action.from_nodes:
            return Resolved(ns, name, resumed=False)
        machines = self._machines(ns, name)
        busy = sum(m.busy for m in machines)
        if action.to_nodes < busy:
            return Verdict(
                SkipReason.USAGE_FLOOR,
                f"{busy} nodes of pool {pool} run work now; never below that "
                f"(planned {action.to_nodes})",
            )
        planned = [str(n) for n in action.evidence.get("scale_in_order") or []]
        order = delete_order(machines, planned)
        need = action.from_nodes - action.to_nodes
        if len(order) < need:
            return Verdict(
                SkipReason.USAGE_FLOOR,
                f"pool {pool}: {len(order)} idle machines, the scale-in removes {need}",
            )
        return Resolved(ns, name, False, busy, tuple(order[:need]))

    def _machines(self, namespace: str, deployment: str) -> list[Machine]:
        listed = self._call(lambda: self.api.machines(namespace, deployment))
        pods = self._call(self.api.live_pods)
        working = {
            str((p.get("spec") or {}).get("nodeName"))
            for p in pods
            if (p.get("spec") or {}).get("nodeName") and skip_reason(p) is None
        }
        out = []
        for m in listed:
            ref = (m.get("status") or {}).get("nodeRef") or {}
            node = ref.get("name")
            out.append(Machine(str(_md(m).get("name")), node, node in working))
        return out

    def check(self, action: Action, now: datetime) -> Verdict | None:
        """None when ``action`` may run now; else why not (module docstring)."""
        return checked_resize(action, self._resolve, self._checked, "Cluster API objects")

    # ------------------------------------------------------------------ run
    def run(self, action: Action, plan_id: str) -> dict[str, Any]:
        if not isinstance(action, ResizePool):
            raise ActionFailed(f"the cluster-api actuator does not run {action.kind} actions")
        try:
            got = self._checked.pop(action.idempotency_key, None) or self._resolve(action)
        except client_errors() as exc:
            status, msg = api_error(exc)
            raise ActionFailed(f"resize_pool {action.target}: HTTP {status}: {msg}") from exc
        if isinstance(got, Verdict):
            raise ActionFailed(f"resize_pool {action.target}: {got.reason.value}: {got.detail}")
        where = f"{got.namespace}/{got.deployment}"
        report: dict[str, Any] = {
            "machine_deployment": where,
            "from_nodes": action.from_nodes,
            "to_nodes": action.to_nodes,
        }
        if got.resumed:
            return {**report, "scale": f"already at {action.to_nodes} under this key"}
        now = self.clock.now().isoformat()
        marked: list[str] = []
        try:
            self._call(
                lambda: self.api.annotate(
                    got.namespace,
                    "machinedeployments",
                    got.deployment,
                    {RESIZE_KEY_ANNOTATION: action.idempotency_key, RESIZED_AT_ANNOTATION: now},
                )
            )
            for m in got.delete_first:
                mark = {DELETE_MACHINE_ANNOTATION: now}
                self._call(
                    functools.partial(self.api.annotate, got.namespace, "machines", m.name, mark)
                )
                marked.append(m.name)
            self._call(lambda: self.api.scale(got.namespace, got.deployment, action.to_nodes))
        except client_errors() as exc:
            status, msg = api_error(exc)
            report["marked"] = marked
            report["marks_left_on"] = self._unmark(got.namespace, marked)
            raise ActionFailed(
                f"resize_pool {action.target} ({where}): HTTP {status}: {msg}", report
            ) from exc
        report.update(
            scale="scaled",
            busy_nodes=got.busy_nodes,
            delete_first=[{"machine": m.name, "node": m.node} for m in got.delete_first],
        )
        return report

    def _unmark(self, namespace: str, machines: Sequence[str]) -> list[str]:
        """Take this run's delete marks off again (best effort); the machines whose
        mark could not be taken off."""
        left = []
        for name in machines:
            try:
                unmark: dict[str, str | None] = {DELETE_MACHINE_ANNOTATION: None}
                self._call(
                    functools.partial(self.api.annotate, namespace, "machines", name, unmark)
                )
            except client_errors():
                left.append(name)
        return left
