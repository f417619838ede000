from __future__ import annotations

import math
from datetime import timedelta

import numpy as np
import polars as pl
import pytest

from predops.features.definitions import NodeFeatureSpec, counter_name, gauge_name, node_feature_set
from predops.features.frames import node_features
from tests.features import builders, oracle

CUTOFF = builders.T0 + timedelta(hours=30)


@pytest.fixture(scope="module")
def data() -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    rng = np.random.default_rng(11)
    tel = builders.telemetry(rng, nodes=4, hours=30)
    inv = builders.inventory(4)
    ev = builders.events(
        [
            ("n1", "failure", builders.T0 + timedelta(hours=10)),
            ("n1", "repair", builders.T0 + timedelta(hours=12)),
            ("n2", "failure", builders.T0 + timedelta(hours=26)),
        ]
    )
    return tel, inv, ev


@pytest.fixture(scope="module")
def feats(data: tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]) -> pl.DataFrame:
    tel, inv, ev = data
    return node_features(tel.lazy(), inv.lazy(), ev.lazy(), cutoff=CUTOFF).collect()


def close(a: float | None, b: float | None, rel: float = 1e-4, abs_: float = 1e-3) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=rel, abs_tol=abs_)


def test_columns_are_exactly_the_declared_features(feats: pl.DataFrame) -> None:
    names = node_feature_set().names
    assert feats.columns == ["node_id", "ts", *names, "last_sample_ts"]


def test_fast_path_matches_the_oracle(data, feats: pl.DataFrame) -> None:
    tel = data[0]
    spec = NodeFeatureSpec()
    sample = feats.sample(40, seed=3).to_dicts()
    checked = 0
    for row in sample:
        rows = oracle.node_rows(tel, row["node_id"])
        end = row["ts"]
        for w in spec.windows:
            for g in ("gpu_temp_c", "cpu_util_pct", "mem_used_bytes"):
                ref = oracle.gauge_stats(rows, g, end, w)
                for stat in ("mean", "max", "std", "slope"):
                    got = row[gauge_name(g, stat, w)]
                    tol = 1e-3 if g != "mem_used_bytes" else 1e-4
                    assert close(got, ref[stat], rel=tol, abs_=1e-2 if stat == "slope" else 1e-3), (
                        row["node_id"],
                        end,
                        g,
                        stat,
                        w,
                        got,
                        ref[stat],
                    )
                    checked += 1
            for c in ("ecc_sbe_total", "xid_errors_total", "mce_total"):
                assert row[counter_name(c, w)] == oracle.counter_increase(rows, c, end, w)
            n = oracle.samples_in(rows, end, w) if w in spec.missing_windows else None
            if n is not None:
                assert row[f"samples__count_{w // timedelta(hours=1)}h"] == n
    assert checked > 1000


def test_peer_deviation_is_against_the_rack_median_at_the_same_time(feats: pl.DataFrame) -> None:
    col = "gpu_temp_c__mean_1h"
    at = feats.filter(pl.col("ts") == CUTOFF)
    racks = 0
    for _, grp in at.group_by("node__rack"):
        racks += 1
        med = grp[col].median()
        for v, dev in zip(grp[col], grp[f"{col}__rack_dev"], strict=True):
            assert close(dev, v - med)
    assert racks == 2


def test_missing_samples_are_a_signal_not_a_gap(data) -> None:
    tel, inv, ev = data
    # n3 stops reporting 3 hours before the cutoff.
    silent = tel.filter(
        ~((pl.col("node_id") == "n3") & (pl.col("ts") > CUTOFF - timedelta(hours=3)))
    )
    f = node_features(
        silent.lazy(), inv.lazy(), ev.lazy(), cutoff=CUTOFF, latest_only=True
    ).collect()
    n3 = f.filter(pl.col("node_id") == "n3").row(0, named=True)
    assert n3["samples__count_1h"] == 0
    assert n3["samples__missing_frac_1h"] == 1.0
    assert n3["samples__minutes_since_last"] >= 180
    assert n3["gpu_temp_c__mean_1h"] is None  # no made-up value
    others = f.filter(pl.col("node_id") != "n3")
    assert (others["samples__missing_frac_1h"] < 0.5).all()


def test_latest_only_equals_the_last_offline_row_from_a_24h_slice(data, feats) -> None:
    tel, inv, ev = data
    spec = NodeFeatureSpec()
    recent = tel.filter(pl.col("ts") > CUTOFF - timedelta(hours=24) - spec.bucket)
    online = (
        node_features(recent.lazy(), inv.lazy(), ev.lazy(), cutoff=CUTOFF, latest_only=True)
        .collect()
        .sort("node_id")
    )
    offline = feats.filter(pl.col("ts") == CUTOFF).sort("node_id")
    assert online.height == offline.height == 4
    for name in node_feature_set().names:
        a, b = online[name], offline[name]
        if a.dtype == pl.Categorical:
            assert a.cast(pl.String).to_list() == b.cast(pl.String).to_list(), name
        else:
            assert np.allclose(
                a.to_numpy().astype(float),
                b.to_numpy().astype(float),
                rtol=1e-4,
                atol=1e-3,
                equal_nan=True,
            ), name


