"""deploy/k8s: every overlay renders with a real kustomize and every object validates
against the Kubernetes OpenAPI schemas; one scheduler; server replicas share the
session key; SQLite never on shared storage; the NetworkPolicies open only what each
component needs; the configuration validates for the server and the scheduler alike."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import tomllib
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import latest_version

from predops.pipelines.scheduler.config import parse_config
from predops.pipelines.workspace.runs import RunStore
from predops.serving.config import load_serve_config
from tests.deploy.k8s import K8S, OVERLAYS, Obj, kubectl, kustomize, one, pod_templates

KUBERNETES_VERSIONS = ("1.30.0", latest_version())
"""The oldest Kubernetes the manifests target and the newest the validator knows."""
CRD_KINDS = {"ServiceMonitor"}
"""Kinds the bundled schemas cannot know (checked by hand below)."""
KUSTOMIZE_V2_FIELDS = {
    "apiVersion",
    "kind",
    "namespace",
    "resources",
    "bases",
    "patchesStrategicMerge",
    "secretGenerator",
    "configMapGenerator",
    "generatorOptions",
}
"""Kustomization fields that kustomize v2.0.3 (Debian's kubectl 1.20) and v5 both read."""


def kustomizations() -> list[Path]:
    return sorted(K8S.rglob("kustomization.yaml"))


def test_every_manifest_is_in_its_kustomization() -> None:
    for kust_path in kustomizations():
        kust = yaml.safe_load(kust_path.read_text())
        listed = {*kust.get("resources", []), *kust.get("patchesStrategicMerge", [])}
        here = {p.name for p in kust_path.parent.glob("*.yaml")} - {"kustomization.yaml"}
        assert listed == here, kust_path


def test_kustomizations_use_only_what_debians_kubectl_renders_too() -> None:
    for kust_path in kustomizations():
        kust = yaml.safe_load(kust_path.read_text())
        assert set(kust) <= KUSTOMIZE_V2_FIELDS, kust_path
        assert kust.get("namespace") == "predops", kust_path  # generated Secrets too
        for entry in kust.get("resources", []):  # v2.0.3: directories only under bases
            assert (kust_path.parent / entry).is_file(), (kust_path, entry)
        for gen in kust.get("secretGenerator", []):
            assert set(gen) <= {"name", "env", "type"}, gen


def test_every_object_is_valid_kubernetes(overlay: list[Obj]) -> None:
    kinds = {o["kind"] for o in overlay}
    assert {"Deployment", "CronJob", "NetworkPolicy", "PodDisruptionBudget"} <= kinds
    for o in overlay:
        if o["kind"] in CRD_KINDS:
            continue
        for version in KUBERNETES_VERSIONS:
            kubernetes_validate.validate(o, version, strict=True)


def test_the_validator_refuses_what_kubernetes_would() -> None:
    misspelt = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "x"},
        "spec": {"replica": 2, "selector": {}, "template": {"spec": {"containers": []}}},
    }
    with pytest.raises(kubernetes_validate.ValidationError, match="replica"):
        kubernetes_validate.validate(misspelt, KUBERNETES_VERSIONS[0], strict=True)
    wrong_type = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": 3}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(wrong_type, KUBERNETES_VERSIONS[0], strict=True)


def test_the_service_monitor_scrapes_the_servers_metrics(overlay: list[Obj]) -> None:
    monitor = one(overlay, "ServiceMonitor", "predops")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    svc = one(overlay, "Service", "predops")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["path"] == "/metrics"
    assert endpoint["port"] in {p["name"] for p in svc["spec"]["ports"]}
    credentials = endpoint["authorization"]["credentials"]
    secret = one(overlay, "Secret", credentials["name"])
    assert credentials["key"] in secret["data"]


def test_an_overlay_without_its_secret_files_does_not_render(k8s_copy: Path) -> None:
    for name in OVERLAYS:
        done = kustomize(k8s_copy / "overlays" / name)
        assert done.returncode != 0
        assert "secrets/server.env" in done.stderr


def test_secret_files_are_git_ignored() -> None:
    for name in OVERLAYS:
        for rel in ("secrets/server.env", "secrets/mlflow-db.env"):
            path = K8S / "overlays" / name / rel
            done = subprocess.run(
                ["git", "check-ignore", "-q", str(path)], cwd=K8S, check=False, timeout=30
            )
            assert done.returncode == 0, f"{path} is not git-ignored"


# ------------------------------------------------------------------ workloads
def container(objects: list[Obj], kind: str, name: str, container_name: str) -> Obj:
    pod = one(objects, kind, name)["spec"]["template"]["spec"]
    (found,) = [c for c in pod["containers"] if c["name"] == container_name]
    return found


