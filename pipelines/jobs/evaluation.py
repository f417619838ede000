"""``predops eval failure``: the failure model against the baselines on one source.
Over 500 lines: one use case, ``predops eval failure``, over its three sources (nodes,
Backblaze drives, NAB), which share the validated reads, the splits and the scoreboard;
a fourth source would be the time to give each source its module.

- ``synthetic``: the simulated fleet (``--nodes`` x ``--days``, simulated in memory, or
  read from a lake at ``--path``), node features every hour, horizons 6 h / 24 h / 72 h,
  time-ordered split (last third tested).
- ``backblaze-daily`` / ``backblaze-hds``: any file or folder in the publisher's format,
  read through the ingest adapter and validated (bad rows counted, no lake needed);
  drive-day rows (every ``stride`` days), 30-day horizon; a time-ordered split and a
  time-ordered drive-cohort split.
- ``nab``: the label-free series detector scored with NAB's standard profile (and the
  two others), next to the published scoreboard when ``results/final_results.json`` is
  found beside the data.

Every figure comes from :mod:`models.failure.evaluation` (model, logistic regression and
reactive rule on the same test rows).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from predops.core.clock import Clock
from predops.core.schemas import ANOMALY_WINDOWS, DRIVE_SMART, EVENTS, SERIES, schema_for
from predops.core.validation import validate
from predops.features.definitions import FeatureDef, NodeFeatureSpec, node_feature_set
from predops.features.frames import DEFAULT_HORIZONS, finish_node_features, node_local_features
from predops.features.labels import add_failure_labels, label_name
from predops.models.anomaly.nab import PROFILES, nab_score, prepare_file
from predops.models.anomaly.series import alarm_score
from predops.models.failure.baselines import DRIVE_RULE_COLUMNS, node_rule_columns
from predops.models.failure.config import DRIVE_PARAMS, MODEL_PARAMS, node_model_defs
from predops.models.failure.drives import drive_feature_defs, drive_features, present_smart_ids
from predops.models.failure.evaluation import (
    Split,
    cohort_split,
    default_split_at,
    evaluate_split,
    time_split,
)
from predops.pipelines.workspace.lake import Lake

log = logging.getLogger(__name__)

SOURCES = ("synthetic", "backblaze-daily", "backblaze-hds", "nab")
DRIVE_HORIZON = timedelta(days=30)
DRIVE_SOURCE_PARAMS: dict[str, dict[str, Any]] = {
    "backblaze-hds": {"linear_blend": True},
    "backblaze-daily": {"linear_blend": True, "negative_rate": 0.5, "num_leaves": 7},
}
"""Per source, on top of ``DRIVE_PARAMS``. Daily: chosen on a validation window inside
the training period, never the test period (drives of the training cohort, 30 % of them
held out, rows from 2013-04-14 on: PR-AUC 0.185 vs 0.107 with the hds settings, logistic
0.159; ``predops eval failure --validation`` cuts these windows). Both: the blend with
the logistic part picks its own weight on the classifier's calibration slice
(training-period rows; hds chose 0.9 and 1.0, daily 1.0). The 2013 daily files hold 40
days: the 30-day purge leaves no time-later slice inside training, so the classifier
holds out whole drives for early stopping and calibration.

Measured (30-day horizon, model / logistic / SMART rule): hds time split PR-AUC
0.093 / 0.082 / 0.052, failures caught at the rule's false-alarm rate (2.6 % of
drive-days) 548 / 539 / 465 of 1,014 (1.18x the rule), recall at 0.5 % false alarms
0.27 / 0.27 / 0.24; hds drive-cohort split 0.101 / 0.088 / 0.048, caught 156 / 158 / 136
of 286 (1.15x); daily drive-cohort split PR-AUC 0.245 / 0.209 / 0.074, caught at the rule's rate
(9.1 %) 24 / 27 / 21 of 37 (1.14x), recall at 0.5 % 0.32 / 0.37 / 0.19.

