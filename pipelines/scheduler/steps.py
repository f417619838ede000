"""The steps of the scheduled jobs, each a thin call into the existing job functions.

Every step takes the job context, the run's data cutoff and the run's output folder and
returns :class:`StepOutcome`, or raises :class:`StepSkipped` with the reason a step
cannot run yet (no champion, nothing configured) — a skipped
step writes nothing, it never fakes output. Every file a step writes is written
atomically (temporary file + rename), so a killed run leaves the previous version or
the new one, never half of either.

- pipeline: ``features`` (online latest values) -> ``score`` (champion failure model)
  -> ``forecast`` (champion demand model) -> ``plan`` (:func:`predops.pipelines.jobs.plan.
  plan_in_workspace` as of the cutoff). Incremental (:mod:`predops.pipelines.jobs.cycle`):
  with the local engine the node features are recomputed only when their inputs changed,
  and ``plan`` takes this run's scores and forecasts and each node's last-seen time from
  the earlier steps and the cycle state instead of computing them again (the results
  are the same, ``tests/pipelines/jobs/test_cycle.py``).
- retrain: ``label`` (failure / repair events from the lake's raw signals, unless the
  simulator's own failures are there; ``[retrain] labels``) -> ``features_offline`` ->
  ``train_demand`` -> ``promote_demand`` ->
  ``train_failure`` -> ``promote_failure`` -> ``train_usage`` -> ``promote_usage``
  (``[retrain] usage``, default true)
- lake_maintenance: ``lake_maintenance`` (retention, compaction of settled day
  partitions, deletion of replaced files; ``[lake]``, :mod:`predops.pipelines.workspace.
  lake_maintenance`)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from predops.pipelines.scheduler.context import JobContext
from predops.pipelines.workspace.atomic import atomic_write_records
from predops.pipelines.workspace.risk_file import write_risks
from predops.pipelines.workspace.settings import operator_identity


class StepSkipped(Exception):
    """The step cannot run yet; the message says why (it goes to the run table)."""


@dataclass(frozen=True, slots=True)
class StepOutcome:
    """What a step did: rows it wrote (or scored) and a JSON-able detail."""

    rows: int = 0
    detail: dict[str, Any] = field(default_factory=dict)
    outputs: tuple[str, ...] = ()
    """Files the step wrote (absolute paths), listed in the run's manifest."""
    carry: Any = None
    """Handed on to the run's later steps (``ctx.carried[step name]``), never recorded."""


Step = Callable[[JobContext, datetime, Path], StepOutcome]


def _write_records(path: Path, records: Sequence[Any]) -> str:
    atomic_write_records(path, records)
    return str(path)


# ---------------------------------------------------------------- labels
def label(ctx: JobContext, cutoff: datetime, out: Path) -> StepOutcome:
    """Failure and repair labels from what the cluster recorded (Ready, node problems,
    GPU signals, tickets; :mod:`predops.pipelines.jobs.labels`) over the training window.

    ``[retrain] labels``: ``auto`` (default) labels unless the lake holds the simulator's
    own failure events (a demo trains on its ground truth), ``labeller`` always, ``off``
    never."""
    from predops.pipelines.jobs.labels import label_lake
    from predops.pipelines.workspace.audit import AuditLog
    from predops.pipelines.workspace.lake import Lake

    mode = ctx.config.retrain.labels
    if mode == "off":
        raise StepSkipped("[retrain] labels = 'off'")
    lake = Lake(ctx.settings.lake_dir)
    if mode == "auto" and _simulated_failures(lake):
        raise StepSkipped(
            "the lake holds the simulator's own failure events, the labels of a demo "
            "([retrain] labels = 'labeller' labels it anyway)"
        )
    since = cutoff - ctx.config.features.training_window
    audit = AuditLog(ctx.settings.audit_log, who=operator_identity())
    report = label_lake(lake, clock=ctx.clock, since=since, audit_entries=audit.entries())
    written = report.get("events", {})
    rows = int(written.get("rows_written", 0)) if isinstance(written, dict) else 0
    return StepOutcome(rows, {k: v for k, v in report.items() if k != "rules"})


