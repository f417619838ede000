"""Demand jobs: reading every source (real traces through their adapters), and the
backtest report of ``predops eval demand``."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from predops.core.clock import FixedClock
from predops.models.demand.config import HOURLY_CONFIG
from predops.pipelines.cli.main import main
from predops.pipelines.jobs.demand import (
    coarsest_datacenter_series,
    evaluate,
    load_source,
    targets_check,
    with_horizon,
)

CLOCK = FixedClock(datetime(2030, 1, 1, tzinfo=UTC))


def test_helios_vc_is_unconstrained_gpu_demand(shared_data: Path) -> None:
    vc = shared_data / "helios-philly-demand" / "Earth_vcs" / "vcJLV"
    data = load_source("helios", str(vc), clock=CLOCK)
    d = data.demand
    assert d["series_id"].unique().to_list() == ["helios/vcJLV/gpus"]
    assert (d["value"] == d["running"] + d["pending"]).all()
    assert d.height == 34_560 and data.quarantined == 0


def test_openb_pods_become_gpu_demand(shared_data: Path) -> None:
    pods = (
        shared_data
        / "alibaba-clusterdata"
        / "cluster-trace-gpu-v2023"
        / "csv"
        / "openb_pod_list_default.csv"
    )
    data = load_source("openb", str(pods), clock=CLOCK)
    d = data.demand
    assert "openb/default/gpus/all" in set(d["series_id"])
    total = d.filter(pl.col("series_id") == "openb/default/gpus/all")
    # 8,152 sampled pods living ~7 h each: tens of GPUs at once, in shares of a GPU.
    peak = total["value"].max()
    assert isinstance(peak, float) and 20 < peak < 6_212
    assert (total["value"] % 1 != 0).any()
    parts = d.filter(pl.col("series_id") != "openb/default/gpus/all")
    per_ts = parts.group_by("ts").agg(pl.col("value").sum()).sort("ts")
    assert per_ts["value"].to_list() == pytest.approx(total.sort("ts")["value"].to_list())


def test_datacenter_keeps_one_width_per_metric() -> None:
    d = pl.DataFrame(
        {
            "series_id": [f"datacenter/alibaba2018/{w}s/cpu_util_percent" for w in (10, 30, 300)]
            + ["datacenter/google2019/300s/avg_cpu"],
            "ts": [datetime(2018, 1, 1, tzinfo=UTC)] * 4,
            "value": [1.0, 2.0, 3.0, 4.0],
        }
    )
    kept = coarsest_datacenter_series(d)["series_id"].to_list()
    assert kept == [
        "datacenter/alibaba2018/300s/cpu_util_percent",
        "datacenter/google2019/300s/avg_cpu",
    ]


def test_bad_source_and_path_are_clear(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown source 'nab'"):
        load_source("nab", str(tmp_path), clock=CLOCK)
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_source("helios", str(tmp_path / "missing.csv"), clock=CLOCK)
    with pytest.raises(ValueError, match="--path is required"):
        load_source("philly", None, clock=CLOCK)


def test_eval_report_on_the_synthetic_fleet() -> None:
    data = load_source("synthetic", None, clock=CLOCK, synthetic={"nodes": 40, "days": 12})
    cfg = with_horizon(HOURLY_CONFIG, 12)
    rep = evaluate(data, config=cfg, cutoffs=2, models=("lightgbm", "seasonal_naive_24"))
    assert rep["n_cutoffs"] == 2 and rep["horizons"] == [1, 12]
    assert set(rep["metrics"]) == {"lightgbm", "seasonal_naive_24"}
    assert set(rep["metrics"]["lightgbm"]) == {"1-6", "7-12", "all"}
    for m in ("mase", "smape", "wql", "coverage", "under_provisioning"):
        assert rep["metrics"]["lightgbm"]["all"][m] is not None
    assert rep["targets"]["evaluated"] and rep["targets"]["best_baseline"] == "seasonal_naive_24"
    assert rep["methods"]["lightgbm"] == {"lightgbm": 2 * 12 * rep["series"]}


def test_holdout_mode_fits_once_before_the_holdout() -> None:
    data = load_source("synthetic", None, clock=CLOCK, synthetic={"nodes": 40, "days": 10})
    cfg = with_horizon(HOURLY_CONFIG, 6)
    rep = evaluate(
        data,
        config=cfg,
        holdout=timedelta(days=1),
        every=timedelta(hours=6),
        models=("seasonal_naive_24",),
    )
    assert rep["mode"] == "holdout" and rep["n_cutoffs"] == 4
    assert rep["metrics"]["seasonal_naive_24"]["all"]["rmse"] > 0


def test_drop_last_scores_earlier_cutoffs_without_the_dropped_days() -> None:
    data = load_source("synthetic", None, clock=CLOCK, synthetic={"nodes": 40, "days": 8})
    cfg = with_horizon(HOURLY_CONFIG, 6)
    kw = {"config": cfg, "cutoffs": 2, "models": ("seasonal_naive_24",)}
    full = evaluate(data, **kw)  # type: ignore[arg-type]
    early = evaluate(data, drop_last=timedelta(days=2), **kw)  # type: ignore[arg-type]
    shift = [
        datetime.fromisoformat(a) - datetime.fromisoformat(b)
        for a, b in zip(full["cutoffs"], early["cutoffs"], strict=True)
    ]
    assert shift == [timedelta(days=2)] * 2


def test_targets_check_applies_the_issue_bar() -> None:
    def m(mase: float, cov: float = 0.8, under: float = 0.1) -> dict:
        return {"all": {"mase": mase, "coverage": cov, "under_provisioning": under}}

    ok = targets_check({"lightgbm": m(0.8), "seasonal_naive_24": m(1.0), "ets": m(0.95)})
    assert ok["met"] and ok["best_baseline"] == "ets"
    assert ok["mase_gain"] == pytest.approx(1 - 0.8 / 0.95)
    bad = targets_check({"lightgbm": m(0.9, cov=0.9), "ets": m(0.95)})
    assert not bad["met"]
    assert bad["checks"] == {
        "mase_gain_vs_best_baseline": False,
        "coverage_75_85": False,
        "under_provisioning_le_12pct": True,
    }


def test_cli_eval_demand_on_a_real_trace_prints_one_json_object(
    shared_data: Path, tmp_path: Path
) -> None:
    vc = shared_data / "helios-philly-demand" / "Earth_vcs" / "vc8Sj"
    res = CliRunner().invoke(
        main,
        [
            "--workspace",
            str(tmp_path),
            "eval",
            "demand",
            "--source",
            "helios",
            "--path",
            str(vc),
            "--models",
            "seasonal_naive_24,seasonal_naive_168",
            "--cutoffs",
            "2",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    assert rep["source"] == "helios" and rep["series"] == 1
    assert rep["metrics"]["seasonal_naive_24"]["all"]["rows"] == 48


def test_cli_eval_bad_model_name_is_an_error(tmp_path: Path) -> None:
    res = CliRunner().invoke(
        main,
        [
            "--workspace",
            str(tmp_path),
            "eval",
            "demand",
            "--source",
            "synthetic",
            "--days",
            "5",
            "--models",
            "prophet",
            "--json",
        ],
    )
    assert res.exit_code != 0
    assert "unknown model(s) prophet" in json.loads(res.stdout)["error"]


def test_series_on_different_calendars_are_backtested_apart() -> None:
    from predops.pipelines.jobs.demand import end_groups

    def rows(sid: str, end: datetime, n: int = 5) -> pl.DataFrame:
        return pl.DataFrame(
            {"series_id": sid, "ts": [end - timedelta(hours=i) for i in range(n)], "value": 1.0}
        )

    a = datetime(2018, 1, 7, tzinfo=UTC)
    b = datetime(2019, 5, 22, tzinfo=UTC)
    d = pl.concat([rows("a1", a), rows("a2", a - timedelta(hours=3)), rows("b1", b)])
    groups = end_groups(d, HOURLY_CONFIG)
    assert [sorted(g["series_id"].unique()) for g in groups] == [["a1", "a2"], ["b1"]]
