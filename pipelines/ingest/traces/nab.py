"""Numenta Anomaly Benchmark (NAB) series -> ``series``, labelled windows -> ``anomaly_windows``.

``predops ingest nab PATH``: PATH is the NAB root (holding ``data/`` and ``labels/``),
its ``data/`` folder, one category folder (``data/realKnownCause``) or one series CSV
(``timestamp,value``). Options: ``-o labels=FILE_OR_DIR`` points at
``combined_windows.json`` (or the ``labels/`` folder holding it).

Mapping (choices):

- ``series``: ``series_id`` = ``<category>/<file stem>`` where the category is the
  CSV's parent folder, exactly NAB's own key without ``.csv`` (so
  ``realKnownCause/nyc_taxi``); ``value`` as published (its unit depends on the series:
  CPU %, bytes, request counts, °F, taxi passengers per 30 min).
- **Time zone.** NAB timestamps are naive local times of the original systems (zone
  not published); they are read as UTC. Series keep their own spacing (mostly 5 min).
  The local clock shows: ``ec2_disk_write_bytes_1ef3de`` stamps 12 readings
  ``2014-03-09 03:00:00`` (the US daylight-saving jump); the first is kept and the 11
  repeats are quarantined as duplicate keys.
- ``anomaly_windows``: when the labels file is reachable (``-o labels=``, or a
  ``labels/combined_windows.json`` in PATH or one of its parent folders, which is how
  the NAB tree is laid out), one row per ``[start, end]`` window of each series being
  ingested; windows of series not in this input are left out. The windows batch
  numbers rows in the labels file's order (series by series). Point labels
  (``combined_labels.json``) are not kept: NAB scores detections against windows.

Two files that would share a ``series_id`` are refused before anything is written.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl

from predops.pipelines.ingest.batch import Batch, IngestError
from predops.pipelines.ingest.options import IngestOptions
from predops.pipelines.ingest.traces.publisher_files import (
    csv_files,
    csv_stem,
    header,
    read_table,
    require_columns,
)

SOURCE = "nab"
HELP = "Numenta Anomaly Benchmark series (+ anomaly windows when labels are reachable)"
REQUIRED = ("timestamp", "value")
WHAT = "a NAB series CSV (timestamp, value)"
WINDOWS_FILE = "combined_windows.json"
DEFAULT_CATEGORY = "nab"

log = logging.getLogger(__name__)


def series_id(path: Path) -> str:
    """``.../realKnownCause/nyc_taxi.csv`` -> ``realKnownCause/nyc_taxi``."""
    return f"{path.parent.name or DEFAULT_CATEGORY}/{csv_stem(path)}"


def data_dir(path: Path) -> Path:
    """The folder holding the series: ``data/`` when PATH is a NAB root."""
    if path.is_dir() and (path / "data").is_dir():
        return path / "data"
    return path


def find_windows(path: Path, options: IngestOptions) -> Path | None:
    """The ``combined_windows.json`` to use, or None when none is reachable."""
    given = options.extra.get("labels")
    if given is not None:
        p = Path(given)
        if p.is_dir():
            p = p / WINDOWS_FILE
        if not p.is_file():
            raise IngestError(f"{p}: labels file not found (expected NAB's {WINDOWS_FILE})")
        return p
    start = path if path.is_dir() else path.parent
    for folder in (start, *start.parents):
        candidate = folder / "labels" / WINDOWS_FILE
        if candidate.is_file():
            return candidate
    return None


def read_windows(path: Path) -> dict[str, list[tuple[str, str]]]:
    """NAB's windows file as ``{series_id: [(start, end), ...]}`` (times as text)."""
    try:
        doc: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise IngestError(f"{path}: not a readable JSON file ({exc})") from exc
    if not isinstance(doc, dict):
        raise IngestError(
            f"{path}: expected an object mapping '<category>/<file>.csv' to "
            "a list of [start, end] windows"
        )
    out: dict[str, list[tuple[str, str]]] = {}
    for key, windows in doc.items():
        ok = isinstance(windows, list) and all(
            isinstance(w, list) and len(w) == 2 and all(isinstance(t, str) for t in w)
            for w in windows
        )
        if not ok:
            raise IngestError(
                f"{path}: entry {key!r} is not a list of [start, end] pairs of time strings"
            )
        out[series_id(Path(key))] = [(w[0], w[1]) for w in windows]
    return out


def windows_frame(windows: dict[str, list[tuple[str, str]]], wanted: list[str]) -> pl.DataFrame:
    keep = set(wanted)
    rows = [(sid, s, e) for sid, ws in windows.items() if sid in keep for s, e in ws]
    schema = {"series_id": pl.String, "starts_at": pl.String, "ends_at": pl.String}
    return pl.DataFrame(rows, schema=schema, orient="row")


def read(path: str, options: IngestOptions) -> Iterator[Batch]:
    root = Path(path)
    files = csv_files(data_dir(root), WHAT)
    by_id: dict[str, Path] = {}
    for f in files:
        require_columns(header(f), REQUIRED, f, WHAT)
        sid = series_id(f)
        if sid in by_id:
            raise IngestError(
                f"{f}: series id {sid!r} is also that of {by_id[sid]}; "
                "ingest them separately (series ids are <folder>/<file stem>)"
            )
        by_id[sid] = f
    windows_path = find_windows(root, options)
    windows = read_windows(windows_path) if windows_path is not None else None
    for sid, f in by_id.items():
        raw = read_table(f, REQUIRED, WHAT)
        yield Batch(
            "series",
            raw.select(
                pl.lit(sid).alias("series_id"), pl.col("timestamp").alias("ts"), pl.col("value")
            ),
        )
    if windows is None:
        log.warning(
            "%s: no labels/%s found; anomaly windows not ingested (give -o labels=PATH)",
            root,
            WINDOWS_FILE,
        )
        return
    frame = windows_frame(windows, list(by_id))
    if frame.height:
        yield Batch("anomaly_windows", frame)
