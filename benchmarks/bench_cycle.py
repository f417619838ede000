"""Benchmark: the scheduled pipeline's 5-minute cycle on a lake that holds weeks.

(The issue calls it ``benchmarks/cycle.py``; the project's benchmarks are named
``bench_*.py``.)

Setup, not measured, cached under ``.predops/bench-cache/cycle/`` (git-ignored) and reused
by later runs with the same ``--nodes --days --seed``:

- the synthetic fleet (``pipelines/synthetic``: every table, 5-minute telemetry with
  the full metric set) for ``--days`` days plus one hour, written through the ingest path
  (validation, atomic lake writes) up to the lake's end ``T``; the telemetry and demand
  rows of the hour after ``T`` are kept aside, to be appended by the cycles; the pods
  table holds what was known at ``T`` (later schedules and deletions blanked);
- a failure model (a small one: trained on a separate 100-node x 8-day fleet with the
  same feature set, a 2-day backtest window) and the demand model (``hourly``, trained
  on the lake's demand), registered in the workspace's registry as ``champion``.

Each run links a fresh copy of that workspace (Parquet files hard-linked, everything
else copied) and runs ``--cycles`` cycles. A cycle appends the next 5 minutes of
telemetry and demand for every node and series (``ingest``: the ingest writer, as the
scheduler's Prometheus ingest does), then runs each path in its own process, so that
memory figures do not mix:

- ``today``: the scheduler's pipeline job as it was done before it became incremental
  (the runner's data cutoff, then ``pipelines.scheduler.steps`` ``features`` ->
  ``score`` -> ``forecast`` -> ``plan`` with ``[features] incremental = false``);
- ``incremental``: the incremental cycle (:mod:`predops.pipelines.jobs.cycle`) in a second
  workspace that reads the same lake.

``--pod-churn``: each cycle also appends a row for every pod created, scheduled or
deleted in its 5 minutes, as known then (about 900 a cycle at 10,000 nodes), as a
cluster export writes them; by default the pods table holds what was known at the
lake's end, so the plan's snapshot of running pods never changes between cycles, which
no real cluster does.

``--processes long-lived`` (the default) runs every cycle of a path in one process, as
the scheduler does (its jobs run in its thread pool for months): what a path keeps in
memory between cycles counts, as it would in production (the incremental path keeps
the snapshot of running pods, :mod:`predops.pipelines.workspace.snapshot_cache`).
``--processes per-cycle`` starts a fresh process per cycle and path, so only what is on
disk carries over. Either way the modules and the model registry a scheduler holds
after its first run are loaded before any stage is timed (:func:`_warm_imports`,
:func:`_warm_registry`; reported as ``imports_s``).

Prints one JSON object: per path, per stage and in total, wall and CPU seconds and peak
RSS (the worker's resident set, sampled every 10 ms during the stage), the mean over
the cycles after the first (the first cycle of the incremental path has no state yet
and recomputes everything; it is reported on its own), the ratios today / incremental,
and whether the incremental path's online features, risks and plan equal today's in
every cycle.

    python benchmarks/bench_cycle.py --nodes 10000 --json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
START = datetime(2026, 3, 1, tzinfo=UTC)
STEP = timedelta(minutes=5)
TAIL = timedelta(hours=1)
"""Telemetry kept aside for the cycles: at most 12 cycles of 5 minutes."""
SOURCE = "synthetic"


# ---------------------------------------------------------------- measuring
def _rss_bytes() -> int:
    with open("/proc/self/statm", encoding="ascii") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class Stage:
    """Wall and CPU seconds of a block, and the peak RSS sampled during it."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()

    def _sample(self) -> None:
        while not self._stop.wait(0.01):
            self.peak = max(self.peak, _rss_bytes())

    def run(self, fn: Callable[[], Any]) -> tuple[Any, dict[str, float]]:
        self.peak = _rss_bytes()
        thread = threading.Thread(target=self._sample, daemon=True)
        thread.start()
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            out = fn()
        finally:
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            self._stop.set()
            thread.join()
            self._stop.clear()
        self.peak = max(self.peak, _rss_bytes())
        return out, {
            "wall_s": round(wall, 3),
            "cpu_s": round(cpu, 3),
            "peak_rss_mib": round(self.peak / 2**20, 1),
        }


