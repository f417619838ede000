"""What a drained node's capacity costs its pool: priced by the pool's headroom.

A node taken out for an inspection window costs its pool nothing when the pool has an
idle node of the same kind (same GPU model, or the models one demand series of the pool
covers together; CPU pools: any node) beyond what the demand
forecast needs over the window — the work the node would have run goes there; it costs
the scale-up lead when a parked node (room below the pool's ``PoolState.max_nodes``)
can be brought back instead; and it costs its full capacity for the window when the
pool is full. The price is a *share* of the node's capacity value over the window:

- ``idle_node``: 0 — an idle in-service node takes the work at once;
- ``parked_node``: ``CostModel.replacement_lead / inspection_window`` — a parked node
  serves after the scale-up lead;
- neither below ``CostModel.spare_share`` (default 0): the part of a drained node's
  window that bites even in a pool with spare (spare that is used up later, the
  evicted work's restarts);
- ``pool_full``: 1 — nothing replaces it;
- ``unknown``: 1 — no demand forecast of the node's kind covers the window (the
  cautious reading: the engine cannot tell the pool has room).

Demand the window needs, per pool and kind (resource units: GPUs, or cores for a CPU
node): the peak p50 of the forecasts valid in ``[now, now + inspection_window]`` (the
observed demand at ``now`` — placed and queued pods — counts as a forecast valid at
``now``) minus what the pool runs now (pods placed on its nodes of that kind). Spare:
the capacity of the pool's idle nodes of that kind (in the snapshot, schedulable, no
pods, not cordoned or in repair), minus that need, minus the capacity of the drains the
plan already accepted in the pool; parked room is counted in nodes of the candidate's
size. Pure: reads only the snapshot, the fleet state and the forecasts it is given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from predops.allocator.snapshot import ClusterSnapshot
from predops.allocator.topology import GPU_MILLI, NodeSpec
from predops.core.contracts import Forecast
from predops.policy.config import CostModel
from predops.policy.fleet import FleetState
from predops.policy.forecast_window import latest_in_window

Kind = tuple[str, str | None]
"""(pool, GPU models): a GPU model, or the ``+``-joined models one demand series covers
together; CPU nodes have None."""


def size_of(spec: NodeSpec) -> float:
    """A node's capacity in its kind's unit: GPUs, or cores for a CPU node."""
    return float(spec.gpus) if spec.gpus > 0 else spec.cpu_milli / 1000


def series_kind(series_id: str) -> Kind | None:
    """``pool/gpus/<models>`` -> (pool, models); ``pool/cpu_cores`` -> (pool, None)."""
    parts = series_id.split("/")
    if len(parts) == 3 and parts[1] == "gpus":
        return (parts[0], parts[2])
    if len(parts) == 2 and parts[1] == "cpu_cores":
        return (parts[0], None)
    return None


def node_kind(spec: NodeSpec, groups: Mapping[tuple[str, str], str]) -> Kind:
    """A node's kind: its pool and the GPU models its pool's demand series covers
    (``groups``: (pool, model) -> joined models; else its own model); CPU: None."""
    if spec.gpus <= 0 or spec.gpu_model is None:
        return (spec.pool, None)
    return (spec.pool, groups.get((spec.pool, spec.gpu_model), spec.gpu_model))


@dataclass(frozen=True, slots=True)
class CapacityPrice:
    """The share of a drained node's capacity over the inspection window that the
    drain costs (0..1), why, and the numbers (resource units of the node's kind)."""

    share: float
    basis: str
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"share": round(self.share, 4), "basis": self.basis, **self.evidence}


FULL_PRICE = CapacityPrice(1.0, "unknown", {"why": "pool headroom not assessed"})
FLAT_PRICE = CapacityPrice(1.0, "flat", {"why": "CostModel.price_by_headroom is off"})


