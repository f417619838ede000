"""The cycle benchmark in miniature (``benchmarks/bench_cycle.py``): both process modes,
with pods churning, run to the end and find the incremental cycle equal to the full
recomputation every cycle (figures are the benchmark's business, not asserted here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[3]


def _bench(cache: Path, *args: str) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "benchmarks.bench_cycle", "--nodes", "30", "--days", "3"]
    cmd += ["--cycles", "3", "--cache", str(cache), "--json", "--timeout", "600", *args]
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


@pytest.mark.slow
def test_the_cycle_benchmark_runs_both_ways_with_pods_churning(tmp_path: Path) -> None:
    for mode in ("long-lived", "per-cycle"):
        report = _bench(tmp_path, "--processes", mode, "--pod-churn")
        assert report["processes"] == mode and report["pod_churn"] is True
        assert report["equal_every_cycle"] is True
        cycles = report["per_cycle"]
        assert len(cycles) == 3 and all(all(c["equal"].values()) for c in cycles)
        assert sum(c["rows_appended"].get("pods", 0) for c in cycles) > 0
        why = [c["incremental"]["detail"]["features"]["why"] for c in cycles]
        assert why == ["no state", "inputs unchanged", "a new bucket end"]
        for c in cycles:
            assert set(c["incremental"]["stages"]) == {
                "cutoff",
                "features",
                "score",
                "forecast",
                "plan",
            }
