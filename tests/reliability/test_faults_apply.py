"""Injected fault: ``predops apply --execute`` killed (SIGKILL) in the middle of a plan,
while the second action's request is in flight, its effect reaching the API after the
process died. Applying the plan again runs each action at most once (idempotency keys in
the audit log, cordons carrying their key), and a third run does nothing.

A real subprocess against the fake Kubernetes API (``tests/fakes/kube_api.py``); the kill
point is a request the fake holds for a moment (``stall_next``), no hook in predops."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from predops.pipelines.actuators.kube import KEY_ANNOTATION
from predops.pipelines.cli.main import main
from predops.pipelines.workspace.audit import AuditLog
from predops.pipelines.workspace.plans import write_plan
from predops.pipelines.workspace.settings import load_settings
from tests.fakes.kube_api import FakeKubeAPI, Request
from tests.fakes.kube_objects import make_pdb, make_pod, write_kubeconfig
from tests.pipelines.actuators.conftest import T0, cluster_nodes, drain, plan_of

REPO = Path(__file__).resolve().parents[2]
TARGETS = ("n00", "n10", "n20")  # three racks of a 30-node pool: the default budgets allow it
HOLD_S = 1.5


def approve(ws: Path, plan_id: str) -> None:
    """The approval ``apply --execute`` needs, as an operator would give it."""
    res = CliRunner().invoke(main, ["--workspace", str(ws), "approve", plan_id])
    assert res.exit_code == 0, res.output


def apply_process(ws: Path, kubeconfig: Path, plan_id: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PREDOPS_OPERATOR": "fault-test"}
    env.pop("MLFLOW_TRACKING_URI", None)
    args = ["--workspace", str(ws), "apply", plan_id, "--execute"]
    args += ["--kubeconfig", str(kubeconfig), "--at", T0.isoformat(), "--json"]
    return subprocess.Popen(
        [sys.executable, "-m", "predops", *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def apply_again(ws: Path, kubeconfig: Path, plan_id: str) -> dict[str, int]:
    args = ["--workspace", str(ws), "apply", plan_id, "--execute"]
    args += ["--kubeconfig", str(kubeconfig), "--at", T0.isoformat(), "--json"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    counts: dict[str, int] = json.loads(res.stdout)["counts"]
    return counts


def wait_for(fake: FakeKubeAPI, method: str, path: str, proc: subprocess.Popen[str]) -> None:
    """Until the fake holds ``method path`` (the request arrived, not yet served)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if (method, path) in fake.held:
            return
        if proc.poll() is not None:
            pytest.fail(f"apply ended before {method} {path}: {proc.communicate()}")
        time.sleep(0.005)
    pytest.fail(f"no {method} {path} within 120 s")


def count(requests: list[Request], method: str) -> Counter[str]:
    return Counter(r.path for r in requests if r.method == method)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("PATCH", "/api/v1/nodes/n10"),  # killed while cordoning the second node
        ("POST", "/api/v1/namespaces/default/pods/job-1/eviction"),  # ... while evicting
    ],
)
def test_killed_apply_rerun_runs_each_action_at_most_once(
    tmp_path: Path, method: str, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PREDOPS_OPERATOR", "fault-test")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    ws = tmp_path / "ws"
    settings = load_settings(ws)
    plan = plan_of([drain(n) for n in TARGETS], plan_id="plan-kill")
    write_plan(settings.plans_dir, plan)
    approve(ws, plan.plan_id)
    pods = [make_pod(f"job-{i}", node=n) for i, n in enumerate(TARGETS)]
    with FakeKubeAPI(nodes=cluster_nodes(racks=30, per_rack=1), pods=pods) as fake:
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", fake.url)
        fake.stall_next(method, path, HOLD_S)
        first = apply_process(ws, kubeconfig, plan.plan_id)
        wait_for(fake, method, path, first)
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=30)
        assert first.returncode == -signal.SIGKILL
        time.sleep(HOLD_S + 0.3)  # the held request lands after the process died

        audit = AuditLog(settings.audit_log, who="reader")
        assert [(e["outcome"], e["what"]["target"]) for e in audit.entries()] == [
            ("approved", plan.plan_id),
            ("started", "n00"),
            ("done", "n00"),
            ("started", "n10"),
        ]

        # The re-runs (in this process: a fresh cluster reader, the same audit log).
        assert apply_again(ws, kubeconfig, plan.plan_id) == {"already_done": 1, "done": 2}
        assert apply_again(ws, kubeconfig, plan.plan_id) == {"already_done": 3}

        # Each action done once in the audit log; the API saw one cordon per node and
        # at most one eviction per pod (the held one counts once: it was not resent).
        done = Counter(e["key"] for e in audit.entries() if e["outcome"] == "done")
        assert done == Counter({a.idempotency_key: 1 for a in plan.actions})
        assert count(fake.requests, "PATCH") == Counter({f"/api/v1/nodes/{n}": 1 for n in TARGETS})
        posts = count(fake.requests, "POST")
        evictions = {p: k for p, k in posts.items() if p.endswith("/eviction")}
        assert set(evictions.values()) == {1} and len(evictions) == 3
        # one PredopsDrain Event per node: the killed run's went out with the re-run
        assert sorted(e["involvedObject"]["name"] for e in fake.events) == sorted(TARGETS)
        for i, n in enumerate(TARGETS):
            assert fake.node(n)["spec"]["unschedulable"] is True
            assert fake.pod("default", f"job-{i}")["metadata"].get("deletionTimestamp")


