"""What an unplanned failure of a node costs against what draining it costs.

A failure interrupts every job with a pod on the node — for a gang, the whole gang on
every node it spans, since one lost member stops the job — and each interrupted job
loses the work since its last checkpoint, the time until the failure is noticed and the
job torn down, and a restart. A drain restarts the same jobs (losing no work when it
waits for their checkpoint, else the same work since the last one) and takes the node
out for an inspection window — a cost only when the node was healthy, so it counts
with weight ``1 - p_fail`` (a failing node is out for repair either way), and only as
far as the pool cannot replace the node (:mod:`policy.headroom`: the capacity share,
0 with an idle node spare, the scale-up lead with a parked one, 1 in a full pool). Drain when
``p_fail x failure cost`` exceeds ``margin x drain cost``. All figures are in cost
units (see :mod:`policy.config`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from predops.allocator.requests import PodRequest
from predops.allocator.topology import GPU_MILLI, NodeSpec
from predops.policy.config import CostModel
from predops.policy.fleet import NodeState
from predops.policy.headroom import FULL_PRICE, CapacityPrice

HOUR = timedelta(hours=1)


def pod_hourly(pod: PodRequest, costs: CostModel) -> float:
    """Cost units per hour of the resources ``pod`` holds."""
    return costs.hourly(pod.total_gpu_milli / GPU_MILLI, pod.cpu_milli / 1000)


@dataclass(frozen=True, slots=True)
class NodeEconomics:
    """The two sides of the drain decision for one node (cost units, hours)."""

    failure_cost: float
    drain_cost: float
    p_fail: float
    jobs: int
    pods_interrupted: int
    gpu_hours_at_risk: float
    lost_work_h: float
    drain_lost_work_h: float
    inspection_cost: float
    migration_cost: float
    not_before: datetime
    capacity: CapacityPrice = FULL_PRICE

    @property
    def expected_benefit(self) -> float:
        return self.p_fail * self.failure_cost

    @property
    def break_even_p(self) -> float:
        """The p_fail above which draining pays (1.0 when a failure costs nothing)."""
        return 1.0 if self.failure_cost <= 0 else min(1.0, self.drain_cost / self.failure_cost)

    def to_dict(self) -> dict[str, Any]:
        return {
            "p_fail": self.p_fail,
            "failure_cost": round(self.failure_cost, 4),
            "drain_cost": round(self.drain_cost, 4),
            "expected_benefit": round(self.expected_benefit, 4),
            "break_even_p": round(self.break_even_p, 4),
            "jobs_interrupted_by_failure": self.jobs,
            "pods_interrupted_by_failure": self.pods_interrupted,
            "gpu_hours_at_risk": round(self.gpu_hours_at_risk, 4),
            "expected_lost_work_h": round(self.lost_work_h, 4),
            "drain_lost_work_h": round(self.drain_lost_work_h, 4),
            "inspection_cost": round(self.inspection_cost, 4),
            "migration_cost": round(self.migration_cost, 4),
            "capacity_share": round(self.capacity.share, 4),
            "capacity": self.capacity.to_dict(),
        }


def jobs_on(
    pods: Sequence[PodRequest], gang_members: Mapping[str, Sequence[PodRequest]]
) -> list[tuple[PodRequest, ...]]:
    """The jobs a failure of the node running ``pods`` interrupts: each single pod, and
    every gang with a member here (all its members, on any node), in a stable order."""
    jobs: list[tuple[PodRequest, ...]] = []
    seen: set[str] = set()
    for p in sorted(pods, key=lambda p: p.pod_id):
        if p.gang_id is None:
            jobs.append((p,))
        elif p.gang_id not in seen:
            seen.add(p.gang_id)
            jobs.append(tuple(gang_members.get(p.gang_id, (p,))))
    return jobs


def lost_work(state: NodeState, now: datetime, costs: CostModel) -> timedelta:
    """Work a failure at a random moment destroys per job: half a checkpoint period on
    average; when only the last checkpoint is known, the work since then."""
    if state.checkpoint_interval:
        return state.checkpoint_interval / 2
    if state.last_checkpoint_at is not None and state.last_checkpoint_at <= now:
        return now - state.last_checkpoint_at
    return costs.checkpoint_interval / 2


def break_even_floor(state: NodeState, now: datetime, costs: CostModel, margin: float) -> float:
    """A p_fail at or below which no drain of a node in ``state`` can pay, whatever it
    runs: every job costs a failure ``rate x (lost + detection + restart)`` and a drain
    at least ``rate x restart``, so a drain needs
    ``p > margin x restart / (lost + detection + restart)``. Lets a planner skip the
    full economics of the many nodes far below the threshold."""
    restart = costs.restart_overhead / HOUR
    whole = lost_work(state, now, costs) / HOUR + costs.detection_delay / HOUR + restart
    return margin * restart / whole if whole > 0 else 0.0


def node_economics(
    spec: NodeSpec,
    pods: Sequence[PodRequest],
    gang_members: Mapping[str, Sequence[PodRequest]],
    state: NodeState,
    p_fail: float,
    now: datetime,
    costs: CostModel,
    max_checkpoint_wait: timedelta,
    capacity: CapacityPrice = FULL_PRICE,
) -> NodeEconomics:
    """Failure and drain cost of ``spec`` running ``pods`` now; ``capacity`` prices the
    inspection window's lost capacity (default: in full)."""
    lost_h = lost_work(state, now, costs) / HOUR
    restart_h = costs.restart_overhead / HOUR
    detect_h = costs.detection_delay / HOUR
    nxt = state.next_checkpoint(now)
    timed = nxt is not None and nxt - now <= max_checkpoint_wait
    not_before = nxt if timed and nxt is not None else now
    drain_lost_h = 0.0 if timed else lost_h

    jobs = jobs_on(pods, gang_members)
    rate = [sum(pod_hourly(p, costs) for p in job) for job in jobs]
    failure = sum(r * (lost_h + detect_h + restart_h) for r in rate)
    migration = sum(r * (drain_lost_h + restart_h) for r in rate)
    inspection = inspection_cost(spec, p_fail, costs, capacity.share)
    gpus = sum(p.total_gpu_milli / GPU_MILLI for job in jobs for p in job)
    gpu_h = gpus * (lost_h + detect_h + restart_h)
    return NodeEconomics(
        failure_cost=failure,
        drain_cost=inspection + migration,
        p_fail=p_fail,
        jobs=len(jobs),
        pods_interrupted=sum(len(j) for j in jobs),
        gpu_hours_at_risk=gpu_h,
        lost_work_h=lost_h,
        drain_lost_work_h=drain_lost_h,
        inspection_cost=inspection,
        migration_cost=migration,
        not_before=not_before,
        capacity=capacity,
    )


def inspection_cost(spec: NodeSpec, p_fail: float, costs: CostModel, share: float) -> float:
    """Cost units of the inspection window of a healthy node (weight ``1 - p_fail``):
    its capacity value over the window x ``capacity_value`` x the ``share`` its pool
    cannot replace."""
    return (
        (1.0 - p_fail)
        * costs.hourly(spec.gpus, spec.cpu_milli / 1000)
        * (costs.inspection_window / HOUR)
        * costs.capacity_value
        * share
    )
