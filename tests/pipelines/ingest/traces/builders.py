"""Helpers for the trace-adapter tests: hand-made files in a publisher's format, and
running an adapter through the CLI (real traces) or ``run.ingest`` (hand-made files)."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import polars as pl
from click.testing import CliRunner

from predops.core.clock import FixedClock
from predops.pipelines.cli.main import main
from predops.pipelines.ingest.registry import IngestOptions, adapter
from predops.pipelines.ingest.run import IngestReport, ingest
from predops.pipelines.workspace.lake import Lake


def write_csv(path: Path, header: Sequence[str], rows: Iterable[Sequence[object]]) -> Path:
    """A CSV file (gzipped when the name ends in .gz), parents created."""
    lines = [",".join(header)] + [",".join("" if v is None else str(v) for v in r) for r in rows]
    data = ("\n".join(lines) + "\n").encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)
    return path


def cli(workspace: Path, *args: str) -> dict[str, Any]:
    """``predops --workspace W <args> --json``: the one JSON object it prints."""
    result = CliRunner().invoke(main, ["--workspace", str(workspace), *args, "--json"])
    assert result.exit_code == 0, f"predops {' '.join(args)} failed: {result.output}"
    out: dict[str, Any] = json.loads(result.stdout)
    return out


def cli_ingest(workspace: Path, source: str, path: Path, *options: str) -> dict[str, Any]:
    extra = [a for kv in options for a in ("-o", kv)]
    return cli(workspace, "ingest", source, str(path), *extra)


def run_adapter(
    lake: Lake, clock: FixedClock, source: str, path: Path, **extra: str
) -> IngestReport:
    """The adapter named ``source`` on ``path`` into ``lake``, through ``run.ingest``."""
    mod = adapter(source)
    opts = IngestOptions(clock=clock, extra=extra)
    return ingest(lake, mod.SOURCE, mod.read(str(path), opts), clock=clock, input_name=str(path))


def quarantined(lake: Lake, table: str) -> list[tuple[int, str, str]]:
    """(row, field, reason) of every quarantined row of ``table``, sorted."""
    q = lake.read_quarantine(table)
    return sorted(zip(q["row"].to_list(), q["field"].to_list(), q["reason"].to_list(), strict=True))


def rows(lake: Lake, table: str) -> pl.DataFrame:
    return lake.scan(table).collect()
