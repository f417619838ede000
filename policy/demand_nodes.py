"""Demand in nodes for the buy policy: node-demand series derived from series in other
units, and how far the forecasts reach against the window each buy needs.

A stock position whose demand is read off a series in other units (GPUs of a GPU model,
say) is bought against ``<region>/<sku>/nodes``: :func:`node_demand_forecasts` derives
that series from the source series' forecasts (quantiles times nodes per unit).
:func:`buy_forecast_coverage` says, per stock position, which window a buy needs
forecasts for (``now`` + lead time to that + the review period) and how far the given
forecasts of its series reach.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from predops.core.contracts import Forecast
from predops.policy.fleet import StockPosition

HOUR = timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class DemandInNodes:
    """A stock position's node demand: ``scale`` nodes per unit of series ``source``,
    bought against series ``target``."""

    target: str
    source: str
    scale: float


def node_demand_forecasts(
    forecasts: Sequence[Forecast], conversions: Sequence[DemandInNodes]
) -> list[Forecast]:
    """Each conversion's ``target`` series from its ``source`` forecasts: the same
    issue and target times, quantiles times ``scale`` (nodes), the same provenance."""
    by_source: dict[str, list[Forecast]] = {}
    for f in forecasts:
        by_source.setdefault(f.series_id, []).append(f)
    return [
        Forecast(
            series_id=c.target,
            issued_at=f.issued_at,
            valid_at=f.valid_at,
            p10=f.p10 * c.scale,
            p50=f.p50 * c.scale,
            p90=f.p90 * c.scale,
            method=f"{f.method} x {c.scale:g} nodes/unit of {c.source}",
            provenance=f.provenance,
        )
        for c in conversions
        for f in by_source.get(c.source, ())
    ]


def buy_forecast_coverage(
    stock: Sequence[StockPosition],
    conversions: Sequence[DemandInNodes],
    forecasts: Sequence[Forecast],
    now: datetime,
    review: timedelta,
) -> dict[str, dict[str, Any]]:
    """Per stock position (key ``sku@region``): the window a buy needs forecasts for
    (``now`` + lead time to that + ``review``) and how far the given forecasts of its
    series reach. ``conversions`` name the series a node series is read from."""
    read_from = {c.target: c.source for c in conversions}
    reach: dict[str, datetime] = {}
    for f in forecasts:
        if f.series_id not in reach or reach[f.series_id] < f.valid_at:
            reach[f.series_id] = f.valid_at
    out: dict[str, dict[str, Any]] = {}
    for p in stock:
        need_from, last = now + p.lead_time, reach.get(p.series_id)
        series = p.series_id
        if series in read_from:
            series = f"{series} (read from {read_from[series]})"
        covered = last is not None and last >= need_from
        note = "covered"
        if last is None:
            note = f"no forecast of {series}"
        elif not covered:
            note = (
                f"the forecasts of {series} reach {(last - now) / HOUR:.0f} h "
                f"ahead (to {last.isoformat()}); a buy needs them from "
                f"{need_from.isoformat()} (lead time {p.lead_time.days} days) to "
                f"{(need_from + review).isoformat()}"
            )
        out[f"{p.sku}@{p.region}"] = {
            "series_id": p.series_id,
            "needed_from": need_from.isoformat(),
            "needed_to": (need_from + review).isoformat(),
            "forecasts_reach": last.isoformat() if last else None,
            "covered": covered,
            "note": note,
        }
    return out
