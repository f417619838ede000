"""The Dask paths equal the local ones, on a 2-worker LocalCluster: failure training
(same model, same figures, same registry entry), node-sampled training within a row
budget, batch scoring (same risks and reasons), the demand backtest (same rows and
metrics), and the CLI against a running scheduler's address."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner

from predops.core.clock import FixedClock
from predops.features.definitions import NodeFeatureSpec
from predops.models.demand.config import HOURLY_CONFIG
from predops.models.failure.config import MODEL_PARAMS, node_model_defs
from predops.models.failure.model import train_failure_model
from predops.pipelines.cli.main import main
from predops.pipelines.jobs import distributed as dj
from predops.pipelines.jobs import failure as fj
from predops.pipelines.jobs.demand import evaluate, load_source, with_horizon
from predops.pipelines.jobs.features import build_features
from predops.pipelines.synthetic.run import SimConfig, simulate_to_lake
from predops.pipelines.workspace import registry
from predops.pipelines.workspace.feature_store import FeatureStore
from predops.pipelines.workspace.lake import Lake
from predops.pipelines.workspace.settings import Settings

START = datetime(2026, 2, 2, tzinfo=UTC)
FAST = {"n_estimators": 200, "learning_rate": 0.1, "early_stopping_rounds": 30, "n_jobs": 1}
DAYS = 3.0
Workspace = tuple[Settings, datetime]


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as c,
    ):
        yield c


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    ws = tmp_path_factory.mktemp("ws")
    cfg = SimConfig(
        nodes=60,
        days=12,
        interval=timedelta(minutes=15),
        seed=5,
        start=START,
        failure_rate_scale=20.0,
    )
    lake = Lake(ws / "lake")
    simulate_to_lake(lake, cfg, clock=FixedClock(cfg.end), progress=False)
    spec = NodeFeatureSpec(sample_interval=cfg.interval)
    build_features(lake, FeatureStore(ws / "features"), as_of=cfg.end, spec=spec)
    mp = pytest.MonkeyPatch()
    mp.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{ws}/mlflow.db")
    yield Settings(workspace=ws, shared_data=ws), cfg.end
    mp.undo()


@pytest.fixture(scope="module")
def both(workspace: Workspace, client: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The local and the Dask training, each registered (versions 1 and 2)."""
    settings, _ = workspace
    local = fj.train(settings, params=FAST, backtest_days=DAYS)
    dask = dj.train_failure(settings, client, params=FAST, backtest_days=DAYS)
    return local, dask


def _without_timings(report: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in report.items() if k not in {"seconds", "version", "alias"}}
    out["metrics"] = {k: v for k, v in report["metrics"].items() if k != "fit_seconds"}
    return out


