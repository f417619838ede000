"""The fleet as the lake knows it at a time: what ``predops plan`` plans on and what a
dry-run ``predops apply`` re-validates against.

From the lake, everything as of ``now`` (nothing later is read):

- **topology**: each node's latest ``inventory`` row;
- **node state** from ``events`` in time order: ``cordon`` / ``drain`` cordon the node
  (the owner is the event's ``cause``, e.g. ``predops``; null means unknown),
  ``uncordon`` ends it; ``failure`` and ``maintenance_start`` put the node out of service
  (under repair) until ``repair`` / ``maintenance_end``. ``observed_at`` is the node's
  latest telemetry sample (else its inventory time): the state is known to be current
  up to there. The lake holds no do-not-disrupt labels or checkpoint schedules: those
  stay false / unknown (the live Kubernetes state has the labels);
- **PDBs** from the ``pdbs`` table when present (the lake's pods carry no labels, so
  which pods a PDB covers is not known here; the Eviction API enforces PDBs at run time);
- **snapshot**: the allocator's cluster with every pod running at ``now`` (scheduled,
  not yet deleted) placed on its node (:mod:`predops.pipelines.workspace.pod_snapshot`);
  pods that no longer fit their node (bad data) are counted, not placed;
- **stock** (for inventory buys) when the lake has a ``stock`` table: one
  :class:`~policy.fleet.StockPosition` per SKU and region from its latest ``stock`` row
  at or before ``now``. The inventory's ``sku`` and ``region`` columns say which nodes
  are that SKU: ``in_use`` counts its nodes in service (not under repair; cordoned
  nodes count, they are still the fleet's), ``in_repair`` those under repair.
  ``on_order`` holds the orders whose latest ``purchase_orders`` row at or before
  ``now`` is ``open``, as (nodes, expected_at); an open order past its expected date is
  late, not lost, and still counts (noted as overdue). Costs left null take documented
  defaults (:func:`default_costs`). A row whose ``demand_series`` is not in nodes
  (``demand_scale`` != 1) is bought against ``<region>/<sku>/nodes``, which
  :func:`policy.demand_nodes.node_demand_forecasts` derives from that series'
  forecasts.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from predops.allocator.snapshot import ClusterSnapshot
from predops.allocator.topology import NodeSpec, Topology
from predops.core.schemas import INVENTORY, PURCHASE_ORDERS
from predops.pipelines.workspace import snapshot_cache as cached_snapshot
from predops.pipelines.workspace.lake import Lake
from predops.pipelines.workspace.pod_snapshot import running_pods, snapshot_of, update_snapshot
from predops.policy.config import BuyConfig, CostModel
from predops.policy.demand_nodes import DemandInNodes
from predops.policy.fleet import FleetState, NodeState, PdbState, StockPosition, pdbs_from_frame

OUT_OF_SERVICE = {"failure": True, "maintenance_start": True, "repair": False}
BACK_IN_SERVICE = {"maintenance_end"}
HOUR = timedelta(hours=1)
IDLE_SHARE = 0.25
"""Default idle cost of a node as a share of its shortage cost (critical ratio 0.8).
An assumption: a server bought and not needed costs its owner depreciation, power and
space, about a quarter of what its capacity is worth to the work that would use it."""


@dataclass
class LakeFleet:
    """The fleet at ``now``, the snapshot of running pods, and notes on what was read."""

    fleet: FleetState
    snapshot: ClusterSnapshot
    notes: dict[str, Any] = field(default_factory=dict)
    demand_in_nodes: tuple[DemandInNodes, ...] = ()
    """Stock positions whose demand is read off a series in other units."""
    snapshot_token: str | None = None
    """Names the snapshot kept between calls (``snapshot_cache``; None: none kept)."""
    lent: tuple[Path, Any] | None = None
    """The snapshot is the one this process keeps for that file
    (:mod:`predops.pipelines.workspace.snapshot_cache`): change it only on a fork and
    revert, then :meth:`give_back`."""

    def give_back(self) -> None:
        """Done with a lent snapshot (reverted to how it came): the next plan may have
        it. Nothing when it was not lent."""
        if self.lent is not None:
            cached_snapshot.give_back(*self.lent)


def _has(lake: Lake, table: str) -> bool:
    return bool(lake.files(table))


def latest_as_of(lake: Lake, table: str, now: datetime, *keys: str) -> pl.LazyFrame:
    """Each key's latest row of ``table`` at or before ``now``, sorted by the keys."""
    return (
        lake.scan(table).filter(pl.col("ts") <= now).sort("ts").group_by(*keys).last().sort(*keys)
    )


