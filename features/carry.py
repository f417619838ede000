"""The online window's buckets carried from one bucket end to the next.

The latest node features at bucket end ``E`` read the buckets of the telemetry in
``(E - reach - bucket, E]`` (``online_window_start``): about 97 buckets per node, 970,000
rows for 10,000 nodes, re-aggregated from three million samples at every bucket end.
Yet a complete bucket, once aggregated, changes only when a sample lands in it late. So
the incremental cycle keeps the complete buckets and, at the next bucket end ``E'``,
aggregates only the samples after the last kept bucket end, then assembles the window
``(E' - reach - bucket, E']`` from both. The result is the very frame
:func:`~features.node.bucket_telemetry` gives over that window, value for value
(``tests/features/test_carry.py``), because:

- a bucket's moments, counts, maxima and last values depend on its own samples alone;
- a counter's increase at a sample compares it with the counter's previous non-null
  sample *within the window*; the first one in the window counts none. Its previous
  value (last non-null ``<counter>__last`` among the kept buckets still in the window) is
  put in front of the new samples as a seed row in the last kept bucket (dropped after),
  and a node's first bucket with the counter in the window takes ``<counter>__inc0``
  (the bucket's increase with its own first sample counting none) for ``__inc``.
"""

from __future__ import annotations

from datetime import datetime
from itertools import pairwise

import numpy as np
import polars as pl

from predops.features.definitions import NodeFeatureSpec
from predops.features.node import END, NODE, bucket_aggregations, bucket_rows, bucket_telemetry

PART_ROWS = 1_000_000
"""Samples per part of :func:`exact_buckets` (whole nodes; about 0.5 GB of per-sample
terms with the default metric set)."""


def oldest_end(end: datetime, spec: NodeFeatureSpec) -> datetime:
    """The oldest bucket end in the window of the latest features at bucket end ``end``."""
    return end - max((*spec.windows, *spec.missing_windows))


class InOrder:
    """Sums of runs of rows, ``values[starts[i]:starts[i + 1]]``, added first to last.

    Elementwise additions, one per position in a run: a reduction (numpy's, polars')
    may add in another order depending on where the run lies in memory, and then the
    last bit differs between two arrays holding the same run. The runs' layout is worked
    out once for every column summed."""

    def __init__(self, starts: np.ndarray, size: int) -> None:
        lens = np.diff(np.append(starts, size))
        order = np.argsort(-lens, kind="stable")  # the longest runs first
        neg = -lens[order]  # ascending
        self.starts = starts
        self.steps: list[tuple[np.ndarray, np.ndarray]] = []
        for j in range(1, int(lens.max(initial=1))):
            runs = order[: int(np.searchsorted(neg, -j, side="left"))]  # longer than j
            self.steps.append((runs, starts[runs] + j))

    def sum(self, values: np.ndarray) -> np.ndarray:
        acc: np.ndarray = values[self.starts].astype(np.float64)
        for runs, at in self.steps:
            acc[runs] += values[at]
        return acc


def exact_buckets(
    telemetry: pl.LazyFrame,
    spec: NodeFeatureSpec,
    *,
    cutoff: datetime | None = None,
    first_zero: bool = False,
    part_rows: int = PART_ROWS,
) -> pl.DataFrame:
    """:func:`~features.node.bucket_telemetry`'s frame, each floating-point sum added
    over the bucket's own samples in time order (:class:`InOrder`), so a bucket's
    values are the same in every frame that holds its samples (polars' group sums may
    add a bucket's parts in another order in another frame: the last bit differs). The latest rows
    (``features.frames``, latest only) and the carried buckets both aggregate this way,
    so they are equal value for value.

    Memory: the samples' source columns once, and one part's per-sample terms (whole
    nodes, about ``part_rows`` samples)."""
    aggs = bucket_aggregations(spec, first_zero=first_zero)
    lf = telemetry if cutoff is None else telemetry.filter(pl.col("ts") <= cutoff)
    cols = _source_columns(spec)
    tel = lf.select(cols).sort(NODE, "ts").collect()
    schema = bucket_telemetry(tel.clear().lazy(), spec, first_zero=first_zero).collect_schema()
    if tel.height == 0:
        return pl.DataFrame(schema=schema)
    node_starts = np.flatnonzero(tel[NODE].ne_missing(tel[NODE].shift(1)).fill_null(True))
    bounds = [0]
    for start in node_starts[1:]:
        if start - bounds[-1] >= part_rows:
            bounds.append(int(start))
    bounds.append(tel.height)
    names = [e.meta.output_name() for e, _ in aggs]
    parts = []
    for lo, hi in pairwise(bounds):
        part_tel = tel.slice(lo, hi - lo).lazy()
        rows = bucket_rows(part_tel, spec, first_zero=first_zero, presorted=True).collect()
        key = rows[NODE].ne_missing(rows[NODE].shift(1)) | rows[END].ne_missing(rows[END].shift(1))
        starts = np.flatnonzero(key.fill_null(True).to_numpy())
        runs = InOrder(starts, rows.height)
        columns = _per_run(rows, starts, spec) | {
            e.meta.output_name(): pl.Series(runs.sum(rows[src].fill_null(0.0).to_numpy()))
            for e, src in aggs
            if src is not None
        }
        parts.append(pl.DataFrame([columns[n].alias(n) for n in (NODE, END, *names)]))
        del rows
    return pl.concat(parts).cast(schema)


