"""Failure labels: "node fails within H" for several horizons.

The label of a row at ``t`` looks only at failures strictly after ``t`` (and at or before
``t + H``); it is null (unknown, not 0) when ``t + H`` lies beyond the label cutoff and
no failure was seen before it. Rows where the node is already down (a failure without a
later repair at or before ``t``) or in a maintenance window are marked unusable: a node
is never counted as failing while it is already down.

With the ``inspections`` of predops' own drains (:mod:`features.inspections`), a drain
whose fault was found is the failure it prevented, a row whose window covers a drain of
unknown outcome is censored (null), and a node under inspection is unusable.

Which ``failure`` / ``repair`` events count is one declared label source
(:func:`select_label_events`): the labeller's (``pipelines/jobs/labels.py`` decides
when), else every source's, so the simulator's ground truth and the labeller's events
are never counted together.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import polars as pl

from predops.features.definitions import window_label
from predops.features.inspections import censored_drains, found_failures, outcomes_as_of

NODE = "node_id"


def label_name(h: timedelta) -> str:
    return f"fails_within_{window_label(h)}"


LABEL_KINDS = ("failure", "repair")


def select_label_events(events: pl.LazyFrame, label_source: str | None) -> pl.LazyFrame:
    """Events as features and labels read them, without the ``source`` column: with a
    ``label_source``, ``failure`` and ``repair`` rows only from that source (every other
    kind from every source); without one, every row."""
    if label_source is None:
        return events.drop("source")
    own = pl.col("source") == label_source
    return events.filter(~pl.col("kind").is_in(LABEL_KINDS) | own).drop("source")


def _last(events: pl.LazyFrame, kind: str, name: str) -> pl.LazyFrame:
    return events.filter(pl.col("kind") == kind).select(NODE, pl.col("at").alias(name)).sort(name)


def add_failure_labels(
    rows: pl.LazyFrame,
    events: pl.LazyFrame,
    *,
    horizons: tuple[timedelta, ...],
    label_cutoff: datetime,
    time_col: str = "ts",
    inspections: pl.LazyFrame | None = None,
) -> pl.LazyFrame:
    """Add one Int8 label column per horizon and a boolean ``usable`` column.

    ``events`` are filtered to ``at <= label_cutoff`` here: nothing later can inform a
    label in a frame built as of that cutoff. ``inspections`` (INSPECTIONS rows; None:
    none) are read as of the cutoff too (:func:`~features.inspections.outcomes_as_of`).
    """
    ev = events.filter(pl.col("at") <= label_cutoff).select(NODE, "kind", "at")
    outcomes = None
    if inspections is not None:
        outcomes = outcomes_as_of(inspections, label_cutoff)
        ev = pl.concat([ev, found_failures(outcomes).select(NODE, "kind", "at")])
    out = rows.sort(time_col)
    # The next failure strictly after t (a failure at t is not in the future).
    nxt = _last(ev, "failure", "__next_fail")
    out = out.join_asof(
        nxt,
        left_on=time_col,
        right_on="__next_fail",
        by=NODE,
        strategy="forward",
        allow_exact_matches=False,
        check_sortedness=False,
    )
    cutoff = pl.lit(label_cutoff, dtype=pl.Datetime("us", "UTC"))
    if outcomes is not None:
        # The next drain of unknown outcome strictly after t censors the windows it is in.
        out = out.join_asof(
            censored_drains(outcomes).sort("__censor_at"),
            left_on=time_col,
            right_on="__censor_at",
            by=NODE,
            strategy="forward",
            allow_exact_matches=False,
            check_sortedness=False,
        )
    labels = []
    for h in horizons:
        hit = pl.col("__next_fail").is_not_null() & (pl.col("__next_fail") <= pl.col(time_col) + h)
        known = hit | (pl.col(time_col) + h <= cutoff)
        if outcomes is not None:
            censored = pl.col("__censor_at").is_not_null() & (
                pl.col("__censor_at") <= pl.col(time_col) + h
            )
            known = hit | (known & ~censored)
        labels.append(
            pl.when(hit)
            .then(1)
            .when(known)
            .then(0)
            .otherwise(None)
            .cast(pl.Int8)
            .alias(label_name(h))
        )
    out = out.with_columns(labels)
    for kind, name in (
        ("failure", "__last_fail"),
        ("repair", "__last_repair"),
        ("maintenance_start", "__last_mstart"),
        ("maintenance_end", "__last_mend"),
    ):
        out = out.join_asof(
            _last(ev, kind, name),
            left_on=time_col,
            right_on=name,
            by=NODE,
            strategy="backward",
            check_sortedness=False,
        )
    down = pl.col("__last_fail").is_not_null() & (
        pl.col("__last_repair").is_null() | (pl.col("__last_repair") < pl.col("__last_fail"))
    )
    in_maint = pl.col("__last_mstart").is_not_null() & (
        pl.col("__last_mend").is_null() | (pl.col("__last_mend") < pl.col("__last_mstart"))
    )
    usable = ~down & ~in_maint
    drop = ["__next_fail", "__last_fail", "__last_repair", "__last_mstart", "__last_mend"]
    if outcomes is not None:
        # Out of service from a drain to its inspection's record (whatever the outcome).
        out = out.join_asof(
            outcomes.select(
                NODE,
                pl.col("drained_at").alias("__insp_at"),
                pl.col("recorded_at").alias("__insp_end"),
            ).sort("__insp_at"),
            left_on=time_col,
            right_on="__insp_at",
            by=NODE,
            strategy="backward",
            check_sortedness=False,
        )
        usable = usable & ~(
            pl.col("__insp_end").is_not_null() & (pl.col(time_col) < pl.col("__insp_end"))
        )
        drop += ["__censor_at", "__insp_at", "__insp_end"]
    return out.with_columns(usable.alias("usable")).drop(drop)
