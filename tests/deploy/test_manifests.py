"""deploy/: the manifests parse, RBAC is exactly the minimal set, one scheduler replica,
the example configuration validates, and the image runs as a non-root user."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from predops.pipelines.scheduler.config import parse_config

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
K8S = DEPLOY / "k8s"

MINIMAL_RBAC = {
    # read
    ("", "pods", "get"),
    ("", "pods", "list"),
    ("", "pods", "watch"),
    ("", "nodes", "get"),
    ("", "nodes", "list"),
    ("", "nodes", "watch"),
    ("policy", "poddisruptionbudgets", "get"),
    ("policy", "poddisruptionbudgets", "list"),
    ("policy", "poddisruptionbudgets", "watch"),
    # cordon / uncordon
    ("", "nodes", "patch"),
    # drain through the Eviction API (honours PDBs)
    ("", "pods/eviction", "create"),
    # pool resizes through Cluster API (pipelines/actuators/clusterapi.py)
    ("cluster.x-k8s.io", "machinedeployments", "list"),
    ("cluster.x-k8s.io", "machinedeployments", "patch"),
    ("cluster.x-k8s.io", "machinedeployments/scale", "patch"),
    ("cluster.x-k8s.io", "machines", "list"),
    ("cluster.x-k8s.io", "machines", "patch"),
    # pool headroom through placeholder pods (pipelines/actuators/placeholders.py)
    ("apps", "deployments", "get"),
    ("apps", "deployments", "create"),
    ("apps", "deployments", "patch"),
    ("scheduling.k8s.io", "priorityclasses", "get"),
    ("scheduling.k8s.io", "priorityclasses", "create"),
    # Karpenter NodePool limits (pipelines/actuators/karpenter.py)
    ("karpenter.sh", "nodepools", "list"),
    ("karpenter.sh", "nodepools", "patch"),
}


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    docs = []
    for path in sorted(K8S.glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def grants(role: dict[str, Any]) -> set[tuple[str, str, str]]:
    """(API group, resource, verb) a Role or ClusterRole grants."""
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def one(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} found"
    return found[0]


def test_kustomization_lists_every_manifest() -> None:
    kust = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    files = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert sorted(kust["resources"]) == sorted(files)


def test_rbac_is_exactly_what_cordon_evict_resize_and_read_need(
    objects: list[dict[str, Any]],
) -> None:
    roles = [o for o in objects if o["kind"] in ("Role", "ClusterRole")]
    assert [r["metadata"]["name"] for r in roles] == ["predops"]
    assert grants(roles[0]) == MINIMAL_RBAC
    assert not any("resourceNames" in r or "nonResourceURLs" in r for r in roles[0]["rules"])
    binding = one(objects, "ClusterRoleBinding", "predops")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "predops",
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "predops", "namespace": "predops"}
    ]
    bindings = [o for o in objects if o["kind"] in ("RoleBinding", "ClusterRoleBinding")]
    assert len(bindings) == 1
    one(objects, "ServiceAccount", "predops")


def test_scheduler_has_one_replica_recreated(objects: list[dict[str, Any]]) -> None:
    dep = one(objects, "Deployment", "predops-scheduler")
    assert dep["spec"]["replicas"] == 1
    assert dep["spec"]["strategy"] == {"type": "Recreate"}
    pod = dep["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "predops"
    (container,) = pod["containers"]
    assert container["args"][:2] == ["schedule", "start"]
    config_path = container["args"][container["args"].index("--config") + 1]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert config_path.startswith(mounts["config"] + "/")
    assert {"name": "OMP_WAIT_POLICY", "value": "passive"} in container["env"]


def test_server_deployment_and_service_match(objects: list[dict[str, Any]]) -> None:
    dep = one(objects, "Deployment", "predops-server")
    svc = one(objects, "Service", "predops")
    labels = dep["spec"]["template"]["metadata"]["labels"]
    assert dep["spec"]["selector"]["matchLabels"] == labels
    assert svc["spec"]["selector"].items() <= labels.items()
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    assert container["args"][0] == "serve"
    ports = {p["name"] for p in container["ports"]}
    assert {p["targetPort"] for p in svc["spec"]["ports"]} <= ports
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"


def test_workspace_claim_is_mounted_by_both(objects: list[dict[str, Any]]) -> None:
    one(objects, "PersistentVolumeClaim", "predops-workspace")
    for name in ("predops-server", "predops-scheduler"):
        pod = one(objects, "Deployment", name)["spec"]["template"]["spec"]
        claims = [
            v["persistentVolumeClaim"]["claimName"]
            for v in pod["volumes"]
            if "persistentVolumeClaim" in v
        ]
        assert claims == ["predops-workspace"]
        assert pod["securityContext"]["runAsNonRoot"] is True


def test_example_configuration_validates(objects: list[dict[str, Any]]) -> None:
    import tomllib

    cm = one(objects, "ConfigMap", "predops-config")
    cfg = parse_config(tomllib.loads(cm["data"]["predops.toml"]), "configmap predops.toml")
    assert cfg.ingest is not None and cfg.ingest.source == "prometheus"
    assert set(cfg.jobs) == {"pipeline", "retrain"}


def test_server_and_scheduler_read_the_same_configuration(
    objects: list[dict[str, Any]], tmp_path: Path
) -> None:
    """One predops.toml feeds both: the server accepts the scheduler's sections, and the
    commented [policy] example, uncommented, validates for both."""
    import tomllib

    from predops.serving.config import load_serve_config

    paths = set()
    for name in ("predops-server", "predops-scheduler"):
        pod = one(objects, "Deployment", name)["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert volumes["config"]["configMap"] == {"name": "predops-config"}
        path = container["args"][container["args"].index("--config") + 1]
        assert path.startswith(mounts["config"] + "/")
        paths.add(path)
    assert len(paths) == 1
    text = one(objects, "ConfigMap", "predops-config")["data"]["predops.toml"]
    uncommented = re.sub(r"^# ?(?=\[|\w+ = )", "", text, flags=re.M)
    assert "\n[policy.disruption]\n" in uncommented
    scheduled = parse_config(tomllib.loads(uncommented), "configmap").policy
    assert [b.scope for b in scheduled.budgets.budgets] == ["pool", "rack"]
    assert scheduled.config.disruption.min_hold.total_seconds() == 6 * 3600
    shared = tmp_path / "predops.toml"
    shared.write_text(uncommented)
    served = load_serve_config(shared, {}).policy
    assert (served.budgets, served.config) == (scheduled.budgets, scheduled.config)


def test_dockerfile_is_slim_non_root_and_passive() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim\s*$", text, re.M)
    assert "OMP_WAIT_POLICY=passive" in text
    assert re.search(r"^RUN pip install \.", text, re.M)
    user = re.findall(r"^USER (\S+)", text, re.M)
    assert user and not user[-1].startswith(("root", "0"))
    assert re.search(r'^ENTRYPOINT \["predops"\]', text, re.M)
    # Every package the project installs is copied into the build.
    for pkg in ("core", "features", "models", "allocator", "policy", "pipelines", "serving"):
        assert f"COPY {pkg} ./{pkg}" in text
    # ... and the root of the predops package (`python -m predops`)
    assert re.search(r"^COPY .*\b__main__\.py\b.* \./$", text, re.M)
