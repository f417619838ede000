"""Every pod template of every overlay meets the Pod Security Standards' "restricted"
profile (checked here from the standard's rules, and the checker tested on pods that
break each rule), runs with a read-only root file system, and finds a writable place
for everything predops writes outside its workspace."""

from __future__ import annotations

from typing import Any

import pytest

from tests.deploy.k8s import Obj, containers, one, pod_templates

# Pod Security Standards, baseline + restricted (kubernetes.io/docs/concepts/security/
# pod-security-standards), as rules on a pod spec.
RESTRICTED_VOLUMES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
}
BASELINE_CAPABILITIES = {
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
}
SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}
SELINUX_TYPES = {
    None,
    "",
    "container_t",
    "container_init_t",
    "container_kvm_t",
    "container_engine_t",
}


def restricted_violations(pod: Obj) -> list[str]:
    """Every rule of the "restricted" profile (which includes "baseline") that ``pod``
    (a pod spec) breaks, as ``<rule>: <where>``."""
    out: list[str] = []
    pod_sc = pod.get("securityContext") or {}
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(key):
            out.append(f"host namespaces: {key}")
    for v in pod.get("volumes", []):
        kinds = set(v) - {"name"}
        if "hostPath" in kinds:
            out.append(f"hostPath volumes: {v['name']}")
        if not kinds <= RESTRICTED_VOLUMES:
            out.append(f"volume types: {v['name']} is {sorted(kinds)}")
    for s in pod_sc.get("sysctls", []):
        if s["name"] not in SAFE_SYSCTLS:
            out.append(f"sysctls: {s['name']}")
    pod_seccomp = (pod_sc.get("seccompProfile") or {}).get("type")
    pod_non_root = pod_sc.get("runAsNonRoot")
    if pod_sc.get("runAsUser") == 0:
        out.append("running as non-root user: pod runAsUser 0")
    if pod_seccomp == "Unconfined":
        out.append("seccomp: pod Unconfined")
    if (pod_sc.get("windowsOptions") or {}).get("hostProcess"):
        out.append("hostProcess: pod")
    out += _selinux(pod_sc, "pod")
    for c in containers(pod):
        where = f"container {c['name']}"
        sc = c.get("securityContext") or {}
        caps = sc.get("capabilities") or {}
        if sc.get("privileged"):
            out.append(f"privileged: {where}")
        if (sc.get("windowsOptions") or {}).get("hostProcess"):
            out.append(f"hostProcess: {where}")
        if any(p.get("hostPort") for p in c.get("ports", [])):
            out.append(f"host ports: {where}")
        if sc.get("procMount", "Default") != "Default":
            out.append(f"/proc mount type: {where}")
        added = set(caps.get("add", []))
        if not added <= BASELINE_CAPABILITIES:
            out.append(f"capabilities (baseline): {where} adds {sorted(added)}")
        if sc.get("allowPrivilegeEscalation") is not False:
            out.append(f"privilege escalation: {where}")
        non_root = sc.get("runAsNonRoot", pod_non_root)
        if non_root is not True:
            out.append(f"running as non-root: {where}")
        if sc.get("runAsUser") == 0:
            out.append(f"running as non-root user: {where} runAsUser 0")
        seccomp = (sc.get("seccompProfile") or {}).get("type", pod_seccomp)
        if seccomp not in ("RuntimeDefault", "Localhost"):
            out.append(f"seccomp: {where} {seccomp}")
        if "ALL" not in caps.get("drop", []):
            out.append(f"capabilities: {where} does not drop ALL")
        if not added <= {"NET_BIND_SERVICE"}:
            out.append(f"capabilities: {where} adds {sorted(added - {'NET_BIND_SERVICE'})}")
        out += _selinux(sc, where)
    return out


def _selinux(sc: Obj, where: str) -> list[str]:
    se = sc.get("seLinuxOptions") or {}
    bad = se.get("type") not in SELINUX_TYPES or se.get("user") or se.get("role")
    return [f"SELinux: {where}"] if bad else []


def good_pod() -> Obj:
    return {
        "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [
            {
                "name": "c",
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
                },
            }
        ],
        "volumes": [{"name": "tmp", "emptyDir": {}}],
    }


