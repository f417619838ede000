"""``predops lake compact`` and ``predops lake status``: the lake's maintenance.

``predops lake compact [--table T]... [--dry-run] [--include-current] [--config FILE]
--json`` drops the partitions older than ``[lake.retention]``, compacts the settled day
partitions with many small files and deletes files removed long enough ago
(:mod:`predops.pipelines.workspace.lake_maintenance`); ``predops lake status --json``
lists files, bytes and partitions per table without reading any data.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from predops.core.schemas import SCHEMAS
from predops.pipelines.cli.plan import CONFIG_ENV
from predops.pipelines.cli.support import current_settings, emit, json_option, reports
from predops.pipelines.workspace.clock import SystemClock
from predops.pipelines.workspace.lake import Lake
from predops.pipelines.workspace.lake_maintenance import load_lake_settings, maintain, status

lake_config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar=CONFIG_ENV,
    default=None,
    help=f"predops.toml whose [lake] sets the compaction knobs and [lake.retention] "
    f"(default: ${CONFIG_ENV}, else the documented defaults; PREDOPS_LAKE__* overrides).",
)


@click.command("compact")
@click.option(
    "--table",
    "tables",
    multiple=True,
    type=click.Choice(sorted(SCHEMAS)),
    help="Only this table (repeatable). Default: every table.",
)
@click.option("--dry-run", is_flag=True, help="Report what would be done; change nothing.")
@click.option(
    "--include-current",
    is_flag=True,
    help="Also compact day partitions that may still be written to (today's).",
)
@lake_config_option
@json_option
@reports
def lake_compact(
    tables: tuple[str, ...],
    dry_run: bool,
    include_current: bool,
    config_path: Path | None,
    as_json: bool,
) -> None:
    """Apply retention, compact small part files, delete files removed a while ago."""
    settings = current_settings()
    lake_settings = load_lake_settings(config_path, os.environ)
    report = maintain(
        Lake(settings.lake_dir),
        lake_settings,
        clock=SystemClock(),
        tables=tables or None,
        dry_run=dry_run,
        include_current=include_current,
    )
    emit({"lake": str(settings.lake_dir), **report}, as_json, _human_compact)


def _human_compact(r: dict[str, Any]) -> str:
    verb = "would" if r["dry_run"] else "did"
    n = len(r["dropped"]) + len(r["compacted"])
    lines = [f"lake at {r['lake']}: {verb} change {n} item(s)"]
    for d in r["dropped"]:
        if d.get("partitions"):
            lines.append(
                f"  drop {d['table']}: {len(d['partitions'])} partition(s), {d['files']} files, "
                f"{d['bytes']:,} bytes ({d['status']})"
            )
    for c in r["compacted"]:
        after = f" -> {c['files_after']}" if "files_after" in c else ""
        before = c.get("files_before", 0)
        lines.append(f"  compact {c['partition']}: {before} files{after} ({c['status']})")
    dl = r["deleted"]
    lines.append(f"  deleted {dl['files_deleted']} removed file(s), {dl['bytes_freed']:,} bytes")
    return "\n".join(lines)


@click.command("status")
@lake_config_option
@json_option
@reports
def lake_status(config_path: Path | None, as_json: bool) -> None:
    """Files, bytes and partitions per table; small files; recent maintenance."""
    settings = current_settings()
    report = status(Lake(settings.lake_dir), load_lake_settings(config_path, os.environ))
    emit({"lake": str(settings.lake_dir), **report}, as_json, _human_status)


def _human_status(s: dict[str, Any]) -> str:
    lines = [f"lake at {s['lake']}"]
    if not s["tables"]:
        lines.append("  (empty)")
    for name, t in s["tables"].items():
        keep = f"  retention {t['retention']}" if t["retention"] else ""
        lines.append(
            f"  {name:<15} files {t['files']:>7,}  bytes {t['bytes']:>14,}  "
            f"partitions {t['partitions']:>5}  small {t['small_files']:>6,}  "
            f"{t['first_day']} .. {t['last_day']}{keep}"
        )
    lines.append(
        f"  removed, awaiting deletion: {s['removed_files_on_disk']:,} files, "
        f"{s['removed_bytes_on_disk']:,} bytes"
    )
    return "\n".join(lines)


LAKE_COMMANDS = (lake_compact, lake_status)
