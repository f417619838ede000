"""``fleet_from_lake`` stock positions on a small hand-made lake: spares from the latest
``stock`` row, nodes in use / in repair from the inventory and events, open orders from
the latest ``purchase_orders`` row, default costs and node-demand conversions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from predops.core.clock import FixedClock
from predops.core.contracts import Forecast, Provenance
from predops.core.schemas import INVENTORY, PURCHASE_ORDERS, STOCK
from predops.pipelines.ingest.batch import Batch
from predops.pipelines.ingest.run import ingest
from predops.pipelines.workspace.fleet_state import IDLE_SHARE, fleet_from_lake
from predops.pipelines.workspace.lake import Lake
from predops.policy.demand_nodes import buy_forecast_coverage, node_demand_forecasts

T0 = datetime(2026, 5, 1, tzinfo=UTC)
NOW = T0 + timedelta(days=10)
DAY = timedelta(days=1)


def _inventory() -> pl.DataFrame:
    """Four 8-GPU ``gpu-h8`` nodes in ``eu`` (n0..n3), one 96-core ``cpu-96`` node."""
    rows = []
    for i, (sku, gpus, cpu) in enumerate([("gpu-h8", 8, 192_000)] * 4 + [("cpu-96", 0, 96_000)]):
        rows.append(
            {
                "ts": T0,
                "node_id": f"n{i}",
                "pool": "train" if gpus else "web",
                "sku": sku,
                "gpu_model": "H800" if gpus else None,
                "gpus": gpus,
                "cpu_milli": cpu,
                "memory_mib": 1 << 20,
                "numa_nodes": 2,
                "nvlink_domain": None,
                "region": "eu",
                "zone": "eu-a",
                "spine": "sp1",
                "rack": f"rk{i // 2}",
                "installed_at": None,
            }
        )
    return pl.DataFrame(rows).cast(INVENTORY.polars_schema())  # type: ignore[arg-type]


def _stock() -> pl.DataFrame:
    """Two snapshots of gpu-h8@eu (the later one before NOW wins; one after NOW is
    ignored), one of cpu-96@eu with every optional field null."""
    return pl.DataFrame(
        {
            "ts": [T0, T0 + 5 * DAY, NOW + DAY, T0],
            "sku": ["gpu-h8", "gpu-h8", "gpu-h8", "cpu-96"],
            "region": ["eu"] * 4,
            "on_hand": [5, 2, 9, 1],
            "lead_time_days": [70.0, 84.0, 1.0, 42.0],
            "shortage_cost": [1000.0, 5000.0, 1.0, None],
            "idle_cost": [100.0, 1200.0, 1.0, None],
            "order_multiple": [4, 4, 1, None],
            "demand_series": ["train/gpus/H800"] * 3 + [None],
            "demand_scale": [0.125] * 3 + [None],
        }
    )


def _orders() -> pl.DataFrame:
    """po-1 open (arrives in 30 days), po-2 delivered by its latest row, po-3 open but
    late, po-4 open only after NOW (not known yet)."""
    return pl.DataFrame(
        {
            "ts": [T0, T0, T0 + 8 * DAY, T0, NOW + DAY],
            "po_id": ["po-1", "po-2", "po-2", "po-3", "po-4"],
            "sku": ["gpu-h8"] * 5,
            "region": ["eu"] * 5,
            "nodes": [4, 8, 8, 2, 16],
            "ordered_at": [T0 - 40 * DAY] * 5,
            "expected_at": [NOW + 30 * DAY, NOW - DAY, NOW - DAY, NOW - 2 * DAY, NOW + 60 * DAY],
            "status": ["open", "open", "delivered", "open", "open"],
        }
    )


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    lake = Lake(tmp_path / "lake")
    events = pl.DataFrame(
        {
            "node_id": ["n1", "n2", "n2", "n3"],
            "kind": ["failure", "failure", "repair", "cordon"],
            "at": [NOW - 3 * DAY, NOW - 3 * DAY, NOW - DAY, NOW - DAY],
            "cause": ["gpu_ecc", "psu", "psu", "predops"],
            "detail": [None] * 4,
        },
        schema_overrides={"at": pl.Datetime("us", "UTC")},
    )
    batches = [
        Batch("inventory", _inventory()),
        Batch("events", events),
        Batch("stock", _stock()),
        Batch("purchase_orders", _orders()),
    ]
    report = ingest(lake, "test", batches, clock=FixedClock(NOW + 2 * DAY), input_name="hand")
    assert report.rows_quarantined == 0
    return lake


def test_stock_and_orders_round_trip_through_the_lake(lake: Lake) -> None:
    for schema, sent in ((STOCK, _stock()), (PURCHASE_ORDERS, _orders())):
        keys = list(schema.key)
        stored = lake.scan(schema.name).select(schema.names).sort(keys).collect()
        assert_frame_equal(stored, sent.cast(schema.polars_schema()).sort(keys))  # type: ignore[arg-type]


def test_stock_positions_from_a_hand_made_lake(lake: Lake) -> None:
    got = fleet_from_lake(lake, NOW)
    by = {(p.sku, p.region): p for p in got.fleet.stock}
    assert set(by) == {("gpu-h8", "eu"), ("cpu-96", "eu")}
    gpu = by[("gpu-h8", "eu")]
    # n1 failed and is not repaired; n2 was repaired; n3 is cordoned but in service.
    assert (gpu.in_use, gpu.in_repair) == (3, 1)
    assert (gpu.on_hand, gpu.lead_time, gpu.order_multiple) == (2, 84 * DAY, 4)
    assert (gpu.shortage_cost, gpu.idle_cost) == (5000.0, 1200.0)
    assert gpu.on_order == ((2, NOW - 2 * DAY), (4, NOW + 30 * DAY))
    assert gpu.series_id == "eu/gpu-h8/nodes"
    cpu = by[("cpu-96", "eu")]
    assert (cpu.in_use, cpu.in_repair, cpu.on_hand, cpu.on_order) == (1, 0, 1, ())
    assert cpu.lead_time == 42 * DAY and cpu.order_multiple == 1
    # Default costs: 96 cores x 0.02 per core-hour x 720 h (30-day review period).
    assert cpu.shortage_cost == pytest.approx(96 * 0.02 * 720)
    assert cpu.idle_cost == pytest.approx(96 * 0.02 * 720 * IDLE_SHARE)
    assert cpu.series_id == "eu/cpu-96/nodes"
    (conv,) = got.demand_in_nodes
    assert (conv.target, conv.source, conv.scale) == ("eu/gpu-h8/nodes", "train/gpus/H800", 0.125)
    notes = got.notes["stock"]
    assert notes["purchase_orders_open"] == 2 and notes["purchase_orders_overdue"] == 1
    gpu_note = next(p for p in notes["positions"] if p["sku"] == "gpu-h8")
    assert gpu_note["snapshot_at"] == (T0 + 5 * DAY).isoformat()
    assert gpu_note["costs_from"] == "table" and gpu_note["demand_read_from"] == "train/gpus/H800"


def test_a_lake_without_a_stock_table_says_so(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake")
    ingest(lake, "t", [Batch("inventory", _inventory())], clock=FixedClock(NOW), input_name="i")
    got = fleet_from_lake(lake, NOW)
    assert got.fleet.stock == () and "stock" not in got.notes
    assert any("no stock table" in x for x in got.notes["not_in_lake"])


def test_node_demand_is_derived_and_coverage_reported(lake: Lake) -> None:
    got = fleet_from_lake(lake, NOW)
    prov = Provenance("predops.demand", "1", "fs", NOW - DAY)
    hourly = [
        Forecast("train/gpus/H800", NOW, NOW + h * timedelta(hours=1), 16.0, 24.0, 40.0, "m", prov)
        for h in (1, 48)
    ]
    (first, last) = node_demand_forecasts(hourly, got.demand_in_nodes)
    assert (first.series_id, first.p10, first.p50, first.p90) == ("eu/gpu-h8/nodes", 2.0, 3.0, 5.0)
    assert first.provenance == prov and last.valid_at == NOW + 48 * timedelta(hours=1)
    cover = buy_forecast_coverage(
        got.fleet.stock, got.demand_in_nodes, [first, last], NOW, 30 * DAY
    )
    gpu = cover["gpu-h8@eu"]
    assert gpu["covered"] is False
    assert gpu["note"].startswith(
        "the forecasts of eu/gpu-h8/nodes (read from train/gpus/H800) reach 48 h ahead"
    )
    assert "lead time 84 days" in gpu["note"]
    assert cover["cpu-96@eu"]["note"] == "no forecast of eu/cpu-96/nodes"


def test_schemas_name_the_row_and_field_of_bad_stock_rows(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake")
    bad = _stock().with_columns(
        pl.when(pl.col("sku") == "cpu-96")
        .then(pl.lit(-1))
        .otherwise(pl.col("on_hand"))
        .alias("on_hand")
    )
    orders = _orders().with_columns(
        pl.when(pl.col("po_id") == "po-3")
        .then(pl.lit("lost"))
        .otherwise(pl.col("status"))
        .alias("status")
    )
    report = ingest(
        lake,
        "test",
        [Batch("stock", bad), Batch("purchase_orders", orders)],
        clock=FixedClock(NOW + 2 * DAY),
        input_name="bad",
    )
    assert report.tables["stock"].rows_quarantined == 1
    q = lake.read_quarantine("stock").row(0, named=True)
    assert (q["row"], q["field"]) == (4, "on_hand") and "below minimum" in q["reason"]
    q = lake.read_quarantine("purchase_orders").row(0, named=True)
    assert (q["row"], q["field"]) == (4, "status") and "lost not one of" in q["reason"]
    assert STOCK.key == ("sku", "region", "ts") and PURCHASE_ORDERS.key == ("po_id", "ts")


def test_the_inspection_of_each_nodes_latest_drain_reaches_its_state(lake: Lake) -> None:
    """What slow-start pacing reads: the latest record, at ``now``, of each node's latest
    drain; an unknown outcome (or none yet) leaves the verdict open."""
    h = timedelta(hours=1)
    rows = [  # node, drained, outcome, recorded
        ("n0", NOW - 2 * DAY, "fault_found", NOW - DAY),  # an older drain: superseded
        ("n0", NOW - DAY, "unknown", NOW - DAY),
        ("n0", NOW - DAY, "no_fault_found", NOW - h),  # the verdict on the latest drain
        ("n1", NOW - DAY, "unknown", NOW - DAY),
        ("n1", NOW - DAY, "fault_found", NOW + h),  # recorded after now: not known yet
        ("n3", NOW - DAY, "unknown", NOW - DAY),
        ("n3", NOW - DAY, "fault_found", NOW - h),
    ]
    frame = pl.DataFrame(
        {
            "node_id": [r[0] for r in rows],
            "drained_at": [r[1] for r in rows],
            "action": ["drain"] * len(rows),
            "outcome": [r[2] for r in rows],
            "cause": [None] * len(rows),
            "recorded_at": [r[3] for r in rows],
            "detail": [None] * len(rows),
        }
    )
    report = ingest(
        lake, "predops", [Batch("inspections", frame)], clock=FixedClock(NOW), input_name="insp"
    )
    assert report.rows_quarantined == 0
    states = fleet_from_lake(lake, NOW).fleet.nodes
    got = {n: s.inspection_fault for n, s in states.items()}
    assert got == {"n0": False, "n1": None, "n2": None, "n3": True, "n4": None}
    later = fleet_from_lake(lake, NOW + 2 * h).fleet.nodes
    assert later["n1"].inspection_fault is True