def _simulated_failures(lake: Any) -> bool:
    import polars as pl

    events = lake.scan("events", "synthetic").filter(pl.col("kind") == "failure")
    return bool(events.select(pl.len()).collect().item() > 0)


# ---------------------------------------------------------------- pipeline
def features_online(ctx: JobContext, cutoff: datetime, out: Path) -> StepOutcome:
    """Latest node and demand features as of the cutoff into the online store; with the
    local engine incrementally (the stored node rows are kept when their inputs did not
    change, :func:`predops.pipelines.jobs.cycle.online_features`)."""
    from predops.pipelines.jobs.cycle import online_features
    from predops.pipelines.jobs.features import materialise_online
    from predops.pipelines.workspace.feature_store import FeatureStore
    from predops.pipelines.workspace.lake import Lake

    f = ctx.config.features
    lake, store = Lake(ctx.settings.lake_dir), FeatureStore(ctx.settings.features_dir)
    if f.engine == "local" and f.incremental:
        report = online_features(lake, store, as_of=cutoff)
    else:
        report = materialise_online(
            lake, store, as_of=cutoff, engine=f.engine, scheduler=f.dask_scheduler
        )
    rows = int(report.get("nodes", 0)) + int(report.get("series", 0))
    online = ctx.settings.features_dir / "online"
    files = tuple(str(p) for p in sorted(online.glob("*.arrow")))
    return StepOutcome(rows, report, files)


def score(ctx: JobContext, cutoff: datetime, out: Path) -> StepOutcome:
    """Failure risk of every node from the champion failure model."""
    from predops.pipelines.jobs.plan import failure_risk

    risks, note = failure_risk(ctx.settings, cutoff, reuse=ctx.config.features.incremental)
    if note["status"] != "ok":
        raise StepSkipped(note["note"])
    path = out / "risk.json"
    write_risks(path, risks)
    return StepOutcome(len(risks), note, (str(path),), carry=(risks, note))


def forecast(ctx: JobContext, cutoff: datetime, out: Path) -> StepOutcome:
    """Forecasts of every demand series from the champion demand model (incremental:
    the previous run's when the served version and its inputs did not change)."""
    from predops.pipelines.jobs.plan import demand_forecasts

    forecasts, note = demand_forecasts(ctx.settings, reuse=ctx.config.features.incremental)
    if note["status"] != "ok":
        raise StepSkipped(note["note"])
    path = _write_records(out / "forecasts.json", [f.to_dict() for f in forecasts])
    return StepOutcome(len(forecasts), note, (path,), carry=(forecasts, note))


def plan(ctx: JobContext, cutoff: datetime, out: Path) -> StepOutcome:
    """Plan as of the cutoff with the configuration's ``[policy]``: the same plan file
    (named by its content, so a re-run overwrites it) and audit entry as
    ``predops plan --at <cutoff> --config <the same file>`` writes. This run's scores and
    forecasts (when its ``score`` / ``forecast`` steps ran) and the nodes' last-seen times
    (from the cycle state) are handed in rather than computed again."""
    from predops.pipelines.jobs.cycle import last_seen, snapshot_file
    from predops.pipelines.jobs.plan import plan_in_workspace
    from predops.pipelines.workspace.feature_store import FeatureStore
    from predops.pipelines.workspace.lake import Lake

    handed: dict[str, Any] = {}
    if ctx.config.features.incremental:
        lake, store = Lake(ctx.settings.lake_dir), FeatureStore(ctx.settings.features_dir)
        handed = {
            "scored": ctx.carried.get("score"),
            "forecasted": ctx.carried.get("forecast"),
            "seen": last_seen(lake, store, cutoff),
            "snapshot_cache": snapshot_file(store),
        }
    report = plan_in_workspace(
        ctx.settings,
        cutoff,
        who=operator_identity(),
        clock=ctx.clock,
        policy=ctx.config.policy,
        **handed,
    )
    rows = len(report.get("actions", [])) + len(report.get("skips", []))
    detail = {
        "plan_id": report["plan_id"],
        "plan_file": report["plan_file"],
        "summary": report.get("summary"),
        "alerts": report.get("alerts", []),
    }
    return StepOutcome(rows, detail, (report["plan_file"],))


