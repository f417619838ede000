"""Inspection outcomes of predops' own drains and cordons, as labels read them.

A node predops drains and whose fault is fixed during the inspection never records a
failure: trained on its own outcomes, a model would learn its true positives as
negatives. So each drain carries the outcome of its inspection (the ``inspections``
table, :data:`core.schemas.INSPECTIONS`), and labels read it
(:func:`features.labels.add_failure_labels`):

- ``fault_found``: the drain counts as the failure it prevented, at the drain time, with
  the cause found; the node is down from the drain to the record (the inspection's end);
- ``no_fault_found``: a negative once the inspection is recorded; the node is out of
  service (unusable rows) from the drain to the record;
- ``unknown`` (or no outcome recorded by the cutoff): censored. A row whose label window covers
  the drain (``t < drained_at <= t + H``) is left out of training (label null), not
  counted as a negative, unless a failure inside the window before it makes it positive.

Point in time: the outcome of a drain at a label cutoff is its latest record at or
before the cutoff (:func:`outcomes_as_of`); a drain whose outcome is recorded after the
cutoff is still unknown then.
"""

from __future__ import annotations

from datetime import datetime

import polars as pl

from predops.core.schemas import EVENTS, INSPECTIONS, UTC_TS

NODE = "node_id"
FOUND, NOT_FOUND, UNKNOWN = "fault_found", "no_fault_found", "unknown"


def outcomes_as_of(inspections: pl.LazyFrame, cutoff: datetime) -> pl.LazyFrame:
    """One row per drain (node_id, drained_at) at or before ``cutoff``: the outcome,
    cause and ``recorded_at`` of its latest record at or before ``cutoff``. A drain
    whose only records are later is ``unknown`` then, recorded at the drain (the later
    record's time is not known at the cutoff either)."""
    cut = pl.lit(cutoff, dtype=UTC_TS)
    known = pl.col("recorded_at") <= cut
    return (
        inspections.filter(pl.col("drained_at") <= cut)
        .with_columns(
            pl.when(known).then(pl.col("outcome")).otherwise(pl.lit(UNKNOWN)).alias("outcome"),
            pl.when(known).then(pl.col("cause")).otherwise(None).alias("cause"),
            pl.when(known)
            .then(pl.col("recorded_at"))
            .otherwise(pl.col("drained_at"))
            .alias("recorded_at"),
            known.alias("__known"),
        )
        .sort(NODE, "drained_at", "__known", "recorded_at")
        .group_by(NODE, "drained_at", maintain_order=True)
        .agg(pl.col("outcome").last(), pl.col("cause").last(), pl.col("recorded_at").last())
    )


def found_failures(outcomes: pl.LazyFrame) -> pl.LazyFrame:
    """EVENTS rows for the drains whose fault was found: a ``failure`` at the drain time
    with the cause found (``unknown`` when none was given) and a ``repair`` at the
    record."""
    found = outcomes.filter(pl.col("outcome") == FOUND)
    cause = pl.col("cause").fill_null("unknown")
    rows = [
        found.select(
            NODE,
            pl.lit(kind).alias("kind"),
            pl.col(at).alias("at"),
            cause.alias("cause"),
            pl.lit(detail).alias("detail"),
        )
        for kind, at, detail in (
            ("failure", "drained_at", "inspection after a predops drain: fault found"),
            ("repair", "recorded_at", "inspection after a predops drain: fault fixed"),
        )
    ]
    return pl.concat(rows).cast(dict(EVENTS.polars_schema()))  # type: ignore[arg-type]


def censored_drains(outcomes: pl.LazyFrame) -> pl.LazyFrame:
    """node_id, ``__censor_at``: the drains whose outcome is still unknown."""
    return outcomes.filter(pl.col("outcome") == UNKNOWN).select(
        NODE, pl.col("drained_at").alias("__censor_at")
    )


def empty_inspections() -> pl.LazyFrame:
    return INSPECTIONS.empty().lazy()
