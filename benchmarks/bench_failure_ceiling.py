"""How many failures can any drive model catch at the SMART rule's own false-alarm rate?

The issue's bar: at the rule's false-alarm rate (per drive-day), the model catches at
least 1.5x as many failures as the rule (30-day horizon). This script measures how much
room the Backblaze data leaves for that, on the same drive-day rows and splits as
``predops eval failure`` (:func:`predops.pipelines.jobs.evaluation.drive_data` and
:func:`~predops.pipelines.jobs.evaluation.drive_splits`), and prints one JSON object. Per source and
split (test rows only):

- ``rule``: its false-alarm rate, the false alarms that rate allows (the budget every
  scorer gets), failures caught, and what 1.5x would need.
- ``failures``: the test failures split by whether the rule fires on any row of the 30
  days before them (``signal``) or never (``quiet``: no SMART 5/187/197/198 count), and
  how many quiet ones show another error counter (SMART 10 spin retries, 188 command
  timeouts, 189 high-fly writes, 196 reallocation events) above zero.
  The rule catches exactly the signal failures, so any scorer catches at most
  ``signal + (quiet failures it catches)``; 1.5x needs ``0.5 x rule`` quiet catches.
- ``quiet_ceiling``: quiet failures caught by rankers of the quiet rows (rule score 0)
  when they may spend a share (25 / 50 / 100 %) of the rule's whole false-alarm budget
  on quiet rows alone (100 % leaves nothing for the signal failures: generous). Rankers,
  all fitted on the **test period** itself (no drift between fit and test: optimistic):

  - ``lookup_model_age``: the failure rate of each (drive model, power-on year) cell,
    in sample;
  - ``booster_non_smart_*``: LightGBM on drive model, vendor, capacity, power-on hours,
    days observed, days since the last snapshot and the model's recent fleet failure
    rate;
  - ``booster_all_*``: LightGBM on every drive feature;

  ``*_in_sample`` scores the rows it was fitted on (it can learn the very drives it
  scores: an upper bound, not an estimate); ``*_other_drives`` fits on half the drives
  and scores the other half (same period, unseen drives: the optimistic estimate).
- ``all_rows``: the same two boosters on every feature and all test rows, scored at the
  rule's false-alarm rate (the bar's own measure).

Boosters are fitted on the first split only (the time split where the input allows one,
the drive-cohort split otherwise); the other split gets the lookup table.

The LightGBM settings (``CEILING_PARAMS``: 500 rounds, 31 leaves, at least 100 rows a
leaf, no early stopping, no calibration: only the ranking counts) are far more than the
evaluated model uses; 15,000 leaves on rows that carry power-on hours and dates can
learn which drives fail, which is why the in-sample figures are bounds, not estimates.

    python benchmarks/bench_failure_ceiling.py --json [--source backblaze-hds] [--data DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from predops.features.labels import label_name
from predops.models.failure import metrics as M
from predops.models.failure.baselines import ReactiveRule
from predops.models.failure.config import DRIVE_PARAMS
from predops.models.failure.drives import drive_feature_defs
from predops.models.failure.evaluation import Split, in_cohort
from predops.models.failure.model import train_failure_model
from predops.pipelines.jobs.evaluation import (
    DRIVE_HORIZON,
    DriveData,
    drive_data,
    drive_rule_columns,
    drive_splits,
)
from predops.pipelines.workspace.clock import SystemClock

SOURCES = {
    "backblaze-hds": "backblaze/dynamichazard-hds/hds.csv.gz",
    "backblaze-daily": "backblaze/raw-daily-2013",
}
CEILING_PARAMS: dict[str, Any] = {
    "n_estimators": 500,
    "learning_rate": 0.05,
    "num_leaves": 31,
    "min_child_samples": 100,
    "feature_fraction": 0.8,
    "reg_lambda": 1.0,
    "negative_rate": 0.2,
    "early_stopping_rounds": None,
    "calibration": None,
    "n_jobs": DRIVE_PARAMS["n_jobs"],
}
NON_SMART = (
    "drive__model",
    "drive__family",
    "drive__capacity_tb",
    "drive__power_on_hours",
    "drive__days_observed",
    "drive__days_since_snapshot",
    "fleet__model_afr_90d",
)
OTHER_COUNTERS = (10, 188, 189, 196)
BUDGET_SHARES = (0.25, 0.5, 1.0)
HOURS_PER_YEAR = 24 * 365.25


def shared_data() -> Path:
    env = os.environ.get("PREDOPS_SHARED_DATA")
    return Path(env) if env else Path(__file__).resolve().parents[1].parent / "shared" / "data"


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def window_rows(rows: pl.DataFrame, failures: pl.DataFrame, horizon: timedelta) -> pl.DataFrame:
    """Each failure's test rows in ``[at - horizon, at)`` (the rows whose alarm catches it)."""
    return rows.join(failures, on="node_id", how="inner").filter(
        (pl.col("ts") < pl.col("at")) & (pl.col("ts") >= pl.col("at") - horizon)
    )