def _max_rss_mib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


# ---------------------------------------------------------------- setup
def _split(frame: Any, col: str, end: datetime) -> tuple[Any, Any]:
    import polars as pl

    return frame.filter(pl.col(col) <= end), frame.filter(pl.col(col) > end)


def _known_at(pods: Any, end: datetime) -> Any:
    """The pods table as known at ``end``: created by then; later schedules, placements
    and deletions not known yet."""
    import polars as pl

    later = pl.col("scheduled_at") > end
    return pods.filter(pl.col("created_at") <= end).with_columns(
        pl.when(later).then(None).otherwise(pl.col("scheduled_at")).alias("scheduled_at"),
        pl.when(later).then(None).otherwise(pl.col("node_id")).alias("node_id"),
        pl.when(pl.col("deleted_at") > end)
        .then(None)
        .otherwise(pl.col("deleted_at"))
        .alias("deleted_at"),
    )


def _pods_changing(pods: Any, end: datetime) -> Any:
    """The pods created, scheduled or deleted in ``(end, end + TAIL]``, as they are in the
    end (later rows of the same pods say what changed when, :func:`append`)."""
    import polars as pl

    def inside(c: str) -> Any:
        return pl.col(c).is_between(end, end + TAIL, closed="right")

    return pods.filter(inside("created_at") | inside("scheduled_at") | inside("deleted_at"))


def _pod_tail(base: Path, info: dict[str, Any]) -> Path:
    """``tail/pods.parquet`` of a cached setup made before it was kept (simulated again,
    the same seed: the same pods)."""
    path = base / "tail" / "pods.parquet"
    if not path.exists():
        from predops.pipelines.synthetic.run import SimConfig, build

        end = START + timedelta(days=info["days"])
        cfg = SimConfig(
            nodes=info["nodes"],
            days=info["days"] + TAIL / timedelta(days=1),
            interval=STEP,
            seed=info["seed"],
            start=START,
        )
        _pods_changing(build(cfg).pods_frame, end).write_parquet(path)
    return path


def _simulate(lake: Any, nodes: int, days: float, seed: int, tail_dir: Path) -> dict[str, Any]:
    """Simulate ``days`` + :data:`TAIL`, ingest up to the end of ``days``, keep the tail's
    telemetry and demand under ``tail_dir``."""
    import polars as pl

    from predops.core.clock import FixedClock
    from predops.pipelines.ingest.batch import Batch
    from predops.pipelines.ingest.run import ingest
    from predops.pipelines.synthetic.run import SimConfig, build

    end = START + timedelta(days=days)
    cfg = SimConfig(
        nodes=nodes, days=days + TAIL / timedelta(days=1), interval=STEP, seed=seed, start=START
    )
    sim = build(cfg)
    tail: list[pl.DataFrame] = []

    def batches() -> Iterator[Batch]:
        yield Batch("inventory", sim.inventory())
        chunk: list[pl.DataFrame] = []
        rows = 0
        for block in sim.telemetry_blocks():
            keep, later = _split(block, "ts", end)
            tail.append(later)
            chunk.append(keep)
            rows += keep.height
            if rows >= 3_000_000:
                yield Batch("telemetry", pl.concat(chunk))
                chunk, rows = [], 0
        if chunk:
            yield Batch("telemetry", pl.concat(chunk))
        yield Batch("events", _split(sim.events(), "at", end)[0])
        yield Batch("pods", _known_at(sim.pods_frame, end))
        _pods_changing(sim.pods_frame, end).write_parquet(tail_dir / "pods.parquet")
        demand, later_demand = _split(sim.demand_table(), "ts", end)
        later_demand.write_parquet(tail_dir / "demand.parquet")
        yield Batch("demand", demand)
        yield Batch("calendar", sim.calendar())
        yield Batch("stock", _split(sim.stock(), "ts", end)[0])
        yield Batch("purchase_orders", _split(sim.purchase_orders(), "ts", end)[0])

    report = ingest(lake, SOURCE, batches(), clock=FixedClock(end), input_name="bench_cycle")
    pl.concat(tail).write_parquet(tail_dir / "telemetry.parquet")
    return {
        "lake_end": end.isoformat(),
        "tables": {k: v.to_dict() for k, v in sorted(report.tables.items())},
        "rows_quarantined": report.rows_quarantined,
    }


