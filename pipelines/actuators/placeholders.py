"""Pool resizes through placeholder pods: headroom that any node autoscaler honours.

A pool's headroom is a Deployment of low-priority pause pods, one per pool
(``predops-placeholders-<pool>`` in :attr:`PlaceholderOptions.namespace`), each
requesting one node's worth of the pool's room (:mod:`~pipelines.actuators.pool_state`;
``1 / per_node`` of it with ``per_node`` > 1), selecting the pool's nodes by their pool
label and tolerating the pool's taints. Cluster-autoscaler, Karpenter and the managed
node-group autoscalers of EKS, GKE and AKS provision nodes for pending pods, so pending
placeholders bring nodes; their PriorityClass (:attr:`PlaceholderOptions.priority`, -10,
``preemptionPolicy: Never``, created when missing) is below every workload, so the
scheduler preempts a placeholder the moment a real pod needs its node, and the real pod
starts without waiting for a node. Cluster-autoscaler ignores pods below its
``--expendable-pods-priority-cutoff`` (-10 by default): the priority must not be below
the cutoff, or placeholders bring no nodes.

- **Replica mapping.** A resize to ``to_nodes`` holds ``to_nodes`` nodes, as a Cluster
  API resize does: the nodes that run work now and the ones out of service stay in any
  case (:attr:`~pipelines.actuators.pool_state.PoolNodes.taken`), the rest of the target
  is headroom, one empty node per ``per_node`` placeholders::

      replicas = per_node x max(0, to_nodes - taken)

  The autoscaler provisions a node for each placeholder no empty node can take, and
  removes the empty nodes no placeholder holds (after its own delay: cluster-autoscaler's
  ``scale-down-unneeded-time``, Karpenter's ``consolidateAfter``). A scale-in lowers the
  replicas, never below 0, and the autoscaler consolidates the nodes they free; it
  never removes a node that runs work, so a target below ``taken`` is 0 placeholders,
  not a refusal. Between two plans a real pod that preempts a placeholder makes its
  node a working one and the placeholder pending: the autoscaler provisions a node for
  it, so the headroom stays whole and the pool grows by the work that came (with
  Karpenter, up to the NodePool's limit) until the next plan recomputes the replicas
  from the usage then. With ``per_node`` > 1 placeholders can also take the free room
  of busy nodes, so the new capacity they bring is at most ``to_nodes - taken`` nodes.
- **Re-validation** (:meth:`PlaceholderResizer.check`, before a dry-run and a real run):
  the pool's node count must still be the plan's ``from_nodes`` (``pool_changed``
  otherwise: an autoscaler, a person or an earlier plan changed it since); a Deployment
  already carrying this action's key (:data:`RESIZE_KEY_ANNOTATION`) is the same action
  resumed and passes. A Deployment of that name that predops does not manage, a
  PriorityClass of that name that is not negative, preempts, or is the global default,
  a pool that cannot be read (:class:`~pipelines.actuators.pool_state.PoolUnreadable`)
  or leaves a placeholder no room are ``revalidation_failed``.
- **Run** (:meth:`PlaceholderResizer.run`): create the PriorityClass when missing, then
  create the Deployment or merge-patch it: replicas and the key and time annotations in
  one patch (the key is never there without its replicas), the pod template only when
  its hash (:data:`TEMPLATE_HASH_ANNOTATION`) changed — the Deployment's ``Recreate``
  strategy takes the old placeholders away before new ones come, so a template change
  never asks the autoscaler for nodes twice. Every call is safe to repeat: a create
  that finds the object made meanwhile (409) patches it instead; transient errors are
  retried (:func:`~pipelines.actuators.kube.retrying`).
- **Dry-run**: :meth:`PlaceholderResizer.preview` says what the run would create or
  patch, from what the check read; nothing is sent.

The node and pod lists of a check are reused by the checks that follow within
``KubeOptions.disrupted_ttl`` (one pod list for every pool of a plan). Placeholder pods
are labelled :data:`~pipelines.ingest.kubernetes.PLACEHOLDER_LABEL`: the ingest leaves
them out of the pods the forecasts learn from, and the pool reader does not count them
as work. Tested against ``tests/fakes/kube_api.py`` (no scheduler or autoscaler runs
there: replicas change, no pod comes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from predops.core.actions import Action, ResizePool, SkipReason
from predops.core.clock import Clock
from predops.pipelines.actuators.apply import ActionFailed
from predops.pipelines.actuators.clusterapi import RESIZE_KEY_ANNOTATION, RESIZED_AT_ANNOTATION
from predops.pipelines.actuators.kube import (
    MERGE_PATCH,
    KubeApi,
    api_error,
    client_errors,
    retrying,
)
from predops.pipelines.actuators.placeholder_objects import (
    MANAGED_BY,
    TEMPLATE_HASH_ANNOTATION,
    PlaceholderOptions,
    deployment_name,
    placeholder_labels,
    pod_template,
    priority_class_body,
    priority_class_problem,
    replacing,
    replicas_for,
    template_hash,
)
from predops.pipelines.actuators.pool_state import PoolNodes, PoolUnreadable, read_pool
from predops.pipelines.actuators.resize_check import checked_resize
from predops.pipelines.ingest.kubernetes import PLACEHOLDER_LABEL, POOL_LABELS
from predops.policy.guards import Verdict

BOUND_LIVE_PODS = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"


class PlaceholderApi:
    """The raw calls, JSON in and out, over a :class:`KubeApi`'s client."""

    def __init__(self, kube: KubeApi) -> None:
        from kubernetes import client

        self.kube = kube
        self.apps = client.AppsV1Api(kube.client)
        self.scheduling = client.SchedulingV1Api(kube.client)

    def _opts(self) -> dict[str, Any]:
        return {"_preload_content": False, "_request_timeout": self.kube.opt.request_timeout}

    def bound_pods(self) -> list[dict[str, Any]]:
        return self.kube.list_all(
            self.kube.core.list_pod_for_all_namespaces, field_selector=BOUND_LIVE_PODS
        )

    def _read(self, call: Callable[[], Any]) -> dict[str, Any] | None:
        from kubernetes.client.exceptions import ApiException

        try:
            return self.kube._json(call())
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def deployment(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._read(
            lambda: self.apps.read_namespaced_deployment(name, namespace, **self._opts())
        )

    def create_deployment(self, namespace: str, body: Any) -> None:
        self.apps.create_namespaced_deployment(namespace, body, **self._opts())

    def patch_deployment(self, namespace: str, name: str, body: dict[str, Any]) -> None:
        self.apps.patch_namespaced_deployment(
            name, namespace, body, _content_type=MERGE_PATCH, **self._opts()
        )

    def priority_class(self, name: str) -> dict[str, Any] | None:
        return self._read(lambda: self.scheduling.read_priority_class(name, **self._opts()))

    def create_priority_class(self, body: Any) -> None:
        self.scheduling.create_priority_class(body, **self._opts())


@dataclass(frozen=True, slots=True)
class Resolved:
    """A resize against the cluster as it is now (what the run will send)."""

    view: PoolNodes
    name: str
    replicas: int
    resumed: bool
    live: dict[str, Any] | None = None
    """The Deployment as read, None when it does not exist yet."""
    priority_class: bool = True
    """The PriorityClass exists."""
    template: dict[str, Any] = field(default_factory=dict)

    @property
    def template_changed(self) -> bool:
        notes = ((self.live or {}).get("metadata") or {}).get("annotations") or {}
        return notes.get(TEMPLATE_HASH_ANNOTATION) != template_hash(self.template)


class PlaceholderResizer:
    """Runs ``resize_pool`` actions through placeholder Deployments (module docstring)."""

    name = "placeholders"

    def __init__(
        self,
        api: PlaceholderApi,
        clock: Clock,
        sleep: Callable[[float], None],
        options: PlaceholderOptions | None = None,
    ) -> None:
        self.api = api
        self.clock = clock
        self.sleep = sleep
        self.opt = options or PlaceholderOptions()
        self._checked: dict[str, Resolved] = {}
        self._listing: tuple[datetime, list[dict[str, Any]], list[dict[str, Any]]] | None = None

    def call(self, call: Callable[[], Any]) -> Any:
        return retrying(call, self.api.kube.opt, self.sleep)

    def _lists(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Nodes and bound live pods, read again when older than ``disrupted_ttl``."""
        now = self.clock.now()
        ttl = timedelta(seconds=self.api.kube.opt.disrupted_ttl)
        if self._listing is None or now - self._listing[0] > ttl:
            nodes = self.call(self.api.kube.nodes)
            pods = self.call(self.api.bound_pods)
            self._listing = (now, nodes, pods)
        return self._listing[1], self._listing[2]

    def read(self, pool: str) -> PoolNodes:
        """The pool as it is now; :class:`PoolUnreadable` when it cannot be read."""
        nodes, pods = self._lists()
        return read_pool(
            nodes,
            pods,
            pool,
            now=self.clock.now(),
            options=self.api.kube.opt,
            resources=self.opt.resources,
            priority=self.opt.priority,
            label_keys=(self.opt.pool_label,) if self.opt.pool_label else POOL_LABELS,
        )

    # ------------------------------------------------------------------ re-validation
    def _resolve(self, action: ResizePool) -> Resolved | Verdict:
        fail = SkipReason.REVALIDATION_FAILED
        try:
            view = self.read(action.target)
        except PoolUnreadable as exc:
            return Verdict(fail, str(exc))
        name, ns = deployment_name(action.target), self.opt.namespace
        live = self.call(lambda: self.api.deployment(ns, name))
        md = (live or {}).get("metadata") or {}
        if live is not None and (md.get("labels") or {}).get(MANAGED_BY[0]) != MANAGED_BY[1]:
            return Verdict(fail, f"Deployment {ns}/{name} exists and predops does not manage it")
        template = pod_template(view, self.opt)
        if (md.get("annotations") or {}).get(RESIZE_KEY_ANNOTATION) == action.idempotency_key:
            replicas = int(((live or {}).get("spec") or {}).get("replicas", 1))
            return Resolved(view, name, replicas, True, live)
        if len(view.nodes) != action.from_nodes:
            return Verdict(
                SkipReason.POOL_CHANGED,
                f"pool {action.target} has {len(view.nodes)} nodes now, the plan resized "
                f"from {action.from_nodes}",
            )
        pc = self.call(lambda: self.api.priority_class(self.opt.priority_class))
        problem = None if pc is None else priority_class_problem(pc, self.opt.priority_class)
        if problem is not None:
            return Verdict(fail, problem)
        if view.free["cpu"] <= 0 or view.free["memory"] <= 0:
            return Verdict(
                fail, f"pool {action.target}: its DaemonSets leave a placeholder no room"
            )
        replicas = replicas_for(action.to_nodes, view.taken, self.opt.per_node)
        return Resolved(view, name, replicas, False, live, pc is not None, template)

    def check(self, action: Action, now: datetime) -> Verdict | None:
        """None when ``action`` may run now; else why not (module docstring)."""
        return checked_resize(action, self._resolve, self._checked, "the cluster")

    def checked(self, action: Action) -> Resolved | None:
        """What the last :meth:`check` of ``action`` found, when it passed."""
        return self._checked.get(action.idempotency_key)

    def preview(self, action: Action) -> dict[str, Any]:
        """What :meth:`run` would send for an action that passed :meth:`check`."""
        got = self._checked.get(action.idempotency_key)
        if got is None:
            return {}
        report = self._report(action, got)
        if got.resumed:
            return report
        report["would"] = {
            "priority_class": "exists" if got.priority_class else "create",
            "deployment": "patch" if got.live is not None else "create",
            "body": self._body(action, got, "<apply time>"),
        }
        return report

    # ------------------------------------------------------------------ run
    def _report(self, action: Action, got: Resolved) -> dict[str, Any]:
        v = got.view
        out: dict[str, Any] = {
            "deployment": f"{self.opt.namespace}/{got.name}",
            "nodes": len(v.nodes),
            "nodes_taken": v.taken,
            "replicas": got.replicas,
            "previous_replicas": None
            if got.live is None
            else (got.live.get("spec") or {}).get("replicas", 1),
            "placeholders_running": v.placeholders_running,
        }
        if isinstance(action, ResizePool):
            out.update(from_nodes=action.from_nodes, to_nodes=action.to_nodes)
        if v.work_at_or_below:
            out["work_at_or_below_placeholder_priority"] = v.work_at_or_below
        return out

    def _body(self, action: Action, got: Resolved, now: str) -> dict[str, Any]:
        """The Deployment to create, or the merge patch to send."""
        notes = {RESIZE_KEY_ANNOTATION: action.idempotency_key, RESIZED_AT_ANNOTATION: now}
        if got.live is None:
            return {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {
                    "name": got.name,
                    "namespace": self.opt.namespace,
                    "labels": placeholder_labels(action.target),
                    "annotations": {
                        **notes,
                        TEMPLATE_HASH_ANNOTATION: template_hash(got.template),
                    },
                },
                "spec": {
                    "replicas": got.replicas,
                    "selector": {"matchLabels": {PLACEHOLDER_LABEL: action.target}},
                    "strategy": {"type": "Recreate"},
                    "revisionHistoryLimit": 2,
                    "template": got.template,
                },
            }
        patch: dict[str, Any] = {
            "metadata": {"annotations": notes},
            "spec": {"replicas": got.replicas},
        }
        if got.template_changed:
            patch["metadata"]["annotations"][TEMPLATE_HASH_ANNOTATION] = template_hash(got.template)
            live_template = ((got.live or {}).get("spec") or {}).get("template") or {}
            patch["spec"]["template"] = replacing(live_template, got.template)
        return patch

    def run(self, action: Action, plan_id: str) -> dict[str, Any]:
        if not isinstance(action, ResizePool):
            raise ActionFailed(f"the placeholders actuator does not run {action.kind} actions")
        try:
            got = self._checked.pop(action.idempotency_key, None) or self._resolve(action)
            if isinstance(got, Verdict):
                raise ActionFailed(f"resize_pool {action.target}: {got.reason.value}: {got.detail}")
            report = self._report(action, got)
            if got.resumed:
                return {**report, "deployment_action": "already set under this key"}
            report["priority_class"] = "exists" if got.priority_class else self._priority_class()
            report["deployment_action"] = self._apply(action, got)
        except client_errors() as exc:
            status, msg = api_error(exc)
            raise ActionFailed(f"resize_pool {action.target}: HTTP {status}: {msg}") from exc
        return report

    def _priority_class(self) -> str:
        from kubernetes.client.exceptions import ApiException

        try:
            self.call(lambda: self.api.create_priority_class(priority_class_body(self.opt)))
        except ApiException as exc:
            if exc.status != 409:
                raise
            return "exists"  # made meanwhile (by a concurrent apply)
        return "created"

    def _apply(self, action: Action, got: Resolved) -> str:
        from kubernetes.client.exceptions import ApiException

        now, ns = self.clock.now().isoformat(), self.opt.namespace
        if got.live is None:
            try:
                body = self._body(action, got, now)
                self.call(lambda: self.api.create_deployment(ns, body))
                return "created"
            except ApiException as exc:
                if exc.status != 409:
                    raise
                live = self.call(lambda: self.api.deployment(ns, got.name))
                got = Resolved(got.view, got.name, got.replicas, False, live, True, got.template)
        patch = self._body(action, got, now)
        self.call(lambda: self.api.patch_deployment(ns, got.name, patch))
        return "patched, template updated" if "template" in patch["spec"] else "patched"
