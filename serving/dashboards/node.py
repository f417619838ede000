"""The node page's data: where the node sits, its risk over the last days, the telemetry
behind it and its failure / repair history.

Risk over time is the served champion scoring the node's hourly rows in the latest
offline feature frame (``predops features build``) — a retrospective score by today's
model, not the scores that were served at the time (no risk history is stored). Rows
before the model's training cutoff were in its training data; the page marks that
boundary so nobody reads in-sample scores as a track record.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

import polars as pl

from predops.core.schemas import EVENT_KINDS
from predops.features.definitions import COUNTERS, GAUGES
from predops.pipelines.jobs.features import NODE_TRAINING
from predops.pipelines.workspace.errors import FeatureStoreError
from predops.pipelines.workspace.feature_store import FeatureStore
from predops.pipelines.workspace.lake import Lake
from predops.serving.context import ServeContext

NODE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,252}$")
DEFAULT_TELEMETRY = (*GAUGES, *COUNTERS)
"""Telemetry plotted after the columns a node's reasons point at (the feature sources)."""
HISTORY_EVENTS = sorted(EVENT_KINDS - {"ready", "not_ready"})
"""Events listed as a node's history (readiness flips are telemetry, not history)."""


def valid_node_id(node_id: str) -> bool:
    """A node id is a Kubernetes-style name: letters, digits, ``.``, ``_``, ``:``, ``-``."""
    return bool(NODE_ID.match(node_id))


STALE_COLUMN, STALE_MINUTES = "samples__minutes_since_last", 60.0
"""A history row whose newest telemetry sample is older than this is drawn as a gap."""


def risk_history(
    ctx: ServeContext,
    node_id: str,
    *,
    since: datetime,
    horizon: timedelta,
    until: datetime | None = None,
) -> dict[str, Any]:
    """The node's offline rows from ``since`` to ``until`` (default: all after
    ``since``) scored by the served champion at ``horizon``:
    ``{"ts": [...], "p_fail": [...], "trained_until": datetime | None, "problem": str}``."""
    loaded = ctx.failure.current
    if loaded is None:
        return {"ts": [], "p_fail": [], "problem": "no failure model is served"}
    model = loaded.model
    try:
        frame = FeatureStore(ctx.settings.features_dir).scan_offline(NODE_TRAINING)
    except FeatureStoreError as exc:
        return {"ts": [], "p_fail": [], "problem": str(exc)}
    # a lazy scan: the fleet's offline frame is never read whole (row groups whose
    # node_id statistics exclude the node are skipped)
    keep = (pl.col("node_id") == node_id) & (pl.col("ts") >= since)
    if until is not None:
        keep &= pl.col("ts") <= until
    rows = frame.filter(keep).sort("ts").collect()
    if rows.height == 0:
        return {
            "ts": [],
            "p_fail": [],
            "problem": f"no feature rows for {node_id} since "
            f"{since:%Y-%m-%d %H:%M} UTC in the offline frame",
        }
    if horizon not in model.horizons:
        horizon = model.horizons[0]
    risks = model.predict_risk(rows, horizons=[horizon], reasons_for=0)
    stale = (
        rows[STALE_COLUMN].fill_null(float("inf")) > STALE_MINUTES
        if STALE_COLUMN in rows.columns
        else pl.Series([False] * rows.height)
    ).to_list()
    return {
        "ts": [r.as_of for r in risks],
        # A score over features with no telemetry behind them is no risk at all: a gap.
        "p_fail": [None if gone else r.p_fail for r, gone in zip(risks, stale, strict=True)],
        "trained_until": loaded.provenance.data_cutoff,
        "model": f"{loaded.name} v{loaded.version}",
        "horizon_h": horizon.total_seconds() / 3600,
        "problem": None,
    }


def telemetry(
    ctx: ServeContext, node_id: str, *, since: datetime, until: datetime, first: list[str]
) -> pl.DataFrame:
    """The node's raw telemetry between ``since`` and ``until``; columns named in
    ``first`` (the ones its reasons point at) lead, then :data:`DEFAULT_TELEMETRY`."""
    lake = Lake(ctx.settings.lake_dir)
    if not lake.files("telemetry"):
        return pl.DataFrame()
    scan = lake.scan("telemetry")
    have = scan.collect_schema().names()
    cols = [c for c in dict.fromkeys([*first, *DEFAULT_TELEMETRY]) if c in have]
    return (
        scan.filter(
            (pl.col("node_id") == node_id) & (pl.col("ts") >= since) & (pl.col("ts") <= until)
        )
        .select("ts", *cols)
        .unique("ts", keep="first")
        .sort("ts")
        .collect()
    )


def events(ctx: ServeContext, node_id: str, *, until: datetime) -> list[dict[str, Any]]:
    """The node's failure, repair, maintenance and cordon events up to ``until``, newest
    first."""
    lake = Lake(ctx.settings.lake_dir)
    if not lake.files("events"):
        return []
    return (
        lake.scan("events")
        .filter(
            (pl.col("node_id") == node_id)
            & pl.col("kind").is_in(HISTORY_EVENTS)
            & (pl.col("at") <= until)
        )
        .select("at", "kind", "cause", "detail")
        .unique(["at", "kind"], keep="first")
        .sort("at", descending=True)
        .collect()
        .to_dicts()
    )


def telemetry_columns(reasons: list[str]) -> list[str]:
    """Raw telemetry columns behind feature names: ``gpu_temp_c__max_6h`` ->
    ``gpu_temp_c``; counters are features of the ``*_total`` column (``mce__since_install``
    -> ``mce_total``). Both spellings are returned; the caller keeps those that exist."""
    out: list[str] = []
    for r in reasons:
        base = r.split("__", 1)[0]
        out += [base, f"{base}_total"]
    return list(dict.fromkeys(out))


def varying_columns(frame: pl.DataFrame) -> tuple[list[str], list[str]]:
    """Columns (besides ``ts``) that change over the window, and those that do not (a GPU
    temperature of a CPU node is all zero: nothing to plot)."""
    varying: list[str] = []
    flat: list[str] = []
    for c in frame.columns:
        if c == "ts":
            continue
        (varying if frame[c].drop_nulls().n_unique() > 1 else flat).append(c)
    return varying, flat