def _train_failure_model(settings: Any, seed: int) -> dict[str, Any]:
    """A small failure model with the online features' feature set: a 100-node x
    8-day fleet's training frame, written into this workspace's feature store."""
    import tempfile

    from predops.core.clock import FixedClock
    from predops.pipelines.jobs import failure as failure_jobs
    from predops.pipelines.jobs.features import NODE_TRAINING, build_features
    from predops.pipelines.synthetic.run import SimConfig, simulate_to_lake
    from predops.pipelines.workspace.feature_store import FeatureStore
    from predops.pipelines.workspace.lake import Lake

    with tempfile.TemporaryDirectory() as tmp:
        lake, store = Lake(Path(tmp) / "lake"), FeatureStore(Path(tmp) / "features")
        cfg = SimConfig(nodes=100, days=8, interval=STEP, seed=seed + 1, start=START)
        simulate_to_lake(lake, cfg, clock=FixedClock(cfg.end), progress=False)
        built = build_features(lake, store, as_of=cfg.end)
        frame = store.read_offline(NODE_TRAINING)
        FeatureStore(settings.features_dir).write_offline(
            NODE_TRAINING,
            frame,
            as_of=cfg.end,
            feature_set_hash=built["nodes"]["feature_set_hash"],
        )
    report = failure_jobs.train(settings, backtest_days=2)
    return {k: report[k] for k in ("version", "training_rows", "feature_set_hash")}


def setup(base: Path, nodes: int, days: float, seed: int) -> dict[str, Any]:
    """The cached workspace (see the module docstring); built once."""
    done = base / "setup.json"
    if done.exists():
        return dict(json.loads(done.read_text()))
    from predops.models.demand.config import config_named
    from predops.pipelines.jobs import demand as demand_jobs
    from predops.pipelines.workspace.lake import Lake
    from predops.pipelines.workspace.settings import Settings

    if base.exists():
        shutil.rmtree(base)  # a setup killed part-way
    (base / "tail").mkdir(parents=True)
    base = base.resolve()
    settings = Settings(workspace=base / "ws", shared_data=base)
    t0 = time.perf_counter()
    out: dict[str, Any] = {"nodes": nodes, "days": days, "seed": seed}
    out["simulate"] = _simulate(Lake(settings.lake_dir), nodes, days, seed, base / "tail")
    out["simulate_s"] = round(time.perf_counter() - t0, 1)
    t1 = time.perf_counter()
    out["failure_model"] = _train_failure_model(settings, seed)
    d = demand_jobs.train(settings, config=config_named("hourly"), backtest_cutoffs=0, seed=seed)
    out["demand_model"] = {k: d[k] for k in ("version", "series", "rows")}
    out["models_s"] = round(time.perf_counter() - t1, 1)
    done.write_text(json.dumps(out, indent=1, sort_keys=True))
    return out


