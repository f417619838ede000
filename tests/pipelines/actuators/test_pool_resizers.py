"""Choosing each pool's actuator: the setting per pool or for every pool, and auto
(a MachineDeployment -> Cluster API unless cluster-autoscaler sizes it, a NodePool ->
Karpenter, else placeholders), against the local fake API server."""

from __future__ import annotations

from pathlib import Path

import pytest

from predops.core.clock import FixedClock
from predops.pipelines.actuators.pool_resizers import PoolResizers, parse_pool_actuators
from predops.pipelines.workspace.audit import AuditLog
from tests.fakes.kube_api import FakeKubeAPI
from tests.fakes.kube_objects import make_machine, make_machine_deployment, make_nodepool
from tests.pipelines.actuators.conftest import T0, apply_one, kube_for, resize

NODES = ["n00", "n01", "n10", "n11", "n20", "n21"]
MD_LIST = "/apis/cluster.x-k8s.io/v1beta1/machinedeployments"
NODEPOOL_LIST = "/apis/karpenter.sh/v1/nodepools"


def _pools(fake: FakeKubeAPI, tmp_path: Path, clock: FixedClock, *settings: str):
    api, _, state, sleeper = kube_for(fake, tmp_path, clock)
    return PoolResizers(api, clock, sleeper, parse_pool_actuators(settings)), state


def _with_md(fake: FakeKubeAPI, notes: dict[str, str] | None = None) -> None:
    md = make_machine_deployment("train-md", pool="train", replicas=6, namespace="capi")
    if notes:
        md["metadata"]["annotations"] = notes
    fake.machine_deployments = [md]
    fake.machines = [make_machine(f"m-{n}", deployment="train-md", node=n) for n in NODES]


def _chosen(fake: FakeKubeAPI, tmp_path: Path, clock: FixedClock, *settings: str) -> str:
    pools, _ = _pools(fake, tmp_path, clock, *settings)
    assert pools.check(resize(6, 7), T0) is None
    return pools.name


def test_auto_reads_the_cluster(fake: FakeKubeAPI, tmp_path: Path, clock: FixedClock) -> None:
    assert _chosen(fake, tmp_path, clock) == "placeholders"  # no MachineDeployment, NodePool
    fake.nodepools = [make_nodepool("train")]
    assert _chosen(fake, tmp_path, clock) == "karpenter"
    _with_md(fake)
    assert _chosen(fake, tmp_path, clock) == "cluster-api"  # before the NodePool
    _with_md(fake, {"cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "20"})
    pools, _ = _pools(fake, tmp_path, clock)
    action = resize(6, 7)
    assert pools.check(action, T0) is None and pools.name == "placeholders"
    assert "sized by cluster-autoscaler" in pools.previews[action.idempotency_key]["chosen_because"]


def test_an_api_the_cluster_does_not_serve_counts_as_none(
    fake: FakeKubeAPI, tmp_path: Path, clock: FixedClock
) -> None:
    fake.fail_next("GET", MD_LIST, 404, "NotFound", "the server could not find it")
    fake.fail_next("GET", NODEPOOL_LIST, 404, "NotFound", "the server could not find it")
    assert _chosen(fake, tmp_path, clock) == "placeholders"


def test_an_unreadable_api_drops_the_action_rather_than_guess(
    fake: FakeKubeAPI, tmp_path: Path, clock: FixedClock
) -> None:
    fake.fail_next("GET", MD_LIST, 403, "Forbidden", "cannot list machinedeployments")
    pools, _ = _pools(fake, tmp_path, clock)
    verdict = pools.check(resize(6, 7), T0)
    assert verdict is not None and verdict.reason.value == "revalidation_failed"
    assert "HTTP 403" in verdict.detail


def test_the_setting_wins_per_pool_over_every_pool(
    fake: FakeKubeAPI, tmp_path: Path, clock: FixedClock
) -> None:
    fake.nodepools = [make_nodepool("train")]
    assert _chosen(fake, tmp_path, clock, "placeholders") == "placeholders"
    assert _chosen(fake, tmp_path, clock, "clusterapi", "train=karpenter") == "karpenter"
    assert _chosen(fake, tmp_path, clock, "placeholders", "train=auto") == "karpenter"
    assert fake.seen("GET", MD_LIST)  # auto asked for a MachineDeployment first


def test_the_run_uses_the_checked_actuator_and_says_which(
    fake: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    pools, state = _pools(fake, tmp_path, clock)
    out = apply_one(pools, state, audit, clock, resize(6, 8))
    assert out.outcome == "done", out
    assert out.report["pool_actuator"] == "placeholders"
    started = next(e for e in audit.read().entries if e["outcome"] == "started")
    assert "placeholders" in started["detail"]


@pytest.mark.parametrize("bad", ["magic", "train=", "=placeholders", "a=b=c"])
def test_bad_settings_are_named(bad: str) -> None:
    with pytest.raises(ValueError, match="pool actuator"):
        parse_pool_actuators([bad])


def test_settings_parse_and_conflicts_are_refused() -> None:
    assert parse_pool_actuators(["placeholders", "gpu-a=karpenter"]) == {
        "*": "placeholders",
        "gpu-a": "karpenter",
    }
    assert parse_pool_actuators([]) == {}
    with pytest.raises(ValueError, match="given twice"):
        parse_pool_actuators(["gpu=karpenter", "gpu=clusterapi"])
