"""A small simulated workspace (8 nodes, 2 days), simulated once and copied per test."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from predops.core.clock import FixedClock
from predops.pipelines.scheduler.config import load_config
from predops.pipelines.scheduler.context import JobContext
from predops.pipelines.synthetic.run import SimConfig, simulate_to_lake
from predops.pipelines.workspace.lake import Lake
from predops.pipelines.workspace.runs import RunStore
from predops.pipelines.workspace.settings import Settings

START = datetime(2026, 1, 5, tzinfo=UTC)


@pytest.fixture(scope="session")
def template_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ws = tmp_path_factory.mktemp("template_ws")
    cfg = SimConfig(nodes=8, days=2, interval=timedelta(minutes=5), seed=3, start=START)
    clock = FixedClock(START + timedelta(days=3))
    simulate_to_lake(Lake(ws / "lake"), cfg, clock=clock, progress=False)
    return ws


@pytest.fixture
def workspace(template_workspace: Path, tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    shutil.copytree(template_workspace, ws)
    return ws


def make_context(ws: Path, toml: str = "", **kw: object) -> JobContext:
    cfg_path = ws.parent / "predops.toml"
    cfg_path.write_text(toml)
    settings = Settings(workspace=ws, shared_data=ws / "no-shared-data")
    return JobContext(
        settings=settings,
        config=load_config(cfg_path, {}),
        runs=RunStore(settings.scheduler_db),
        clock=FixedClock(START + timedelta(days=3)),
        **kw,  # type: ignore[arg-type]
    )
