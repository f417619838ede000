"""Writes a repeat offender into a served workspace's lake: three XID-48 GPU failures of
one node, each repaired, inside the last five days before ``end``."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import polars as pl

from predops.core.schemas import EVENTS
from predops.pipelines.workspace.lake import Lake
from tests.served_workspace import settings_for

XID48 = "XID 48: double-bit ECC error, GPU needs reset"
FAILED_HOURS_AGO = (100, 60, 20)
"""Hours before the end of the data of each failure (a repair 3 h after each)."""


def add_repeat_offender(workspace: Path, shared_data: Path, end: datetime) -> str:
    """The node made a repeat offender (the inventory's first node)."""
    lake = Lake(settings_for(workspace, shared_data).lake_dir)
    node_id = str(lake.scan("inventory").select(pl.col("node_id").min()).collect().item())
    rows = []
    for h in FAILED_HOURS_AGO:
        at = end - timedelta(hours=h)
        rows.append((node_id, "failure", at, "gpu_xid", XID48))
        rows.append((node_id, "repair", at + timedelta(hours=3), "gpu_xid", "GPU reset"))
    frame = pl.DataFrame(rows, schema=EVENTS.polars_schema(), orient="row")
    lake.write("events", "test", frame)
    return node_id
