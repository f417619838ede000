"""A served workspace: a small simulated fleet with features, both models trained and
registered as champion, and one plan — built once per session (the fixtures are
registered in the root conftest only, so the serving, browser and reliability tests
share one build), copied per module."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from predops.core.clock import FixedClock
from predops.pipelines.jobs.features import build_features
from predops.pipelines.synthetic.run import SimConfig, simulate_to_lake
from predops.pipelines.workspace.feature_store import FeatureStore
from predops.pipelines.workspace.lake import Lake
from predops.pipelines.workspace.settings import Settings

START = datetime(2026, 1, 5, tzinfo=UTC)
NODES, DAYS = 60, 8


def settings_for(ws: Path, shared_data: Path) -> Settings:
    return Settings(workspace=ws, shared_data=shared_data)


@pytest.fixture(scope="session")
def served_template(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Path:
    """Simulate, build features, train + register both models (first versions become
    champion), and write one plan with ``predops plan``. About a minute."""
    from click.testing import CliRunner

    from predops.models.demand.config import config_named
    from predops.pipelines.cli.main import main
    from predops.pipelines.jobs import demand as demand_jobs
    from predops.pipelines.jobs import failure as failure_jobs

    ws = tmp_path_factory.mktemp("served_ws")
    settings = settings_for(ws, shared_data)
    lake = Lake(settings.lake_dir)
    cfg = SimConfig(nodes=NODES, days=DAYS, interval=timedelta(minutes=15), seed=11, start=START)
    simulate_to_lake(lake, cfg, clock=FixedClock(START + timedelta(days=DAYS + 1)), progress=False)
    as_of = lake.scan("telemetry").select(pl.col("ts").max()).collect().item()
    build_features(lake, FeatureStore(settings.features_dir), as_of=as_of)
    failure_jobs.train(settings, backtest_days=2)
    demand_jobs.train(settings, config=config_named("hourly"), backtest_cutoffs=1)
    res = CliRunner().invoke(
        main, ["--workspace", str(ws), "plan", "--at", as_of.isoformat(), "--json"]
    )
    assert res.exit_code == 0, res.output
    return ws


@pytest.fixture(scope="module")
def served_workspace(served_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private copy of the served workspace (tests may approve plans, move aliases)."""
    ws = tmp_path_factory.mktemp("served_copy") / "ws"
    shutil.copytree(served_template, ws)
    return ws
