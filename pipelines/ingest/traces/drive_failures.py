"""Backblaze failure flags -> ``events`` rows (kind ``failure``, cause ``disk``).

Both Backblaze formats mark a drive's failure with a 0/1 flag on its last record
(``failure`` in the daily files, ``fails`` in the hds table). A flag of 1 becomes a
failure event; 0 becomes nothing. Any other flag value (text, 2, empty) is not a
silent "no failure": it becomes an event whose kind names the flag value, which the
events contract refuses, so the row is quarantined with that value in the reason.

The events batch holds only the flagged rows, so its row numbers do not point back
at the input file; ``detail`` says ``<file name> row <n>`` (1-based data row) instead.
"""

from __future__ import annotations

import polars as pl

INPUT_ROW = "__input_row__"
"""Column with the 1-based data row number of the input file (added by the adapter)."""


def with_input_row(raw: pl.DataFrame) -> pl.DataFrame:
    """``raw`` with its 1-based data row number, before any filtering."""
    return raw.with_row_index(INPUT_ROW, offset=1)


def failure_events(
    raw: pl.DataFrame, *, flag: str, node: str, at: pl.Expr, file_name: str
) -> pl.DataFrame:
    """Events-contract rows (text typed) for the rows of ``raw`` whose ``flag`` is not 0.

    ``raw`` carries :data:`INPUT_ROW`; ``at`` gives the failure time (text or datetime
    expression evaluated on ``raw``).
    """
    text = pl.col(flag).cast(pl.String).str.strip_chars()
    v = text.cast(pl.Float64, strict=False)
    flagged = raw.filter(v.is_null() | (v != 0))
    kind = (
        pl.when(v == 1)
        .then(pl.lit("failure"))
        .otherwise(pl.format("unreadable failure flag '{}'", text.fill_null("")))
    )
    return flagged.select(
        pl.col(node).alias("node_id"),
        kind.alias("kind"),
        at.alias("at"),
        pl.lit("disk").alias("cause"),
        pl.format("{} row {}", pl.lit(file_name), pl.col(INPUT_ROW)).alias("detail"),
    )
