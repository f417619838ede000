"""The cluster's physical shape: region > zone > spine > rack > node > NUMA node > GPU.

A :class:`NodeSpec` is one node: CPU in milli-cores, memory in MiB, its GPUs (all of
one model; each GPU is 1000 milli-GPU and may be shared by several pods), which NUMA
node each GPU hangs off, and which NVLink domain inside the node each GPU belongs to.
A :class:`Topology` is the ordered list of nodes plus the names of the domains above
them; :class:`~allocator.snapshot.ClusterSnapshot` turns it into free-resource arrays.

Built from inventory-contract rows (``core.schemas.INVENTORY``: the lake's inventory
table, the openb node lists, the synthetic fleet) with :meth:`Topology.from_inventory`.
The inventory holds one NVLink domain id per node: when set, all GPUs of the node are
one NVLink domain; when null, the GPUs have no NVLink between them. GPUs are split
evenly over the node's NUMA nodes in index order (GPU ``i`` of ``g`` on NUMA node
``i * numa_nodes // g``), which is how PCIe switches are wired on the common 2-socket
8-GPU boards; a builder that knows better passes ``gpu_numa`` / ``nvlink_groups``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import polars as pl

from predops.core.schemas import INVENTORY

GPU_MILLI = 1000
"""One whole GPU in milli-GPU (the Alibaba trace's unit for GPU sharing)."""
UNKNOWN = "unknown"
LEVELS = ("region", "zone", "spine", "rack")
"""Topology levels above the node, outermost first."""


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """One node's capacity and place in the topology.

    ``gpu_numa[i]`` is the NUMA node of GPU ``i``; ``nvlink_groups[i]`` is the NVLink
    domain of GPU ``i`` inside the node (-1: no NVLink). Both default from
    ``numa_nodes`` / ``nvlink_domain`` as the module docstring says.
    """

    node_id: str
    cpu_milli: int
    memory_mib: int
    gpus: int = 0
    gpu_model: str | None = None
    numa_nodes: int = 1
    gpu_numa: tuple[int, ...] | None = None
    nvlink_groups: tuple[int, ...] | None = None
    nvlink_domain: str | None = None
    region: str = UNKNOWN
    zone: str = UNKNOWN
    spine: str = UNKNOWN
    rack: str = UNKNOWN
    pool: str = "default"
    sku: str = ""

    def __reduce__(self) -> tuple[Any, ...]:
        # through __init__: faster than the dataclass' __setstate__ (a pickled snapshot
        # holds one per node)
        return (NodeSpec, tuple(getattr(self, f) for f in _NODE_FIELDS))

    def __post_init__(self) -> None:
        where = f"node {self.node_id!r}"
        if self.cpu_milli < 0 or self.memory_mib < 0:
            raise ValueError(f"{where}: cpu_milli and memory_mib must be >= 0")
        if self.gpus < 0:
            raise ValueError(f"{where}: gpus must be >= 0, got {self.gpus}")
        if self.gpus > 0 and not self.gpu_model:
            raise ValueError(f"{where}: {self.gpus} GPUs but no gpu_model")
        if not 1 <= self.numa_nodes <= 16:
            raise ValueError(f"{where}: numa_nodes must be in 1..16, got {self.numa_nodes}")
        for name, vec in (("gpu_numa", self.gpu_numa), ("nvlink_groups", self.nvlink_groups)):
            if vec is not None and len(vec) != self.gpus:
                raise ValueError(f"{where}: {name} has {len(vec)} entries for {self.gpus} GPUs")
        if self.gpu_numa is not None and any(not 0 <= u < self.numa_nodes for u in self.gpu_numa):
            raise ValueError(f"{where}: gpu_numa entries must be in 0..{self.numa_nodes - 1}")

    @property
    def gpu_numa_ids(self) -> tuple[int, ...]:
        """NUMA node of each GPU."""
        if self.gpu_numa is not None:
            return self.gpu_numa
        return tuple(i * self.numa_nodes // self.gpus for i in range(self.gpus))

    @property
    def nvlink_ids(self) -> tuple[int, ...]:
        """NVLink domain (inside this node) of each GPU; -1 = not NVLink-connected."""
        if self.nvlink_groups is not None:
            return self.nvlink_groups
        return tuple(0 if self.nvlink_domain else -1 for _ in range(self.gpus))

    @property
    def path(self) -> tuple[str, str, str, str]:
        """(region, zone, spine, rack) — a rack name is only unique within its spine."""
        return (self.region, self.zone, self.spine, self.rack)


_NODE_FIELDS = tuple(f.name for f in fields(NodeSpec))


@dataclass(frozen=True, slots=True)
class Topology:
    """An ordered set of nodes and the domains they sit in."""

    nodes: tuple[NodeSpec, ...]
    _index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index: dict[str, int] = {}
        for i, n in enumerate(self.nodes):
            if n.node_id in index:
                raise ValueError(f"duplicate node_id {n.node_id!r} in topology")
            index[n.node_id] = i
        object.__setattr__(self, "_index", index)

    @classmethod
    def of(cls, nodes: Iterable[NodeSpec]) -> Topology:
        return cls(tuple(nodes))

    def __len__(self) -> int:
        return len(self.nodes)

    def node(self, node_id: str) -> NodeSpec:
        try:
            return self.nodes[self._index[node_id]]
        except KeyError:
            raise KeyError(f"unknown node {node_id!r}") from None

    def domain_of(self, node_id: str, level: str) -> tuple[str, ...]:
        """The domain key of ``node_id`` at ``level`` (e.g. ``("r", "z", "s1", "r7")``)."""
        depth = _level_depth(level)
        return self.node(node_id).path[: depth + 1]

    def nodes_in(self, level: str, domain: Sequence[str]) -> list[str]:
        """Node ids inside one domain of ``level`` (key as :meth:`domain_of` returns)."""
        depth = _level_depth(level)
        key = tuple(domain)
        return [n.node_id for n in self.nodes if n.path[: depth + 1] == key]

    @property
    def total_gpus(self) -> int:
        return sum(n.gpus for n in self.nodes)

    @classmethod
    def from_inventory(cls, frame: pl.DataFrame) -> Topology:
        """Nodes from inventory-contract rows (typed as ``core.schemas.INVENTORY``).

        When a node appears at several snapshot times, its latest row wins. A missing
        required column or a bad value raises ``ValueError`` naming the row and field.
        """
        missing = [c for c in INVENTORY.required if c not in frame.columns]
        if missing:
            raise ValueError(f"inventory frame lacks column(s) {', '.join(missing)}")
        if "ts" in frame.columns and frame.height:
            frame = (
                frame.with_row_index("__row")
                .sort("ts")
                .unique("node_id", keep="last", maintain_order=True)
                .sort("__row")
            )
        else:
            frame = frame.with_row_index("__row")
        specs = []
        for row in frame.iter_rows(named=True):
            specs.append(_spec_from_row(row))
        return cls(tuple(specs))


def _level_depth(level: str) -> int:
    try:
        return LEVELS.index(level)
    except ValueError:
        raise ValueError(f"unknown topology level {level!r}; known: {', '.join(LEVELS)}") from None


def _text(row: dict[str, object], name: str, default: str = UNKNOWN) -> str:
    v = row.get(name)
    return default if v is None or str(v).strip() == "" else str(v)


def _spec_from_row(row: dict[str, object]) -> NodeSpec:
    where = f"inventory row {int(row['__row']) + 1} (node {row.get('node_id')!r})"  # type: ignore[call-overload]
    try:
        gpus = int(row["gpus"] or 0)  # type: ignore[call-overload]
        model = row.get("gpu_model")
        return NodeSpec(
            node_id=str(row["node_id"]),
            cpu_milli=int(row["cpu_milli"]),  # type: ignore[call-overload]
            memory_mib=int(row["memory_mib"]),  # type: ignore[call-overload]
            gpus=gpus,
            gpu_model=str(model) if model not in (None, "") and gpus > 0 else None,
            numa_nodes=int(row.get("numa_nodes") or 1),  # type: ignore[call-overload]
            nvlink_domain=(str(row["nvlink_domain"]) if row.get("nvlink_domain") else None),
            region=_text(row, "region"),
            zone=_text(row, "zone"),
            spine=_text(row, "spine"),
            rack=_text(row, "rack"),
            pool=_text(row, "pool", "default"),
            sku=_text(row, "sku", ""),
        )
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: {exc}") from None
