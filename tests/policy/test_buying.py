"""Inventory buys: newsvendor quantity from costs, quantiles, failures, repair and stock."""

from __future__ import annotations

import math
from datetime import timedelta

import numpy as np
import pytest

from predops.allocator.snapshot import ClusterSnapshot
from predops.core.actions import Buy, Plan, SkipReason
from predops.policy.buying import demand_quantile, expected_idle, expected_short
from predops.policy.config import Budgets
from predops.policy.engine import plan
from predops.policy.fleet import StockPosition
from tests.policy.factories import T0, clock, forecast, make_fleet, pool_node

DAY = timedelta(days=1)


def stock(**kw: object) -> StockPosition:
    base: dict[str, object] = {
        "sku": "h100x8",
        "region": "eu",
        "in_use": 100,
        "on_hand": 5,
        "lead_time": 60 * DAY,
        "shortage_cost": 9.0,
        "idle_cost": 1.0,
    }
    base.update(kw)
    return StockPosition(**base)  # type: ignore[arg-type]


def buy_plan(
    *positions: StockPosition, p10: float = 100, p50: float = 120, p90: float = 150
) -> Plan:
    from predops.core.contracts import Forecast
    from tests.policy.factories import prov

    fc = [
        Forecast("eu/h100x8/nodes", T0, T0 + 70 * DAY, p10, p50, p90, provenance=prov()),
        Forecast("eu/h100x8/nodes", T0, T0 + 400 * DAY, 0, 500, 900, provenance=prov()),
    ]
    nodes = [pool_node("n0")]
    return plan(
        [], fc, ClusterSnapshot(nodes), make_fleet(nodes, stock=positions), Budgets(), clock()
    )


def test_buy_n_of_sku_by_date_with_the_numbers() -> None:
    p = buy_plan(stock())
    [b] = [a for a in p.actions if isinstance(a, Buy)]
    ev = b.evidence
    assert ev["critical_ratio"] == 0.9 and ev["target_stock"] == pytest.approx(150, abs=1e-6)
    fails = 100 * (1 - 0.95 ** (90 / 365.25))  # window = lead 60 d + review 30 d
    supply = 100 + 5 - fails * 0.2
    assert ev["supply"] == pytest.approx(supply, abs=1e-3)
    assert b.quantity == math.ceil(150 - supply)
    assert b.by_date == (T0 + 60 * DAY).date() and b.region == "eu"
    assert f"buy {b.quantity} of h100x8 in eu by {b.by_date}" in b.reason
    assert b.expected_benefit and b.expected_cost and b.expected_benefit > b.expected_cost


def test_order_multiple_on_order_and_repair_pipeline() -> None:
    [b] = buy_plan(stock(order_multiple=8)).actions
    assert isinstance(b, Buy) and b.quantity % 8 == 0 and b.quantity >= 46
    arriving = stock(on_order=((30, T0 + 10 * DAY), (100, T0 + 90 * DAY)), in_repair=10)
    [b2] = buy_plan(arriving).actions
    assert isinstance(b2, Buy)
    # only the delivery inside the lead time counts; 8 of 10 repairs come back
    assert b2.evidence["on_order_by_arrival"] == 30 and b2.evidence["repair_returns"] == 8
    assert b2.quantity == math.ceil(150 - (105 + 30 + 8 - b2.evidence["failures_not_returning"]))


def test_no_buy_when_stock_covers_the_critical_quantile() -> None:
    p = buy_plan(stock(shortage_cost=1.0, idle_cost=1.0, on_hand=25))  # CR 0.5 -> p50 = 120
    assert not p.actions
    [s] = [s for s in p.skips if s.kind == "buy"]
    assert (s.kind, s.target, s.reason) == ("buy", "h100x8@eu", SkipReason.NOT_NEEDED)


def test_two_regions_of_one_sku_are_two_candidates() -> None:
    p = buy_plan(stock(), stock(region="us"))
    assert [a.candidate for a in p.actions] == ["h100x8@eu"]
    assert [(s.target, s.reason) for s in p.skips if s.kind == "buy"] == [
        ("h100x8@us", SkipReason.NO_FORECAST)
    ]


def test_quantiles_and_loss_functions_match_sampling() -> None:
    assert demand_quantile(100, 120, 150, 0.9) == pytest.approx(150)
    assert demand_quantile(100, 120, 150, 0.1) == pytest.approx(100)
    assert demand_quantile(100, 120, 150, 0.5) == pytest.approx(120)
    x = np.random.default_rng(0).normal(120, 20, 400_000)
    for s in (90.0, 120.0, 160.0):
        assert expected_short(120, 20, s) == pytest.approx(np.maximum(x - s, 0).mean(), rel=0.02)
        assert expected_idle(120, 20, s) == pytest.approx(np.maximum(s - x, 0).mean(), rel=0.02)


def test_stale_or_unprovenanced_forecast_buys_nothing() -> None:
    nodes = [pool_node("n0")]
    for fc, reason in (
        (
            forecast("eu/h100x8/nodes", T0 + 70 * DAY, 120, provenance=None),
            SkipReason.NO_PROVENANCE,
        ),
        (
            forecast("eu/h100x8/nodes", T0 + 70 * DAY, 120, issued_at=T0 - 8 * DAY),
            SkipReason.STALE_DATA,
        ),
    ):
        p = plan(
            [], [fc], ClusterSnapshot(nodes), make_fleet(nodes, stock=[stock()]), Budgets(), clock()
        )
        assert [s.reason for s in p.skips if s.kind == "buy"] == [reason]


def test_buys_read_the_procurement_forecasts_when_given_apart() -> None:
    """``buy_forecast`` (the weekly model's) feeds the buys; ``forecast`` (the hourly
    model's, hours ahead) does not reach the lead time, so alone it buys nothing."""
    from predops.core.contracts import Forecast
    from tests.policy.factories import prov

    weekly = prov(name="predops.demand.weekly")
    hourly = [
        Forecast(
            "eu/h100x8/nodes",
            T0,
            T0 + k * timedelta(hours=1),
            90,
            100,
            110,
            provenance=prov(name="predops.demand.hourly"),
        )
        for k in range(1, 49)
    ]
    far = [Forecast("eu/h100x8/nodes", T0, T0 + 70 * DAY, 100, 120, 150, "weekly", weekly)]
    nodes = [pool_node("n0")]
    fleet = make_fleet(nodes, stock=(stock(),))

    alone = plan([], hourly, ClusterSnapshot(nodes), fleet, Budgets(), clock())
    assert [s.reason for s in alone.skips if s.kind == "buy"] == [SkipReason.NO_FORECAST]
    both = plan([], hourly, ClusterSnapshot(nodes), fleet, Budgets(), clock(), buy_forecast=far)
    [b] = [a for a in both.actions if isinstance(a, Buy)]
    assert b.evidence["provenance"]["model_name"] == "predops.demand.weekly"
    assert b.evidence["forecast_method"] == "weekly"
