"""Publish reclaimable (batch) capacity on Kubernetes nodes (``set_reclaimable`` actions).

Two writes per node, both JSON merge patches that set absolute values (idempotent):

1. ``nodes/status``: Koordinator's batch extended resources :data:`BATCH_CPU`
   (``kubernetes.io/batch-cpu``, millicores) and :data:`BATCH_MEMORY`
   (``kubernetes.io/batch-memory``, bytes) in ``status.capacity`` and
   ``status.allocatable`` — what koord-scheduler (and any scheduler that reads
   extended resources) places best-effort pods against. Every other resource in
   those maps is left as it is (a merge patch of a map merges keys). A decision without
   memory publishes ``batch-memory`` 0: no batch pod lands on memory nobody forecast.
2. ``metadata.annotations``: :data:`RECLAIM_ANNOTATION` with compact JSON of the value
   in cores and bytes, the plan, the action's idempotency key, when it was written and
   what bound it, so ``kubectl describe node`` says why, and re-planning can read what
   is published (:func:`published_of`).

Koordinator's own slo-controller computes the same two resources from its trailing
usage histogram and would overwrite these: run predops' values with Koordinator's batch
resource calculation turned off (``colocation-config`` ``enable: false``), or use
``annotation_only`` to publish only the annotation for a scheduler extension to read.

A value already published (both resources, and the annotation's value) writes nothing.
Needs ``patch`` on ``nodes/status`` and ``nodes``, and ``get`` on ``nodes``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from predops.core.actions import Action, SetReclaimable
from predops.core.clock import Clock
from predops.pipelines.actuators.apply import ActionFailed
from predops.pipelines.actuators.kube import (
    MERGE_PATCH,
    KubeApi,
    _annotations,
    api_error,
    client_errors,
    retrying,
)

BATCH_CPU = "kubernetes.io/batch-cpu"
BATCH_MEMORY = "kubernetes.io/batch-memory"
RECLAIM_ANNOTATION = "predops.io/reclaimable"


def published_of(node: Mapping[str, Any]) -> tuple[int, int | None] | None:
    """(cpu_milli, memory_bytes) this node publishes per predops' annotation, or None
    (none, or unreadable: the next plan then sets it afresh)."""
    text = _annotations(node).get(RECLAIM_ANNOTATION)
    if not text:
        return None
    try:
        d = json.loads(text)
        mem = d.get("memory_bytes")
        return int(d["cpu_milli"]), None if mem is None else int(mem)
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def published(nodes: Iterable[Mapping[str, Any]]) -> dict[str, tuple[int, int | None]]:
    """:func:`published_of` for every node of a node list that has it."""
    out = {}
    for n in nodes:
        p = published_of(n)
        if p is not None:
            out[str((n.get("metadata") or {}).get("name"))] = p
    return out


class ReclaimActuator:
    """Writes one node's batch capacity; see the module docstring."""

    name = "kubernetes"
    kinds = ("set_reclaimable",)

    def __init__(
        self,
        api: KubeApi,
        clock: Clock,
        sleep: Callable[[float], None],
        *,
        annotation_only: bool = False,
    ) -> None:
        self.kube = api
        self.clock = clock
        self.sleep = sleep
        self.annotation_only = annotation_only

    def run(self, action: Action, plan_id: str) -> dict[str, Any]:
        if not isinstance(action, SetReclaimable):
            raise ActionFailed(f"the reclaim actuator does not run {action.kind} actions")
        cpu, mem = str(action.cpu_milli), str(action.memory_bytes or 0)
        try:
            node = retrying(lambda: self.kube.read_node(action.target), self.kube.opt, self.sleep)
            status = node.get("status") or {}
            current = [
                (status.get(part) or {}).get(res)
                for part in ("capacity", "allocatable")
                for res in (BATCH_CPU, BATCH_MEMORY)
            ]
            resources_done = self.annotation_only or current == [cpu, mem, cpu, mem]
            noted = published_of(node) == (action.cpu_milli, action.memory_bytes)
            if resources_done and noted:
                return {"reclaimable": "already published", "cpu_milli": action.cpu_milli}
            if not resources_done:
                body = {
                    "status": {
                        part: {BATCH_CPU: cpu, BATCH_MEMORY: mem}
                        for part in ("capacity", "allocatable")
                    }
                }
                retrying(lambda: self._patch_status(action.target, body), self.kube.opt, self.sleep)
            note = {
                "cpu_milli": action.cpu_milli,
                "memory_bytes": action.memory_bytes,
                "bound": action.evidence.get("bound") or action.evidence.get("withheld"),
                "plan": plan_id,
                "key": action.idempotency_key,
                "at": self.clock.now().isoformat(),
            }
            patch = {"metadata": {"annotations": {RECLAIM_ANNOTATION: _compact(note)}}}
            retrying(lambda: self.kube.patch_node(action.target, patch), self.kube.opt, self.sleep)
        except client_errors() as exc:
            code, msg = api_error(exc)
            raise ActionFailed(f"{action.kind} {action.target}: HTTP {code}: {msg}") from exc
        return {
            "reclaimable": "annotated" if self.annotation_only else "published",
            "cpu_milli": action.cpu_milli,
            "memory_bytes": action.memory_bytes,
        }

    def _patch_status(self, name: str, body: dict[str, Any]) -> None:
        self.kube.core.patch_node_status(
            name,
            body,
            _content_type=MERGE_PATCH,
            _preload_content=False,
            _request_timeout=self.kube.opt.request_timeout,
        )


def _compact(d: Mapping[str, Any]) -> str:
    return json.dumps(d, sort_keys=True, separators=(",", ":"))
