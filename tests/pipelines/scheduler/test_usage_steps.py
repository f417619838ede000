"""The scheduler's usage steps: ``retrain`` trains and promotes ``predops.usage`` (once
per telemetry cutoff, off with ``[retrain] usage = false``), and the ``plan`` step then
sets reclaimable capacity from it."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from predops.pipelines.scheduler.config import parse_config
from predops.pipelines.scheduler.steps import StepSkipped, plan, promote_usage, train_usage
from predops.pipelines.workspace.config import ConfigError
from predops.pipelines.workspace.lake import Lake
from tests.pipelines.scheduler.conftest import make_context


def test_retrain_trains_the_usage_model_and_the_plan_step_uses_it(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    ctx = make_context(workspace, '[retrain]\nusage_window = "2h"\n')
    cutoff = ctx.clock.now()
    out = train_usage(ctx, cutoff, tmp_path)
    assert out.detail["model"] == "predops.usage" and out.detail["version"] == "1"
    assert out.detail["window_hours"] == 2.0 and out.rows > 0
    # the 2-day lake leaves no room for the holdout day: said, not faked
    assert str(out.detail["backtest"]).startswith("skipped: ")
    again = train_usage(ctx, cutoff, tmp_path)
    assert again.detail == {"version": "1", "note": "already registered"}
    promoted = promote_usage(ctx, cutoff, tmp_path)
    assert promoted.detail["reason"] == "challenger is already champion"
    last = Lake(workspace / "lake").latest_time("telemetry")
    assert last is not None
    report = plan(ctx, last + timedelta(minutes=5), tmp_path).detail
    assert report["summary"]["actions"].get("set_reclaimable", 0) > 0, report["summary"]


def test_usage_off_skips_both_steps(workspace: Path, tmp_path: Path) -> None:
    ctx = make_context(workspace, "[retrain]\nusage = false\n")
    for step in (train_usage, promote_usage):
        with pytest.raises(StepSkipped, match="usage = false"):
            step(ctx, ctx.clock.now(), tmp_path)


def test_the_usage_window_is_checked() -> None:
    with pytest.raises(ConfigError, match="usage_window"):
        parse_config({"retrain": {"usage_window": "2d"}}, "t.toml")
    cfg = parse_config({"retrain": {"usage_window": "3h", "usage": False}}, "t.toml")
    assert cfg.retrain.usage is False and cfg.retrain.usage_window.total_seconds() == 3 * 3600
