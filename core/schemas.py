"""Frame schemas: the column contracts every table in the lake keeps.
Over 500 lines: one contract per lake table, all in one place, so the lake, every
ingest and the validation read one list.

One place names every table, its columns (snake_case, units in the name), its key
(what makes a row unique, used for idempotent re-ingest) and its time column (what
the lake partitions by date). Times are UTC-aware; observations use ``ts``, events
``*_at``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

UTC_TS = pl.Datetime("us", "UTC")


@dataclass(frozen=True, slots=True)
class Column:
    """One column of a frame schema.

    ``low`` / ``high`` bound numeric values (inclusive); ``allowed`` restricts strings;
    ``counter`` marks a cumulative counter (never negative).
    """

    name: str
    dtype: pl.DataType
    nullable: bool = False
    low: float | None = None
    high: float | None = None
    allowed: frozenset[str] | None = None
    counter: bool = False
    doc: str = ""


@dataclass(frozen=True, slots=True)
class FrameSchema:
    """A table's contract: columns, key and the time column the lake partitions by."""

    name: str
    columns: tuple[Column, ...]
    key: tuple[str, ...]
    time_column: str
    entity_column: str | None = None
    doc: str = ""
    _by_name: dict[str, Column] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_name = {c.name: c for c in self.columns}
        if len(by_name) != len(self.columns):
            raise ValueError(f"schema {self.name}: duplicate column names")
        for k in (*self.key, self.time_column):
            if k not in by_name:
                raise ValueError(f"schema {self.name}: key/time column {k!r} not a column")
        object.__setattr__(self, "_by_name", by_name)

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def required(self) -> list[str]:
        """Columns an input must carry (non-nullable ones)."""
        return [c.name for c in self.columns if not c.nullable]

    def column(self, name: str) -> Column:
        return self._by_name[name]

    def has(self, name: str) -> bool:
        return name in self._by_name

    def polars_schema(self) -> pl.Schema:
        return pl.Schema({c.name: c.dtype for c in self.columns})

    def empty(self) -> pl.DataFrame:
        return pl.DataFrame(schema=self.polars_schema())


def _pct(name: str, nullable: bool = False, doc: str = "") -> Column:
    return Column(name, pl.Float32(), nullable=nullable, low=0.0, high=100.0, doc=doc)


def _counter(name: str, doc: str) -> Column:
    return Column(name, pl.Int64(), nullable=True, low=0, counter=True, doc=doc)


FAILURE_CAUSES = frozenset(
    {
        "gpu_ecc",
        "gpu_xid",
        "thermal",
        "psu",
        "disk",
        "nic",
        "kernel",
        "memory",
        "cpu",
        "network",
        "software",
        "facilities",
        "human",
        "unknown",
    }
)
EVENT_KINDS = frozenset(
    {
        "failure",
        "repair",
        "maintenance_start",
        "maintenance_end",
        "cordon",
        "uncordon",
        "drain",
        "not_ready",
        "ready",
    }
)

INVENTORY = FrameSchema(
    name="inventory",
    doc="One node at one snapshot time: capacity and where it sits in the topology.",
    columns=(
        Column("ts", UTC_TS, doc="snapshot time"),
        Column("node_id", pl.String()),
        Column("pool", pl.String(), doc="node pool (Kubernetes node group)"),
        Column("sku", pl.String(), doc="hardware SKU name"),
        Column("gpu_model", pl.String(), nullable=True, doc="null for CPU-only nodes"),
        Column("gpus", pl.Int32(), low=0, high=64),
        Column("cpu_milli", pl.Int64(), low=1),
        Column("memory_mib", pl.Int64(), low=1),
        Column("numa_nodes", pl.Int16(), low=1, high=16),
        Column(
            "nvlink_domain",
            pl.String(),
            nullable=True,
            doc="NVLink domain id; GPUs sharing one id are NVLink-connected",
        ),
        Column("region", pl.String()),
        Column("zone", pl.String()),
        Column("spine", pl.String()),
        Column("rack", pl.String()),
        Column("installed_at", UTC_TS, nullable=True),
    ),
    key=("node_id", "ts"),
    time_column="ts",
    entity_column="node_id",
)

