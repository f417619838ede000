"""A 2,000-node day streams through the lake in node blocks (speed: benchmarks/bench_ingest.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from predops.core.clock import FixedClock
from predops.pipelines.synthetic.run import simulate_to_lake
from predops.pipelines.synthetic.telemetry import BLOCK_NODES
from predops.pipelines.workspace.lake import Lake

from .conftest import config


@pytest.mark.timeout(180)
def test_two_thousand_nodes_for_a_day(tmp_path: Path) -> None:
    cfg = config(nodes=2000, days=1, seed=13, chunk_rows=3 * BLOCK_NODES * 288)
    out = simulate_to_lake(
        Lake(tmp_path), cfg, clock=FixedClock(datetime(2026, 6, 1, tzinfo=UTC)), progress=False
    )
    tel = out["tables"]["telemetry"]
    assert out["rows_quarantined"] == 0
    assert 0.97 * 2000 * 288 < tel["rows_written"] <= 2000 * 288
    assert out["tables"]["inventory"]["rows_written"] == 2000
    assert out["failures"] > 5
    assert sum(out["nodes_by_pool"].values()) == 2000
    assert out["racks"] > 2000 / 32
