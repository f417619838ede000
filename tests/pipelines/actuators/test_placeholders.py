"""Pool resizes through placeholder pods against the local fake API server: the
PriorityClass and Deployment created, the patches sent, the replica mapping, resume
under the same key, pool_changed, refusals, dry-run, and the RBAC those calls need."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from predops.core.clock import FixedClock
from predops.pipelines.actuators.apply import apply_plan
from predops.pipelines.actuators.clusterapi import RESIZE_KEY_ANNOTATION
from predops.pipelines.actuators.placeholder_objects import (
    PlaceholderOptions,
    deployment_name,
    replacing,
    replicas_for,
)
from predops.pipelines.actuators.placeholders import PlaceholderApi, PlaceholderResizer
from predops.pipelines.ingest.kubernetes import DEFAULTS, pod_rows
from predops.pipelines.workspace.audit import AuditLog
from tests.fakes.kube_api import FakeKubeAPI
from tests.fakes.kube_objects import container, make_node, make_pod
from tests.pipelines.actuators.conftest import (
    T0,
    apply_one,
    assert_role_grants,
    cli_apply,
    kube_for,
    plan_of,
    resize,
)

NODES = ["n00", "n01", "n10", "n11", "n20", "n21"]  # the conftest cluster, pool "train"
DEPLOYMENTS = "/apis/apps/v1/namespaces/predops/deployments"
DEPLOYMENT = f"{DEPLOYMENTS}/predops-placeholders-train"
PRIORITY_CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def exporter(node: str) -> dict:
    """A DaemonSet pod asking 1 core and 1 GiB on ``node``."""
    return make_pod(
        f"dcgm-{node}",
        "monitoring",
        node=node,
        owner=("DaemonSet", "dcgm-exporter"),
        containers=[container(cpu="1", memory="1Gi")],
    )


@pytest.fixture
def cluster(fake: FakeKubeAPI) -> FakeKubeAPI:
    """The conftest pool ``train`` (6 nodes, 8 GPUs, 64 cores, 512 GiB) with the GPU
    taint, an exporter on every node and work on n00 and n01."""
    for n in fake.nodes:
        n["spec"]["taints"] = [dict(GPU_TAINT)]
    fake.nodes[-1]["spec"]["taints"].append(
        {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}  # goes away
    )
    fake.pods = [exporter(n) for n in NODES]
    fake.pods += [make_pod("train-0", node="n00"), make_pod("train-1", node="n01")]
    return fake


def _resizer(fake: FakeKubeAPI, tmp_path: Path, clock: FixedClock, **opt: object):
    api, _, state, sleeper = kube_for(fake, tmp_path, clock)
    options = PlaceholderOptions(**opt)  # type: ignore[arg-type]
    return PlaceholderResizer(PlaceholderApi(api), clock, sleeper, options), state


def _deployment(fake: FakeKubeAPI) -> dict:
    (dep,) = fake.deployments
    return dep


def _writes(fake: FakeKubeAPI) -> list:
    return [r for r in fake.requests if r.method in ("POST", "PATCH", "PUT", "DELETE")]


def test_scale_up_creates_the_priority_class_and_whole_node_placeholders(
    cluster: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    resizer, state = _resizer(cluster, tmp_path, clock)
    action = resize(6, 9)
    out = apply_one(resizer, state, audit, clock, action)
    assert out.outcome == "done", out
    # 9 nodes held: the 2 running work stay, 7 placeholders hold the rest
    assert out.report["nodes_taken"] == 2 and out.report["replicas"] == 7
    assert out.report["priority_class"] == "created"
    assert out.report["deployment_action"] == "created"
    (pc,) = cluster.priority_classes
    assert (pc["metadata"]["name"], pc["value"]) == ("predops-placeholder", -10)
    assert pc["preemptionPolicy"] == "Never" and pc["globalDefault"] is False
    dep = _deployment(cluster)
    assert dep["metadata"]["namespace"] == "predops"
    assert dep["metadata"]["name"] == "predops-placeholders-train"
    assert dep["metadata"]["annotations"][RESIZE_KEY_ANNOTATION] == action.idempotency_key
    assert dep["spec"]["replicas"] == 7 and dep["spec"]["strategy"] == {"type": "Recreate"}
    pod = dep["spec"]["template"]
    assert dep["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert pod["metadata"]["labels"]["predops.io/placeholder"] == "train"
    spec = pod["spec"]
    assert spec["priorityClassName"] == "predops-placeholder"
    assert spec["nodeSelector"] == {"karpenter.sh/nodepool": "train"}
    # the pool's taint is tolerated; the node-lifecycle taint is not
    assert spec["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}
    ]
    (c,) = spec["containers"]
    assert c["image"].startswith("registry.k8s.io/pause")
    # a node's allocatable less its DaemonSet pod: 63 cores, 511 GiB, 8 GPUs
    assert c["resources"]["requests"] == {
        "cpu": "63000m",
        "memory": f"{511 * 1024}Mi",
        "nvidia.com/gpu": "8",
    }
    assert c["resources"]["limits"] == {"nvidia.com/gpu": "8"}
    # the PriorityClass exists before the Deployment that names it
    assert [r.path for r in _writes(cluster)] == [PRIORITY_CLASSES, DEPLOYMENTS]


def test_replica_mapping() -> None:
    assert replicas_for(9, 2, 1) == 7
    assert replicas_for(9, 2, 2) == 14  # two placeholders per node of headroom
    assert replicas_for(3, 4, 1) == 0  # never below 0: work is never taken away
    assert replicas_for(4, 4, 1) == 0


def test_scale_in_lowers_the_replicas_with_one_patch_and_never_below_zero(
    cluster: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    resizer, state = _resizer(cluster, tmp_path, clock)
    assert apply_one(resizer, state, audit, clock, resize(6, 9)).outcome == "done"
    first = len(_writes(cluster))
    out = apply_one(resizer, state, audit, clock, resize(6, 4))
    assert out.outcome == "done" and out.report["replicas"] == 2
    assert out.report["previous_replicas"] == 7
    (patch,) = _writes(cluster)[first:]
    assert patch.method == "PATCH" and patch.path == DEPLOYMENT
    assert patch.headers["content-type"].startswith("application/merge-patch+json")
    # replicas and the key in one patch; the template is unchanged, so not sent
    assert patch.body["spec"] == {"replicas": 2}
    assert set(patch.body["metadata"]["annotations"]) == {
        RESIZE_KEY_ANNOTATION,
        "predops.io/resized-at",
    }
    # below the nodes running work: no placeholder at all, and no refusal
    low = apply_one(resizer, state, audit, clock, resize(6, 1))
    assert low.outcome == "done" and low.report["replicas"] == 0
    assert _deployment(cluster)["spec"]["replicas"] == 0


def test_an_interrupted_resize_resumes_under_its_key_without_writing_twice(
    cluster: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    resizer, state = _resizer(cluster, tmp_path, clock)
    action = resize(6, 8)
    resizer.run(action, "plan-test")  # ran, but the process died before "done"
    writes = len(_writes(cluster))
    cluster.nodes.append(dict(cluster.nodes[0], metadata={**cluster.nodes[0]["metadata"]}))
    cluster.nodes[-1]["metadata"]["name"] = "n30"  # the autoscaler brought a node since
    out = apply_one(resizer, state, audit, clock, action)
    assert out.outcome == "done", out
    assert out.report["deployment_action"] == "already set under this key"
    assert len(_writes(cluster)) == writes
    # another plan's resize from 6 is stale now: the pool has 7 nodes
    resizer2, state2 = _resizer(cluster, tmp_path, clock)
    other = apply_one(resizer2, state2, audit, clock, resize(6, 5))
    assert (other.outcome, other.reason) == ("dropped", "pool_changed")
    assert "7 nodes now" in other.detail


def test_a_pool_whose_node_count_moved_is_dropped_in_dry_run_and_for_real(
    cluster: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    resizer, state = _resizer(cluster, tmp_path, clock)
    for execute in (False, True):
        out = apply_one(resizer, state, audit, clock, resize(5, 8), execute)
        assert (out.outcome, out.reason) == ("dropped", "pool_changed")
        assert "6 nodes now" in out.detail and "from 5" in out.detail
    assert _writes(cluster) == [] and cluster.deployments == []


def test_dry_run_sends_nothing_and_previews_the_body(
    cluster: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    resizer, state = _resizer(cluster, tmp_path, clock)
    action = resize(6, 9)
    out = apply_one(resizer, state, audit, clock, action, execute=False)
    assert out.outcome == "would_run"
    assert _writes(cluster) == []
    preview = resizer.preview(action)
    assert preview["replicas"] == 7
    assert preview["would"]["priority_class"] == "create"
    assert preview["would"]["deployment"] == "create"
    assert preview["would"]["body"]["spec"]["replicas"] == 7


def test_a_changed_pool_shape_patches_the_template_exactly(
    cluster: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    resizer, state = _resizer(cluster, tmp_path, clock)
    assert apply_one(resizer, state, audit, clock, resize(6, 8)).outcome == "done"
    for n in cluster.nodes:
        del n["spec"]["taints"]  # the GPU taint is gone
    cluster.pods = [p for p in cluster.pods if not p["metadata"]["name"].startswith("dcgm-")]
    resizer, state = _resizer(cluster, tmp_path, clock)  # a new apply: lists read afresh
    out = apply_one(resizer, state, audit, clock, resize(6, 9))
    assert out.report["deployment_action"] == "patched, template updated"
    patch = _writes(cluster)[-1]
    assert patch.body["spec"]["template"]["spec"]["tolerations"] == []
    spec = _deployment(cluster)["spec"]["template"]["spec"]
    assert spec["tolerations"] == []
    assert spec["containers"][0]["resources"]["requests"]["cpu"] == "64000m"


def test_replacing_turns_the_live_object_into_the_desired_one() -> None:
    from tests.fakes.kube_api import merge_patch

    live = {"a": {"x": 1, "y": 2}, "b": [1, 2], "c": 3}
    want = {"a": {"x": 5}, "b": [3]}
    assert merge_patch(live, replacing(live, want)) == want


def test_placeholders_daemonsets_and_finished_pods_are_not_work(
    cluster: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    cluster.pods += [
        make_pod("ph-0", "predops", node="n10", labels={"predops.io/placeholder": "train"}),
        make_pod("done-0", node="n11", phase="Succeeded"),
        make_pod(
            "etcd-n20",
            "kube-system",
            node="n20",
            annotations={"kubernetes.io/config.mirror": "x"},
            containers=[container(cpu="2", memory="1Gi")],
        ),
        make_pod("batch-0", node="n21", priority=-20),  # work, below the placeholders
    ]
    resizer, state = _resizer(cluster, tmp_path, clock)
    out = apply_one(resizer, state, audit, clock, resize(6, 8))
    assert out.report["nodes_taken"] == 3  # n00, n01, n21
    assert out.report["placeholders_running"] == 1
    assert out.report["work_at_or_below_placeholder_priority"] == 1
    # the static pod on n20 takes 2 more cores there: the least room is 61 cores
    requests = _deployment(cluster)["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert requests["requests"]["cpu"] == "61000m"


def test_the_ingest_leaves_placeholder_pods_out_of_the_demand() -> None:
    pods = [
        make_pod("ph-0", "predops", node="n10", labels={"predops.io/placeholder": "train"}),
        make_pod("train-0", node="n00"),
    ]
    assert pod_rows(pods, DEFAULTS)["pod_id"].str.split("/").list.get(1).to_list() == ["train-0"]


def test_several_placeholders_per_node_split_its_room(
    cluster: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    resizer, state = _resizer(cluster, tmp_path, clock, per_node=2)
    out = apply_one(resizer, state, audit, clock, resize(6, 9))
    assert out.report["replicas"] == 14
    (c,) = _deployment(cluster)["spec"]["template"]["spec"]["containers"]
    assert c["resources"]["requests"] == {
        "cpu": "31500m",
        "memory": f"{511 * 512}Mi",
        "nvidia.com/gpu": "4",
    }


@pytest.mark.parametrize(
    ("existing", "why"),
    [
        ({"value": 100, "preemptionPolicy": "Never"}, "negative"),
        ({"value": -10}, "preempt"),
        ({"value": -10, "preemptionPolicy": "Never", "globalDefault": True}, "global default"),
    ],
)
def test_a_priority_class_that_could_hurt_work_is_refused(
    cluster: FakeKubeAPI,
    tmp_path: Path,
    clock: FixedClock,
    audit: AuditLog,
    existing: dict,
    why: str,
) -> None:
    cluster.priority_classes = [{"metadata": {"name": "predops-placeholder"}, **existing}]
    resizer, state = _resizer(cluster, tmp_path, clock)
    out = apply_one(resizer, state, audit, clock, resize(6, 8))
    assert (out.outcome, out.reason) == ("dropped", "revalidation_failed")
    assert why in out.detail and _writes(cluster) == []


def test_a_good_priority_class_is_used_as_it_is(
    cluster: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    cluster.priority_classes = [
        {"metadata": {"name": "predops-placeholder"}, "value": -5, "preemptionPolicy": "Never"}
    ]
    resizer, state = _resizer(cluster, tmp_path, clock)
    out = apply_one(resizer, state, audit, clock, resize(6, 8))
    assert out.outcome == "done" and out.report["priority_class"] == "exists"
    assert [r.path for r in _writes(cluster)] == [DEPLOYMENTS]


def test_a_deployment_predops_does_not_manage_is_left_alone(
    cluster: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    cluster.deployments = [
        {
            "metadata": {"name": "predops-placeholders-train", "namespace": "predops"},
            "spec": {"replicas": 3},
        }
    ]
    resizer, state = _resizer(cluster, tmp_path, clock)
    out = apply_one(resizer, state, audit, clock, resize(6, 8))
    assert (out.outcome, out.reason) == ("dropped", "revalidation_failed")
    assert "does not manage" in out.detail and _writes(cluster) == []


def test_a_deployment_made_between_check_and_run_is_patched_not_created_twice(
    cluster: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    other, _ = _resizer(cluster, tmp_path, clock)
    resizer, _ = _resizer(cluster, tmp_path, clock)
    action = resize(6, 8)
    assert resizer.check(action, T0) is None  # read: no Deployment yet
    other.run(resize(6, 7), "plan-other")  # a concurrent apply makes it meanwhile
    report = resizer.run(action, "plan-test")
    assert report["deployment_action"] == "patched"
    assert _deployment(cluster)["spec"]["replicas"] == 6
    posts = [r for r in _writes(cluster) if r.method == "POST" and r.path == DEPLOYMENTS]
    assert len(posts) == 2  # the second answered 409 and became a patch


def test_a_pool_without_nodes_or_under_two_labels_is_not_read(
    cluster: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    resizer, state = _resizer(cluster, tmp_path, clock)
    out = apply_one(resizer, state, audit, clock, resize(6, 8, pool="nope"))
    assert (out.outcome, out.reason) == ("dropped", "revalidation_failed")
    assert "no node carries it" in out.detail
    labels = cluster.nodes[0]["metadata"]["labels"]
    del labels["karpenter.sh/nodepool"]
    labels["eks.amazonaws.com/nodegroup"] = "train"  # no single node selector fits all
    resizer, state = _resizer(cluster, tmp_path, clock)
    out = apply_one(resizer, state, audit, clock, resize(6, 8))
    assert (out.outcome, out.reason) == ("dropped", "revalidation_failed")
    assert "different labels" in out.detail and _writes(cluster) == []


def test_transient_errors_are_retried(
    cluster: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    cluster.fail_next("POST", DEPLOYMENTS, 503, "ServiceUnavailable")
    resizer, state = _resizer(cluster, tmp_path, clock)
    out = apply_one(resizer, state, audit, clock, resize(6, 8))
    assert out.outcome == "done" and _deployment(cluster)["spec"]["replicas"] == 6


def test_a_forbidden_write_fails_the_action(
    cluster: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    cluster.fail_next("POST", DEPLOYMENTS, 403, "Forbidden", "cannot create deployments")
    resizer, state = _resizer(cluster, tmp_path, clock)
    out = apply_one(resizer, state, audit, clock, resize(6, 8))
    assert out.outcome == "failed" and "HTTP 403" in out.detail
    assert [e["outcome"] for e in audit.read().entries] == ["started", "failed"]


def test_deployment_names_are_dns_labels() -> None:
    assert deployment_name("train") == "predops-placeholders-train"
    odd = deployment_name("GPU_Train.A100")
    assert odd.startswith("predops-placeholders-gpu-train-a100-") and len(odd) < 64
    assert deployment_name("x" * 63) != deployment_name("x" * 62)


def test_the_deployed_role_grants_every_call_placeholders_make(
    cluster: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    resizer, state = _resizer(cluster, tmp_path, clock)
    for action in (resize(6, 9), resize(6, 4)):
        assert apply_one(resizer, state, audit, clock, action).outcome == "done"
    assert_role_grants(
        cluster,
        {
            ("apps", "deployments", "get"),
            ("apps", "deployments", "create"),
            ("apps", "deployments", "patch"),
            ("scheduling.k8s.io", "priorityclasses", "get"),
            ("scheduling.k8s.io", "priorityclasses", "create"),
        },
    )


def test_predops_apply_dry_run_reports_the_placeholders_it_would_set(
    cluster: FakeKubeAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = cli_apply(cluster, tmp_path, monkeypatch, plan_of([resize(6, 9)], "plan-headroom"))
    dry = run()
    assert dry.exit_code == 0, dry.output
    (out,) = json.loads(dry.stdout)["actions"]
    assert out["outcome"] == "would_run"
    assert out["report"]["pool_actuator"] == "placeholders"
    assert out["report"]["would"]["body"]["spec"]["replicas"] == 7
    assert _writes(cluster) == []
    res = run("--execute")
    assert res.exit_code == 0, res.output
    (done,) = json.loads(res.stdout)["actions"]
    assert done["outcome"] == "done" and done["report"]["replicas"] == 7
    assert _deployment(cluster)["spec"]["replicas"] == 7


def test_one_node_and_pod_list_serves_every_pool_of_a_plan(
    cluster: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    cluster.nodes += [make_node(f"s{i}", pool="serve") for i in range(2)]
    resizer, state = _resizer(cluster, tmp_path, clock)
    report = apply_plan(
        plan_of([resize(6, 8), resize(2, 3, pool="serve")]),
        state=state,
        actuators={"resize_pool": resizer},
        audit=audit,
        clock=clock,
        execute=True,
    )
    assert [o.outcome for o in report.outcomes] == ["done", "done"]
    assert len(cluster.deployments) == 2
    assert len(cluster.seen("GET", "/api/v1/pods")) == 1
