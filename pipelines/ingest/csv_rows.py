"""A CSV file's rows as the CSV quoting rules split them, and the rows that do not fit its
header.

The fast reader (polars) fills a short row with nulls and cannot say where a long one
was, so a cut or ragged line would land silently. :func:`scan_rows` makes one pass with
the standard library's CSV reader (quoted fields may hold newlines and commas) to find
the header and every row whose field count differs from it, with the line it starts
on; :func:`ragged_reason` and :func:`mark_ragged` turn those into quarantine entries.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from predops.core.validation import ROW_DEFECT
from predops.pipelines.ingest.batch import IngestError


@dataclass(frozen=True, slots=True)
class RaggedRow:
    """A data row whose field count differs from the header's."""

    index: int
    """0-based data row (the header is not a row)."""
    line: int
    """1-based line of the file the row starts on."""
    values: tuple[str, ...]
    last: bool
    """The file's last row, with no line end after it (a file cut mid-row)."""


@dataclass(frozen=True, slots=True)
class CsvRows:
    header: tuple[str, ...]
    rows: int
    """Data rows, blank lines included (the fast reader reads each as a row of nulls)."""
    ragged: tuple[RaggedRow, ...]


def scan_rows(path: Path, raw: bytes) -> CsvRows:
    """Header, row count and ragged rows of the UTF-8 CSV ``raw`` (the content of ``path``).

    Raises :class:`IngestError` naming the file and the line where the text is not CSV
    at all (a quoted field that never closes, a stray quote after one).
    """
    text = io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8-sig", newline="")
    reader = csv.reader(text, strict=True)
    line = 1
    ragged: list[RaggedRow] = []
    rows = 0
    try:
        header = tuple(next(reader, []))
        if not header:
            raise IngestError(f"{path}: line 1 is blank; a CSV file starts with its header")
        line = reader.line_num + 1
        for values in reader:
            if len(values) != len(header):
                ragged.append(RaggedRow(rows, line, tuple(values), last=False))
            rows += 1
            line = reader.line_num + 1
    except csv.Error as exc:
        hint = (
            "; a quoted field opened here never closes"
            if "unexpected end of data" in str(exc)
            else ""
        )
        raise IngestError(f"{path}: line {line}: not readable as CSV ({exc}){hint}") from exc
    cut = ragged and ragged[-1].index == rows - 1 and not raw.endswith((b"\n", b"\r"))
    if cut:
        ragged[-1] = RaggedRow(ragged[-1].index, ragged[-1].line, ragged[-1].values, last=True)
    return CsvRows(header, rows, tuple(ragged))


def ragged_reason(row: RaggedRow, width: int) -> str:
    """Why ``row`` is refused, starting with its line: "line 7: 3 fields, header has 5"."""
    n = len(row.values)
    if n == 0:
        return f"line {row.line}: blank line, header has {width} fields"
    counts = f"{n} field{'s' if n != 1 else ''}, header has {width}"
    if row.last and n < width:
        return f"line {row.line}: the file ends mid-row ({counts})"
    return f"line {row.line}: {counts}"


def ragged_field(row: RaggedRow, header: tuple[str, ...]) -> str:
    """Where the row goes wrong: the first column it lacks, or the last one it overfills."""
    n = len(row.values)
    return header[n] if n < len(header) else header[-1]


def ragged_record(row: RaggedRow, header: tuple[str, ...]) -> str:
    """The row's original values as JSON by header name; values beyond the header are
    kept under ``_extra``, so nothing of the line is lost."""
    record: dict[str, object] = {
        name: row.values[i] if i < len(row.values) else None for i, name in enumerate(header)
    }
    if len(row.values) > len(header):
        record["_extra"] = list(row.values[len(header) :])
    return json.dumps(record)


def mark_ragged(frame: pl.DataFrame, rows: CsvRows) -> pl.DataFrame:
    """``frame`` (the fast reader's rows of the same file) with a
    :data:`~predops.core.validation.ROW_DEFECT` column on its ragged rows, so validation
    quarantines them; unchanged when every row fits the header."""
    if not rows.ragged:
        return frame
    index = [r.index for r in rows.ragged]
    width = len(rows.header)

    def at(values: list[str]) -> pl.Expr:
        return pl.int_range(pl.len()).replace_strict(
            index, values, default=None, return_dtype=pl.String
        )

    return frame.with_columns(
        pl.struct(
            field=at([ragged_field(r, rows.header) for r in rows.ragged]),
            reason=at([ragged_reason(r, width) for r in rows.ragged]),
            record=at([ragged_record(r, rows.header) for r in rows.ragged]),
        ).alias(ROW_DEFECT)
    )
