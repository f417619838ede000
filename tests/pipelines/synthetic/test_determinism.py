"""Same seed -> byte-identical lake files; the write chunking never changes the data."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
from polars.testing import assert_frame_equal

from predops.core.clock import FixedClock
from predops.pipelines.synthetic.run import TABLES, simulate_frames, simulate_to_lake
from predops.pipelines.workspace.lake import Lake

from .conftest import config

CLOCK = FixedClock(datetime(2026, 6, 1, tzinfo=UTC))


def _parquet_files(root: Path) -> dict[str, bytes]:
    """Every stored file's bytes by its path, the lake commit's transaction id (random
    by design) taken out of the name."""
    return {
        re.sub(r"-[0-9a-f]{24}\.parquet$", ".parquet", str(p.relative_to(root))): p.read_bytes()
        for p in sorted(root.rglob("*.parquet"))
        if "_quarantine" not in p.parts
    }


def test_same_seed_gives_byte_identical_parquet(tmp_path: Path) -> None:
    cfg = config(nodes=300, days=3, seed=3)
    for name in ("a", "b"):
        simulate_to_lake(Lake(tmp_path / name), cfg, clock=CLOCK, progress=False)
    a, b = _parquet_files(tmp_path / "a"), _parquet_files(tmp_path / "b")
    tables = {Path(p).parts[0] for p in a}
    assert tables == set(TABLES)
    assert a.keys() == b.keys()
    for path, data in a.items():
        assert data == b[path], f"{path} differs between two runs of the same seed"


def test_another_seed_gives_another_fleet() -> None:
    a = simulate_frames(config(nodes=50, days=1, seed=1))
    b = simulate_frames(config(nodes=50, days=1, seed=2))
    assert not a["telemetry"].equals(b["telemetry"])
    assert not a["pods"].equals(b["pods"])


def test_chunked_lake_write_equals_in_memory_frames(tmp_path: Path) -> None:
    """Three telemetry blocks written one per chunk hold exactly the in-memory rows."""
    cfg = config(nodes=600, days=1, seed=5, chunk_rows=1)
    frames = simulate_frames(cfg)
    lake = Lake(tmp_path)
    out = simulate_to_lake(lake, cfg, clock=CLOCK, progress=False)
    assert out["rows_quarantined"] == 0
    for table in TABLES:
        stored = lake.scan(table).drop("source").collect()
        keys = list(stored.columns[:2])
        assert_frame_equal(stored.sort(keys), frames[table].sort(keys), check_row_order=True)


def test_rerunning_into_the_same_lake_adds_nothing(tmp_path: Path) -> None:
    cfg = config(nodes=40, days=1, seed=9)
    lake = Lake(tmp_path)
    first = simulate_to_lake(lake, cfg, clock=CLOCK, progress=False)
    again = simulate_to_lake(lake, cfg, clock=CLOCK, progress=False)
    assert first["tables"]["telemetry"]["rows_written"] > 0
    assert all(t["rows_written"] == 0 for t in again["tables"].values())
    assert pl.DataFrame(lake.stats()).height >= 0


def test_a_run_ending_after_the_clock_is_ingested_at_its_end(tmp_path: Path) -> None:
    """Validation rejects timestamps > 1 h past the ingest clock: a simulated future is
    ingested with a FixedClock at the simulation end, and the summary says so."""
    cfg = config(nodes=30, days=2, seed=4)
    early = FixedClock(cfg.start)
    out = simulate_to_lake(Lake(tmp_path), cfg, clock=early, progress=False)
    assert out["rows_quarantined"] == 0
    assert out["ingest_clock"].startswith("simulation end 2026-01-07T00:00:00")
    on_time = simulate_to_lake(Lake(tmp_path / "b"), cfg, clock=CLOCK, progress=False)
    assert on_time["ingest_clock"] == "given clock"
