"""The incremental cycle, and the scheduler's pipeline job that runs it, equal the full
recomputation (the pipeline steps with ``[features] incremental = false``) cycle after
cycle: online features, risks, forecasts and the plan — across bucket ends, with cycles
that reuse the stored rows, risks and forecasts, late telemetry, a new inventory
snapshot and a rewritten file; and every kind of forecast cache miss."""

from __future__ import annotations

import dataclasses
import json
import pickle
import shutil
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from predops.core.clock import FixedClock
from predops.core.schemas import DEMAND, TELEMETRY
from predops.models.demand.config import config_named
from predops.pipelines.ingest.batch import Batch
from predops.pipelines.ingest.run import ingest
from predops.pipelines.jobs import demand as demand_jobs
from predops.pipelines.jobs import failure as failure_jobs
from predops.pipelines.jobs.cycle import run_cycle
from predops.pipelines.jobs.features import build_features
from predops.pipelines.scheduler.config import load_config
from predops.pipelines.scheduler.context import JobContext
from predops.pipelines.scheduler.runner import data_cutoff, output_dir, run_steps
from predops.pipelines.scheduler.steps import PIPELINE_STEPS
from predops.pipelines.synthetic.run import SimConfig, simulate_to_lake
from predops.pipelines.workspace.feature_store import FeatureStore
from predops.pipelines.workspace.lake import Lake
from predops.pipelines.workspace.runs import RunStore
from predops.pipelines.workspace.settings import Settings

STEP = timedelta(minutes=5)
START = datetime(2026, 1, 5, tzinfo=UTC)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """30 nodes x 6 days of 15-minute telemetry, features, a failure champion and an
    hourly demand champion (no weekly model: the plan buys without forecasts and says
    so)."""
    ws = tmp_path_factory.mktemp("cycle_ws")
    settings = Settings(workspace=ws, shared_data=ws)
    lake = Lake(settings.lake_dir)
    cfg = SimConfig(nodes=30, days=6, interval=timedelta(minutes=15), seed=5, start=START)
    simulate_to_lake(lake, cfg, clock=FixedClock(cfg.end), progress=False)
    as_of = data_cutoff(settings)
    assert as_of is not None
    build_features(lake, FeatureStore(settings.features_dir), as_of=as_of)
    failure_jobs.train(settings, backtest_days=1)
    demand_jobs.train(settings, config=config_named("hourly"), backtest_cutoffs=0, seed=5)
    return ws


def _next_rows(lake: Lake, at: datetime, *, late: bool = False) -> pl.DataFrame:
    """One new sample per node at ``at``: its latest sample moved there (counters +1 on
    every third node), or with ``late`` a sample 17 minutes before ``at``."""
    last = (
        lake.scan("telemetry")
        .drop("source")
        .sort("ts")
        .group_by("node_id")
        .last()
        .sort("node_id")
        .collect()
    )
    bump = (pl.int_range(pl.len()) % 3 == 0).cast(pl.Int64)
    counters = [c.name for c in TELEMETRY.columns if c.name.endswith("_total")]
    ts = at - timedelta(minutes=17) if late else at
    return last.with_columns(
        pl.lit(ts, dtype=pl.Datetime("us", "UTC")).alias("ts"),
        *[pl.col(c) + bump for c in counters],
        (pl.col("cpu_util_pct") * 0.9).alias("cpu_util_pct"),
    ).select(TELEMETRY.names)


def _next_demand(lake: Lake, at: datetime) -> pl.DataFrame:
    """One new demand sample per series at ``at``: its latest sample moved there, 10%
    higher."""
    last = lake.scan("demand").drop("source").sort("ts").group_by("series_id").last()
    out: pl.DataFrame = (
        last.collect()
        .with_columns(
            pl.lit(at, dtype=pl.Datetime("us", "UTC")).alias("ts"),
            pl.col("value") * 1.1,
        )
        .select(DEMAND.names)
    )
    return out


