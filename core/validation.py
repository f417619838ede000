"""Validate an incoming frame against its schema.

Whole-input problems (a missing required column, a column of a type that cannot hold the
contract's values) raise :class:`SchemaError` naming the column. Row problems never
raise: each bad row is returned in ``quarantined`` with the row number, the field and
the reason, and its original values as JSON, so nothing is lost and the good rows still
land.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import polars as pl

from predops.core.schemas import UTC_TS, Column, FrameSchema

ROW = "row"
"""Name of the 1-based input row number column in quarantine frames: the data row (the
header is not counted; a CSV row whose quoted field spans lines counts once), so a
reason that needs the file's line number says it ("line 7: ...")."""
ROW_DEFECT = "__row_defect__"
"""Optional input column a reader adds when it finds rows broken as a whole (a CSV line
with too few or too many fields): a struct of ``field``, ``reason`` and ``record`` (the
row's original values as JSON), null except on such rows, which are quarantined with
it, ahead of any check of their values."""

QUARANTINE_SCHEMA = pl.Schema(
    {"row": pl.Int64(), "field": pl.String(), "reason": pl.String(), "record": pl.String()}
)

_ROW_IDX = "__row__"
_TRUE = ("true", "1")
_FALSE = ("false", "0")
EXACT_FLOAT_INT = 2**53
"""Floats hold every integer only below this magnitude; beyond it 2**53 + 1 reads as
2**53, so an integer column never takes a float (or a float-spelled text) that big."""
EARLIEST_TS = datetime(1990, 1, 1, tzinfo=UTC)
"""Default oldest timestamp accepted in any time column: older ones (year 1, a zero
epoch) are broken values, not history, and would each create a partition."""


class SchemaError(ValueError):
    """The input as a whole does not fit the table's schema (e.g. a missing column)."""


@dataclass(frozen=True, slots=True)
class ValidationResult:
    """Rows that passed (cast to the schema) and rows quarantined with reasons."""

    good: pl.DataFrame
    quarantined: pl.DataFrame
    ignored_columns: tuple[str, ...]


def check_columns(columns: Collection[str], schema: FrameSchema) -> tuple[str, ...]:
    """Raise if a required column is missing; return the columns the schema ignores."""
    present = set(columns)
    missing = [c for c in schema.required if c not in present]
    if missing:
        raise SchemaError(
            f"{schema.name}: missing required column(s) {', '.join(missing)}; "
            f"got {', '.join(sorted(present)) or 'no columns'}"
        )
    return tuple(c for c in columns if not schema.has(c))


def check_types(dtypes: Mapping[str, pl.DataType], schema: FrameSchema) -> None:
    """Raise if a contract column's type cannot hold the contract's values at all.

    Numbers in a time column are refused rather than read: 1772323200 may be seconds,
    milliseconds or microseconds, and a wrong guess lands silently in 1970.
    """
    for name, src in dtypes.items():
        if not schema.has(name):
            continue
        problem = _type_problem(src, schema.column(name).dtype)
        if problem is not None:
            raise SchemaError(f"{schema.name}: column {name} is {src}; {problem}")


def _type_problem(src: pl.DataType, target: pl.DataType) -> str | None:
    if src == target or src == pl.Null:
        return None
    if src.is_nested():
        return f"a nested value cannot be read as {target}"
    if target == UTC_TS and not (src == pl.String or isinstance(src, pl.Datetime | pl.Date)):
        if src.is_numeric():
            return (
                "a number has no time unit (seconds? milliseconds?) and is not guessed; "
                "store the column as a timestamp or ISO-8601 text"
            )
        return "a time column must be a timestamp, a date or ISO-8601 text"
    return None


