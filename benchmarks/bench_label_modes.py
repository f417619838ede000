"""Benchmark: what the what-if's weekly retrains learn from our own drains.

Runs the predictive policy of ``predops simulate-ops`` three times on one seeded world,
its failure model retrained weekly as the loop goes on the labels of each mode
(:data:`predops.pipelines.whatif.labels.LABEL_MODES`): ``today`` (a real cluster's
failure records: an averted failure leaves none), ``censoring`` (those and the
inspections of the drains: a found fault is the failure it prevented, an unknown
outcome censors) and ``oracle`` (the world's true failures, averted ones included: the
simulator's labels before). Prints one JSON object: per mode the model's average
precision at each retrain (on the same rows, against the world's true next-24 h
failures), their mean over the retrains after the first (the first precedes every
drain, so it is the same in each mode), the loop's lost GPU-hours and drains; the
ratios of ``today`` and ``censoring`` to the named peer ``oracle`` of the same run;
wall and CPU seconds per stage and in total, and the peak RSS. ``--jobs`` (default 3):
the modes in that many spawned processes, each drawing the same world from the seed
and computing its features (the figures are the same; CPU seconds and peak RSS count
the processes too).

    python benchmarks/bench_label_modes.py --nodes 500 --days 60 --seed 41 --json
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import resource
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from predops.pipelines.whatif.label_modes import label_modes
from predops.pipelines.whatif.labels import LABEL_MODES
from predops.pipelines.whatif.run import OpsConfig
from predops.pipelines.whatif.world import WorldConfig

PEER = "oracle"


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else round(a / b, 4)


def ratios(modes: dict[str, Any]) -> dict[str, Any]:
    """Each mode's mean average precision and lost GPU-hours over the peer's."""
    peer = modes[PEER]
    return {
        m: {
            "average_precision_mean": _ratio(
                f["average_precision_mean"], peer["average_precision_mean"]
            ),
            "lost_gpu_hours": _ratio(f["lost_gpu_hours"], peer["lost_gpu_hours"]),
        }
        for m, f in modes.items()
        if m != PEER
    }


def _mode(cfg: OpsConfig, mode: str, progress: bool) -> dict[str, Any]:
    return label_modes(cfg, [mode], progress=progress)


def run(cfg: OpsConfig, jobs: int, progress: bool) -> dict[str, Any]:
    """The three modes, in ``jobs`` processes (1: one after the other, here)."""
    if jobs <= 1:
        return label_modes(cfg, LABEL_MODES, progress=progress)
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(min(jobs, len(LABEL_MODES)), mp_context=ctx) as pool:
        n = len(LABEL_MODES)
        parts = list(pool.map(_mode, [cfg] * n, LABEL_MODES, [progress] * n))
    return {
        "config": parts[0]["config"],
        "world": parts[0]["world"],
        "modes": {m: p["modes"][m] for m, p in zip(LABEL_MODES, parts, strict=True)},
        "seconds": {m: p["seconds"] for m, p in zip(LABEL_MODES, parts, strict=True)},
    }


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--days", type=float, default=60.0)
    ap.add_argument("--warmup-days", type=float, default=14.0)
    ap.add_argument("--seed", type=int, default=41)
    ap.add_argument("--sizing-every", type=int, default=1)
    ap.add_argument("--inspection-find-rate", type=float, default=0.7)
    ap.add_argument("--inspection-unknown-rate", type=float, default=0.2)
    ap.add_argument("--jobs", type=int, default=3, help="Processes (one mode each).")
    ap.add_argument("--no-progress", action="store_true", help="No progress lines on stderr.")
    ap.add_argument("--json", action="store_true", help="Print one JSON object (default).")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(message)s")
    wall, cpu = time.perf_counter(), time.process_time()
    cfg = OpsConfig(
        world=WorldConfig(
            nodes=args.nodes, days=args.days, seed=args.seed, warmup_days=args.warmup_days
        ),
        policies=("predictive",),
        sizing_every=args.sizing_every,
        inspection_find_rate=args.inspection_find_rate,
        inspection_unknown_rate=args.inspection_unknown_rate,
    )
    out = run(cfg, args.jobs, not args.no_progress)
    out["peer"] = PEER
    out["ratios_to_peer"] = ratios(out["modes"])
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    out["total_seconds"] = {
        "wall": round(time.perf_counter() - wall, 1),
        "cpu": round(time.process_time() - cpu + kids.ru_utime + kids.ru_stime, 1),
    }
    out["peak_rss_mib"] = round(max(me.ru_maxrss, kids.ru_maxrss) / 1024, 1)
    out["jobs"] = args.jobs
    print(json.dumps(out, sort_keys=True, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
