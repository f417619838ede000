"""Node features from telemetry, as pure ``LazyFrame -> LazyFrame`` steps.
Over 500 lines: the bucket aggregation, the grid, the window kernels (over every bucket
and at the last one only, which must stay bitwise equal) and the static, event and peer
steps are one definition of the features that training and serving share.

How it works (and why it is point-in-time correct):

1. ``bucket_telemetry``: samples are summed per node into buckets ``(end - bucket, end]``
   (count, sum, sum of squares, max, time moments for the slope, counter increases, last
   values). A sample only ever lands in the bucket that contains its own ``ts``.
2. ``bucket_grid``: every node gets one row per bucket from its first sample up to the
   cutoff (or 24 h past its last sample), so a row-count window over the grid *is* a
   time window: irregular and missing samples are handled by the counts, not guessed.
3. ``add_window_features``: trailing windows are rolling sums of bucket sums; a feature
   at bucket end ``E`` sees only buckets ending at or before ``E``.
4. ``add_peer_features`` / ``add_event_features`` / ``add_static_features``: deviation
   from rack / pool peers at the same ``E``; time since failures, repairs and
   maintenance; age and SKU from the latest inventory snapshot.

Feature rows are stamped ``ts = E + ingestion_delay``: the time at which every sample
they use had arrived.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl

from predops.features.definitions import (
    NodeFeatureSpec,
    counter_name,
    gauge_name,
    window_label,
)
from predops.features.windows import (
    Windowed,
    buckets_since,
    buckets_since_last,
    forward_fill,
    forward_fill_last,
    window_max,
    window_max_last,
)

ORIGIN = datetime(2020, 1, 1, tzinfo=UTC)
"""Bucket indices count from here (integers keep the slope sums exact)."""
NODE = "node_id"
END = "bucket_end"
HOUR_US = 3_600_000_000


def floor_to_bucket(t: datetime, bucket: timedelta) -> datetime:
    """The end of the last complete bucket at or before ``t``."""
    n = (t - ORIGIN) // bucket
    return ORIGIN + n * bucket


def _bucket_end(ts: pl.Expr, bucket: timedelta) -> pl.Expr:
    # (end - bucket, end]: a sample exactly on a boundary belongs to the bucket it ends.
    return (ts - timedelta(microseconds=1)).dt.truncate(bucket) + bucket


SCALE = {"mem_used_bytes": float(1 << 30)}
"""Gauges summed in scaled units (bytes -> GiB) so squared sums keep their precision;
results are scaled back."""


def bucket_rows(
    telemetry: pl.LazyFrame,
    spec: NodeFeatureSpec,
    *,
    cutoff: datetime | None = None,
    first_zero: bool = False,
    presorted: bool = False,
) -> pl.LazyFrame:
    """The samples sorted by node and time (``presorted``: they are), each with its
    bucket end and the per-sample terms :func:`bucket_aggregations` adds up (see
    :func:`bucket_telemetry`)."""
    lf = telemetry
    if cutoff is not None:
        lf = lf.filter(pl.col("ts") <= cutoff)
    lf = lf.select(NODE, "ts", *spec.gauges, *spec.counters, "node_ready")
    if not presorted:
        lf = lf.sort(NODE, "ts")
    # Consecutive rows of one node share a run number; whole-column shifts then never
    # mix two nodes (cheaper than a window function per column).
    run = (pl.col(NODE) != pl.col(NODE).shift(1)).fill_null(True).cum_sum().alias("__run")
    end = _bucket_end(pl.col("ts"), spec.bucket).alias(END)
    lf = lf.with_columns(run, end)
    # times a constant, not divided: polars may divide by a reciprocal in some frames and
    # not in others, and a bucket's sums must not depend on the frame (features.carry)
    t = ((pl.col("ts") - pl.col(END)).dt.total_microseconds() * (1.0 / HOUR_US)).alias("__t")
    lf = lf.with_columns(t)
    per_row: list[pl.Expr] = []
    for g in spec.gauges:
        x = pl.col(g).cast(pl.Float64) / SCALE.get(g, 1.0)
        tv = pl.when(x.is_not_null()).then(pl.col("__t"))
        per_row += [
            x.alias(f"__x_{g}"),
            (x * x).alias(f"__xx_{g}"),
            tv.alias(f"__t_{g}"),
            (tv * tv).alias(f"__tt_{g}"),
            (pl.col("__t") * x).alias(f"__tx_{g}"),
        ]
    for c in spec.counters:
        x = pl.col(c).cast(pl.Float64)
        prev = x.forward_fill().shift(1)
        prev_run = pl.when(x.is_not_null()).then(pl.col("__run")).forward_fill().shift(1)
        # Counters only grow; a drop is a reset (reboot, driver reload): count from 0.
        first = prev_run.is_null() | (prev_run != pl.col("__run"))
        d = pl.when(x.is_null()).then(None).when(first).then(0.0)
        per_row.append(d.when(x >= prev).then(x - prev).otherwise(x).alias(f"__d_{c}"))
        if first_zero:
            prev_end = pl.when(x.is_not_null()).then(pl.col(END)).forward_fill().shift(1)
            first_here = first | (prev_end != pl.col(END))
            d0 = pl.when(x.is_null()).then(None).when(first_here).then(0.0)
            per_row.append(d0.when(x >= prev).then(x - prev).otherwise(x).alias(f"__d0_{c}"))
    return lf.with_columns(per_row)


def bucket_aggregations(
    spec: NodeFeatureSpec, *, first_zero: bool = False
) -> list[tuple[pl.Expr, str | None]]:
    """The columns of :func:`bucket_telemetry` in order, each with the per-sample column
    it sums (None: not a floating-point sum, so exact in any order)."""
    out: list[tuple[pl.Expr, str | None]] = [
        (pl.len().alias("n"), None),
        (pl.col("ts").max().alias("last_ts"), None),
    ]

    def total(col: str, name: str) -> tuple[pl.Expr, str]:
        return pl.col(col).sum().alias(name), col

    for g in spec.gauges:
        out += [
            (pl.col(f"__x_{g}").count().alias(f"{g}__n"), None),
            total(f"__x_{g}", f"{g}__s"),
            total(f"__xx_{g}", f"{g}__ss"),
            (pl.col(f"__x_{g}").max().alias(f"{g}__max"), None),
            total(f"__t_{g}", f"{g}__st"),
            total(f"__tt_{g}", f"{g}__stt"),
            total(f"__tx_{g}", f"{g}__stx"),
        ]
    for c in spec.counters:
        out += [
            total(f"__d_{c}", f"{c}__inc"),
            (pl.col(c).drop_nulls().last().cast(pl.Float64).alias(f"{c}__last"), None),
        ]
        if first_zero:
            out.append(total(f"__d0_{c}", f"{c}__inc0"))
    ready = pl.col("node_ready")
    out += [(ready.count().alias("ready__n"), None), ((~ready).sum().alias("ready__false"), None)]
    return out


def bucket_telemetry(
    telemetry: pl.LazyFrame,
    spec: NodeFeatureSpec,
    *,
    cutoff: datetime | None = None,
    first_zero: bool = False,
) -> pl.LazyFrame:
    """Per node and bucket: sample count, gauge moments, counter increases, readiness.

    ``cutoff`` drops samples with ``ts > cutoff`` before anything is computed. A
    counter's first sample in the frame counts no increase (nothing before it to
    compare with). ``first_zero`` adds ``<counter>__inc0``: the bucket's increase with
    its own first sample counting none, which is its ``__inc`` when the frame starts at
    that bucket (:mod:`features.carry`).

    The sums are polars' own, whose order of addition within a bucket may depend on
    the frame around it (the last bit of a float can differ between two frames holding
    the same bucket); :func:`features.carry.exact_buckets` adds in a fixed order.
    """
    rows = bucket_rows(telemetry, spec, cutoff=cutoff, first_zero=first_zero)
    return rows.group_by(NODE, END).agg(
        e for e, _ in bucket_aggregations(spec, first_zero=first_zero)
    )


def bucket_grid(buckets: pl.LazyFrame, spec: NodeFeatureSpec, *, cutoff: datetime) -> pl.LazyFrame:
    """A rectangular grid: every node x every bucket end from the first bucket in the
    data to the cutoff's bucket; empty buckets have zero counts. ``__first`` /
    ``__until`` mark each node's own span (first bucket to last bucket + the largest
    window), outside which :func:`add_window_features` drops its rows."""
    last_end = floor_to_bucket(cutoff, spec.bucket)
    reach = max((*spec.windows, *spec.missing_windows))
    utc = pl.Datetime("us", "UTC")
    span = buckets.group_by(NODE).agg(
        pl.col(END).min().alias("__first"), (pl.col(END).max() + reach).alias("__until")
    )
    ends = buckets.select(
        pl.datetime_ranges(
            pl.col(END).min(), pl.lit(last_end, dtype=utc), interval=spec.bucket, time_unit="us"
        ).alias(END)
    ).explode(END)
    grid = span.join(ends, how="cross")
    numeric = [
        c
        for c in buckets.collect_schema().names()
        if c not in (NODE, END, "last_ts") and not c.endswith(("__max", "__last"))
    ]
    return (
        grid.join(buckets, on=[NODE, END], how="left")
        .with_columns(pl.col(numeric).fill_null(0))
        .sort(NODE, END)
    )


def window_feature_names(spec: NodeFeatureSpec) -> list[str]:
    """The columns :func:`add_window_features` adds, in order."""
    names: list[str] = []
    for g in spec.gauges:
        names += [
            gauge_name(g, st, w) for w in spec.windows for st in ("mean", "max", "std", "slope")
        ]
    for c in spec.counters:
        names += [counter_name(c, w) for w in spec.windows]
        names += [counter_name(c, None), f"{c.removesuffix('_total')}__hours_since_increase"]
    for w in spec.missing_windows:
        lbl = window_label(w)
        names += [f"samples__count_{lbl}", f"samples__missing_frac_{lbl}", f"not_ready__frac_{lbl}"]
    names += ["samples__minutes_since_last", "not_ready__hours_since"]
    base = window_label(spec.baseline_window)
    for g in spec.gauges:
        names += [f"{g}__dev_own_{base}", f"{g}__z_own_{base}"]
    return names


def add_window_features(
    grid: pl.LazyFrame, spec: NodeFeatureSpec, *, last_only: bool = False
) -> pl.LazyFrame:
    """Trailing-window gauge stats, counter increases and missing-data indicators.

    Runs the numpy kernels of :mod:`features.windows` on the (nodes x buckets) grid of
    :func:`bucket_grid`; the result keeps each node's own span only. ``last_only``: only
    the grid's last bucket end (the online row), computed at that column alone, bitwise
    equal to that column of the full result (``tests/features/test_node_features.py``)."""
    utc = pl.Datetime("us", "UTC")
    schema = pl.Schema(
        {NODE: pl.String(), END: utc, "last_ts": utc}
        | {n: pl.Float32() for n in window_feature_names(spec)}
    )
    return grid.map_batches(lambda df: _window_frame(df, spec, schema, last_only), schema=schema)


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _us(d: timedelta) -> int:
    return d // timedelta(microseconds=1)


def latest_window_features(
    buckets: pl.LazyFrame, spec: NodeFeatureSpec, *, cutoff: datetime
) -> pl.LazyFrame:
    """``add_window_features(bucket_grid(buckets, spec, cutoff=cutoff), spec,
    last_only=True)`` without building the grid: the buckets are scattered straight into
    the (nodes x buckets) arrays, so no cross join, join and sort of nodes x buckets rows
    (the online rows of 10,000 nodes read a grid of about a million). Equal to it, value
    for value (``tests/features/test_node_features.py``)."""
    utc = pl.Datetime("us", "UTC")
    schema = pl.Schema(
        {NODE: pl.String(), END: utc, "last_ts": utc}
        | {n: pl.Float32() for n in window_feature_names(spec)}
    )
    b = buckets.collect()
    last_end = floor_to_bucket(cutoff, spec.bucket)
    if b.height == 0 or b[END].min() > last_end:  # type: ignore[operator]
        return pl.DataFrame(schema=schema).lazy()
    reach = max((*spec.windows, *spec.missing_windows))
    span = (
        b.group_by(NODE)
        .agg(pl.col(END).min().alias("__first"), (pl.col(END).max() + reach).alias("__until"))
        .sort(NODE)
        .with_row_index("__i")
    )
    first_end: datetime = b[END].min()  # type: ignore[assignment]
    n_nodes, n_b = span.height, (last_end - first_end) // spec.bucket + 1
    inside = b.filter(pl.col(END) <= last_end).join(span.select(NODE, "__i"), on=NODE)
    step_us = _us(spec.bucket)
    j = (inside[END].dt.epoch("us").to_numpy() - _us(first_end - EPOCH)) // step_us
    flat = inside["__i"].cast(pl.Int64).to_numpy() * n_b + j

    def arr(col: str, fill: float = 0.0) -> np.ndarray:
        a = np.full(n_nodes * n_b, fill)
        a[flat] = inside[col].cast(pl.Float64).fill_null(fill).to_numpy()
        return a.reshape(n_nodes, n_b)

    ends = np.full((n_nodes, 1), _us(last_end - EPOCH), dtype=np.int64)  # the last column
    last = np.full(n_nodes * n_b, np.nan)
    last[flat] = inside["last_ts"].dt.epoch("us").cast(pl.Float64).to_numpy()
    out, last_ff = _window_columns(arr, ends, last.reshape(n_nodes, n_b), n_b, spec, True)
    rows = span.select(NODE, pl.lit(last_end, dtype=utc).alias(END), "__first", "__until")
    return _window_rows(rows, out, last_ff, spec).lazy()


class _Columns:
    """The window kernels over every column of the grid, or at its last column only
    (then every array is ``(nodes, 1)``; elementwise arithmetic is the same, so the
    values are bitwise equal)."""

    def __init__(self, n_b: int, last: bool) -> None:
        self.last = last
        self.index = np.arange(n_b - 1 if last else 0, n_b, dtype=np.float64)[None, :]

    def sum(self, w: Windowed, k: int) -> np.ndarray:
        return w.sum_last(k) if self.last else w.sum(k)

    def max(self, x: np.ndarray, k: int) -> np.ndarray:
        return window_max_last(x, k) if self.last else window_max(x, k)

    def ffill(self, x: np.ndarray, limit: int | None = None) -> np.ndarray:
        return forward_fill_last(x, limit) if self.last else forward_fill(x, limit)

    def since(self, mask: np.ndarray, limit: int) -> np.ndarray:
        return buckets_since_last(mask, limit) if self.last else buckets_since(mask, limit)

    def at(self, x: np.ndarray) -> np.ndarray:
        return x[:, -1:] if self.last else x


def _window_frame(
    df: pl.DataFrame, spec: NodeFeatureSpec, schema: pl.Schema, last_only: bool = False
) -> pl.DataFrame:
    n_nodes = df[NODE].n_unique()
    if n_nodes == 0 or df.height == 0:
        return pl.DataFrame(schema=schema)
    n_b = df.height // n_nodes
    if n_nodes * n_b != df.height:
        raise ValueError("add_window_features needs the rectangular grid of bucket_grid")

    def arr(col: str, fill: float = 0.0) -> np.ndarray:
        return df[col].cast(pl.Float64).fill_null(fill).to_numpy().reshape(n_nodes, n_b)

    ends = df[END].dt.epoch("us").to_numpy().reshape(n_nodes, n_b)
    last = df["last_ts"].dt.epoch("us").cast(pl.Float64).to_numpy().reshape(n_nodes, n_b)
    out, last_ff = _window_columns(arr, ends, last, n_b, spec, last_only)
    rows = df
    if last_only:  # each node's last grid row (rows are sorted by node, bucket end)
        rows = df.gather(np.arange(n_nodes) * n_b + (n_b - 1))
    return _window_rows(rows, out, last_ff, spec)


def _window_columns(
    arr: Callable[..., np.ndarray],
    ends: np.ndarray,
    last: np.ndarray,
    n_b: int,
    spec: NodeFeatureSpec,
    last_only: bool,
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The window features of a (nodes x ``n_b`` buckets) grid: ``arr(column, fill)``
    gives a bucket column as a 2-D array, ``ends`` / ``last`` the bucket ends and last
    sample times (epoch microseconds); every column, or the last one only."""
    bh = spec.bucket.total_seconds() / 3600
    at = _Columns(n_b, last_only)
    col_i = np.arange(n_b, dtype=np.float64)[None, :]  # for the cumulative sums
    oi = at.index  # the columns computed
    out: dict[str, np.ndarray] = {}
    means: dict[tuple[str, timedelta], np.ndarray] = {}
    stds: dict[tuple[str, timedelta], np.ndarray] = {}
    with np.errstate(divide="ignore", invalid="ignore"):
        for g in spec.gauges:
            scale = SCALE.get(g, 1.0)
            n, s, ss = arr(f"{g}__n"), arr(f"{g}__s"), arr(f"{g}__ss")
            st, stt, stx = arr(f"{g}__st"), arr(f"{g}__stt"), arr(f"{g}__stx")
            mx = arr(f"{g}__max", np.nan)
            cum = {
                name: Windowed(a)
                for name, a in (
                    ("n", n),
                    ("s", s),
                    ("ss", ss),
                    ("st", st),
                    ("stt", stt),
                    ("stx", stx),
                    ("nj", n * col_i),
                    ("njj", n * col_i * col_i),
                    ("stj", st * col_i),
                    ("sj", s * col_i),
                )
            }
            for w in spec.windows:
                k = spec.buckets_in(w)
                rn, rs, rss = at.sum(cum["n"], k), at.sum(cum["s"], k), at.sum(cum["ss"], k)
                rnj, rnjj = at.sum(cum["nj"], k), at.sum(cum["njj"], k)
                rst, rstt, rstx = at.sum(cum["st"], k), at.sum(cum["stt"], k), at.sum(cum["stx"], k)
                rstj, rsj = at.sum(cum["stj"], k), at.sum(cum["sj"], k)
                mean = np.where(rn > 0, rs / rn, np.nan)
                var = np.where(rn > 1, np.maximum((rss - rs * rs / rn) / (rn - 1), 0.0), np.nan)
                # Sample times relative to the window end, in hours: t = t_off + (j - I) * bh.
                s_t = rst + bh * (rnj - oi * rn)
                s_tt = (
                    rstt
                    + 2 * bh * (rstj - oi * rst)
                    + bh * bh * (rnjj - 2 * oi * rnj + oi * oi * rn)
                )
                s_tx = rstx + bh * (rsj - oi * rs)
                den = rn * s_tt - s_t * s_t
                slope = np.where((rn > 1) & (den > 1e-9), (rn * s_tx - s_t * rs) / den, np.nan)
                means[(g, w)], stds[(g, w)] = mean * scale, np.sqrt(var) * scale
                out[gauge_name(g, "mean", w)] = means[(g, w)]
                out[gauge_name(g, "max", w)] = at.max(mx, k) * scale
                out[gauge_name(g, "std", w)] = stds[(g, w)]
                out[gauge_name(g, "slope", w)] = slope * scale
        lookback = spec.buckets_in(max(spec.windows))
        for c in spec.counters:
            inc = arr(f"{c}__inc")
            inc_cum = Windowed(inc)
            for w in spec.windows:
                out[counter_name(c, w)] = at.sum(inc_cum, spec.buckets_in(w))
            out[counter_name(c, None)] = at.ffill(arr(f"{c}__last", np.nan), lookback)
            out[f"{c.removesuffix('_total')}__hours_since_increase"] = (
                at.since(inc > 0, lookback) * bh
            )
        count, r_n, r_false = arr("n"), arr("ready__n"), arr("ready__false")
        count_cum, rn_cum, rfalse_cum = Windowed(count), Windowed(r_n), Windowed(r_false)
        per_bucket = spec.bucket / spec.sample_interval
        for w in spec.missing_windows:
            k = spec.buckets_in(w)
            cnt = at.sum(count_cum, k)
            lbl = window_label(w)
            out[f"samples__count_{lbl}"] = cnt
            out[f"samples__missing_frac_{lbl}"] = np.clip(1 - cnt / (k * per_bucket), 0.0, 1.0)
            rn = at.sum(rn_cum, k)
            out[f"not_ready__frac_{lbl}"] = np.where(rn > 0, at.sum(rfalse_cum, k) / rn, np.nan)
        last_ff = at.ffill(last)
        out["samples__minutes_since_last"] = (at.at(ends) - last_ff) / 60e6
        out["not_ready__hours_since"] = at.since(r_false > 0, lookback) * bh
        base, short = spec.baseline_window, spec.short_window
        for g in spec.gauges:
            dev = means[(g, short)] - means[(g, base)]
            sd = stds[(g, base)]
            out[f"{g}__dev_own_{window_label(base)}"] = dev
            out[f"{g}__z_own_{window_label(base)}"] = np.where(sd > 0, dev / sd, np.nan)
    return out, last_ff