def _set(pod: Obj, path: str, value: Any) -> Obj:
    node = pod
    *parents, last = path.split(".")
    for p in parents:
        node = node[int(p)] if p.isdigit() else node.setdefault(p, {})
    node[last] = value
    return pod


@pytest.mark.parametrize(
    ("path", "value", "rule"),
    [
        ("hostNetwork", True, "host namespaces"),
        ("hostPID", True, "host namespaces"),
        ("hostIPC", True, "host namespaces"),
        ("volumes", [{"name": "h", "hostPath": {"path": "/"}}], "hostPath volumes"),
        ("volumes", [{"name": "n", "nfs": {"server": "x", "path": "/"}}], "volume types"),
        ("securityContext.sysctls", [{"name": "kernel.msgmax", "value": "1"}], "sysctls"),
        ("securityContext.runAsNonRoot", False, "running as non-root"),
        ("securityContext.runAsUser", 0, "running as non-root user"),
        ("securityContext.seccompProfile", {"type": "Unconfined"}, "seccomp"),
        ("containers.0.securityContext.privileged", True, "privileged"),
        ("containers.0.securityContext.allowPrivilegeEscalation", True, "privilege escalation"),
        ("containers.0.securityContext.capabilities", {"drop": ["NET_RAW"]}, "capabilities"),
        ("containers.0.securityContext.capabilities.add", ["SYS_ADMIN"], "capabilities"),
        ("containers.0.securityContext.capabilities.add", ["CHOWN"], "capabilities"),
        ("containers.0.securityContext.runAsNonRoot", False, "running as non-root"),
        ("containers.0.securityContext.procMount", "Unmasked", "/proc mount type"),
        ("containers.0.securityContext.seLinuxOptions", {"user": "root"}, "SELinux"),
        ("containers.0.ports", [{"containerPort": 80, "hostPort": 80}], "host ports"),
    ],
)
def test_the_checker_flags_every_rule(path: str, value: Any, rule: str) -> None:
    assert restricted_violations(good_pod()) == []
    found = restricted_violations(_set(good_pod(), path, value))
    assert any(v.startswith(rule + ":") for v in found), found


def test_the_checker_wants_seccomp_and_non_root_somewhere() -> None:
    pod = good_pod()
    pod["securityContext"] = {}
    found = restricted_violations(pod)
    assert "seccomp: container c None" in found and "running as non-root: container c" in found
    pod["containers"][0]["securityContext"] |= {
        "runAsNonRoot": True,
        "seccompProfile": {"type": "Localhost"},
    }
    assert restricted_violations(pod) == []


def test_every_pod_is_restricted_with_a_read_only_root(overlay: list[Obj]) -> None:
    pods = list(pod_templates(overlay))
    assert len(pods) >= 2
    for name, _, pod in pods:
        assert restricted_violations(pod) == [], name
        for c in containers(pod):
            assert c["securityContext"]["readOnlyRootFilesystem"] is True, (name, c["name"])


def test_the_namespace_enforces_restricted(overlay: list[Obj]) -> None:
    labels = one(overlay, "Namespace", "predops")["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"


def test_predops_writes_only_to_writable_mounts(overlay: list[Obj]) -> None:
    """HOME, caches and temporary files (what the image smoke test saw MLflow write, and
    matplotlib's and XDG caches) point below /tmp, an emptyDir in every predops pod; the
    workspace is a PersistentVolumeClaim."""
    env = one(overlay, "ConfigMap", "predops-env")["data"]
    writable_env = ("HOME", "XDG_CACHE_HOME", "MPLCONFIGDIR")
    assert all(env[k].startswith("/tmp/") for k in writable_env)
    assert env["MLFLOW_DISABLE_TELEMETRY"] == "true"
    for name, _, pod in pod_templates(overlay):
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        for c in pod["containers"]:
            if c["image"].split(":")[0] != "predops":
                continue
            assert {"configMapRef": {"name": "predops-env"}} in c["envFrom"], name
            mounts = {m["mountPath"]: volumes[m["name"]] for m in c["volumeMounts"]}
            assert "emptyDir" in mounts["/tmp"], (name, c["name"])
            if "command" not in c:  # predops itself, not the MLflow server
                assert "persistentVolumeClaim" in mounts[env["PREDOPS_WORKSPACE"]], name
