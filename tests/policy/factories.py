"""Builders for policy tests: risks, node states, fleets and busy snapshots."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from predops.allocator.snapshot import ClusterSnapshot
from predops.allocator.topology import NodeSpec, Topology
from predops.core.clock import FixedClock
from predops.core.contracts import FailureRisk, Forecast, Provenance, Reason
from predops.policy.fleet import FleetState, NodeState, PdbState, PoolState, StockPosition
from tests.allocator.factories import make_allocator, make_node, make_pod

T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)
H = timedelta(hours=1)


def prov(cutoff: datetime = T0 - H, name: str = "node_failure") -> Provenance:
    return Provenance(name, "7", "fs-policy", cutoff, run_id="run-1")


def make_risk(
    node_id: str,
    p: float,
    *,
    as_of: datetime = T0,
    horizon: timedelta = timedelta(hours=24),
    provenance: Provenance | str | None = "default",
) -> FailureRisk:
    pv = prov() if provenance == "default" else provenance
    assert not isinstance(pv, str)
    reasons = (
        Reason("ecc_dbe_total__delta_6h", 0.9, "2 new double-bit ECC errors"),
        Reason("gpu_temp_c__rack_dev_6h", 0.4, "GPU 8 C above the rack"),
        Reason("xid_errors_total__delta_6h", 0.2, "XID 79"),
        Reason("node_age_days", -0.1, "young node"),
    )
    return FailureRisk(node_id, as_of, horizon, p, reasons, pv)


def make_state(node_id: str, **kw: object) -> NodeState:
    kw.setdefault("observed_at", T0)
    return NodeState(node_id=node_id, **kw)  # type: ignore[arg-type]


def pool_node(
    node_id: str, pool: str = "train", rack: str = "r1", spine: str = "s1", gpus: int = 8
) -> NodeSpec:
    return replace(
        make_node(gpus, node_id=node_id, rack=rack, spine=spine, sku=f"sku-{gpus}g"), pool=pool
    )


def rack_nodes(
    pool: str, racks: int, per_rack: int, spines: int = 1, gpus: int = 8
) -> list[NodeSpec]:
    """``racks`` racks of ``per_rack`` nodes, racks spread round-robin over spines."""
    return [
        pool_node(f"{pool}-r{r}-n{i}", pool, f"r{r}", f"s{r % spines}", gpus)
        for r in range(racks)
        for i in range(per_rack)
    ]


def make_fleet(
    nodes: Sequence[NodeSpec],
    states: Mapping[str, NodeState] | None = None,
    *,
    pdbs: Mapping[str, PdbState] | None = None,
    pdb_pods: Mapping[str, Mapping[str, int]] | None = None,
    pools: Mapping[str, PoolState] | None = None,
    stock: Iterable[StockPosition] = (),
    observed_at: datetime = T0,
) -> FleetState:
    st = {n.node_id: make_state(n.node_id) for n in nodes}
    st.update(states or {})
    return FleetState(
        Topology.of(nodes),
        observed_at,
        st,
        dict(pdbs or {}),
        dict(pdb_pods or {}),
        dict(pools or {}),
        tuple(stock),
    )


def busy_snapshot(
    nodes: Sequence[NodeSpec], gpus_per_node: Mapping[str, int] | int = 4
) -> ClusterSnapshot:
    """A snapshot of ``nodes`` with one pod of ``gpus`` whole GPUs on each listed node."""
    snap = ClusterSnapshot(list(nodes))
    alloc = make_allocator(snap)
    per = (
        {n.node_id: gpus_per_node for n in nodes}
        if isinstance(gpus_per_node, int)
        else dict(gpus_per_node)
    )
    import numpy as np

    for node_id, g in sorted(per.items()):
        if g:
            d = alloc.place(
                make_pod(f"pod-{node_id}", gpus=g, cpu=4000),
                rows=np.array([snap.index_of(node_id)]),
            )
            assert d.placed, d
    return snap


def clock(at: datetime = T0) -> FixedClock:
    return FixedClock(at)


def forecast(
    series_id: str,
    valid_at: datetime,
    p50: float,
    *,
    spread: float = 0.1,
    issued_at: datetime = T0,
    provenance: Provenance | str | None = "default",
) -> Forecast:
    pv = prov(name="demand") if provenance == "default" else provenance
    assert not isinstance(pv, str)
    return Forecast(
        series_id,
        issued_at,
        valid_at,
        p50 * (1 - spread),
        p50,
        p50 * (1 + spread),
        provenance=pv,
    )
