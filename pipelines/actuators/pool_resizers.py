"""Which actuator resizes a pool, and the one ``resize_pool`` actuator an apply runs.

Three ways to size a pool:

- ``clusterapi`` (:mod:`~pipelines.actuators.clusterapi`): the pool is a Cluster API
  MachineDeployment and predops sets its replicas;
- ``karpenter`` (:mod:`~pipelines.actuators.karpenter`): the pool is a Karpenter
  NodePool; predops sets its limits and its placeholders;
- ``placeholders`` (:mod:`~pipelines.actuators.placeholders`): whatever sizes the pool
  (cluster-autoscaler on any cloud's node groups, EKS / GKE / AKS node-group
  autoscalers, Karpenter) provisions nodes for the pool's pending placeholder pods.

The choice is a setting, for every pool (``NAME``) or one (``POOL=NAME``), the pool's
own winning (``predops apply --pool-actuator``, repeatable); ``auto``, the default,
reads the cluster for each action:

1. a MachineDeployment labelled ``predops.io/pool=<pool>`` that cluster-autoscaler does
   not size -> ``clusterapi``; one it sizes (its node-group min / max annotations) ->
   ``placeholders``: the nodes come from cluster-autoscaler, which predops does not
   fight but can ask;
2. else a NodePool named or labelled for the pool -> ``karpenter``;
3. else ``placeholders``.

An API the cluster does not serve (404: no Cluster API, no Karpenter) counts as no
such object. The choice is made in :meth:`PoolResizers.check`, before a dry-run as
before a run, and the run that follows uses it; a dry-run's report says which actuator
would act and what it would send (:attr:`PoolResizers.previews`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from predops.core.actions import Action, ResizePool, SkipReason
from predops.core.clock import Clock
from predops.pipelines.actuators.apply import ActionFailed
from predops.pipelines.actuators.clusterapi import (
    AUTOSCALER_ANNOTATIONS,
    POOL_LABEL,
    ClusterApi,
    PoolResizer,
)
from predops.pipelines.actuators.karpenter import KarpenterApi, NodePoolResizer, nodepools_for
from predops.pipelines.actuators.kube import KubeApi, api_error, client_errors
from predops.pipelines.actuators.placeholder_objects import PlaceholderOptions
from predops.pipelines.actuators.placeholders import PlaceholderApi, PlaceholderResizer
from predops.policy.guards import Verdict

POOL_ACTUATORS = ("clusterapi", "karpenter", "placeholders")
AUTO = "auto"
EVERY_POOL = "*"


class PoolActuator(Protocol):
    name: str

    def check(self, action: Action, now: datetime) -> Verdict | None: ...

    def run(self, action: Action, plan_id: str) -> dict[str, Any]: ...


def parse_pool_actuators(values: Sequence[str]) -> dict[str, str]:
    """``NAME`` (every pool) or ``POOL=NAME`` (one pool) settings as ``{pool or "*":
    name}``; ValueError naming the value that is not one."""
    out: dict[str, str] = {}
    for text in values:
        pool, _, name = text.rpartition("=")
        if name not in (*POOL_ACTUATORS, AUTO) or (pool == "" and "=" in text):
            raise ValueError(
                f"pool actuator {text!r}: want NAME or POOL=NAME, NAME one of "
                f"{', '.join((AUTO, *POOL_ACTUATORS))}"
            )
        key = pool or EVERY_POOL
        if out.get(key, name) != name:
            raise ValueError(f"pool actuator for {pool or 'every pool'} given twice")
        out[key] = name
    return out


class PoolResizers:
    """The ``resize_pool`` actuator: picks each pool's actuator (module docstring) and
    hands it the action. ``name`` is the actuator the last check picked (the apply
    records it when the run starts)."""

    def __init__(
        self,
        kube: KubeApi,
        clock: Clock,
        sleep: Callable[[float], None],
        choice: Mapping[str, str] | None = None,
        placeholders: PlaceholderOptions | None = None,
    ) -> None:
        self.capi = ClusterApi(kube)
        self.placeholders = PlaceholderResizer(PlaceholderApi(kube), clock, sleep, placeholders)
        self.karpenter_api = KarpenterApi(kube)
        self.by_name: dict[str, PoolActuator] = {
            "clusterapi": PoolResizer(self.capi, clock, sleep),
            "karpenter": NodePoolResizer(self.karpenter_api, self.placeholders, clock, sleep),
            "placeholders": self.placeholders,
        }
        self.choice = dict(choice or {})
        self.name = "pool"
        self._chosen: dict[str, tuple[PoolActuator, str]] = {}
        self.previews: dict[str, dict[str, Any]] = {}
        """Per action key, what a check that passed found: the actuator, why, and what
        its run would send (for a dry-run's report)."""

    def _listed(self, call: Callable[[], list[dict[str, Any]]]) -> list[dict[str, Any]]:
        from kubernetes.client.exceptions import ApiException

        try:
            listed: list[dict[str, Any]] = self.placeholders.call(call)
            return listed
        except ApiException as exc:
            if exc.status == 404:
                return []  # the cluster does not serve that API
            raise

    def choose(self, pool: str) -> tuple[PoolActuator, str]:
        """The actuator for ``pool`` and why (module docstring)."""
        name = self.choice.get(pool, self.choice.get(EVERY_POOL, AUTO))
        if name != AUTO:
            where = pool if pool in self.choice else "every pool"
            return self.by_name[name], f"set for {where}"
        mds = self._listed(lambda: self.capi.deployments(pool))
        if mds:
            sized = [
                a
                for md in mds
                for a in AUTOSCALER_ANNOTATIONS
                if a in ((md.get("metadata") or {}).get("annotations") or {})
            ]
            if sized:
                return (
                    self.placeholders,
                    f"its MachineDeployment is sized by cluster-autoscaler ({sized[0]})",
                )
            return self.by_name[
                "clusterapi"
            ], f"a MachineDeployment is labelled {POOL_LABEL}={pool}"
        if nodepools_for(pool, self._listed(self.karpenter_api.nodepools)):
            return self.by_name["karpenter"], "a Karpenter NodePool is named or labelled for it"
        return self.placeholders, "no MachineDeployment or NodePool for it"

    def check(self, action: Action, now: datetime) -> Verdict | None:
        if not isinstance(action, ResizePool):
            return None
        key = action.idempotency_key
        self.previews.pop(key, None)
        try:
            chosen, why = self.choose(action.target)
        except client_errors() as exc:
            status, msg = api_error(exc)
            return Verdict(
                SkipReason.REVALIDATION_FAILED,
                f"pool {action.target}: choosing its actuator: HTTP {status}: {msg}",
            )
        self._chosen[key] = (chosen, why)
        self.name = chosen.name
        verdict = chosen.check(action, now)
        if verdict is None:
            preview = getattr(chosen, "preview", None)
            self.previews[key] = {
                "pool_actuator": chosen.name,
                "chosen_because": why,
                **(preview(action) if preview is not None else {}),
            }
        return verdict

    def run(self, action: Action, plan_id: str) -> dict[str, Any]:
        checked = self._chosen.pop(action.idempotency_key, None)
        chosen, why = checked if checked is not None else self.choose(action.target)
        self.name = chosen.name
        head = {"pool_actuator": chosen.name, "chosen_because": why}
        try:
            return {**head, **chosen.run(action, plan_id)}
        except ActionFailed as exc:
            raise ActionFailed(exc.reason, {**head, **exc.report}) from exc
