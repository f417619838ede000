"""Finding and reading a trace publisher's CSV files, with errors that name the file.

Adapters accept any path in a publisher's format: one file, or a directory searched
recursively. :func:`header` peeks at a file's first line only (cheap even for the
full Backblaze download), so an adapter can refuse a wrong file before anything is
written; :func:`read_table` reads the whole file as text (typing is validation's job)
and checks the columns the format requires.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Collection
from pathlib import Path

import polars as pl

from predops.pipelines.ingest.batch import IngestError
from predops.pipelines.ingest.files import MAX_HEADER_BYTES, input_files, read_csv_text

CSV_SUFFIXES = (".csv", ".csv.gz")


def csv_stem(path: Path) -> str:
    """``machine_usage_day_1.csv.gz`` -> ``machine_usage_day_1``."""
    name = path.name
    for suffix in (".csv.gz", ".csv"):
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return path.stem


def csv_files(path: Path, what: str) -> list[Path]:
    """The ``.csv`` / ``.csv.gz`` files ``path`` names (itself, or those under it)."""
    files = [f for f in input_files(path) if f.name.lower().endswith(CSV_SUFFIXES)]
    if not files:
        raise IngestError(f"{path}: no .csv or .csv.gz files; expected {what}")
    return files


def header(path: Path) -> list[str]:
    """Column names from the first line of a (gzipped) CSV, without reading the rest."""
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    try:
        with opener(path, "rb") as fh:
            line = fh.readline(MAX_HEADER_BYTES + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise IngestError(f"{path}: not a readable file ({exc})") from exc
    if not line.strip():
        raise IngestError(f"{path}: empty file (no header, no rows)")
    if len(line) > MAX_HEADER_BYTES and not line.endswith(b"\n"):
        raise IngestError(
            f"{path}: header line is longer than {MAX_HEADER_BYTES:,} bytes; not a trace CSV"
        )
    try:
        text = line.decode("utf-8-sig").strip()
    except UnicodeDecodeError as exc:
        raise IngestError(f"{path}: header line is not valid UTF-8 ({exc.reason})") from exc
    return [c.strip().strip('"') for c in text.split(",")]


def require_columns(
    columns: Collection[str], required: Collection[str], path: Path, what: str
) -> None:
    """Raise unless every required column is present; the message says what was expected."""
    missing = [c for c in required if c not in columns]
    if missing:
        raise IngestError(
            f"{path}: not {what}: missing column(s) {', '.join(missing)} "
            f"(got {', '.join(columns) or 'none'})"
        )


def read_table(path: Path, required: Collection[str], what: str) -> pl.DataFrame:
    """The whole file as text columns, after the whole-file checks of ``read_csv_text``;
    a row that does not fit the header refuses the file (adapters reshape the frame)."""
    frame = read_csv_text(path, quarantine_ragged=False)
    require_columns(frame.columns, required, path, what)
    return frame
