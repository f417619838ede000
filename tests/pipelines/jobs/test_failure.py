"""Failure jobs end to end on a small simulated workspace: train + register, score from
the champion, and a promotion that refuses a worse challenger (real MLflow on SQLite)."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner

from predops.core.actions import SkipReason
from predops.core.clock import FixedClock
from predops.core.contracts import FailureRisk
from predops.features.definitions import NodeFeatureSpec
from predops.pipelines.cli.main import main
from predops.pipelines.ingest.batch import Batch
from predops.pipelines.ingest.run import ingest
from predops.pipelines.jobs import failure as fj
from predops.pipelines.jobs.features import build_features, materialise_online
from predops.pipelines.synthetic.run import SimConfig, simulate_to_lake
from predops.pipelines.workspace import registry
from predops.pipelines.workspace.feature_store import FeatureStore
from predops.pipelines.workspace.lake import Lake
from predops.pipelines.workspace.settings import Settings

START = datetime(2026, 2, 2, tzinfo=UTC)
FAST = {"n_estimators": 300, "learning_rate": 0.1, "early_stopping_rounds": 30, "n_jobs": 1}
BACKTEST_DAYS = 3.0
INTERVAL = timedelta(minutes=15)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Settings, datetime]:
    ws = tmp_path_factory.mktemp("ws")
    cfg = SimConfig(
        nodes=80,
        days=14,
        interval=INTERVAL,
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
    with pytest.raises(fj.NoOnlineFeatures, match="rebuild features or retrain"):
        fj.score(settings, as_of=end, model=(model, other))


# ---------------------------------------------------------------- current_risk / plan
def _plan(ws: Path, at: datetime) -> dict[str, Any]:
    res = CliRunner().invoke(
        main, ["--workspace", str(ws), "plan", "--at", at.isoformat(), "--json"]
    )
    assert res.exit_code == 0, res.output
    out: dict[str, Any] = json.loads(res.stdout.splitlines()[-1])
    return out


def test_current_risk_is_one_horizon_with_reasons_for_every_fresh_node(
    workspace: tuple[Settings, datetime], trained: dict[str, Any]
) -> None:
    settings, end = workspace
    online = FeatureStore(settings.features_dir).read_online(
        "node", now=end, max_age=fj.SCORE_MAX_AGE
    )
    last = online.frame["last_sample_ts"].max()
    assert isinstance(last, datetime)
    risks = fj.current_risk(settings, now=last)
    assert len(risks) == len({r.node_id for r in risks}) == 80
    assert {r.horizon for r in risks} == {fj.PRIMARY_HORIZON}
    assert all(r.reasons and r.as_of == last for r in risks)
    # The provenance names the champion and the data the risk relies on (the policy's
    # stale-data guard reads it), not the model's week-old training cutoff.
    (prov,) = {r.provenance for r in risks}
    assert prov is not None and prov.model_version == "1"
    assert prov.data_cutoff == last
    assert prov.feature_set_hash == trained["feature_set_hash"]
    # Online rows newer than `now` are never read (planning in the past); rows older
    # than the age limit are stale; neither gets a risk.
    assert fj.current_risk(settings, now=last - timedelta(hours=1)) == []
    assert fj.current_risk(settings, now=last + timedelta(hours=1)) == []
    past = fj.score(settings, as_of=last - timedelta(hours=1), reasons_for=0)
    assert past["scored"] == 0 and len(past["after_as_of"]) == 80


def test_plan_prices_every_scored_node_of_the_champion(
    workspace: tuple[Settings, datetime], trained: dict[str, Any]
) -> None:
    settings, end = workspace
    at = end - timedelta(minutes=15)  # the last simulated sample
    out = _plan(settings.workspace, at)
    assert out["inputs"]["failure_risk"] == {"status": "ok", "nodes_scored": 80}
    assert not any("failure risk" in a for a in out["alerts"])
    decided = [a["target"] for a in out["actions"] if a["kind"] in ("drain", "cordon")]
    decided += [s["target"] for s in out["skips"] if s["kind"] in ("drain", "cordon")]
    assert sorted(decided) == [f"node-{i:05d}" for i in range(80)]  # each node once
    reasons = {s["reason"] for s in out["skips"] if s["kind"] == "drain"}
    assert reasons <= {r.value for r in SkipReason} and SkipReason.STALE_DATA not in reasons
    (prov,) = out["provenance"]
    assert prov["model_name"] == "predops.node_failure" and prov["model_version"] == "1"


def test_scheduler_score_step_writes_the_champion_risk(
    workspace: tuple[Settings, datetime], trained: dict[str, Any], tmp_path: Path
) -> None:
    from predops.pipelines.scheduler import steps
    from predops.pipelines.scheduler.config import load_config
    from predops.pipelines.scheduler.context import JobContext
    from predops.pipelines.workspace.runs import RunStore

    settings, end = workspace
    (tmp_path / "predops.toml").write_text("")
    ctx = JobContext(
        settings=settings,
        config=load_config(tmp_path / "predops.toml", {}),
        runs=RunStore(tmp_path / "runs.db"),
        clock=FixedClock(end),
    )
    outcome = steps.score(ctx, end - timedelta(minutes=15), tmp_path)
    assert outcome.rows == 80 and outcome.detail["status"] == "ok"
    written = json.loads((tmp_path / "risk.json").read_text())
    assert len(written) == 80 and all(r["horizon_hours"] == 24 for r in written)


def test_a_node_made_risky_is_drained_or_skipped_with_its_reason(
    workspace: tuple[Settings, datetime], trained: dict[str, Any], tmp_path: Path
) -> None:
    """A burst of hardware errors on one GPU node (the lake, then the online features,
    rebuilt the way the scheduler does) raises its risk; the plan prices it and either
    drains it with the model's reasons as evidence or says why not, typed."""
    settings, end = workspace
    ws = tmp_path / "ws"
    shutil.copytree(settings.workspace, ws)
    mine = Settings(workspace=ws, shared_data=ws)
    node = "node-00050"
    before = _risk_of(mine, node, end)
    lake = Lake(ws / "lake")
    last = lake.scan("telemetry").filter(pl.col("node_id") == node).sort("ts").collect()[-1:]
    burst = pl.concat(
        last.with_columns(
            pl.lit(end - timedelta(minutes=m), dtype=pl.Datetime("us", "UTC")).alias("ts"),
            pl.col("ecc_sbe_total") + 100 * k,
            pl.col("ecc_dbe_total") + 4 * k,
            pl.col("xid_errors_total") + 10 * k,
            pl.col("mce_total") + 30 * k,
            pl.col("nic_flaps_total") + 30 * k,
            pl.col("disk_realloc_total") + 8 * k,
        )
        for k, m in ((1, 10), (2, 5))
    ).drop("source")
    ingest(lake, "synthetic", [Batch("telemetry", burst)], clock=FixedClock(end), input_name="t")
    materialise_online(
        lake,
        FeatureStore(ws / "features"),
        as_of=end,
        spec=NodeFeatureSpec(sample_interval=INTERVAL),
    )
    after = _risk_of(mine, node, end)
    assert after.p_fail > 3 * before.p_fail
    assert {r.feature for r in after.reasons} & {
        f"{c}__since_install" for c in ("ecc_dbe", "ecc_sbe", "nic_flaps", "mce", "disk_realloc")
    }
    out = _plan(ws, end)
    drains = [a for a in out["actions"] if a["target"] == node and a["kind"] == "drain"]
    skips = [s for s in out["skips"] if s["target"] == node and s["kind"] == "drain"]
    assert len(drains) + len(skips) == 1
    if drains:
        ev = drains[0]["evidence"]["risk"]
        assert ev["p_fail"] == pytest.approx(after.p_fail) and ev["top_reasons"]
    else:
        assert skips[0]["reason"] in {r.value for r in SkipReason}
        assert skips[0]["reason"] != SkipReason.STALE_DATA
        assert f"p_fail {after.p_fail:.3f}" in skips[0]["detail"]


def _risk_of(settings: Settings, node: str, now: datetime) -> FailureRisk:
    (risk,) = [r for r in fj.current_risk(settings, now=now) if r.node_id == node]
    return risk
