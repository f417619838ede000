"""Topology from Kubernetes Node objects (as plain dicts, already fetched by the caller).

Reads the well-known labels ``topology.kubernetes.io/region`` and ``/zone``, a
configurable rack and spine label (no standard exists), the GPU product label of the
NVIDIA GPU feature discovery (``nvidia.com/gpu.product``) and the allocatable CPU,
memory and ``nvidia.com/gpu``. Quantities use Kubernetes notation ('3500m', '64',
'512Gi'). The result is an inventory-contract frame (``core.schemas.INVENTORY``), so a
live cluster and the lake build the same :class:`~allocator.topology.Topology`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import polars as pl

from predops.allocator.topology import UNKNOWN
from predops.core.schemas import INVENTORY

_QUANTITY = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$")
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "m": 10**-3,
}


def parse_quantity(text: str | int | float) -> float:
    """A Kubernetes resource quantity as a plain number ('500m' -> 0.5, '2Gi' -> 2**31)."""
    if isinstance(text, int | float):
        return float(text)
    m = _QUANTITY.match(text)
    if not m or (m.group(2) not in _BINARY and m.group(2) not in _DECIMAL):
        raise ValueError(f"{text!r} is not a Kubernetes quantity")
    value, unit = float(m.group(1)), m.group(2)
    return value * (_BINARY.get(unit) or _DECIMAL[unit])


@dataclass(frozen=True, slots=True)
class LabelKeys:
    """Which node labels carry which topology level (rack/spine are site-specific)."""

    region: str = "topology.kubernetes.io/region"
    zone: str = "topology.kubernetes.io/zone"
    spine: str = "topology.predops.io/spine"
    rack: str = "topology.predops.io/rack"
    gpu_model: str = "nvidia.com/gpu.product"
    pool: str = "node.kubernetes.io/instance-type"
    numa_nodes: str = "topology.predops.io/numa-nodes"
    nvlink_domain: str = "topology.predops.io/nvlink-domain"
    gpu_resource: str = "nvidia.com/gpu"


def inventory_from_nodes(
    nodes: Iterable[Mapping[str, Any]], snapshot: datetime, keys: LabelKeys | None = None
) -> pl.DataFrame:
    """Inventory rows from Node objects: ``{"metadata": {"name", "labels"}, "status":
    {"allocatable": {...}}}``. A node without a name or with an unreadable quantity
    raises ``ValueError`` naming the node and field."""
    k = keys or LabelKeys()
    rows = []
    for i, node in enumerate(nodes):
        meta = node.get("metadata") or {}
        name = meta.get("name")
        if not name:
            raise ValueError(f"node #{i + 1}: metadata.name is missing")
        labels: Mapping[str, str] = meta.get("labels") or {}
        alloc: Mapping[str, Any] = (node.get("status") or {}).get("allocatable") or {}

        def qty(
            field: str,
            scale: float,
            default: str = "0",
            name: str = name,
            alloc: Mapping[str, Any] = alloc,
        ) -> int:
            try:
                return round(parse_quantity(alloc.get(field, default)) * scale)
            except ValueError as exc:
                raise ValueError(f"node {name}: status.allocatable.{field}: {exc}") from None

        gpus = qty(k.gpu_resource, 1)
        model = labels.get(k.gpu_model) if gpus > 0 else None
        if gpus > 0 and not model:
            model = UNKNOWN
        try:
            numa = int(labels.get(k.numa_nodes, "1"))
        except ValueError:
            raise ValueError(f"node {name}: label {k.numa_nodes} is not an integer") from None
        rows.append(
            {
                "ts": snapshot,
                "node_id": name,
                "pool": labels.get(k.pool, "default"),
                "sku": labels.get(k.pool) or UNKNOWN,
                "gpu_model": model,
                "gpus": gpus,
                "cpu_milli": qty("cpu", 1000),
                "memory_mib": qty("memory", 1 / 2**20),
                "numa_nodes": numa,
                "nvlink_domain": labels.get(k.nvlink_domain),
                "region": labels.get(k.region, UNKNOWN),
                "zone": labels.get(k.zone, UNKNOWN),
                "spine": labels.get(k.spine, UNKNOWN),
                "rack": labels.get(k.rack, UNKNOWN),
                "installed_at": None,
            }
        )
    return pl.DataFrame(rows, schema=INVENTORY.polars_schema())