# ---------------------------------------------------------------- retrain
def features_offline(ctx: JobContext, cutoff: datetime, out: Path) -> StepOutcome:
    """Offline training frames (node features + labels; demand features) as of the
    cutoff over the configured training window, then the online values."""
    from predops.pipelines.jobs.features import build_features
    from predops.pipelines.workspace.feature_store import FeatureStore
    from predops.pipelines.workspace.lake import Lake

    f = ctx.config.features
    report = build_features(
        Lake(ctx.settings.lake_dir),
        FeatureStore(ctx.settings.features_dir),
        as_of=cutoff,
        eval_every=f.every,
        since=cutoff - f.training_window,
        engine=f.engine,
        scheduler=f.dask_scheduler,
    )
    parts = [report[k] for k in ("nodes", "demand") if k in report]
    if not parts:
        raise StepSkipped("the lake has no telemetry or demand to build features from")
    rows = sum(int(p["rows"]) for p in parts)
    detail = {k: v for k, v in report.items() if k != "nodes"}
    if "nodes" in report:  # per-column null fractions are too long for the run table
        detail["nodes"] = {k: v for k, v in report["nodes"].items() if k != "null_fractions"}
    if "demand" in detail:
        detail["demand"] = {k: v for k, v in detail["demand"].items() if k != "null_fractions"}
    return StepOutcome(rows, detail, tuple(str(p["path"]) for p in parts))


def _registered_for(ctx: JobContext, model: str, data_cutoff: str) -> str | None:
    """A version of ``model`` whose data cutoff is at or after ``data_cutoff`` (it has
    seen every sample the lake holds): a re-run after a kill between registering and
    recording must not register a duplicate."""
    from predops.pipelines.workspace import registry

    for m in registry.list_models(uri=ctx.settings.mlflow_uri):
        if m["name"] != registry.registered_name(model):
            continue
        for v in m["versions"]:
            tag = v["tags"].get(registry.TAG_CUTOFF)
            if tag and datetime.fromisoformat(tag) >= datetime.fromisoformat(data_cutoff):
                return str(v["version"])
    return None


def train_demand(ctx: JobContext, cutoff: datetime, out: Path) -> StepOutcome:
    """Fit and register each configured demand model (``predops.demand.hourly`` and
    ``predops.demand.weekly`` by default) on the lake's demand, once per data cutoff."""

    from predops.models.demand.config import config_named
    from predops.pipelines.jobs import demand as demand_jobs
    from predops.pipelines.scheduler.config import demand_configs

    last = _last_demand(ctx)
    r = ctx.config.retrain
    detail: dict[str, Any] = {}
    rows = 0
    for name in demand_configs(r):
        existing = _registered_for(ctx, demand_jobs.model_name(name), last.isoformat())
        if existing is not None:
            detail[name] = {"version": existing, "note": "already registered"}
            continue
        report = demand_jobs.train(
            ctx.settings,
            config=config_named(name),
            backtest_cutoffs=r.backtest_cutoffs,
            seed=r.seed,
        )
        rows = max(rows, int(report["rows"]))
        detail[name] = report
    return StepOutcome(rows, detail)


def _last_demand(ctx: JobContext) -> datetime:
    """The lake's latest demand time; :class:`StepSkipped` when it has none (a cluster
    whose demand series are not ingested yet trains the failure model alone)."""
    import polars as pl

    from predops.pipelines.workspace.lake import Lake

    last = Lake(ctx.settings.lake_dir).scan("demand").select(pl.col("ts").max()).collect().item()
    if last is None:
        raise StepSkipped("the lake has no demand rows")
    assert isinstance(last, datetime)
    return last


def _promote(ctx: JobContext, model: str) -> StepOutcome:
    from predops.pipelines.jobs.promotion import promote
    from predops.pipelines.workspace.errors import RegistryError

    try:
        decision = promote(model, ctx.settings)
    except RegistryError as exc:
        raise StepSkipped(str(exc)) from None
    return StepOutcome(0, decision)