def _window_rows(
    rows: pl.DataFrame, out: dict[str, np.ndarray], last_ff: np.ndarray, spec: NodeFeatureSpec
) -> pl.DataFrame:
    """The output frame: ``rows`` (node, bucket end, span) with the computed columns."""
    frame = pl.DataFrame(
        {
            NODE: rows[NODE],
            END: rows[END],
            "last_ts": pl.Series(last_ff.ravel(), nan_to_null=True)
            .cast(pl.Int64)
            .cast(pl.Datetime("us", "UTC")),
            **{
                name: pl.Series(name, out[name].ravel(), dtype=pl.Float64, nan_to_null=True).cast(
                    pl.Float32
                )
                for name in window_feature_names(spec)
            },
        }
    )
    return frame.filter((rows[END] >= rows["__first"]) & (rows[END] <= rows["__until"]))


def _median_name(src: str) -> str:
    return f"__median_{src}"


def peer_medians(lf: pl.LazyFrame, spec: NodeFeatureSpec) -> dict[str, pl.LazyFrame]:
    """Per peer group: the median of each peer gauge per (bucket end, group value), the
    numbers :func:`add_peer_features` subtracts. Computed over every node of the fleet,
    they let the deviations be added to one partition of nodes at a time."""
    srcs = [gauge_name(g, "mean", spec.short_window) for g in spec.peer_gauges]
    return {
        grp: lf.group_by(END, f"node__{grp}").agg(
            [pl.col(src).median().alias(_median_name(src)) for src in srcs]
        )
        for grp in spec.peer_groups
    }


