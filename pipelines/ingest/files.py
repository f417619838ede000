"""Parquet / CSV files already in the contract's columns.

``predops ingest files PATH --table telemetry``: PATH is one file or a directory of
``*.parquet`` / ``*.csv`` / ``*.csv.gz`` files. CSV values are read as text and typed by
validation, so a bad value quarantines its row (named by row number and field) instead
of failing the file. So does a CSV row with fewer or more fields than the header (a
ragged line, or the last line of a file cut mid-row): its reason starts with the line it
is on, since ``row`` counts data rows (a quoted value may span lines).

Whole-file problems (empty, truncated, not UTF-8, absurd header, a column named twice,
a Parquet column of a type that cannot hold the contract's values, such as numbers in a
time column) raise :class:`IngestError` naming the file and the column.
"""

from __future__ import annotations

import gzip
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from predops.core.schemas import SCHEMAS, FrameSchema, schema_for
from predops.core.validation import SchemaError, check_types
from predops.pipelines.ingest.batch import Batch, IngestError
from predops.pipelines.ingest.csv_rows import mark_ragged, ragged_reason, scan_rows
from predops.pipelines.ingest.options import IngestOptions

SOURCE = "files"
HELP = "Parquet/CSV files in the contract's columns (--table names the table)"

MAX_HEADER_BYTES = 1 << 20
"""A CSV header line longer than this is refused (no contract has such a header)."""
MAX_PARQUET_FOOTER_BYTES = 64 << 20
"""Parquet metadata larger than this is refused before it is parsed."""
BATCH_ROWS = 1_000_000


def _suffix(path: Path) -> str:
    name = path.name.lower()
    for s in (".csv.gz", ".parquet", ".pq", ".csv"):
        if name.endswith(s):
            return s
    raise IngestError(f"{path}: unknown file type (expected .parquet, .csv or .csv.gz)")


def input_files(path: Path) -> list[Path]:
    """The files an input path names, with a clear error when there are none."""
    if not path.exists():
        raise IngestError(f"{path}: no such file or directory")
    if path.is_file():
        return [path]
    files = sorted(
        p
        for p in path.rglob("*")
        if p.is_file() and p.name.lower().endswith((".parquet", ".pq", ".csv", ".csv.gz"))
    )
    if not files:
        raise IngestError(f"{path}: directory holds no .parquet / .csv / .csv.gz files")
    return files


def _csv_bytes(path: Path) -> bytes:
    raw = path.read_bytes()
    if path.name.lower().endswith(".gz"):
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise IngestError(f"{path}: not a readable gzip file ({exc})") from exc
    return raw


def read_csv_text(path: Path, *, quarantine_ragged: bool = True) -> pl.DataFrame:
    """A CSV file as a frame of text columns, after whole-file checks.

    A row with fewer or more fields than the header (a ragged line, a file cut mid-row)
    is marked to be quarantined with its line number; with ``quarantine_ragged=False``
    (for adapters that reshape the frame, and so would drop the mark) it refuses the
    file, naming the line.
    """
    raw = _csv_bytes(path)
    if not raw.strip():
        raise IngestError(f"{path}: empty file (no header, no rows)")
    newline = raw.find(b"\n")
    header_len = len(raw) if newline < 0 else newline
    if header_len > MAX_HEADER_BYTES:
        raise IngestError(
            f"{path}: header line is {header_len:,} bytes (limit {MAX_HEADER_BYTES:,}); "
            "not a contract CSV"
        )
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise IngestError(
            f"{path}: line {line} (byte {exc.start}) is not valid UTF-8; "
            "re-encode the file as UTF-8"
        ) from exc
    rows = scan_rows(path, raw)
    check_unique_columns(path, rows.header)
    if rows.ragged and not quarantine_ragged:
        more = len(rows.ragged) - 1
        raise IngestError(
            f"{path}: {ragged_reason(rows.ragged[0], len(rows.header))}"
            + (f" (and {more:,} more rows that do not fit the header)" if more else "")
        )
    try:
        frame = pl.read_csv(
            raw, infer_schema=False, raise_if_empty=False, truncate_ragged_lines=True
        )
    except pl.exceptions.PolarsError as exc:
        raise IngestError(f"{path}: not a readable CSV file ({exc})") from exc
    if frame.height != rows.rows:
        raise IngestError(
            f"{path}: rows split two ways ({rows.rows:,} by CSV quoting rules, "
            f"{frame.height:,} by the fast reader); look for a bare carriage return or a "
            "stray quote"
        )
    return mark_ragged(frame, rows)


