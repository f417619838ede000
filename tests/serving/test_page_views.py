"""The demand, capacity and plan-history pages' view helpers on small hand-made inputs:
units per resource, sparklines, headroom, evidence units, the buy plan's reach and a
plan's outcome from its audit entries."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from predops.serving.dashboards import capacity_view, demand_view, plan_history

T0 = datetime(2026, 3, 2, tzinfo=UTC)


@pytest.mark.parametrize(
    ("resource", "unit"),
    [("gpus", "GPUs"), ("cpu_cores", "cores"), ("nodes", "nodes"), ("cpu_pct", "%"), ("x", "x")],
)
def test_each_series_in_the_units_of_its_resource(resource: str, unit: str) -> None:
    assert demand_view.unit_of(resource) == unit


def test_integers_print_as_integers_with_their_unit() -> None:
    assert demand_view.quantity(864.0, "GPUs") == "864 GPUs"
    assert demand_view.quantity(1234.56, "cores") == "1,235 cores"
    assert demand_view.quantity(12.34, "GPUs") == "12.3 GPUs"
    assert demand_view.quantity(0.0042, "nodes") == "0.0042 nodes"
    assert demand_view.quantity(41.5, "%") == "41.5%"
    assert demand_view.quantity(None, "GPUs") == "—"


def test_sparkline_keeps_peaks_and_draws_capacity() -> None:
    y = np.zeros(480)
    y[100] = 50.0  # one spike among zeros survives the down-sampling
    spark = demand_view.sparkline(y, capacity=100.0)
    assert spark is not None
    points = [tuple(map(float, p.split(","))) for p in spark["points"].split()]
    assert len(points) == demand_view.SPARK_POINTS
    assert spark["peak"] == 50.0
    heights = [h for _, h in points]
    assert min(heights) == pytest.approx(demand_view.SPARK_H - 1 - (demand_view.SPARK_H - 2) / 2)
    assert spark["cap_y"] == 1.0  # capacity is the top of the scale
    assert demand_view.sparkline(np.array([np.nan]), 5.0) is None


def _fc(p90: list[float]) -> pl.DataFrame:
    return pl.DataFrame(
        {"valid_at": [T0 + timedelta(hours=h + 1) for h in range(len(p90))], "p90": p90}
    )


def test_headroom_is_the_time_until_p90_crosses_capacity() -> None:
    h = demand_view.headroom(_fc([80.0] * 35 + [101.0] * 13), 100.0, T0)
    assert h["days"] == pytest.approx(36 / 24)
    assert h["ratio"] == pytest.approx(1.01)
    assert h["horizon_days"] == pytest.approx(2.0)
    never = demand_view.headroom(_fc([80.0] * 48), 100.0, T0)
    assert never["days"] is None and never["ratio"] == pytest.approx(0.8)
    no_cap = demand_view.headroom(_fc([80.0] * 48), None, T0)
    assert no_cap["ratio"] is None and no_cap["p90_peak"] == 80.0


@pytest.mark.parametrize(
    ("key", "unit"),
    [
        ("current", "nodes"),
        ("failure_buffer", "nodes"),
        ("p90_gpus_peak", "GPUs"),
        ("p90_cpu_cores_peak", "cores"),
        ("expected_benefit", "GPU-h equivalent"),
        ("idle_cost", "GPU-h equivalent"),
        ("window_h", "h"),
        ("lead_time_days", "days"),
        ("p90_gpus_peak_at", ""),
        ("method", ""),
    ],
)
def test_every_evidence_figure_has_its_unit(key: str, unit: str) -> None:
    assert capacity_view.evidence_unit(key) == unit


def _plan(coverage: dict[str, dict[str, object]], note: dict[str, object]) -> dict[str, object]:
    return {
        "data_cutoff": T0.isoformat(),
        "inputs": {"buy_forecasts": coverage, "buy_forecast_model": note},
    }


def test_buy_reach_says_how_far_the_weekly_forecasts_reach() -> None:
    reach = (T0 + timedelta(weeks=26)).isoformat()
    cov = {
        "a100@eu": {
            "series_id": "eu/a100/nodes",
            "needed_from": (T0 + timedelta(days=56)).isoformat(),
            "needed_to": (T0 + timedelta(days=84)).isoformat(),
            "forecasts_reach": reach,
            "covered": True,
            "note": "covered",
        }
    }
    ok = {"status": "ok", "model": "predops.demand.weekly", "version": "3"}
    view = capacity_view.buy_reach(_plan(cov, ok))
    assert view["reach"] == "26 weeks" and view["rows"][0]["lead_time"] == "8 weeks"
    skips = [{"reason": "not_needed"}]
    assert capacity_view.no_buy_headline(view, skips) == (
        "the weekly model (predops.demand.weekly v3) forecasts 26 weeks; "
        "no SKU needs a buy within its lead time"
    )
    missing = capacity_view.buy_reach(_plan({}, {"status": "missing", "note": "no champion"}))
    headline = capacity_view.no_buy_headline(missing, [])
    assert headline is not None and "predops train demand --config weekly" in headline


def test_short_forecasts_name_the_skus_they_do_not_reach() -> None:
    cov = {
        "h100@us": {
            "series_id": "us/h100/nodes",
            "needed_from": (T0 + timedelta(days=56)).isoformat(),
            "needed_to": (T0 + timedelta(days=84)).isoformat(),
            "forecasts_reach": (T0 + timedelta(hours=48)).isoformat(),
            "covered": False,
            "note": "short",
        }
    }
    view = capacity_view.buy_reach(_plan(cov, {"status": "ok", "model": "m", "version": "1"}))
    assert view["reach"] == "2 days"
    headline = capacity_view.no_buy_headline(view, [])
    assert headline is not None and "h100@us" in headline and "lead time" in headline


def _entry(outcome: str, minute: int, who: str = "x", mode: str | None = None) -> dict[str, object]:
    return {
        "outcome": outcome,
        "at": (T0 + timedelta(minutes=minute)).isoformat(),
        "who": who,
        "mode": mode,
    }


def test_plan_outcome_from_its_audit_entries() -> None:
    assert plan_history.outcome([_entry("planned", 0)])["status"] == "planned"
    approved = plan_history.outcome([_entry("planned", 0), _entry("approved", 5, "ann")])
    assert approved["status"] == "approved" and approved["approved"]["who"] == "ann"
    entries = [
        _entry("planned", 0),
        _entry("approved", 5, "ann"),
        _entry("apply_requested", 6, "bob", "dry_run"),
        _entry("would_run", 6, "bob", "dry_run"),
        _entry("dropped", 6, "bob", "dry_run"),
        _entry("apply_requested", 9, "bob", "dry_run"),  # a second apply: only its outcomes
        _entry("would_run", 9, "bob", "dry_run"),
    ]
    out = plan_history.outcome(entries)
    assert out["status"] == "applied (dry-run)" and out["applied"]["who"] == "bob"
    assert out["counts"] == {"would_run": 1}


def _bin(p_mean: float, observed: float, rows: int, p_high: float) -> dict[str, float]:
    return {"p_low": 0.0, "p_high": p_high, "p_mean": p_mean, "observed": observed, "rows": rows}


def test_calibration_caveat_from_the_reliability_table() -> None:
    from predops.serving.dashboards.calibration import caveat_from_table

    table = [
        _bin(0.001, 0.0011, 10_000, 0.002),
        _bin(0.01, 0.0098, 10_000, 0.10),
        _bin(0.10, 0.044, 10_000, 0.41),  # the top bin: predicted 10 %, observed 4.4 %
    ]
    c = caveat_from_table(table, 24.0)
    assert c is not None and c["up_to"] == pytest.approx(0.10)
    assert c["text"] == (
        "calibrated up to 10.0%; above that the top bin predicted 10.0% and observed 4.4% "
        "(failures within 24 h, held-out rows) — treat risks above 10.0% as a ranking, "
        "not a probability"
    )
    calibrated = [_bin(0.01, 0.0102, 10_000, 0.02), _bin(0.2, 0.19, 1_000, 0.5)]
    assert caveat_from_table(calibrated, 24.0) is None
    assert caveat_from_table([], 24.0) is None


def test_baselines_move_beside_the_metric_they_qualify() -> None:
    from predops.serving.dashboards.model_links import split_baselines

    models = [
        {
            "versions": [
                {
                    "metrics": {
                        "pr_auc_24h": 0.31,
                        "baseline/reactive_rule/pr_auc_24h": 0.12,
                        "backtest_wql": 0.09,
                        "backtest_baseline/seasonal_naive_24/wql": 0.14,
                        "backtest_baseline/ets/wql": 0.11,
                    }
                }
            ]
        }
    ]
    split_baselines(models)
    v = models[0]["versions"][0]
    assert v["metrics"] == {"pr_auc_24h": 0.31, "backtest_wql": 0.09}
    assert v["baselines"] == {
        "pr_auc_24h": [("reactive rule", 0.12)],
        "backtest_wql": [("ETS", 0.11), ("seasonal naive 24", 0.14)],
    }


def test_a_bin_is_judged_by_an_exact_binomial_test() -> None:
    from predops.serving.dashboards.calibration import consistent

    # 2 failures in 289 rows where 0.43 were expected: rare, but not evidence (p > 2.5 %)
    assert consistent(_bin(0.0015, 2 / 289, 289, 0.002))
    # 12 where 0.43 were expected is
    assert not consistent(_bin(0.0015, 12 / 289, 289, 0.002))
    # 440 where 1,000 were expected, in 10,000 rows
    assert not consistent(_bin(0.10, 0.044, 10_000, 0.41))


def test_history_lists_past_plans_newest_first_with_their_outcomes(tmp_path: Path) -> None:
    import json
    from types import SimpleNamespace

    from predops.pipelines.workspace.audit import AuditLog

    plans_dir, audit_log = tmp_path / "plans", tmp_path / "audit.jsonl"
    plans_dir.mkdir()
    for i, actions in enumerate((["drain", "cordon", "cordon"], ["resize_pool"], [])):
        body = {
            "plan_id": f"plan-{i}",
            "created_at": (T0 + timedelta(hours=i)).isoformat(),
            "data_cutoff": (T0 + timedelta(hours=i)).isoformat(),
            "dry_run": True,
            "actions": [{"kind": k, "target": f"n{j}"} for j, k in enumerate(actions)],
            "skips": [{"kind": "drain", "reason": "below_threshold", "target": "n9"}] * i,
            "alerts": [],
        }
        (plans_dir / f"plan-{i}.json").write_text(json.dumps(body))
    (plans_dir / "plan-broken.json").write_text("[1, 2]")
    log = AuditLog(audit_log, who="ann (approver) via predops API")
    log.append(at=T0, outcome="approved", what={"kind": "plan"}, why="ok", plan_id="plan-0")
    ops = AuditLog(audit_log, who="bob (operator) via predops API")
    at = T0 + timedelta(minutes=5)
    for outcome in ("apply_requested", "done", "done", "dropped"):
        ops.append(at=at, outcome=outcome, what={}, why="", plan_id="plan-0", mode="execute")
    ctx = SimpleNamespace(settings=SimpleNamespace(plans_dir=plans_dir, audit_log=audit_log))
    page = plan_history.history(ctx, limit=3)
    assert page["total"] == 4
    rows = {r["plan_id"]: r for r in page["rows"]}
    assert [r["plan_id"] for r in page["rows"]][:3] == ["plan-2", "plan-1", "plan-0"]
    assert rows["plan-0"]["actions"] == {"cordon": 2, "drain": 1}
    applied = rows["plan-0"]["outcome"]
    assert applied["status"] == "applied" and applied["counts"] == {"done": 2, "dropped": 1}
    assert applied["approved"]["who"].startswith("ann") and applied["applied"]["who"].startswith(
        "bob"
    )
    assert rows["plan-1"]["outcome"]["status"] == "planned" and rows["plan-1"]["skips"] == 1
    rest = plan_history.history(ctx, offset=3, limit=3)["rows"]
    assert [r["plan_id"] for r in rest] == ["plan-broken"] and "not a plan object" in rest[0][
        "problem"
    ]


def test_run_links_go_to_the_tracking_ui_when_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from predops.serving.dashboards import model_links

    seen = {"r1": {"experiment_id": "4", "artifact_uri": "s3://bucket/4/r1/artifacts"}}
    monkeypatch.setattr(model_links.registry, "run_links", lambda ids, uri: seen)
    monkeypatch.setattr(model_links, "_cache", {})
    models = [{"versions": [{"run_id": "r1", "metrics": {}}, {"run_id": None, "metrics": {}}]}]
    ctx = SimpleNamespace(
        settings=SimpleNamespace(mlflow_uri="sqlite:///x"),
        config=SimpleNamespace(mlflow_ui_url="https://mlflow.example.org/"),
    )
    assert model_links.links(ctx, models)["r1"] == {  # type: ignore[arg-type]
        "run_id": "r1",
        "artifact_uri": "s3://bucket/4/r1/artifacts",
        "url": "https://mlflow.example.org/#/experiments/4/runs/r1",
    }
    ctx.config.mlflow_ui_url = None
    assert "url" not in model_links.links(ctx, models)["r1"]  # type: ignore[arg-type]


def test_mlflow_ui_url_must_be_a_web_address(tmp_path: Path) -> None:
    from predops.pipelines.workspace.config import ConfigError
    from predops.serving.config import load_serve_config

    good = tmp_path / "serve.toml"
    good.write_text('[server]\nmlflow_ui_url = "https://mlflow.example.org"\n')
    assert load_serve_config(good, {}).mlflow_ui_url == "https://mlflow.example.org"
    bad = tmp_path / "bad.toml"
    bad.write_text('[server]\nmlflow_ui_url = "mlflow.example.org"\n')
    with pytest.raises(ConfigError, match=r"\[server\] mlflow_ui_url: .* must start with http"):
        load_serve_config(bad, {})


def test_buy_candidates_are_named_by_sku_and_region() -> None:
    """Two regions' buys of one SKU are two rows: their anchors must differ (a buy
    action's target is the SKU, its skips are named ``<sku>@<region>``)."""
    from predops.serving.dashboards.plans import buys, candidate_key

    plan = {
        "actions": [
            {"kind": "buy", "target": "gpu-a", "params": {"region": r, "quantity": 2}}
            for r in ("rg-1", "rg-2")
        ],
        "skips": [{"kind": "buy", "target": "gpu-b@rg-1", "reason": "not_needed"}],
    }
    keys = [candidate_key(a) for a in plan["actions"]]
    assert keys == ["gpu-a@rg-1", "gpu-a@rg-2"]
    assert [b["target"] for b in buys(plan)[0]] == keys
    assert candidate_key(plan["skips"][0]) == "gpu-b@rg-1"
    assert candidate_key({"kind": "drain", "target": "n1", "params": {"region": "x"}}) == "n1"
