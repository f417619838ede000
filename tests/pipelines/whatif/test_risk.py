"""Which feature rows a weekly retrain of the what-if's failure model reads."""

from __future__ import annotations

import gc
from datetime import UTC, datetime, timedelta

import polars as pl

from predops.features.frames import finish_node_features, node_local_features
from predops.pipelines.synthetic.telemetry import BLOCK_NODES, n_blocks
from predops.pipelines.whatif.risk import (
    HOURLY_SPEC,
    RiskConfig,
    _narrow,
    node_frame,
    peer_sources,
    training_rows,
)
from predops.pipelines.whatif.world import START, World, WorldConfig, build_world

CUT = datetime(2026, 3, 1, tzinfo=UTC)
CUT_W = START + timedelta(days=2, hours=3)


def _hourly(days: int) -> pl.DataFrame:
    """One node's feature rows every hour for ``days`` days before and one day after CUT."""
    ts = pl.datetime_range(
        CUT - timedelta(days=days), CUT + timedelta(days=1), "1h", time_zone="UTC", eager=True
    )
    return pl.DataFrame({"node_id": "n0", "ts": ts})


def test_a_retrain_reads_all_history_before_its_cutoff_by_default() -> None:
    frame = _hourly(40)
    rows = training_rows(frame, CUT, RiskConfig())
    ts = rows["ts"]
    assert ts.max() < CUT  # nothing at or after the cutoff
    assert ts.min() == CUT - timedelta(days=40)  # all of the history, not the last weeks
    assert rows.height == 40 * 24 // 2  # every 2 h
    trailing = training_rows(frame, CUT, RiskConfig(train_window=timedelta(days=21)))
    assert trailing["ts"].min() == CUT - timedelta(days=21)
    assert trailing.height == 21 * 24 // 2


def _whole(world: World) -> pl.DataFrame:
    """The node frame built whole in memory, the peer medians over every row at once
    (how the what-if built it before it went to disk by blocks)."""
    sim = world.sim
    cutoff = world.cfg.at(world.cfg.last_tick)
    wide = peer_sources(HOURLY_SPEC)
    parts = [
        node_local_features(
            b.lazy(),
            sim.inventory().lazy(),
            sim.events().lazy(),
            cutoff=cutoff,
            spec=HOURLY_SPEC,
            eval_every=timedelta(hours=1),
        ).collect()
        for b in sim.telemetry_blocks()
    ]
    local = pl.concat([_narrow(p, keep=wide) for p in parts], how="vertical_relaxed")
    return _narrow(finish_node_features(local.lazy(), HOURLY_SPEC).collect(), keep=frozenset())


def test_the_node_frame_built_by_blocks_on_disk_equals_the_frame_built_whole() -> None:
    world = build_world(WorldConfig(nodes=2 * BLOCK_NODES + 37, days=1, seed=4, warmup_days=2))
    assert n_blocks(len(world.specs)) == 3  # several blocks: the medians cross them
    frame = node_frame(world)
    directory = frame.directory
    assert len(frame.parts) == 3 and all(p.exists() for p in frame.parts)
    whole = _whole(world)
    got = frame.collect()
    assert got.schema == whole.schema
    assert got.equals(whole)
    devs = [c for c in got.columns if c.endswith(("__rack_dev", "__pool_dev"))]
    assert devs and got.select(pl.col(devs).is_not_null().any()).row(0) == (True,) * len(devs)
    window = (pl.col("ts") >= CUT_W) & (pl.col("ts") < CUT_W + timedelta(hours=5))
    assert frame.filter(window).equals(whole.filter(window))
    del frame, got
    gc.collect()
    assert not directory.exists()  # the parts go with the frame