Why 1.5x is out of reach here (``benchmarks/bench_failure_ceiling.py``, test rows only): the
rule fires in the 30 days before every failure that shows a SMART 5/187/197/198 count
and catches all of them (hds 465; daily 21), so 1.5x must come from the quiet failures
(hds 549, daily 16) within the rule's own false-alarm budget (hds 42,921 drive-days).
It needs 233 of the 549. Even fitted on the test period itself and scored on the other
half of the drives (no drift, unseen drives), LightGBM catches 162 (every feature) or
168 (drive model, vendor, capacity, age, snapshot recency, fleet failure rate) of them
when it spends the *whole* budget on quiet rows, and a per-(model, power-on year)
failure-rate table read in sample catches 169; on all rows that cross-fit reaches 574
(1.23x). Only a fit scored on the very drives it learnt (in sample) passes (910, 1.96x;
quiet 515), which is memory, not prediction. Daily: 6-8 of the 16 quiet failures
cross-fitted (11 needed), 22 of 37 on all rows (1.05x). The daily files fill only SMART
1, 5, 9, 194 and 197 (every ``smart_N_normalized`` column is empty in 2013), and all
of them reach the features. A fleet-wide recent failure rate per drive model was tried
and left out (``DRIVE_EXCLUDED``)."""
DRIVE_EXCLUDED = frozenset({"fleet__model_afr_90d"})
"""Drive features built but not given to the model. The fleet's recent failure rate of
the drive's model (:mod:`models.failure.drives`) lowered the model on the hds validation
window inside the training period (time cut: PR-AUC 0.154 -> 0.144, caught at the rule's
false-alarm rate 823 -> 822 of the rule's 771, recall at 0.5 % 0.35 -> 0.31; cohort cut:
0.147 -> 0.139, 180 -> 176) and did not change what the daily model catches there (15
vs the rule's 14; PR-AUC 0.185 -> 0.197). The drive model category already carries the
training period's rate; ``benchmarks/bench_failure_ceiling.py`` still reads it."""
SYNTHETIC_START = datetime(2026, 1, 5, tzinfo=UTC)


@dataclass(frozen=True)
class NodeData:
    frame: pl.DataFrame
    events: pl.DataFrame
    notes: list[str]


# ---------------------------------------------------------------- inputs
def read_validated(
    source: str, path: str, *, clock: Clock
) -> tuple[dict[str, pl.DataFrame], dict[str, Any]]:
    """Every table the ``source`` adapter yields for ``path``, validated; bad rows are
    counted (with the first reason) instead of written anywhere."""
    from predops.pipelines.ingest.registry import IngestOptions, adapter

    if not Path(path).exists():
        raise FileNotFoundError(f"{path}: no such file or folder")
    good: dict[str, list[pl.DataFrame]] = {}
    bad: dict[str, Any] = {}
    for batch in adapter(source).read(path, IngestOptions(clock=clock)):
        schema = schema_for(batch.table)
        res = validate(batch.frame, schema, now=clock.now(), first_row=batch.first_row)
        good.setdefault(batch.table, []).append(res.good)
        if res.quarantined.height:
            entry = bad.setdefault(batch.table, {"rows": 0, "first": None})
            entry["rows"] += res.quarantined.height
            if entry["first"] is None:
                r = res.quarantined.row(0, named=True)
                entry["first"] = f"row {r['row']} field {r['field']}: {r['reason']}"
    return {t: pl.concat(v, how="vertical_relaxed") for t, v in good.items()}, bad


def _node_blocks(
    blocks: Iterator[pl.DataFrame],
    inventory: pl.DataFrame,
    events: pl.DataFrame,
    *,
    cutoff: datetime,
    spec: NodeFeatureSpec,
) -> pl.DataFrame:
    """Node-local features per block of nodes (bounded memory), then peers and labels."""
    parts = [
        node_local_features(
            b.lazy(),
            inventory.lazy(),
            events.lazy(),
            cutoff=cutoff,
            spec=spec,
            eval_every=timedelta(hours=1),
        ).collect()
        for b in blocks
    ]
    local = pl.concat(parts, how="vertical_relaxed")
    feats = finish_node_features(local.lazy(), spec)
    return add_failure_labels(
        feats, events.lazy(), horizons=DEFAULT_HORIZONS, label_cutoff=cutoff
    ).collect()


def synthetic_nodes(
    *, nodes: int, days: float, seed: int, interval: timedelta = timedelta(minutes=5)
) -> NodeData:
    """Simulate a fleet in memory and build its hourly training frame."""
    from predops.pipelines.synthetic.run import SimConfig, build

    cfg = SimConfig(nodes=nodes, days=days, interval=interval, seed=seed, start=SYNTHETIC_START)
    sim = build(cfg)
    events = sim.events()
    spec = NodeFeatureSpec(sample_interval=interval)
    frame = _node_blocks(sim.telemetry_blocks(), sim.inventory(), events, cutoff=cfg.end, spec=spec)
    s = sim.summary()
    notes = [
        f"simulated {nodes} nodes x {days:g} days at {interval}, seed {seed}: "
        f"{s['failures']} failures ({s['failures_with_precursor']} with a precursor)"
    ]
    return NodeData(frame, events, notes)


def lake_nodes(lake: Lake, *, source: str | None, chunk: int = 256) -> NodeData:
    """The hourly training frame of every node in a lake, built ``chunk`` nodes at a time."""
    from predops.pipelines.jobs.lake_inputs import LakeInputs, node_ids

    ids = node_ids(lake, source)
    if not ids:
        raise ValueError(f"{lake.root}: the lake has no telemetry")
    cutoff = lake.scan("telemetry", source).select(pl.col("ts").max()).collect().item()
    inp = LakeInputs.from_lake(lake, source)
    inventory, events = inp.inventory.collect(), inp.events.collect()

    def blocks() -> Iterator[pl.DataFrame]:
        for i in range(0, len(ids), chunk):
            yield LakeInputs.from_lake(lake, source, ids[i : i + chunk]).telemetry.collect()

    spec = NodeFeatureSpec(sample_interval=_sample_interval(lake, source))
    frame = _node_blocks(blocks(), inventory, events, cutoff=cutoff, spec=spec)
    return NodeData(frame, events, [f"lake {lake.root}: {len(ids)} nodes up to {cutoff}"])


def _sample_interval(lake: Lake, source: str | None) -> timedelta:
    """The median gap between one node's samples (for missing-sample fractions)."""
    first = lake.scan("telemetry", source).select(pl.col("node_id").first()).collect().item()
    ts = (
        lake.scan("telemetry", source)
        .filter(pl.col("node_id") == first)
        .select("ts")
        .sort("ts")
        .collect()["ts"]
    )
    gaps = ts.diff().drop_nulls()
    if gaps.len() == 0:
        return NodeFeatureSpec().sample_interval
    med = gaps.median()
    return med if isinstance(med, timedelta) else NodeFeatureSpec().sample_interval


# ---------------------------------------------------------------- evaluations
def _failures(events: pl.DataFrame) -> pl.DataFrame:
    return events.filter(pl.col("kind") == "failure").select("node_id", "at")


def evaluate_nodes(
    data: NodeData,
    *,
    horizons: tuple[timedelta, ...] = DEFAULT_HORIZONS,
    budgets: tuple[int, ...] = (10, 20, 50),
    params: dict[str, Any] | None = None,
    compare_strategies: bool = False,
) -> dict[str, Any]:
    """Model vs logistic vs rule per horizon on a node training frame."""
    fs = node_feature_set()
    defs = node_model_defs()
    out: dict[str, Any] = {"notes": data.notes, "feature_set_hash": fs.hash, "horizons": {}}
    fails = _failures(data.events)
    rule_cols = node_rule_columns()
    out["rule"] = {"columns": list(rule_cols), "fires_when": "any column > 0"}
    for h in horizons:
        t0 = time.perf_counter()
        split = time_split(data.frame, horizon=h, split_at=default_split_at(data.frame, horizon=h))
        res, _ = evaluate_split(
            split,
            horizon=h,
            feature_defs=defs,
            feature_set_hash=fs.hash,
            rule_columns=rule_cols,
            failures=fails,
            model_params={**MODEL_PARAMS, **(params or {})},
            anomaly=True,
            budgets=budgets,
        )
        res["seconds"] = round(time.perf_counter() - t0, 1)
        out["horizons"][_h(h)] = res
        log.info("horizon %s done in %.0f s", _h(h), res["seconds"])
    if compare_strategies:
        out["strategies"] = compare_horizon_strategies(data, horizons, params)
    out["anomaly_alone"] = _anomaly_alone(data, horizons)
    out["targets"] = node_targets(out)
    return out


def _h(h: timedelta) -> str:
    return f"{h.total_seconds() / 3600:g}h"


def _anomaly_alone(data: NodeData, horizons: tuple[timedelta, ...]) -> dict[str, Any]:
    """The label-free flag (``anomaly__max``) as a scorer on the same test rows."""
    from predops.models.anomaly.node import MAX_COLUMN, NodeAnomalyScorer
    from predops.models.failure import metrics as M

    out = {}
    for h in horizons:
        split = time_split(data.frame, horizon=h, split_at=default_split_at(data.frame, horizon=h))
        scorer = NodeAnomalyScorer().fit(split.train)
        s = scorer.transform(split.test)[MAX_COLUMN].to_numpy().astype(np.float64)
        y = split.test[label_name(h)].to_numpy()
        flags = s > scorer.threshold_
        out[_h(h)] = {
            "pr_auc": M.pr_auc(y, s),
            "flag_rate_on_reference": scorer.flag_rate,
            "flag_threshold_surprise": scorer.threshold_,
            "flagged_share_of_test_rows": float(flags.mean()),
            "flag": M.at_threshold(y, s, float(np.nextafter(scorer.threshold_, np.inf))),
        }
    return out


def compare_horizon_strategies(
    data: NodeData, horizons: tuple[timedelta, ...], params: dict[str, Any] | None
) -> dict[str, Any]:
    """PR-AUC per horizon of one model per horizon vs one stacked model, same split
    (the split of the longest horizon, so both see identical training rows)."""
    from predops.models.failure import metrics as M
    from predops.models.failure.model import train_failure_model

    fs = node_feature_set()
    longest = max(horizons)
    split_at = default_split_at(data.frame, horizon=longest)
    train = data.frame.filter(pl.col("ts") < split_at - longest)
    test = data.frame.filter(pl.col("ts") >= split_at)
    cutoff = data.frame["ts"].max()
    assert isinstance(cutoff, datetime)
    out: dict[str, Any] = {}
    for strategy in ("per_horizon", "stacked"):
        t0 = time.perf_counter()
        model = train_failure_model(
            train,
            feature_defs=node_model_defs(),
            horizons=horizons,
            feature_set_hash=fs.hash,
            strategy=strategy,
            params={**MODEL_PARAMS, **(params or {})},
            label_cutoff=split_at,
        )
        p = model.predict_proba(test)
        res: dict[str, Any] = {}
        for i, h in enumerate(model.horizons):
            lbl = label_name(h)
            known = (
                test[lbl].is_not_null() & test["usable"] & (test["ts"] + h <= cutoff)
            ).to_numpy()
            res[_h(h)] = {
                "pr_auc": M.pr_auc(test[lbl].to_numpy()[known], p[known, i]),
                "brier": M.brier(test[lbl].to_numpy()[known], p[known, i]),
            }
        ordered = int((np.diff(p, axis=1) >= -1e-12).all(axis=1).sum())
        res["rows_with_p_monotone_in_horizon"] = ordered / max(p.shape[0], 1)
        res["fit_and_score_seconds"] = round(time.perf_counter() - t0, 1)
        out[strategy] = res
    return out


LEAD_TARGET_HOURS = 6.0
"""The issue's bar for the median lead time of caught failures on the simulated fleet."""


def node_targets(report: dict[str, Any]) -> dict[str, Any]:
    """The issue's simulated-fleet targets, checked on the figures above.

    A failure's lead time is counted from the model's first alarm inside its horizon
    window ``[at - H, at)`` (an earlier alarm is a false alarm for that horizon's label),
    so it never exceeds ``H``. At the 6 h horizon a 6 h median would need more than half
    the caught failures alarmed at the very start of the window: the bar is judged on
    the longer horizons only (``null`` at 6 h), and every horizon reports how much of
    its window the median lead uses. On the default 2,000-node x 60-day fleet (seed 7)
    the median leads were 5.0 h at 6 h (84 % of the window; the SMART-style rule's
    5.2 h), 10.6 h at 24 h and 16.5 h at 72 h.
    """
    out = {}
    for h, r in report["horizons"].items():
        lead = r["model"]["lead_time"].get("lead_hours") or {}
        median = lead.get("median")
        horizon_h = float(h.removesuffix("h"))
        ratio = r["comparison"]["model_over_rule_pr_auc"]
        judged = horizon_h > LEAD_TARGET_HOURS
        out[h] = {
            "pr_auc_over_rule": ratio,
            "pr_auc_at_least_2x_rule": bool(ratio >= 2.0),
            "median_lead_hours": median,
            "median_lead_share_of_horizon": None if median is None else median / horizon_h,
            "median_lead_at_least_6h": (
                bool((median or 0.0) >= LEAD_TARGET_HOURS) if judged else None
            ),
        }
    return out


@dataclass(frozen=True)
class DriveData:
    """Drive-day rows of one Backblaze input and what they were built from."""

    frame: pl.DataFrame
    events: pl.DataFrame
    smart_ids: tuple[int, ...]
    cutoff: datetime
    stride: timedelta
    input: dict[str, Any]
    seconds: float

    @property
    def failures(self) -> pl.DataFrame:
        return _failures(self.events)


def drive_data(
    source: str,
    path: str,
    *,
    clock: Clock,
    horizon: timedelta = DRIVE_HORIZON,
    stride: timedelta | None = None,
) -> DriveData:
    """Read ``path`` with the ``source`` adapter and build its drive-day rows (every
    ``stride`` days; default 7 for hds, 1 for the daily files)."""
    tables, bad = read_validated(source, path, clock=clock)
    smart = tables.get("drive_smart", DRIVE_SMART.empty())
    events = tables.get("events", EVENTS.empty())
    if smart.height == 0:
        raise ValueError(f"{path}: no drive_smart rows read by the {source} adapter")
    step = stride or (timedelta(days=7) if source == "backblaze-hds" else timedelta(days=1))
    t0 = time.perf_counter()
    ids = present_smart_ids(smart)
    ends = [t for t in (smart["ts"].max(), events["at"].max()) if isinstance(t, datetime)]
    cutoff = max(ends)
    frame = drive_features(
        smart, events, stride=step, horizons=(horizon,), smart_ids=ids, cutoff=cutoff
    )
    info = {
        "drive_smart_rows": smart.height,
        "drives": smart["node_id"].n_unique(),
        "failures": int((events["kind"] == "failure").sum()),
        "quarantined": bad,
        "from": smart["ts"].min(),
        "to": smart["ts"].max(),
    }
    return DriveData(frame, events, ids, cutoff, step, info, time.perf_counter() - t0)


def drive_splits(
    data: DriveData, *, horizon: timedelta = DRIVE_HORIZON, cohort_share: float = 0.3
) -> tuple[list[Split], dict[str, str]]:
    """The time-ordered split (when the input is long enough for a purged one) and the
    drive-cohort split of ``data``; the second value names infeasible splits and why."""
    frame, cutoff = data.frame, data.cutoff
    split_at = default_split_at(frame, horizon=horizon, label_cutoff=cutoff)
    split_list: list[Split] = []
    errors: dict[str, str] = {}
    time_cut = time_split(frame, horizon=horizon, split_at=split_at, label_cutoff=cutoff)
    time_ok = bool(time_cut.train.height and time_cut.train[label_name(horizon)].sum() > 0)
    if time_ok:
        split_list.append(time_cut)
    else:
        span = frame["ts"].max() - frame["ts"].min()  # type: ignore[operator]
        errors["time"] = (
            f"infeasible: the input spans {span}, too short for a purged time "
            f"split at a {_d(horizon)} horizon (training labels must be decided before "
            "the test period starts); only the drive-cohort split is reported"
        )
    # Without a feasible purged time split the cohorts are not purged either (no test
    # drive is in training, so overlapping label windows cannot leak).
    split_list.append(
        cohort_split(
            frame,
            horizon=horizon,
            split_at=split_at,
            test_share=cohort_share,
            purge=time_ok,
            label_cutoff=cutoff,
        )
    )
    return split_list, errors


def validation_split(
    split: Split, *, horizon: timedelta = DRIVE_HORIZON, cohort_share: float = 0.3
) -> Split:
    """A split of ``split``'s training rows alone, cut the same way (a purged time cut;
    for cohorts, other drives of the training cohort held out), with only the labels
    the training rows had: settings are chosen on it, never on the test period."""
    rows, cutoff = split.train, split.train_label_cutoff
    at = default_split_at(rows, horizon=horizon, label_cutoff=cutoff)
    if split.name == "time":
        return time_split(rows, horizon=horizon, split_at=at, label_cutoff=cutoff)
    return cohort_split(
        rows,
        horizon=horizon,
        split_at=at,
        test_share=cohort_share,
        purge=split.purge > timedelta(0),
        label_cutoff=cutoff,
        salt="validation",
    )


def drive_rule_columns(frame: pl.DataFrame) -> list[str]:
    """The SMART rule's feature columns that carry values in ``frame``."""
    return [f"{c}__last" for c in DRIVE_RULE_COLUMNS if _has(frame, c)]


def drive_model_defs(smart_ids: tuple[int, ...]) -> list[FeatureDef]:
    """The drive features the model reads: all built from ``smart_ids`` but
    ``DRIVE_EXCLUDED``."""
    return [d for d in drive_feature_defs(smart_ids) if d.name not in DRIVE_EXCLUDED]


def drive_model_params(source: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """``DRIVE_PARAMS``, then the ``source``'s own settings, then ``params``."""
    return {**DRIVE_PARAMS, **DRIVE_SOURCE_PARAMS.get(source, {}), **(params or {})}


def evaluate_drives(
    source: str,
    path: str,
    *,
    clock: Clock,
    horizon: timedelta = DRIVE_HORIZON,
    stride: timedelta | None = None,
    budgets: tuple[int, ...] = (10, 50),
    params: dict[str, Any] | None = None,
    cohort_share: float = 0.3,
    validation: bool = False,
    stage: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Model vs logistic vs SMART rule on Backblaze drive-days (see module doc).
    ``validation``: each split's :func:`validation_split` instead (for choosing
    settings; the test period is never read). ``stage(name)`` is called as each stage
    begins (progress)."""
    if stage is not None:
        stage(f"read {source}")
    data = drive_data(source, path, clock=clock, horizon=horizon, stride=stride)
    frame = data.frame
    defs = drive_model_defs(data.smart_ids)
    out: dict[str, Any] = {
        "input": data.input,
        "rows": {
            "stride_days": data.stride.total_seconds() / 86400,
            "drive_days": frame.height,
            "seconds": round(data.seconds, 1),
            "note": "false-alarm rates are per drive-day: with a stride of k days each row "
            "is a uniform sample of drive-days, so the rates are unbiased",
        },
        "horizon_days": horizon.total_seconds() / 86400,
        "features": [d.name for d in defs],
        "rule": {
            "columns": drive_rule_columns(frame),
            "fires_when": "any SMART 5/187/197/198 raw value > 0",
        },
        "splits": {},
    }
    split_list, errors = drive_splits(data, horizon=horizon, cohort_share=cohort_share)
    if validation:
        split_list = [
            validation_split(s, horizon=horizon, cohort_share=cohort_share) for s in split_list
        ]
        out["validation"] = "splits of the training rows only; the test period is not read"
    out["splits"].update({name: {"error": why} for name, why in errors.items()})
    for split in split_list:
        if stage is not None:
            stage(f"split {split.name}")
        t1 = time.perf_counter()
        res, _ = evaluate_split(
            split,
            horizon=horizon,
            feature_defs=defs,
            feature_set_hash=f"drive-v2-{len(defs)}",
            rule_columns=out["rule"]["columns"],
            failures=data.failures,
            model_params=drive_model_params(source, params),
            anomaly=False,
            budgets=budgets,
        )
        res["seconds"] = round(time.perf_counter() - t1, 1)
        out["splits"][split.name] = res
    out["targets"] = drive_targets(out)
    return out


def _d(h: timedelta) -> str:
    return f"{h.total_seconds() / 86400:g}d"


def _has(frame: pl.DataFrame, col: str) -> bool:
    name = f"{col}__last"
    return name in frame.columns and frame[name].null_count() < frame.height


def drive_targets(report: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for name, r in report["splits"].items():
        if "error" in r:
            continue
        cmp = r["comparison"]
        out[name] = {
            "failures_caught_at_rule_fpr_over_rule": cmp["model_over_rule_failures_caught"],
            "row_recall_at_rule_fpr_over_rule": cmp["model_over_rule_row_recall"],
            "at_least_1_5x_rule": bool(cmp["model_over_rule_failures_caught"] >= 1.5),
            "pr_auc_beats_rule": bool(cmp["model_over_rule_pr_auc"] > 1.0),
            "pr_auc_beats_logistic": bool(cmp["model_over_logistic_pr_auc"] > 1.0),
            "recall_at_0_5pct_fpr": r["model"]["at_false_alarm_rate"]["0.005"]["recall"],
        }
    return out


def evaluate_nab(path: str, *, clock: Clock, window: int = 288) -> dict[str, Any]:
    """NAB scores of the streaming robust detector (and a seeded random detector, for
    scale) on the series at ``path``, next to the published scoreboard if found."""
    tables, bad = read_validated("nab", path, clock=clock)
    series = tables.get("series", SERIES.empty())
    windows = tables.get("anomaly_windows", ANOMALY_WINDOWS.empty())
    if series.height == 0:
        raise ValueError(f"{path}: no NAB series read")
    if windows.height == 0:
        raise ValueError(f"{path}: no NAB anomaly windows found (labels/combined_windows.json)")
    rng = np.random.default_rng(0)
    detectors: dict[str, list[Any]] = {"predops_robust": [], "random_seed0": []}
    for sid, part in series.sort("series_id", "ts").group_by("series_id", maintain_order=True):
        ts = part["ts"].dt.replace_time_zone(None).to_numpy()
        wins = windows.filter(pl.col("series_id") == sid[0])
        w = [
            (np.datetime64(a.replace(tzinfo=None)), np.datetime64(b.replace(tzinfo=None)))
            for a, b in wins.select("starts_at", "ends_at").iter_rows()
        ]
        values = part["value"].to_numpy()
        detectors["predops_robust"].append(prepare_file(ts, alarm_score(values, window=window), w))
        detectors["random_seed0"].append(prepare_file(ts, rng.random(values.size), w))
    out: dict[str, Any] = {
        "series": series["series_id"].n_unique(),
        "windows": windows.height,
        "quarantined": bad,
        "detector": f"robust z vs trailing {window} points + step z, new surprise only",
        "scores": {
            name: {p: nab_score(files, p) for p in PROFILES} for name, files in detectors.items()
        },
    }
    board = _scoreboard(Path(path))
    if board is not None:
        out["published_scoreboard"] = board
        out["note"] = (
            "published scores cover NAB's whole 58-file corpus; these cover only the "
            f"{out['series']} series at the path, so compare ranks, not decimals"
        )
    return out


def _scoreboard(path: Path) -> dict[str, Any] | None:
    for folder in (path, *path.parents):
        f = folder / "results" / "final_results.json"
        if f.is_file():
            board: dict[str, Any] = json.loads(f.read_text())
            return board
    return None
