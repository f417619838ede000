"""Node demand derived from series in other units, and how far forecasts reach against
the window a buy needs (the arithmetic; ``tests/pipelines/workspace/test_fleet_state``
checks the conversions the lake's stock table yields reach it)."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given
from hypothesis import strategies as st

from predops.core.contracts import Forecast
from predops.policy.demand_nodes import (
    DemandInNodes,
    buy_forecast_coverage,
    node_demand_forecasts,
)
from predops.policy.fleet import StockPosition
from tests.policy.factories import T0, prov

DAY = timedelta(days=1)
H = timedelta(hours=1)
H800 = DemandInNodes("eu/gpu-h8/nodes", "train/gpus/H800", 0.125)


def position(sku: str, lead_days: int = 84, **kw: object) -> StockPosition:
    base: dict[str, object] = {
        "sku": sku,
        "region": "eu",
        "in_use": 4,
        "lead_time": lead_days * DAY,
        "shortage_cost": 9.0,
        "idle_cost": 1.0,
    }
    base.update(kw)
    return StockPosition(**base)  # type: ignore[arg-type]


def gpu_forecasts(*hours: int) -> list[Forecast]:
    pv = prov(name="demand")
    return [Forecast(H800.source, T0, T0 + h * H, 16.0, 24.0, 40.0, "m", pv) for h in hours]


def test_node_demand_is_the_source_times_nodes_per_unit() -> None:
    first, last = node_demand_forecasts(gpu_forecasts(1, 48), [H800])
    assert (first.series_id, first.p10, first.p50, first.p90) == ("eu/gpu-h8/nodes", 2.0, 3.0, 5.0)
    assert first.provenance == prov(name="demand") and last.valid_at == T0 + 48 * H
    assert first.issued_at == T0 and first.method == "m x 0.125 nodes/unit of train/gpus/H800"


def test_series_without_a_conversion_yield_nothing() -> None:
    other = Forecast("web/cpu", T0, T0 + H, 1.0, 2.0, 3.0)
    assert node_demand_forecasts([other], [H800]) == []
    assert node_demand_forecasts(gpu_forecasts(1), []) == []


@given(st.floats(min_value=0.0, max_value=64.0), st.lists(st.integers(1, 1000), max_size=5))
def test_scaled_quantiles_stay_ordered(scale: float, hours: list[int]) -> None:
    conv = DemandInNodes("eu/x/nodes", H800.source, scale)
    out = node_demand_forecasts(gpu_forecasts(*hours), [conv])
    assert len(out) == len(hours)
    assert all(f.p10 <= f.p50 <= f.p90 for f in out)


def test_coverage_names_the_window_and_the_series_read_from() -> None:
    nodes = node_demand_forecasts(gpu_forecasts(1, 48), [H800])
    stock = [position("gpu-h8", demand_series=H800.target), position("cpu-96")]
    cover = buy_forecast_coverage(stock, [H800], nodes, T0, 30 * DAY)
    gpu = cover["gpu-h8@eu"]
    assert gpu["covered"] is False and gpu["series_id"] == "eu/gpu-h8/nodes"
    assert gpu["needed_from"] == (T0 + 84 * DAY).isoformat()
    assert gpu["needed_to"] == (T0 + 114 * DAY).isoformat()
    assert gpu["forecasts_reach"] == (T0 + 48 * H).isoformat()
    assert gpu["note"].startswith(
        "the forecasts of eu/gpu-h8/nodes (read from train/gpus/H800) reach 48 h ahead"
    )
    assert "lead time 84 days" in gpu["note"]
    assert cover["cpu-96@eu"]["note"] == "no forecast of eu/cpu-96/nodes"
    assert cover["cpu-96@eu"]["forecasts_reach"] is None


def test_forecasts_reaching_the_lead_time_cover_the_buy() -> None:
    far = [Forecast("eu/gpu-h8/nodes", T0, T0 + 90 * DAY, 1.0, 2.0, 3.0)]
    cover = buy_forecast_coverage([position("gpu-h8")], [], far, T0, 30 * DAY)
    assert cover["gpu-h8@eu"]["covered"] is True and cover["gpu-h8@eu"]["note"] == "covered"
