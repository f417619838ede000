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
  not yet deleted) placed on its node; pods that no longer fit their node (bad data)
  are counted, not placed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import polars as pl

from allocator.engine import Allocator
from allocator.policies import make_policy
from allocator.requests import PodRequest, parse_gpu_spec
from allocator.snapshot import ClusterSnapshot
from allocator.topology import Topology
from core.schemas import INVENTORY
from pipelines.lake import Lake
from policy.fleet import FleetState, NodeState, PdbState, pdbs_from_frame

OUT_OF_SERVICE = {"failure": True, "maintenance_start": True, "repair": False}
BACK_IN_SERVICE = {"maintenance_end"}


@dataclass
class LakeFleet:
    """The fleet at ``now``, the snapshot of running pods, and notes on what was read."""

    fleet: FleetState
    snapshot: ClusterSnapshot
    notes: dict[str, Any] = field(default_factory=dict)


def _has(lake: Lake, table: str) -> bool:
    return bool(lake.files(table))


def topology_at(lake: Lake, now: datetime) -> tuple[Topology, datetime]:
    """Latest inventory row per node at or before ``now``, and the newest row's time."""
    if not _has(lake, "inventory"):
        raise ValueError("the lake has no inventory; run `predops simulate` or ingest one")
    inv = (
        lake.scan("inventory")
        .filter(pl.col("ts") <= now)
        .sort("ts")
        .group_by("node_id")
        .last()
        .sort("node_id")
        .collect()
    )
    if inv.height == 0:
        raise ValueError(f"the lake's inventory has no row at or before {now.isoformat()}")
    return Topology.from_inventory(inv.select(INVENTORY.names)), inv["ts"].max()  # type: ignore[return-value]


def _last_seen(lake: Lake, now: datetime) -> dict[str, datetime]:
    if not _has(lake, "telemetry"):
        return {}
    seen = (
        lake.scan("telemetry")
        .select("node_id", "ts")
        .filter(pl.col("ts") <= now)
        .group_by("node_id")
        .agg(pl.col("ts").max())
        .collect()
    )
    return dict(zip(seen["node_id"].to_list(), seen["ts"].to_list(), strict=True))


def node_states(
    lake: Lake, topology: Topology, inventory_at: datetime, now: datetime
) -> dict[str, NodeState]:
    """:class:`NodeState` per inventory node from events up to ``now``."""
    seen = _last_seen(lake, now)
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
    return {n: NodeState(node_id=n, **kw) for n, kw in acc.items()}


def running_pods(lake: Lake, now: datetime) -> pl.DataFrame:
    """Pods running at ``now``: scheduled on a node by then and not deleted yet."""
    if not _has(lake, "pods"):
        return pl.DataFrame()
    return (
        lake.scan("pods")
        .filter(
            pl.col("node_id").is_not_null()
            & pl.col("scheduled_at").is_not_null()
            & (pl.col("scheduled_at") <= now)
            & (pl.col("deleted_at").is_null() | (pl.col("deleted_at") > now))
        )
        .unique("pod_id", keep="last")
        .sort("pod_id")
        .collect()
    )


def snapshot_of(
    topology: Topology, pods: pl.DataFrame, *, seed: int = 0
) -> tuple[ClusterSnapshot, dict[str, int]]:
    """The topology with ``pods`` placed on their nodes (devices chosen best-fit)."""
    snap = ClusterSnapshot(topology)
    counts = {"running": 0, "placed": 0, "unknown_node": 0, "does_not_fit": 0}
    if pods.height == 0:
        return snap, counts
    alloc = Allocator(
        snap,
        make_policy("best_fit", rng=np.random.default_rng(seed + 1)),
        np.random.default_rng(seed),
        explain=False,
    )
    cols: tuple[str, ...] = ("pod_id", "node_id", "cpu_milli", "memory_mib", "num_gpu")
    cols += ("gpu_milli", "gpu_spec", "gang_id")
    for pod_id, node_id, cpu, mem, ngpu, milli, spec, gang in pods.select(cols).iter_rows():
        counts["running"] += 1
        try:
            row = snap.index_of(node_id)
        except KeyError:
            counts["unknown_node"] += 1
            continue
        req = PodRequest(
            pod_id=pod_id,
            cpu_milli=int(cpu),
            memory_mib=int(mem),
            num_gpu=int(ngpu),
            gpu_milli=int(milli) if ngpu else 0,
            gpu_models=parse_gpu_spec(spec),
            gang_id=gang,
        )
        if alloc.place(req, rows=np.array([row])).placed:
            counts["placed"] += 1
        else:
            counts["does_not_fit"] += 1
    return snap, counts


def fleet_from_lake(lake: Lake, now: datetime) -> LakeFleet:
    """The fleet, snapshot and notes at ``now``; see the module docstring."""
    topology, inv_at = topology_at(lake, now)
    states = node_states(lake, topology, inv_at, now)
    pdbs: dict[str, PdbState] = {}
    if _has(lake, "pdbs"):
        pdbs = pdbs_from_frame(lake.scan("pdbs").filter(pl.col("ts") <= now).collect())
    pods = running_pods(lake, now)
    snap, counts = snapshot_of(topology, pods)
    fleet = FleetState(topology, max(s.observed_at for s in states.values()), states, pdbs)
    notes = {
        "nodes": len(topology),
        "inventory_at": inv_at.isoformat(),
        "observed_at": fleet.observed_at.isoformat(),
        "cordoned": sum(s.cordoned for s in states.values()),
        "under_repair": sum(s.under_repair for s in states.values()),
        "pdbs": len(pdbs),
        "pods": counts,
        "not_in_lake": ["do-not-disrupt labels", "checkpoint schedules", "PDB pod coverage"],
    }
    return LakeFleet(fleet, snap, notes)
