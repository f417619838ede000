"""The model page's data: registered versions with their logged metrics, the served
failure champion's reliability on its held-out window, data freshness, scheduled runs."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from predops.features.labels import label_name
from predops.models.failure import metrics as M
from predops.models.failure.config import PRIMARY_HORIZON
from predops.models.failure.model import observed
from predops.pipelines.jobs.features import NODE_ONLINE, NODE_TRAINING
from predops.pipelines.workspace import promotion_records, registry
from predops.pipelines.workspace.errors import FeatureStoreError
from predops.pipelines.workspace.feature_store import FeatureStore
from predops.pipelines.workspace.lake import Lake
from predops.serving.context import ServeContext

LAKE_TIMES = {
    "telemetry": "ts",
    "events": "at",
    "demand": "ts",
    "inventory": "ts",
    "pods": "created_at",
}
"""Each lake table and the column that says how recent it is."""


def registered_models(ctx: ServeContext) -> tuple[list[dict[str, Any]], str | None]:
    """Every ``predops.*`` model with versions, aliases and each version's run metrics and
    champion promotion record (``promoted``, None without one), ``champion_state`` (where
    the alias points and the version predops promoted); or an empty list and why."""
    try:
        models = registry.list_models(uri=ctx.settings.mlflow_uri)
        runs = [v["run_id"] for m in models for v in m["versions"] if v.get("run_id")]
        metrics = registry.run_metrics(runs, uri=ctx.settings.mlflow_uri)
    except Exception as exc:  # the registry may fail in any way; the page says so
        return [], f"the model registry could not be read: {type(exc).__name__}: {exc}"
    tag = promotion_records.record_tag(registry.CHAMPION)
    for m in models:
        for v in m["versions"]:
            v["metrics"] = metrics.get(v.get("run_id") or "", {})
            v["promoted"] = promotion_records.parse_record(v["tags"].get(tag))
        m["champion"] = m["aliases"].get(registry.CHAMPION)
        m["challenger"] = m["aliases"].get(registry.CHALLENGER)
        m["champion_state"] = m["alias_states"].get(registry.CHAMPION)
    return models, None


RELIABILITY_ROWS = 100_000
"""At most this many held-out rows are scored for the calibration plot (whole nodes,
sampled by id): the window since the champion's training cutoff grows with its age and
the fleet (10,000 nodes x 14 days is 3.4 M node-hours), and one plot needs far fewer."""

_calibration: dict[tuple[Any, ...], dict[str, Any]] = {}
_lock = threading.Lock()


def failure_reliability(ctx: ServeContext, *, bins: int = 10) -> dict[str, Any]:
    """The served failure champion's reliability table at the primary horizon on the
    offline rows from its training cutoff on (the window training left out), with the
    rows' count, positives, Brier score and ECE; ``problem`` when it cannot be computed."""
    loaded = ctx.failure.current
    if loaded is None:
        return {"table": [], "problem": "no failure model is served"}
    store = FeatureStore(ctx.settings.features_dir)
    since = loaded.provenance.data_cutoff
    try:
        frame = store.scan_offline(NODE_TRAINING)
        height, last = frame.select(pl.len(), pl.col("ts").max()).collect().row(0)
    except FeatureStoreError as exc:
        return {"table": [], "problem": str(exc)}
    key = (loaded.name, loaded.version, height, last, bins)
    with _lock:
        if key in _calibration:
            return _calibration[key]
        out = _reliability(loaded.model, since, frame, last, bins)
        out["model"] = f"{loaded.name} v{loaded.version}"
        _calibration.clear()
        _calibration[key] = out
        return out


