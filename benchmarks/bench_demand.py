"""Benchmark: predops' demand forecaster side by side with Nixtla's mlforecast.

On one seeded synthetic panel (default 1,000 hourly series x 2,000 points: daily and
weekly cycles, scales from 5 to 5,000, AR noise, step changes like jobs arriving), the
last ``--horizon`` points of every series are held out; both libraries fit LightGBM
with the same hyper-parameters and the same lags and rolling windows on the rest and
forecast the held-out hours. Prints one JSON object with, for each side, fit and
predict seconds, MASE / sMAPE / weighted quantile loss / p10-p90 coverage on the
held-out points, and the ratios ours / mlforecast (accuracy: lower is better; time:
below 1 is faster), plus predops' wall time and peak RSS.

mlforecast needs pandas < 3, so it runs in its own virtual environment, created by this
script under ``.predops/bench-venvs/mlforecast`` (git-ignored) from PyPI, in a child
process; its peak RSS is its own. Two mlforecast runs are timed: recursive point
forecasts (one model), and with conformal prediction intervals (``n_windows=2``, three
fits), the like-for-like match of our p10/p90.

    python benchmarks/bench_demand.py --json
    python benchmarks/bench_demand.py --series 200 --points 1000 --json   # quicker
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from predops.models.demand.config import HOURLY_CONFIG
from predops.models.demand.forecaster import DemandForecaster

REPO = Path(__file__).resolve().parent.parent
VENV = REPO / ".predops" / "bench-venvs" / "mlforecast"
PEER_REQUIREMENTS = ["mlforecast>=1.0", "lightgbm>=4.3,<5", "pandas<3", "pyarrow"]
T0 = datetime(2025, 1, 6, tzinfo=UTC)  # a Monday
LGB = {
    "n_estimators": 300,
    "learning_rate": 0.05,
    "num_leaves": 31,
    "min_child_samples": 20,
    "subsample": 0.8,
    "colsample_bytree": 0.8,
}
ISSUE_LAGS = HOURLY_CONFIG.spec.lags
WINDOWS = HOURLY_CONFIG.spec.windows

PEER_SCRIPT = r"""
import json, sys, time
import pandas as pd
from lightgbm import LGBMRegressor
from mlforecast import MLForecast
from mlforecast.lag_transforms import RollingMax, RollingMean, RollingStd
from mlforecast.utils import PredictionIntervals

args = json.loads(sys.argv[1])
train = pd.read_parquet(args["train"])
lgb = args["lgb"]

def model():
    return LGBMRegressor(
        objective="l1", n_estimators=lgb["n_estimators"], learning_rate=lgb["learning_rate"],
        num_leaves=lgb["num_leaves"], min_child_samples=lgb["min_child_samples"],
        subsample=lgb["subsample"], subsample_freq=1, colsample_bytree=lgb["colsample_bytree"],
        random_state=0, verbosity=-1,
    )

def forecaster():
    transforms = []
    for w in args["windows"]:
        transforms += [RollingMean(w), RollingMax(w), RollingStd(w)]
    return MLForecast(
        models={"lgb": model()}, freq="h", lags=args["lags"], lag_transforms={1: transforms},
        date_features=["hour", "dayofweek"],
    )

out = {}
for mode in ("point", "intervals"):
    f = forecaster()
    t0 = time.perf_counter()
    if mode == "point":
        f.fit(train)
    else:
        f.fit(train, prediction_intervals=PredictionIntervals(n_windows=2, h=args["h"]))
    t1 = time.perf_counter()
    pred = f.predict(args["h"], level=[80] if mode == "intervals" else None)
    t2 = time.perf_counter()
    pred.to_parquet(args[mode])
    out[mode] = {"fit_s": t1 - t0, "predict_s": t2 - t1}
# VmHWM, not ru_maxrss: Linux carries the parent's ru_maxrss across fork + exec.
with open("/proc/self/status") as fh:
    hwm = [line for line in fh if line.startswith("VmHWM:")]
out["peak_rss_mib"] = int(hwm[0].split()[1]) / 1024 if hwm else None
import mlforecast, lightgbm
out["versions"] = {"mlforecast": mlforecast.__version__, "lightgbm": lightgbm.__version__,
                   "pandas": pd.__version__}
