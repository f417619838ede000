"""``predops lake compact`` and ``predops lake status``: one JSON object each, the
settings from ``--config`` ``[lake]``, a clear error for a bad one."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from click.testing import CliRunner

from predops.pipelines.cli.main import main
from predops.pipelines.workspace.lake import Lake
from tests.pipelines.workspace.lake_ingests import ingest_every

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def run(ws: Path, *args: str) -> dict:
    res = CliRunner().invoke(main, ["--workspace", str(ws), "lake", *args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def test_status_then_dry_run_then_compact_then_nothing(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ingest_every(
        Lake(ws / "lake"), nodes=2, start=T0, end=T0 + timedelta(days=2), every=timedelta(hours=1)
    )
    cfg = tmp_path / "predops.toml"
    cfg.write_text('[lake]\ncompact_min_files = 4\nkeep_removed = "0s"\n')
    s = run(ws, "status")["tables"]["telemetry"]
    assert (s["files"], s["partitions"], s["small_files"]) == (48, 2, 48)
    dry = run(ws, "compact", "--dry-run", "--config", str(cfg))
    assert [c["files_before"] for c in dry["compacted"]] == [24, 24] and dry["changed"] == 0
    assert run(ws, "status")["tables"]["telemetry"]["files"] == 48
    done = run(ws, "compact", "--table", "telemetry", "--config", str(cfg))
    assert done["changed"] == 2 and done["deleted"]["files_deleted"] == 48
    st = run(ws, "status")
    assert st["tables"]["telemetry"]["files"] == 2 and st["removed_files_on_disk"] == 0
    assert [m["action"] for m in st["recent_maintenance"]] == ["compact", "compact"]
    assert run(ws, "compact", "--config", str(cfg))["changed"] == 0


def test_a_bad_setting_is_named(tmp_path: Path) -> None:
    cfg = tmp_path / "predops.toml"
    cfg.write_text('[lake.retention]\ntelemetry = "soon"\n')
    res = CliRunner().invoke(
        main, ["--workspace", str(tmp_path / "ws"), "lake", "compact", "--config", str(cfg)]
    )
    assert res.exit_code != 0
    assert "[lake.retention] telemetry" in res.output