NODE_ADDRESSES = FrameSchema(
    name="node_addresses",
    doc="The addresses one node reported at one snapshot time (Kubernetes "
    "``status.addresses``): what exporters may name it by (``instance`` host:port, "
    "``Hostname``), for telemetry ingest to find the inventory's node name. A table of its "
    "own, not an inventory column, so lakes written before it read unchanged.",
    columns=(
        Column("ts", UTC_TS, doc="snapshot time, as in the inventory"),
        Column("node_id", pl.String()),
        Column("address", pl.String(), doc="an IP address or a host name, as reported"),
        Column(
            "kind",
            pl.String(),
            nullable=True,
            doc="InternalIP, ExternalIP, Hostname, InternalDNS or ExternalDNS (null: not said)",
        ),
    ),
    key=("node_id", "address", "ts"),
    time_column="ts",
    entity_column="node_id",
)

TELEMETRY = FrameSchema(
    name="telemetry",
    doc="One node at one sample time; gauges are node-level (GPU values: max temp, "
    "mean util, summed power over the node's GPUs); counters are cumulative totals.",
    columns=(
        Column("ts", UTC_TS),
        Column("node_id", pl.String()),
        _pct("cpu_util_pct", nullable=True),
        Column("mem_used_bytes", pl.Int64(), nullable=True, low=0),
        _pct("gpu_util_pct", nullable=True, doc="mean over the node's GPUs"),
        Column(
            "gpu_temp_c",
            pl.Float32(),
            nullable=True,
            low=-40.0,
            high=150.0,
            doc="hottest GPU of the node",
        ),
        Column(
            "gpu_power_w",
            pl.Float32(),
            nullable=True,
            low=0.0,
            high=20000.0,
            doc="sum over the node's GPUs",
        ),
        _counter("ecc_sbe_total", "GPU single-bit ECC errors since boot/install"),
        _counter("ecc_dbe_total", "GPU double-bit ECC errors"),
        _counter("xid_errors_total", "GPU XID errors"),
        _counter("pcie_replay_total", "PCIe replay counter"),
        _counter("nic_flaps_total", "NIC link down/up transitions"),
        _counter("disk_realloc_total", "disk reallocated sectors"),
        _counter("mce_total", "machine-check exceptions"),
        Column("node_ready", pl.Boolean(), nullable=True, doc="Kubernetes Ready condition"),
    ),
    key=("node_id", "ts"),
    time_column="ts",
    entity_column="node_id",
)

EVENTS = FrameSchema(
    name="events",
    doc="Things that happened to a node: failures (with cause), repairs, maintenance, "
    "cordons and drains.",
    columns=(
        Column("node_id", pl.String()),
        Column("kind", pl.String(), allowed=EVENT_KINDS),
        Column("at", UTC_TS),
        Column("cause", pl.String(), nullable=True),
        Column("detail", pl.String(), nullable=True),
    ),
    key=("node_id", "kind", "at"),
    time_column="at",
    entity_column="node_id",
)

INSPECTION_OUTCOMES = frozenset({"fault_found", "no_fault_found", "unknown"})
INSPECTION_ACTIONS = frozenset({"drain", "cordon"})

INSPECTIONS = FrameSchema(
    name="inspections",
    doc="What the inspection of one node predops drained or cordoned found, as recorded "
    "at one time: ``predops apply`` records ``unknown`` when it drains or cordons, "
    "``predops inspect`` (or a repair-ticket export ingested as this table) the outcome. "
    "The latest record at or before a label cutoff is the drain's outcome then "
    "(:mod:`features.inspections`).",
    columns=(
        Column("node_id", pl.String()),
        Column("drained_at", UTC_TS, doc="when predops drained or cordoned the node"),
        Column("action", pl.String(), allowed=INSPECTION_ACTIONS),
        Column("outcome", pl.String(), allowed=INSPECTION_OUTCOMES),
        Column(
            "cause",
            pl.String(),
            nullable=True,
            allowed=FAILURE_CAUSES,
            doc="the fault found (fault_found; null: unknown cause)",
        ),
        Column("recorded_at", UTC_TS, doc="when this outcome was recorded"),
        Column("detail", pl.String(), nullable=True, doc="ticket id, what was done"),
    ),
    key=("node_id", "drained_at", "recorded_at"),
    time_column="drained_at",
    entity_column="node_id",
)

