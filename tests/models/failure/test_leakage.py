"""Leakage is caught: the real feature pipeline passes a point-in-time replay, and a
feature that peeks at the next failure is detected by the replay and by the model audit.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl
import pytest

from predops.features.frames import node_features, training_frame
from predops.models.failure.classifier import NodeFailureClassifier
from predops.models.failure.config import node_model_defs
from predops.models.failure.leakage import (
    dominant_features,
    point_in_time_mismatches,
    too_good_features,
)
from predops.pipelines.synthetic.run import SimConfig, simulate_frames
from tests.models.failure.factories import failure_rows

LEAK = "events__hours_to_next_failure"


@pytest.fixture(scope="module")
def fleet() -> dict[str, pl.DataFrame]:
    cfg = SimConfig(
        nodes=24,
        days=4,
        interval=timedelta(minutes=15),
        seed=3,
        start=datetime(2026, 2, 2, tzinfo=UTC),
        failure_rate_scale=40.0,
    )
    frames = simulate_frames(cfg)
    frames["end"] = pl.DataFrame({"end": [cfg.end]})
    return frames


def with_leak(frame: pl.DataFrame, events: pl.DataFrame, *, seen_by: datetime) -> pl.DataFrame:
    """Hours until the node's next failure, from the failures known at ``seen_by``
    (the full log for the training frame; only the past when serving)."""
    fails = (
        events.filter((pl.col("kind") == "failure") & (pl.col("at") <= seen_by))
        .select("node_id", pl.col("at").alias("__next"))
        .sort("__next")
    )
    out = frame.sort("ts").join_asof(
        fails,
        left_on="ts",
        right_on="__next",
        by="node_id",
        strategy="forward",
        check_sortedness=False,
    )
    hours = (pl.col("__next") - pl.col("ts")).dt.total_seconds() / 3600
    return out.with_columns(hours.cast(pl.Float32).alias(LEAK)).drop("__next")


def _times(start: datetime) -> list[datetime]:
    return [start + timedelta(hours=h) for h in (30, 55, 80)]


def test_node_features_pass_the_point_in_time_replay(fleet: dict[str, pl.DataFrame]) -> None:
    tel, inv, ev = fleet["telemetry"].lazy(), fleet["inventory"].lazy(), fleet["events"].lazy()
    end = fleet["end"]["end"][0]
    offline = training_frame(tel, inv, ev, cutoff=end).collect()
    cols = [d.name for d in node_model_defs()]

    def rebuild(t: datetime) -> pl.DataFrame:
        return node_features(tel, inv, ev, cutoff=t, latest_only=True).collect()

    start = fleet["telemetry"]["ts"].min()
    assert point_in_time_mismatches(offline, rebuild, _times(start), columns=cols) == {}


def test_a_feature_that_peeks_at_the_next_failure_is_caught_by_the_replay(
    fleet: dict[str, pl.DataFrame],
) -> None:
    tel, inv, ev = fleet["telemetry"].lazy(), fleet["inventory"].lazy(), fleet["events"].lazy()
    events = fleet["events"]
    end = fleet["end"]["end"][0]
    offline = with_leak(training_frame(tel, inv, ev, cutoff=end).collect(), events, seen_by=end)
    cols = [*(d.name for d in node_model_defs()), LEAK]

    def rebuild(t: datetime) -> pl.DataFrame:
        latest = node_features(tel, inv, ev, cutoff=t, latest_only=True).collect()
        return with_leak(latest, events, seen_by=t)

    start = fleet["telemetry"]["ts"].min()
    found = point_in_time_mismatches(offline, rebuild, _times(start), columns=cols)
    assert set(found) == {LEAK}
    assert found[LEAK]["example"]["as_of_rebuild"] is None


def test_a_model_trained_with_a_leaking_feature_is_flagged_and_an_honest_one_is_not() -> None:
    X, y, t = failure_rows(np.random.default_rng(9), n=8000)
    rng = np.random.default_rng(1)
    # The answer in disguise: "hours to failure", small when the row is a positive.
    leaky = X.assign(
        **{LEAK: np.where(y == 1, rng.uniform(0, 24, y.size), rng.uniform(24, 500, y.size))}
    )
    params = {"n_estimators": 150, "min_child_samples": 20, "num_leaves": 7}
    honest = NodeFailureClassifier(**params).fit(X, y, time=t)
    cheat = NodeFailureClassifier(**params).fit(leaky, y, time=t)
    numeric = pl.from_pandas(leaky.drop(columns=["sku"]))
    assert set(too_good_features(numeric, y)) == {LEAK}
    assert set(dominant_features(cheat)) == {LEAK}
    assert dominant_features(honest) == {}  # no honest signal holds half the gain
    assert too_good_features(pl.from_pandas(X.drop(columns=["sku"])), y) == {}