def _per_run(rows: pl.DataFrame, starts: np.ndarray, spec: NodeFeatureSpec) -> dict[str, pl.Series]:
    """The aggregates that are no floating-point sums (exact in any order), per run of
    rows: as :func:`~features.node.bucket_aggregations` defines them."""
    last = np.append(starts[1:], rows.height) - 1  # rows are in time order within a run

    def count(mask: pl.Series) -> pl.Series:
        return pl.Series(np.add.reduceat(mask.cast(pl.Int64).to_numpy(), starts))

    def last_non_null(col: str) -> pl.Series:
        valid = rows[col].is_not_null().to_numpy()
        at = np.maximum.reduceat(np.where(valid, np.arange(rows.height), -1), starts)
        values = rows[col].cast(pl.Float64).gather(np.maximum(at, 0))
        return pl.Series(np.where(at >= 0, values.to_numpy(), np.nan)).fill_nan(None)

    out = {
        NODE: rows[NODE].gather(starts),
        END: rows[END].gather(starts),
        "n": pl.Series(np.diff(np.append(starts, rows.height))),
        "last_ts": rows["ts"].gather(last),
    }
    for g in spec.gauges:
        x = rows[f"__x_{g}"]
        out[f"{g}__n"] = count(x.is_not_null())
        peak = np.fmax.reduceat(x.fill_null(np.nan).to_numpy(), starts)
        out[f"{g}__max"] = pl.Series(peak).fill_nan(None)
    for c in spec.counters:
        out[f"{c}__last"] = last_non_null(c)
    ready = rows["node_ready"]
    out["ready__n"] = count(ready.is_not_null())
    out["ready__false"] = count(ready.not_().fill_null(False))
    return out


def inc0_columns(spec: NodeFeatureSpec) -> list[str]:
    return [f"{c}__inc0" for c in spec.counters]


def _source_columns(spec: NodeFeatureSpec) -> list[str]:
    return [NODE, "ts", *spec.gauges, *spec.counters, "node_ready"]


def window_buckets(
    telemetry: pl.LazyFrame, spec: NodeFeatureSpec, *, end: datetime, visible: datetime
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The window's buckets from its telemetry (the samples after ``end - reach -
    bucket``), and the complete ones (``<= end``) to keep, with ``__inc0``."""
    start = oldest_end(end, spec) - spec.bucket
    lf = telemetry.filter(pl.col("ts") > start)
    b = exact_buckets(lf, spec, cutoff=visible, first_zero=True)
    return b.drop(inc0_columns(spec)), b.filter(pl.col(END) <= end)


def carry_forward(
    kept: pl.DataFrame,
    tail: pl.LazyFrame,
    spec: NodeFeatureSpec,
    *,
    kept_end: datetime,
    end: datetime,
    visible: datetime,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The window at bucket end ``end`` from the ``kept`` complete buckets (those of
    :func:`window_buckets` or of an earlier call, through ``kept_end <= end``) and
    ``tail`` (the telemetry after ``kept_end``; earlier rows are ignored). Returns the
    window's buckets (as :func:`window_buckets`) and the new complete buckets to keep."""
    if kept_end > end:
        raise ValueError(f"kept buckets through {kept_end} cannot carry to {end}")
    first = oldest_end(end, spec)
    if kept_end < first - spec.bucket:
        raise ValueError(f"kept buckets through {kept_end} miss the window ending {end}")
    kept = kept.filter((pl.col(END) >= first) & (pl.col(END) <= kept_end))
    cols = _source_columns(spec)
    new = tail.filter(pl.col("ts") > kept_end).select(cols)
    schema = new.collect_schema()
    # in bucket-end order (each node's rows then are too: the first bucket with a counter
    # and the last value below are taken in that order)
    ordered = kept if kept[END].is_sorted() else kept.sort(END, maintain_order=True)
    seed = ordered.group_by(NODE, maintain_order=True).agg(
        pl.col(f"{c}__last").drop_nulls().last().alias(c) for c in spec.counters
    )
    seed = seed.select(
        pl.col(NODE).cast(schema[NODE]),
        pl.lit(kept_end).cast(schema["ts"]).alias("ts"),
        *[pl.lit(None).cast(schema[g]).alias(g) for g in spec.gauges],
        *[pl.col(c).cast(schema[c]) for c in spec.counters],
        pl.lit(None).cast(schema["node_ready"]).alias("node_ready"),
    )
    fresh = exact_buckets(
        pl.concat([seed.lazy(), new]), spec, cutoff=visible, first_zero=True
    ).filter(pl.col(END) > kept_end)
    fresh = fresh.select(kept.columns) if kept.width else fresh
    both = pl.concat([ordered, fresh.sort(END, NODE)])
    # a node's first bucket with the counter in the window counts its first sample as none
    firsts = [
        pl.when(
            pl.col(f"{c}__last").is_not_null()
            & (pl.col(f"{c}__last").is_not_null().cum_sum().over(NODE) == 1)
        )
        .then(pl.col(f"{c}__inc0"))
        .otherwise(pl.col(f"{c}__inc"))
        .alias(f"{c}__inc")
        for c in spec.counters
    ]
    window = both.with_columns(firsts).drop(inc0_columns(spec))
    return window, fresh.filter(pl.col(END) <= end)


__all__ = [
    "InOrder",
    "carry_forward",
    "exact_buckets",
    "inc0_columns",
    "oldest_end",
    "window_buckets",
]
