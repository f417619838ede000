"""Shared builders for actuator tests: a fake cluster, plans of drains, a test clock,
and what RBAC a request needs against what the deployed role grants."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

from predops.core.actions import Action, Drain, Plan, ResizePool
from predops.core.clock import FixedClock
from predops.pipelines.actuators.apply import (
    ActionOutcome,
    Actuator,
    ApplyReport,
    StateSource,
    apply_plan,
)
from predops.pipelines.actuators.kube import KubeActuator, KubeApi, KubeOptions, KubeState, connect
from predops.pipelines.workspace.audit import AuditLog
from tests.fakes.kube_api import FakeKubeAPI
from tests.fakes.kube_objects import make_node, write_kubeconfig

T0 = datetime(2026, 5, 2, 12, tzinfo=UTC)


def drain(node: str, **kw: object) -> Drain:
    kw.setdefault("not_before", T0)
    kw.setdefault("expires", T0 + timedelta(hours=2))
    return Drain(target=node, reason=f"test drain of {node}", **kw)  # type: ignore[arg-type]


def resize(
    from_nodes: int, to_nodes: int, order: list[str] | None = None, pool: str = "train"
) -> ResizePool:
    """A resize of ``pool`` due at T0; ``order``: the plan's scale-in order."""
    evidence = {"scale_in_order": order} if order is not None else {}
    return ResizePool(
        target=pool,
        reason="test resize",
        from_nodes=from_nodes,
        to_nodes=to_nodes,
        evidence=evidence,
        not_before=T0,
        expires=T0 + timedelta(hours=1),
    )


def plan_of(actions: Sequence[Action], plan_id: str = "plan-test") -> Plan:
    return Plan(plan_id=plan_id, created_at=T0, data_cutoff=T0, actions=tuple(actions))


def cluster_nodes(racks: int = 3, per_rack: int = 2, pool: str = "train") -> list[dict]:
    """GPU nodes ``n<r><i>`` in racks ``r<r>`` of one spine and one pool."""
    return [
        make_node(f"n{r}{i}", gpus=8, rack=f"r{r}", spine="s1", pool=pool)
        for r in range(racks)
        for i in range(per_rack)
    ]


class Sleeper:
    """``sleep`` that advances the test clock instead of waiting; hooks run per call."""

    def __init__(self, clock: FixedClock) -> None:
        self.clock = clock
        self.waits: list[float] = []
        self.hooks: list = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.clock.advance(timedelta(seconds=seconds))
        for hook in self.hooks:
            hook(len(self.waits))


@pytest.fixture
def fake() -> Iterator[FakeKubeAPI]:
    with FakeKubeAPI(nodes=cluster_nodes()) as api:
        yield api


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(T0)


@pytest.fixture
def audit(tmp_path: Path) -> AuditLog:
    return AuditLog(tmp_path / "audit.jsonl", who="tester")


def kube_for(fake: FakeKubeAPI, tmp_path: Path, clock: FixedClock, **opt: object):
    """(api, actuator, state, sleeper) against ``fake``."""
    cfg = write_kubeconfig(tmp_path / "kubeconfig", fake.url)
    options = KubeOptions(**opt)  # type: ignore[arg-type]
    api: KubeApi = connect(str(cfg), None, options)
    sleeper = Sleeper(clock)
    return api, KubeActuator(api, clock, sleeper), KubeState(api, clock), sleeper


def deployed_grants() -> set[tuple[str, str, str]]:
    """(API group, resource, verb) the ClusterRole of the applying component (``predops
    apply`` Jobs, ``deploy/k8s/base/rbac.yaml``) grants."""
    from tests.deploy.k8s import deployed_role, grants

    return grants(deployed_role("predops-apply"))


def rbac_needs(method: str, path: str) -> tuple[str, str, str]:
    """(API group, resource[/subresource], verb) of one request, as RBAC sees it."""
    parts = path.strip("/").split("/")
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    if rest[:1] == ["namespaces"] and len(rest) > 2:
        rest = rest[2:]
    resource = rest[0] + (f"/{rest[2]}" if len(rest) > 2 else "")
    verb = {"GET": "get" if len(rest) > 1 else "list", "PATCH": "patch", "POST": "create"}
    return group, resource, verb[method]


def apply_resize(
    resizer: Actuator,
    state: StateSource,
    audit: AuditLog,
    clock: FixedClock,
    action: Action,
    execute: bool = True,
) -> ApplyReport:
    """``action`` applied alone, ``resizer`` its ``resize_pool`` actuator."""
    return apply_plan(
        plan_of([action]),
        state=state,
        actuators={"resize_pool": resizer},
        audit=audit,
        clock=clock,
        execute=execute,
    )


def apply_one(*args: Any, **kw: Any) -> ActionOutcome:
    """What became of the one action :func:`apply_resize` applied (same arguments)."""
    (out,) = apply_resize(*args, **kw).outcomes
    return out


def assert_role_grants(fake: FakeKubeAPI, needed: set[tuple[str, str, str]]) -> None:
    """``fake`` saw calls needing at least ``needed``, and the deployed role grants all
    the calls it saw."""
    made = {rbac_needs(r.method, r.path) for r in fake.requests}
    assert needed <= made, needed - made
    assert made <= deployed_grants(), made - deployed_grants()


def cli_apply(
    fake: FakeKubeAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, plan: Plan
) -> Callable[..., Result]:
    """``predops apply`` of ``plan`` (written to a fresh workspace and approved, as
    ``--execute`` requires) against ``fake`` at T0 with ``--json``: call with extra
    arguments (``"--execute"``) to run it."""
    from click.testing import CliRunner

    from predops.pipelines.cli.main import main
    from predops.pipelines.workspace.plans import write_plan
    from predops.pipelines.workspace.settings import load_settings

    monkeypatch.setenv("PREDOPS_OPERATOR", "actuator-test")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    ws = tmp_path / "ws"
    write_plan(load_settings(ws).plans_dir, plan)
    approved = CliRunner().invoke(main, ["--workspace", str(ws), "approve", plan.plan_id])
    assert approved.exit_code == 0, approved.output
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", fake.url)
    args = ["--workspace", str(ws), "apply", plan.plan_id, "--kubeconfig", str(kubeconfig)]
    args += ["--at", T0.isoformat(), "--json"]
    return lambda *extra: CliRunner().invoke(main, [*args, *extra])


def apply_by(
    actuator: Actuator,
    state: StateSource,
    audit: AuditLog,
    clock: FixedClock,
    action: Action,
    plan_id: str,
    execute: bool = True,
) -> ActionOutcome:
    """What became of ``action`` applied alone by ``actuator`` (for its kind)."""
    (out,) = apply_plan(
        plan_of([action], plan_id),
        state=state,
        actuators={action.kind: actuator},
        audit=audit,
        clock=clock,
        execute=execute,
    ).outcomes
    return out