print(json.dumps(out))
"""


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def make_panel(n_series: int, points: int, seed: int) -> pl.DataFrame:
    """Hourly demand: level x daily x weekly cycle x AR(1) noise, plus step changes."""
    rng = np.random.default_rng(seed)
    t = np.arange(points)
    level = np.exp(rng.uniform(np.log(5), np.log(5000), n_series))[:, None]
    amp = rng.uniform(0.05, 0.4, n_series)[:, None]
    phase = rng.uniform(0, 2 * np.pi, n_series)[:, None]
    daily = 1 + amp * np.sin(2 * np.pi * t / 24 + phase)
    weekend = rng.uniform(0.6, 1.0, n_series)[:, None]
    weekly = np.where((t // 24) % 7 >= 5, weekend, 1.0)
    noise = np.zeros((n_series, points))
    sd = rng.uniform(0.02, 0.15, n_series)
    shocks = rng.normal(0, 1, (n_series, points)) * sd[:, None]
    for i in range(1, points):
        noise[:, i] = 0.8 * noise[:, i - 1] + shocks[:, i]
    # Step changes: a few big jobs start and stop per series.
    steps = np.zeros((n_series, points))
    for k in range(n_series):
        for _ in range(rng.poisson(4)):
            a = rng.integers(0, points)
            b = min(points, a + rng.integers(24, 24 * 14))
            steps[k, a:b] += rng.uniform(0.1, 0.5)
    y = np.clip(level * daily * weekly * (1 + steps) * (1 + noise), 0, None)
    ts = [T0 + timedelta(hours=i + 1) for i in range(points)]
    return pl.DataFrame(
        {
            "series_id": np.repeat([f"s{k:04d}" for k in range(n_series)], points),
            "ts": pl.Series(ts * n_series, dtype=pl.Datetime("us", "UTC")),
            "value": y.reshape(-1),
        }
    )


def ensure_peer_venv() -> Path:
    """The mlforecast environment (created once, from PyPI)."""
    python = VENV / "bin" / "python"
    if not python.exists():
        print(f"creating {VENV} (mlforecast, pandas<3) ...", file=sys.stderr)
        VENV.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", *PEER_REQUIREMENTS],
            check=True,
            stdout=sys.stderr,
        )
    return python


def scores(
    pred: pl.DataFrame, truth: pl.DataFrame, scale: dict[str, float], cols: tuple[str, ...]
) -> dict[str, float | None]:
    """MASE, sMAPE (%), wQL and coverage of forecasts ``cols`` = (p50[, p10, p90])."""
    j = pred.join(truth, on=["series_id", "ts"], how="inner")
    y = j["value"].to_numpy()
    p50 = j[cols[0]].to_numpy()
    s = j["series_id"].replace_strict(scale, return_dtype=pl.Float64).to_numpy()
    err = np.abs(y - p50)
    denom = np.abs(y) + np.abs(p50)
    out: dict[str, float | None] = {
        "rows": float(j.height),
        "mase": float(np.mean(err[s > 0] / s[s > 0])),
        "smape": float(np.mean(np.where(denom > 0, 200 * err / np.where(denom > 0, denom, 1), 0))),
        "wql": None,
        "coverage": None,
        "under_provisioning": None,
    }
    if len(cols) == 3:
        p10, p90 = j[cols[1]].to_numpy(), j[cols[2]].to_numpy()
        pin = 0.0
        for q, p in ((0.1, p10), (0.5, p50), (0.9, p90)):
            d = y - p
            pin += float(np.sum(np.where(d >= 0, q * d, (q - 1) * d)))
        out["wql"] = 2 * pin / 3 / float(np.sum(np.abs(y)))
        out["coverage"] = float(np.mean((y >= p10) & (y <= p90)))
        out["under_provisioning"] = float(np.mean(y > p90))
    return out


def mase_scales(train: pl.DataFrame, m: int = 24) -> dict[str, float]:
    """Per series, the in-sample MAE of the seasonal naive forecast (period ``m``)."""
    g = train.sort("series_id", "ts").group_by("series_id", maintain_order=True).agg("value")
    out = {}
    for sid, v in g.iter_rows():
        y = np.asarray(v, dtype=np.float64)
        out[sid] = float(np.mean(np.abs(y[m:] - y[:-m])))
    return out


def run_ours(train: pl.DataFrame, h: int, seed: int) -> tuple[pl.DataFrame, dict[str, Any]]:
    config = dataclasses.replace(HOURLY_CONFIG, horizons=tuple(range(1, h + 1)), buckets=((1, h),))
    est = DemandForecaster(config, random_state=seed, **LGB)
    t0 = time.perf_counter()
    est.fit(train)
    t1 = time.perf_counter()
    pred = est.predict()
    t2 = time.perf_counter()
    info = {
        "fit_s": t1 - t0,
        "predict_s": t2 - t1,
        "fit_predict_s": t2 - t0,
        "train_rows": est.n_train_rows_,
        "calibration": est.calibration_,
        "peak_rss_mib": peak_rss_mib(),
    }
    return pred.select("series_id", pl.col("valid_at").alias("ts"), "p10", "p50", "p90"), info


def run_peer(train: pl.DataFrame, h: int, tmp: Path) -> tuple[dict[str, pl.DataFrame], dict]:
    python = ensure_peer_venv()
    train_path = tmp / "train.parquet"
    train.select(
        pl.col("series_id").alias("unique_id"),
        pl.col("ts").dt.replace_time_zone(None).alias("ds"),
        pl.col("value").alias("y"),
    ).write_parquet(train_path)
    args = {
        "train": str(train_path),
        "point": str(tmp / "point.parquet"),
        "intervals": str(tmp / "intervals.parquet"),
        "h": h,
        "lgb": LGB,
        # Our lag k is the value k steps before the issue time; mlforecast's lag k is k
        # steps before the target, which for its one-step recursion is k - 1 before issue.
        "lags": [k + 1 for k in ISSUE_LAGS],
        "windows": list(WINDOWS),
    }
    script = tmp / "peer.py"
    script.write_text(PEER_SCRIPT)
    env = {**os.environ, "PYTHONPATH": ""}
    t0 = time.perf_counter()
    done = subprocess.run(
        [str(python), str(script), json.dumps(args)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    wall = time.perf_counter() - t0
    info = json.loads(done.stdout.strip().splitlines()[-1])
    info["child_wall_s"] = wall
    preds = {}
    for mode in ("point", "intervals"):
        p = pl.read_parquet(args[mode]).with_columns(
            pl.col("ds").cast(pl.Datetime("us")).dt.replace_time_zone("UTC").alias("ts"),
            pl.col("unique_id").alias("series_id"),
        )
        preds[mode] = p
    return preds, info


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--series", type=int, default=1000)
    ap.add_argument("--points", type=int, default=2000)
    ap.add_argument("--horizon", type=int, default=24)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-peer", action="store_true", help="Only time predops.")
    ap.add_argument("--json", action="store_true", help="Print one JSON object.")
    a = ap.parse_args()

    t_start = time.perf_counter()
    panel = make_panel(a.series, a.points, a.seed)
    cutoff = T0 + timedelta(hours=a.points - a.horizon)
    train = panel.filter(pl.col("ts") <= cutoff)
    truth = panel.filter(pl.col("ts") > cutoff)
    scale = mase_scales(train)
    rss_before = peak_rss_mib()
    ours_pred, ours = run_ours(train, a.horizon, a.seed)
    ours["wall_s"] = time.perf_counter() - t_start
    ours.update(scores(ours_pred, truth, scale, ("p50", "p10", "p90")))
    report: dict[str, Any] = {
        "panel": {"series": a.series, "points": a.points, "horizon": a.horizon, "seed": a.seed},
        "predops": ours,
        "peak_rss_mib_before_fit": rss_before,
    }
    if not a.skip_peer:
        with tempfile.TemporaryDirectory() as tmp:
            preds, peer = run_peer(train, a.horizon, Path(tmp))
        peer["point"].update(scores(preds["point"], truth, scale, ("lgb",)))
        peer["intervals"].update(
            scores(preds["intervals"], truth, scale, ("lgb", "lgb-lo-80", "lgb-hi-80"))
        )
        report["mlforecast"] = peer
        pt, it = peer["point"], peer["intervals"]
        ratios = {
            "mase_ours_over_mlforecast": ours["mase"] / pt["mase"],
            "smape_ours_over_mlforecast": ours["smape"] / pt["smape"],
            "wql_ours_over_mlforecast_intervals": ours["wql"] / it["wql"],
            "fit_predict_time_ours_over_mlforecast_point": ours["fit_predict_s"]
            / (pt["fit_s"] + pt["predict_s"]),
            "fit_predict_time_ours_over_mlforecast_intervals": ours["fit_predict_s"]
            / (it["fit_s"] + it["predict_s"]),
        }
        report["ratios"] = ratios
        report["targets"] = {
            "accuracy_no_worse": ratios["mase_ours_over_mlforecast"] <= 1.0,
            # Issue 23's bar: fit + predict no slower than mlforecast's on the same panel.
            "time_no_slower_point": ratios["fit_predict_time_ours_over_mlforecast_point"] <= 1.0,
            "time_no_slower_intervals": ratios["fit_predict_time_ours_over_mlforecast_intervals"]
            <= 1.0,
        }
    if a.json:
        print(json.dumps(report, default=str))
    else:
        print(json.dumps(report, indent=2, default=str))


if __name__ == "__main__":
    main()