def _write(lake: Lake, table: str, frame: pl.DataFrame, at: datetime) -> None:
    ingest(lake, "synthetic", [Batch(table, frame)], clock=FixedClock(at), input_name=str(at))


def _context(ws: Path, cutoff: datetime, *, incremental: bool) -> JobContext:
    settings = Settings(workspace=ws, shared_data=ws)
    assert data_cutoff(settings) == cutoff
    config = load_config(None, {})
    features = dataclasses.replace(config.features, incremental=incremental)
    return JobContext(
        settings=settings,
        config=dataclasses.replace(config, features=features),
        runs=RunStore(settings.scheduler_db),
        clock=FixedClock(cutoff),
    )


def _scheduled(ws: Path, cutoff: datetime) -> dict[str, Any]:
    """The scheduler's pipeline job (incremental, the default), through its runner."""
    ctx = _context(ws, cutoff, incremental=True)
    run = run_steps(ctx, "pipeline", cutoff, PIPELINE_STEPS)
    assert run["status"] == "done", run
    steps = {r["step"]: r for r in run["steps"]}
    out = output_dir(ctx.settings, "pipeline", cutoff)
    return {
        "plan_file": steps["plan"]["detail"]["plan_file"],
        "risk": json.loads((out / "risk.json").read_text()),
        "forecasts": json.loads((out / "forecasts.json").read_text()),
        "recomputed": steps["features"]["detail"]["recomputed"],
        "reused": steps["score"]["detail"]["reused"],
        "forecasts_reused": steps["forecast"]["detail"]["reused"],
    }


def _today(ws: Path, cutoff: datetime, out: Path) -> dict[str, Any]:
    """The full recomputation: the pipeline steps with ``incremental = false``."""
    ctx = _context(ws, cutoff, incremental=False)
    res = {name: fn(ctx, cutoff, out) for name, fn in PIPELINE_STEPS}
    return {"plan_file": res["plan"].detail["plan_file"]}


def _copy(trained: Path, tmp_path: Path) -> Settings:
    """A private copy of the trained workspace."""
    ws = tmp_path / "ws"
    shutil.copytree(trained, ws)
    return Settings(workspace=ws, shared_data=ws)


def _plan(path: str) -> dict[str, Any]:
    body = dict(json.loads(Path(path).read_text()))
    body.pop("inputs")
    return body


def _online(ws: Path) -> pl.DataFrame:
    return pl.read_ipc(ws / "features" / "online" / "node.arrow")


