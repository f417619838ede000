"""The classical-candidates benchmark in miniature (``benchmarks/bench_classical.py``):
the predops side runs with one BLAS thread, the peer with the pools as found, both
estimate the same ETS parameters (figures are the benchmark's business, not asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_the_benchmark_compares_one_blas_thread_with_the_default_pool() -> None:
    cmd = [sys.executable, "-m", "benchmarks.bench_classical", "--series", "2", "--days", "4"]
    cmd += ["--repeats", "1", "--json"]
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["source"] == "synthetic" and report["series"] == 2 and report["hours"] == 96
    assert report["same_ets_params"] is True
    ours, peer = report["predops"]["blas_threads"], report["peer"]["blas_threads"]
    assert ours and set(ours) == {1}
    assert len(peer) == len(ours)
    assert report["predops"]["cpu_s"] > 0 and report["peer"]["cpu_s"] > 0