def link_copy(src: Path, dst: Path) -> None:
    """``src`` copied to ``dst``: Parquet files (never changed once published) hard-linked,
    everything else copied."""
    for path in sorted(src.rglob("*")):
        target = dst / path.relative_to(src)
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        elif path.suffix == ".parquet" and "lake" in path.relative_to(src).parts:
            target.parent.mkdir(parents=True, exist_ok=True)
            os.link(path, target)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)


# ---------------------------------------------------------------- cycle
def append(
    lake_dir: Path, tail: Path, since: datetime, until: datetime, *, pods: bool = False
) -> dict[str, Any]:
    """The telemetry and demand rows in ``(since, until]`` through the ingest writer;
    ``pods``: also a row for each pod created, scheduled or deleted then, as known at
    ``until`` (a later row of a pod is its newer state, as a cluster export writes it)."""
    import polars as pl

    from predops.core.clock import FixedClock
    from predops.pipelines.ingest.batch import Batch
    from predops.pipelines.ingest.run import ingest
    from predops.pipelines.workspace.lake import Lake

    window = pl.col("ts").is_between(since, until, closed="right")
    tel = pl.scan_parquet(tail / "telemetry.parquet").filter(window).collect()
    dem = pl.scan_parquet(tail / "demand.parquet").filter(window).collect()
    batches = [Batch("telemetry", tel), Batch("demand", dem)]
    if pods:
        moved = pl.any_horizontal(
            pl.col(c).is_between(since, until, closed="right")
            for c in ("created_at", "scheduled_at", "deleted_at")
        )
        changed = pl.read_parquet(tail / "pods.parquet").filter(moved)
        batches.append(Batch("pods", _known_at(changed, until)))
    report = ingest(
        Lake(lake_dir),
        SOURCE,
        batches,
        clock=FixedClock(until),
        input_name=f"bench_cycle:{until.isoformat()}",
    )
    return {k: v.rows_written for k, v in report.tables.items()}


def _today(ws: Path, cutoff: datetime, out: Path) -> dict[str, Any]:
    """The pipeline job's steps as the scheduler ran them before it was incremental
    (``[features] incremental = false``: everything recomputed each run)."""
    import dataclasses

    from predops.core.clock import FixedClock
    from predops.pipelines.scheduler.config import load_config
    from predops.pipelines.scheduler.context import JobContext
    from predops.pipelines.scheduler.runner import data_cutoff
    from predops.pipelines.scheduler.steps import PIPELINE_STEPS
    from predops.pipelines.workspace.runs import RunStore
    from predops.pipelines.workspace.settings import Settings

    settings = Settings(workspace=ws, shared_data=ws)
    config = load_config(None, {})
    full = dataclasses.replace(config.features, incremental=False)
    ctx = JobContext(
        settings=settings,
        config=dataclasses.replace(config, features=full),
        runs=RunStore(settings.scheduler_db),
        clock=FixedClock(cutoff),
    )
    stages: dict[str, Any] = {}
    found, stages["cutoff"] = Stage().run(lambda: data_cutoff(settings))
    if found != cutoff:
        raise SystemExit(f"today: the lake's cutoff is {found}, expected {cutoff}")
    result: dict[str, Any] = {}
    for name, fn in PIPELINE_STEPS:
        outcome, stages[name] = Stage().run(lambda fn=fn: fn(ctx, cutoff, out))
        result[name] = outcome.detail
    return {"stages": stages, "plan_file": result["plan"]["plan_file"]}


def _incremental(ws: Path, cutoff: datetime, out: Path) -> dict[str, Any]:
    from predops.core.clock import FixedClock
    from predops.pipelines.jobs.cycle import run_cycle
    from predops.pipelines.workspace.settings import Settings

    settings = Settings(workspace=ws, shared_data=ws)
    stages: dict[str, Any] = {}

    def timed(name: str, fn: Callable[[], Any]) -> Any:
        res, stages[name] = Stage().run(fn)
        return res

    report = run_cycle(settings, cutoff=cutoff, clock=FixedClock(cutoff), out=out, stage=timed)
    return {"stages": stages, "plan_file": report["plan_file"], "detail": report["detail"]}