def test_ingestion_delay_shifts_what_a_row_may_see(data) -> None:
    tel, inv, ev = data
    spec = NodeFeatureSpec(ingestion_delay=timedelta(minutes=30))
    f = node_features(
        tel.lazy(), inv.lazy(), ev.lazy(), cutoff=CUTOFF, spec=spec, latest_only=True
    ).collect()
    assert set(f["ts"]) == {CUTOFF}
    assert (f["last_sample_ts"] <= CUTOFF - timedelta(minutes=30)).all()


def test_event_features(feats: pl.DataFrame) -> None:
    n1 = feats.filter((pl.col("node_id") == "n1") & (pl.col("ts") == CUTOFF)).row(0, named=True)
    assert n1["events__hours_since_failure"] == 20.0
    assert n1["events__hours_since_repair"] == 18.0
    assert n1["events__failures_7d"] == 1.0
    n0 = feats.filter((pl.col("node_id") == "n0") & (pl.col("ts") == CUTOFF)).row(0, named=True)
    assert n0["events__hours_since_failure"] is None and n0["events__failures_7d"] == 0.0
    assert n0["node__age_days"] == pytest.approx(30 + 30 / 24, abs=1e-3)


def test_samples_only_in_an_incomplete_bucket_give_an_empty_frame_with_all_columns(data) -> None:
    tel, inv, ev = data
    one = tel.filter(pl.col("node_id") == "n0").head(1)
    cutoff = one["ts"][0]  # mid-bucket: its bucket has not ended yet
    f = node_features(one.lazy(), inv.lazy(), ev.lazy(), cutoff=cutoff, latest_only=True).collect()
    assert f.height == 0
    assert f.columns == ["node_id", "ts", *node_feature_set().names, "last_sample_ts"]


def test_latest_only_is_bitwise_the_last_bucket_of_the_full_computation(data, feats) -> None:
    """The online row is computed at the grid's last column alone; on the same rows read
    it must be exactly (not approximately) the full computation's last bucket end, so the
    online store and the training frame can never disagree."""
    tel, inv, ev = data
    gappy = tel.filter(
        ~((pl.col("node_id") == "n2") & (pl.col("ts") > CUTOFF - timedelta(hours=5)))
    )
    for frame, full in ((tel, feats), (gappy, None)):
        if full is None:
            full = node_features(frame.lazy(), inv.lazy(), ev.lazy(), cutoff=CUTOFF).collect()
        online = node_features(
            frame.lazy(), inv.lazy(), ev.lazy(), cutoff=CUTOFF, latest_only=True
        ).collect()
        last = full.filter(pl.col("ts") == CUTOFF)
        assert online.height == last.height > 0
        assert online.equals(last)


def test_the_online_rows_without_the_grid_equal_the_grids_last_column(data) -> None:
    """Scattering buckets into arrays gives what the grid gives, including a node with a
    gap, a node seen only in the bucket still open at the cutoff, and one long gone."""
    from predops.features.node import (
        add_window_features,
        bucket_grid,
        bucket_telemetry,
        latest_window_features,
    )

    tel = data[0]
    spec = NodeFeatureSpec()
    cutoff = CUTOFF + timedelta(minutes=7)  # mid-bucket: a partial bucket after E
    late = (
        tel.filter(pl.col("node_id") == "n0")
        .tail(1)
        .with_columns(pl.lit("n9").alias("node_id"), pl.lit(cutoff).alias("ts"))
    )
    gone = (
        tel.filter(pl.col("node_id") == "n1").head(30).with_columns(pl.lit("n8").alias("node_id"))
    )
    gappy = tel.filter(
        ~((pl.col("node_id") == "n2") & (pl.col("ts") > CUTOFF - timedelta(hours=3)))
    )
    frame = pl.concat([gappy, late, gone])
    buckets = bucket_telemetry(frame.lazy(), spec, cutoff=cutoff)
    grid = add_window_features(bucket_grid(buckets, spec, cutoff=cutoff), spec, last_only=True)
    a = latest_window_features(buckets, spec, cutoff=cutoff).collect()
    b = grid.collect()
    assert a.height == b.height and set(a["node_id"]) == {"n0", "n1", "n2", "n3"}
    assert a.equals(b)
