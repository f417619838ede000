"""Benchmark: every dashboard page at fleet scale — wall time, server CPU and bytes per page.

(The issue calls it ``benchmarks/dashboards.py``; the project's benchmarks are named
``bench_*.py``.)

    python -m benchmarks.bench_dashboards --nodes 10000 --json

Setup, not measured, cached under ``.predops/bench-cache/dashboards/`` (git-ignored) and
reused by later runs with the same ``--nodes --days --seed`` on the same UTC day (the
simulated period ends at the day's midnight, so the served data is recent). Each
workspace is written through the project's own writers:

- the synthetic fleet (every table, 5-minute telemetry) for ``--days`` days, ingested
  through the validated lake write (``simulate_to_lake``);
- a small failure model with the fleet's feature set (``bench_cycle``'s: a 100-node x
  8-day fleet, registered as the first version, so ``champion``), then the scheduler's
  ``retrain`` steps ``features_offline`` (the fleet's own offline frame, what the node
  page re-scores), ``train_demand`` and ``promote_demand``;
- the scheduler's ``pipeline`` job once at the lake's end (online features of every
  node, scores, forecasts of every demand series, the plan: one candidate per node, so
  about ``--nodes`` skips plus the actions), recorded in the run table as a real run is.

The same setup at ``--peer-nodes`` (default 200, the demo's fleet) is the peer. Each
workspace is served in turn by ``predops serve`` (uvicorn, one process, in a
subprocess; data counted fresh for ``MAX_DATA_AGE`` since the period ended at midnight)
and every page is fetched ``--requests`` times over one keep-alive connection after one
unmeasured first request (reported as ``first_s``: it pays the fleet scoring and the
forecast cache). Per page: median and p95 wall seconds, the server's CPU seconds per
request (``/proc``, user + system), response bytes and status; the server's peak RSS;
and the ratios fleet / demo. ``targets`` says whether every page's p95 is under 1 s and
its body under 3 MB at fleet scale. Wall figures share the machine with the load
generator and anything else running: read the CPU seconds beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np

from benchmarks.bench_cycle import _train_failure_model, link_copy
from benchmarks.bench_serving import PREDOPS, ROOT, cpu_seconds, env_for, free_port, stop, wait_http

STEP = timedelta(minutes=5)
MAX_DATA_AGE = "2d"
"""The benchmark server's ``max_data_age``: the cached period ends at today's midnight
(UTC), so its nodes stay fresh for the whole day."""
RETRAIN = ("features_offline", "train_demand", "promote_demand")
"""The retrain job's steps the setup runs (the failure model is the small one)."""
TARGET_S = 1.0
TARGET_BYTES = 3_000_000


# ---------------------------------------------------------------- setup
def period_end(now: datetime) -> datetime:
    """The cached period's end: ``now``'s UTC midnight."""
    return now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def setup(base: Path, nodes: int, days: float, seed: int, end: datetime) -> dict[str, Any]:
    """The cached workspace (see the module docstring) under ``base / "ws"``; built once."""
    done = base / "setup.json"
    if done.exists():
        return dict(json.loads(done.read_text()))
    from predops.core.clock import FixedClock
    from predops.pipelines.scheduler.config import load_config
    from predops.pipelines.scheduler.context import JobContext
    from predops.pipelines.scheduler.runner import data_cutoff, run_steps
    from predops.pipelines.scheduler.steps import PIPELINE_STEPS, RETRAIN_STEPS
    from predops.pipelines.synthetic.run import SimConfig, simulate_to_lake
    from predops.pipelines.workspace.lake import Lake
    from predops.pipelines.workspace.runs import RunStore
    from predops.pipelines.workspace.settings import Settings

    if base.exists():
        shutil.rmtree(base)  # a setup killed part-way
    base.mkdir(parents=True)
    base = base.resolve()
    settings = Settings(workspace=base / "ws", shared_data=base)
    clock = FixedClock(end)
    out: dict[str, Any] = {"nodes": nodes, "days": days, "seed": seed, "end": end.isoformat()}
    t0 = time.perf_counter()
    cfg = SimConfig(nodes=nodes, days=days, interval=STEP, seed=seed, start=end - timedelta(days))
    sim = simulate_to_lake(Lake(settings.lake_dir), cfg, clock=clock, progress=False)
    out["simulate_rows"] = {k: v["rows_written"] for k, v in sim["tables"].items()}
    out["simulate_s"] = round(time.perf_counter() - t0, 1)
    t0 = time.perf_counter()
    out["failure_model"] = _train_failure_model(settings, seed)
    out["failure_model_s"] = round(time.perf_counter() - t0, 1)
    ctx = JobContext(
        settings=settings,
        config=load_config(None, {}),
        runs=RunStore(settings.scheduler_db),
        clock=clock,
    )
    cutoff = data_cutoff(settings)
    if cutoff is None:
        raise SystemExit("setup: the simulated lake has no telemetry")
    retrain = tuple(s for s in RETRAIN_STEPS if s[0] in RETRAIN)
    for job, steps in (("retrain", retrain), ("pipeline", PIPELINE_STEPS)):
        t0 = time.perf_counter()
        res = run_steps(ctx, job, cutoff, steps)
        if res["status"] != "done":
            raise SystemExit(f"setup: {job} job {res['status']}: {res.get('error')}")
        out[f"{job}_s"] = round(time.perf_counter() - t0, 1)
        out[job] = {r["step"]: r.get("status") for r in res.get("steps", [])}
    plans = sorted(settings.plans_dir.glob("*.json"))
    body = json.loads(plans[-1].read_text())
    out["plan"] = {
        "id": plans[-1].stem,
        "actions": len(body.get("actions", [])),
        "skips": len(body.get("skips", [])),
    }
    done.write_text(json.dumps(out, indent=1, sort_keys=True))
    return out


def cached(cache: Path, nodes: int, days: float, seed: int, end: datetime) -> Path:
    """The cached workspace's folder for these parameters (built when missing)."""
    prefix = f"n{nodes}-d{days:g}-s{seed}-e"
    base = cache / f"{prefix}{end:%Y%m%d}"
    for older in cache.glob(f"{prefix}*"):  # earlier days' copies of the same setup
        if older != base and older.is_dir():
            shutil.rmtree(older, ignore_errors=True)
    setup(base, nodes, days, seed, end)
    return base


# ---------------------------------------------------------------- pages
def pages(port: int, ws: Path) -> list[tuple[str, str]]:
    """(label, path) of every page, with real ids: the first pool, the riskiest node,
    the first demand series, the newest plan."""
    import httpx

    from predops.pipelines.workspace.lake import Lake

    lake = Lake(ws / "lake")
    pool = str(lake.scan("inventory").select("pool").collect()["pool"].drop_nulls().min())
    series = str(lake.scan("demand").select("series_id").collect()["series_id"].min())
    risk = httpx.get(f"http://127.0.0.1:{port}/v1/failure/risk?limit=1", timeout=120).json()
    node = risk["items"][0]["node_id"]
    plan = max(p.stem for p in (ws / "plans").glob("*.json"))
    out = [
        ("/", "/"),
        ("/?pool=", f"/?pool={quote(pool)}"),
        ("/nodes/{id}", f"/nodes/{quote(node)}"),
        ("/demand", "/demand"),
        ("/demand/{series}", f"/demand/{quote(series, safe='/')}"),
        ("/capacity", "/capacity"),
        ("/plans/latest", "/plans/latest"),
        ("/plans/{id}", f"/plans/{quote(plan)}"),
        ("/models", "/models"),
    ]
    listing = httpx.get(f"http://127.0.0.1:{port}/plans", timeout=120)
    if listing.status_code == 200:  # a plan history page, where the tree has one
        out.append(("/plans", "/plans"))
    return out


def measure(port: int, pid: int, path: str, requests: int) -> dict[str, Any]:
    """One page: a first request, then ``requests`` more over one connection."""
    import httpx

    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=300) as client:
        t0 = time.perf_counter()
        first = client.get(path)
        first_s = time.perf_counter() - t0
        times: list[float] = []
        cpu0 = cpu_seconds(pid)
        size, status = len(first.content), first.status_code
        for _ in range(requests):
            t0 = time.perf_counter()
            r = client.get(path)
            times.append(time.perf_counter() - t0)
            size, status = len(r.content), r.status_code
        cpu = cpu_seconds(pid) - cpu0
    return {
        "status": status,
        "bytes": size,
        "first_s": round(first_s, 3),
        "median_s": round(float(np.median(times)), 4),
        "p95_s": round(float(np.percentile(times, 95)), 4),
        "server_cpu_s_per_request": round(cpu / requests, 4),
        "requests": requests,
    }


def peak_rss_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


