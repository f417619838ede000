"""The eval-against-a-commit benchmark in miniature
(``benchmarks/bench_eval_against_commit.py``): the peer side really runs the named
commit's code from its own worktree (not this checkout's), both sides report what their
eval measured, the same code on the same data measures the same, and the worktree is
gone afterwards (figures are the benchmark's business, not asserted)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=REPO, capture_output=True, text=True, timeout=60, check=True
    ).stdout.strip()


@pytest.mark.skipif(
    shutil.which("git") is None or not (REPO / ".git").exists(),
    reason="needs git and a checkout with its history",
)
def test_the_peer_runs_the_named_commits_code_and_both_sides_report() -> None:
    trees_before = _git("worktree", "list", "--porcelain")
    cmd = [sys.executable, "-m", "benchmarks.bench_eval_against_commit", "--commit", "HEAD"]
    cmd += ["--", "--source", "synthetic", "--days", "3", "--cutoffs", "1"]
    cmd += ["--models", "seasonal_naive_24,seasonal_naive_168"]
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["peer_commit"] == _git("rev-parse", "HEAD")
    peer, ours = report["peer"], report["predops"]
    # The peer imported predops from the temporary worktree; this side from the checkout.
    assert "predops-peer-" in peer["imported_from"]
    assert Path(ours["imported_from"]).resolve().is_relative_to(REPO)
    # The same commit on the same seeded data measures the same.
    assert set(peer["mase"]) == {"seasonal_naive_24", "seasonal_naive_168"}
    assert peer["mase"] == ours["mase"]
    assert peer["cpu_s"] > 0 and ours["cpu_s"] > 0 and report["ratio_cpu"] > 0
    assert _git("worktree", "list", "--porcelain") == trees_before


def test_a_commit_that_is_not_there_is_named() -> None:
    cmd = [sys.executable, "-m", "benchmarks.bench_eval_against_commit"]
    cmd += ["--commit", "no-such-rev-0000", "--", "--source", "synthetic"]
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode != 0
    assert "no-such-rev-0000" in out.stderr


def test_relative_paths_are_made_absolute_in_either_spelling() -> None:
    from benchmarks.bench_eval_against_commit import _absolute_paths

    out = _absolute_paths(["--source", "helios", "--path", "x/y", "--days", "3"])
    assert out[:2] == ["--source", "helios"] and out[4:] == ["--days", "3"]
    assert Path(out[3]).is_absolute() and out[3].endswith("x/y")
    (joined,) = _absolute_paths(["--path=x/y"])
    assert joined.startswith("--path=") and Path(joined.removeprefix("--path=")).is_absolute()
