"""``predops ingest files --table stock / purchase_orders``: a procurement export as CSV
lands in the lake; a bad row is quarantined by row and field, the good ones land."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from predops.pipelines.cli.main import main
from predops.pipelines.workspace.lake import Lake

HEADER = "ts,sku,region,on_hand,lead_time_days,shortage_cost,idle_cost,order_multiple"
STOCK_CSV = f"""{HEADER},demand_series,demand_scale
2026-03-01T00:00:00Z,gpu-h800-8x,rg-1,3,84,5760,1440,4,training/gpus/H800,0.125
2026-03-01T00:00:00Z,cpu-std-96c,rg-1,2,,,,,,
2026-03-01T00:00:00Z,gpu-a10-8x,rg-1,1,56,,,8,inference/gpus/A10,0.125
"""
ORDERS_CSV = """ts,po_id,sku,region,nodes,ordered_at,expected_at,status
2026-03-01T00:00:00Z,PO-1001,gpu-h800-8x,rg-1,4,2026-02-01T00:00:00Z,2026-04-26T00:00:00Z,open
2026-03-01T00:00:00Z,PO-1002,gpu-h800-8x,rg-1,0,2026-02-01T00:00:00Z,2026-04-26T00:00:00Z,open
"""


def test_stock_and_orders_from_csv_quarantine_bad_rows_by_field(tmp_path: Path) -> None:
    (tmp_path / "stock.csv").write_text(STOCK_CSV)
    (tmp_path / "orders.csv").write_text(ORDERS_CSV)
    ws = ["--workspace", str(tmp_path / "ws")]
    runner = CliRunner()
    res = runner.invoke(
        main, [*ws, "ingest", "files", str(tmp_path / "stock.csv"), "--table", "stock", "--json"]
    )
    assert res.exit_code == 0, res.output
    # Row 2 has no lead time: a required field.
    assert json.loads(res.stdout)["tables"]["stock"]["rows_quarantined"] == 1
    orders = [*ws, "ingest", "files", str(tmp_path / "orders.csv"), "--json"]
    res = runner.invoke(main, [*orders, "--table", "purchase_orders"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["tables"]["purchase_orders"]["rows_quarantined"] == 1
    lake = Lake(tmp_path / "ws" / "lake")
    q = lake.read_quarantine("stock").row(0, named=True)
    assert (q["row"], q["field"], q["reason"]) == (2, "lead_time_days", "missing value")
    q = lake.read_quarantine("purchase_orders").row(0, named=True)
    assert (q["row"], q["field"]) == (2, "nodes") and "below minimum 1" in q["reason"]
    stock = lake.scan("stock").collect().sort("sku")
    assert stock["sku"].to_list() == ["gpu-a10-8x", "gpu-h800-8x"]
    assert stock["demand_scale"].to_list() == [0.125, 0.125]
    assert lake.scan("purchase_orders").collect()["po_id"].to_list() == ["PO-1001"]