def topology_at(lake: Lake, now: datetime) -> tuple[Topology, datetime]:
    """Latest inventory row per node at or before ``now``, and the newest row's time."""
    if not _has(lake, "inventory"):
        raise ValueError("the lake has no inventory; run `predops simulate` or ingest one")
    inv = latest_as_of(lake, "inventory", now, "node_id").collect()
    if inv.height == 0:
        raise ValueError(f"the lake's inventory has no row at or before {now.isoformat()}")
    return Topology.from_inventory(inv.select(INVENTORY.names)), inv["ts"].max()  # type: ignore[return-value]


def latest_per_node(lake: Lake, now: datetime) -> pl.DataFrame:
    """``node_id``, ``ts``: each node's latest telemetry time at or before ``now``, by
    node id (reads the whole telemetry table's two columns)."""
    return (
        lake.scan("telemetry")
        .select("node_id", "ts")
        .filter(pl.col("ts") <= now)
        .group_by("node_id")
        .agg(pl.col("ts").max())
        .sort("node_id")
        .collect()
    )


def _last_seen(lake: Lake, now: datetime) -> dict[str, datetime]:
    if not _has(lake, "telemetry"):
        return {}
    seen = latest_per_node(lake, now)
    return dict(zip(seen["node_id"].to_list(), seen["ts"].to_list(), strict=True))


def node_states(
    lake: Lake,
    topology: Topology,
    inventory_at: datetime,
    now: datetime,
    seen: dict[str, datetime] | None = None,
) -> dict[str, NodeState]:
    """:class:`NodeState` per inventory node from events up to ``now``; ``seen`` is each
    node's latest telemetry time at or before ``now`` when the caller keeps it (read
    from the lake otherwise)."""
    seen = _last_seen(lake, now) if seen is None else seen
    acc: dict[str, dict[str, Any]] = {
        n.node_id: {"observed_at": seen.get(n.node_id, inventory_at)} for n in topology.nodes
    }
    if _has(lake, "events"):
        ev = (
            lake.scan("events")
            .filter(pl.col("at") <= now)
            .select("node_id", "kind", "at", "cause")
            .sort("at", "node_id", "kind")
            .collect()
        )
        for node_id, kind, at, cause in ev.iter_rows():
            st = acc.get(node_id)
            if st is None:
                continue  # an event of a node the inventory no longer has
            if kind in ("cordon", "drain"):
                if not st.get("cordoned"):
                    st["cordoned_at"] = at
                st.update(cordoned=True, cordon_owner=cause)
            elif kind == "uncordon":
                st.update(cordoned=False, cordon_owner=None, uncordoned_at=at)
            elif kind in OUT_OF_SERVICE:
                st["under_repair"] = OUT_OF_SERVICE[kind]
                if kind == "repair":
                    st["repaired_at"] = at
            elif kind in BACK_IN_SERVICE:
                st["under_repair"] = False
    for node_id, fault in _inspection_faults(lake, now).items():
        if node_id in acc:
            acc[node_id]["inspection_fault"] = fault
    return {n: NodeState(node_id=n, **kw) for n, kw in acc.items()}


def _inspection_faults(lake: Lake, now: datetime) -> dict[str, bool]:
    """Per node, what the inspection of its latest drain or cordon (at or before
    ``now``) found, as last recorded by ``now``: True a fault, False none; nodes whose
    latest drain has no verdict (``unknown``, or nothing recorded) are left out. What
    slow-start pacing reads as a confirmed (or refuted) alarm."""
    if not _has(lake, "inspections"):
        return {}
    rec = (
        lake.scan("inspections")
        .filter((pl.col("drained_at") <= now) & (pl.col("recorded_at") <= now))
        .select("node_id", "drained_at", "recorded_at", "outcome")
        .collect()
    )
    if rec.height == 0:
        return {}
    last_drain = rec.group_by("node_id").agg(pl.col("drained_at").max())
    latest = (
        rec.join(last_drain, on=["node_id", "drained_at"])
        .sort("node_id", "recorded_at", "outcome")
        .group_by("node_id", maintain_order=True)
        .last()
        .filter(pl.col("outcome") != "unknown")
    )
    return {
        n: o == "fault_found"
        for n, o in zip(latest["node_id"].to_list(), latest["outcome"].to_list(), strict=True)
    }