@contextmanager
def served(base: Path) -> Iterator[tuple[int, int, Path]]:
    """``predops serve`` over a link copy of the cached workspace ``base / "ws"``:
    (port, server pid, the copy); stopped and removed on exit."""
    run = base / f"run-{os.getpid()}"
    ws = run / "ws"
    try:
        link_copy(base / "ws", ws)
        env = env_for(ws)
        env["PREDOPS_SERVER__MAX_DATA_AGE"] = MAX_DATA_AGE
        port = free_port()
        cmd = [PREDOPS, "--workspace", str(ws), "serve", "--port", str(port)]
        proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            wait_http(port, "/readyz", proc)
            yield port, proc.pid, ws
        finally:
            stop(proc)
    finally:
        shutil.rmtree(run, ignore_errors=True)


def serve_and_measure(base: Path, requests: int) -> dict[str, Any]:
    """Serve a link copy of the cached workspace and measure every page."""
    with served(base) as (port, pid, ws):
        start_cpu = cpu_seconds(pid)
        found = pages(port, ws)
        measured = {label: measure(port, pid, path, requests) for label, path in found}
        rss = peak_rss_mib(pid)
        total_cpu = cpu_seconds(pid)
    return {
        "pages": measured,
        "server_peak_rss_mib": rss,
        "server_cpu_s_start": round(start_cpu, 1),
        "server_cpu_s_total": round(total_cpu, 1),
    }


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 2) if b else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--peer-nodes", type=int, default=200, help="the demo's fleet size")
    ap.add_argument("--days", type=float, default=3.0)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--requests", type=int, default=20, help="measured requests per page")
    ap.add_argument("--cache", type=Path, default=ROOT / ".predops" / "bench-cache" / "dashboards")
    ap.add_argument("--setup-only", action="store_true", help="build the caches and stop")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    t_start = time.perf_counter()
    end = period_end(datetime.now(UTC))
    sizes = {"fleet": args.nodes, "demo": args.peer_nodes}
    bases, info = {}, {}
    for name, n in sizes.items():
        t0 = time.perf_counter()
        bases[name] = cached(args.cache, n, args.days, args.seed, end)
        info[name] = {
            **json.loads((bases[name] / "setup.json").read_text()),
            "setup_s_this_run": round(time.perf_counter() - t0, 1),
        }
    if args.setup_only:
        report = {"benchmark": "dashboards", "setup": info}
        print(json.dumps(report, indent=None if args.json else 1))
        return 0
    served = {name: serve_and_measure(bases[name], args.requests) for name in sizes}
    fleet, demo = served["fleet"]["pages"], served["demo"]["pages"]
    per_page = {}
    for label, f in fleet.items():
        d = demo.get(label)
        per_page[label] = {
            "fleet": f,
            "demo": d,
            "ratio_median_s": _ratio(f["median_s"], d["median_s"]) if d else None,
            "ratio_cpu_s": _ratio(f["server_cpu_s_per_request"], d["server_cpu_s_per_request"])
            if d
            else None,
            "ratio_bytes": _ratio(f["bytes"], d["bytes"]) if d else None,
        }
    slow = [k for k, v in fleet.items() if v["p95_s"] >= TARGET_S]
    heavy = [k for k, v in fleet.items() if v["bytes"] >= TARGET_BYTES]
    report = {
        "benchmark": "dashboards",
        "nodes": args.nodes,
        "peer": f"the same setup at {args.peer_nodes} nodes (the demo's fleet)",
        "peer_nodes": args.peer_nodes,
        "days": args.days,
        "requests_per_page": args.requests,
        "pages": per_page,
        "targets": {
            "p95_under_1s_every_page": not slow,
            "under_3MB_every_page": not heavy,
            "every_page_200": all(v["status"] == 200 for v in fleet.values()),
            "over_1s": slow,
            "over_3MB": heavy,
        },
        "server": {k: {x: v for x, v in s.items() if x != "pages"} for k, s in served.items()},
        "setup": info,
        "cpu_count": os.cpu_count(),
        "load_average_1m_at_start": round(os.getloadavg()[0], 2),
        "bench_cpu_seconds": round(
            resource.getrusage(resource.RUSAGE_SELF).ru_utime
            + resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime,
            1,
        ),
        "seconds": round(time.perf_counter() - t_start, 1),
    }
    print(json.dumps(report, sort_keys=True, indent=None if args.json else 1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
