"""The node training frame built by partitions of nodes equals the one built whole, and
the negative-sampling rule keeps exactly the rows it states; a model trained from the
partitioned frame predicts what one trained from the whole frame predicts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from predops.core.clock import FixedClock
from predops.features.definitions import NodeFeatureSpec
from predops.features.labels import label_name
from predops.features.sampling import SAMPLE_U, NegativeSampling, sample_u
from predops.pipelines.jobs import failure as fj
from predops.pipelines.jobs.features import NODE_TRAINING, build_features, sampling_rule
from predops.pipelines.jobs.node_frame import partition_nodes
from predops.pipelines.synthetic.run import SimConfig, simulate_to_lake
from predops.pipelines.workspace.feature_store import FeatureStore
from predops.pipelines.workspace.lake import Lake
from predops.pipelines.workspace.settings import Settings

START = datetime(2026, 2, 2, tzinfo=UTC)
INTERVAL = timedelta(minutes=15)
SPEC = NodeFeatureSpec(sample_interval=INTERVAL)
LABELS = [label_name(h) for h in (timedelta(hours=6), timedelta(hours=24), timedelta(hours=72))]
FAST = {"n_estimators": 200, "learning_rate": 0.1, "early_stopping_rounds": 30, "n_jobs": 1}
CELLS = 15 * 14 * 96  # about 15 nodes of 14 days of 15-minute buckets: 4 partitions


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> tuple[Lake, datetime]:
    ws = tmp_path_factory.mktemp("lake")
    cfg = SimConfig(
        nodes=60, days=14, interval=INTERVAL, seed=5, start=START, failure_rate_scale=20.0
    )
    lk = Lake(ws / "lake")
    simulate_to_lake(lk, cfg, clock=FixedClock(cfg.end), progress=False)
    return lk, cfg.end


def _build(lake: Lake, root: Path, as_of: datetime, **kw: Any) -> tuple[pl.DataFrame, dict]:
    store = FeatureStore(root / "features")
    rep = build_features(lake, store, as_of=as_of, spec=SPEC, **kw)
    return store.read_offline(NODE_TRAINING), rep


def _key(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.sort("node_id", "ts")


@pytest.mark.parametrize("since_days", [None, 9])
def test_partitions_build_the_frame_built_whole(
    lake: tuple[Lake, datetime], tmp_path: Path, since_days: int | None
) -> None:
    lk, end = lake
    since = None if since_days is None else START + timedelta(days=since_days)
    whole, _ = _build(lk, tmp_path / "a", end, since=since, negative_rate=1.0, partitioned=False)
    parts, rep = _build(lk, tmp_path / "b", end, since=since, negative_rate=1.0, grid_cells=CELLS)
    assert rep["nodes"]["partitioning"]["partitions"] >= 2
    assert whole.height == parts.height == rep["nodes"]["rows"] > 0
    assert_frame_equal(_key(parts), _key(whole))


def test_sampling_keeps_exactly_the_rows_of_the_rule(
    lake: tuple[Lake, datetime], tmp_path: Path
) -> None:
    lk, end = lake
    whole, _ = _build(lk, tmp_path / "a", end, negative_rate=1.0, partitioned=False)
    sampled, rep = _build(lk, tmp_path / "b", end, negative_rate=0.3, grid_cells=CELLS)
    keep_from = end - timedelta(days=9)
    assert rep["nodes"]["negative_sampling"]["rate"] == 0.3
    u = pl.Series(SAMPLE_U, sample_u(whole["node_id"], whole["ts"], 0))
    positive = pl.any_horizontal([(pl.col(c) == 1).fill_null(False) for c in LABELS])
    expected = whole.with_columns(u).filter(
        (pl.col(SAMPLE_U) < 0.3) | positive | (pl.col("ts") >= keep_from)
    )
    assert_frame_equal(_key(sampled), _key(expected))
    old = sampled.filter(pl.col("ts") < keep_from)
    negatives = whole.filter(pl.col("ts") < keep_from, ~positive)
    kept = old.filter(~positive).height / negatives.height
    assert 0.2 < kept < 0.4  # about the stated rate, not a truncation
    assert old.filter(positive).height == whole.filter(pl.col("ts") < keep_from, positive).height


def test_u_depends_only_on_the_row() -> None:
    ids = pl.Series([f"n{i % 500:04d}" for i in range(100_000)])
    ts = pl.Series(
        [START + timedelta(hours=i // 500) for i in range(100_000)], dtype=pl.Datetime("us", "UTC")
    )
    u = sample_u(ids, ts, 7)
    assert ((u >= 0) & (u < 1)).all()
    assert abs((u < 0.3).mean() - 0.3) < 0.01
    # The same rows in another order (another partition) get the same numbers.
    rev = sample_u(ids.reverse(), ts.reverse(), 7)
    assert (rev[::-1] == u).all()
    assert (sample_u(ids, ts, 8) != u).mean() > 0.99  # the seed matters


def test_default_rule_samples_only_large_frames(lake: tuple[Lake, datetime]) -> None:
    lk, end = lake
    small = sampling_rule(lk, as_of=end, since=None, eval_every=timedelta(hours=1))
    assert small.rate == 1.0  # 60 nodes x 14 days: every row
    big = sampling_rule(lk, as_of=end, since=None, eval_every=timedelta(seconds=20))
    assert big.rate == 0.2  # 60 nodes x 14 days every 20 s is over 2,000,000 rows
    with pytest.raises(ValueError, match="rate must be in"):
        NegativeSampling(0.0)


def test_partition_sizes_bound_the_grid() -> None:
    ids = [f"n{i}" for i in range(1000)]
    chunks, p = partition_nodes(
        ids,
        first=START,
        cutoff=START + timedelta(days=10),
        bucket=timedelta(minutes=15),
        grid_cells=100_000,
    )
    assert p.buckets == 961 and p.nodes_per_partition == 104
    assert sum(len(c) for c in chunks) == 1000 and max(len(c) for c in chunks) * 961 <= 100_000


def test_training_from_partitions_equals_training_from_the_whole_frame(
    lake: tuple[Lake, datetime], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lk, end = lake
    monkeypatch.setattr(fj, "BACKTEST_DAYS", 3.0)
    out = []
    for name, kw in (("a", {"partitioned": False}), ("b", {"grid_cells": CELLS})):
        _build(lk, tmp_path / name, end, negative_rate=1.0, **kw)
        settings = Settings(workspace=tmp_path / name, shared_data=tmp_path)
        out.append(fj.train(settings, params=FAST, backtest_days=3.0, register=False))
    a, b = out
    assert a["training_rows"] == b["training_rows"] > 0
    assert a["params"]["best_iterations"] == b["params"]["best_iterations"]
    assert a["metrics"]["positives_24h"] == b["metrics"]["positives_24h"] > 0
    for k, v in a["metrics"].items():
        if k != "fit_seconds":
            assert b["metrics"][k] == pytest.approx(v, rel=1e-9, abs=1e-12), k


def test_training_from_a_sampled_frame_states_its_rate(
    lake: tuple[Lake, datetime], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lk, end = lake
    monkeypatch.setattr(fj, "BACKTEST_DAYS", 3.0)
    out = {}
    for rate in (1.0, 0.3):
        name = f"r{rate}"
        _build(lk, tmp_path / name, end, negative_rate=rate, grid_cells=CELLS)
        settings = Settings(workspace=tmp_path / name, shared_data=tmp_path)
        out[rate] = fj.train(settings, params=FAST, backtest_days=3.0, register=False)
    full, sampled = out[1.0], out[0.3]
    assert sampled["negative_sample_rate"] == 0.3 and full["negative_sample_rate"] == 1.0
    assert sampled["params"]["clf.prior_negative_rate"] == 0.3
    assert 0 < sampled["training_rows"] < full["training_rows"]
    # The backtest window is kept whole: both models are judged on the same rows.
    assert sampled["metrics"]["positives_24h"] == full["metrics"]["positives_24h"] > 0


def test_the_partitioned_frame_honours_the_inspections_of_drains(
    lake: tuple[Lake, datetime], tmp_path: Path
) -> None:
    """A found fault is the failure it prevented, an unknown outcome censors the rows
    whose window holds the drain, partition by partition as in the frame built whole,
    under the negative-sampling rule."""
    import shutil

    from predops.pipelines.jobs.inspections import record_applied, record_outcome

    src, end = lake
    lk = Lake(tmp_path / "lake")
    shutil.copytree(src.root, lk.root)
    base, _ = _build(lk, tmp_path / "base", end, negative_rate=1.0, grid_cells=CELLS)
    nodes = sorted(base["node_id"].unique().to_list())
    found, unknown = nodes[3], nodes[40]  # two partitions apart
    drained = START + timedelta(days=5, hours=1)
    clock = FixedClock(drained)
    ran = [{"kind": "drain", "target": n, "outcome": "done"} for n in (found, unknown)]
    assert record_applied(lk, ran, drained, clock)["rows_written"] == 2
    record_outcome(
        lk, found, "fault_found", cause="gpu_xid", clock=FixedClock(drained + timedelta(hours=3))
    )
    whole, _ = _build(lk, tmp_path / "a", end, negative_rate=1.0, partitioned=False)
    parts, rep = _build(lk, tmp_path / "b", end, negative_rate=0.3, grid_cells=CELLS)
    assert rep["nodes"]["partitioning"]["partitions"] >= 2
    label = label_name(timedelta(hours=6))
    window = (pl.col("ts") < drained) & (pl.col("ts") >= drained - timedelta(hours=6))

    def rows(frame: pl.DataFrame, node: str) -> pl.DataFrame:
        return frame.filter((pl.col("node_id") == node) & window).sort("ts")

    assert rows(whole, found).height > 0
    assert (rows(whole, found)[label] == 1).all()
    assert rows(whole, unknown)[label].is_null().all()
    assert (rows(base, unknown)[label] == 0).all()  # what the labels said without it
    # the sampled partitions keep the positives, and every kept row is the whole frame's
    assert_frame_equal(_key(rows(parts, found)), _key(rows(whole, found)), check_column_order=False)
    keyed = parts.join(whole, on=["node_id", "ts"], how="left", suffix="_whole")
    assert keyed[label].equals(keyed[f"{label}_whole"], null_equal=True)
    # the rest of the fleet is labelled as before
    rest = pl.col("node_id").is_in([found, unknown]).not_()
    assert_frame_equal(_key(whole.filter(rest)), _key(base.filter(rest)))
