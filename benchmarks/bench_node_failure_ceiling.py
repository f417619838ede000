"""How many node failures can any ranking of the history features catch at the
repeat-offender rule's own false-alarm rate (LANL, Grid'5000, Titan)?

The bar of ``predops eval failure --source lanl|grid5000|titan``: at the rule's
false-alarm rate (per node-row), the model catches at least 1.5x the failures the rule
("the node failed in the last 30 days") catches. On the same rows and time split as
the evaluation (:func:`predops.pipelines.jobs.node_failure_evaluation.node_data`),
test rows only, this prints one JSON object with, per source:

- ``rule``: its false-alarm rate, the false alarms that allows (every scorer's budget),
  failures observable and caught, what 1.5x would need and the most any scorer can
  reach (every observable failure caught, over the rule's catches);
- ``failures``: the test failures split into ``signal`` (the rule fires on a row of the
  horizon before them: the node failed within 30 days of it) and ``quiet`` (it never
  does); any scorer catches at most ``signal + quiet it catches``;
- ``all_rows``: LightGBM (``CEILING_PARAMS``: 400 rounds, 31 leaves, no early stopping or
  calibration) on every history feature fitted on the **test period itself** (no drift:
  optimistic), scored at the rule's false-alarm rate: ``in_sample`` scores the rows it
  learnt (a bound, not an estimate), ``other_nodes`` fits on half the nodes (hash of the
  id) and scores the other half;
- ``quiet_ceiling``: the same cross-fitted booster on the quiet rows (rule silent) alone,
  spending 25 / 50 / 100 % of the rule's whole budget on them: quiet failures caught.

    python benchmarks/bench_node_failure_ceiling.py --json [--source lanl] [--data DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from bench_failure_ceiling import cpu_seconds, cross_fit, shared_data

from predops.features.labels import label_name
from predops.models.failure import metrics as M
from predops.models.failure.baselines import ReactiveRule
from predops.models.failure.config import DRIVE_PARAMS
from predops.models.failure.model import train_failure_model
from predops.models.failure.node_history import RULE_COLUMN
from predops.pipelines.jobs.node_failure_evaluation import NodeData, node_data

SOURCES = {
    "lanl": "lanl-failure-data",
    "grid5000": "grid5000-availability",
    "titan": "olcf-titan-gpu",
}
CEILING_PARAMS: dict[str, Any] = {
    "n_estimators": 400,
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
BUDGET_SHARES = (0.25, 0.5, 1.0)


def caught(
    rows: pl.DataFrame, score: np.ndarray, fails: pl.DataFrame, thr: float, d: NodeData
) -> int:
    scored = rows.select("node_id", "ts").with_columns(pl.Series("score", score))
    return int(M.lead_times(scored, fails, threshold=thr, horizon=d.horizon)["failures_caught"])


def fit_scores(rows: pl.DataFrame, d: NodeData, *, cross: bool) -> np.ndarray:
    def fit(train: pl.DataFrame, score: pl.DataFrame) -> np.ndarray:
        last = train["ts"].max()
        assert isinstance(last, datetime)
        model = train_failure_model(
            train,
            feature_defs=d.defs,
            horizons=(d.horizon,),
            feature_set_hash="ceiling",
            anomaly=False,
            params=CEILING_PARAMS,
            label_cutoff=last + d.horizon,  # test rows: every label known
        )
        out: np.ndarray = model.predict_proba(score)[:, 0]
        return out

    return fit(rows, rows) if not cross else cross_fit(rows, fit)


def analyse(d: NodeData) -> dict[str, Any]:
    label = label_name(d.horizon)
    test = d.split.test
    y = test[label].to_numpy().astype(np.float64)
    rule = ReactiveRule([RULE_COLUMN]).score(test)
    op = M.at_threshold(y, rule, 0.5)
    budget = round(op["false_alarm_rate"] * int((y == 0).sum()))
    fails = d.failures.filter(pl.col("at") >= d.split.split_at)
    rule_caught = caught(test, rule, fails, 0.5, d)
    flagged = test.select("node_id", "ts", pl.Series("__rule", rule > 0))
    per_failure = (
        flagged.join(fails, on="node_id", how="inner")
        .filter((pl.col("ts") < pl.col("at")) & (pl.col("ts") >= pl.col("at") - d.horizon))
        .group_by("node_id", "at")
        .agg(pl.col("__rule").any())
    )
    quiet_fails = per_failure.filter(~pl.col("__rule")).select("node_id", "at")
    out: dict[str, Any] = {
        "test_rows": test.height,
        "rule": {
            "false_alarm_rate": op["false_alarm_rate"],
            "false_alarm_budget_rows": budget,
            "failures_observable": per_failure.height,
            "failures_caught": rule_caught,
            "needed_for_1_5x": math.ceil(1.5 * rule_caught),
            "most_any_scorer_can_reach_over_rule": (
                per_failure.height / rule_caught if rule_caught else math.nan
            ),
        },
        "failures": {
            "signal": per_failure.height - quiet_fails.height,
            "quiet": quiet_fails.height,
        },
        "all_rows": {},
    }
    for how, cross in (("in_sample", False), ("other_nodes", True)):
        s = fit_scores(test, d, cross=cross)
        thr = M.threshold_at_fpr(y, s, op["false_alarm_rate"])
        n = caught(test, s, fails, thr, d)
        out["all_rows"][how] = {
            "failures_caught": n,
            "over_rule": n / rule_caught if rule_caught else math.nan,
            "pr_auc": M.pr_auc(y, s),
            "recall_at_0_5pct_fpr": M.at_fpr(y, s, 0.005)["recall"],
        }
    mask = rule == 0
    quiet = test.filter(pl.Series(mask))
    yq = y[mask]
    negq = max(int((yq == 0).sum()), 1)
    sq = fit_scores(quiet, d, cross=True)
    out["quiet_ceiling"] = {
        "pr_auc_on_quiet_rows": M.pr_auc(yq, sq),
        "quiet_failures_caught_at_budget_share": {
            f"{share:g}": caught(
                quiet,
                sq,
                quiet_fails,
                M.threshold_at_fpr(yq, sq, min(1.0, share * budget / negq)),
                d,
            )
            for share in BUDGET_SHARES
        },
    }
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--json", action="store_true", help="print the JSON object (default)")
    ap.add_argument("--source", choices=sorted(SOURCES), action="append")
    ap.add_argument("--data", type=Path, default=None, help="the shared data folder")
    args = ap.parse_args()
    root = args.data or shared_data()
    report: dict[str, Any] = {"sources": {}}
    for source in args.source or sorted(SOURCES):
        w0, c0 = time.perf_counter(), cpu_seconds()
        d = node_data(source, str(root / SOURCES[source]))
        report["sources"][source] = {
            "horizon_hours": d.horizon.total_seconds() / 3600,
            "rows": d.frame.height,
            **analyse(d),
            "wall_seconds": round(time.perf_counter() - w0, 1),
            "cpu_seconds": round(cpu_seconds() - c0, 1),
        }
        del d
    report["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(json.dumps(report, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