def add_peer_features(
    lf: pl.LazyFrame,
    spec: NodeFeatureSpec,
    medians: dict[str, pl.LazyFrame] | None = None,
) -> pl.LazyFrame:
    """Deviation of each node from the median of its rack / pool peers at the same time.

    Needs the ``rack`` / ``pool`` columns (see :func:`add_static_features`). ``medians``
    (from :func:`peer_medians` over the whole fleet) when ``lf`` holds only some nodes."""
    if medians is not None:
        out = lf
        for grp in spec.peer_groups:
            key = f"node__{grp}"
            med = medians[grp]
            out = out.join(med, on=[END, key], how="left", nulls_equal=True)
            srcs = [gauge_name(g, "mean", spec.short_window) for g in spec.peer_gauges]
            out = out.with_columns(
                [
                    (pl.col(src) - pl.col(_median_name(src)))
                    .cast(pl.Float32)
                    .alias(f"{src}__{grp}_dev")
                    for src in srcs
                ]
            ).drop([_median_name(src) for src in srcs])
        return out
    exprs = []
    for g in spec.peer_gauges:
        src = gauge_name(g, "mean", spec.short_window)
        for grp in spec.peer_groups:
            exprs.append(
                (pl.col(src) - pl.col(src).median().over(END, f"node__{grp}"))
                .cast(pl.Float32)
                .alias(f"{src}__{grp}_dev")
            )
    return lf.with_columns(exprs)


