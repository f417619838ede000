"""The objects of the placeholder actuator (:mod:`~pipelines.actuators.placeholders`):
its options, the replica mapping, the PriorityClass, and the Deployment's pod template
built from a pool as :mod:`~pipelines.actuators.pool_state` reads it. Pure functions of
their arguments: no API call here.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from predops.pipelines.actuators.pool_state import PoolNodes
from predops.pipelines.ingest.kubernetes import PLACEHOLDER_LABEL

MANAGED_BY = ("app.kubernetes.io/managed-by", "predops")
TEMPLATE_HASH_ANNOTATION = "predops.io/template-hash"
MIB = 1 << 20


@dataclass(frozen=True, slots=True)
class PlaceholderOptions:
    """Knobs of the placeholder actuator.

    ``namespace`` of the Deployments (predops' own: it exists, and predops' role may
    write there); ``priority_class`` / ``priority``: the placeholders' PriorityClass and
    its value (negative: below every workload that keeps the default 0);
    ``image``: the pause container; ``per_node``: placeholders per node of headroom
    (each requests ``1 / per_node`` of a node); ``pool_label``: the node label naming a
    pool (empty: the ingest's rule, the first of its node-group labels);
    ``gpu_resource``: the extended resource of the pool's GPUs."""

    namespace: str = "predops"
    priority_class: str = "predops-placeholder"
    priority: int = -10
    image: str = "registry.k8s.io/pause:3.10"
    per_node: int = 1
    pool_label: str = ""
    gpu_resource: str = "nvidia.com/gpu"

    def __post_init__(self) -> None:
        if self.priority >= 0:
            raise ValueError("placeholders: priority must be negative (below every workload)")
        if self.per_node < 1:
            raise ValueError("placeholders: per_node must be 1 or more")
        if not self.namespace or not self.image or not self.priority_class:
            raise ValueError("placeholders: namespace, image and priority_class must be set")

    @property
    def resources(self) -> tuple[str, ...]:
        return ("cpu", "memory", self.gpu_resource)


def deployment_name(pool: str) -> str:
    """``predops-placeholders-<pool>`` as a DNS label: lower case, other characters as
    ``-``, and a hash of the pool appended when that changed or shortened the name."""
    clean = re.sub(r"[^a-z0-9-]+", "-", pool.lower()).strip("-")[:36].strip("-")
    if clean != pool:
        clean = f"{clean}-{hashlib.sha256(pool.encode()).hexdigest()[:6]}".lstrip("-")
    return f"predops-placeholders-{clean}"


def replicas_for(to_nodes: int, taken: int, per_node: int) -> int:
    """Placeholders that hold ``to_nodes`` nodes when ``taken`` run work or are out of
    service (module docstring); never below 0."""
    return per_node * max(0, to_nodes - taken)


def placeholder_requests(view: PoolNodes, opt: PlaceholderOptions) -> dict[str, str]:
    """One placeholder's requests: the pool's least free room per node over
    ``per_node``, CPU in millicores and memory in MiB rounded down, whole GPUs."""
    k = Decimal(opt.per_node)
    out = {
        "cpu": f"{math.floor(view.free['cpu'] * 1000 / k)}m",
        "memory": f"{math.floor(view.free['memory'] / MIB / k)}Mi",
    }
    gpus = math.floor(view.free[opt.gpu_resource] / k)
    if gpus > 0:
        out[opt.gpu_resource] = str(gpus)
    return out


def tolerations(view: PoolNodes) -> list[dict[str, str]]:
    """One toleration per taint of the pool: the value matched when it has one."""
    out = []
    for t in view.taints:
        tol = {"key": t["key"], "operator": "Equal", "value": t["value"]}
        if not t["value"]:
            tol = {"key": t["key"], "operator": "Exists"}
        if t["effect"]:
            tol["effect"] = t["effect"]
        out.append(tol)
    return out


def pod_template(view: PoolNodes, opt: PlaceholderOptions) -> dict[str, Any]:
    requests = placeholder_requests(view, opt)
    limits = {r: q for r, q in requests.items() if r == opt.gpu_resource}  # extended: = requests
    resources: dict[str, Any] = {"requests": requests, **({"limits": limits} if limits else {})}
    return {
        "metadata": {"labels": placeholder_labels(view.pool)},
        "spec": {
            "priorityClassName": opt.priority_class,
            "terminationGracePeriodSeconds": 0,
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "nodeSelector": {view.label: view.pool},
            "tolerations": tolerations(view),
            "containers": [
                {
                    "name": "pause",
                    "image": opt.image,
                    "resources": resources,
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "readOnlyRootFilesystem": True,
                        "runAsNonRoot": True,
                        "runAsUser": 65535,
                        "capabilities": {"drop": ["ALL"]},
                    },
                }
            ],
        },
    }


def placeholder_labels(pool: str) -> dict[str, str]:
    return {PLACEHOLDER_LABEL: pool, MANAGED_BY[0]: MANAGED_BY[1]}


def template_hash(template: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:16]


def priority_class_body(opt: PlaceholderOptions) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": opt.priority_class, "labels": dict([MANAGED_BY])},
        "value": opt.priority,
        "preemptionPolicy": "Never",
        "globalDefault": False,
        "description": "predops placeholder pods: pool headroom that any real pod preempts",
    }


def replacing(live: Any, desired: Any) -> Any:
    """A merge patch that turns ``live`` into ``desired`` exactly: keys ``live`` has and
    ``desired`` lacks are set to null (a plain merge patch would keep them)."""
    if not (isinstance(live, dict) and isinstance(desired, dict)):
        return desired
    out = {k: replacing(live.get(k), v) for k, v in desired.items()}
    out.update({k: None for k in live if k not in desired})
    return out


def priority_class_problem(pc: Mapping[str, Any], name: str) -> str | None:
    """Why an existing PriorityClass cannot be the placeholders', or None."""
    value = int(pc.get("value") or 0)
    if value >= 0:
        return f"PriorityClass {name} has value {value}; placeholders need a negative one"
    if pc.get("preemptionPolicy", "PreemptLowerPriority") != "Never":
        return f"PriorityClass {name} lets its pods preempt; placeholders need Never"
    if pc.get("globalDefault"):
        return f"PriorityClass {name} is the global default; placeholders need their own"
    return None
