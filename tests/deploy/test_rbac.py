"""Each ServiceAccount holds exactly the Kubernetes API calls its component makes: the
applying component (``predops apply`` Jobs) every call of the actuators, the server only
their reads (it re-validates, never acts), the scheduler none and no token at all. The
calls are read from the actuators' source, so a new call fails here until the roles
grant it."""

from __future__ import annotations

import re
from pathlib import Path

from tests.deploy.k8s import Obj, account_grants, containers, one, pod_templates

ACTUATORS = Path(__file__).resolve().parents[2] / "pipelines" / "actuators"

CALLS: dict[str, set[tuple[str, str, str]]] = {
    # CoreV1Api (pipelines/actuators/kube.py)
    "read_node": {("", "nodes", "get")},
    "list_node": {("", "nodes", "list")},
    "patch_node": {("", "nodes", "patch")},  # cordon / uncordon
    "list_pod_for_all_namespaces": {("", "pods", "list")},
    "create_namespaced_pod_eviction": {("", "pods/eviction", "create")},  # honours PDBs
    # CoreV1Api: risk on the node for kubectl describe (pipelines/actuators/node_signals.py)
    # the PredictedFailure condition; Koordinator's batch-cpu / batch-memory (reclaim.py)
    "patch_node_status": {("", "nodes/status", "patch")},
    "create_namespaced_event": {("", "events", "create")},  # PredopsDrain, PredopsSkip...
    # CustomObjectsApi on Cluster API objects (pipelines/actuators/clusterapi.py)
    "list_custom_object_for_all_namespaces": {("cluster.x-k8s.io", "machinedeployments", "list")},
    "list_namespaced_custom_object": {("cluster.x-k8s.io", "machines", "list")},
    "patch_namespaced_custom_object": {  # the resize key and delete-machine marks
        ("cluster.x-k8s.io", "machinedeployments", "patch"),
        ("cluster.x-k8s.io", "machines", "patch"),
    },
    "patch_namespaced_custom_object_scale": {
        ("cluster.x-k8s.io", "machinedeployments/scale", "patch")
    },
    # AppsV1Api / SchedulingV1Api: pool headroom as placeholder pods (placeholders.py)
    "read_namespaced_deployment": {("apps", "deployments", "get")},
    "create_namespaced_deployment": {("apps", "deployments", "create")},
    "patch_namespaced_deployment": {("apps", "deployments", "patch")},
    "read_priority_class": {("scheduling.k8s.io", "priorityclasses", "get")},
    "create_priority_class": {("scheduling.k8s.io", "priorityclasses", "create")},
    # CustomObjectsApi on Karpenter NodePools (karpenter.py)
    "list_cluster_custom_object": {("karpenter.sh", "nodepools", "list")},
    "patch_cluster_custom_object": {("karpenter.sh", "nodepools", "patch")},
}
"""Each client method the actuators call -> the (API group, resource, verb) it needs."""

CLIENT_CALL = re.compile(r"\bself\.(?:kube\.)?(?:core|custom|apps|scheduling)\.(\w+)\b")
READ_VERBS = {"get", "list", "watch"}


def actuator_calls() -> set[str]:
    return {m for p in ACTUATORS.glob("*.py") for m in CLIENT_CALL.findall(p.read_text())}


def needed(*, reads_only: bool) -> set[tuple[str, str, str]]:
    out = set().union(*(CALLS[m] for m in actuator_calls()))
    return {g for g in out if g[2] in READ_VERBS} if reads_only else out


def test_every_actuator_call_is_known_here() -> None:
    calls = actuator_calls()
    assert {"read_node", "patch_node", "create_namespaced_pod_eviction"} <= calls
    assert {"patch_node_status", "create_namespaced_event"} <= calls
    reclaim = (ACTUATORS / "reclaim.py").read_text()
    assert set(CLIENT_CALL.findall(reclaim)) == {"patch_node_status"}  # + KubeApi's node calls
    unknown = calls - set(CALLS)
    assert not unknown, (
        f"the actuators call {sorted(unknown)}: add each to CALLS with the RBAC it needs, "
        "and to the ClusterRole predops-apply (and predops-read for reads) in "
        "deploy/k8s/base/rbac.yaml"
    )


def test_each_account_holds_exactly_its_components_calls(overlay: list[Obj]) -> None:
    apply_calls = needed(reads_only=False)
    assert ("", "pods/eviction", "create") in apply_calls
    assert {("", "nodes/status", "patch"), ("", "events", "create")} <= apply_calls
    assert account_grants(overlay, "predops-apply", "predops") == apply_calls
    assert account_grants(overlay, "predops-server", "predops") == needed(reads_only=True)
    assert account_grants(overlay, "predops-scheduler", "predops") == set()
    assert account_grants(overlay, "default", "predops") == set()
    for role in (o for o in overlay if o["kind"] in ("Role", "ClusterRole")):
        assert not any("resourceNames" in r or "nonResourceURLs" in r for r in role["rules"])
    for binding in (o for o in overlay if o["kind"].endswith("Binding")):
        assert binding["roleRef"]["apiGroup"] == "rbac.authorization.k8s.io"


def test_pods_run_as_their_components_account(overlay: list[Obj]) -> None:
    """Server pods as predops-server, apply Jobs as predops-apply; the rest (scheduler,
    MLflow, PostgreSQL) with no Kubernetes token mounted at all."""
    accounts = {}
    for name, meta, pod in pod_templates(overlay):
        component = meta["labels"]["app.kubernetes.io/component"]
        accounts[component] = pod.get("serviceAccountName", "default")
        tokened = [
            c["name"]
            for c in containers(pod)
            if pod.get("automountServiceAccountToken", True)
            or any("serviceaccount" in m["mountPath"] for m in c.get("volumeMounts", []))
        ]
        if component == "server":
            assert tokened == ["server"], name  # not the embedded pod's scheduler container
        elif component == "apply":
            assert tokened == ["apply"], name
        else:
            assert tokened == [], name
    assert accounts["server"] == "predops-server"
    assert accounts["apply"] == "predops-apply"
    assert accounts.get("scheduler", "predops-scheduler") == "predops-scheduler"
    sa = one(overlay, "ServiceAccount", "predops-scheduler")
    assert sa["automountServiceAccountToken"] is False


def test_the_embedded_servers_token_is_what_automounting_would_give(
    rendered: dict[str, list[Obj]],
) -> None:
    dep = one(rendered["embedded"], "Deployment", "predops-server")
    pod = dep["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    (volume,) = [v for v in pod["volumes"] if v["name"] == "kube-api-access"]
    paths = {
        item["path"]
        for source in volume["projected"]["sources"]
        for item in ([source["serviceAccountToken"]] if "serviceAccountToken" in source else [])
        + list(next(iter(source.values())).get("items", []))
    }
    assert paths == {"token", "ca.crt", "namespace"}
