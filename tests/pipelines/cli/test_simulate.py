"""`predops simulate` then `predops lake stats` on the default fleet (the issue's check)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from predops.pipelines.cli.main import main


def test_simulate_then_lake_stats(tmp_path: Path) -> None:
    runner = CliRunner()
    ws = str(tmp_path / "ws")
    sim = runner.invoke(
        main,
        ["--workspace", ws, "simulate", "--nodes", "200", "--days", "14", "--seed", "7", "--json"],
    )
    assert sim.exit_code == 0, sim.output
    summary = json.loads(sim.stdout)
    assert summary["rows_quarantined"] == 0
    assert summary["failures"] > 10
    stats = runner.invoke(main, ["--workspace", ws, "lake", "stats", "--json"])
    assert stats.exit_code == 0, stats.output
    tables = json.loads(stats.stdout)["tables"]
    for name in ("telemetry", "events", "pods", "demand", "inventory", "calendar"):
        assert tables[name]["rows"] > 0, name
        assert tables[name]["quarantined_rows"] == 0, name
        assert tables[name]["sources"] == ["synthetic"]
    assert tables["telemetry"]["rows"] == summary["tables"]["telemetry"]["rows_written"]
    assert tables["telemetry"]["time_min"].startswith("2026-01-05T00:00")
    assert tables["telemetry"]["partitions"] == 14


def test_simulate_rejects_a_bad_interval(tmp_path: Path) -> None:
    res = CliRunner().invoke(
        main, ["--workspace", str(tmp_path), "simulate", "--interval", "5 parsecs", "--json"]
    )
    assert res.exit_code != 0
    assert "5 parsecs" in res.output
