"""The capacity page's words and units: the unit of every figure in a resize or buy
evidence, and the buy plan's reach (each SKU's lead time, the window a buy needs
forecasts for, how far the weekly model's forecasts reach) with an empty state that
says which of them kept the plan from buying.

No currency is configured anywhere in predops: costs and benefits are policy cost
units, one GPU-hour each (:class:`predops.policy.config.CostModel`), shown as
"GPU-h equivalent".
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

COST_UNIT = "GPU-h equivalent"
COST_TITLE = "policy cost units: 1 = one GPU-hour, a CPU core-hour 0.02 (CostModel)"

_EXACT = {
    "current": "nodes",
    "target": "nodes",
    "usage_floor": "nodes",
    "failure_buffer": "nodes",
    "out_of_service": "nodes",
    "nodes_for_demand": "nodes",
    "total_nodes": "nodes",
    "new_nodes": "nodes",
    "from_nodes": "nodes",
    "to_nodes": "nodes",
    "busy_nodes": "nodes",
    "expected_failures": "nodes",
    "failures_not_returning": "nodes",
    "in_use": "nodes",
    "on_hand": "nodes",
    "on_order_by_arrival": "nodes",
    "in_repair": "nodes",
    "repair_returns": "nodes",
    "supply": "nodes",
    "gap": "nodes",
    "target_stock": "nodes",
    "demand_p10": "nodes",
    "demand_p50": "nodes",
    "demand_p90": "nodes",
    "placed_on_existing": "pods",
    "placed_on_new": "pods",
    "packed_pods": "pods",
    "growth_pods": "pods",
    "growth_on_busy_nodes": "pods",
    "pods": "pods",
    "window_h": "h",
    "lead_time_days": "days",
    "window_days": "days",
    "critical_ratio": "share",
    "gpu_allocation_ratio": "share",
    "frag_ratio": "share",
}


def evidence_unit(key: str) -> str:
    """The unit of an evidence figure by its key ("" for a time, a name or a count
    without one): nodes, pods, GPUs, cores, hours, days, or the cost unit."""
    k = key.lower()
    if k in _EXACT:
        return _EXACT[k]
    if "cost" in k or "benefit" in k:
        return COST_UNIT
    if k.endswith("_at") or k.endswith("_id") or k in ("method", "anchored", "failures_from"):
        return ""
    if "gpus" in k or k.endswith("_gpu"):
        return "GPUs"
    if "cpu_cores" in k or k.endswith("_cores"):
        return "cores"
    if k.endswith("_nodes") or k.startswith("nodes"):
        return "nodes"
    if k.endswith("_h") or k.endswith("_hours"):
        return "h"
    if k.endswith("_days"):
        return "days"
    return ""


def _at(text: Any) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def _span(d: timedelta) -> str:
    days = d / timedelta(days=1)
    if days >= 14:
        return f"{days / 7:.0f} weeks"
    if days >= 2:
        return f"{days:.0f} days"
    return f"{d / timedelta(hours=1):.0f} h"


def buy_reach(plan: dict[str, Any]) -> dict[str, Any]:
    """Per SKU and region: lead time, the window a buy needs forecasts for, how far
    the forecasts reach and whether they cover it (``rows``); the weekly model's
    status (``model``, ``problem``) and how far it forecasts (``reach``)."""
    inputs = plan.get("inputs") or {}
    now = _at(plan.get("data_cutoff")) or _at(plan.get("created_at"))
    note = inputs.get("buy_forecast_model") or {}
    rows = []
    for key, c in sorted((inputs.get("buy_forecasts") or {}).items()):
        need_from, need_to, reach = (
            _at(c.get("needed_from")),
            _at(c.get("needed_to")),
            _at(c.get("forecasts_reach")),
        )
        rows.append(
            {
                "sku": key,
                "series_id": c.get("series_id"),
                "lead_time": _span(need_from - now) if need_from and now else "—",
                "needed_from": need_from,
                "needed_to": need_to,
                "reach": _span(reach - now) if reach and now else None,
                "reach_at": reach,
                "covered": bool(c.get("covered")),
                "note": c.get("note", ""),
            }
        )
    reaches = [r["reach_at"] for r in rows if r["reach_at"] is not None]
    model = None
    problem = None
    if note.get("status") == "ok":
        model = f"{note.get('model', 'the weekly model')} v{note.get('version', '?')}"
    elif note:
        problem = (
            f"no weekly demand model registered ({note.get('note', note.get('status'))}): "
            "train it with `predops train demand --config weekly`; buys need forecasts "
            "that reach past each SKU's lead time"
        )
    return {
        "rows": rows,
        "model": model,
        "problem": problem,
        "reach": _span(max(reaches) - now) if reaches and now else None,
    }


def no_buy_headline(reach: dict[str, Any], buy_skips: list[dict[str, Any]]) -> str | None:
    """The empty state of a buy plan with no buys: how far the forecasts reach and
    that no SKU needs a buy within its lead time, or what is missing (None when there
    are buys, or nothing to say beyond the skips)."""
    if reach["problem"]:
        return str(reach["problem"])
    if not reach["rows"]:
        return None
    short = [r for r in reach["rows"] if not r["covered"]]
    lead = f"the weekly model ({reach['model']})" if reach["model"] else "the buy forecasts"
    span = f"forecasts {reach['reach']}" if reach["reach"] else "forecasts no SKU's series"
    if short:
        names = ", ".join(r["sku"] for r in short[:5]) + (" …" if len(short) > 5 else "")
        return (
            f"{lead} {span}; that does not reach past the lead time of {names}, so "
            "those were not considered for a buy (see each row's note)"
        )
    not_needed = [s for s in buy_skips if s.get("reason") == "not_needed"]
    if len(not_needed) == len(buy_skips):
        return f"{lead} {span}; no SKU needs a buy within its lead time"
    return f"{lead} {span}; the SKUs not bought are listed with why"