def fleet_from_lake(
    lake: Lake,
    now: datetime,
    *,
    seen: dict[str, datetime] | None = None,
    snapshot_cache: Path | None = None,
) -> LakeFleet:
    """The fleet, snapshot and notes at ``now``; see the module docstring. ``seen``: as
    :func:`node_states` takes it. ``snapshot_cache``: a file holding the snapshot between
    calls, re-used while the pods and inventory it was built from hold
    (:mod:`predops.pipelines.workspace.snapshot_cache`; the notes say whether it was)."""

    hit = cached_snapshot.load(snapshot_cache, lake, now, stale=True) if snapshot_cache else None
    kept: cached_snapshot.Cached | None = hit
    redone: int | None = None
    if hit is not None:
        snap, counts, topology, inv_at = hit.snapshot, hit.counts, hit.topology, hit.inventory_at
        if not hit.current:  # the same topology, pods started or stopped since
            assert snapshot_cache is not None
            counts, redone = update_snapshot(snap, running_pods(lake, now))
            write = redone * 4 > len(topology)  # else the file catches up at a rebuild
            kept = cached_snapshot.keep(snapshot_cache, lake, now, hit, counts, write=write)
    else:
        topology, inv_at = topology_at(lake, now)
        snap, counts = snapshot_of(topology, running_pods(lake, now))
        if snapshot_cache is not None:
            kept = cached_snapshot.save(snapshot_cache, lake, now, snap, counts, topology, inv_at)
    states = node_states(lake, topology, inv_at, now, seen)
    pdbs: dict[str, PdbState] = {}
    if _has(lake, "pdbs"):
        pdbs = pdbs_from_frame(lake.scan("pdbs").filter(pl.col("ts") <= now).collect())
    observed = max(s.observed_at for s in states.values())
    fleet = FleetState(topology, observed, states, pdbs)
    demand_in_nodes: tuple[DemandInNodes, ...] = ()
    stock_notes: dict[str, Any] | None = None
    if _has(lake, "stock"):
        positions, demand_in_nodes, stock_notes = stock_positions(lake, topology, states, now)
        fleet = replace(fleet, stock=positions)
    notes: dict[str, Any] = {
        "nodes": len(topology),
        "inventory_at": inv_at.isoformat(),
        "observed_at": fleet.observed_at.isoformat(),
        "cordoned": sum(s.cordoned for s in states.values()),
        "under_repair": sum(s.under_repair for s in states.values()),
        "pdbs": len(pdbs),
        "pods": counts,
        **({"snapshot_reused": bool(hit and hit.current)} if snapshot_cache is not None else {}),
        **({"snapshot_nodes_redone": redone} if redone is not None else {}),
        "not_in_lake": ["do-not-disrupt labels", "checkpoint schedules", "PDB pod coverage"],
    }
    if stock_notes is None:
        notes["not_in_lake"].append("stock (spares, lead times, orders): no stock table")
    else:
        notes["stock"] = stock_notes
    token = kept.token if kept is not None else None
    lent = (snapshot_cache, kept) if kept is not None and snapshot_cache is not None else None
    return LakeFleet(fleet, snap, notes, demand_in_nodes, token, lent)


def default_shortage_cost(node: NodeSpec, costs: CostModel, period: timedelta) -> float:
    """The shortage cost of one node of ``node``'s shape over ``period`` when the stock
    row gives none, in cost units: its capacity's value for the whole period
    (``costs.hourly`` of its GPUs and cores). The default idle cost is
    :data:`IDLE_SHARE` of the shortage cost."""
    return round(costs.hourly(node.gpus, node.cpu_milli / 1000) * (period / HOUR), 3)


def _open_orders(lake: Lake, now: datetime) -> pl.DataFrame:
    """Orders whose latest export row at or before ``now`` says open."""
    if not _has(lake, "purchase_orders"):
        return PURCHASE_ORDERS.empty()
    return (
        latest_as_of(lake, "purchase_orders", now, "po_id")
        .filter(pl.col("status") == "open")
        .sort("expected_at", "po_id")
        .collect()
    )


