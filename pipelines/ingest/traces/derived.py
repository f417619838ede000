"""Values an adapter computes or range-checks, handed to validation as text.

Validation types text columns and quarantines what it cannot read, naming the row,
the field and the text it could not read. Adapters that *derive* a contract value
(a timestamp from power-on hours, demand = running + pending) or know a bound the
contract cannot express per row (a percentage never exceeds 100, while ``value`` of
other demand series has no upper bound) use that path instead of raising or
silently dropping rows: where the value cannot be derived or is out of range, the
text handed over explains why, e.g. ``(derived from tstart=abc, min_hours=100)`` or
``101 (out of range 0..100 %)``, so the quarantine reason reads
``cannot read 101 (out of range 0..100 %) as Float64`` and the row is kept there.
"""

from __future__ import annotations

import polars as pl

ISO_UTC = "%Y-%m-%dT%H:%M:%S%.6f+00:00"
"""How a derived UTC timestamp is written for validation to read back exactly (µs)."""


def iso_text(ts: pl.Expr) -> pl.Expr:
    """A UTC datetime expression as ISO-8601 text with an explicit offset."""
    return ts.dt.strftime(ISO_UTC)


def number_text(value: pl.Expr) -> pl.Expr:
    """A float expression as text that casts back to the same Float64."""
    return value.cast(pl.Float64).cast(pl.String)


def explained(value_text: pl.Expr, *sources: str) -> pl.Expr:
    """``value_text`` where it is not null, else text naming the source values it was
    to be derived from (which validation cannot read, so it quarantines the row)."""
    named = [
        pl.format("{}={}", pl.lit(c), pl.col(c).cast(pl.String).fill_null("")) for c in sources
    ]
    why = pl.format("(derived from {})", pl.concat_str(named, separator=", "))
    return pl.when(value_text.is_not_null()).then(value_text).otherwise(why)


def within(col: str, low: float, high: float, unit: str) -> pl.Expr:
    """The text of ``col`` where it reads as a number in ``[low, high]`` (or does not read
    as a number at all: validation says so); otherwise the text with the range appended,
    which validation cannot read and so quarantines with the value and range in the
    reason."""
    text = pl.col(col).cast(pl.String)
    v = text.str.strip_chars().cast(pl.Float64, strict=False)
    outside = v.is_not_null() & ~v.is_nan() & ((v < low) | (v > high))
    note = pl.format(
        "{} (out of range {}..{} {})",
        text.str.strip_chars(),
        pl.lit(f"{low:g}"),
        pl.lit(f"{high:g}"),
        pl.lit(unit),
    )
    return pl.when(outside).then(note).otherwise(text)
