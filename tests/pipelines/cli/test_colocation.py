"""``predops eval colocation`` on a small fixture in the Azure V1 layout, and once on
the real trace when it is beside the repo."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from predops.pipelines.cli.main import main
from tests.conftest import SHARED_DATA

METHODS = {"predops", "koordinator", "nsigma", "crane", "trailing_max"}


def _azure_like(folder: Path, vms: int, days: int, seed: int) -> Path:
    """``tiny_avg_N`` / ``tiny_max_N`` wide CSVs: daily cycles, noise, bursts."""
    rng = np.random.default_rng(seed)
    b = days * 288
    t = np.arange(b)
    avg = np.empty((b, vms))
    for v in range(vms):
        level = 5 + 10 * v + 8 * (1 + np.sin(2 * np.pi * (t / 288 + v / vms)))
        avg[:, v] = np.clip(level + rng.gamma(2.0, 1.5, b), 0, 100)
    mx = np.clip(avg * (1.2 + 0.3 * rng.random((b, vms))), 0, 100)
    folder.mkdir(parents=True, exist_ok=True)
    for stat, m in (("avg", avg), ("max", mx)):
        head = "step_5min," + ",".join(str(1000 + v) for v in range(vms))
        rows = [f"{i}," + ",".join(f"{x:.4f}" for x in m[i]) for i in range(b)]
        (folder / f"tiny_{stat}_{vms}.csv").write_text("\n".join([head, *rows]) + "\n")
    return folder


def _run(*args: str) -> dict:  # type: ignore[type-arg]
    res = CliRunner().invoke(main, ["eval", "colocation", *args, "--json"])
    assert res.exit_code == 0, res.output
    out: dict = json.loads(res.output)  # type: ignore[type-arg]
    return out


def _check(r: dict) -> None:  # type: ignore[type-arg]
    assert set(r["test"]) == METHODS
    for m in r["test"].values():
        v = [p["violation_rate"] for p in m["curve"]]
        s = [p["reclaimed_share"] for p in m["curve"]]
        assert all(0 <= x <= 1 for x in v + s)
        assert v == sorted(v) and s == sorted(s)  # knob from most to least cautious
        at = [m["at"][k]["reclaimed_share"] for k in ("0.001", "0.01", "0.05")]
        assert at == sorted(at)
    assert 0 < r["oracle"]["reclaimed_share"] < 1 and r["oracle"]["violation_rate"] == 0
    bound = r["oracle"]["bound_at"]
    assert r["oracle"]["reclaimed_share"] <= bound["0.001"] <= bound["0.01"] <= bound["0.05"]
    for k, c in r["comparison"].items():
        assert c["best_baseline"] in METHODS - {"predops"}
        # No method reclaims more than the bound at the same violation rate.
        assert max(m["at"][k]["reclaimed_share"] for m in r["test"].values()) <= c["bound"] + 1e-9
    assert r["bar"]["reachable"] == (r["comparison"]["0.01"]["bound_ratio"] >= 1.2)
    val, test = r["split"]["validation_steps"], r["split"]["test_steps"]
    assert all(v[1] == t[0] for v, t in zip(val, test, strict=True))


def test_fixture_end_to_end(tmp_path: Path) -> None:
    folder = _azure_like(tmp_path / "azure", vms=3, days=11, seed=1)
    r = _run(
        "--source", "azure-vm", "--path", str(folder), "--test-days", "2", "--val-days", "2",
        "--windows", "1", "--n-estimators", "10", "--threads", "1",
    )  # fmt: skip
    _check(r)
    assert r["data"]["families"] == {"tiny_3": {"vms": 3, "of": 3, "steps": 11 * 288}}
    assert r["split"]["test_steps"] == [[9 * 288, 11 * 288]]
    assert r["test"]["predops"]["settings"]["window_hours"] == 1.0
    # A core-hour is one VM's whole CPU for an hour: 3 VMs x 48 h bound the oracle.
    assert 0.5 * 144 < r["oracle"]["reclaimed_core_hours"] < 144
    cover = r["forecaster"]["test_backtest"]["coverage"]
    assert cover["p50"] <= cover["p95"] <= cover["p99"]


def test_bad_inputs_are_named(tmp_path: Path) -> None:
    res = CliRunner().invoke(main, ["eval", "colocation", "--source", "azure-vm"])
    assert res.exit_code != 0 and "--path is required" in res.output
    folder = _azure_like(tmp_path / "bad", vms=2, days=2, seed=2)
    f = folder / "tiny_avg_2.csv"
    lines = f.read_text().splitlines()
    lines[5] = "4,oops,1.0"
    f.write_text("\n".join(lines) + "\n")
    res = CliRunner().invoke(
        main, ["eval", "colocation", "--source", "azure-vm", "--path", str(folder)]
    )
    assert res.exit_code != 0
    assert "data row 5, column '1000'" in res.output


AZURE = SHARED_DATA / "azure-v1-vm-cpu"


@pytest.mark.skipif(not AZURE.is_dir(), reason="the Azure V1 VM trace is not beside the repo")
def test_real_trace_subset() -> None:
    """A seeded 4-VM subset per family of the real trace runs through (the figures in
    the README come from the full set)."""
    r = _run(
        "--source", "azure-vm", "--path", str(AZURE), "--subset", "4", "--windows", "1",
        "--n-estimators", "20", "--threads", "1",
    )  # fmt: skip
    _check(r)
    fam = r["data"]["families"]
    assert {k: v["vms"] for k, v in fam.items()} == {"microsoft_100": 4, "periodic_78": 4}
    assert fam["periodic_78"]["of"] == 77  # VM 83972 is listed twice, kept once


def test_synthetic_fleet() -> None:
    r = _run(
        "--source", "synthetic", "--nodes", "6", "--days", "10", "--test-days", "2",
        "--val-days", "2", "--windows", "1", "--n-estimators", "10", "--threads", "1",
    )  # fmt: skip
    _check(r)
    assert r["data"]["synthetic"]["nodes"] == 6
    assert "cores" in r["allocatable"]
