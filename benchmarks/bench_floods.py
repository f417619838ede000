"""Benchmark: the flood scenarios under slow-start pacing and under the storm breaker.

Runs every scenario of ``predops simulate-ops --scenario`` (an XID flood after one job
crash, a fleet-wide exporter outage, a bad driver rollout on one SKU, a rack power
failure; :mod:`predops.pipelines.whatif.scenarios`) on each seed, both pacings on the
same world, and prints one JSON object:

- ``scenarios.<name>.seeds.<seed>``: each pacing's figures (needless drains, those of
  the event's unfounded alarms, real failures handled, lost GPU-hours, hours to resume,
  budget violations) and the wall / CPU seconds of the world and of each pacing's loop;
- ``scenarios.<name>.pooled``: those figures summed over the seeds (hours to resume:
  the worst seed, None when a seed never resumed) and ``slow_start_vs_breaker``: the
  differences slow start minus breaker (the peer: the former storm breaker, run in the
  same process on the same worlds);
- ``targets``: the issue's checks over every seed: unfounded drains beyond the first
  slow-start step in the XID flood and the exporter outage (must be 0), the rack power
  failure handled at least as fast as under the breaker, no budget violation;
- ``peak_rss_mib`` and the total wall / CPU seconds.

    python benchmarks/bench_floods.py --seeds 7,11,13 --nodes 300 --days 3
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import time
from typing import Any

from predops.pipelines.whatif.scenarios import (
    SCENARIOS,
    ScenarioConfig,
    pacing_config,
    run_scenario,
)

SUMMED = (
    "needless_drains",
    "needless_drains_flagged",
    "real_failures",
    "real_failures_handled",
    "lost_gpu_hours",
    "lost_gpu_hours_event",
    "budget_violations",
    "drains",
)


def _worst(values: list[float | None]) -> float | None:
    return None if any(v is None for v in values) else max(v for v in values if v is not None)


def _hours(v: float | None) -> float:
    return math.inf if v is None else v


def _pool(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pacing in ("breaker", "slow_start"):
        figs = [r["pacing"][pacing] for r in runs]
        row: dict[str, Any] = {k: round(sum(f[k] for f in figs), 4) for k in SUMMED}
        row["hours_to_resume_worst"] = _worst([f["hours_to_resume"] for f in figs])
        out[pacing] = row
    b, s = out["breaker"], out["slow_start"]
    out["slow_start_vs_breaker"] = {k: round(s[k] - b[k], 4) for k in SUMMED}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="7,11,13")
    ap.add_argument("--nodes", type=int, default=300)
    ap.add_argument("--days", type=float, default=3.0)
    ap.add_argument("--warmup-days", type=float, default=1.0)
    ap.add_argument("--json", action="store_true", help="(the output is always JSON)")
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    wall, cpu = time.perf_counter(), time.process_time()
    first_step = pacing_config("slow_start").disruption.slow_start_width
    out: dict[str, Any] = {"config": vars(args) | {"seeds": seeds}, "scenarios": {}}
    checks: dict[str, bool] = {}
    for name in SCENARIOS:
        runs = {
            s: run_scenario(ScenarioConfig(name, args.nodes, args.days, args.warmup_days, s))
            for s in seeds
        }
        out["scenarios"][name] = {
            "seeds": {
                str(s): {"pacing": r["pacing"], "seconds": r["seconds"]} for s, r in runs.items()
            },
            "pooled": _pool(list(runs.values())),
        }
        for s, r in runs.items():
            slow, brk = r["pacing"]["slow_start"], r["pacing"]["breaker"]
            checks[f"{name}/{s}/no_budget_violation"] = (
                slow["budget_violations"] == 0 and brk["budget_violations"] == 0
            )
            if name in ("xid-flood", "exporter-outage"):
                checks[f"{name}/{s}/no_needless_beyond_first_step"] = (
                    slow["needless_drains_flagged"] <= first_step
                )
            if name == "rack-power":
                inf = math.inf
                fast = (
                    slow["hours_to_resume"] if slow["hours_to_resume"] is not None else inf
                ) <= (brk["hours_to_resume"] if brk["hours_to_resume"] is not None else inf)
                checks[f"{name}/{s}/handled_at_least_as_fast"] = fast and (
                    slow["real_failures_handled"] >= brk["real_failures_handled"]
                )
    out["targets"] = {"all_met": all(checks.values()), "checks": checks}
    out["seconds"] = {
        "wall": round(time.perf_counter() - wall, 2),
        "cpu": round(time.process_time() - cpu, 2),
    }
    out["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main()
