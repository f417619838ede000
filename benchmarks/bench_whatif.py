"""Benchmark: the closed-loop what-if (``predops simulate-ops``) on a full fleet.

Runs the three policies (reactive, predictive, oracle) paired on one seeded world of
``--nodes`` x ``--days`` (after ``--warmup-days`` of history) and prints one JSON object:
each policy's figures, the comparison against the issue's targets (predictive and
oracle against reactive, in the same run), and wall / CPU seconds per stage and in
total, with the peak RSS. With ``--seeds`` it runs one world per seed, one after the
other (``--jobs`` processes: the (seed, policy) runs side by side; ``--engine dask
--scheduler tcp://...``: on a Dask cluster), and adds the comparison of the figures
summed over them (``pooled``). A progress line per run goes to stderr
(``--no-progress``: none).

    python benchmarks/bench_whatif.py --json                  # 2,000 nodes x 60 days
    python benchmarks/bench_whatif.py --nodes 200 --days 14 --json
    python benchmarks/bench_whatif.py --seeds 7,11,13 --json  # three worlds
    python benchmarks/bench_whatif.py --nodes 10000 --days 30 --json
"""

from __future__ import annotations

import argparse
import json
import logging
import resource
import sys
import time

from predops.pipelines.whatif.run import OpsConfig, parse_seeds, seeds_report, simulate_seeds
from predops.pipelines.whatif.world import WorldConfig


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--days", type=float, default=60.0)
    ap.add_argument("--warmup-days", type=float, default=14.0)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--seeds", default=None, help="Comma-separated seeds, e.g. 7,11,13.")
    ap.add_argument("--sizing-every", type=int, default=1)
    ap.add_argument(
        "--jobs",
        type=int,
        default=3,
        help="Processes (one (seed, policy) run each; CPU seconds: all).",
    )
    ap.add_argument("--engine", choices=("local", "dask"), default="local")
    ap.add_argument("--scheduler", default=None, help="Dask scheduler, e.g. tcp://host:8786.")
    ap.add_argument("--no-progress", action="store_true", help="No progress lines on stderr.")
    ap.add_argument("--json", action="store_true", help="Print one JSON object (default).")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(message)s")
    wall, cpu = time.perf_counter(), time.process_time()
    seeds = parse_seeds(args.seeds) if args.seeds else [args.seed]
    cfg = OpsConfig(
        world=WorldConfig(
            nodes=args.nodes, days=args.days, seed=seeds[0], warmup_days=args.warmup_days
        ),
        sizing_every=args.sizing_every,
    )
    runs = simulate_seeds(
        cfg,
        seeds,
        jobs=args.jobs,
        engine=args.engine,
        scheduler=args.scheduler,
        progress=not args.no_progress,
    )
    out = runs[seeds[0]] if len(seeds) == 1 else seeds_report(runs)
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