PODS = FrameSchema(
    name="pods",
    doc="One pod (task) request and its life; gpu_milli is the share of one GPU "
    "(1000 = whole) when num_gpu == 1.",
    columns=(
        Column("pod_id", pl.String()),
        Column("job_id", pl.String(), nullable=True),
        Column("gang_id", pl.String(), nullable=True, doc="pods of one gang place together"),
        Column("gang_size", pl.Int32(), nullable=True, low=1),
        Column("pool", pl.String(), nullable=True),
        Column("cpu_milli", pl.Int64(), low=0),
        Column("memory_mib", pl.Int64(), low=0),
        Column("num_gpu", pl.Int32(), low=0, high=64),
        Column("gpu_milli", pl.Int32(), low=0, high=1000),
        Column("gpu_spec", pl.String(), nullable=True, doc="allowed GPU models, '|'-separated"),
        Column("qos", pl.String(), nullable=True),
        Column("priority", pl.Int32(), nullable=True),
        Column("phase", pl.String(), nullable=True),
        Column("created_at", UTC_TS),
        Column("scheduled_at", UTC_TS, nullable=True),
        Column("deleted_at", UTC_TS, nullable=True),
        Column("node_id", pl.String(), nullable=True),
    ),
    key=("pod_id",),
    time_column="created_at",
)

DEMAND = FrameSchema(
    name="demand",
    doc="Demand of one series (pool x resource x GPU model) per interval: value = "
    "running + pending (unconstrained), capacity = what the pool held.",
    columns=(
        Column("series_id", pl.String()),
        Column("ts", UTC_TS),
        Column("value", pl.Float64(), low=0.0, doc="demand = running + pending"),
        Column("running", pl.Float64(), nullable=True, low=0.0),
        Column("pending", pl.Float64(), nullable=True, low=0.0),
        Column("capacity", pl.Float64(), nullable=True, low=0.0),
        Column("pool", pl.String(), nullable=True),
        Column("resource", pl.String(), nullable=True, doc="gpus, cpu_cores, nodes, cpu_pct..."),
        Column("gpu_model", pl.String(), nullable=True),
    ),
    key=("series_id", "ts"),
    time_column="ts",
)

CALENDAR = FrameSchema(
    name="calendar",
    doc="Known-in-advance events (promotions, launches) that move demand.",
    columns=(
        Column("name", pl.String()),
        Column("kind", pl.String()),
        Column("starts_at", UTC_TS),
        Column("ends_at", UTC_TS),
        Column("scope", pl.String(), nullable=True, doc="pool it applies to; null = all"),
        Column(
            "magnitude",
            pl.Float64(),
            nullable=True,
            low=0.0,
            doc="planned demand multiplier, when known",
        ),
    ),
    key=("name", "starts_at"),
    time_column="starts_at",
)

DRIVE_SMART = FrameSchema(
    name="drive_smart",
    doc="One drive at one observation (Backblaze daily snapshot or an hds interval "
    "start); node_id is the drive serial number.",
    columns=(
        Column("ts", UTC_TS),
        Column("node_id", pl.String()),
        Column("model", pl.String(), nullable=True),
        Column("capacity_bytes", pl.Int64(), nullable=True, low=0),
        Column("power_on_hours", pl.Float64(), nullable=True, low=0.0),
        *(
            Column(f"smart_{n}_raw", pl.Float64(), nullable=True, low=0.0)
            for n in (1, 5, 9, 10, 12, 187, 188, 189, 194, 196, 197, 198)
        ),
    ),
    key=("node_id", "ts"),
    time_column="ts",
    entity_column="node_id",
)

SERIES = FrameSchema(
    name="series",
    doc="A single univariate metric series (e.g. NAB, a VM's CPU %).",
    columns=(
        Column("series_id", pl.String()),
        Column("ts", UTC_TS),
        Column("value", pl.Float64()),
    ),
    key=("series_id", "ts"),
    time_column="ts",
)

ANOMALY_WINDOWS = FrameSchema(
    name="anomaly_windows",
    doc="Labelled anomaly windows of a series (NAB scoring windows).",
    columns=(
        Column("series_id", pl.String()),
        Column("starts_at", UTC_TS),
        Column("ends_at", UTC_TS),
    ),
    key=("series_id", "starts_at"),
    time_column="starts_at",
)

