"""Failure jobs end to end on a small simulated workspace: train + register, score from
the champion, and a promotion that refuses a worse challenger (real MLflow on SQLite)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from core.clock import FixedClock
from features.definitions import NodeFeatureSpec
from pipelines import failure_jobs as fj
from pipelines import registry
from pipelines.cli import main
from pipelines.feature_jobs import build_features
from pipelines.feature_store import FeatureStore
from pipelines.lake import Lake
from pipelines.settings import Settings
from pipelines.synthetic.run import SimConfig, simulate_to_lake

START = datetime(2026, 2, 2, tzinfo=UTC)
FAST = {"n_estimators": 300, "learning_rate": 0.1, "early_stopping_rounds": 30, "n_jobs": 1}
BACKTEST_DAYS = 3.0


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Settings, datetime]:
    ws = tmp_path_factory.mktemp("ws")
    cfg = SimConfig(
        nodes=80,
        days=14,
        interval=timedelta(minutes=15),
        seed=11,
        start=START,
        failure_rate_scale=20.0,
    )
    lake = Lake(ws / "lake")
    simulate_to_lake(lake, cfg, clock=FixedClock(cfg.end), progress=False)
    build_features(
        lake,
        FeatureStore(ws / "features"),
        as_of=cfg.end,
        spec=NodeFeatureSpec(sample_interval=cfg.interval),
    )
    settings = Settings(workspace=ws, shared_data=ws)
    return settings, cfg.end


@pytest.fixture(scope="module")
def trained(
    workspace: tuple[Settings, datetime], monkeypatch_module: pytest.MonkeyPatch
) -> dict[str, Any]:
    settings, _ = workspace
    monkeypatch_module.setattr(fj, "BACKTEST_DAYS", BACKTEST_DAYS)
    monkeypatch_module.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{settings.workspace}/mlflow.db")
    return fj.train(settings, params=FAST, backtest_days=BACKTEST_DAYS)


@pytest.fixture(scope="module")
def monkeypatch_module() -> Any:
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def test_training_registers_a_challenger_with_provenance(
    workspace: tuple[Settings, datetime], trained: dict[str, Any]
) -> None:
    settings, _ = workspace
    assert trained["version"] == "1" and trained["alias"] == "challenger"
    assert trained["metrics"]["pr_auc_24h"] > 0
    assert datetime.fromisoformat(trained["training_until"]) < datetime.fromisoformat(
        trained["backtest_from"]
    )
    (listed,) = registry.list_models(uri=settings.mlflow_uri)
    assert listed["name"] == "predops.node_failure"
    tags = listed["versions"][0]["tags"]
    assert tags["predops.feature_set_hash"] == trained["feature_set_hash"]
    assert tags["predops.data_cutoff"] == trained["backtest_from"]


def test_score_gives_every_fresh_node_a_risk_from_the_champion(
    workspace: tuple[Settings, datetime], trained: dict[str, Any]
) -> None:
    settings, end = workspace
    result = CliRunner().invoke(
        main,
        [
            "--workspace",
            str(settings.workspace),
            "score",
            "failure",
            "--as-of",
            end.isoformat(),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["model"]["model_version"] == "1"
    assert out["scored"] + len(out["stale"]) == out["nodes"] == 80
    assert len(out["risks"]) == out["scored"] * 3  # 6 h, 24 h, 72 h
    for r in out["risks"]:
        assert 0.0 <= r["p_fail"] <= 1.0
        assert r["provenance"]["feature_set_hash"] == trained["feature_set_hash"]
    by_h = {h: [r for r in out["risks"] if r["horizon_hours"] == h] for h in (6, 24, 72)}
    riskiest = max(by_h[24], key=lambda r: r["p_fail"])
    assert riskiest["reasons"] and riskiest["reasons"][0]["text"]


def test_promotion_refuses_a_worse_challenger(
    workspace: tuple[Settings, datetime], trained: dict[str, Any]
) -> None:
    settings, _ = workspace
    # A model that cannot split (every leaf needs more rows than exist) predicts one
    # probability for every node: its PR-AUC is the base rate.
    worse = fj.train(
        settings, params={**FAST, "min_child_samples": 10**7}, backtest_days=BACKTEST_DAYS
    )
    assert worse["version"] == "2"
    result = CliRunner().invoke(
        main,
        ["--workspace", str(settings.workspace), "models", "promote", "node_failure", "--json"],
    )
    assert result.exit_code == 0, result.output
    decision = json.loads(result.output)
    assert decision["promoted"] is False
    assert decision["champion_after"] == "1"
    assert decision["challenger"]["score"] < decision["champion"]["score"]
    (listed,) = registry.list_models(uri=settings.mlflow_uri)
    v2 = next(v for v in listed["versions"] if v["version"] == "2")
    assert v2["tags"]["promotion.decision"] == "refused"
    assert "strictly higher" in v2["tags"]["promotion.rule"]


def test_score_refuses_features_of_another_feature_set(
    workspace: tuple[Settings, datetime], trained: dict[str, Any], tmp_path: Path
) -> None:
    settings, end = workspace
    model, prov = fj.load_model(settings)
    other = type(prov)(prov.model_name, prov.model_version, "0000000000000000", prov.data_cutoff)
    with pytest.raises(ValueError, match="rebuild features or retrain"):
        fj.score(settings, as_of=end, model=(model, other))