def add_static_features(lf: pl.LazyFrame, inventory: pl.LazyFrame) -> pl.LazyFrame:
    """Pool, SKU, GPU model, rack and age from the latest inventory snapshot at or before
    each row (the earliest snapshot when none is older: topology rarely changes)."""
    inv = inventory.select(
        NODE,
        pl.col("ts").alias("__inv_ts"),
        pl.col("pool").alias("node__pool"),
        pl.col("sku").alias("node__sku"),
        pl.col("gpu_model").alias("node__gpu_model"),
        pl.col("rack").alias("node__rack"),
        pl.col("installed_at").alias("__installed_at"),
    ).sort("__inv_ts")
    static_cols = ["node__pool", "node__sku", "node__gpu_model", "node__rack", "__installed_at"]
    # Rows come sorted by (node, bucket end); asof joins by node need no global sort.
    back = lf.join_asof(
        inv, left_on=END, right_on="__inv_ts", by=NODE, strategy="backward", check_sortedness=False
    )
    first = (
        inv.group_by(NODE)
        .agg(pl.all().sort_by("__inv_ts").first())
        .select(NODE, *[pl.col(c).alias(f"{c}__first") for c in static_cols])
    )
    out = (
        back.join(first, on=NODE, how="left")
        .with_columns([pl.coalesce(c, f"{c}__first").alias(c) for c in static_cols])
        .drop([f"{c}__first" for c in static_cols] + ["__inv_ts"])
    )
    age = (pl.col(END) - pl.col("__installed_at")).dt.total_seconds() / 86400
    return out.with_columns(age.cast(pl.Float32).alias("node__age_days")).drop("__installed_at")


