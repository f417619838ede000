"""The scheduled pipeline's cycle, incremental: work in proportion to what is new.

A cycle every few minutes (ingest -> features -> score -> forecast -> plan) used to
re-read what had not changed. Here each stage keeps what it learnt in a small state file
beside the online store (``<workspace>/features/online/cycle_state.json``, written
atomically after the stage's output) and re-reads only the lake files published since:

- **cutoff** (the lake's latest telemetry time): the previous cutoff and the newest
  sample of the files published since;
- **features**: the online node row of a node is a function of the telemetry in
  ``(E - reach - bucket, E]`` (``E`` the last complete bucket end, see
  ``online_window_start`` in :mod:`predops.pipelines.jobs.features`), the inventory up to the
  cutoff and the events up to ``E``. So the online frame is recomputed (over that bounded
  tail, as before) only when ``E`` moved, a new telemetry file holds a sample at or
  before ``E`` (late data), or an inventory / events file was added or removed (or the
  inventory holds rows between the previous cutoff and this one); otherwise the stored
  rows are kept and only the store's ``as_of`` moves. A file that disappeared (compaction
  rewrote it) counts as a change: recompute. The demand online frame is rebuilt every
  cycle (a handful of series);
- **last seen** (each node's latest sample, the plan's ``observed_at``): the previous
  values and the maximum per node of the new files;
- **score** and **forecast** run once (today the plan step scored and forecast again)
  and hand their results to the plan; the score re-uses the previous cycle's risks when
  the online rows and the champion are unchanged (:mod:`predops.pipelines.jobs.
  risk_cache`: the model is not even loaded), the forecasts (pool sizing's hourly and
  the buys' weekly) the previous cycle's when the served version and the model's input
  grid are unchanged (:mod:`predops.pipelines.jobs.forecast_cache`: an hourly grid
  changes once an hour);
- **plan**: the snapshot of running pods (the allocator's, about 37,000 pods placed
  on 10,000 nodes) is kept between cycles while the ``pods`` and ``inventory`` files are
  the same and no pod started or stopped and no inventory row came since it was built
  (:mod:`predops.pipelines.workspace.snapshot_cache`); the plan itself runs every cycle.

The results equal the full recomputation (``tests/pipelines/jobs/test_cycle.py``
checks features, risks and plan against today's steps, cycle after cycle). Any state
that cannot be read (missing, another format, another feature set) means a full
recomputation, never a guess.

Memory: the bounded tail's features (as :func:`materialise_online`) at the 15-minute
recomputes, otherwise the new files' rows, the online frame and the plan's fleet.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import polars as pl

from predops.core.contracts import Forecast
from predops.features.carry import carry_forward, oldest_end, window_buckets
from predops.features.definitions import NodeFeatureSpec, node_feature_set
from predops.features.frames import node_features
from predops.features.node import floor_to_bucket
from predops.pipelines.jobs.carried_buckets import CarriedBuckets
from predops.pipelines.jobs.features import NODE_ONLINE, materialise_demand_online
from predops.pipelines.jobs.lake_inputs import LakeInputs
from predops.pipelines.workspace import snapshot_cache
from predops.pipelines.workspace.atomic import (
    atomic_write,
    atomic_write_records,
    atomic_write_text,
)
from predops.pipelines.workspace.feature_store import FeatureStore
from predops.pipelines.workspace.fleet_state import latest_per_node
from predops.pipelines.workspace.lake import Lake
from predops.pipelines.workspace.risk_file import write_risks

STATE_FILE = "cycle_state.json"
STATE_VERSION = 1
T = TypeVar("T")
Files = dict[str, list[int]]
"""Lake file (relative path) -> [size, mtime_ns]: published files never change."""


def _files(lake: Lake, table: str) -> Files:
    return lake.fingerprint(table)


@dataclass
class Delta:
    """How a table's files changed since the state: files added, and whether any
    recorded file is gone or changed (then nothing incremental is safe)."""

    added: list[Path] = field(default_factory=list)
    lost: bool = False


def _delta(lake: Lake, before: Files | None, now: Files) -> Delta:
    if before is None:
        return Delta(lost=True)
    lost = any(now.get(k) != v for k, v in before.items())
    return Delta([lake.root / k for k in now if k not in before], lost)


def _utc(s: str | None) -> datetime | None:
    return datetime.fromisoformat(s) if s else None


class CycleState:
    """The state file (see the module docstring): a JSON object, atomically replaced."""

    def __init__(self, store: FeatureStore) -> None:
        self.path = store.root / "online" / STATE_FILE
        self.data: dict[str, Any] = {}
        if self.path.exists():
            try:
                loaded = json.loads(self.path.read_text())
            except (OSError, ValueError):
                loaded = {}
            if isinstance(loaded, dict) and loaded.get("version") == STATE_VERSION:
                self.data = loaded

    def get(self, key: str) -> Any:
        return self.data.get(key)

    def save(self, **values: Any) -> None:
        self.data.update(values, version=STATE_VERSION)
        atomic_write_text(self.path, json.dumps(self.data, sort_keys=True, default=str))


# ---------------------------------------------------------------- cutoff
def latest_telemetry(lake: Lake, state: CycleState) -> datetime | None:
    """The lake's latest telemetry time (the runner's data cutoff), from the previous
    one and the files added since."""
    files = _files(lake, "telemetry")
    rec = state.get("cutoff") or {}
    delta = _delta(lake, rec.get("files"), files)
    prev = _utc(rec.get("latest"))
    if delta.lost or prev is None:
        scan = lake.scan("telemetry").select(pl.col("ts").max())
        latest = scan.collect().item() if files else None
    else:
        latest = prev
        if delta.added:
            new = pl.scan_parquet(delta.added).select(pl.col("ts").max()).collect().item()
            if new is not None and new > latest:
                latest = new
    state.save(cutoff={"files": files, "latest": latest})
    return latest


# ---------------------------------------------------------------- features
def _new_rows_min(files: list[Path], col: str) -> datetime | None:
    if not files:
        return None
    lo = pl.scan_parquet(files).select(pl.col(col).min()).collect().item()
    return lo if isinstance(lo, datetime) else None


def online_features(
    lake: Lake, store: FeatureStore, *, as_of: datetime, spec: NodeFeatureSpec | None = None
) -> dict[str, Any]:
    """The online node and demand frames as of ``as_of``, equal to
    :func:`predops.pipelines.jobs.features.materialise_online` (local engine); node rows
    recomputed only when their inputs changed (module docstring)."""
    spec = spec or NodeFeatureSpec()
    fs = node_feature_set(spec)
    state = CycleState(store)
    end = floor_to_bucket(as_of - spec.ingestion_delay, spec.bucket)
    files = {t: _files(lake, t) for t in ("telemetry", "inventory", "events")}
    rec = state.get("features") or {}
    why = _recompute_reason(lake, rec, files, end, as_of, fs.hash, store)
    out: dict[str, Any] = {"recomputed": why is not None, "why": why or "inputs unchanged"}
    kept = rec.get("buckets") if why is not None else None
    if why is None:
        n = store.restamp_online(NODE_ONLINE, as_of=as_of)
    else:
        n, out["buckets"], kept = _node_online(lake, store, state, rec, files, as_of, spec)
    state.save(
        features={
            "files": files,
            "bucket_end": end,
            "as_of": as_of,
            "feature_set_hash": fs.hash,
            "rows": n,
            "buckets": kept if why is not None else rec.get("buckets"),
        }
    )
    out["nodes"] = n
    series = materialise_demand_online(lake, store, as_of=as_of)
    if series:
        out["series"] = series
    return out


def _carried_through(
    lake: Lake, rec: dict[str, Any], files: dict[str, Files], end: datetime, spec: NodeFeatureSpec
) -> datetime | None:
    """The last bucket end of the kept buckets when they can be carried to ``end``
    (:mod:`features.carry`): kept for this feature set, through ``end`` at most and no
    earlier than the window's oldest bucket end, no telemetry file rewritten since and no
    sample added at or before it; else None."""
    kept = rec.get("buckets") or {}
    through = _utc(kept.get("through"))
    if through is None or kept.get("feature_set_hash") != node_feature_set(spec).hash:
        return None
    if not oldest_end(end, spec) <= through <= end:  # none of them in the window: no use
        return None
    d = _delta(lake, (rec.get("files") or {}).get("telemetry"), files["telemetry"])
    if d.lost:
        return None
    lo = _new_rows_min(d.added, "ts")
    return None if lo is not None and lo <= through else through


def _node_online(
    lake: Lake,
    store: FeatureStore,
    state: CycleState,
    rec: dict[str, Any],
    files: dict[str, Files],
    as_of: datetime,
    spec: NodeFeatureSpec,
) -> tuple[int, dict[str, Any], dict[str, Any]]:
    """The online node rows as of ``as_of`` from the kept buckets and the telemetry
    after them, or (nothing to carry) from the window's telemetry; equal either way to
    :func:`materialise_node_online`'s. Returns the node count, what was done, and the
    kept buckets' record."""
    fs = node_feature_set(spec)
    end = floor_to_bucket(as_of - spec.ingestion_delay, spec.bucket)
    visible = as_of - spec.ingestion_delay
    first = oldest_end(end, spec)
    carried = CarriedBuckets(store)
    through = _carried_through(lake, rec, files, end, spec)
    kept = carried.read(first, through, spec.bucket) if through is not None else None
    inp = LakeInputs.from_lake(
        lake, telemetry_after=through if kept is not None else first - spec.bucket
    )
    if kept is not None and through is not None:
        window, fresh = carry_forward(
            kept, inp.telemetry, spec, kept_end=through, end=end, visible=visible
        )
        note = {"carried": True, "kept": int((through - first) / spec.bucket) + 1}
        new_from = through + spec.bucket
    else:
        window, fresh = window_buckets(inp.telemetry, spec, end=end, visible=visible)
        note = {"carried": False}
        new_from = first
        # what is on disk no longer matches the state: forget it before replacing it
        state.save(features={**rec, "buckets": None})
        carried.clear()
    nodes = node_features(
        inp.telemetry,
        inp.inventory,
        inp.events,
        cutoff=as_of,
        spec=spec,
        latest_only=True,
        buckets=window.lazy(),
    ).collect()
    if nodes.height:
        store.materialise_online(
            NODE_ONLINE, nodes, as_of=as_of, feature_set_hash=fs.hash, key="node_id"
        )
    note["new"] = carried.write(fresh, new_from, end, spec.bucket)
    carried.prune(first)
    return nodes.height, note, {"through": end, "feature_set_hash": fs.hash}


