"""Pool resizes through Cluster API against the local fake API server: the scale
subresource, delete marks on idle machines in the plan's order, re-validation of the
replica count and the usage floor, resume under the same key, roll-back of marks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from predops.core.clock import FixedClock
from predops.pipelines.actuators.clusterapi import (
    DELETE_MACHINE_ANNOTATION,
    RESIZE_KEY_ANNOTATION,
    ClusterApi,
    Machine,
    PoolResizer,
    delete_order,
)
from predops.pipelines.workspace.audit import AuditLog
from predops.pipelines.workspace.settings import load_settings
from tests.fakes.kube_api import FakeKubeAPI
from tests.fakes.kube_objects import make_machine, make_machine_deployment, make_pod
from tests.pipelines.actuators.conftest import (
    apply_resize,
    assert_role_grants,
    cli_apply,
    kube_for,
    plan_of,
    resize,
)

NODES = ["n00", "n01", "n10", "n11", "n20", "n21"]  # the conftest cluster, pool "train"
MD = "/apis/cluster.x-k8s.io/v1beta1/namespaces/capi/machinedeployments/train-md"


@pytest.fixture
def capi(fake: FakeKubeAPI) -> FakeKubeAPI:
    fake.machine_deployments = [
        make_machine_deployment("train-md", pool="train", replicas=6, namespace="capi"),
        make_machine_deployment("serve-md", pool="serve", replicas=3, namespace="capi"),
    ]
    fake.machines = [
        make_machine(f"m-{n}", deployment="train-md", node=n, namespace="capi") for n in NODES
    ]
    return fake


def _resizer(fake: FakeKubeAPI, tmp_path: Path, clock: FixedClock, **opt: object):
    api, _, state, sleeper = kube_for(fake, tmp_path, clock, **opt)
    return PoolResizer(ClusterApi(api), clock, sleeper), state, sleeper


def _marked(fake: FakeKubeAPI) -> list[str]:
    return sorted(
        m["metadata"]["name"]
        for m in fake.machines
        if DELETE_MACHINE_ANNOTATION in (m["metadata"].get("annotations") or {})
    )


def _md(fake: FakeKubeAPI, name: str = "train-md") -> dict:
    return next(d for d in fake.machine_deployments if d["metadata"]["name"] == name)


def test_scale_up_patches_replicas_through_the_scale_subresource(
    capi: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    resizer, state, _ = _resizer(capi, tmp_path, clock)
    action = resize(6, 9)
    report = apply_resize(resizer, state, audit, clock, action)
    (out,) = report.outcomes
    assert out.outcome == "done", out
    assert out.report["machine_deployment"] == "capi/train-md"
    assert _md(capi)["spec"]["replicas"] == 9
    assert _md(capi, "serve-md")["spec"]["replicas"] == 3
    (scale,) = capi.seen("PATCH", MD + "/scale")
    assert scale.body == {"spec": {"replicas": 9}}
    assert scale.headers["content-type"].startswith("application/merge-patch+json")
    assert _md(capi)["metadata"]["annotations"][RESIZE_KEY_ANNOTATION] == action.idempotency_key
    assert _marked(capi) == []
    listings = capi.seen("GET", "/apis/cluster.x-k8s.io/v1beta1/machinedeployments")
    assert listings and {r.query["labelSelector"] for r in listings} == {"predops.io/pool=train"}


def test_scale_in_marks_idle_machines_in_the_plans_order_and_never_a_busy_one(
    capi: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    capi.pods = [
        make_pod("train-0", node="n00"),
        make_pod("train-1", node="n11"),
        make_pod("ds-0", node="n10", owner=("DaemonSet", "node-exporter")),  # not work
        make_pod("done-0", node="n20", phase="Succeeded"),  # not work
    ]
    resizer, state, _ = _resizer(capi, tmp_path, clock)
    # the plan names a busy node first (it got work since), then two idle ones
    report = apply_resize(resizer, state, audit, clock, resize(6, 4, ["n00", "n21", "n10"]))
    (out,) = report.outcomes
    assert out.outcome == "done", out
    assert [d["node"] for d in out.report["delete_first"]] == ["n21", "n10"]
    assert out.report["busy_nodes"] == 2
    assert _marked(capi) == ["m-n10", "m-n21"]
    assert _md(capi)["spec"]["replicas"] == 4
    # the run uses what the check just read: the cluster's pods are listed once
    assert len(capi.seen("GET", "/api/v1/pods")) == 1
    # the marks go on before the replica count comes down
    paths = [r.path for r in capi.requests if r.method == "PATCH"]
    assert paths[-1] == MD + "/scale" and all("/machines/" in p for p in paths[1:-1])


def test_scale_in_tops_up_the_plans_order_with_other_idle_nodes_then_nodeless_machines() -> None:
    machines = [
        Machine("m-a", "a", busy=False),
        Machine("m-b", "b", busy=True),
        Machine("m-c", "c", busy=False),
        Machine("m-new", None, busy=False),
        Machine("m-d", "d", busy=False),
    ]
    order = delete_order(machines, ["d", "b", "zz"])
    assert [m.name for m in order] == ["m-d", "m-a", "m-c", "m-new"]


def test_replicas_changed_since_the_plan_drop_the_action_in_dry_run_and_for_real(
    capi: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    _md(capi)["spec"]["replicas"] = 7  # the autoscaler moved it
    resizer, state, _ = _resizer(capi, tmp_path, clock)
    for execute in (False, True):
        (out,) = apply_resize(resizer, state, audit, clock, resize(6, 4), execute).outcomes
        assert (out.outcome, out.reason) == ("dropped", "pool_changed")
        assert "7 replicas now" in out.detail
    assert capi.seen("PATCH") == [] and _md(capi)["spec"]["replicas"] == 7


def test_a_scale_in_below_the_busy_nodes_is_dropped(
    capi: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    capi.pods = [make_pod(f"w-{n}", node=n) for n in NODES[:4]]
    resizer, state, _ = _resizer(capi, tmp_path, clock)
    (out,) = apply_resize(resizer, state, audit, clock, resize(6, 3)).outcomes
    assert (out.outcome, out.reason) == ("dropped", "usage_floor")
    assert "4 nodes of pool train run work now" in out.detail
    (ok,) = apply_resize(resizer, state, audit, clock, resize(6, 4)).outcomes
    assert ok.outcome == "done" and _marked(capi) == ["m-n20", "m-n21"]


@pytest.mark.parametrize("labels", [[], ["train", "train"]])
def test_no_or_two_machine_deployments_for_the_pool_is_named(
    capi: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog, labels: list[str]
) -> None:
    capi.machine_deployments = [
        make_machine_deployment(f"md-{i}", pool=p, replicas=6, namespace="capi")
        for i, p in enumerate(labels)
    ]
    resizer, state, _ = _resizer(capi, tmp_path, clock)
    (out,) = apply_resize(resizer, state, audit, clock, resize(6, 8)).outcomes
    assert (out.outcome, out.reason) == ("dropped", "revalidation_failed")
    assert "predops.io/pool=train" in out.detail
    assert ("none" if not labels else "capi/md-0, capi/md-1") in out.detail
    assert capi.seen("PATCH") == []


def test_a_machine_deployment_cluster_autoscaler_sizes_is_left_to_it(
    capi: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    notes = {"cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "20"}
    _md(capi)["metadata"]["annotations"] = notes
    resizer, state, _ = _resizer(capi, tmp_path, clock)
    (out,) = apply_resize(resizer, state, audit, clock, resize(6, 8)).outcomes
    assert (out.outcome, out.reason) == ("dropped", "revalidation_failed")
    assert "cluster-autoscaler" in out.detail and "max-size" in out.detail
    assert capi.seen("PATCH") == [] and _md(capi)["spec"]["replicas"] == 6


def test_an_interrupted_resize_resumes_under_its_key_without_scaling_twice(
    capi: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    resizer, state, _ = _resizer(capi, tmp_path, clock)
    action = resize(6, 8)
    resizer.run(action, "plan-test")  # ran, but the process died before "done"
    assert _md(capi)["spec"]["replicas"] == 8
    (out,) = apply_resize(resizer, state, audit, clock, action).outcomes
    assert out.outcome == "done" and out.report["scale"].startswith("already at 8")
    assert len(capi.seen("PATCH", MD + "/scale")) == 1
    # another plan's resize from 6 is stale now
    (other,) = apply_resize(resizer, state, audit, clock, resize(6, 5)).outcomes
    assert other.reason == "pool_changed"


def test_a_failed_scale_takes_the_delete_marks_off_again(
    capi: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    capi.fail_next("PATCH", MD + "/scale", 403, "Forbidden", "cannot patch scale")
    resizer, state, _ = _resizer(capi, tmp_path, clock)
    (out,) = apply_resize(resizer, state, audit, clock, resize(6, 4, ["n00", "n01"])).outcomes
    assert out.outcome == "failed" and "HTTP 403" in out.detail
    assert out.report["marked"] == ["m-n00", "m-n01"] and out.report["marks_left_on"] == []
    assert _marked(capi) == [] and _md(capi)["spec"]["replicas"] == 6
    entries = [e["outcome"] for e in audit.read().entries]
    assert entries == ["started", "failed"]


def test_transient_errors_on_the_scale_are_retried(
    capi: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    capi.fail_next("PATCH", MD + "/scale", 503, "ServiceUnavailable")
    resizer, state, sleeper = _resizer(capi, tmp_path, clock, backoff_initial=2)
    (out,) = apply_resize(resizer, state, audit, clock, resize(6, 7)).outcomes
    assert out.outcome == "done" and _md(capi)["spec"]["replicas"] == 7
    assert sleeper.waits == [2]


def test_dry_run_touches_nothing(
    capi: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    resizer, state, _ = _resizer(capi, tmp_path, clock)
    (out,) = apply_resize(resizer, state, audit, clock, resize(6, 4), execute=False).outcomes
    assert out.outcome == "would_run"
    assert capi.seen("PATCH") == [] and _md(capi)["spec"]["replicas"] == 6


def test_a_strategic_merge_patch_is_refused_by_the_fake_as_by_a_crd(capi: FakeKubeAPI) -> None:
    import urllib.request

    req = urllib.request.Request(
        capi.url + MD,
        data=json.dumps({"metadata": {"annotations": {"a": "b"}}}).encode(),
        method="PATCH",
        headers={
            "Content-Type": "application/strategic-merge-patch+json",
            "Authorization": "Bearer test-token",
        },
    )
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req)
    assert err.value.code == 415


def test_predops_apply_with_a_kubeconfig_resizes_pools_through_cluster_api(
    capi: FakeKubeAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = cli_apply(capi, tmp_path, monkeypatch, plan_of([resize(6, 5, ["n21"])], "plan-capi"))
    dry = run()
    assert dry.exit_code == 0, dry.output
    assert json.loads(dry.stdout)["counts"] == {"would_run": 1}
    assert _md(capi)["spec"]["replicas"] == 6
    res = run("--execute")
    assert res.exit_code == 0, res.output
    (out,) = json.loads(res.stdout)["actions"]
    assert out["outcome"] == "done" and out["report"]["delete_first"][0]["node"] == "n21"
    assert _md(capi)["spec"]["replicas"] == 5 and _marked(capi) == ["m-n21"]
    audit = AuditLog(load_settings(tmp_path / "ws").audit_log, who="reader")
    assert [e["outcome"] for e in audit.entries()][-2:] == ["started", "done"]


def test_the_deployed_role_grants_every_call_a_resize_makes(
    capi: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    capi.pods = [make_pod("train-0", node="n00")]
    resizer, state, _ = _resizer(capi, tmp_path, clock)
    for action in (resize(6, 4, ["n21"]), resize(4, 6)):
        (out,) = apply_resize(resizer, state, audit, clock, action).outcomes
        assert out.outcome == "done", out
    assert_role_grants(
        capi,
        {
            ("cluster.x-k8s.io", "machinedeployments/scale", "patch"),
            ("cluster.x-k8s.io", "machines", "patch"),
        },
    )
