"""The fleet risk board's data: where each node sits (the lake's inventory) joined with
its current risk, summarised per rack for the heat map and listed riskiest first."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl

from predops.pipelines.workspace.fleet_state import latest_as_of
from predops.pipelines.workspace.lake import Lake
from predops.serving.dashboards.node_state import READY, NodeState
from predops.serving.dashboards.risk import FleetRisk

PLACEMENT = ("node_id", "pool", "sku", "gpu_model", "region", "zone", "spine", "rack")


def inventory_at(lake_dir: Path, now: datetime) -> pl.DataFrame:
    """Each node's latest inventory row at or before ``now`` (columns :data:`PLACEMENT`);
    empty when the lake has no inventory."""
    lake = Lake(lake_dir)
    if not lake.files("inventory"):
        return pl.DataFrame(schema=dict.fromkeys(PLACEMENT, pl.String))
    return latest_as_of(lake, "inventory", now, "node_id").select(PLACEMENT).collect()


@dataclass(frozen=True, slots=True)
class RackCell:
    spine: str
    rack: str
    position: str
    """The rack's name within its spine (``rk03`` of ``rg-1a-sp01-rk03``)."""
    nodes: int
    scored: int
    p_max: float | None
    p_mean: float | None
    pools: str


def rack_cells(inventory: pl.DataFrame, risk: FleetRisk) -> list[RackCell]:
    """One cell per rack: its nodes, how many were scored, max and mean p_fail (one
    polars group-by over the fleet, not a Python loop per rack)."""
    if inventory.height == 0:
        return []
    scores = pl.DataFrame(
        {"node_id": [r.node_id for r in risk.risks], "p": [r.p_fail for r in risk.risks]},
        schema={"node_id": pl.String, "p": pl.Float64},
    )
    per_rack = (
        inventory.select("node_id", "spine", "rack", "pool")
        .join(scores, on="node_id", how="left")
        .group_by("spine", "rack", maintain_order=True)
        .agg(
            pl.len().alias("nodes"),
            pl.col("p").count().alias("scored"),
            pl.col("p").max().alias("p_max"),
            pl.col("p").mean().alias("p_mean"),
            pl.col("pool").cast(pl.String).unique().sort().alias("pools"),
        )
    )
    cells = []
    for spine, rack, nodes, scored, p_max, p_mean, pools in per_rack.iter_rows():
        position = str(rack).removeprefix(f"{spine}-") if rack else "?"
        cells.append(
            RackCell(
                spine=str(spine),
                rack=str(rack),
                position=position,
                nodes=nodes,
                scored=scored,
                p_max=p_max,
                p_mean=p_mean,
                pools=", ".join(str(p) for p in pools),
            )
        )
    return sorted(cells, key=lambda c: (c.spine, c.position))


def top_nodes(
    inventory: pl.DataFrame,
    risk: FleetRisk,
    n: int = 25,
    states: Mapping[str, NodeState] | None = None,
) -> list[dict[str, Any]]:
    """The ``n`` riskiest scored nodes with placement, state and reasons (riskiest
    first); ``states`` from :func:`~predops.serving.dashboards.node_state.node_states`
    (``ready`` when not given)."""
    where = {r["node_id"]: r for r in inventory.iter_rows(named=True)}
    out = []
    for r in risk.risks[:n]:
        place = where.get(r.node_id, {})
        out.append(
            {
                "node_id": r.node_id,
                "p_fail": r.p_fail,
                "pool": place.get("pool"),
                "rack": place.get("rack"),
                "sku": place.get("sku"),
                "reasons": [x.text for x in r.reasons],
                "state": (states or {}).get(r.node_id, READY),
            }
        )
    return out