def promote_demand(ctx: JobContext, cutoff: datetime, out: Path) -> StepOutcome:
    """Backtest challenger vs champion of each configured demand model, each against its
    own champion; promote only a better one."""
    from predops.pipelines.jobs import demand as demand_jobs
    from predops.pipelines.scheduler.config import demand_configs

    _last_demand(ctx)
    detail: dict[str, Any] = {}
    for name in demand_configs(ctx.config.retrain):
        try:
            detail[name] = _promote(ctx, demand_jobs.model_name(name)).detail
        except StepSkipped as exc:
            detail[name] = {"skipped": str(exc)}
    if all("skipped" in d for d in detail.values()):
        raise StepSkipped("; ".join(f"{k}: {d['skipped']}" for k, d in detail.items()))
    return StepOutcome(0, detail)


def train_failure(ctx: JobContext, cutoff: datetime, out: Path) -> StepOutcome:
    """Fit and register ``predops.node_failure`` on the workspace's offline node frame."""
    from predops.pipelines.jobs import failure as failure_jobs

    report = failure_jobs.train(ctx.settings)
    return StepOutcome(int(report.get("rows", 0)), report)


def promote_failure(ctx: JobContext, cutoff: datetime, out: Path) -> StepOutcome:
    """Backtest challenger vs champion of ``predops.node_failure``; promote if better."""
    return _promote(ctx, "node_failure")


def train_usage(ctx: JobContext, cutoff: datetime, out: Path) -> StepOutcome:
    """Fit and register ``predops.usage`` on the lake's node telemetry (``[retrain]
    usage``, ``usage_window``, ``usage_estimators``), once per telemetry cutoff."""
    from predops.pipelines.jobs import usage as usage_jobs
    from predops.pipelines.workspace.lake import Lake

    r = ctx.config.retrain
    if not r.usage:
        raise StepSkipped("[retrain] usage = false")
    last = Lake(ctx.settings.lake_dir).latest_time("telemetry")
    if last is None:
        raise StepSkipped("the lake has no telemetry")
    existing = _registered_for(ctx, usage_jobs.MODEL_NAME, last.isoformat())
    if existing is not None:
        return StepOutcome(0, {"version": existing, "note": "already registered"})
    report = usage_jobs.train(
        ctx.settings,
        window=r.usage_window,
        training_window=ctx.config.features.training_window,
        seed=r.seed,
        params={"n_estimators": r.usage_estimators},
    )
    return StepOutcome(int(report["metrics"]["train_rows"]), report)


def promote_usage(ctx: JobContext, cutoff: datetime, out: Path) -> StepOutcome:
    """Backtest challenger vs champion of ``predops.usage``; promote if better."""
    if not ctx.config.retrain.usage:
        raise StepSkipped("[retrain] usage = false")
    return _promote(ctx, "usage")


# ---------------------------------------------------------------- lake maintenance
def lake_maintenance(ctx: JobContext, cutoff: datetime, out: Path) -> StepOutcome:
    """Drop partitions past ``[lake.retention]``, compact settled day partitions with
    many small files, delete files replaced long enough ago; one lake commit each."""
    from predops.pipelines.workspace.lake import Lake
    from predops.pipelines.workspace.lake_maintenance import maintain

    report = maintain(Lake(ctx.settings.lake_dir), ctx.config.lake, clock=ctx.clock)
    rows = sum(int(c.get("rows", 0)) for c in report["compacted"]) + sum(
        int(d.get("rows", 0)) for d in report["dropped"]
    )
    detail = {
        "changed": report["changed"],
        "compacted": len(report["compacted"]),
        "files_replaced": sum(int(c.get("files_before", 0)) for c in report["compacted"]),
        "dropped_partitions": sum(len(d.get("partitions", [])) for d in report["dropped"]),
        "deleted": report["deleted"],
    }
    return StepOutcome(rows, detail)


PIPELINE_STEPS: tuple[tuple[str, Step], ...] = (
    ("features", features_online),
    ("score", score),
    ("forecast", forecast),
    ("plan", plan),
)
RETRAIN_STEPS: tuple[tuple[str, Step], ...] = (
    ("label", label),
    ("features_offline", features_offline),
    ("train_demand", train_demand),
    ("promote_demand", promote_demand),
    ("train_failure", train_failure),
    ("promote_failure", promote_failure),
    ("train_usage", train_usage),
    ("promote_usage", promote_usage),
)
LAKE_MAINTENANCE_STEPS: tuple[tuple[str, Step], ...] = (("lake_maintenance", lake_maintenance),)