def check_unique_columns(path: Path, names: Iterable[str]) -> None:
    """Refuse a file that names a column more than once (which copy would be the value?)."""
    repeated = [(n, k) for n, k in Counter(names).items() if k > 1]
    if repeated:
        name, times = repeated[0]
        raise IngestError(
            f"{path}: column {name!r} appears {times} times; each column must be named once"
        )


def check_parquet(path: Path) -> None:
    """Refuse truncated files, oversized footers and repeated column names before handing
    the file to a reader."""
    size = path.stat().st_size
    if size == 0:
        raise IngestError(f"{path}: empty file")
    with open(path, "rb") as fh:
        head = fh.read(4)
        if size < 12 or head != b"PAR1":
            raise IngestError(f"{path}: not a Parquet file (bad magic bytes or too short)")
        fh.seek(size - 8)
        tail = fh.read(8)
    if tail[4:] != b"PAR1":
        raise IngestError(f"{path}: truncated Parquet file (no footer magic at the end)")
    footer_len = int.from_bytes(tail[:4], "little")
    if footer_len > min(size - 12, MAX_PARQUET_FOOTER_BYTES):
        raise IngestError(
            f"{path}: Parquet footer claims {footer_len:,} bytes of metadata in a "
            f"{size:,}-byte file; refusing to read it"
        )
    try:
        names = pq.read_schema(path).names
    except (OSError, ValueError) as exc:
        raise IngestError(f"{path}: not a readable Parquet file ({exc})") from exc
    check_unique_columns(path, names)


def check_parquet_types(path: Path, arrow_schema: pa.Schema, schema: FrameSchema) -> None:
    """Refuse a file whose contract columns have types that cannot hold the contract's
    values (numbers in a time column, lists, structs), naming the file and the column."""
    try:
        empty = pl.from_arrow(arrow_schema.empty_table())
    except pl.exceptions.PolarsError as exc:
        raise IngestError(f"{path}: column types polars cannot read ({exc})") from exc
    assert isinstance(empty, pl.DataFrame)
    try:
        check_types(empty.schema, schema)
    except SchemaError as exc:
        raise IngestError(f"{path}: {exc}") from exc


def read_parquet_batches(path: Path, table: str) -> Iterator[Batch]:
    check_parquet(path)
    try:
        pf = pq.ParquetFile(path)
    except (OSError, ValueError) as exc:
        raise IngestError(f"{path}: not a readable Parquet file ({exc})") from exc
    check_parquet_types(path, pf.schema_arrow, schema_for(table))
    try:
        first = 1
        for rb in pf.iter_batches(batch_size=BATCH_ROWS):
            frame = pl.from_arrow(rb)
            assert isinstance(frame, pl.DataFrame)
            yield Batch(table, frame, first_row=first)
            first += frame.height
    except (OSError, ValueError) as exc:
        raise IngestError(f"{path}: not a readable Parquet file ({exc})") from exc


def read(path: str, options: IngestOptions) -> Iterator[Batch]:
    table = options.table
    if table is None:
        raise IngestError(
            "files: say which table the files hold with --table; tables: "
            + ", ".join(sorted(SCHEMAS))
        )
    if table not in SCHEMAS:
        raise IngestError(f"files: unknown table {table!r}; known: {', '.join(sorted(SCHEMAS))}")
    files = input_files(Path(path))
    # Cheap whole-file checks of every file first, so a folder with a broken file fails
    # at once; whatever fails later (a bad row group) still rolls the whole ingest back,
    # because one ingest is one lake commit.
    for f in files:
        if _suffix(f) in (".parquet", ".pq"):
            check_parquet(f)
            try:
                arrow_schema = pq.read_schema(f)
            except (OSError, ValueError) as exc:
                raise IngestError(f"{f}: not a readable Parquet file ({exc})") from exc
            check_parquet_types(f, arrow_schema, schema_for(table))
    folder = Path(path).is_dir()  # then each batch names its own file
    for f in files:
        origin = str(f) if folder else None
        if _suffix(f) in (".parquet", ".pq"):
            for batch in read_parquet_batches(f, table):
                yield replace(batch, origin=origin)
        else:
            yield Batch(table, read_csv_text(f), origin=origin)
