"""Inventory buys per SKU and region: a newsvendor order over the supplier lead time.

An order placed now lands after the lead time ``L`` and must carry the fleet until the
next order can land, ``L + review_period`` from now. For each :class:`StockPosition`:

- demand: the long-horizon node-demand forecast of the SKU and region (series
  ``<region>/<sku>/nodes`` by default) at its peak p50 inside ``[now + L, now + L +
  review]``, read as a split normal through p10 / p50 / p90;
- critical ratio ``CR = shortage_cost / (shortage_cost + idle_cost)``; the stock to
  hold is the demand's CR-quantile;
- supply: nodes in use + spares on hand + orders arriving by ``now + L`` + the share of
  nodes in repair / RMA that return (``repair_yield``), minus the failures expected
  over the window that do not come back — failures from the annual failure rate, or
  from the current risk scores of the SKU's nodes when those say more;
- buy ``ceil(target - supply)`` rounded up to ``order_multiple``; "buy N of SKU X in
  region R, delivered by D = now + L", with every number in the evidence. Expected
  benefit and cost come from the normal loss function (shortage avoided x shortage
  cost; extra idle stock x idle cost).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from statistics import NormalDist
from typing import Any

from predops.core.actions import Buy, Skip, SkipReason
from predops.core.contracts import FailureRisk, Forecast, Provenance
from predops.policy.config import BuyConfig
from predops.policy.disruption import Decisions, latest_risk
from predops.policy.fleet import FleetState, StockPosition

Z90 = NormalDist().inv_cdf(0.9)
YEAR = timedelta(days=365.25)
_N = NormalDist()


def demand_quantile(p10: float, p50: float, p90: float, q: float) -> float:
    """The ``q``-quantile of a split normal through p10 / p50 / p90 (each side's sigma
    from its own quantile), so skewed forecasts keep their skew."""
    z = _N.inv_cdf(q)
    sigma = (p90 - p50) / Z90 if z >= 0 else (p50 - p10) / Z90
    return p50 + z * sigma


def expected_short(mean: float, sigma: float, stock: float) -> float:
    """E[(X - stock)+] for X ~ Normal(mean, sigma) (nodes short)."""
    if sigma <= 0:
        return max(0.0, mean - stock)
    z = (stock - mean) / sigma
    return sigma * (_N.pdf(z) - z * (1 - _N.cdf(z)))


def expected_idle(mean: float, sigma: float, stock: float) -> float:
    """E[(stock - X)+] for X ~ Normal(mean, sigma) (nodes idle)."""
    return expected_short(mean, sigma, stock) + stock - mean


class InventoryBuyPolicy:
    """Newsvendor purchase per SKU and region; see the module docstring."""

    def __init__(self, config: BuyConfig) -> None:
        self.config = config

    def decide(
        self,
        forecasts: Sequence[Forecast],
        risks: Sequence[FailureRisk],
        fleet: FleetState,
        now: datetime,
    ) -> Decisions:
        out = Decisions()
        by_series: dict[str, list[Forecast]] = {}
        for f in forecasts:
            by_series.setdefault(f.series_id, []).append(f)
        by_risk = latest_risk(risks)
        used: dict[tuple[str, str, str], Provenance] = {}
        seen: set[tuple[str, str]] = set()
        for stock in sorted(fleet.stock, key=lambda s: (s.sku, s.region)):
            if (stock.sku, stock.region) in seen:
                raise ValueError(f"stock {stock.sku}@{stock.region} is given twice")
            seen.add((stock.sku, stock.region))
            self._one(stock, by_series.get(stock.series_id, []), by_risk, fleet, now, out, used)
        out.provenance.extend(used[k] for k in sorted(used))
        return out

    def _one(
        self,
        stock: StockPosition,
        series: Sequence[Forecast],
        by_risk: Mapping[str, FailureRisk],
        fleet: FleetState,
        now: datetime,
        out: Decisions,
        used: dict[tuple[str, str, str], Provenance],
    ) -> None:
        cfg = self.config
        cand = f"{stock.sku}@{stock.region}"
        arrive = now + stock.lead_time
        end = arrive + cfg.review_period
        latest: dict[datetime, Forecast] = {}
        for f in series:
            if arrive <= f.valid_at <= end and (
                f.valid_at not in latest or latest[f.valid_at].issued_at < f.issued_at
            ):
                latest[f.valid_at] = f
        if not latest:
            out.skips.append(
                Skip(
                    "buy",
                    cand,
                    SkipReason.NO_FORECAST,
                    f"no forecast of {stock.series_id} between {arrive.date()} and {end.date()}",
                )
            )
            return
        peak = max(sorted(latest), key=lambda t: latest[t].p50)
        f = latest[peak]
        if f.provenance is None:
            out.skips.append(Skip("buy", cand, SkipReason.NO_PROVENANCE, f"{f.series_id}"))
            return
        if now - f.issued_at > cfg.max_forecast_age:
            out.skips.append(
                Skip("buy", cand, SkipReason.STALE_DATA, f"issued {f.issued_at.isoformat()}")
            )
            return
        p = f.provenance
        used.setdefault((p.model_name, p.model_version, p.feature_set_hash), p)

        cu, co = stock.shortage_cost, stock.idle_cost
        ratio = cu / (cu + co)
        target = demand_quantile(f.p10, f.p50, f.p90, ratio)
        window = end - now
        base_fail = stock.in_use * (1 - (1 - cfg.annual_failure_rate) ** (window / YEAR))
        scored = [
            r
            for n in fleet.topology.nodes
            if (n.sku, n.region) == (stock.sku, stock.region)
            and (r := by_risk.get(n.node_id)) is not None
            and r.provenance is not None
        ]
        risk_fail = sum(r.p_fail for r in scored)
        failures = max(base_fail, risk_fail)
        arriving = sum(q for q, at in stock.on_order if at <= arrive)
        returns = stock.in_repair * cfg.repair_yield
        lost = failures * (1 - cfg.repair_yield)
        supply = stock.in_use + stock.on_hand + arriving + returns - lost
        gap = target - supply
        qty = 0
        if gap > 0:
            qty = math.ceil(gap - 1e-9)
            qty = -(-qty // stock.order_multiple) * stock.order_multiple
        sigma = (f.p90 - f.p10) / (2 * Z90)
        evidence: dict[str, Any] = {
            "series_id": f.series_id,
            "demand_at": peak,
            "demand_p10": f.p10,
            "demand_p50": f.p50,
            "demand_p90": f.p90,
            "forecast_method": f.method,
            "shortage_cost": cu,
            "idle_cost": co,
            "critical_ratio": round(ratio, 4),
            "target_stock": round(target, 3),
            "in_use": stock.in_use,
            "on_hand": stock.on_hand,
            "on_order_by_arrival": arriving,
            "in_repair": stock.in_repair,
            "repair_returns": round(returns, 3),
            "expected_failures": round(failures, 3),
            "failures_from": "risk_scores" if risk_fail > base_fail else "annual_failure_rate",
            "failures_not_returning": round(lost, 3),
            "supply": round(supply, 3),
            "gap": round(gap, 3),
            "lead_time_days": stock.lead_time / timedelta(days=1),
            "window_days": window / timedelta(days=1),
            "provenance": p.to_dict(),
        }
        if qty <= 0:
            out.skips.append(
                Skip(
                    "buy",
                    cand,
                    SkipReason.NOT_NEEDED,
                    f"supply {supply:.1f} covers the {ratio:.0%} quantile {target:.1f}",
                )
            )
            return
        short0 = expected_short(f.p50, sigma, supply)
        short1 = expected_short(f.p50, sigma, supply + qty)
        idle0 = expected_idle(f.p50, sigma, supply)
        idle1 = expected_idle(f.p50, sigma, supply + qty)
        out.actions.append(
            Buy(
                target=stock.sku,
                region=stock.region,
                quantity=qty,
                by_date=arrive.date(),
                reason=(
                    f"buy {qty} of {stock.sku} in {stock.region} by {arrive.date()}: the "
                    f"{ratio:.0%} quantile of demand ({target:.1f} nodes at {peak.date()}) "
                    f"exceeds supply {supply:.1f} by {gap:.1f}"
                ),
                evidence=evidence,
                not_before=now,
                expires=now + timedelta(days=1),
                expected_benefit=round(cu * (short0 - short1), 4),
                expected_cost=round(co * (idle1 - idle0), 4),
            )
        )