@pytest.mark.slow
def test_incremental_cycle_equals_full_recomputation(trained: Path, tmp_path: Path) -> None:
    today_ws, incr_ws = tmp_path / "today", tmp_path / "incremental"
    sched_ws = tmp_path / "scheduled"
    for ws in (today_ws, incr_ws, sched_ws):
        shutil.copytree(trained, ws)
        for stale in (ws / "features" / "online").glob("*"):
            stale.unlink()  # both start from nothing online
    lakes = [Lake(today_ws / "lake"), Lake(incr_ws / "lake"), Lake(sched_ws / "lake")]
    start = data_cutoff(Settings(workspace=today_ws, shared_data=today_ws))
    assert start is not None
    recomputed: list[bool] = []
    forecasts_reused: list[bool] = []
    snapshot_reused: list[bool] = []
    carried: list[bool | None] = []
    # 7 cycles of 5 minutes cross two bucket ends; cycle 4 also brings late telemetry,
    # cycle 5 a new inventory snapshot, cycle 6 a file rewritten (as compaction would).
    for i in range(1, 8):
        cutoff = start + i * STEP
        for lake in lakes:
            rows = _next_rows(lake, cutoff)
            if i == 4:
                rows = pl.concat([rows, _next_rows(lake, cutoff, late=True).head(3)])
            _write(lake, "telemetry", rows, cutoff)
            _write(lake, "demand", _next_demand(lake, cutoff), cutoff)
            if i == 5:
                inv = lake.scan("inventory").drop("source").sort("ts").group_by("node_id").last()
                inv = inv.collect().with_columns(pl.lit(cutoff).alias("ts"))
                _write(lake, "inventory", inv.head(5), cutoff)
        if i == 6:
            for lake in lakes[1:]:
                f = lake.files("telemetry")[0]
                copy = f.with_name(f.name + ".tmp")
                shutil.copy2(f, copy)
                copy.replace(f)  # same rows, another file (its mtime moves)
        out = tmp_path / "out" / str(i)
        today = _today(today_ws, cutoff, out / "today")
        incr = run_cycle(
            Settings(workspace=incr_ws, shared_data=incr_ws),
            cutoff=cutoff,
            clock=FixedClock(cutoff),
            out=out / "incremental",
        )
        sched = _scheduled(sched_ws, cutoff)
        recomputed.append(incr["detail"]["features"]["recomputed"])
        carried.append(incr["detail"]["features"].get("buckets", {}).get("carried"))
        forecasts_reused.append(incr["detail"]["forecast"]["reused"])
        snapshot_reused.append(incr["inputs"]["fleet"]["snapshot_reused"])
        assert sched["forecasts_reused"] is forecasts_reused[-1], f"cycle {i}"
        assert incr["detail"]["buy_forecast"]["status"] == "missing", f"cycle {i}"
        assert sched["recomputed"] == recomputed[-1], f"cycle {i}"
        # Unchanged rows, the same champion: the risks are re-stamped, not scored again.
        assert incr["detail"]["score"]["reused"] is (not recomputed[-1]), f"cycle {i}"
        assert sched["reused"] is (not recomputed[-1]), f"cycle {i}"
        assert _online(incr_ws).equals(_online(today_ws)), f"cycle {i}"
        assert _online(sched_ws).equals(_online(today_ws)), f"cycle {i}"
        risks = [json.loads((out / p / "risk.json").read_text()) for p in ("today", "incremental")]
        assert risks[0] == risks[1] == sched["risk"] and risks[0], f"cycle {i}"
        forecasts = [
            json.loads((out / p / "forecasts.json").read_text()) for p in ("today", "incremental")
        ]
        assert forecasts[0] == forecasts[1] == sched["forecasts"] and forecasts[0], f"cycle {i}"
        assert _plan(incr["plan_file"]) == _plan(today["plan_file"]), f"cycle {i}"
        assert _plan(sched["plan_file"]) == _plan(today["plan_file"]), f"cycle {i}"
    # The cycles that could reuse the stored rows did, the others recomputed.
    assert recomputed[0] is True
    assert False in recomputed
    assert recomputed[3] and recomputed[4] and recomputed[5]
    # The kept buckets of the online window were carried to the next rows whenever the
    # telemetry allowed (features.carry): not in cycle 1 (none kept yet), nor after the
    # late samples of cycle 4 (a kept bucket changed); in cycle 5 (new inventory rows,
    # same telemetry) and at the bucket ends of cycles 3 and 6. None: rows re-stamped.
    assert carried == [False, None, True, False, True, True, None]
    # The lake ends at 23:45 (15-minute samples), which completes the hour bucket ending
    # 00:00 (a sample stands for its interval); the samples of 23:50 to 00:00 still move
    # that bucket's mean, so the forecasts are new; from 00:05 on they fill the next
    # bucket, still open: the forecasts are re-used.
    assert forecasts_reused == [False, False, False, True, True, True, True]
    # The plan's snapshot of running pods: built in cycle 1, again when a pod started or
    # stopped since (the simulated pods do until 00:00) and on the new inventory rows of
    # cycle 5, re-used otherwise.
    assert snapshot_reused == [False, False, False, True, False, True, True]