def test_a_rerun_rolls_back_the_cordon_its_killed_run_made_when_the_drain_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed after the cordon (while listing the node's pods), the re-run finds the node
    cordoned under its own key; its drain then fails, and it undoes that cordon as an
    uninterrupted run would."""
    monkeypatch.setenv("PREDOPS_OPERATOR", "fault-test")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    ws = tmp_path / "ws"
    settings = load_settings(ws)
    plan = plan_of([drain("n00")], plan_id="plan-rollback")
    write_plan(settings.plans_dir, plan)
    approve(ws, plan.plan_id)
    web = make_pod("web-0", node="n00", labels={"app": "web"})
    with FakeKubeAPI(nodes=cluster_nodes(racks=30, per_rack=1), pods=[web]) as fake:
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", fake.url)
        fake.stall_next("GET", "/api/v1/pods", HOLD_S)
        first = apply_process(ws, kubeconfig, plan.plan_id)
        wait_for(fake, "GET", "/api/v1/pods", first)
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=30)
        assert fake.node("n00")["spec"]["unschedulable"] is True  # the cordon landed

        # Two budgets select the pod: its eviction fails at once (HTTP 500).
        fake.pdbs = [
            make_pdb("a", match_labels={"app": "web"}),
            make_pdb("b", match_labels={"app": "web"}),
        ]
        args = ["--workspace", str(ws), "apply", plan.plan_id, "--execute"]
        args += ["--kubeconfig", str(kubeconfig), "--at", T0.isoformat(), "--json"]
        res = CliRunner().invoke(main, args)
        assert res.exit_code == 2, res.output
        (out,) = json.loads(res.stdout)["actions"]
        assert out["outcome"] == "failed" and "HTTP 500" in out["detail"]
        assert out["report"]["cordon"] == "resumed" and out["report"]["rollback"] == "uncordoned"
        node = fake.node("n00")
        assert not node["spec"].get("unschedulable")
        assert KEY_ANNOTATION not in node["metadata"].get("annotations", {})


def test_concurrent_applies_refused_by_the_lock_print_one_json_error(tmp_path: Path) -> None:
    """Three ``predops apply --execute --json`` at once: the one holding the workspace's
    apply lock applies the plan; the two it refuses each print one JSON object naming
    the lock (no traceback) and exit non-zero."""
    ws = tmp_path / "ws"
    settings = load_settings(ws)
    plan = plan_of([drain("n00")], plan_id="plan-three")
    write_plan(settings.plans_dir, plan)
    approve(ws, plan.plan_id)
    with FakeKubeAPI(nodes=cluster_nodes(racks=30, per_rack=1)) as fake:
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", fake.url)
        # The first run holds the lock while its cordon is held (below the client's
        # 30 s request timeout); the other two start meanwhile.
        fake.stall_next("PATCH", "/api/v1/nodes/n00", 25)
        first = apply_process(ws, kubeconfig, plan.plan_id)
        wait_for(fake, "PATCH", "/api/v1/nodes/n00", first)
        others = [apply_process(ws, kubeconfig, plan.plan_id) for _ in range(2)]
        refused = [p.communicate(timeout=120) for p in others]
        fake.release_held()
        out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert json.loads(out)["counts"] == {"done": 1}
    for proc, (stdout, stderr) in zip(others, refused, strict=True):
        assert proc.returncode == 1, (stdout, stderr)
        (line,) = stdout.splitlines()  # exactly one JSON object on stdout
        body = json.loads(line)
        assert body["type"] == "LockHeld" and "another apply holds" in body["error"], body
        assert "Traceback" not in stderr, stderr