def add_event_features(
    lf: pl.LazyFrame, events: pl.LazyFrame, spec: NodeFeatureSpec
) -> pl.LazyFrame:
    """Hours since the last failure / repair / maintenance and failure counts in windows,
    from events at or before each row's bucket end."""
    out = lf  # sorted by (node, bucket end): sorted within each node, as asof-by needs
    for kind in ("failure", "repair", "maintenance_start"):
        ev = (
            events.filter(pl.col("kind") == kind)
            .select(NODE, pl.col("at").alias(f"__{kind}"))
            .sort(f"__{kind}")
        )
        out = out.join_asof(
            ev,
            left_on=END,
            right_on=f"__{kind}",
            by=NODE,
            strategy="backward",
            check_sortedness=False,
        )
        out = out.with_columns(
            ((pl.col(END) - pl.col(f"__{kind}")).dt.total_seconds() / 3600)
            .cast(pl.Float32)
            .alias(f"events__hours_since_{kind}")
        ).drop(f"__{kind}")
    fails = (
        events.filter(pl.col("kind") == "failure")
        .select(NODE, pl.col("at"))
        .sort("at")
        .with_columns(pl.int_range(1, pl.len() + 1).over(NODE).alias("__cum"))
    )
    out = out.join_asof(
        fails.rename({"at": "__f_now", "__cum": "__cum_now"}),
        left_on=END,
        right_on="__f_now",
        by=NODE,
        strategy="backward",
        check_sortedness=False,
    )
    for w in spec.event_windows:
        shifted = out.with_columns((pl.col(END) - w).alias("__then"))
        out = (
            shifted.join_asof(
                fails.rename({"at": "__f_then", "__cum": "__cum_then"}),
                left_on="__then",
                right_on="__f_then",
                by=NODE,
                strategy="backward",
                check_sortedness=False,
            )
            .with_columns(
                (pl.col("__cum_now").fill_null(0) - pl.col("__cum_then").fill_null(0))
                .cast(pl.Float32)
                .alias(f"events__failures_{window_label(w)}")
            )
            .drop("__then", "__f_then", "__cum_then")
        )
    return out.drop("__f_now", "__cum_now")