@pytest.mark.slow
def test_reused_risks_equal_a_new_scoring_and_anything_else_is_a_miss(
    trained: Path, tmp_path: Path
) -> None:
    from predops.pipelines.jobs import risk_cache
    from predops.pipelines.jobs.features import materialise_online

    settings = _copy(trained, tmp_path)
    lake, store = Lake(settings.lake_dir), FeatureStore(settings.features_dir)
    now = data_cutoff(settings)
    assert now is not None
    materialise_online(lake, store, as_of=now)
    first = failure_jobs.current_scores(settings, now=now, reuse=True)
    assert not first.reused and first.risks
    later = now + STEP
    store.restamp_online("node", as_of=later)  # the same rows, a later as_of
    again = failure_jobs.current_scores(settings, now=later, reuse=True)
    fresh = failure_jobs.current_scores(settings, now=later)  # scored from scratch
    assert again.reused and not fresh.reused
    assert again.risks == fresh.risks and again.risks[0].as_of == later
    # An unreadable file, or other rows (a new write), is a miss with the same answers.
    cache = store.root / "online" / risk_cache.FILE
    cache.write_text("{not json")
    assert not failure_jobs.current_scores(settings, now=later, reuse=True).reused
    materialise_online(lake, store, as_of=later)
    rescored = failure_jobs.current_scores(settings, now=later, reuse=True)
    assert not rescored.reused and rescored.risks == fresh.risks
    # New rows again: scored by the version this process loaded before, not loaded again.
    from predops.pipelines.workspace import registry

    def unloaded(*a: Any, **k: Any) -> Any:
        raise AssertionError("the model was loaded again")

    materialise_online(lake, store, as_of=later)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(registry, "load_python_model", unloaded)
        kept = failure_jobs.current_scores(settings, now=later, reuse=True)
    assert not kept.reused and kept.risks == fresh.risks
    # Another model version, or a node fresh now that the saved pass did not score.
    with cache.open("rb") as fh:
        key = pickle.load(fh)
        body_at = fh.tell()
    prov = fresh.risks[0].provenance
    assert prov is not None
    ids = [r.node_id for r in fresh.risks]
    hit = risk_cache.lookup(cache, key, ids[:3], as_of=later, provenance=prov)
    assert hit == fresh.risks[:3]
    other = {**key, "model": [key["model"][0], "99", key["model"][2]]}
    assert risk_cache.lookup(cache, other, ids, as_of=later, provenance=prov) is None
    assert risk_cache.lookup(cache, key, [*ids, "node-new"], as_of=later, provenance=prov) is None
    # The right key over a cut-off body (a torn file) is a miss too.
    whole = cache.read_bytes()
    cache.write_bytes(whole[: body_at + (len(whole) - body_at) // 2])
    assert risk_cache.lookup(cache, key, ids, as_of=later, provenance=prov) is None


@pytest.mark.slow
def test_reused_forecasts_equal_new_ones_and_anything_else_is_a_miss(
    trained: Path, tmp_path: Path
) -> None:
    from predops.pipelines.jobs import forecast_cache
    from predops.pipelines.workspace import registry

    settings = _copy(trained, tmp_path)
    lake = Lake(settings.lake_dir)
    end = lake.scan("demand").select(pl.col("ts").max()).collect().item()
    # A sample in the next hour (the lake's last one, 23:45, completed the hour before).
    end += 4 * STEP
    _write(lake, "demand", _next_demand(lake, end), end)

    def both() -> tuple[demand_jobs.DemandForecasts, demand_jobs.DemandForecasts]:
        return (
            demand_jobs.issue_forecasts(settings, reuse=True),
            demand_jobs.issue_forecasts(settings),  # from scratch, never cached
        )

    first, fresh = both()
    assert not first.reused and first.forecasts == fresh.forecasts and first.forecasts
    # New rows in a bucket still open: the same grid, the saved answers.
    _write(lake, "demand", _next_demand(lake, end + STEP), end + STEP)
    again, fresh = both()
    assert again.reused and again.forecasts == fresh.forecasts
    assert again.provenance == fresh.provenance
    # Each kind of change is a miss, with the answers of a new forecast.
    cache = forecast_cache.path_for(settings.features_dir, "hourly")
    late = _next_demand(lake, end - timedelta(hours=3, minutes=10))  # an old bucket moves
    later = end + 12 * STEP
    calendar = lake.scan("calendar").drop("source").collect()
    event = calendar.head(1).with_columns(pl.col("name") + " (moved)")
    changes: dict[str, Callable[[], object]] = {
        "unreadable file": lambda: cache.write_text("{not json"),
        "another version of the file": lambda: cache.write_text('{"version": 0}'),
        "late rows": lambda: _write(lake, "demand", late, end + STEP),
        "a new bucket": lambda: _write(lake, "demand", _next_demand(lake, later), later),
        "the calendar": lambda: _write(lake, "calendar", event, end),
    }
    if calendar.height == 0:
        del changes["the calendar"]
    for what, change in changes.items():
        change()
        missed, fresh = both()
        assert not missed.reused and missed.forecasts == fresh.forecasts, what
        assert demand_jobs.issue_forecasts(settings, reuse=True).reused, what  # saved again
    # Another version (or run) of the model: the saved answers are not its answers.
    prov = registry.served_provenance("demand.hourly", uri=settings.mlflow_uri)
    data = demand_jobs.lake_demand(settings)
    hit = forecast_cache.lookup(cache, prov, data.demand, data.calendar)
    assert hit is not None
    for other in (replace(prov, model_version="99"), replace(prov, run_id="another")):
        assert forecast_cache.lookup(cache, other, data.demand, data.calendar) is None


@pytest.mark.slow
def test_a_plan_that_fails_leaves_the_kept_snapshot_as_it_was(
    trained: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plan changes the kept snapshot only on forks: a plan step that fails with a
    fork of its own still open hands back the snapshot as it was built, and the next
    cycle's plan equals a plan on a new snapshot."""
    from predops.allocator.snapshot import ClusterSnapshot
    from predops.pipelines.jobs import cycle as cycle_jobs
    from predops.pipelines.jobs import plan as plan_jobs
    from predops.pipelines.workspace import snapshot_cache
    from predops.pipelines.workspace.fleet_state import fleet_from_lake

    settings = _copy(trained, tmp_path)
    now = data_cutoff(settings)
    assert now is not None
    out = tmp_path / "out"
    run_cycle(settings, cutoff=now, clock=FixedClock(now), out=out / "1")
    cache = cycle_jobs.snapshot_file(FeatureStore(settings.features_dir))
    real = plan_jobs.make_plan

    def failing(risks: Any, forecasts: Any, snap: ClusterSnapshot, *a: Any, **k: Any) -> Any:
        snap.fork()  # left open: the failure comes before its revert
        row = next(i for i in range(snap.n_nodes) if snap.pods_on[i])
        for pod in sorted(snap.pods_on[row]):
            snap.remove(pod)
        raise RuntimeError("a policy failed")

    monkeypatch.setattr(plan_jobs, "make_plan", failing)
    with pytest.raises(RuntimeError, match="a policy failed"):
        run_cycle(settings, cutoff=now, clock=FixedClock(now), out=out / "2")
    monkeypatch.setattr(plan_jobs, "make_plan", real)
    lake = Lake(settings.lake_dir)
    kept = snapshot_cache.load(cache, lake, now)
    assert kept is not None and kept.lent and kept.snapshot.depth == 0
    fresh = fleet_from_lake(lake, now).snapshot
    assert ClusterSnapshot.same_state(kept.snapshot.state(), fresh.state())
    snapshot_cache.give_back(cache, kept)
    again = run_cycle(settings, cutoff=now, clock=FixedClock(now), out=out / "3")
    assert again["inputs"]["fleet"]["snapshot_reused"] is True