def test_dask_training_equals_local(
    workspace: Workspace, both: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    settings, _ = workspace
    local, dask = both
    assert dask.pop("engine") == "dask" and dask.pop("workers") == 2
    sample = dask.pop("sample")
    assert not sample["sampled"] and sample["rows"] == local["training_rows"]
    assert sample["nodes"] == sample["fleet_nodes"] == 60
    assert _without_timings(dask) == _without_timings(local)
    assert local["metrics"]["positives_24h"] > 0
    # The same model behind both registry versions: equal probabilities on every row.
    (m1, p1), (m2, p2) = fj.load_model(settings, "1"), fj.load_model(settings, "2")
    frame = fj.training_frame(settings)
    assert np.array_equal(m1.predict_proba(frame), m2.predict_proba(frame))
    assert p1.feature_set_hash == p2.feature_set_hash and p1.data_cutoff == p2.data_cutoff
    (listed,) = registry.list_models(uri=settings.mlflow_uri)
    tags = {v["version"]: v["tags"] for v in listed["versions"]}
    for key in ("predops.backtest_from", "predops.horizons_h", "predops.strategy"):
        assert tags["1"][key] == tags["2"][key]


def test_training_over_max_rows_fits_whole_sampled_nodes(
    workspace: Workspace,
    client: Any,
) -> None:
    settings, _ = workspace
    frame = fj.training_frame(settings)
    start = fj.backtest_window(frame, DAYS)
    until = start - max(fj.DEFAULT_HORIZONS)
    rows = frame.filter(pl.col("ts") < until)
    per_node = rows.group_by(pl.col("node_id").cast(pl.String)).len()
    budget = rows.height // 2
    rep = dj.train_failure(
        settings, client, params=FAST, backtest_days=DAYS, max_rows=budget, register=False
    )
    sample = dj.sample_nodes(dict(per_node.iter_rows()), budget)
    assert rep["sample"] == {**sample.to_dict(), "sampled": True}
    assert rep["training_rows"] == sample.rows <= budget
    assert 0 < rep["sample"]["nodes"] < 60
    # Equal to the local fit on the same nodes' rows.
    kept = rows.filter(pl.col("node_id").cast(pl.String).is_in(list(sample.nodes)))
    local = train_failure_model(
        kept,
        feature_defs=node_model_defs(),
        horizons=fj.DEFAULT_HORIZONS,
        feature_set_hash=rep["feature_set_hash"],
        strategy="stacked",
        params={**MODEL_PARAMS, **FAST},
        label_cutoff=start,
        sample_rate=fj.offline_node_frame(settings).sample_rate,
    )
    assert rep["params"] == local.params()
    held = frame.filter(pl.col("ts") >= start)
    expected = fj.holdout_metrics(local, held, label_cutoff=frame["ts"].max())
    expected |= fj.baseline_metrics(local, held, label_cutoff=frame["ts"].max())
    assert any(k.startswith(fj.BASELINE_PREFIX) for k in expected)
    assert {k: v for k, v in rep["metrics"].items() if k != "fit_seconds"} == expected


def test_the_sampling_rule() -> None:
    counts = {f"n{i:03d}": 10 + i % 7 for i in range(200)}
    assert dj.sample_nodes(counts, None).nodes == tuple(sorted(counts))
    assert not dj.sample_nodes(counts, sum(counts.values())).sampled
    s = dj.sample_nodes(counts, 500)
    assert s.sampled and s.rows == sum(counts[n] for n in s.nodes) <= 500
    order = sorted(counts, key=lambda n: (dj.node_rank(n), n))
    assert set(s.nodes) == set(order[: len(s.nodes)])  # a prefix of the stable order
    assert s.rows + counts[order[len(s.nodes)]] > 500  # the next node would not fit
    # More nodes: the kept set only loses its last nodes (a node's rank is its own).
    more = dj.sample_nodes({**counts, **{f"m{i}": 12 for i in range(50)}}, 500)
    assert len(set(more.nodes) - set(s.nodes)) <= 50
    with pytest.raises(ValueError, match="below the training rows of a single node"):
        dj.sample_nodes(counts, 5)
    with pytest.raises(ValueError, match="at least 1"):
        dj.sample_nodes(counts, 0)


def test_dask_training_without_a_frame_says_what_to_do(tmp_path: Any, client: Any) -> None:
    with pytest.raises(ValueError, match="predops features build"):
        dj.train_failure(Settings(workspace=tmp_path, shared_data=tmp_path), client)


@pytest.mark.parametrize("reasons_for", [None, 0, 7])
def test_dask_scoring_equals_local(
    workspace: Workspace,
    both: tuple[dict[str, Any], dict[str, Any]],
    client: Any,
    reasons_for: int | None,
) -> None:
    settings, end = workspace
    local = fj.score_online(settings, as_of=end, reasons_for=reasons_for)
    dask = fj.score_online(settings, as_of=end, reasons_for=reasons_for, client=client)
    assert local.scored > 40 and len(local.risks) == 3 * local.scored
    assert dask.risks == local.risks
    assert sum(1 for r in dask.risks if r.reasons) == (
        len(dask.risks) if reasons_for is None else 3 * reasons_for
    )


def test_cli_scores_on_a_running_scheduler(
    workspace: Workspace, both: tuple[dict[str, Any], dict[str, Any]], client: Any
) -> None:
    settings, end = workspace
    base = ["--workspace", str(settings.workspace), "score", "failure", "--as-of"]
    args = [*base, end.isoformat(), "--reasons-for", "5", "--json"]
    local = CliRunner().invoke(main, args)
    address = client.scheduler.address
    dask = CliRunner().invoke(main, [*args, "--engine", "dask", "--scheduler", address])
    assert local.exit_code == 0 and dask.exit_code == 0, dask.output
    a, b = json.loads(local.output), json.loads(dask.output)
    assert a.pop("seconds") and b.pop("seconds")
    assert a == b


def test_cli_rejects_a_scheduler_without_the_dask_engine(workspace: Workspace) -> None:
    settings, end = workspace
    ws = ["--workspace", str(settings.workspace)]
    args = [*ws, "score", "failure", "--as-of", end.isoformat(), "--scheduler", "tcp://h:1"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code != 0 and "--scheduler needs --engine dask" in res.output


def test_cli_trains_on_a_running_scheduler_and_names_a_budget_too_small(
    workspace: Workspace, client: Any
) -> None:
    settings, _ = workspace
    ws = ["--workspace", str(settings.workspace), "train", "failure", "--json"]
    address = ["--engine", "dask", "--scheduler", client.scheduler.address]
    res = CliRunner().invoke(main, [*ws, "--max-rows", "1", *address])
    assert res.exit_code == 1
    assert "below the training rows of a single node" in json.loads(res.stdout)["error"]
    res = CliRunner().invoke(main, [*ws, "--max-rows", "1000"])
    assert res.exit_code != 0 and "--max-rows needs --engine dask" in res.output


@pytest.mark.parametrize("mode", ["rolling", "holdout"])
def test_dask_demand_backtest_equals_local(client: Any, mode: str) -> None:
    clock = FixedClock(datetime(2030, 1, 1, tzinfo=UTC))
    data = load_source("synthetic", None, clock=clock, synthetic={"nodes": 40, "days": 10})
    kw: dict[str, Any] = {"config": with_horizon(HOURLY_CONFIG, 6)}
    # The orchestration does not depend on the model: cheap ones keep this fast.
    kw |= {"models": ("seasonal_naive_24", "ets")}
    if mode == "rolling":
        kw |= {"cutoffs": 3}
    else:
        kw |= {"holdout": timedelta(days=1), "every": timedelta(hours=6)}
    local = evaluate(data, **kw)
    dask = evaluate(data, client=client, **kw)
    for rep in (local, dask):
        assert set(rep.pop("fit_seconds")) == set(rep.pop("predict_seconds")) == set(kw["models"])
    assert dask == local
    assert local["n_cutoffs"] == (3 if mode == "rolling" else 4)
