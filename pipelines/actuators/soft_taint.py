"""Soft taints on Kubernetes nodes: ``soft_taint`` adds :data:`SOFT_TAINT` (``predops.io/
predicted-failure=true:PreferNoSchedule``: the scheduler puts new pods elsewhere when they
fit, nothing is evicted), ``remove_soft_taint`` takes it off.

The node is read, its taint list rebuilt with every other taint as it was (a person's,
the node lifecycle controller's, the GPU operator's), and written back with a JSON merge
patch that carries the read ``resourceVersion``: a taint list changed in between answers
409 Conflict (the action fails; the next apply re-reads) instead of losing a taint.
Idempotent: a taint already there (or already gone) is not written again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from predops.core.actions import Action, RemoveSoftTaint, SoftTaint
from predops.pipelines.actuators.apply import ActionFailed
from predops.pipelines.actuators.kube import (
    SOFT_TAINT_KEY,
    KubeApi,
    api_error,
    client_errors,
    retrying,
)

SOFT_TAINT = {"key": SOFT_TAINT_KEY, "value": "true", "effect": "PreferNoSchedule"}


class SoftTaintActuator:
    """Adds or removes predops' soft taint on one node; see the module docstring."""

    name = "kubernetes"
    kinds = ("soft_taint", "remove_soft_taint")

    def __init__(self, api: KubeApi, sleep: Callable[[float], None]) -> None:
        self.kube = api
        self.sleep = sleep

    def run(self, action: Action, plan_id: str) -> dict[str, Any]:
        if not isinstance(action, SoftTaint | RemoveSoftTaint):
            raise ActionFailed(f"the soft-taint actuator does not run {action.kind} actions")
        want = isinstance(action, SoftTaint)
        try:
            node = retrying(lambda: self.kube.read_node(action.target), self.kube.opt, self.sleep)
            taints = list((node.get("spec") or {}).get("taints") or [])
            others = [t for t in taints if t.get("key") != SOFT_TAINT_KEY]
            if (len(others) < len(taints)) == want:
                return {"taint": "already there" if want else "already gone"}
            new = others + ([dict(SOFT_TAINT)] if want else [])
            version = (node.get("metadata") or {}).get("resourceVersion")
            body: dict[str, Any] = {"spec": {"taints": new or None}}
            if version:
                body["metadata"] = {"resourceVersion": version}
            retrying(lambda: self.kube.patch_node(action.target, body), self.kube.opt, self.sleep)
        except client_errors() as exc:
            status, msg = api_error(exc)
            raise ActionFailed(f"{action.kind} {action.target}: HTTP {status}: {msg}") from exc
        return {"taint": "added" if want else "removed"}