def stock_positions(
    lake: Lake,
    topology: Topology,
    states: dict[str, NodeState],
    now: datetime,
    *,
    costs: CostModel | None = None,
    period: timedelta | None = None,
) -> tuple[tuple[StockPosition, ...], tuple[DemandInNodes, ...], dict[str, Any]]:
    """Stock positions, node-demand conversions and notes at ``now`` (module docstring).
    ``period`` is the order period the default costs cover (the buy policy's review
    period by default)."""
    costs = costs or CostModel()
    period = period or BuyConfig().review_period
    rows = latest_as_of(lake, "stock", now, "sku", "region").collect()
    in_use: Counter[tuple[str, str]] = Counter()
    in_repair: Counter[tuple[str, str]] = Counter()
    shape: dict[tuple[str, str], NodeSpec] = {}
    for n in topology.nodes:
        key = (n.sku, n.region)
        shape.setdefault(key, n)
        if states[n.node_id].under_repair:
            in_repair[key] += 1
        else:
            in_use[key] += 1
    orders = _open_orders(lake, now)
    on_order: dict[tuple[str, str], list[tuple[int, datetime]]] = {}
    for sku, region, nodes, at in orders.select("sku", "region", "nodes", "expected_at").rows():
        on_order.setdefault((sku, region), []).append((int(nodes), at))
    positions: list[StockPosition] = []
    conversions: list[DemandInNodes] = []
    described: list[dict[str, Any]] = []
    unpriced: list[str] = []
    for row in rows.iter_rows(named=True):
        key = (row["sku"], row["region"])
        shortage, idle = row["shortage_cost"], row["idle_cost"]
        if shortage is None:
            if key not in shape:  # no node of the SKU here to value: say so, skip it
                unpriced.append(f"{key[0]}@{key[1]}")
                continue
            shortage = default_shortage_cost(shape[key], costs, period)
        if idle is None:
            idle = round(shortage * IDLE_SHARE, 3)
        scale = row["demand_scale"] if row["demand_scale"] is not None else 1.0
        series = row["demand_series"]
        if series is not None and scale != 1.0:
            target = f"{key[1]}/{key[0]}/nodes"
            conversions.append(DemandInNodes(target, series, scale))
            series = target
        pos = StockPosition(
            sku=key[0],
            region=key[1],
            in_use=in_use[key],
            lead_time=timedelta(days=row["lead_time_days"]),
            shortage_cost=float(shortage),
            idle_cost=float(idle),
            on_hand=int(row["on_hand"]),
            on_order=tuple(on_order.get(key, ())),
            in_repair=in_repair[key],
            order_multiple=int(row["order_multiple"] or 1),
            demand_series=series,
        )
        positions.append(pos)
        described.append(
            {
                "sku": pos.sku,
                "region": pos.region,
                "snapshot_at": row["ts"].isoformat(),
                "in_use": pos.in_use,
                "in_repair": pos.in_repair,
                "on_hand": pos.on_hand,
                "on_order": [[q, at.isoformat()] for q, at in pos.on_order],
                "lead_time_days": row["lead_time_days"],
                "shortage_cost": pos.shortage_cost,
                "idle_cost": pos.idle_cost,
                "costs_from": "table"
                if row["shortage_cost"] is not None and row["idle_cost"] is not None
                else "default",
                "order_multiple": pos.order_multiple,
                "demand_series": pos.series_id,
                "demand_read_from": row["demand_series"] or pos.series_id,
                "demand_scale": scale,
            }
        )
    stocked = {(p.sku, p.region) for p in positions}
    notes: dict[str, Any] = {
        "positions": described,
        "purchase_orders_open": orders.height,
        "purchase_orders_overdue": orders.filter(pl.col("expected_at") <= now).height,
        "orders_without_stock_row": sorted(
            f"{s}@{r}" for s, r in on_order if (s, r) not in stocked
        ),
        "inventory_skus_without_stock_row": sorted(
            f"{s}@{r}" for s, r in shape if (s, r) not in stocked
        ),
        "unpriced": unpriced,
    }
    return tuple(positions), tuple(conversions), notes
