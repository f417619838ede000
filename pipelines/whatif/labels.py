"""What the what-if loop's weekly retrains learn from: the label modes.

A drain that averts a failure leaves no failure record on a real cluster, only its
inspection's outcome. :class:`LabelBook` gives a retrain at a cutoff the events and
inspections of one mode (:data:`LABEL_MODES`), from the world's true failures, which of
them the loop's drains averted, and the loop's inspection records.
"""

from __future__ import annotations

from datetime import datetime

import numpy as np
import polars as pl

from predops.core.schemas import EVENTS, INSPECTIONS
from predops.pipelines.whatif.world import World

LABEL_MODES = ("today", "censoring", "oracle")
"""What the weekly retrains of the ``predictive`` policy learn from
(:class:`LabelBook`): ``today``, a real cluster's failure records (an averted
failure leaves none: the drained and fixed node is a negative); ``censoring``, those
records and the inspections of predops' drains (:mod:`features.inspections`: a fault
found is the failure it prevented, an unknown outcome censors); ``oracle``, the world's
true failures, averted ones included."""

Record = tuple[int, float, str, str | None, float]
"""One inspection record of the loop: node row, drained s, outcome, cause, recorded s."""


class LabelBook:
    """The labels of one mode over one world (module docstring)."""

    def __init__(self, world: World, mode: str) -> None:
        if mode not in LABEL_MODES:
            raise ValueError(f"labels must be one of {LABEL_MODES}, got {mode!r}")
        self.world = world
        self.mode = mode
        self._events: pl.DataFrame | None = None
        self._failures: pl.DataFrame | None = None

    def at(
        self, cutoff: datetime, averted: np.ndarray, records: list[Record]
    ) -> tuple[pl.DataFrame, pl.DataFrame | None]:
        """Events and inspections (None: none) a retrain at ``cutoff`` learns from;
        ``averted`` flags the world's failures the loop's drains averted. Rows after
        the cutoff are the labels' to leave out (:func:`features.labels.add_failure_labels`
        reads as of the cutoff)."""
        if self._events is None:
            self._events = self.world.sim.events()
        if self.mode == "oracle":
            return self._events, None
        if self._failures is None:
            self._failures = failure_rows(self.world)
        other = self._events.filter(~pl.col("kind").is_in(["failure", "repair"]))
        kept = self._failures.filter(~pl.Series(np.repeat(averted, 2)))
        events = pl.concat([other, kept])
        if self.mode == "today":
            return events, None
        return events, inspections_frame(self.world, records)


def _times(world: World, seconds: np.ndarray) -> pl.Series:
    """Seconds from the world's start as UTC timestamps, whole seconds (as the
    simulation's events)."""
    us = world.cfg.start.timestamp() * 1e6 + np.round(seconds) * 1e6
    return pl.Series(np.round(us)).cast(pl.Int64).cast(pl.Datetime("us", "UTC"))


def failure_rows(world: World) -> pl.DataFrame:
    """The world's failures as EVENTS rows, a ``failure`` and its ``repair`` for each
    (rows ``2 i`` and ``2 i + 1``: failure ``i``)."""
    f = world.failures
    names = np.array(world.node_ids, dtype=object)[f.node]
    n = len(f)
    at = np.empty(2 * n)
    at[0::2], at[1::2] = f.at, f.at + f.repair_s
    return pl.DataFrame(
        {
            "node_id": np.repeat(names, 2).tolist(),
            "kind": ["failure", "repair"] * n,
            "at": _times(world, at),
            "cause": np.repeat(np.array(f.cause, dtype=object), 2).tolist(),
            "detail": [None] * (2 * n),
        },
        schema=EVENTS.polars_schema(),
    )


def inspections_frame(world: World, records: list[Record]) -> pl.DataFrame:
    """The loop's inspection records as INSPECTIONS rows."""
    ids = world.node_ids
    return pl.DataFrame(
        {
            "node_id": [ids[r[0]] for r in records],
            "drained_at": _times(world, np.array([r[1] for r in records], dtype=np.float64)),
            "action": ["drain"] * len(records),
            "outcome": [r[2] for r in records],
            "cause": [r[3] for r in records],
            "recorded_at": _times(world, np.array([r[4] for r in records], dtype=np.float64)),
            "detail": [None] * len(records),
        },
        schema=INSPECTIONS.polars_schema(),
    )