def _cast_expr(col: Column, src_dtype: pl.DataType) -> pl.Expr:
    """Cast a source column to the schema dtype; unparseable values become null."""
    c = pl.col(col.name)
    target = col.dtype
    if src_dtype == target:
        return c
    if target == UTC_TS:
        if src_dtype == pl.String:
            s = c.str.strip_chars()
            # Each value may use its own ISO-8601 spelling; try them in turn.
            aware = [
                s.str.to_datetime(fmt, time_unit="us", time_zone="UTC", strict=False)
                for fmt in ("%Y-%m-%dT%H:%M:%S%.f%#z", "%Y-%m-%d %H:%M:%S%.f%#z")
            ]
            naive = [
                s.str.to_datetime(fmt, time_unit="us", strict=False).dt.replace_time_zone("UTC")
                for fmt in (
                    "%Y-%m-%dT%H:%M:%S%.f",
                    "%Y-%m-%d %H:%M:%S%.f",
                    "%Y-%m-%dT%H:%M",
                    "%Y-%m-%d %H:%M",
                )
            ]
            day = s.str.to_date("%Y-%m-%d", strict=False).cast(pl.Datetime("us"))
            parsed = pl.coalesce(*aware, *naive, day.dt.replace_time_zone("UTC"))
            return parsed
        if isinstance(src_dtype, pl.Datetime):
            if src_dtype.time_zone is None:
                return c.cast(pl.Datetime("us")).dt.replace_time_zone("UTC")
            return c.dt.convert_time_zone("UTC").cast(UTC_TS)
        if src_dtype == pl.Date:
            return c.cast(pl.Datetime("us")).dt.replace_time_zone("UTC")
        return c.cast(UTC_TS, strict=False)  # all-null: check_types refuses other types
    if target == pl.Boolean:
        # Only true/false (any case) and 1/0: "yes", "t" or 2 are someone's guess.
        if src_dtype == pl.String:
            s = c.str.strip_chars().str.to_lowercase()
            return (
                pl.when(s.is_in(_TRUE)).then(True).when(s.is_in(_FALSE)).then(False).otherwise(None)
            )
        if src_dtype.is_numeric():
            return pl.when(c == 1).then(True).when(c == 0).then(False).otherwise(None)
    if src_dtype == pl.String:
        c = c.str.strip_chars()
        if target.is_integer():
            # Digits are read as an integer directly (a float would round them past
            # 2**53); "12.0" is a fine integer in a CSV, "12.5" is not, and "1e3" goes
            # through a float.
            exact = c.str.replace(r"\.0*$", "").cast(target, strict=False)
            return pl.coalesce(exact, _float_to_int(c.cast(pl.Float64, strict=False), target))
    if target.is_integer() and src_dtype.is_float():
        return _float_to_int(c, target)
    return c.cast(target, strict=False)


def _float_to_int(value: pl.Expr, target: pl.DataType) -> pl.Expr:
    """Whole floats below :data:`EXACT_FLOAT_INT` as ``target``; anything else null."""
    exact = (value == value.round(0)) & (value.abs() < EXACT_FLOAT_INT)
    return pl.when(exact).then(value).otherwise(None).cast(target, strict=False)


def _checks(
    col: Column, src: str, cast: str, src_dtype: pl.DataType, earliest: datetime | None
) -> list[pl.Expr]:
    """Expressions giving a reason string where the row breaks this column's contract."""
    raw = pl.col(src)
    val = pl.col(cast)
    name = col.name
    out: list[pl.Expr] = []
    raw_present = raw.is_not_null()
    if src_dtype == pl.String:
        raw_present = raw_present & (raw.str.strip_chars() != "")
    out.append(
        pl.when(raw_present & val.is_null()).then(
            pl.format("cannot read {} as {}", raw.cast(pl.String), pl.lit(str(col.dtype)))
        )
    )
    if not col.nullable:
        out.append(pl.when(~raw_present).then(pl.lit("missing value")))
    if col.dtype == UTC_TS and earliest is not None:
        out.append(
            pl.when(val < pl.lit(earliest, dtype=UTC_TS)).then(
                pl.format(
                    "timestamp {} is before the earliest accepted {}",
                    val.cast(pl.String),
                    pl.lit(earliest.isoformat()),
                )
            )
        )
    if col.dtype.is_float():
        out.append(pl.when(val.is_nan()).then(pl.lit("NaN is not a value")))
        out.append(pl.when(val.is_infinite()).then(pl.format("{} is not finite", val)))
    if col.low is not None:
        what = "counter" if col.counter else "value"
        out.append(
            pl.when(val < col.low).then(
                pl.format("{} {} below minimum {}", pl.lit(what), val, pl.lit(col.low))
            )
        )
    if col.high is not None:
        out.append(
            pl.when(val > col.high).then(
                pl.format("value {} above maximum {}", val, pl.lit(col.high))
            )
        )
    if col.allowed is not None:
        allowed = sorted(col.allowed)
        out.append(
            pl.when(val.is_not_null() & ~val.is_in(allowed)).then(
                pl.format("{} not one of {}", val, pl.lit("|".join(allowed)))
            )
        )
    return [e.alias(name) for e in out]