def caught(
    rows: pl.DataFrame, score: np.ndarray, failures: pl.DataFrame, thr: float, h: timedelta
) -> int:
    scored = rows.select("node_id", "ts").with_columns(pl.Series("score", score))
    return int(M.lead_times(scored, failures, threshold=thr, horizon=h)["failures_caught"])


def fit_scores(
    rows: pl.DataFrame, names: tuple[str, ...], data: DriveData, *, cross: bool
) -> np.ndarray:
    """Scores of ``rows`` from ``CEILING_PARAMS`` boosters on the features ``names``:
    fitted on ``rows`` themselves, or (``cross``) on the other half of the drives (two
    halves by a hash of the serial, each scored by the booster fitted on the other)."""
    defs = [d for d in drive_feature_defs(data.smart_ids) if d.name in names]

    def fit(train: pl.DataFrame, score: pl.DataFrame) -> np.ndarray:
        model = train_failure_model(
            train,
            feature_defs=defs,
            horizons=(DRIVE_HORIZON,),
            feature_set_hash="ceiling",
            anomaly=False,
            params=CEILING_PARAMS,
            label_cutoff=data.cutoff,
        )
        out: np.ndarray = model.predict_proba(score)[:, 0]
        return out

    return fit(rows, rows) if not cross else cross_fit(rows, fit)


def cross_fit(
    rows: pl.DataFrame, fit: Callable[[pl.DataFrame, pl.DataFrame], np.ndarray]
) -> np.ndarray:
    """Scores of ``rows``, each half of the entities (a hash of ``node_id``) scored by
    ``fit(train, score)`` on the other half."""
    half = pl.Series(in_cohort(rows["node_id"], 0.5, salt="ceiling"))
    scores = np.zeros(rows.height)
    for side in (half, ~half):
        scores[side.to_numpy()] = fit(rows.filter(~side), rows.filter(side))
    return scores


def lookup_scores(rows: pl.DataFrame, label: str) -> np.ndarray:
    """In-sample failure rate of each (drive model, power-on year) cell, per row."""
    year = (pl.col("drive__power_on_hours") / HOURS_PER_YEAR).floor().fill_null(-1)
    cell = rows.with_columns(year.alias("__year")).with_columns(
        pl.col(label).mean().over("drive__model", "__year").alias("__rate")
    )
    return cell["__rate"].fill_null(0.0).to_numpy().astype(np.float64)


