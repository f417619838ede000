"""``lightgbm_env``: OpenMP's thread count from the cgroup's CPU limit, its wait policy
left to OpenMP, and whatever the environment already says kept."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from predops.pipelines.cli.support import cgroup_cpu_limit, lightgbm_env


def v2(tmp_path: Path, text: str) -> Path:
    (tmp_path / "cpu.max").write_text(text)
    return tmp_path


def v1(tmp_path: Path, quota: str, period: str = "100000") -> Path:
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text(quota + "\n")
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text(period + "\n")
    return tmp_path


@pytest.mark.parametrize(
    ("text", "cpus"),
    [
        ("max 100000\n", None),
        ("200000 100000\n", 2),
        ("150000 100000\n", 2),  # 1.5 CPUs: two threads, never a share left idle
        ("50000 100000\n", 1),
        ("1000 100000\n", 1),
        ("0 100000\n", None),
        ("200000 0\n", None),
        ("two 100000\n", None),
        ("\n", None),
    ],
)
def test_cgroup_v2_limit(tmp_path: Path, text: str, cpus: int | None) -> None:
    assert cgroup_cpu_limit(v2(tmp_path, text)) == cpus


@pytest.mark.parametrize(
    ("quota", "period", "cpus"),
    [("-1", "100000", None), ("400000", "100000", 4), ("250000", "100000", 3), ("x", "1", None)],
)
def test_cgroup_v1_limit(tmp_path: Path, quota: str, period: str, cpus: int | None) -> None:
    assert cgroup_cpu_limit(v1(tmp_path, quota, period)) == cpus


def test_no_cgroup_files_is_no_limit(tmp_path: Path) -> None:
    assert cgroup_cpu_limit(tmp_path) is None
    assert cgroup_cpu_limit(tmp_path / "missing") is None


def test_threads_follow_a_limit_below_the_cpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _: set(range(64)))
    lightgbm_env(v2(tmp_path, "200000 100000\n"))
    assert os.environ["OMP_NUM_THREADS"] == "2"
    assert "OMP_WAIT_POLICY" not in os.environ  # libgomp's bounded spin, not passive


def test_a_set_thread_count_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    monkeypatch.setattr(os, "sched_getaffinity", lambda _: set(range(64)))
    lightgbm_env(v2(tmp_path, "200000 100000\n"))
    assert os.environ["OMP_NUM_THREADS"] == "7"


@pytest.mark.parametrize("text", ["max 100000\n", "800000 100000\n", "400000 100000\n"])
def test_no_thread_count_without_a_limit_below_the_cpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _: set(range(4)))
    lightgbm_env(v2(tmp_path, text))
    assert "OMP_NUM_THREADS" not in os.environ


def test_the_cli_sets_threads_before_any_model_loads() -> None:
    # OpenMP reads OMP_NUM_THREADS once, when LightGBM loads: that must wait for the
    # CLI's group callback (lightgbm_env), so importing the CLI may not load LightGBM.
    import subprocess
    import sys

    probe = (
        "import sys, predops.pipelines.cli.main\n"
        "early = [m for m in ('lightgbm',) if m in sys.modules]\n"
        "print(early)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout
