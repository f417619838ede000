"""Karpenter NodePool resizes against the local fake API server: limits from the pool's
largest node, their order with the placeholders, scale-in behaviour, refusals, resume."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from predops.core.clock import FixedClock
from predops.pipelines.actuators.clusterapi import RESIZE_KEY_ANNOTATION
from predops.pipelines.actuators.karpenter import (
    KarpenterApi,
    NodePoolResizer,
    limits_for,
    quantity,
)
from predops.pipelines.actuators.placeholders import PlaceholderApi, PlaceholderResizer
from predops.pipelines.workspace.audit import AuditLog
from tests.fakes.kube_api import FakeKubeAPI
from tests.fakes.kube_objects import make_nodepool, make_pod
from tests.pipelines.actuators.conftest import apply_one, assert_role_grants, kube_for, resize

NODEPOOL = "/apis/karpenter.sh/v1/nodepools/train"
DEPLOYMENTS = "/apis/apps/v1/namespaces/predops/deployments"


@pytest.fixture
def karpenter(fake: FakeKubeAPI) -> FakeKubeAPI:
    """The conftest pool ``train`` as a NodePool, work on n00 and n01."""
    fake.nodepools = [
        make_nodepool(
            "train", limits={"cpu": "1000", "memory": "8Ti", "ephemeral-storage": "100Ti"}
        ),
        make_nodepool("serve"),
    ]
    fake.pods = [make_pod("train-0", node="n00"), make_pod("train-1", node="n01")]
    return fake


def _resizer(fake: FakeKubeAPI, tmp_path: Path, clock: FixedClock):
    api, _, state, sleeper = kube_for(fake, tmp_path, clock)
    placeholders = PlaceholderResizer(PlaceholderApi(api), clock, sleeper)
    return NodePoolResizer(KarpenterApi(api), placeholders, clock, sleeper), state


def _nodepool(fake: FakeKubeAPI, name: str = "train") -> dict:
    return next(n for n in fake.nodepools if n["metadata"]["name"] == name)


def _writes(fake: FakeKubeAPI) -> list[tuple[str, str]]:
    return [(r.method, r.path) for r in fake.requests if r.method in ("POST", "PATCH")]


def test_scale_up_raises_the_limits_then_sets_the_placeholders(
    karpenter: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    resizer, state = _resizer(karpenter, tmp_path, clock)
    action = resize(6, 9)
    out = apply_one(resizer, state, audit, clock, action)
    assert out.outcome == "done", out
    spec = _nodepool(karpenter)["spec"]
    # 9 nodes of 64 cores, 512 GiB and 8 GPUs; the limit Karpenter had on disk is kept
    assert spec["limits"] == {
        "cpu": "576",
        "memory": "4608Gi",
        "nvidia.com/gpu": "72",
        "ephemeral-storage": "100Ti",
    }
    notes = _nodepool(karpenter)["metadata"]["annotations"]
    assert notes[RESIZE_KEY_ANNOTATION] == action.idempotency_key
    assert _nodepool(karpenter, "serve")["spec"].get("limits") is None
    assert out.report["placeholders"]["replicas"] == 7
    writes = _writes(karpenter)
    assert writes[0] == ("PATCH", NODEPOOL) and ("POST", DEPLOYMENTS) in writes[1:]
    (patch,) = [r for r in karpenter.requests if r.path == NODEPOOL and r.method == "PATCH"]
    assert patch.headers["content-type"].startswith("application/merge-patch+json")


def test_scale_in_lowers_the_placeholders_before_the_limit_and_says_who_removes_nodes(
    karpenter: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    resizer, state = _resizer(karpenter, tmp_path, clock)
    assert apply_one(resizer, state, audit, clock, resize(6, 9)).outcome == "done"
    before = len(_writes(karpenter))
    out = apply_one(resizer, state, audit, clock, resize(6, 3))
    assert out.outcome == "done", out
    assert _writes(karpenter)[before:] == [
        ("PATCH", f"{DEPLOYMENTS}/predops-placeholders-train"),
        ("PATCH", NODEPOOL),
    ]
    assert _nodepool(karpenter)["spec"]["limits"]["cpu"] == "192"
    assert out.report["placeholders"]["replicas"] == 1
    assert "consolidation finds them empty" in out.report["consolidation"]
    _nodepool(karpenter)["spec"]["disruption"]["consolidateAfter"] = "Never"
    again = apply_one(resizer, state, audit, clock, resize(6, 2))
    assert again.report["consolidation"].startswith("Never")


def test_an_interrupted_resize_resumes_without_patching_twice(
    karpenter: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    resizer, state = _resizer(karpenter, tmp_path, clock)
    action = resize(6, 8)
    resizer.run(action, "plan-test")  # ran, the process died before "done"
    writes = len(_writes(karpenter))
    out = apply_one(resizer, state, audit, clock, action)
    assert out.outcome == "done"
    assert out.report["limits_action"] == "already set under this key"
    assert len(_writes(karpenter)) == writes


def test_pool_changed_is_the_placeholders_check(
    karpenter: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    resizer, state = _resizer(karpenter, tmp_path, clock)
    for execute in (False, True):
        out = apply_one(resizer, state, audit, clock, resize(4, 8), execute)
        assert (out.outcome, out.reason) == ("dropped", "pool_changed")
    assert _writes(karpenter) == []


@pytest.mark.parametrize(
    ("nodepools", "why"),
    [
        ([], "none"),
        ([make_nodepool("train"), make_nodepool("gpu", labels={"predops.io/pool": "train"})], "2"),
        ([make_nodepool("train", replicas=6)], "static"),
    ],
)
def test_no_single_dynamic_nodepool_is_refused(
    karpenter: FakeKubeAPI,
    tmp_path: Path,
    clock: FixedClock,
    audit: AuditLog,
    nodepools: list,
    why: str,
) -> None:
    karpenter.nodepools = nodepools
    resizer, state = _resizer(karpenter, tmp_path, clock)
    out = apply_one(resizer, state, audit, clock, resize(6, 8))
    assert (out.outcome, out.reason) == ("dropped", "revalidation_failed")
    assert why in out.detail and _writes(karpenter) == []


def test_dry_run_previews_the_limits_and_the_placeholders(
    karpenter: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    resizer, state = _resizer(karpenter, tmp_path, clock)
    action = resize(6, 7)
    assert apply_one(resizer, state, audit, clock, action, execute=False).outcome == "would_run"
    preview = resizer.preview(action)
    assert preview["would"]["nodepool_patch"]["spec"]["limits"]["nvidia.com/gpu"] == "56"
    assert preview["placeholders"]["replicas"] == 5
    assert _writes(karpenter) == []


def test_limit_quantities() -> None:
    assert quantity(Decimal("96"), "cpu") == "96" and quantity(Decimal("95.5"), "cpu") == "95500m"
    assert quantity(Decimal(3 << 30), "memory") == "3Gi"
    assert quantity(Decimal(3 << 20), "memory") == "3Mi" and quantity(Decimal(1000), "memory")
    cpu_only = limits_for(3, {"cpu": Decimal(16), "memory": Decimal(64 << 30)})
    assert cpu_only == {"cpu": "48", "memory": "192Gi"}


def test_the_deployed_role_grants_every_call_a_nodepool_resize_makes(
    karpenter: FakeKubeAPI, tmp_path: Path, clock: FixedClock, audit: AuditLog
) -> None:
    resizer, state = _resizer(karpenter, tmp_path, clock)
    for action in (resize(6, 9), resize(6, 4)):
        assert apply_one(resizer, state, audit, clock, action).outcome == "done"
    assert_role_grants(
        karpenter, {("karpenter.sh", "nodepools", "list"), ("karpenter.sh", "nodepools", "patch")}
    )
