"""Evaluation metrics for rare-failure scores: ranking, operating points, calibration, lead.

Every function takes plain arrays (labels 0/1, scores where higher means riskier) or a
polars frame with named columns, and returns JSON-able numbers. Conventions:

- an *alarm* is a row whose score is ``>= threshold``;
- *false-alarm rate* (FPR) is the share of negative rows (node-hours, drive-days) that
  alarm; :func:`threshold_at_fpr` picks the lowest threshold that keeps FPR at or below
  the target, so ties never push it over;
- a *daily alert budget* of ``k`` alerts the ``k`` entities with the highest score each
  day (an entity's score for a day is its highest row score that day);
- *lead time* is how long before a failure its entity first alarmed within the
  horizon window ``[failure - horizon, failure)``, in hours.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import numpy as np
import polars as pl
from sklearn.metrics import average_precision_score, roc_auc_score


def _arrays(y: Any, score: Any) -> tuple[np.ndarray, np.ndarray]:
    yy = np.asarray(y, dtype=np.float64)
    ss = np.asarray(score, dtype=np.float64)
    if yy.shape != ss.shape or yy.ndim != 1:
        raise ValueError(f"labels {yy.shape} and scores {ss.shape} must be equal 1-D shapes")
    if np.isnan(ss).any():
        raise ValueError("scores contain NaN")
    return yy, ss


def pr_auc(y: Any, score: Any) -> float:
    """Area under the precision-recall curve (average precision); NaN without positives."""
    yy, ss = _arrays(y, score)
    if yy.sum() == 0:
        return math.nan
    return float(average_precision_score(yy, ss))


def roc_auc(y: Any, score: Any) -> float:
    yy, ss = _arrays(y, score)
    if yy.sum() == 0 or yy.sum() == yy.size:
        return math.nan
    return float(roc_auc_score(yy, ss))


def threshold_at_fpr(y: Any, score: Any, fpr: float) -> float:
    """The lowest threshold whose false-alarm rate is at most ``fpr``."""
    yy, ss = _arrays(y, score)
    neg = np.sort(ss[yy == 0])[::-1]
    allowed = math.floor(fpr * neg.size + 1e-9)
    if neg.size == 0 or allowed >= neg.size:
        return -math.inf
    # Strictly above the (allowed+1)-th highest negative: at most `allowed` negatives alarm.
    return float(np.nextafter(neg[allowed], math.inf))


def at_threshold(y: Any, score: Any, threshold: float) -> dict[str, float]:
    """Recall, precision, false-alarm rate and counts of the alarms ``score >= threshold``."""
    yy, ss = _arrays(y, score)
    alarm = ss >= threshold
    tp = float((alarm & (yy == 1)).sum())
    fp = float((alarm & (yy == 0)).sum())
    pos, neg = float((yy == 1).sum()), float((yy == 0).sum())
    return {
        "threshold": float(threshold),
        "recall": tp / pos if pos else math.nan,
        "precision": tp / (tp + fp) if tp + fp else math.nan,
        "false_alarm_rate": fp / neg if neg else math.nan,
        "alarms": tp + fp,
        "true_alarms": tp,
        "positives": pos,
    }


def at_fpr(y: Any, score: Any, fpr: float) -> dict[str, float]:
    """:func:`at_threshold` at the threshold of :func:`threshold_at_fpr`."""
    out = at_threshold(y, score, threshold_at_fpr(y, score, fpr))
    out["target_false_alarm_rate"] = fpr
    return out


def brier(y: Any, p: Any) -> float:
    """Mean squared error of probabilities ``p`` against 0/1 labels (lower is better)."""
    yy, pp = _arrays(y, p)
    return float(np.mean((pp - yy) ** 2))


def reliability(y: Any, p: Any, *, bins: int = 10) -> list[dict[str, float]]:
    """Reliability table: rows grouped into ``bins`` equal-count bins of predicted ``p``;
    per bin the mean prediction, the observed failure rate and the row count. Equal-count
    bins because rare-event probabilities crowd near zero."""
    yy, pp = _arrays(y, p)
    if yy.size == 0:
        return []
    order = np.argsort(pp, kind="stable")
    out = []
    for part in np.array_split(order, min(bins, yy.size)):
        out.append(
            {
                "p_low": float(pp[part].min()),
                "p_high": float(pp[part].max()),
                "p_mean": float(pp[part].mean()),
                "observed": float(yy[part].mean()),
                "rows": int(part.size),
            }
        )
    return out


def expected_calibration_error(table: list[dict[str, float]]) -> float:
    """Row-weighted mean |p_mean - observed| over a :func:`reliability` table."""
    n = sum(b["rows"] for b in table)
    if not n:
        return math.nan
    return float(sum(b["rows"] * abs(b["p_mean"] - b["observed"]) for b in table) / n)


def at_daily_budget(
    rows: pl.DataFrame,
    k: int,
    *,
    score: str = "score",
    label: str = "label",
    entity: str = "node_id",
    time: str = "ts",
) -> dict[str, float]:
    """Precision and recall of alerting the top ``k`` entities per UTC day.

    An entity-day is positive when any of its rows is; precision is the share of alerted
    entity-days that are positive, recall the share of positive entity-days alerted.
    """
    if k < 1:
        raise ValueError("the daily budget k must be >= 1")
    days = (
        rows.group_by(pl.col(time).dt.date().alias("__day"), entity)
        .agg(pl.col(score).max().alias("__s"), pl.col(label).max().alias("__y"))
        .with_columns(pl.col("__s").rank("ordinal", descending=True).over("__day").alias("__rank"))
    )
    alerted = days.filter(pl.col("__rank") <= k)
    pos = float(days["__y"].sum())
    tp = float(alerted["__y"].sum())
    n_days = days["__day"].n_unique()
    return {
        "k_per_day": k,
        "days": n_days,
        "alerts": float(alerted.height),
        "precision": tp / alerted.height if alerted.height else math.nan,
        "recall": tp / pos if pos else math.nan,
        "positive_entity_days": pos,
    }


def lead_times(
    rows: pl.DataFrame,
    failures: pl.DataFrame,
    *,
    threshold: float,
    horizon: timedelta,
    score: str = "score",
    entity: str = "node_id",
    time: str = "ts",
    failure_time: str = "at",
) -> dict[str, Any]:
    """Lead time (hours) of the first alarm before each failure, within its horizon.

    Only failures with at least one scored row of their entity in
    ``[at - horizon, at)`` count (others were not observable in ``rows``). Returns the
    number of such failures, how many were caught, the catch share and lead-time
    quantiles (``p10``, ``p25``, ``median``, ``p75``, ``p90``, ``mean``).
    """
    fails = failures.select(entity, pl.col(failure_time).alias("__at")).unique()
    joined = (
        rows.select(entity, time, score)
        .join(fails, on=entity, how="inner")
        .filter((pl.col(time) < pl.col("__at")) & (pl.col(time) >= pl.col("__at") - horizon))
    )
    per_failure = joined.group_by(entity, "__at").agg(
        pl.col(time).filter(pl.col(score) >= threshold).min().alias("__first")
    )
    observable = per_failure.height
    caught = per_failure.filter(pl.col("__first").is_not_null())
    hours = (
        ((caught["__at"] - caught["__first"]).dt.total_seconds() / 3600).to_numpy()
        if caught.height
        else np.zeros(0)
    )
    out: dict[str, Any] = {
        "failures_observable": observable,
        "failures_caught": caught.height,
        "catch_rate": caught.height / observable if observable else math.nan,
    }
    if hours.size:
        q = np.quantile(hours, [0.1, 0.25, 0.5, 0.75, 0.9])
        out["lead_hours"] = {
            "p10": float(q[0]),
            "p25": float(q[1]),
            "median": float(q[2]),
            "p75": float(q[3]),
            "p90": float(q[4]),
            "mean": float(hours.mean()),
        }
    else:
        out["lead_hours"] = None
    return out


def summary(
    y: Any,
    score: Any,
    *,
    probability: bool,
    fprs: tuple[float, ...] = (0.001, 0.005, 0.01),
    bins: int = 10,
) -> dict[str, Any]:
    """Ranking, fixed-FPR operating points and (for probabilities) calibration of one
    scorer on one set of labelled rows."""
    yy, ss = _arrays(y, score)
    out: dict[str, Any] = {
        "rows": int(yy.size),
        "positives": int(yy.sum()),
        "base_rate": float(yy.mean()) if yy.size else math.nan,
        "pr_auc": pr_auc(yy, ss),
        "roc_auc": roc_auc(yy, ss),
        "at_false_alarm_rate": {f"{f:g}": at_fpr(yy, ss, f) for f in fprs},
    }
    if probability:
        table = reliability(yy, ss, bins=bins)
        out["brier"] = brier(yy, ss)
        out["brier_of_base_rate"] = brier(yy, np.full(yy.size, yy.mean()))
        out["reliability"] = table
        out["expected_calibration_error"] = expected_calibration_error(table)
    return out
