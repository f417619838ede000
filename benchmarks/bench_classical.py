"""Benchmark: the classical demand candidates with one BLAS thread, as predops runs them,
against the same work on OpenBLAS's default thread pool (the peer), in the same run.

The work per series is what a refit of the served combination asks of them: statsmodels'
ETS estimated on ``--days`` of hourly history, then ETS filtering and a Theta forecast
from each of three window origins a day apart (24 horizons). The series are the first
``--series`` VMs of the Azure V1 VM CPU trace (``--path``, the mean-CPU family), or,
without it, seeded synthetic ones (daily cycle, noise, a level shift). Each side runs in
its own child process (fresh BLAS pools), sides alternating over ``--repeats`` rounds;
CPU is the child's user + sys over the work alone. Prints one JSON object: per side the
median CPU-s and wall seconds, the ratios predops / peer (below 1: cheaper), whether both
sides estimated the same ETS parameters, and the BLAS pools each child saw.

    python benchmarks/bench_classical.py --path ../shared/data/azure-v1-vm-cpu --json
    python benchmarks/bench_classical.py --series 4 --json   # synthetic, quick
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
HORIZONS = np.arange(1, 25)
SEASON = 24
ORIGINS = (72, 48, 24)  # hours before the end of the history, as the fit windows


def azure_series(path: str, n: int, hours: int) -> np.ndarray:
    """The first ``n`` mean-CPU VMs of the trace with ``hours`` observed hours each."""
    import polars as pl

    from predops.pipelines.jobs.demand import load_source
    from predops.pipelines.workspace.clock import SystemClock

    demand = load_source("azure-vm", path, clock=SystemClock(), synthetic={}).demand
    ids = demand["series_id"].unique().sort().to_list()
    family = [s for s in ids if "avg" in s] or ids
    out: list[np.ndarray] = []
    for sid in family:
        y = demand.filter(pl.col("series_id") == sid).sort("ts")["value"].to_numpy()
        if y.size >= hours and np.isfinite(y[:hours]).all():
            out.append(y[:hours].astype(np.float64))
        if len(out) == n:
            break
    if len(out) < n:
        raise SystemExit(f"{path}: only {len(out)} VMs with {hours} observed hours, asked {n}")
    return np.stack(out)


def synthetic_series(n: int, hours: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(hours)
    base = rng.uniform(10, 60, (n, 1))
    cycle = rng.uniform(2, 15, (n, 1)) * np.sin(2 * np.pi * (t + rng.integers(0, 24, (n, 1))) / 24)
    shift = np.where(t >= hours * 2 // 3, rng.normal(0, 5, (n, 1)), 0.0)
    return base + cycle + shift + rng.normal(0, 2, (n, hours))


def work(ys: np.ndarray) -> list[list[float]]:
    """ETS estimated on each series, then ETS and Theta from each window origin."""
    from predops.models.demand.baselines import ets_forecast, fit_ets, theta_forecast

    params: list[list[float]] = []
    for y in ys:
        fit = fit_ets(y, SEASON)
        params.append([] if fit is None else [float(v) for v in fit.params])
        for back in ORIGINS:
            hist = y[: y.size - back]
            # As the forecasters do: a history too short for a method is its fallback's.
            try:
                if fit is not None:
                    ets_forecast(hist, HORIZONS, fit)
                theta_forecast(hist, HORIZONS, SEASON)
            except (ValueError, np.linalg.LinAlgError):
                continue
    return params


def child(side: str, data: str) -> None:
    import warnings

    from threadpoolctl import threadpool_info

    from predops.models.demand.baselines import one_blas_thread

    warnings.simplefilter("ignore")
    ys = np.load(data)
    work(ys[:1])  # imports and first-call costs out of the timing
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    with one_blas_thread() if side == "predops" else contextlib.nullcontext():
        pools = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
        params = work(ys)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    print(json.dumps({"cpu_s": cpu, "wall_s": wall, "blas_threads": pools, "params": params}))


def run_side(side: str, data: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", side, "--data", data],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=3600,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"{side} child failed:\n{out.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--path", default=None, help="The Azure V1 VM CPU trace (else synthetic).")
    ap.add_argument("--series", type=int, default=40)
    ap.add_argument("--days", type=int, default=18)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="Print one JSON object.")
    ap.add_argument("--child", choices=("peer", "predops"), help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.data)
        return
    if args.series < 1 or args.days < 3 or args.repeats < 1:
        raise SystemExit("--series >= 1, --days >= 3 and --repeats >= 1, please")
    hours = 24 * args.days
    if args.path:
        ys = azure_series(args.path, args.series, hours)
    else:
        ys = synthetic_series(args.series, hours, args.seed)
    runs: dict[str, list[dict[str, Any]]] = {"peer": [], "predops": []}
    with tempfile.TemporaryDirectory() as tmp:
        data = str(Path(tmp) / "series.npy")
        np.save(data, ys)
        for k in range(args.repeats):
            order = ("peer", "predops") if k % 2 == 0 else ("predops", "peer")
            for side in order:
                runs[side].append(run_side(side, data))
    sides = {
        side: {
            "cpu_s": round(statistics.median(r["cpu_s"] for r in rs), 3),
            "wall_s": round(statistics.median(r["wall_s"] for r in rs), 3),
            "blas_threads": rs[0]["blas_threads"],
        }
        for side, rs in runs.items()
    }
    peer_p, ours_p = runs["peer"][0]["params"], runs["predops"][0]["params"]
    same = all(
        len(a) == len(b) and np.allclose(a, b, rtol=1e-6, atol=1e-9)
        for a, b in zip(peer_p, ours_p, strict=True)
    )
    report = {
        "benchmark": "classical candidates: one BLAS thread vs OpenBLAS's default pool",
        "source": "azure-vm" if args.path else "synthetic",
        "series": int(ys.shape[0]),
        "hours": hours,
        "repeats": args.repeats,
        "peer": sides["peer"],
        "predops": sides["predops"],
        "ratio_cpu": round(sides["predops"]["cpu_s"] / sides["peer"]["cpu_s"], 3),
        "ratio_wall": round(sides["predops"]["wall_s"] / sides["peer"]["wall_s"], 3),
        "same_ets_params": bool(same),
        "cores": os.cpu_count(),
    }
    if args.json:
        print(json.dumps(report, sort_keys=True))
    else:
        for k, v in report.items():
            print(f"{k}: {v}")


if __name__ == "__main__":
    main()