def test_one_scheduler_recreated(rendered: dict[str, list[Obj]]) -> None:
    """Production: its own Deployment; embedded: a container of the server's single pod,
    the same container but for the production overlay's extra state volume."""
    prod = one(rendered["production"], "Deployment", "predops-scheduler")
    embedded = one(rendered["embedded"], "Deployment", "predops-server")
    assert not [o for o in rendered["embedded"] if o["kind"] == "Deployment" and o is not embedded]
    for dep in (prod, embedded):
        assert dep["spec"]["replicas"] == 1
        assert dep["spec"]["strategy"] == {"type": "Recreate"}
        assert dep["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 300
    in_prod = container(rendered["production"], "Deployment", "predops-scheduler", "scheduler")
    in_pod = container(rendered["embedded"], "Deployment", "predops-server", "scheduler")
    assert in_prod["args"][:2] == ["schedule", "start"]
    mounts = [m for m in in_prod["volumeMounts"] if m["name"] != "scheduler-state"]
    assert in_pod == dict(in_prod, volumeMounts=mounts)


def test_predops_containers_size_openmp_to_their_cpu_request(
    rendered: dict[str, list[Obj]],
) -> None:
    """Every container running the predops entrypoint (it may train or score with
    LightGBM) gets OMP_NUM_THREADS from its own CPU request: the manifests set no CPU
    limit, so neither the cgroup nor OpenMP would cap the threads below the node's CPUs."""
    seen = 0
    for name in OVERLAYS:
        for where, _, pod in pod_templates(rendered[name]):
            for c in pod["containers"]:
                if not str(c["image"]).startswith("predops:") or "command" in c:
                    continue  # MLflow's server runs from the same image with its own command
                env = {e["name"]: e for e in c.get("env", [])}
                assert "OMP_NUM_THREADS" in env, (name, where, c["name"])
                ref = env["OMP_NUM_THREADS"]["valueFrom"]["resourceFieldRef"]
                assert ref["resource"] == "requests.cpu", (name, where, c["name"])
                assert str(ref["divisor"]) == "1"
                assert ref.get("containerName", c["name"]) == c["name"]
                assert "cpu" in c["resources"]["requests"]
                seen += 1
    assert seen >= 5  # server, scheduler and apply in production; server + scheduler embedded


def test_server_deployment_service_probes_and_budget(overlay: list[Obj]) -> None:
    dep = one(overlay, "Deployment", "predops-server")
    svc = one(overlay, "Service", "predops")
    labels = dep["spec"]["template"]["metadata"]["labels"]
    assert dep["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert svc["spec"]["selector"].items() <= labels.items()
    server = container(overlay, "Deployment", "predops-server", "server")
    assert server["args"][0] == "serve"
    assert {p["targetPort"] for p in svc["spec"]["ports"]} <= {p["name"] for p in server["ports"]}
    assert server["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert server["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert server["startupProbe"]["httpGet"]["path"] == "/healthz"
    assert "memory" in server["resources"]["limits"]
    pdb = one(overlay, "PodDisruptionBudget", "predops-server")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert pdb["spec"]["maxUnavailable"] == 1  # never blocks a drain of a single replica


def serve_config(objects: list[Obj], tmp_path: Path, key_file: Path) -> object:
    toml = tmp_path / "predops.toml"
    toml.write_text(one(objects, "ConfigMap", "predops-config")["data"]["predops.toml"])
    return load_serve_config(toml, {"PREDOPS_SERVER__SESSION_KEY_FILE": str(key_file)})


def test_every_server_replica_mounts_the_shared_session_key(
    rendered: dict[str, list[Obj]],
) -> None:
    assert one(rendered["production"], "Deployment", "predops-server")["spec"]["replicas"] >= 2
    for objects in rendered.values():
        text = one(objects, "ConfigMap", "predops-config")["data"]["predops.toml"]
        server = tomllib.loads(text)["server"]
        assert server["protect_reads"] is True
        key_path = PurePosixPath(server["session_key_file"])
        pod = one(objects, "Deployment", "predops-server")["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in pod["volumes"]}
        mounts = {
            m["mountPath"]: m
            for m in container(objects, "Deployment", "predops-server", "server")["volumeMounts"]
        }
        mount = mounts[str(key_path.parent)]
        secret = volumes[mount["name"]]["secret"]
        assert {"key": "session-key", "path": key_path.name} in secret["items"]
        data = one(objects, "Secret", secret["secretName"])["data"]
        assert "session-key" in data


def test_the_server_records_and_the_apply_job_executes(overlay: list[Obj], tmp_path: Path) -> None:
    key = tmp_path / "session-key"
    key.write_text("k" * 48)
    cfg = serve_config(overlay, tmp_path, key)
    assert cfg.apply_execute is False and cfg.kubeconfig == "in-cluster"  # type: ignore[attr-defined]
    cron = one(overlay, "CronJob", "predops-apply")
    assert cron["spec"]["suspend"] is True
    template = cron["spec"]["jobTemplate"]
    (apply,) = template["spec"]["template"]["spec"]["containers"]
    assert apply["args"][:2] == ["apply", "$(PLAN_ID)"]
    assert "--execute" in apply["args"]
    assert apply["args"][apply["args"].index("--kubeconfig") + 1] == "in-cluster"
    # The README's recipe: a Job from the template, PLAN_ID set offline by kubectl.
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "apply-p1"}}
    job["spec"] = template["spec"]
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    done = subprocess.run(
        [kubectl(), "set", "env", "--local", "-f", str(path), "PLAN_ID=plan-123", "-o", "yaml"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (set_job,) = [d for d in yaml.safe_load_all(done.stdout) if d]
    env = set_job["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "PLAN_ID", "value": "plan-123"} in env


# ------------------------------------------------------------------ storage
def claims(objects: list[Obj]) -> dict[str, list[str]]:
    out = {
        o["metadata"]["name"]: o["spec"]["accessModes"]
        for o in objects
        if o["kind"] == "PersistentVolumeClaim"
    }
    for o in objects:
        for t in o.get("spec", {}).get("volumeClaimTemplates", []):
            out[f"{o['metadata']['name']}/{t['metadata']['name']}"] = t["spec"]["accessModes"]
    return out


def test_production_shares_files_only_and_keeps_sqlite_off_shared_storage(
    rendered: dict[str, list[Obj]],
) -> None:
    objects = rendered["production"]
    modes = claims(objects)
    assert modes.pop("predops-workspace") == ["ReadWriteMany"]
    assert all(m == ["ReadWriteOnce"] for m in modes.values()), modes
    env = one(objects, "ConfigMap", "predops-env")["data"]
    assert env["MLFLOW_TRACKING_URI"] == "http://mlflow:5000"  # not sqlite:///<workspace>
    mlflow = container(objects, "Deployment", "mlflow", "mlflow")
    (uri,) = [e for e in mlflow["env"] if e["name"] == "MLFLOW_BACKEND_STORE_URI"]
    assert uri["valueFrom"]["secretKeyRef"]["name"] == "predops-mlflow-db"
    users = {
        name
        for name, _, pod in pod_templates(objects)
        for v in pod.get("volumes", [])
        if v.get("persistentVolumeClaim", {}).get("claimName") == "predops-scheduler-state"
    }
    assert users == {"Deployment/predops-scheduler"}


def test_the_scheduler_db_link_keeps_sqlite_files_on_the_schedulers_volume(
    rendered: dict[str, list[Obj]], tmp_path: Path
) -> None:
    """Run the production init container's script on two local folders standing for the
    shared workspace and the scheduler's volume, then use the run table through the link:
    SQLite keeps the database, its journal and its WAL on the scheduler's volume."""
    pod = one(rendered["production"], "Deployment", "predops-scheduler")["spec"]["template"]
    (init,) = pod["spec"]["initContainers"]
    mounts = {m["name"]: m["mountPath"] for m in init["volumeMounts"]}
    shared, own = tmp_path / "workspace", tmp_path / "scheduler-state"
    shared.mkdir()
    own.mkdir()
    (shared / "scheduler.db").write_text("")  # an older layout's file moves once
    script = init["args"][0].replace(mounts["scheduler-state"], str(own))
    script = script.replace(mounts["workspace"], str(shared))
    subprocess.run([*init["command"][:1], "-ec", script], check=True, timeout=30)
    assert (shared / "scheduler.db").is_symlink()
    store = RunStore(shared / "scheduler.db")
    at = datetime(2026, 3, 1, tzinfo=UTC)
    assert store.begin("pipeline", at.isoformat(), owner="test:1:1", at=at) is not None
    db = sqlite3.connect(shared / "scheduler.db")
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE IF NOT EXISTS probe (x)")
    db.execute("INSERT INTO probe VALUES (1)")
    db.commit()
    assert sorted(p.name for p in shared.iterdir()) == ["scheduler.db"]
    assert {"scheduler.db", "scheduler.db-wal"} <= {p.name for p in own.iterdir()}
    db.close()
    subprocess.run([*init["command"][:1], "-ec", script], check=True, timeout=30)  # re-runs
    assert store.runs() and (shared / "scheduler.db").resolve() == own / "scheduler.db"


def test_embedded_keeps_everything_on_one_node(rendered: dict[str, list[Obj]]) -> None:
    objects = rendered["embedded"]
    assert claims(objects) == {"predops-workspace": ["ReadWriteOnce"]}
    assert "MLFLOW_TRACKING_URI" not in one(objects, "ConfigMap", "predops-env")["data"]
    workloads = sorted(name for name, _, _ in pod_templates(objects))
    assert workloads == ["CronJob/predops-apply", "Deployment/predops-server"]
    apply = one(objects, "CronJob", "predops-apply")["spec"]["jobTemplate"]["spec"]["template"]
    (term,) = apply["spec"]["affinity"]["podAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    server = one(objects, "Deployment", "predops-server")["spec"]["template"]["metadata"]
    assert term["labelSelector"]["matchLabels"].items() <= server["labels"].items()


# ------------------------------------------------------------------ network
def selects(policy: Obj, labels: dict[str, str]) -> bool:
    return policy["spec"]["podSelector"].get("matchLabels", {}).items() <= labels.items()


def egress_ports(objects: list[Obj], labels: dict[str, str]) -> set[int]:
    return {
        port["port"]
        for p in objects
        if p["kind"] == "NetworkPolicy" and selects(p, labels)
        for rule in p["spec"].get("egress", [])
        for port in rule.get("ports", [])
    }


def test_network_policies_open_only_what_each_component_needs(overlay: list[Obj]) -> None:
    policies = [o for o in overlay if o["kind"] == "NetworkPolicy"]
    deny = one(overlay, "NetworkPolicy", "predops-default-deny")["spec"]
    assert deny == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    need = {
        "server": {53, 443, 6443, 5000},
        "scheduler": {53, 9090, 5000},
        "apply": {53, 443, 6443, 5000},
        "mlflow": {53, 5432},
        "postgres": {53},
    }
    embedded_pod = {53, 443, 6443, 5000, 9090}  # the server and the scheduler in one pod
    seen = set()
    for name, meta, pod in pod_templates(overlay):
        component = meta["labels"]["app.kubernetes.io/component"]
        two = len(pod["containers"]) == 2
        assert egress_ports(overlay, meta["labels"]) == (
            embedded_pod if two else need[component]
        ), name
        seen.add(component)
    assert {"server", "apply"} <= seen
    ingress = {
        p["metadata"]["name"]: p["spec"]["ingress"]
        for p in policies
        if "Ingress" in p["spec"]["policyTypes"] and p["spec"].get("ingress")
    }
    (server_rule,) = ingress["predops-server-ingress"]
    assert server_rule["ports"] == [{"protocol": "TCP", "port": 8000}]
    sources = [s.get("namespaceSelector", {}).get("matchLabels") for s in server_rule["from"]]
    assert sources == [
        {"kubernetes.io/metadata.name": "ingress-nginx"},
        {"kubernetes.io/metadata.name": "monitoring"},
    ]


# ------------------------------------------------------------------ configuration
def test_example_configuration_validates(overlay: list[Obj]) -> None:
    cm = one(overlay, "ConfigMap", "predops-config")
    cfg = parse_config(tomllib.loads(cm["data"]["predops.toml"]), "configmap predops.toml")
    assert cfg.ingest is not None and cfg.ingest.source == "prometheus"
    assert set(cfg.jobs) == {"pipeline", "retrain", "lake_maintenance"}


def test_server_and_scheduler_read_the_same_configuration(
    overlay: list[Obj], tmp_path: Path
) -> None:
    """One predops.toml feeds both: the server accepts the scheduler's sections, and the
    commented [policy] and [[tokens]] examples, uncommented, validate for both."""
    paths = set()
    for name, _, pod in pod_templates(overlay):
        volumes = {v["name"]: v for v in pod["volumes"]}
        for c in pod["containers"]:
            if "--config" not in c.get("args", []):
                continue
            mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
            assert volumes["config"]["configMap"] == {"name": "predops-config"}, name
            path = c["args"][c["args"].index("--config") + 1]
            assert path.startswith(mounts["config"] + "/")
            paths.add(path)
    assert len(paths) == 1
    text = one(overlay, "ConfigMap", "predops-config")["data"]["predops.toml"]
    uncommented = re.sub(r"^# ?(?=\[|\w+ = )", "", text, flags=re.M)
    assert "\n[policy.disruption]\n" in uncommented and "\n[[tokens]]\n" in uncommented
    scheduled = parse_config(tomllib.loads(uncommented), "configmap").policy
    assert [b.scope for b in scheduled.budgets.budgets] == ["pool", "rack"]
    assert scheduled.config.disruption.min_hold.total_seconds() == 6 * 3600
    shared = tmp_path / "predops.toml"
    shared.write_text(uncommented)
    key = tmp_path / "session-key"
    key.write_text("k" * 48)
    served = load_serve_config(shared, {"PREDOPS_SERVER__SESSION_KEY_FILE": str(key)})
    assert (served.policy.budgets, served.policy.config) == (scheduled.budgets, scheduled.config)
    assert [t.name for t in served.tokens] == ["prometheus", "alice"]
    assert served.session_key == b"k" * 48
