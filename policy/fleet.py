"""What the policy engine knows about the fleet beside risks, forecasts and the snapshot.

:class:`FleetState` bundles the inventory (one row per node, ``core.schemas.INVENTORY``
columns), each node's operational state (:data:`NODE_STATE` columns: cordoned, under
repair, do-not-disrupt, hysteresis timestamps, checkpoint times), PodDisruptionBudgets
(``core.schemas.PDBS`` rows, keyed ``namespace/name``) with how many pods of each node
they cover, per-pool resize history, and per-SKU stock for buying. Builders read frames
and raise ``ValueError`` naming the frame, row and field of bad input.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import polars as pl

from predops.allocator.topology import NodeSpec, Topology

NODE_STATE_COLUMNS: dict[str, str] = {
    "node_id": "node id",
    "observed_at": "when this state was read (UTC)",
    "cordoned": "spec.unschedulable is set",
    "cordon_owner": "who cordoned it (null: unknown / a human)",
    "cordoned_at": "when it was last cordoned (null: never)",
    "uncordoned_at": "when it was last uncordoned (null: never)",
    "under_repair": "out for repair / RMA",
    "repaired_at": "when a repair last finished (null: never)",
    "do_not_disrupt": "carries the do-not-disrupt label (karpenter.sh/do-not-disrupt)",
    "last_checkpoint_at": "latest checkpoint of the jobs on the node (null: unknown)",
    "checkpoint_interval_s": "checkpoint period of those jobs in seconds (null: unknown)",
    "driver_version": "GPU driver version the node runs (null: unknown)",
    "inspection_fault": "what the inspection after our last drain found: true a fault, "
    "false none (null: not known yet)",
}
"""Columns of the node-state frame (name -> meaning); ``node_id`` and ``observed_at``
are required, the rest default to false / null."""


@dataclass(frozen=True, slots=True)
class NodeState:
    """Operational state of one node at ``observed_at`` (times UTC)."""

    node_id: str
    observed_at: datetime
    cordoned: bool = False
    cordon_owner: str | None = None
    cordoned_at: datetime | None = None
    uncordoned_at: datetime | None = None
    under_repair: bool = False
    repaired_at: datetime | None = None
    do_not_disrupt: bool = False
    last_checkpoint_at: datetime | None = None
    checkpoint_interval: timedelta | None = None
    soft_tainted: bool = False
    """Carries predops' soft taint (:mod:`policy.soft_taint`)."""
    driver_version: str | None = None
    """The GPU driver version the node runs (a pacing domain, :mod:`policy.pacing`)."""
    inspection_fault: bool | None = None
    """What the inspection after predops' last drain of the node found (True: a fault,
    False: none, a false alarm; None: not known yet); slow-start pacing reads it."""

    @property
    def disrupted(self) -> bool:
        """Counts against disruption budgets: cordoned, draining or in repair."""
        return self.cordoned or self.under_repair

    def next_checkpoint(self, now: datetime) -> datetime | None:
        """The first checkpoint at or after ``now``, when the schedule is known."""
        if self.last_checkpoint_at is None or not self.checkpoint_interval:
            return None
        step = self.checkpoint_interval
        if self.last_checkpoint_at >= now:
            return self.last_checkpoint_at
        n = -(-(now - self.last_checkpoint_at) // step)
        return self.last_checkpoint_at + n * step


@dataclass(frozen=True, slots=True)
class PdbState:
    """A PodDisruptionBudget's current headroom (None: the API did not say)."""

    key: str
    disruptions_allowed: int | None


@dataclass(frozen=True, slots=True)
class PoolState:
    """A pool's resize history (for the scale-in cooldown): the last resize, and the
    last scale-up when known (the cooldown then counts from it, as a cluster
    autoscaler's scale-down delay after an add). ``max_nodes``: the most nodes the pool
    can hold (node-group maximum, or its physical nodes); the room above the nodes it
    holds is parked capacity a scale-up can bring back (None: unknown, no room)."""

    pool: str
    last_resize_at: datetime | None = None
    last_scale_up_at: datetime | None = None
    max_nodes: int | None = None


@dataclass(frozen=True, slots=True)
class StockPosition:
    """Stock of one SKU in one region, in nodes, and what running short or idle costs.

    ``in_use`` is what the fleet holds in service (working nodes), ``on_hand`` spare
    nodes in the warehouse, ``on_order`` deliveries as (nodes, arrival), ``in_repair``
    nodes out for repair / RMA. ``shortage_cost`` is the cost of one node of unmet demand
    over the order period, ``idle_cost`` the cost of one node bought and not needed
    (depreciation, power, space) over the same period, both in cost units.
    """

    sku: str
    region: str
    in_use: int
    lead_time: timedelta
    shortage_cost: float
    idle_cost: float
    on_hand: int = 0
    on_order: tuple[tuple[int, datetime], ...] = ()
    in_repair: int = 0
    order_multiple: int = 1
    demand_series: str | None = None

    def __post_init__(self) -> None:
        where = f"stock {self.sku}@{self.region}"
        for name in ("in_use", "on_hand", "in_repair"):
            if getattr(self, name) < 0:
                raise ValueError(f"{where}: {name} must be >= 0")
        if self.shortage_cost <= 0 or self.idle_cost <= 0:
            raise ValueError(f"{where}: shortage_cost and idle_cost must be positive")
        if self.lead_time <= timedelta(0):
            raise ValueError(f"{where}: lead_time must be positive")
        if self.order_multiple < 1:
            raise ValueError(f"{where}: order_multiple must be >= 1")
        if any(q < 0 for q, _ in self.on_order):
            raise ValueError(f"{where}: on_order quantities must be >= 0")

    @property
    def series_id(self) -> str:
        """The long-horizon demand series (nodes) this SKU is bought against."""
        return self.demand_series or f"{self.region}/{self.sku}/nodes"


@dataclass(frozen=True)
class FleetState:
    """Everything about the fleet the engine reads beside risks, forecasts and the
    snapshot. ``observed_at`` is when the snapshot / inventory were read."""

    topology: Topology
    observed_at: datetime
    nodes: Mapping[str, NodeState] = field(default_factory=dict)
    pdbs: Mapping[str, PdbState] = field(default_factory=dict)
    pdb_pods: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    """node_id -> {pdb key -> pods of that node the PDB covers}."""
    pools: Mapping[str, PoolState] = field(default_factory=dict)
    stock: tuple[StockPosition, ...] = ()

    def spec(self, node_id: str) -> NodeSpec | None:
        try:
            return self.topology.node(node_id)
        except KeyError:
            return None

    def pool_nodes(self) -> dict[str, list[NodeSpec]]:
        out: dict[str, list[NodeSpec]] = {}
        for n in self.topology.nodes:
            out.setdefault(n.pool, []).append(n)
        return out


def _opt_time(row: dict[str, object], name: str, where: str) -> datetime | None:
    v = row.get(name)
    if v is None:
        return None
    if not isinstance(v, datetime) or v.tzinfo is None:
        raise ValueError(f"{where}: field {name} must be a UTC timestamp, got {v!r}")
    return v


def node_states_from_frame(
    frame: pl.DataFrame, *, source: str = "node_state"
) -> dict[str, NodeState]:
    """:class:`NodeState` per node from a frame with :data:`NODE_STATE_COLUMNS`; the
    latest ``observed_at`` of a node wins."""
    for need in ("node_id", "observed_at"):
        if need not in frame.columns:
            raise ValueError(f"{source}: frame lacks column {need}")
    unknown = sorted(set(frame.columns) - NODE_STATE_COLUMNS.keys())
    if unknown:
        raise ValueError(f"{source}: unknown column(s) {', '.join(unknown)}")
    out: dict[str, NodeState] = {}
    for i, row in enumerate(frame.iter_rows(named=True), start=1):
        where = f"{source} row {i} (node {row.get('node_id')!r})"
        node_id = row["node_id"]
        if not node_id:
            raise ValueError(f"{where}: field node_id is empty")
        observed = _opt_time(row, "observed_at", where)
        if observed is None:
            raise ValueError(f"{where}: field observed_at is null")
        interval = row.get("checkpoint_interval_s")
        if interval is not None and interval <= 0:
            raise ValueError(f"{where}: field checkpoint_interval_s must be positive")
        st = NodeState(
            node_id=str(node_id),
            observed_at=observed,
            cordoned=bool(row.get("cordoned") or False),
            cordon_owner=row.get("cordon_owner"),
            cordoned_at=_opt_time(row, "cordoned_at", where),
            uncordoned_at=_opt_time(row, "uncordoned_at", where),
            under_repair=bool(row.get("under_repair") or False),
            repaired_at=_opt_time(row, "repaired_at", where),
            do_not_disrupt=bool(row.get("do_not_disrupt") or False),
            last_checkpoint_at=_opt_time(row, "last_checkpoint_at", where),
            checkpoint_interval=timedelta(seconds=float(interval)) if interval else None,
            driver_version=None
            if row.get("driver_version") is None
            else str(row["driver_version"]),
            inspection_fault=None
            if row.get("inspection_fault") is None
            else bool(row["inspection_fault"]),
        )
        old = out.get(st.node_id)
        if old is None or old.observed_at <= st.observed_at:
            out[st.node_id] = st
    return out


def pdbs_from_frame(frame: pl.DataFrame) -> dict[str, PdbState]:
    """PDB headroom per ``namespace/name`` from ``core.schemas.PDBS`` rows (latest ts)."""
    out: dict[str, tuple[datetime, PdbState]] = {}
    for i, row in enumerate(frame.iter_rows(named=True), start=1):
        for need in ("namespace", "name", "ts"):
            if row.get(need) is None:
                raise ValueError(f"pdbs row {i}: field {need} is null")
        key = f"{row['namespace']}/{row['name']}"
        allowed = row.get("disruptions_allowed")
        state = PdbState(key, None if allowed is None else int(allowed))
        if key not in out or out[key][0] <= row["ts"]:
            out[key] = (row["ts"], state)
    return {k: v for k, (_, v) in out.items()}
