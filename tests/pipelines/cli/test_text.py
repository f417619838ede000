"""The CLI's text rendering: numbers as numbers, records as tables, no Python reprs."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

from click.testing import CliRunner

from predops.pipelines.cli.main import main
from predops.pipelines.cli.text import plan_summary, render, scalar


def test_scalars_read_as_numbers_and_times() -> None:
    assert scalar(864.0) == "864"
    assert scalar(0.123456) == "0.1235"
    assert scalar(1234567.891) == "1,234,567.9"
    assert scalar(float("nan")) == "-"
    assert scalar(None) == "-"
    assert scalar(True) == "yes"
    east = timezone(timedelta(hours=2))
    assert scalar(datetime(2026, 1, 1, 2, 0, tzinfo=east)) == "2026-01-01T00:00:00Z"


def test_nested_mappings_indent_and_records_align() -> None:
    text = render(
        {
            "jobs": {"pipeline": {"cron": "*/15 * * * *", "enabled": True}},
            "rows": [{"pool": "a100", "nodes": 12.0}, {"pool": "cpu", "nodes": 3, "note": None}],
            "empty": [],
            "ids": ["n1", "n2"],
        }
    )
    assert text.splitlines() == [
        "jobs:",
        "  pipeline:",
        "    cron: */15 * * * *",
        "    enabled: yes",
        "rows:",
        "  pool  nodes  note",
        "  a100  12     -",
        "  cpu   3      -",
        "empty: (none)",
        "ids: n1, n2",
    ]


def test_schedule_check_prints_no_python_reprs(tmp_path: Path) -> None:
    out = CliRunner().invoke(main, ["--workspace", str(tmp_path), "schedule", "check"])
    assert out.exit_code == 0, out.output
    assert "{'" not in out.stdout and "': " not in out.stdout, out.stdout
    assert "  pipeline:" in out.stdout and "    cron: " in out.stdout
    assert "budgets:" in out.stdout


def test_apply_text_names_parameters_and_the_actions_reason() -> None:
    from predops.pipelines.cli.plan import _human_apply

    text = _human_apply(
        {
            "plan_id": "p1",
            "mode": "dry_run",
            "state": "the lake",
            "counts": {"would_run": 1, "dropped": 1},
            "actions": [
                {
                    "outcome": "would_run",
                    "kind": "resize_pool",
                    "target": "training",
                    "reason": "",
                    "detail": "dry-run: re-validated, nothing touched",
                    "why": "p90 demand 41 nodes over 30 min exceeds 38",
                    "params": {"from_nodes": 38, "to_nodes": 41.0},
                },
                {
                    "outcome": "dropped",
                    "kind": "drain",
                    "target": "node-7",
                    "reason": "stale_risk",
                    "detail": "risk is 3 h old",
                    "why": "p_fail 0.31 over 24 h",
                    "params": {},
                },
            ],
        }
    )
    lines = text.splitlines()
    assert lines[0] == "p1 (dry_run, state from the lake): 1 dropped, 1 would_run"
    assert "from_nodes=38 to_nodes=41" in lines[1]
    assert lines[2].strip() == "why: p90 demand 41 nodes over 30 min exceeds 38"
    assert lines[-1].strip() == "result: [stale_risk]: risk is 3 h old"


def test_a_plan_summary_reads_as_words() -> None:
    summary = {
        "actions": {"buy": 6, "resize_pool": 3},
        "skips": {"drain:below_threshold": 1195, "drain:under_repair": 5},
        "alerts": 1,
    }
    assert plan_summary(summary) == (
        "9 actions (buy 6, resize_pool 3); 1,200 skips (drain below_threshold 1195, "
        "drain under_repair 5); 1 alert"
    )
    assert plan_summary({}) == "0 actions; 0 skips; 0 alerts"