def _warm_imports() -> None:
    """Imported before any stage is timed, on both paths: what the scheduler's
    long-running process (jobs run in its thread pool) holds after its first run;
    without these a worker's first cycle (every cycle with ``--processes per-cycle``)
    would count a cold import of MLflow and LightGBM that the scheduler pays once.
    Reported as ``imports_s``, outside the stages."""
    import lightgbm  # noqa: F401
    import polars  # noqa: F401
    import sklearn  # noqa: F401
    import sqlalchemy  # noqa: F401

    import predops.pipelines.jobs.cycle
    import predops.pipelines.jobs.demand
    import predops.pipelines.jobs.failure
    import predops.pipelines.jobs.plan
    import predops.pipelines.scheduler.steps  # noqa: F401
    from predops.pipelines.workspace import registry

    registry._python_object_model()  # MLflow's pyfunc, imported where only the registry may
    from predops.pipelines.scheduler.service import settle_heap

    settle_heap()  # as the scheduler does before its first fire


def _warm_registry(ws: Path) -> None:
    """The scheduler's process also holds an open model registry and has loaded a model
    before: MLflow's first connection to a store in a process (its schema check) costs
    about 1.3 CPU-s, its first model load about 1.2 CPU-s more than the next, each paid
    once. Both done here before timing, on both paths (in ``imports_s``)."""
    from predops.pipelines.jobs.failure import load_model
    from predops.pipelines.workspace import registry
    from predops.pipelines.workspace.settings import Settings

    settings = Settings(workspace=ws, shared_data=ws)
    with registry._mlflow(settings.mlflow_uri) as client:
        client.search_registered_models(max_results=1)
    load_model(settings)  # the model itself is loaded again when a stage needs it


def _cycle(path: str, ws: Path, cutoff: datetime, out: Path) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    res = (_today if path == "today" else _incremental)(ws, cutoff, out)
    res["max_rss_mib"] = _max_rss_mib()
    return res


def worker(path: str, ws: Path, cutoff: datetime, out: Path) -> None:
    """One cycle of one path in this (fresh) process; prints its JSON."""
    t0 = time.perf_counter()
    _warm_imports()
    _warm_registry(ws)
    imports_s = time.perf_counter() - t0
    res = _cycle(path, ws, cutoff, out)
    res["imports_s"] = round(imports_s, 3)
    print(json.dumps(res, sort_keys=True, default=str))


REPLY = "@@cycle "
"""Marks a long-lived worker's answer line (anything else on its stdout is ignored)."""


def serve(path: str, ws: Path) -> None:
    """A long-lived worker, as the scheduler's process: one cycle per line of stdin
    (``{"cutoff": ..., "out": ...}``), one :data:`REPLY` line per cycle."""
    t0 = time.perf_counter()
    _warm_imports()
    _warm_registry(ws)
    imports_s = round(time.perf_counter() - t0, 3)
    for line in sys.stdin:
        cmd = json.loads(line)
        res = _cycle(path, ws, datetime.fromisoformat(cmd["cutoff"]), Path(cmd["out"]))
        res["imports_s"] = imports_s
        imports_s = 0.0  # paid once
        print(REPLY + json.dumps(res, sort_keys=True, default=str), flush=True)


