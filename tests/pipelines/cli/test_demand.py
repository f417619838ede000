"""``predops train / forecast demand`` and ``models promote demand`` end to end: a small
synthetic lake, a real MLflow on SQLite in the workspace."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from predops.core.contracts import Forecast
from predops.pipelines.cli.main import main
from predops.pipelines.jobs import demand as demand_jobs


def run(ws: Path, *args: str) -> dict[str, Any]:
    res = CliRunner().invoke(main, ["--workspace", str(ws), *args, "--json"])
    assert res.exit_code == 0, res.output
    out: dict[str, Any] = json.loads(res.stdout)
    return out


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setattr(demand_jobs, "REGISTRY_BACKTEST_CUTOFFS", 1)
    run(tmp_path, "simulate", "--nodes", "30", "--days", "9", "--interval", "1h")
    return tmp_path


def test_train_forecast_promote(workspace: Path) -> None:
    first = run(workspace, "train", "demand", "--backtest-cutoffs", "1")
    n = first["series"]
    assert first["version"] == "1" and n >= 3
    # 9 days hold the combination's three validation windows: it is what is served.
    assert (first["method"], first["method_why"]) == ("selected", "windows fit")
    assert 0 <= first["metrics"]["backtest_coverage"] <= 1
    _per_series_backtest_recorded(workspace, first)

    out = run(workspace, "forecast", "demand")
    assert out["version"] == "1" and out["series"] == n
    assert len(out["forecasts"]) == n * 48
    f = out["forecasts"][0]
    assert f["provenance"]["model_name"] == "predops.demand.hourly"
    assert f["provenance"]["data_cutoff"] == first["data_cutoff"]
    assert f["p10"] <= f["p50"] <= f["p90"] and f["method"] == "selected"
    # Each row rebuilds as the contract type (ordered quantiles, UTC times).
    Forecast(
        series_id=f["series_id"],
        issued_at=datetime.fromisoformat(f["issued_at"]),
        valid_at=datetime.fromisoformat(f["valid_at"]),
        p10=f["p10"],
        p50=f["p50"],
        p90=f["p90"],
    )
    first_valid = datetime.fromisoformat(f["valid_at"]) - datetime.fromisoformat(f["issued_at"])
    assert first_valid == timedelta(hours=1)
    _selection_reported(out)

    # A second version with another seed: promotion backtests both the same way.
    second = run(
        workspace,
        "train",
        "demand",
        "--backtest-cutoffs",
        "0",
        "--seed",
        "11",
        "--method",
        "lightgbm",
    )
    assert second["version"] == "2" and second["method"] == "lightgbm"
    decision = run(workspace, "models", "promote", "demand.hourly")
    assert decision["challenger"]["version"] == "2" and decision["champion"]["version"] == "1"
    better = decision["challenger"]["score"] < decision["champion"]["score"]
    assert decision["promoted"] is better
    assert decision["champion_after"] == ("2" if better else "1")
    listed = run(workspace, "models", "list")["models"][0]
    tags = listed["versions"][1]["tags"]
    assert tags["promotion.decision"] == ("promoted" if better else "refused")
    assert tags["predops.config"] == "hourly" and tags["predops.method"] == "lightgbm (asked)"


def test_forecast_without_a_model_is_a_clear_error(workspace: Path) -> None:
    res = CliRunner().invoke(main, ["--workspace", str(workspace), "forecast", "demand", "--json"])
    assert res.exit_code != 0
    assert "no registered model 'predops.demand.hourly'" in json.loads(res.stdout)["error"]


def test_both_horizons_register_side_by_side(workspace: Path) -> None:
    hourly = run(workspace, "train", "demand", "--backtest-cutoffs", "0")
    weekly = run(workspace, "train", "demand", "--config", "weekly", "--backtest-cutoffs", "3")
    assert (hourly["model"], hourly["version"]) == ("predops.demand.hourly", "1")
    assert (weekly["model"], weekly["version"]) == ("predops.demand.weekly", "1")
    # Nine days hold 2 or 3 weekly buckets; 3 origins need 16 to fit and 26 to score.
    assert re.fullmatch(
        r"skipped: [23] weekly buckets of history, 3 origins need 50 \(16 to fit, 26 to score\)",
        weekly["backtest"],
    ), weekly["backtest"]
    assert not any(k.startswith("backtest_") for k in weekly["metrics"])
    # Nor the combination's windows: the LightGBM (and its fallback) is registered.
    assert weekly["method"] == "lightgbm" and "selection windows need" in weekly["method_why"]
    models = {m["name"]: m for m in run(workspace, "models", "list")["models"]}
    assert {"predops.demand.hourly", "predops.demand.weekly"} <= models.keys()
    assert models["predops.demand.weekly"]["versions"][0]["tags"]["predops.config"] == "weekly"
    assert models["predops.demand.weekly"]["aliases"]["champion"] == "1"

    out = run(workspace, "forecast", "demand", "--config", "weekly")
    assert out["model"] == "predops.demand.weekly"
    steps = {
        datetime.fromisoformat(f["valid_at"]) - datetime.fromisoformat(f["issued_at"])
        for f in out["forecasts"]
    }
    assert max(steps) == timedelta(weeks=26)
    # Nine days are short of the weekly model's 16 weeks: each series says it fell back.
    assert {f["method"] for f in out["forecasts"]} <= {"fallback_naive"}
    hourly_out = run(workspace, "forecast", "demand")
    assert hourly_out["model"] == "predops.demand.hourly"


def test_a_legacy_single_model_registry_answers_for_its_horizon(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Earlier releases registered the one demand model as ``predops.demand``.
    monkeypatch.setattr(demand_jobs, "model_name", lambda config_name: demand_jobs.MODEL_NAME)
    legacy = run(workspace, "train", "demand", "--backtest-cutoffs", "0")
    monkeypatch.undo()
    assert legacy["model"] == "predops.demand"

    out = run(workspace, "forecast", "demand")
    assert out["model"] == "predops.demand" and out["version"] == "1"
    # It was an hourly model: nothing answers for the weekly horizon.
    res = CliRunner().invoke(
        main, ["--workspace", str(workspace), "forecast", "demand", "--config", "weekly", "--json"]
    )
    assert res.exit_code != 0
    assert "predops.demand.weekly" in json.loads(res.stdout)["error"]

    # Once the hourly model is trained under its own name, it is the one served.
    run(workspace, "train", "demand", "--backtest-cutoffs", "0")
    assert run(workspace, "forecast", "demand")["model"] == "predops.demand.hourly"


def test_train_on_an_empty_lake_is_a_clear_error(tmp_path: Path) -> None:
    res = CliRunner().invoke(main, ["--workspace", str(tmp_path), "train", "demand", "--json"])
    assert res.exit_code != 0
    assert "no demand rows" in json.loads(res.stdout)["error"]


def _per_series_backtest_recorded(ws: Path, trained: dict[str, Any]) -> None:
    """The training run records each series' backtest, the served model's beside its
    baselines', scored on that series alone (its own units), and the version says so."""
    from predops.pipelines.workspace import registry
    from predops.pipelines.workspace.settings import Settings

    uri = Settings(workspace=ws, shared_data=ws).mlflow_uri
    (model,) = [m for m in registry.list_models(uri=uri) if m["name"] == trained["model"]]
    version = model["versions"][-1]
    assert version["tags"]["predops.backtest_per_series"] == demand_jobs.PER_SERIES_ARTIFACT
    body = registry.run_json(version["run_id"], demand_jobs.PER_SERIES_ARTIFACT, uri=uri)
    assert body["config"] == "hourly" and body["served"] == "model"
    assert len(body["cutoffs"]) == 1 and body["horizons"] == [1, 48]
    assert len(body["series"]) == trained["series"]
    for sid, figures in body["series"].items():
        # the served model and the config's seasonal naives (a day and a week)
        assert {"model", "seasonal_naive_24", "seasonal_naive_168"} <= set(figures), sid
        for name, f in figures.items():
            assert f["rows"] == 48, (sid, name)  # one cutoff x 48 hourly horizons
            assert f["mae"] >= 0 and f["rmse"] >= f["mae"] - 1e-9, (sid, name)
            assert 0 <= f["coverage"] <= 1, (sid, name)
    with pytest.raises(registry.RegistryError, match="no readable artifact"):
        registry.run_json(version["run_id"], "missing.json", uri=uri)


def _selection_reported(out: dict[str, Any]) -> None:
    """The combination's forecast report says how each series was made: the windows
    (every one at or before the data cutoff) and, per series and horizon bucket, the
    candidates' weights, which sum to one."""
    sel = out["selection"]
    assert sel["method"] == "selected"
    assert sel["candidates"] == [
        "lightgbm",
        "ets",
        "seasonal_naive",
        "seasonal_naive_long",
        "theta",
        "persistence",
    ]
    cutoff = datetime.fromisoformat(sel["data_cutoff"])
    origins = [datetime.fromisoformat(o) for o in sel["window_origins"]]
    assert len(origins) == 3 and all(o < cutoff for o in origins)
    assert set(sel["series"]) == {f["series_id"] for f in out["forecasts"]}
    for sid, made in sel["series"].items():
        for when in ("weights", "weights_at_fit"):
            assert set(made[when]) == {"1-6", "7-12", "13-24", "25-48"}, (sid, made[when])
            for bucket, w in made[when].items():
                assert set(w) == set(sel["candidates"]), (sid, bucket)
                assert abs(sum(w.values()) - 1) < 1e-3 and min(w.values()) >= 0, (sid, w)
