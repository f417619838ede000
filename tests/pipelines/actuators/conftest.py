"""Shared builders for actuator tests: a fake cluster, plans of drains, a test clock."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from predops.core.actions import Action, Drain, Plan
from predops.core.clock import FixedClock
from predops.pipelines.actuators.kube import KubeActuator, KubeApi, KubeOptions, KubeState, connect
from predops.pipelines.workspace.audit import AuditLog
from tests.fakes.kube_api import FakeKubeAPI
from tests.fakes.kube_objects import make_node, write_kubeconfig

T0 = datetime(2026, 5, 2, 12, tzinfo=UTC)


def drain(node: str, **kw: object) -> Drain:
    kw.setdefault("not_before", T0)
    kw.setdefault("expires", T0 + timedelta(hours=2))
    return Drain(target=node, reason=f"test drain of {node}", **kw)  # type: ignore[arg-type]


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