class LongLived:
    """One long-lived worker process of one path (:func:`serve`); its stdout is read by
    a thread, so a wait for an answer is bounded."""

    def __init__(self, path: str, ws: Path, log: Path, timeout_s: float) -> None:
        import queue

        cmd = [sys.executable, str(Path(__file__).resolve()), "--serve", path]
        self.path, self.timeout_s, self.log = path, timeout_s, log
        self._err = log.open("wb")
        self.proc = subprocess.Popen(
            [*cmd, "--workspace", str(ws)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._err,
            text=True,
        )
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith(REPLY):
                self._lines.put(line[len(REPLY) :])
        self._lines.put("")  # the worker ended

    def run(self, cutoff: datetime, out: Path) -> dict[str, Any]:
        import queue

        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"cutoff": cutoff.isoformat(), "out": str(out)}) + "\n")
        self.proc.stdin.flush()
        try:
            line = self._lines.get(timeout=self.timeout_s)
        except queue.Empty:
            self.close()
            raise SystemExit(f"{self.path} worker gave no answer in {self.timeout_s:g} s") from None
        if not line:
            self.close()
            tail = self.log.read_text(errors="replace")[-4000:]
            raise SystemExit(f"{self.path} worker failed at {cutoff}:\n{tail}")
        return dict(json.loads(line))

    def close(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._err.close()


def _run_worker(
    path: str, ws: Path, cutoff: datetime, out: Path, timeout_s: float
) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", path]
    cmd += ["--workspace", str(ws), "--cutoff", cutoff.isoformat(), "--out", str(out)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise SystemExit(f"{path} worker gave no answer in {timeout_s:g} s") from None
    if proc.returncode != 0:
        raise SystemExit(f"{path} worker failed at {cutoff}:\n{proc.stderr[-4000:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def compare(today_ws: Path, incr_ws: Path, out: Path, res: dict[str, Any]) -> dict[str, bool]:
    """Whether the incremental path's online features, risks and plan equal today's."""
    import polars as pl

    def online(ws: Path) -> pl.DataFrame:
        return pl.read_ipc(ws / "features" / "online" / "node.arrow").sort("node_id")

    def plan(path: str) -> dict[str, Any]:
        body = dict(json.loads(Path(path).read_text()))
        body.pop("inputs", None)  # notes of how each input was read
        return body

    def risks(path: str) -> Any:
        return json.loads((out / path / "risk.json").read_text())

    return {
        "online_features": bool(online(today_ws).equals(online(incr_ws))),
        "risks": risks("today") == risks("incremental"),
        "plan": plan(res["today"]["plan_file"]) == plan(res["incremental"]["plan_file"]),
    }


def _total(stages: dict[str, dict[str, float]]) -> dict[str, float]:
    return {
        "wall_s": round(sum(s["wall_s"] for s in stages.values()), 3),
        "cpu_s": round(sum(s["cpu_s"] for s in stages.values()), 3),
        "peak_rss_mib": max(s["peak_rss_mib"] for s in stages.values()),
    }


def _mean(runs: list[dict[str, Any]]) -> dict[str, Any]:
    names = list(runs[0]["stages"])
    out: dict[str, Any] = {}
    for n in names:
        vals = [r["stages"][n] for r in runs]
        out[n] = {
            "wall_s": round(sum(v["wall_s"] for v in vals) / len(vals), 3),
            "cpu_s": round(sum(v["cpu_s"] for v in vals) / len(vals), 3),
            "peak_rss_mib": max(v["peak_rss_mib"] for v in vals),
        }
    out["total"] = _total({n: out[n] for n in names})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--days", type=float, default=30.0)
    ap.add_argument("--cycles", type=int, default=4, help="5-minute cycles (at most 12)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--cache", type=Path, default=ROOT / ".predops" / "bench-cache" / "cycle")
    ap.add_argument("--json", action="store_true")
    ap.add_argument(
        "--processes",
        choices=("long-lived", "per-cycle"),
        default="long-lived",
        help="long-lived: one process per path runs every cycle, as the scheduler's "
        "process does (what it keeps in memory between cycles counts); per-cycle: a "
        "fresh process per cycle and path (only what is on disk carries over)",
    )
    ap.add_argument(
        "--pod-churn",
        action="store_true",
        help="each cycle also appends the pods that started or stopped in its 5 minutes "
        "(by default the pods table holds what was known at the lake's end)",
    )
    ap.add_argument(
        "--timeout", type=float, default=1800.0, help="seconds one cycle may take (default 1800)"
    )
    ap.add_argument("--serve", choices=("today", "incremental"), help=argparse.SUPPRESS)
    ap.add_argument("--worker", choices=("today", "incremental"), help=argparse.SUPPRESS)
    ap.add_argument("--workspace", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--cutoff", type=datetime.fromisoformat, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.workspace, args.cutoff, args.out)
        return 0
    if args.serve:
        serve(args.serve, args.workspace)
        return 0
    if not 1 <= args.cycles <= TAIL // STEP:
        raise SystemExit(f"--cycles must be 1..{TAIL // STEP}")
    base = args.cache / f"n{args.nodes}-d{args.days:g}-s{args.seed}"
    t0 = time.perf_counter()
    info = setup(base, args.nodes, args.days, args.seed)
    if args.pod_churn:
        _pod_tail(base, info)
    setup_s = round(time.perf_counter() - t0, 1)
    run_dir = args.cache / f"run-{os.getpid()}"
    today_ws, incr_ws = run_dir / "today", run_dir / "incremental"
    served: dict[str, LongLived] = {}
    try:
        link_copy(base / "ws", today_ws)
        link_copy(base / "ws", incr_ws)
        shutil.rmtree(incr_ws / "lake")
        (incr_ws / "lake").symlink_to(today_ws / "lake")  # one lake, read by both paths
        end = datetime.fromisoformat(info["simulate"]["lake_end"])
        wss = {"today": today_ws, "incremental": incr_ws}
        if args.processes == "long-lived":
            served = {
                p: LongLived(p, ws, run_dir / f"{p}.stderr", args.timeout) for p, ws in wss.items()
            }
        cycles: list[dict[str, Any]] = []
        for i in range(1, args.cycles + 1):
            cutoff = end + i * STEP
            rows, ingest_stage = Stage().run(
                lambda c=cutoff: append(
                    today_ws / "lake", base / "tail", c - STEP, c, pods=args.pod_churn
                )
            )
            out = run_dir / "out" / str(i)
            order = ("today", "incremental") if i % 2 else ("incremental", "today")
            res = {
                p: served[p].run(cutoff, out / p)
                if served
                else _run_worker(p, wss[p], cutoff, out / p, args.timeout)
                for p in order
            }
            cycles.append(
                {
                    "cutoff": cutoff.isoformat(),
                    "ingest": ingest_stage,
                    "rows_appended": rows,
                    "order": list(order),
                    **res,
                    "equal": compare(today_ws, incr_ws, out, res),
                }
            )
    finally:
        for w in served.values():
            w.close()
        shutil.rmtree(run_dir, ignore_errors=True)
    steady = cycles[1:] or cycles
    today = _mean([c["today"] for c in steady])
    incr = _mean([c["incremental"] for c in steady])
    ingest = _mean([{"stages": {"ingest": c["ingest"]}} for c in steady])["ingest"]
    report = {
        "benchmark": "cycle",
        "nodes": args.nodes,
        "days": args.days,
        "cycles": args.cycles,
        "processes": args.processes,
        "pod_churn": args.pod_churn,
        "cpu_count": os.cpu_count(),
        "load_average_1m_at_start": round(os.getloadavg()[0], 2),
        "setup": {**info, "setup_s_this_run": setup_s},
        "ingest_per_cycle": ingest,
        "today": today,
        "incremental": incr,
        "incremental_first_cycle": _total(cycles[0]["incremental"]["stages"]),
        "speedup_wall": round(today["total"]["wall_s"] / incr["total"]["wall_s"], 2),
        "speedup_cpu": round(today["total"]["cpu_s"] / incr["total"]["cpu_s"], 2),
        "equal_every_cycle": all(all(c["equal"].values()) for c in cycles),
        "per_cycle": cycles,
    }
    print(json.dumps(report, sort_keys=True, indent=None if args.json else 1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