def _recompute_reason(
    lake: Lake,
    rec: dict[str, Any],
    files: dict[str, Files],
    end: datetime,
    as_of: datetime,
    fs_hash: str,
    store: FeatureStore,
) -> str | None:
    """Why the online node rows must be recomputed, or None when they cannot differ."""
    if not rec:
        return "no state"
    if rec.get("feature_set_hash") != fs_hash:
        return "another feature set"
    if _utc(rec.get("bucket_end")) != end:
        return "a new bucket end"
    prev_as_of = _utc(rec.get("as_of"))
    if prev_as_of is None or as_of < prev_as_of:
        return "an earlier as_of"
    if not store.has_online(NODE_ONLINE, fs_hash) and int(rec.get("rows") or 0):
        return "the online frame is missing"
    prev = rec.get("files") or {}
    for table in ("inventory", "events"):
        d = _delta(lake, prev.get(table), files[table])
        if d.lost or d.added:
            return f"{table} changed"
    inv_max = lake.scan("inventory").select(pl.col("ts").max()).collect().item()
    if isinstance(inv_max, datetime) and inv_max > prev_as_of:
        return "inventory rows after the previous as_of"
    d = _delta(lake, prev.get("telemetry"), files["telemetry"])
    if d.lost:
        return "telemetry files rewritten"
    lo = _new_rows_min(d.added, "ts")
    if lo is not None and lo <= end:
        return "late telemetry"
    return None


