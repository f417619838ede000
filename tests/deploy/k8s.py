"""Helpers of the deploy tests: render an overlay with a real kustomize (``kubectl
kustomize``), walk the rendered objects' pod templates, and read what RBAC grants."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
K8S = DEPLOY / "k8s"
OVERLAYS = ("embedded", "production")

FAKE_SECRETS = {
    "server.env": (
        "session-key=test-session-key-0123456789-abcdefghijklmnopqrstuvwxyz\n"
        "api-token=test-operator-token-0123456789\n"
        "metrics-token=test-metrics-token-0123456789\n"
    ),
    "mlflow-db.env": (
        "postgres-password=0123456789abcdef\n"
        "backend-store-uri=postgresql://mlflow:0123456789abcdef@predops-postgres:5432/mlflow\n"
    ),
}
"""What an operator writes into ``overlays/<name>/secrets/`` (README "Deploy")."""

Obj = dict[str, Any]


def kubectl() -> str:
    """The kubectl on PATH, or skip naming how to get one."""
    found = shutil.which("kubectl")
    if found is None:
        pytest.skip("kubectl not found: `make system-deps` installs Debian's kubernetes-client")
    return found


def secret_files(overlay: Path) -> list[str]:
    """The env files the overlay's secretGenerator reads (relative to the overlay)."""
    kust = yaml.safe_load((overlay / "kustomization.yaml").read_text())
    return [g["env"] for g in kust.get("secretGenerator", [])]


def copy_tree(dest: Path, *, with_secrets: bool = True) -> Path:
    """deploy/k8s copied below ``dest`` (git-ignored secrets left out), with the fake
    secret files written when ``with_secrets``. Returns the copy's root."""
    root = dest / "k8s"
    shutil.copytree(K8S, root, ignore=shutil.ignore_patterns("*.env"))
    if with_secrets:
        for name in OVERLAYS:
            for rel in secret_files(root / "overlays" / name):
                path = root / "overlays" / name / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(FAKE_SECRETS[path.name])
    return root


def kustomize(directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [kubectl(), "kustomize", str(directory)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def render(root: Path, overlay: str) -> list[Obj]:
    """Every object ``kubectl kustomize`` renders for ``overlay`` under ``root``."""
    done = kustomize(root / "overlays" / overlay)
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def one(objects: list[Obj], kind: str, name: str) -> Obj:
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} found"
    return found[0]


def pod_templates(objects: list[Obj]) -> Iterator[tuple[str, Obj, Obj]]:
    """``(kind/name, pod metadata, pod spec)`` of every object that makes pods."""
    for o in objects:
        spec = o.get("spec") or {}
        if o["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"):
            template = spec["template"]
        elif o["kind"] == "CronJob":
            template = spec["jobTemplate"]["spec"]["template"]
        elif o["kind"] == "Pod":
            template = o
        else:
            continue
        yield f"{o['kind']}/{o['metadata']['name']}", template["metadata"], template["spec"]


def containers(pod: Obj) -> list[Obj]:
    return [*pod.get("initContainers", []), *pod["containers"], *pod.get("ephemeralContainers", [])]


def grants(role: Obj) -> set[tuple[str, str, str]]:
    """(API group, resource, verb) a Role or ClusterRole grants."""
    return {
        (group, resource, verb)
        for rule in role.get("rules", [])
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def deployed_role(name: str) -> Obj:
    """The ClusterRole ``name`` as deploy/k8s/base/rbac.yaml writes it (unrendered)."""
    docs = yaml.safe_load_all((K8S / "base" / "rbac.yaml").read_text())
    (role,) = [
        d for d in docs if d and d["kind"] == "ClusterRole" and d["metadata"]["name"] == name
    ]
    found: Obj = role
    return found


def account_grants(objects: list[Obj], account: str, namespace: str) -> set[tuple[str, str, str]]:
    """Everything the ServiceAccount ``namespace/account`` may do through the bindings."""
    roles = {(o["kind"], o["metadata"]["name"]): o for o in objects if o["kind"].endswith("Role")}
    out: set[tuple[str, str, str]] = set()
    for b in objects:
        if b["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        subject = {"kind": "ServiceAccount", "name": account, "namespace": namespace}
        if any(s == subject for s in b.get("subjects", [])):
            ref = b["roleRef"]
            out |= grants(roles[(ref["kind"], ref["name"])])
    return out
