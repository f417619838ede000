"""The registry against its production setup: an MLflow tracking server backed by a real
PostgreSQL (Debian's ``postgresql``), reached over HTTP the way a deployment reaches it.

A throwaway cluster and ``mlflow server`` run on 127.0.0.1
(:mod:`tests.pipelines.workspace.mlflow_postgres`); the workspace's settings point at the
server through ``MLFLOW_TRACKING_URI``. Through predops' own jobs: train and register two
failure models, promote by the real backtest, serve the champion as the server does
(:func:`predops.serving.models.failure_slot`), roll back, see an alias moved through
MLflow's REST API (what its UI calls) ignored, then stop and start the MLflow server:
the champion, its promotion record and the report of the moved alias are still there,
and the champion loads.

Skips only when the PostgreSQL server binaries are not installed (scripts/system-deps.sh
installs them in CI).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import requests

from predops.core.clock import FixedClock
from predops.features.definitions import NodeFeatureSpec
from predops.pipelines.jobs import failure as failure_jobs
from predops.pipelines.jobs import promotion
from predops.pipelines.jobs.features import build_features
from predops.pipelines.synthetic.run import SimConfig, simulate_to_lake
from predops.pipelines.workspace import promotion_records, registry
from predops.pipelines.workspace.feature_store import FeatureStore
from predops.pipelines.workspace.lake import Lake
from predops.pipelines.workspace.settings import Settings
from predops.serving.models import failure_slot
from tests.pipelines.workspace.mlflow_postgres import (
    MlflowServer,
    ThrowawayPostgres,
    postgres_bindir,
)

pytestmark = pytest.mark.integration

START = datetime(2026, 2, 2, tzinfo=UTC)
BACKTEST_DAYS = 2.0
FAST = {"n_estimators": 300, "learning_rate": 0.1, "early_stopping_rounds": 30, "n_jobs": 1}
CRIPPLED = {**FAST, "min_child_samples": 10**7}
"""Every leaf needs more rows than exist: one probability for every node, so PR-AUC is
the base rate and any real model beats it."""
NOT_INSTALLED = (
    "the PostgreSQL server binaries (initdb, postgres) are not installed: Debian's "
    "postgresql package provides them (scripts/system-deps.sh installs it)"
)


@pytest.fixture(scope="module")
def postgres() -> Iterator[ThrowawayPostgres]:
    bindir = postgres_bindir()
    if bindir is None:
        pytest.skip(NOT_INSTALLED)
    with ThrowawayPostgres(bindir) as pg:
        yield pg


@pytest.fixture
def workspace(tmp_path: Path) -> Settings:
    """A small simulated fleet with its features built (no registry yet)."""
    cfg = SimConfig(
        nodes=40,
        days=8,
        interval=timedelta(minutes=15),
        seed=11,
        start=START,
        failure_rate_scale=20.0,
    )
    lake = Lake(tmp_path / "ws" / "lake")
    simulate_to_lake(lake, cfg, clock=FixedClock(cfg.end), progress=False)
    build_features(
        lake,
        FeatureStore(tmp_path / "ws" / "features"),
        as_of=cfg.end,
        spec=NodeFeatureSpec(sample_interval=cfg.interval),
    )
    return Settings(workspace=tmp_path / "ws", shared_data=tmp_path)


def move_alias_through_rest(url: str, version: str) -> None:
    """What the MLflow UI does when someone moves the alias."""
    r = requests.post(
        f"{url}/api/2.0/mlflow/registered-models/alias",
        json={"name": "predops.node_failure", "alias": "champion", "version": version},
        timeout=10,
    )
    assert r.status_code == 200, r.text


def test_train_promote_serve_rollback_and_restart_on_postgres(
    postgres: ThrowawayPostgres,
    workspace: Settings,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    timings: dict[str, float] = {}
    t = time.perf_counter()

    def lap(step: str) -> None:
        nonlocal t
        timings[step] = round(time.perf_counter() - t, 1)
        t = time.perf_counter()

    server = MlflowServer(postgres.url, tmp_path / "artifacts", tmp_path / "mlflow.log")
    server.start()
    lap("mlflow server start")
    try:
        monkeypatch.setenv("MLFLOW_TRACKING_URI", server.url)
        monkeypatch.setattr(failure_jobs, "BACKTEST_DAYS", BACKTEST_DAYS)
        settings = workspace
        assert settings.mlflow_uri == server.url  # how settings choose the store

        first = failure_jobs.train(settings, params=CRIPPLED, backtest_days=BACKTEST_DAYS)
        second = failure_jobs.train(settings, params=FAST, backtest_days=BACKTEST_DAYS)
        assert (first["version"], second["version"]) == ("1", "2")
        lap("train + register x2")

        decision = promotion.promote("node_failure", settings)
        assert decision["promoted"] is True, decision
        assert decision["champion_after"] == "2"
        record = promotion_records.parse_record(
            registry.list_models(uri=server.url)[0]["versions"][1]["tags"].get(
                promotion_records.record_tag("champion")
            )
        )
        assert record is not None and record["how"] == "backtest"
        assert record["backtest"]["metric"] == "pr_auc_24h_last_7d"
        assert record["backtest"]["champion"]["version"] == "1"
        lap("promote (backtest of both)")

        slot = failure_slot(settings, FixedClock(START + timedelta(days=9)))
        assert slot.refresh() is True and slot.current is not None
        assert slot.current.version == "2"
        frame = failure_jobs.training_frame(settings).head(20)
        assert slot.current.model.predict_proba(frame).shape == (20, 3)

        back = registry.rollback("node_failure", uri=server.url)
        assert back["champion_after"] == "1"
        assert slot.refresh() is True and slot.current.version == "1"
        move_alias_through_rest(server.url, "2")
        assert slot.refresh() is False and slot.current.version == "1"
        assert "was not set by predops" in (slot.untrusted_alias() or {}).get("problem", "")
        lap("serve, roll back, alias moved by hand")

        server.stop()
        assert slot.refresh() is False and slot.last_error  # down: keeps serving v1
        assert slot.current.version == "1"
        server.start()
        lap("mlflow server restart")

        state = registry.alias_state("node_failure", uri=server.url)
        assert (state.alias_version, state.served_version) == ("2", "1")
        (listed,) = registry.list_models(uri=server.url)
        assert listed["champion_history"] == ["1"]
        model, prov = failure_jobs.load_model(settings)  # a fresh load after the restart
        assert prov.model_version == "1" and model.predict_proba(frame).shape == (20, 3)
        assert slot.refresh() is False and slot.last_error is None
        lap("after restart: champion loads")
    finally:
        server.stop()
    print({"timings_s": timings, "total_s": round(sum(timings.values()), 1)})