# ---------------------------------------------------------------- last seen
def last_seen(lake: Lake, store: FeatureStore, now: datetime) -> dict[str, datetime]:
    """Each node's latest telemetry time at or before ``now``, from the previous values
    and the files added since (a full scan without state, or when a file was rewritten
    or ``now`` went back)."""
    state = CycleState(store)
    files = _files(lake, "telemetry")
    rec = state.get("last_seen") or {}
    delta = _delta(lake, rec.get("files"), files)
    prev_now = _utc(rec.get("now"))
    path = store.root / "online" / "last_seen.arrow"
    usable = not delta.lost and prev_now is not None and now >= prev_now and path.exists()
    # A file added with rows after ``now`` would be needed again later: full scan then.
    if usable and delta.added:
        hi = pl.scan_parquet(delta.added).select(pl.col("ts").max()).collect().item()
        usable = hi is None or hi <= now
    if usable and delta.added:
        # no recorded file holds rows after prev_now (checked when recorded)
        seen = pl.read_ipc(path)
        new = (
            pl.scan_parquet(delta.added)
            .select("node_id", "ts")
            .filter(pl.col("ts") <= now)
            .group_by("node_id")
            .agg(pl.col("ts").max())
            .collect()
        )
        seen = (
            pl.concat([seen, new], how="vertical_relaxed")
            .group_by("node_id")
            .agg(pl.col("ts").max())
            .sort("node_id")
        )
    elif usable:
        seen = pl.read_ipc(path)
    else:
        seen = latest_per_node(lake, now)
        hi = lake.scan("telemetry").select(pl.col("ts").max()).collect().item() if files else None
        if hi is not None and hi > now:
            files = {}  # rows after now: never reuse this state (a full scan next time)
    atomic_write(path, lambda p: seen.write_ipc(p))
    state.save(last_seen={"files": files, "now": now})
    return dict(zip(seen["node_id"].to_list(), seen["ts"].to_list(), strict=True))


