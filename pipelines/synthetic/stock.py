"""The synthetic fleet's procurement export: spares per SKU and region, one open order.

What a platform team's procurement / asset system would export daily (``stock`` and
``purchase_orders`` tables, ``core.schemas``). Every number here is an assumption (no
trace in ``../shared/data`` measures spares or lead times), documented in
``data/README.md`` section "Stock and purchase orders":

- spares on hand: :data:`SPARE_SHARE` of the SKU's nodes in the region, at least one;
- supplier lead time per SKU (:data:`LEAD_TIME_DAYS`): 8-12 weeks for 8-GPU servers,
  6 weeks for CPU servers;
- GPU servers are ordered by the rack (the SKU's nodes per rack), CPU servers singly;
- shortage / idle costs left null, so the planner's documented defaults apply;
- demand read off the SKU's own demand series (pool x GPU model in GPUs, or the pool's
  CPU cores), ``demand_scale`` = the region's share of the SKU's nodes / the units one
  node holds, so the buy policy sees nodes;
- one open purchase order: one order multiple of the GPU SKU with the most nodes,
  placed :data:`ORDER_PLACED_BEFORE` the simulation start and due a lead time later.

Snapshots are daily from the start; spares do not change inside the run (the
simulator repairs failed nodes in place and never racks a spare).
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

import numpy as np
import polars as pl

from predops.core.schemas import PURCHASE_ORDERS, STOCK
from predops.pipelines.synthetic.demand import SeriesSpec
from predops.pipelines.synthetic.topology import SKUS, Fleet

SPARE_SHARE = 0.03
"""Spare nodes on hand per node in service (3 %)."""
LEAD_TIME_DAYS: dict[str, float] = {
    "cpu-std-96c": 42.0,
    "cpu-mem-128c": 42.0,
    "gpu-a100-8x": 70.0,
    "gpu-h800-8x": 84.0,
    "gpu-a800-8x": 84.0,
    "gpu-a10-8x": 56.0,
}
"""Supplier lead time per SKU, order to node in service, in days."""
ORDER_PLACED_BEFORE = timedelta(days=14)
"""The open order was placed this long before the simulation starts."""


def _snapshot_times(start: datetime, horizon_s: float) -> list[datetime]:
    return [start + timedelta(days=d) for d in range(max(1, math.ceil(horizon_s / 86400.0)))]


def _series_of_sku(specs: list[SeriesSpec]) -> dict[int, SeriesSpec]:
    out: dict[int, SeriesSpec] = {}
    for s in specs:
        if s.sku in out:
            raise ValueError(f"SKU {SKUS[s.sku].name} serves two demand series")
        out[s.sku] = s
    return out


def _positions(fleet: Fleet) -> dict[tuple[int, str], int]:
    """Nodes per (SKU index, region), in SKU then region order."""
    region = np.array(fleet.rack_region, dtype=object)[fleet.rack]
    out: dict[tuple[int, str], int] = {}
    for k in sorted(set(fleet.sku.tolist())):
        for r in sorted(set(region[fleet.sku == k])):
            out[(k, str(r))] = int(((fleet.sku == k) & (region == r)).sum())
    return out


def _order_multiple(k: int) -> int:
    sku = SKUS[k]
    return sku.nodes_per_rack if sku.gpus else 1


def _the_order(fleet: Fleet, start: datetime) -> tuple[int, str, int, datetime] | None:
    """(SKU index, region, nodes, expected delivery) of the one order, if any GPU node."""
    positions = {kr: n for kr, n in _positions(fleet).items() if SKUS[kr[0]].gpus}
    if not positions:
        return None
    (k, region), _ = max(positions.items(), key=lambda kv: (kv[1], SKUS[kv[0][0]].name))
    expected = start - ORDER_PLACED_BEFORE + timedelta(days=LEAD_TIME_DAYS[SKUS[k].name])
    return k, region, _order_multiple(k), expected


def stock_frame(
    fleet: Fleet, specs: list[SeriesSpec], start: datetime, horizon_s: float
) -> pl.DataFrame:
    """The STOCK table: one row per SKU, region and daily snapshot (the order's nodes
    join the spares once delivered)."""
    series = _series_of_sku(specs)
    order = _the_order(fleet, start)
    positions = _positions(fleet)
    total = {k: sum(n for (j, _), n in positions.items() if j == k) for k, _ in positions}
    rows = []
    for ts in _snapshot_times(start, horizon_s):
        for (k, region), n in positions.items():
            spec = series[k]
            delivered = 0
            if order is not None and order[:2] == (k, region) and ts >= order[3]:
                delivered = order[2]
            rows.append(
                {
                    "ts": ts,
                    "sku": SKUS[k].name,
                    "region": region,
                    "on_hand": max(1, math.ceil(SPARE_SHARE * n)) + delivered,
                    "lead_time_days": LEAD_TIME_DAYS[SKUS[k].name],
                    "shortage_cost": None,
                    "idle_cost": None,
                    "order_multiple": _order_multiple(k),
                    "demand_series": spec.series_id,
                    "demand_scale": n / total[k] / spec.per_node,
                }
            )
    return pl.DataFrame(rows, schema=STOCK.polars_schema())


def purchase_orders_frame(fleet: Fleet, start: datetime, horizon_s: float) -> pl.DataFrame:
    """The PURCHASE_ORDERS table: the one order's daily export rows (open until its
    expected delivery, then delivered), or none for a fleet without GPU nodes."""
    order = _the_order(fleet, start)
    if order is None:
        return PURCHASE_ORDERS.empty()
    k, region, nodes, expected = order
    ordered = start - ORDER_PLACED_BEFORE
    rows = [
        {
            "ts": ts,
            "po_id": f"PO-{ordered:%Y%m%d}-{SKUS[k].name}-{region}",
            "sku": SKUS[k].name,
            "region": region,
            "nodes": nodes,
            "ordered_at": ordered,
            "expected_at": expected,
            "status": "open" if ts < expected else "delivered",
        }
        for ts in _snapshot_times(start, horizon_s)
    ]
    return pl.DataFrame(rows, schema=PURCHASE_ORDERS.polars_schema())