@dataclass(frozen=True)
class PoolHeadroom:
    """Idle capacity, parked room and forecast need per pool and kind at plan time;
    :meth:`price` answers for one node given what the plan already took."""

    idle: Mapping[Kind, float]
    need: Mapping[Kind, float]
    parked_nodes: Mapping[str, int]
    window: timedelta
    lead_share: float
    groups: Mapping[tuple[str, str], str] = field(default_factory=dict)
    """(pool, GPU model) -> the ``+``-joined models of the series that covers it."""
    spare_share: float = 0.0
    """The least share a drain costs, spare or not (``CostModel.spare_share``)."""

    def kind(self, spec: NodeSpec) -> Kind:
        return node_kind(spec, self.groups)

    @classmethod
    def assess(
        cls,
        snapshot: ClusterSnapshot,
        fleet: FleetState,
        forecasts: Sequence[Forecast],
        now: datetime,
        costs: CostModel,
    ) -> PoolHeadroom:
        window = costs.inspection_window
        groups: dict[tuple[str, str], str] = {}
        for f in forecasts:
            sk = series_kind(f.series_id)
            if sk is not None and sk[1] is not None:
                groups.update({(sk[0], m): sk[1] for m in sk[1].split("+")})
        idle: dict[Kind, float] = {}
        placed: dict[Kind, float] = {}
        held: dict[str, int] = {}
        sched = snapshot.schedulable
        for spec in fleet.topology.nodes:
            held[spec.pool] = held.get(spec.pool, 0) + 1
            try:
                i = snapshot.index_of(spec.node_id)
            except KeyError:
                continue
            k = node_kind(spec, groups)
            st = fleet.nodes.get(spec.node_id)
            out = st is not None and st.disrupted
            if not snapshot.pods_on[i] and bool(sched[i]) and not out:
                idle[k] = idle.get(k, 0.0) + size_of(spec)
            for pod_id in snapshot.pods_on[i]:
                pod = snapshot.placements[pod_id].pod
                use = pod.total_gpu_milli / GPU_MILLI if spec.gpus > 0 else pod.cpu_milli / 1000
                placed[k] = placed.get(k, 0.0) + use
        peak: dict[Kind, float] = {}
        latest = latest_in_window(
            forecasts, now, now + window, lambda s: series_kind(s) is not None
        )
        for (series, _), f in latest.items():
            sk = series_kind(series)
            assert sk is not None
            peak[sk] = max(peak.get(sk, 0.0), f.p50)
        need = {k: max(0.0, p - placed.get(k, 0.0)) for k, p in peak.items()}
        parked = {
            pool: max(0, st.max_nodes - held.get(pool, 0))
            for pool, st in fleet.pools.items()
            if st.max_nodes is not None
        }
        lead = min(1.0, costs.replacement_lead / window) if window > timedelta(0) else 0.0
        return cls(idle, need, parked, window, lead, groups, costs.spare_share)

    def price(self, spec: NodeSpec, taken: Mapping[Kind, float]) -> CapacityPrice:
        """The capacity share a drain of ``spec`` costs, after the drains already
        accepted in this plan took ``taken`` (capacity per kind) of the spare."""
        k = self.kind(spec)
        size = size_of(spec)
        if k not in self.need:
            return CapacityPrice(
                1.0, "unknown", {"why": f"no demand forecast of {k[0]}/{k[1] or 'cpu'} in window"}
            )
        spare = self.idle.get(k, 0.0) - self.need[k] - taken.get(k, 0.0)
        parked = self.parked_nodes.get(spec.pool, 0)
        ev = {
            "window_h": self.window / timedelta(hours=1),
            "idle_capacity": round(self.idle.get(k, 0.0), 3),
            "forecast_need": round(self.need[k], 3),
            "taken_by_earlier_drains": round(taken.get(k, 0.0), 3),
            "parked_nodes": parked,
            "node_capacity": size,
        }
        if spare >= size:
            return CapacityPrice(self.spare_share, "idle_node", ev)
        if spare + parked * size >= size:
            return CapacityPrice(max(self.lead_share, self.spare_share), "parked_node", ev)
        return CapacityPrice(1.0, "pool_full", ev)
