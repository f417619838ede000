"""The window-forecasts benchmark in miniature (``benchmarks/bench_window_forecasts.py``):
both sides answer every history, the ETS means agree to the bit and Theta's weight is
never a worse least-squares fit than statsmodels' (figures are the benchmark's
business, not asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_the_benchmark_compares_the_batched_forecasts_with_statsmodels() -> None:
    cmd = [sys.executable, "-m", "benchmarks.bench_window_forecasts", "--series", "3"]
    cmd += ["--days", "5", "--repeats", "1", "--json"]
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["source"] == "synthetic" and report["series"] == 3 and report["origins"] == 3
    assert report["ets_p50_bit_equal"] == "9/9"
    assert report["ets_band_max_rel_diff"] < 1e-10
    assert report["theta_sse_no_worse_than_statsmodels"] == "9/9"
    assert report["predops_cpu_s"] > 0 and report["peer_cpu_s"] > 0