def validate(
    frame: pl.DataFrame,
    schema: FrameSchema,
    *,
    now: datetime | None = None,
    future_tolerance: timedelta = timedelta(hours=1),
    earliest: datetime | None = EARLIEST_TS,
    known_entities: Collection[str] | None = None,
    first_row: int = 1,
) -> ValidationResult:
    """Split ``frame`` into rows that satisfy ``schema`` and quarantined rows.

    ``now`` (injected, never read from the wall clock here) rejects timestamps more
    than ``future_tolerance`` ahead; ``earliest`` rejects older timestamps in every time
    column (None: no lower bound); ``known_entities`` rejects rows for entities
    (nodes) the inventory does not know. Rows with a key already seen earlier in the
    same input are quarantined as duplicates. ``first_row`` numbers the first row. Rows a
    reader marked in a :data:`ROW_DEFECT` column are quarantined with the reader's reason.
    """
    ignored = check_columns([c for c in frame.columns if c != ROW_DEFECT], schema)
    check_types(frame.schema, schema)
    n = frame.height
    frame = frame.drop(list(ignored)).with_row_index(_ROW_IDX, offset=first_row)
    src_cols = [c for c in schema.names if c in frame.columns]
    casts: list[pl.Expr] = []
    for col in schema.columns:
        if col.name in frame.columns:
            casts.append(_cast_expr(col, frame.schema[col.name]).alias(f"__v_{col.name}"))
        else:
            casts.append(pl.lit(None, dtype=col.dtype).alias(f"__v_{col.name}"))
    typed = frame.with_columns(casts)

    reasons: list[pl.Expr] = []
    fields: list[pl.Expr] = []
    defect = pl.col(ROW_DEFECT) if ROW_DEFECT in frame.columns else None
    if defect is not None:
        reasons.append(defect.struct.field("reason"))
        fields.append(defect.struct.field("field"))
    for col in schema.columns:
        if col.name not in frame.columns:
            continue
        for e in _checks(col, col.name, f"__v_{col.name}", frame.schema[col.name], earliest):
            reasons.append(e)
            fields.append(pl.when(e.is_not_null()).then(pl.lit(col.name)))
    tcol = pl.col(f"__v_{schema.time_column}")
    if now is not None:
        limit = now + future_tolerance
        reasons.append(
            pl.when(tcol > pl.lit(limit, dtype=UTC_TS)).then(
                pl.format(
                    "timestamp {} is more than {} ahead of ingest time",
                    tcol.cast(pl.String),
                    pl.lit(str(future_tolerance)),
                )
            )
        )
        fields.append(pl.when(tcol > pl.lit(limit, dtype=UTC_TS)).then(pl.lit(schema.time_column)))
    if known_entities is not None and schema.entity_column is not None:
        ent = pl.col(f"__v_{schema.entity_column}")
        unknown = ent.is_not_null() & ~ent.is_in(list(known_entities))
        reasons.append(
            pl.when(unknown).then(
                pl.format("unknown {} {} (not in inventory)", pl.lit(schema.entity_column), ent)
            )
        )
        fields.append(pl.when(unknown).then(pl.lit(schema.entity_column)))

    checked = typed.with_columns(
        pl.coalesce(reasons).alias("__reason")
        if reasons
        else pl.lit(None, pl.String).alias("__reason"),
        pl.coalesce(fields).alias("__field")
        if fields
        else pl.lit(None, pl.String).alias("__field"),
    )
    key_v = [f"__v_{k}" for k in schema.key]
    # Duplicate keys: among otherwise-good rows, the first occurrence wins.
    ok = pl.col("__reason").is_null()
    checked = checked.with_columns(pl.struct(key_v).is_first_distinct().over(ok).alias("__first"))
    dup = ok & ~pl.col("__first")
    checked = checked.with_columns(
        pl.when(dup)
        .then(pl.format("duplicate key ({}) already in this input", pl.lit(", ".join(schema.key))))
        .otherwise(pl.col("__reason"))
        .alias("__reason"),
        pl.when(dup).then(pl.lit(schema.key[0])).otherwise(pl.col("__field")).alias("__field"),
    )
    good = checked.filter(pl.col("__reason").is_null()).select(
        [pl.col(f"__v_{c.name}").alias(c.name) for c in schema.columns]
    )
    bad = checked.filter(pl.col("__reason").is_not_null())
    record = (
        pl.struct([pl.col(c).cast(pl.String) for c in src_cols]).struct.json_encode()
        if src_cols
        else pl.lit("{}")
    )
    if defect is not None:
        record = pl.coalesce(defect.struct.field("record"), record)
    quarantined = bad.select(
        pl.col(_ROW_IDX).cast(pl.Int64).alias("row"),
        pl.col("__field").alias("field"),
        pl.col("__reason").alias("reason"),
        record.alias("record"),
    )
    assert good.height + quarantined.height == n
    return ValidationResult(good=good, quarantined=quarantined, ignored_columns=ignored)
