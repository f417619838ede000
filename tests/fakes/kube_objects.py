"""Builders for Kubernetes API objects as the API server returns them (JSON dicts), and a
kubeconfig pointing at a local fake: ``make_node(gpus=8, rack="r1")``."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

Obj = dict[str, Any]
CREATED = datetime(2026, 5, 1, tzinfo=UTC)


def rfc3339(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def make_node(
    name: str,
    *,
    gpus: int = 0,
    gpu_product: str | None = "NVIDIA-H100-80GB-HBM3",
    cpu: str = "64",
    memory: str = "512Gi",
    allocatable_cpu: str | None = None,
    allocatable_memory: str | None = None,
    ready: str | None = "True",
    ready_since: datetime = CREATED,
    region: str | None = "eu-west",
    zone: str | None = "eu-west-a",
    rack: str | None = None,
    spine: str | None = None,
    pool: str | None = None,
    labels: dict[str, str] | None = None,
    unschedulable: bool = False,
    taints: list[Obj] | None = None,
) -> Obj:
    """A Node with capacity/allocatable, topology labels and a Ready condition."""
    lab = {"kubernetes.io/hostname": name, "node.kubernetes.io/instance-type": "x1.large"}
    for key, value in (
        ("topology.kubernetes.io/region", region),
        ("topology.kubernetes.io/zone", zone),
        ("predops.io/rack", rack),
        ("predops.io/spine", spine),
        ("karpenter.sh/nodepool", pool),
    ):
        if value is not None:
            lab[key] = value
    if gpus and gpu_product:
        lab["nvidia.com/gpu.product"] = gpu_product
        lab["nvidia.com/gpu.count"] = str(gpus)
    lab.update(labels or {})
    capacity = {"cpu": cpu, "memory": memory, "pods": "110", "ephemeral-storage": "1Ti"}
    if gpus:
        capacity["nvidia.com/gpu"] = str(gpus)
    allocatable = dict(capacity)
    allocatable["cpu"] = allocatable_cpu or cpu
    allocatable["memory"] = allocatable_memory or memory
    conditions = [
        {
            "type": "MemoryPressure",
            "status": "False",
            "lastTransitionTime": rfc3339(CREATED),
            "reason": "KubeletHasSufficientMemory",
        }
    ]
    if ready is not None:
        conditions.append(
            {
                "type": "Ready",
                "status": ready,
                "lastTransitionTime": rfc3339(ready_since),
                "reason": "KubeletReady" if ready == "True" else "NodeStatusUnknown",
                "message": "kubelet is posting ready status"
                if ready == "True"
                else "Kubelet stopped posting node status.",
            }
        )
    spec: Obj = {"providerID": f"fake://{name}"}
    if unschedulable:
        spec["unschedulable"] = True
    if taints:
        spec["taints"] = taints
    return {
        "metadata": {
            "name": name,
            "uid": str(uuid.uuid5(uuid.NAMESPACE_DNS, name)),
            "labels": lab,
            "creationTimestamp": rfc3339(CREATED),
        },
        "spec": spec,
        "status": {"capacity": capacity, "allocatable": allocatable, "conditions": conditions},
    }


def container(
    name: str = "main",
    *,
    cpu: str | None = "1",
    memory: str | None = "1Gi",
    gpus: int | None = None,
    limits_only: bool = False,
    restart_policy: str | None = None,
) -> Obj:
    res: dict[str, str] = {}
    if cpu is not None:
        res["cpu"] = cpu
    if memory is not None:
        res["memory"] = memory
    if gpus is not None:
        res["nvidia.com/gpu"] = str(gpus)
    c: Obj = {
        "name": name,
        "image": "busybox",
        "resources": {"limits": res} if limits_only else {"requests": res, "limits": res},
    }
    if restart_policy:
        c["restartPolicy"] = restart_policy
    return c


def make_pod(
    name: str,
    namespace: str = "default",
    *,
    node: str | None = None,
    containers: list[Obj] | None = None,
    init_containers: list[Obj] | None = None,
    phase: str = "Running",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    owner: tuple[str, str] | None = None,
    priority: int | None = 0,
    created: datetime = CREATED,
    scheduled: datetime | None = None,
    deleted: datetime | None = None,
    node_selector: dict[str, str] | None = None,
    gpu_models_in: list[str] | None = None,
    qos: str = "Guaranteed",
    overhead: dict[str, str] | None = None,
) -> Obj:
    """A Pod; ``owner`` is (kind, name) of its controller."""
    md: Obj = {
        "name": name,
        "namespace": namespace,
        "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{namespace}/{name}")),
        "labels": labels or {},
        "creationTimestamp": rfc3339(created),
    }
    if annotations:
        md["annotations"] = annotations
    if owner:
        md["ownerReferences"] = [
            {
                "apiVersion": "batch/v1",
                "kind": owner[0],
                "name": owner[1],
                "uid": "x",
                "controller": True,
            }
        ]
    if deleted:
        md["deletionTimestamp"] = rfc3339(deleted)
    spec: Obj = {"containers": containers or [container()]}
    if init_containers:
        spec["initContainers"] = init_containers
    if node:
        spec["nodeName"] = node
    if priority is not None:
        spec["priority"] = priority
    if node_selector:
        spec["nodeSelector"] = node_selector
    if overhead:
        spec["overhead"] = overhead
    if gpu_models_in:
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "nvidia.com/gpu.product",
                                    "operator": "In",
                                    "values": gpu_models_in,
                                }
                            ]
                        }
                    ]
                }
            }
        }
    status: Obj = {"phase": phase, "qosClass": qos}
    if node:
        status["startTime"] = rfc3339(scheduled or created)
        status["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "True",
                "lastTransitionTime": rfc3339(scheduled or created),
            }
        ]
    return {"metadata": md, "spec": spec, "status": status}


def make_pdb(
    name: str,
    namespace: str = "default",
    *,
    match_labels: dict[str, str] | None = None,
    min_available: int | str | None = None,
    max_unavailable: int | str | None = None,
    disruptions_allowed: int = 1,
    expected: int = 3,
    healthy: int = 3,
) -> Obj:
    spec: Obj = {"selector": {"matchLabels": match_labels or {}}}
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    return {
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": rfc3339(CREATED)},
        "spec": spec,
        "status": {
            "disruptionsAllowed": disruptions_allowed,
            "expectedPods": expected,
            "currentHealthy": healthy,
            "desiredHealthy": healthy - disruptions_allowed,
            "observedGeneration": 1,
        },
    }


def write_kubeconfig(path: Path, server: str, token: str = "test-token") -> Path:
    """A kubeconfig with one cluster, one token user and one current context."""
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: fake\n  cluster:\n    server: {server}\n"
        f"users:\n- name: tester\n  user:\n    token: {token}\n"
        "contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: tester\n"
        "current-context: fake\n",
        encoding="utf-8",
    )
    return path


def make_machine_deployment(
    name: str, *, pool: str | None, replicas: int, namespace: str = "default"
) -> Obj:
    """A Cluster API MachineDeployment labelled with its predops pool."""
    labels = {"cluster.x-k8s.io/cluster-name": "fleet"}
    if pool is not None:
        labels["predops.io/pool"] = pool
    return {
        "apiVersion": "cluster.x-k8s.io/v1beta1",
        "kind": "MachineDeployment",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"clusterName": "fleet", "replicas": replicas},
        "status": {"replicas": replicas},
    }


def make_machine(
    name: str, *, deployment: str, node: str | None, namespace: str = "default"
) -> Obj:
    """A Cluster API Machine of ``deployment``; ``node`` None: not provisioned yet."""
    status: Obj = {"phase": "Running" if node else "Provisioning"}
    if node is not None:
        status["nodeRef"] = {"kind": "Node", "name": node}
    return {
        "apiVersion": "cluster.x-k8s.io/v1beta1",
        "kind": "Machine",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"cluster.x-k8s.io/deployment-name": deployment},
        },
        "spec": {"clusterName": "fleet"},
        "status": status,
    }


def make_nodepool(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
    replicas: int | None = None,
) -> Obj:
    """A Karpenter ``karpenter.sh/v1`` NodePool (cluster-scoped); ``replicas`` makes it
    a static NodePool."""
    spec: Obj = {
        "template": {
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "x"},
                "requirements": [
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
                ],
            }
        },
        "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "5m"},
    }
    if limits is not None:
        spec["limits"] = dict(limits)
    if replicas is not None:
        spec["replicas"] = replicas
    return {
        "metadata": {"name": name, "labels": dict(labels or {}), "generation": 1},
        "spec": spec,
        "status": {},
    }