PDBS = FrameSchema(
    name="pdbs",
    doc="One Kubernetes PodDisruptionBudget at one snapshot time: which pods it covers, "
    "what it demands, and the disruption headroom the API server computed.",
    columns=(
        Column("ts", UTC_TS, doc="snapshot time"),
        Column("namespace", pl.String()),
        Column("name", pl.String()),
        Column(
            "selector",
            pl.String(),
            nullable=True,
            doc="label selector as JSON text; {} selects every pod of the namespace, "
            "null selects none",
        ),
        Column("min_available", pl.String(), nullable=True, doc="a pod count or a percentage"),
        Column("max_unavailable", pl.String(), nullable=True, doc="a pod count or a percentage"),
        Column("disruptions_allowed", pl.Int32(), nullable=True, low=0),
        Column("expected_pods", pl.Int32(), nullable=True, low=0),
        Column("current_healthy", pl.Int32(), nullable=True, low=0),
    ),
    key=("namespace", "name", "ts"),
    time_column="ts",
)

STOCK = FrameSchema(
    name="stock",
    doc="Spare hardware of one SKU in one region at one snapshot time, as a procurement "
    "or asset system exports it, with what the buy policy needs to size an order. Open "
    "purchase orders are in ``purchase_orders``; nodes in use and in repair come from "
    "the inventory and the events.",
    columns=(
        Column("ts", UTC_TS, doc="snapshot time"),
        Column("sku", pl.String(), doc="hardware SKU, as in the inventory's sku column"),
        Column("region", pl.String(), doc="region, as in the inventory's region column"),
        Column(
            "on_hand",
            pl.Int32(),
            low=0,
            doc="spare nodes in the warehouse, ready to rack (not in the inventory)",
        ),
        Column(
            "lead_time_days",
            pl.Float64(),
            low=1.0,
            high=1095.0,
            doc="supplier lead time in days: order placed to node in service",
        ),
        Column(
            "shortage_cost",
            pl.Float64(),
            nullable=True,
            low=0.01,
            doc="cost units per node of unmet demand over the order period "
            "(null: the node's capacity value over the period)",
        ),
        Column(
            "idle_cost",
            pl.Float64(),
            nullable=True,
            low=0.01,
            doc="cost units per node bought and not needed over the order period "
            "(null: a quarter of the shortage cost)",
        ),
        Column(
            "order_multiple",
            pl.Int32(),
            nullable=True,
            low=1,
            high=10000,
            doc="orders come in multiples of this many nodes (null: 1)",
        ),
        Column(
            "demand_series",
            pl.String(),
            nullable=True,
            doc="the demand series the SKU's demand is read from "
            "(null: <region>/<sku>/nodes, in nodes)",
        ),
        Column(
            "demand_scale",
            pl.Float64(),
            nullable=True,
            low=1e-9,
            doc="nodes of this SKU in this region per unit of demand_series (0.125 for a "
            "GPU series served by 8-GPU nodes; null: 1, the series counts nodes)",
        ),
    ),
    key=("sku", "region", "ts"),
    time_column="ts",
)

PO_STATUSES = frozenset({"open", "delivered", "cancelled"})

PURCHASE_ORDERS = FrameSchema(
    name="purchase_orders",
    doc="One purchase order of nodes at one export time (a procurement system's open "
    "order report): an order is on order while its latest row says open; delivered "
    "nodes are counted in stock.on_hand or the inventory instead.",
    columns=(
        Column("ts", UTC_TS, doc="export time"),
        Column("po_id", pl.String(), doc="purchase order number (one SKU and region each)"),
        Column("sku", pl.String()),
        Column("region", pl.String()),
        Column("nodes", pl.Int32(), low=1, high=100000, doc="nodes ordered"),
        Column("ordered_at", UTC_TS, nullable=True, doc="when the order was placed"),
        Column("expected_at", UTC_TS, doc="expected delivery (nodes in service)"),
        Column("status", pl.String(), allowed=PO_STATUSES),
    ),
    key=("po_id", "ts"),
    time_column="ts",
)

SCHEMAS: dict[str, FrameSchema] = {
    s.name: s
    for s in (
        INVENTORY,
        NODE_ADDRESSES,
        TELEMETRY,
        EVENTS,
        INSPECTIONS,
        PODS,
        DEMAND,
        CALENDAR,
        DRIVE_SMART,
        SERIES,
        ANOMALY_WINDOWS,
        PDBS,
        STOCK,
        PURCHASE_ORDERS,
    )
}


def schema_for(table: str) -> FrameSchema:
    """The schema of ``table``; a clear error for unknown tables."""
    try:
        return SCHEMAS[table]
    except KeyError:
        raise KeyError(f"unknown table {table!r}; known: {', '.join(sorted(SCHEMAS))}") from None
