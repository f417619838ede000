"""``predops train / forecast demand`` and ``models promote demand`` end to end: a small
synthetic lake, a real MLflow on SQLite in the workspace."""

from __future__ import annotations

import json
from datetime import timedelta
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
    assert 0 <= first["metrics"]["backtest_coverage"] <= 1

    out = run(workspace, "forecast", "demand")
    assert out["version"] == "1" and out["series"] == n
    assert len(out["forecasts"]) == n * 48
    f = out["forecasts"][0]
    assert f["provenance"]["model_name"] == "predops.demand"
    assert f["provenance"]["data_cutoff"] == first["data_cutoff"]
    assert f["p10"] <= f["p50"] <= f["p90"]
    # Each row rebuilds as the contract type (ordered quantiles, UTC times).
    from datetime import datetime

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

    # A second version with another seed: promotion backtests both the same way.
    second = run(workspace, "train", "demand", "--backtest-cutoffs", "0", "--seed", "11")
    assert second["version"] == "2"
    decision = run(workspace, "models", "promote", "demand")
    assert decision["challenger"]["version"] == "2" and decision["champion"]["version"] == "1"
    better = decision["challenger"]["score"] < decision["champion"]["score"]
    assert decision["promoted"] is better
    assert decision["champion_after"] == ("2" if better else "1")
    listed = run(workspace, "models", "list")["models"][0]
    tags = listed["versions"][1]["tags"]
    assert tags["promotion.decision"] == ("promoted" if better else "refused")
    assert tags["predops.config"] == "hourly"


def test_forecast_without_a_model_is_a_clear_error(workspace: Path) -> None:
    res = CliRunner().invoke(main, ["--workspace", str(workspace), "forecast", "demand", "--json"])
    assert res.exit_code != 0
    assert "no registered model 'predops.demand'" in json.loads(res.stdout)["error"]


def test_train_on_an_empty_lake_is_a_clear_error(tmp_path: Path) -> None:
    res = CliRunner().invoke(main, ["--workspace", str(tmp_path), "train", "demand", "--json"])
    assert res.exit_code != 0
    assert "no demand rows" in json.loads(res.stdout)["error"]