# ---------------------------------------------------------------- the plan's snapshot
def snapshot_file(store: FeatureStore) -> Path:
    """Where the plan's snapshot of running pods is kept between cycles
    (:mod:`predops.pipelines.workspace.snapshot_cache`)."""
    return store.root / "online" / snapshot_cache.FILE


# ---------------------------------------------------------------- the cycle
Stage = Callable[[str, Callable[[], Any]], Any]
ForecastNote = tuple[list[Forecast], dict[str, Any]]


def _untimed(name: str, fn: Callable[[], T]) -> T:
    return fn()


def run_cycle(
    settings: Any,
    *,
    cutoff: datetime | None = None,
    clock: Any,
    out: Path,
    who: str = "predops schedule",
    policy: Any = None,
    stage: Stage = _untimed,
) -> dict[str, Any]:
    """One cycle: cutoff -> features -> score -> forecast -> plan (each through
    ``stage(name, fn)``, e.g. to time it). Writes what the scheduler's pipeline steps
    write (online store, ``risk.json`` and ``forecasts.json`` under ``out``, the plan
    file and its audit entry) and returns the plan step's report with ``detail`` per
    stage."""
    from predops.pipelines.jobs.plan import demand_forecasts, failure_risk, plan_in_workspace

    lake = Lake(settings.lake_dir)
    store = FeatureStore(settings.features_dir)
    state = CycleState(store)
    # files an earlier cycle read are not checked again (Lake.trust)
    known = [(state.get("cutoff") or {}).get("files")]
    known += list(((state.get("features") or {}).get("files") or {}).values())
    for fingerprint in known:
        if isinstance(fingerprint, dict):
            lake.trust(fingerprint)
    latest = stage("cutoff", lambda: latest_telemetry(lake, state))
    if latest is None:
        raise ValueError("the lake has no telemetry")
    if cutoff is not None and latest != cutoff:
        raise ValueError(f"the lake's cutoff is {latest}, not {cutoff}")
    now: datetime = latest
    detail: dict[str, Any] = {}
    detail["features"] = stage("features", lambda: online_features(lake, store, as_of=now))

    def score() -> tuple[list[Any], dict[str, Any]]:
        risks, note = failure_risk(settings, now, reuse=True)
        write_risks(out / "risk.json", risks)
        return risks, note

    risks, risk_note = stage("score", score)

    def forecast() -> tuple[ForecastNote, ForecastNote]:
        return demand_forecasts(settings, reuse=True), demand_forecasts(
            settings, "weekly", reuse=True
        )

    def forecast_and_write() -> tuple[ForecastNote, ForecastNote]:
        hourly, weekly = forecast()
        atomic_write_records(out / "forecasts.json", [f.to_dict() for f in hourly[0]])
        return hourly, weekly

    (forecasts, forecast_note), buy = stage("forecast", forecast_and_write)
    report = stage(
        "plan",
        lambda: plan_in_workspace(
            settings,
            now,
            who=who,
            clock=clock,
            policy=policy,
            scored=(risks, risk_note),
            forecasted=(forecasts, forecast_note),
            buy_forecasted=buy,
            seen=last_seen(lake, store, now),
            snapshot_cache=snapshot_file(store),
        ),
    )
    detail["score"], detail["forecast"], detail["buy_forecast"] = risk_note, forecast_note, buy[1]
    report["detail"] = detail
    return dict(report)


__all__ = [
    "CycleState",
    "last_seen",
    "latest_telemetry",
    "online_features",
    "run_cycle",
    "snapshot_file",
]
