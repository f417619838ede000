"""The soak (``benchmarks/bench_soak.py``) in miniature: ``predops serve`` on a copy of the served
workspace, the mixed load from a second process for ~15 s, memory sampled every 3 s.

Checks the report's shape and that no request failed; the memory bound itself is the
10-minute benchmark's to judge (15 s says nothing about a leak)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
WARMUP_S, SOAK_S, EVERY_S = 3, 12, 3


@pytest.mark.slow
def test_soak_smoke_serves_every_request_and_samples_memory(served_workspace: Path) -> None:
    cmd = [sys.executable, "-m", "benchmarks.bench_soak", "--workspace"]
    cmd += [str(served_workspace), "--minutes", str(SOAK_S / 60), "--json"]
    cmd += ["--warmup-seconds", str(WARMUP_S), "--sample-seconds", str(EVERY_S)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)

    assert report["benchmark"] == "soak"
    assert report["errors"] == 0, report["error_messages"]
    assert report["server_log_tracebacks"] == 0
    assert report["server_alive_at_end"] is True
    endpoints = report["endpoints"]
    assert set(endpoints) == set(report["settings"]["mix"])
    for name, stats in endpoints.items():
        assert stats["requests"] > 0, name
        assert stats["errors"] == 0, name
        assert 0 < stats["p50_ms"] <= stats["p99_ms"], name
    assert sum(s["requests"] for s in endpoints.values()) == report["requests"]
    scoring = endpoints["score_vector"]["requests"] + endpoints["score_node_id"]["requests"]
    assert scoring > report["requests"] / 2  # the mix is mostly single-node scoring

    windows = report["windows"]
    assert windows[0]["phase"] == "warmup"
    assert [w["phase"] for w in windows[1:]] == ["soak"] * (len(windows) - 1)
    assert windows[-1]["to_s"] == pytest.approx(WARMUP_S + SOAK_S)
    assert sum(w["requests"] for w in windows) == report["requests"]
    assert all(w["requests_per_minute"] > 0 for w in windows)
    assert report["first_vs_last_window"]["first"] == windows[1]

    rss = report["rss"]
    times = [s["t_s"] for s in rss["samples"]]
    assert times == sorted(times) and times[-1] >= WARMUP_S + SOAK_S - 1
    assert len(times) >= 1 + SOAK_S // EVERY_S + 1  # before load, every 3 s, at the end
    assert rss["before_load_mib"] > 0 and rss["start_mib"] <= rss["peak_mib"]
    assert report["rss_growth_mib"] == pytest.approx(rss["end_mib"] - rss["start_mib"], abs=0.11)
    assert report["within_bound"] == (report["rss_growth_mib"] < report["bound_mib"])
