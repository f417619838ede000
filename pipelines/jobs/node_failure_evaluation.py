"""``predops eval failure --source lanl|grid5000|titan``: node-level failure prediction
from real failure histories (no telemetry), against the base rate, the repeat-offender
rule and the logistic regression.

Per source (rows from :mod:`models.failure.node_history`):

- ``grid5000``: a failure is an unavailability interval of at least ``G5K_MIN_OUTAGE``
  (shorter ones are mostly redeploy reboots), not the one open at the trace start; its
  length is the repair time. Node = ``node_id``; narrow group = cluster, wide = site.
  Rows every 6 hours, horizon 24 hours.
- ``lanl``: a failure is any record but planned ``Maintenance``; repair = ``Down
  Time``. Node = (system, node number), every node ``0 .. nodes-1`` of a system from
  its first record to its decommissioning (nodes that never failed are negatives);
  narrow group = system, wide = the whole site. Hardware: processors per node, memory,
  the system's node count; age since the system's install month. Rows weekly, horizon
  7 days.
- ``titan``: a failure is a GPU life ending in a DBE or off-the-bus event (at its
  removal). Node = the slot position; rows only while a development GPU sits there
  (every 14 days, horizon 14 days); narrow group = cage, wide = cabinet; position
  (column, row, cage, slot, node) and the GPU's age since insertion.

Split: :func:`models.failure.evaluation.time_split` at the time that leaves the last
third of the labelled rows (by row count, :func:`row_split_at`) for testing; training
rows end one horizon before it, so no training label sees the test period. The
model's early stopping and calibration use a time-later slice inside training (the
classifier's own validation); the model settings are the drive evaluation's
(``DRIVE_PARAMS``), not tuned on these traces.
Memory: the feature frame (rows x ~20 float32 columns; Grid'5000 2.2 M rows) and its
as-of joins; measured in the report's command.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import polars as pl

from predops.features.definitions import FeatureDef
from predops.features.labels import label_name
from predops.models.failure import metrics as M
from predops.models.failure.config import DRIVE_PARAMS
from predops.models.failure.evaluation import Split, evaluate_split, time_split
from predops.models.failure.model import observed
from predops.models.failure.node_history import (
    RULE_COLUMN,
    history_feature_defs,
    history_frame,
)
from predops.pipelines.ingest.traces.grid5000 import read_grid5000
from predops.pipelines.ingest.traces.lanl_failures import read_lanl
from predops.pipelines.ingest.traces.titan_gpu import read_titan

SOURCES = ("lanl", "grid5000", "titan")
G5K_MIN_OUTAGE = timedelta(hours=1)
SETTINGS: dict[str, tuple[timedelta, timedelta]] = {
    "grid5000": (timedelta(hours=6), timedelta(hours=24)),
    "lanl": (timedelta(days=7), timedelta(days=7)),
    "titan": (timedelta(days=14), timedelta(days=14)),
}
"""Per source: row stride and label horizon."""


def _grid5000(path: str) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, Any]]:
    iv = read_grid5000(path)
    df = iv.frame.with_columns(pl.col("node").cast(pl.String).alias("node_id"))
    t0 = df["start"].min()
    hours = (pl.col("stop") - pl.col("start")).dt.total_seconds() / 3600
    fails = df.filter(
        (pl.col("event_type") == 0)
        & (hours >= G5K_MIN_OUTAGE.total_seconds() / 3600)
        & (pl.col("start") > t0)
    ).select(
        "node_id",
        pl.col("site").alias("group_a"),
        pl.col("cluster").alias("group_b"),
        pl.col("start").alias("at"),
        hours.alias("repair_hours"),
    )
    spans = df.group_by("node_id").agg(
        pl.col("site").first().alias("group_a"),
        pl.col("cluster").first().alias("group_b"),
        pl.col("start").min().alias("start"),
        pl.col("stop").max().alias("end"),
    )
    info = {"intervals": df.height, "quarantined": iv.quarantine.to_dict(), "nodes": spans.height}
    return fails, spans, info


def _lanl(path: str) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, Any]]:
    rec = read_lanl(path)
    df = rec.frame
    node_id = pl.format("{}/{}", pl.col("system"), pl.col("node"))
    fails = df.filter(pl.col("sub_cause").fill_null("") != "Maintenance").select(
        node_id.alias("node_id"),
        pl.lit("lanl").alias("group_a"),
        pl.col("system").cast(pl.String).alias("group_b"),
        pl.col("start").alias("at"),
        (pl.col("down_min") / 60).alias("repair_hours"),
    )
    end_all = df["start"].max()
    systems = df.group_by("system").agg(
        pl.col("nodes").max(),
        pl.col("start").min().alias("start"),
        pl.when(pl.col("in_service").any())
        .then(pl.lit(end_all))
        .otherwise(pl.col("decommissioned").max().fill_null(end_all))
        .alias("end"),
        pl.col("installed").min(),
        pl.col("procs_per_node").max().alias("hw__procs_per_node"),
        pl.col("mem").max().alias("hw__mem"),
    )
    spans = (
        systems.with_columns(pl.int_ranges(0, pl.col("nodes")).alias("node"))
        .explode("node")
        .with_columns(
            node_id.alias("node_id"),
            pl.lit("lanl").alias("group_a"),
            pl.col("system").cast(pl.String).alias("group_b"),
            pl.col("nodes").cast(pl.Float64).alias("hw__nodes"),
            pl.min_horizontal("end", pl.lit(end_all)).alias("end"),
        )
        .drop("system", "nodes", "node")
    )
    # Records of node numbers beyond the system's count still count (as their own node).
    info = {"records": df.height, "quarantined": rec.quarantine.to_dict(), "nodes": spans.height}
    return fails, spans, info


def _titan(path: str) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, Any]]:
    lives = read_titan(path)
    df = lives.frame.with_columns(
        pl.format("c{}-{}", "col", "row").alias("group_a"),
        pl.format("c{}-{}c{}", "col", "row", "cage").alias("group_b"),
        pl.col("location").alias("node_id"),
    )
    fails = df.filter(pl.col("event").is_not_null()).select(
        "node_id",
        "group_a",
        "group_b",
        pl.col("remove").alias("at"),
        pl.lit(None, dtype=pl.Float64).alias("repair_hours"),
    )
    # A life without an insert time still fails (above) but has no rows.
    spans = df.filter(pl.col("insert").is_not_null()).select(
        "node_id",
        "group_a",
        "group_b",
        pl.col("insert").alias("start"),
        pl.col("remove").alias("end"),
        pl.col("insert").alias("installed"),
        *[
            pl.col(c).cast(pl.Float64).alias(f"hw__{c}")
            for c in ("col", "row", "cage", "slot", "node")
        ],
    )
    info = {
        "lives": df.height,
        "quarantined": lives.quarantine.to_dict(),
        "slots": df["node_id"].n_unique(),
    }
    return fails, spans, info


NODE_SOURCE_PARAMS: dict[str, dict[str, Any]] = {}
"""Per source, on top of ``DRIVE_PARAMS`` (chosen with ``--validation`` only)."""


def row_split_at(
    frame: pl.DataFrame, *, horizon: timedelta, label_cutoff: datetime, test_share: float = 1 / 3
) -> datetime:
    """The time before which ``1 - test_share`` of the labelled rows lie (fleets grow:
    a cut by calendar time would leave LANL's training part a few early systems)."""
    rows = observed(frame, horizon, label_cutoff=label_cutoff)
    if rows.height == 0:
        raise ValueError(f"no rows with a known {label_name(horizon)} label")
    at = rows["ts"].sort()[int(rows.height * (1 - test_share))]
    assert isinstance(at, datetime)
    return at


READERS = {"grid5000": _grid5000, "lanl": _lanl, "titan": _titan}


@dataclass(frozen=True)
class NodeData:
    """Feature rows of one trace, its failures and the evaluation's time split."""

    source: str
    frame: pl.DataFrame
    failures: pl.DataFrame
    split: Split
    defs: list[FeatureDef]
    horizon: timedelta
    stride: timedelta
    info: dict[str, Any]
    seconds: float


def node_data(source: str, path: str, *, validation: bool = False) -> NodeData:
    """Read ``path`` with ``source``'s adapter, build the rows and cut the split.
    ``validation``: the same cut inside the training rows instead (training labels
    only; the test period is not read), for choosing settings."""
    if source not in READERS:
        raise ValueError(f"source must be one of {SOURCES}, got {source!r}")
    t0 = time.perf_counter()
    fails, spans, info = READERS[source](path)
    stride, horizon = SETTINGS[source]
    frame = history_frame(fails, spans, stride=stride, horizon=horizon)
    cutoff = fails["at"].max()
    if not isinstance(cutoff, datetime):
        raise ValueError(f"{path}: no {source} failures read")
    frame = frame.with_columns(
        pl.when(pl.col("ts") + horizon <= cutoff)
        .then(pl.col(label_name(horizon)))
        .otherwise(None)
        .alias(label_name(horizon))
    )
    split_at = row_split_at(frame, horizon=horizon, label_cutoff=cutoff)
    split = time_split(frame, horizon=horizon, split_at=split_at, label_cutoff=cutoff)
    if validation:
        inner = split.train_label_cutoff
        rows = split.train
        at = row_split_at(rows, horizon=horizon, label_cutoff=inner)
        split = time_split(rows, horizon=horizon, split_at=at, label_cutoff=inner)
    return NodeData(
        source,
        frame,
        fails.select("node_id", "at"),
        split,
        history_feature_defs(frame),
        horizon,
        stride,
        info,
        time.perf_counter() - t0,
    )


def evaluate_node_failures(
    source: str,
    path: str,
    *,
    validation: bool = False,
    params: dict[str, Any] | None = None,
    stage: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Model vs logistic vs repeat-offender rule vs base rate on ``source`` (module doc);
    ``validation``: on the split inside the training rows (:func:`node_data`);
    ``stage(name)`` is called as each stage begins (progress)."""
    t0 = time.perf_counter()
    if stage is not None:
        stage(f"read {source} and build node rows")
    data = node_data(source, path, validation=validation)
    if stage is not None:
        stage("fit and score the model and baselines")
    split, horizon, defs = data.split, data.horizon, data.defs
    res, _ = evaluate_split(
        split,
        horizon=horizon,
        feature_defs=defs,
        feature_set_hash=f"node-history-v1-{source}",
        rule_columns=[RULE_COLUMN],
        failures=data.failures,
        model_params={**DRIVE_PARAMS, **NODE_SOURCE_PARAMS.get(source, {}), **(params or {})},
        anomaly=False,
        budgets=(10, 50),
    )
    y = split.test[label_name(horizon)].to_numpy().astype(np.float64)
    base = float(split.train[label_name(horizon)].mean())  # type: ignore[arg-type]
    res["base_rate"] = {
        "train_rate": base,
        **M.summary(y, np.full(y.size, base), probability=True, fprs=(0.005,)),
    }
    cmp = res["comparison"]
    return {
        "source": source,
        "validation": validation,
        "input": data.info,
        "failures": data.failures.height,
        "rows": data.frame.height,
        "row_stride_hours": data.stride.total_seconds() / 3600,
        "horizon_hours": horizon.total_seconds() / 3600,
        "features": [d.name for d in defs],
        "rule": {"columns": [RULE_COLUMN], "fires_when": "the node failed in the last 30 days"},
        "seconds": {
            "frame": round(data.seconds, 1),
            "total": round(time.perf_counter() - t0, 1),
        },
        "split": res,
        "targets": {
            "failures_caught_at_rule_fpr_over_rule": cmp["model_over_rule_failures_caught"],
            "at_least_1_5x_rule": bool(cmp["model_over_rule_failures_caught"] >= 1.5),
            "recall_at_0_5pct_fpr": res["model"]["at_false_alarm_rate"]["0.005"]["recall"],
        },
    }