def _reliability(
    model: Any, since: datetime, frame: pl.LazyFrame, last: datetime | None, bins: int
) -> dict[str, Any]:
    horizon = PRIMARY_HORIZON if PRIMARY_HORIZON in model.horizons else model.horizons[0]
    held_out = frame.filter(pl.col("ts") >= since)
    rows_out, nodes = held_out.select(pl.len(), pl.col("node_id").n_unique()).collect().row(0)
    every = max(1, -(-rows_out // RELIABILITY_ROWS))
    if every > 1:  # whole nodes, one in ``every`` (a stable choice by id)
        held_out = held_out.filter(pl.col("node_id").hash(seed=0) % every == 0)
    rows = observed(held_out.collect(), horizon, label_cutoff=last)
    base = {
        "since": since,
        "horizon_h": horizon.total_seconds() / 3600,
        "rows": rows.height,
        "held_out_rows": rows_out,
        "sample": None if every == 1 else f"1 node in {every} of {nodes:,}",
    }
    if rows.height == 0:
        return {
            **base,
            "table": [],
            "problem": f"no labelled rows since {since:%Y-%m-%d %H:%M} "
            "UTC yet (labels need the whole horizon to have passed)",
        }
    y = rows[label_name(horizon)].to_numpy().astype(np.float64)
    p = model.predict_proba(rows)[:, list(model.horizons).index(horizon)]
    table = M.reliability(y, p, bins=bins)
    return {
        **base,
        "table": table,
        "positives": int(y.sum()),
        "brier": M.brier(y, p),
        "ece": M.expected_calibration_error(table),
        "problem": None,
    }


def freshness(ctx: ServeContext) -> list[dict[str, Any]]:
    """How recent each data set is at the server's now: lake tables, online and offline
    features. ``age`` is a timedelta; ``stale`` when older than the configured limit
    (only judged for what scoring reads: telemetry and online features)."""
    now = ctx.clock.now()
    limit = ctx.config.max_data_age
    lake = Lake(ctx.settings.lake_dir)
    out: list[dict[str, Any]] = []
    for table, col in LAKE_TIMES.items():
        latest = _latest(lake, table, col, now) if lake.files(table) else None
        out.append(_row(f"lake: {table}", latest, now, limit if table == "telemetry" else None))
    meta = Path(ctx.settings.features_dir) / "online" / f"{NODE_ONLINE}.json"
    online = (
        datetime.fromisoformat(json.loads(meta.read_text())["as_of"]) if meta.exists() else None
    )
    out.append(_row("online node features", online, now, limit))
    metas = sorted(
        (Path(ctx.settings.features_dir) / "offline" / NODE_TRAINING).glob("as_of=*/meta.json")
    )
    offline = datetime.fromisoformat(json.loads(metas[-1].read_text())["as_of"]) if metas else None
    out.append(_row("offline node frame", offline, now, None))
    return out


RECENT = timedelta(days=1)
"""Freshness reads the last day's partitions first: the whole history (a month of
telemetry at 10,000 nodes is ~86 M rows) only when that day holds no row."""


def _latest(lake: Lake, table: str, col: str, now: datetime) -> datetime | None:
    """The latest ``col`` (the table's time column) at or before ``now``."""
    for start in (now - RECENT, None):
        found = lake.scan(table, start=start, end=now).select(pl.col(col).max()).collect().item()
        if found is not None:
            return found  # type: ignore[no-any-return]
    return None


def _row(
    what: str, latest: datetime | None, now: datetime, limit: timedelta | None
) -> dict[str, Any]:
    age = now - latest if latest is not None else None
    stale = latest is None or (limit is not None and age is not None and age > limit)
    return {"what": what, "latest": latest, "age": age, "stale": stale, "limit": limit}


RUN_STATUSES = ("running", "done", "failed", "skipped", "abandoned")
"""A scheduled run's statuses, as the models page's filter offers them."""


def run_jobs(ctx: ServeContext) -> list[str]:
    """The jobs the scheduler has recorded runs of (none without a run store)."""
    path = Path(ctx.settings.scheduler_db)
    if not path.exists():
        return []
    from predops.pipelines.workspace.runs import RunStore

    return RunStore(path).jobs()


def scheduled_runs(
    ctx: ServeContext,
    limit: int = 50,
    *,
    job: str | None = None,
    status: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> tuple[list[dict[str, Any]], str | None]:
    """The scheduler's latest runs (newest first; only ``job``'s, in ``status``,
    started in ``[since, until]`` when given), or none and why. The run store is only
    read: a workspace without one gets no file created."""
    path = Path(ctx.settings.scheduler_db)
    if not path.exists():
        return [], "no scheduler has run in this workspace yet (`predops schedule` starts one)"
    from predops.pipelines.workspace.runs import RunStore

    runs = RunStore(path).runs(job, limit, status=status, since=since, until=until)
    if runs:
        return runs, None
    return [], "no run matches the filters and the time range"


def _aware(text: str) -> datetime | None:
    """An ISO time tag as an aware UTC time (a naive one is UTC); None if unreadable."""
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        return None
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t


def versions_in_range(
    models: list[dict[str, Any]], since: datetime, until: datetime
) -> list[dict[str, Any]]:
    """Each model with only the versions trained on data up to a time in ``[since,
    until]`` (their ``predops.data_cutoff`` tag; the registration time when the tag is
    missing), and those an alias points at whenever they were trained (``hidden``:
    how many versions the range left out)."""
    out = []
    for m in models:
        kept = []
        for v in m["versions"]:
            cutoff = v["tags"].get("predops.data_cutoff")
            at = _aware(cutoff) if cutoff else v.get("created_at")
            if v["aliases"] or (at is not None and since <= at <= until):
                kept.append(v)
        out.append({**m, "versions": kept, "hidden": len(m["versions"]) - len(kept)})
    return out