def analyse(split: Split, data: DriveData, *, fits: bool) -> dict[str, Any]:
    """The figures of the module doc for one split (boosters only with ``fits``)."""
    h, label = DRIVE_HORIZON, label_name(DRIVE_HORIZON)
    test = split.test
    y = test[label].to_numpy().astype(np.float64)
    rule_score = ReactiveRule(drive_rule_columns(test)).score(test)
    op = M.at_threshold(y, rule_score, 0.5)
    negatives = int((y == 0).sum())
    budget = round(op["false_alarm_rate"] * negatives)
    fails = data.failures.filter(pl.col("at") >= split.split_at)
    fails = fails.filter(pl.col("node_id").is_in(test["node_id"].unique().implode()))
    rule_caught = caught(test, rule_score, fails, 0.5, h)

    other = [
        pl.col(f"smart_{n}_raw__last").fill_null(0) > 0
        for n in OTHER_COUNTERS
        if f"smart_{n}_raw__last" in test.columns
    ]
    flagged = test.select(
        "node_id",
        "ts",
        pl.any_horizontal(other or [pl.lit(False)]).alias("__other"),
        pl.Series("__rule", rule_score > 0),
    )
    per_failure = (
        window_rows(flagged.with_columns(pl.Series("__y", y)), fails.select("node_id", "at"), h)
        .group_by("node_id", "at")
        .agg(pl.col("__rule").any(), pl.col("__other").any())
    )
    quiet_fails = per_failure.filter(~pl.col("__rule")).select("node_id", "at")
    n_quiet = quiet_fails.height
    out: dict[str, Any] = {
        "split": split.name,
        "test_rows": test.height,
        "rule": {
            "false_alarm_rate": op["false_alarm_rate"],
            "false_alarm_budget_rows": budget,
            "failures_observable": per_failure.height,
            "failures_caught": rule_caught,
            "needed_for_1_5x": math.ceil(1.5 * rule_caught),
        },
        "failures": {
            "signal": per_failure.height - n_quiet,
            "quiet": n_quiet,
            "quiet_with_other_counter_nonzero": int(
                per_failure.filter(~pl.col("__rule") & pl.col("__other")).height
            ),
            "quiet_catches_needed_for_1_5x": math.ceil(1.5 * rule_caught) - rule_caught,
        },
    }
    quiet_mask = rule_score == 0
    quiet = test.filter(pl.Series(quiet_mask))
    yq = y[quiet_mask]
    negq = int((yq == 0).sum())
    rankers: dict[str, np.ndarray] = {"lookup_model_age": lookup_scores(quiet, label)}
    t0 = time.perf_counter()
    every = tuple(d.name for d in drive_feature_defs(data.smart_ids))
    if fits:
        for name, names in (("non_smart", NON_SMART), ("all", every)):
            for how, cross in (("in_sample", False), ("other_drives", True)):
                rankers[f"booster_{name}_{how}"] = fit_scores(quiet, names, data, cross=cross)
    ceiling: dict[str, Any] = {}
    for name, s in rankers.items():
        per_share = {}
        for share in BUDGET_SHARES:
            thr = M.threshold_at_fpr(yq, s, min(1.0, share * budget / max(negq, 1)))
            per_share[f"{share:g}"] = caught(quiet, s, quiet_fails, thr, h)
        ceiling[name] = {
            "quiet_failures_caught_at_budget_share": per_share,
            "pr_auc_on_quiet_rows": M.pr_auc(yq, s),
        }
    out["quiet_ceiling"] = ceiling
    if fits:
        out["all_rows"] = {}
        for how, cross in (("in_sample", False), ("other_drives", True)):
            s = fit_scores(test, every, data, cross=cross)
            thr = M.threshold_at_fpr(y, s, op["false_alarm_rate"])
            n = caught(test, s, fails, thr, h)
            out["all_rows"][how] = {
                "failures_caught": n,
                "over_rule": n / rule_caught if rule_caught else math.nan,
                "pr_auc": M.pr_auc(y, s),
                "recall_at_0_5pct_fpr": M.at_fpr(y, s, 0.005)["recall"],
            }
    out["fit_seconds"] = round(time.perf_counter() - t0, 1)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--json", action="store_true", help="print the JSON object (default)")
    ap.add_argument("--source", choices=sorted(SOURCES), action="append")
    ap.add_argument("--data", type=Path, default=None, help="the shared data folder")
    ap.add_argument("--no-fits", action="store_true", help="lookup tables only (fast)")
    args = ap.parse_args()
    root = args.data or shared_data()
    report: dict[str, Any] = {"horizon_days": DRIVE_HORIZON.days, "sources": {}}
    for source in args.source or sorted(SOURCES, reverse=True):
        w0, c0 = time.perf_counter(), cpu_seconds()
        data = drive_data(source, str(root / SOURCES[source]), clock=SystemClock())
        splits, errors = drive_splits(data)
        report["sources"][source] = {
            "drive_days": data.frame.height,
            "splits": {
                s.name: analyse(s, data, fits=not args.no_fits and s is splits[0]) for s in splits
            },
            "infeasible": errors,
            "wall_seconds": round(time.perf_counter() - w0, 1),
            "cpu_seconds": round(cpu_seconds() - c0, 1),
        }
    print(json.dumps(report, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
