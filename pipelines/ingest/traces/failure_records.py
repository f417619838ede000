"""Shared reading of the failure-record traces (Alibaba SSD, LANL, OLCF Alpine, Grid'5000,
OLCF Titan): typed columns from publisher text, with every unreadable row named.

Each adapter lists its :class:`Field`\\ s; :func:`parse_fields` reads the raw text
columns, converts each, and quarantines a row when a required field is empty or any
field holds text that does not convert. A quarantined row is reported as
``<file> row <n> field <column>: '<text>' is not <what>`` (``n`` is the 1-based data
row, the header not counted), never silently dropped or zero-filled. The report keeps
the count and the first :data:`MAX_NAMED` messages (a bounded buffer).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

ROW = "__row"
MAX_NAMED = 20


@dataclass(frozen=True)
class Field:
    """One input column: its output name, how its text converts (an expression on the
    stripped text that is null where the text is unreadable) and what it should be."""

    column: str
    name: str
    parse: Callable[[pl.Expr], pl.Expr]
    what: str
    required: bool = True


@dataclass
class Quarantine:
    """Rows left out of one read, each named (the first ``MAX_NAMED``)."""

    rows: int = 0
    named: list[str] = field(default_factory=list)

    def add(self, messages: Sequence[str], total: int) -> None:
        self.rows += total
        room = MAX_NAMED - len(self.named)
        if room > 0:
            self.named.extend(messages[:room])

    def to_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "named": list(self.named)}


class TraceError(ValueError):
    """The input cannot be read at all (missing file or columns, nothing readable)."""


def integer(e: pl.Expr) -> pl.Expr:
    """Whole numbers, also written as ``12.0`` (LANL writes node counts so)."""
    f = e.cast(pl.Float64, strict=False)
    return pl.when(f == f.round(0)).then(f).otherwise(None).cast(pl.Int64)


def number(e: pl.Expr) -> pl.Expr:
    return e.cast(pl.Float64, strict=False)


def text(e: pl.Expr) -> pl.Expr:
    return pl.when(e.str.len_chars() > 0).then(e).otherwise(None)


def timestamp(fmt: str) -> Callable[[pl.Expr], pl.Expr]:
    """Text in ``fmt`` -> UTC datetime (a naive time is read as UTC; a zone is honoured)."""

    def parse(e: pl.Expr) -> pl.Expr:
        if "%z" in fmt:
            return e.str.to_datetime(fmt, strict=False, time_unit="us").dt.convert_time_zone("UTC")
        return e.str.to_datetime(fmt, strict=False, time_unit="us").dt.replace_time_zone("UTC")

    return parse


def boolean(e: pl.Expr) -> pl.Expr:
    low = e.str.to_lowercase()
    return (
        pl.when(low.is_in(["true", "1", "yes"]))
        .then(True)
        .when(low.is_in(["false", "0", "no"]))
        .then(False)
        .otherwise(None)
    )


def read_text_csv(path: Path, **kwargs: Any) -> pl.DataFrame:
    """Every column as text (gzip or plain), or :class:`TraceError` naming the file."""
    if not path.is_file():
        raise TraceError(f"{path}: no such file")
    try:
        return pl.read_csv(path, infer_schema_length=0, **kwargs)
    except (pl.exceptions.ComputeError, pl.exceptions.NoDataError) as exc:
        raise TraceError(f"{path.name}: not a readable CSV ({exc})") from exc


def parse_fields(
    raw: pl.DataFrame,
    fields: Sequence[Field],
    *,
    file_name: str,
    quarantine: Quarantine,
) -> pl.DataFrame:
    """Typed columns of ``raw`` (all text) per ``fields``; bad rows go to ``quarantine``."""
    missing = sorted({f.column for f in fields} - set(raw.columns))
    if missing:
        raise TraceError(f"{file_name}: missing column(s) {missing}; has {raw.columns}")
    frame = raw.with_row_index(ROW, offset=1).select(
        ROW,
        *[pl.col(f.column).str.strip_chars().alias(f"__t{i}") for i, f in enumerate(fields)],
    )
    typed = frame.with_columns(
        [f.parse(pl.col(f"__t{i}")).alias(f.name) for i, f in enumerate(fields)]
    )
    reasons = []
    for i, f in enumerate(fields):
        t = pl.col(f"__t{i}")
        empty = t.is_null() | (t == "")
        bad = (~empty & pl.col(f.name).is_null()) | (empty & f.required)
        msg = pl.format(
            "{} row {} field {}: '{}' is not {}",
            pl.lit(file_name),
            pl.col(ROW),
            pl.lit(f.column),
            t.fill_null(""),
            pl.lit(f.what),
        )
        reasons.append(pl.when(bad).then(msg).otherwise(None))
    typed = typed.with_columns(pl.coalesce(reasons).alias("__why"))
    bad_rows = typed.filter(pl.col("__why").is_not_null())
    if bad_rows.height:
        quarantine.add(bad_rows["__why"].head(MAX_NAMED).to_list(), bad_rows.height)
    good = typed.filter(pl.col("__why").is_null())
    return good.select(ROW, *[f.name for f in fields])


def files_named(path: Path, name: str) -> Path:
    """``path`` itself when it is a file, else ``path / name``."""
    return path if path.is_file() else path / name


def read_records(f: Path, fields: Sequence[Field], **csv: Any) -> tuple[pl.DataFrame, Quarantine]:
    """:func:`parse_fields` of the CSV ``f``; :class:`TraceError` when no row is readable."""
    q = Quarantine()
    frame = parse_fields(read_text_csv(f, **csv), fields, file_name=f.name, quarantine=q)
    if frame.height == 0:
        raise TraceError(f"{f.name}: no readable failure rows ({q.rows} quarantined)")
    return frame, q
