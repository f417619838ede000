"""Feature jobs over a lake: the offline frame, the online store, and Dask == local."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner

from predops.features.definitions import NodeFeatureSpec, node_feature_set
from predops.pipelines.cli.main import main
from predops.pipelines.jobs.features import (
    NODE_ONLINE,
    NODE_TRAINING,
    build_features,
    compute_node_features,
    materialise_online,
)
from predops.pipelines.workspace.errors import FeatureStoreError
from predops.pipelines.workspace.feature_store import FeatureStore
from predops.pipelines.workspace.lake import Lake
from tests.features import builders

CUTOFF = builders.T0 + timedelta(hours=30)


@pytest.fixture(scope="module")
def filled_lake(tmp_path_factory: pytest.TempPathFactory) -> Lake:
    lake = Lake(tmp_path_factory.mktemp("ws") / "lake")
    rng = np.random.default_rng(2)
    lake.write("inventory", "synthetic", builders.inventory(6))
    lake.write("telemetry", "synthetic", builders.telemetry(rng, nodes=6, hours=30))
    lake.write(
        "events",
        "synthetic",
        builders.events(
            [
                ("n1", "failure", builders.T0 + timedelta(hours=20)),
                ("n1", "repair", builders.T0 + timedelta(hours=22)),
            ]
        ),
    )
    return lake


def test_build_writes_offline_and_online(filled_lake: Lake, tmp_path: Path) -> None:
    store = FeatureStore(tmp_path / "features")
    rep = build_features(filled_lake, store, as_of=CUTOFF)
    fs = node_feature_set()
    assert rep["nodes"]["feature_set_hash"] == fs.hash
    assert rep["nodes"]["rows"] == 6 * 30  # hourly rows per node
    assert rep["online"]["nodes"] == 6
    off = store.read_offline(NODE_TRAINING)
    assert {"fails_within_6h", "fails_within_24h", "fails_within_72h", "usable"} <= set(off.columns)
    assert off.filter(pl.col("node_id") == "n1")["fails_within_6h"].sum() == 6
    online = store.read_online(NODE_ONLINE, now=CUTOFF, max_age=timedelta(minutes=10))
    assert online.feature_set_hash == fs.hash
    assert online.frame.height == 6 and not online.frame["stale"].any()
    # The online vector of each node equals its last offline row.
    last = off.filter(pl.col("ts") == CUTOFF).sort("node_id")
    on = online.frame.sort("node_id")
    for name in ("gpu_temp_c__mean_1h", "ecc_sbe__increase_24h", "gpu_temp_c__mean_1h__rack_dev"):
        assert np.allclose(last[name].to_numpy(), on[name].to_numpy(), equal_nan=True)


def test_online_read_flags_stale_and_unknown(filled_lake: Lake, tmp_path: Path) -> None:
    store = FeatureStore(tmp_path / "features")
    with pytest.raises(FeatureStoreError, match="features build"):
        store.read_online(NODE_ONLINE, now=CUTOFF, max_age=timedelta(minutes=10))
    materialise_online(filled_lake, store, as_of=CUTOFF)
    late = store.read_online(
        NODE_ONLINE,
        now=CUTOFF + timedelta(hours=2),
        max_age=timedelta(minutes=30),
        ids=["n0", "ghost"],
    )
    assert late.frame["node_id"].to_list() == ["n0", "ghost"]
    assert late.frame["stale"].to_list() == [True, True]
    assert late.frame.row(1, named=True)["gpu_temp_c__mean_1h"] is None


def test_dask_result_equals_local_row_for_row(filled_lake: Lake) -> None:
    from distributed import Client, LocalCluster

    spec = NodeFeatureSpec()
    local = compute_node_features(
        filled_lake, cutoff=CUTOFF, spec=spec, eval_every=timedelta(hours=1)
    )
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        dask = compute_node_features(
            filled_lake,
            cutoff=CUTOFF,
            spec=spec,
            engine="dask",
            scheduler=client,
            eval_every=timedelta(hours=1),
        )
    assert dask.shape == local.shape
    assert dask.columns == local.columns
    for c in local.columns:
        a, b = local[c], dask[c]
        if a.dtype == pl.Categorical:
            a, b = a.cast(pl.String), b.cast(pl.String)
        assert a.equals(b), c


def test_cli_features_build_json(filled_lake: Lake) -> None:
    ws = filled_lake.root.parent
    res = CliRunner().invoke(main, ["--workspace", str(ws), "features", "build", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["as_of"].startswith("2026-03-02T05:59")  # latest telemetry sample
    n = out["nodes"]
    assert n["feature_set_hash"] == node_feature_set().hash
    assert n["features"] == len(node_feature_set().names)
    assert 0 <= n["null_fraction_mean"] < 0.5
    assert set(n["null_fractions"]) == set(node_feature_set().names)


def test_cli_features_build_on_empty_lake_says_what_to_do(tmp_path: Path) -> None:
    res = CliRunner().invoke(main, ["--workspace", str(tmp_path), "features", "build", "--json"])
    assert res.exit_code == 1
    assert "no telemetry" in json.loads(res.stdout.splitlines()[0])["error"]


def test_ingesting_telemetry_refreshes_the_online_store(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    inv, tel = builders.inventory(3), builders.telemetry(rng, nodes=3, hours=3)
    inv.write_parquet(tmp_path / "inv.parquet")
    tel.write_parquet(tmp_path / "tel.parquet")
    ws = ["--workspace", str(tmp_path / "ws")]
    runner = CliRunner()
    assert (
        runner.invoke(
            main,
            [
                *ws,
                "ingest",
                "files",
                str(tmp_path / "inv.parquet"),
                "--table",
                "inventory",
                "--json",
            ],
        ).exit_code
        == 0
    )
    res = runner.invoke(
        main,
        [*ws, "ingest", "files", str(tmp_path / "tel.parquet"), "--table", "telemetry", "--json"],
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["online"]["nodes"] == 3
    store = FeatureStore(tmp_path / "ws" / "features")
    got = store.read_online(NODE_ONLINE, now=tel["ts"].max(), max_age=timedelta(minutes=30))
    assert sorted(got.frame["node_id"]) == ["n0", "n1", "n2"]
