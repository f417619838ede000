"""What each page's filters offer and keep: the values a filter offers come from the
page's own data (the inventory's pools and racks, the demand series' resources, the
plan's action kinds), and a chosen filter keeps the rows that match it. The query
parameters themselves are read by :mod:`predops.serving.dashboards.view`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl

from predops.policy.lending import Loan
from predops.serving.dashboards import fleet, node_state, view

NODE_KINDS = frozenset(
    {"cordon", "drain", "uncordon", "soft_taint", "remove_soft_taint", "set_reclaimable"}
)
"""Plan candidates whose target is a node (the rest target a pool or a SKU)."""
POOL_KINDS = frozenset({"resize_pool", "lend_nodes", "return_nodes"})
"""Plan candidates whose target is a pool."""
STATES = node_state.WORDS
"""A node's state as the plan filter offers it (:class:`~predops.serving.dashboards.
node_state.NodeState`'s ``word``: "cordoned by <owner>" is ``cordoned``)."""


def offered(frame: pl.DataFrame, columns: Iterable[str], limit: int) -> dict[str, list[str]]:
    """Per column of ``frame`` (those it has): its distinct values as text, sorted, at
    most ``limit``."""
    return {
        c: sorted(str(v) for v in frame[c].drop_nulls().unique().to_list())[:limit]
        for c in columns
        if c in frame.columns
    }


def distinct(rows: Iterable[Mapping[str, Any]], key: str) -> list[str]:
    """The distinct non-empty values of ``key`` over ``rows``, sorted."""
    return sorted({str(r[key]) for r in rows if r.get(key) not in (None, "")})


def matching(rows: Sequence[Mapping[str, Any]], chosen: Mapping[str, str]) -> list[Any]:
    """The rows whose value of every chosen key equals the chosen value."""
    return [r for r in rows if all(str(r.get(k)) == v for k, v in chosen.items())]


def plan_targets(plan: Mapping[str, Any]) -> list[str]:
    """The node ids the plan's actions and skips name."""
    rows = [*plan.get("actions", []), *plan.get("skips", [])]
    return sorted({str(r["target"]) for r in rows if r.get("kind") in NODE_KINDS})


def place_candidates(
    plan: Mapping[str, Any],
    where: Mapping[str, Mapping[str, Any]],
    states: Mapping[str, node_state.NodeState],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The plan's actions and skips, each with the ``pool``, ``rack`` and ``state`` the
    filters test: a node candidate's from the inventory (``where``: node id -> row) and
    ``states``; a pool candidate's pool is its target; the rest have none."""

    def placed(row: Mapping[str, Any]) -> dict[str, Any]:
        target = str(row.get("target"))
        if row.get("kind") in NODE_KINDS:
            place = where.get(target, {})
            return {
                **row,
                "pool": place.get("pool"),
                "rack": place.get("rack"),
                "state": states.get(target, node_state.READY).word,
            }
        pool = target if row.get("kind") in POOL_KINDS else None
        return {**row, "pool": pool, "rack": None, "state": None}

    return [placed(a) for a in plan.get("actions", [])], [placed(s) for s in plan.get("skips", [])]


PLAN_FILTERS = ("kind", "pool", "rack", "state")
"""The plan page's filters: action kind, pool, rack and node state."""


def plan_view(
    plan: Mapping[str, Any],
    params: Mapping[str, str],
    lake_dir: Path,
    now: datetime,
    *,
    loans: Mapping[str, Loan] | None = None,
) -> tuple[dict[str, Any], list[view.Filter]]:
    """The plan with only the actions and skips its filters keep, and the filters.
    Pools and racks come from the inventory at ``now``; node states (read from the
    lake's events and pods and ``loans``, only when the state filter is set) as
    :data:`STATES`."""
    inventory = fleet.inventory_at(lake_dir, now)
    where = {
        r["node_id"]: r for r in inventory.select("node_id", "pool", "rack").iter_rows(named=True)
    }
    rows = [*plan.get("actions", []), *plan.get("skips", [])]
    pools = set(offered(inventory, ["pool"], len(where)).get("pool", []))
    pools |= {str(r["target"]) for r in rows if r.get("kind") in POOL_KINDS}
    found = view.filters(
        params,
        {
            "kind": distinct(rows, "kind"),
            "pool": sorted(pools),
            "rack": offered(inventory, ["rack"], len(where)).get("rack", []),
            "state": list(STATES),
        },
        labels={"kind": "action kind", "state": "node state"},
    )
    chosen = view.chosen(found)
    if not chosen:
        return dict(plan), found
    states = (
        node_state.node_states(lake_dir, plan_targets(plan), now, loans=loans)
        if "state" in chosen
        else {}
    )
    actions, skips = place_candidates(plan, where, states)
    return {**plan, "actions": matching(actions, chosen), "skips": matching(skips, chosen)}, found


def capacity_view(
    series: list[dict[str, Any]], sizing: list[dict[str, Any]], params: Mapping[str, str]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[view.Filter]]:
    """The demand series and pool-sizing rows the capacity page's filters keep, and the
    filters: pools offered are those with a series or a sizing row; a GPU model keeps
    the pools that have a series of it."""
    pools = sorted({*distinct(series, "pool"), *distinct(sizing, "pool")})
    found = view.filters(params, {"pool": pools, "gpu_model": distinct(series, "gpu_model")})
    chosen = view.chosen(found)
    series = matching(series, chosen)
    with_model = {r["pool"] for r in series}
    sizing = [
        r
        for r in sizing
        if r["pool"] == chosen.get("pool", r["pool"])
        and ("gpu_model" not in chosen or r["pool"] in with_model)
    ]
    return series, sizing, found
