"""Node features from telemetry, as pure ``LazyFrame -> LazyFrame`` steps.

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

from datetime import UTC, datetime, timedelta

import polars as pl

from features.definitions import (
    NodeFeatureSpec,
    counter_name,
    gauge_name,
    window_label,
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


def bucket_telemetry(
    telemetry: pl.LazyFrame, spec: NodeFeatureSpec, *, cutoff: datetime | None = None
) -> pl.LazyFrame:
    """Per node and bucket: sample count, gauge moments, counter increases, readiness.

    ``cutoff`` drops samples with ``ts > cutoff`` before anything is computed.
    """
    lf = telemetry
    if cutoff is not None:
        lf = lf.filter(pl.col("ts") <= cutoff)
    lf = lf.select(NODE, "ts", *spec.gauges, *spec.counters, "node_ready").sort(NODE, "ts")
    end = _bucket_end(pl.col("ts"), spec.bucket)
    # Offset of each sample from its bucket end, in hours (<= 0).
    t_off = ((pl.col("ts") - pl.col(END)).dt.total_microseconds() / HOUR_US).alias("__t")
    deltas = []
    for c in spec.counters:
        x = pl.col(c).cast(pl.Float64)
        prev = x.shift(1).forward_fill().over(NODE)
        # Counters only grow; a drop is a reset (reboot, driver reload): count from 0.
        deltas.append(
            pl.when(x.is_null())
            .then(None)
            .when(prev.is_null())
            .then(0.0)
            .when(x >= prev)
            .then(x - prev)
            .otherwise(x)
            .alias(f"__d_{c}")
        )
    lf = lf.with_columns(end.alias(END)).with_columns(t_off, *deltas)
    aggs: list[pl.Expr] = [pl.len().alias("n"), pl.col("ts").max().alias("last_ts")]
    for g in spec.gauges:
        x = pl.col(g).cast(pl.Float64)
        valid = x.is_not_null()
        t = pl.col("__t")
        aggs += [
            valid.sum().alias(f"{g}__n"),
            x.sum().alias(f"{g}__s"),
            (x * x).sum().alias(f"{g}__ss"),
            x.max().alias(f"{g}__max"),
            t.filter(valid).sum().alias(f"{g}__st"),
            (t * t).filter(valid).sum().alias(f"{g}__stt"),
            (t * x).sum().alias(f"{g}__stx"),
        ]
    for c in spec.counters:
        aggs += [
            pl.col(f"__d_{c}").sum().alias(f"{c}__inc"),
            pl.col(c).drop_nulls().last().cast(pl.Float64).alias(f"{c}__last"),
        ]
    ready = pl.col("node_ready")
    aggs += [
        ready.is_not_null().sum().alias("ready__n"),
        (ready == False).sum().alias("ready__false"),  # noqa: E712 (polars expression)
    ]
    return lf.group_by(NODE, END).agg(aggs)


def bucket_grid(buckets: pl.LazyFrame, spec: NodeFeatureSpec, *, cutoff: datetime) -> pl.LazyFrame:
    """One row per node and bucket end, from the node's first bucket to
    ``min(cutoff bucket, last bucket + largest window)``; empty buckets have zero counts."""
    last_end = floor_to_bucket(cutoff, spec.bucket)
    reach = max((*spec.windows, *spec.missing_windows))
    span = buckets.group_by(NODE).agg(
        pl.col(END).min().alias("__first"), pl.col(END).max().alias("__last")
    )
    grid = span.select(
        NODE,
        pl.datetime_ranges(
            pl.col("__first"),
            pl.min_horizontal(
                pl.col("__last") + reach, pl.lit(last_end, dtype=pl.Datetime("us", "UTC"))
            ),
            interval=spec.bucket,
            time_unit="us",
        ).alias(END),
    ).explode(END)
    zero_fill = [
        c
        for c in buckets.collect_schema().names()
        if c.endswith(("__n", "__s", "__ss", "__st", "__stt", "__stx", "__inc"))
        or c in ("n", "ready__n", "ready__false")
    ]
    out = grid.join(buckets, on=[NODE, END], how="left").with_columns(
        pl.col(zero_fill).fill_null(0)
    )
    idx = (
        (pl.col(END) - pl.lit(ORIGIN)).dt.total_microseconds()
        // int(spec.bucket.total_seconds() * 1_000_000)
    ).alias("__i")
    return out.sort(NODE, END).with_columns(idx)


def _roll(col: str | pl.Expr, k: int) -> pl.Expr:
    e = pl.col(col) if isinstance(col, str) else col
    return e.rolling_sum(k, min_samples=1).over(NODE)


def add_window_features(grid: pl.LazyFrame, spec: NodeFeatureSpec) -> pl.LazyFrame:
    """Trailing-window gauge stats, counter increases and missing-data indicators."""
    b_h = spec.bucket.total_seconds() / 3600
    i = pl.col("__i").cast(pl.Float64)
    # Helper columns for the slope: bucket-index moments (integers, exact).
    helpers = []
    for g in spec.gauges:
        n = pl.col(f"{g}__n").cast(pl.Int64)
        ii = pl.col("__i")
        helpers += [
            (n * ii).alias(f"__{g}_ni"),
            (n * ii * ii).alias(f"__{g}_nii"),
            (pl.col(f"{g}__st") * i).alias(f"__{g}_ist"),
            (pl.col(f"{g}__s") * i).alias(f"__{g}_isx"),
        ]
    lf = grid.with_columns(helpers)
    exprs: list[pl.Expr] = []
    for g in spec.gauges:
        for w in spec.windows:
            k = spec.buckets_in(w)
            n = _roll(f"{g}__n", k).cast(pl.Float64)
            s, ss = _roll(f"{g}__s", k), _roll(f"{g}__ss", k)
            mean = pl.when(n > 0).then(s / n)
            var = pl.when(n > 1).then(((ss - s * s / n) / (n - 1)).clip(lower_bound=0.0))
            # Time of each sample relative to the window end E (bucket index I), in hours:
            # t = t_off + (j - I) * bucket.
            big_i = i
            st = _roll(f"{g}__st", k) + b_h * (_roll(f"__{g}_ni", k).cast(pl.Float64) - big_i * n)
            nii = _roll(f"__{g}_nii", k) - 2 * pl.col("__i") * _roll(f"__{g}_ni", k)
            nii = nii.cast(pl.Float64) + big_i * big_i * n
            stt = (
                _roll(f"{g}__stt", k)
                + 2 * b_h * (_roll(f"__{g}_ist", k) - big_i * _roll(f"{g}__st", k))
                + b_h * b_h * nii
            )
            stx = _roll(f"{g}__stx", k) + b_h * (_roll(f"__{g}_isx", k) - big_i * s)
            den = n * stt - st * st
            slope = pl.when((n > 1) & (den > 1e-9)).then((n * stx - st * s) / den)
            mx = pl.col(f"{g}__max").rolling_max(k, min_samples=1).over(NODE)
            exprs += [
                mean.cast(pl.Float32).alias(gauge_name(g, "mean", w)),
                mx.cast(pl.Float32).alias(gauge_name(g, "max", w)),
                var.sqrt().cast(pl.Float32).alias(gauge_name(g, "std", w)),
                slope.cast(pl.Float32).alias(gauge_name(g, "slope", w)),
            ]
    lookback_k = spec.buckets_in(max(spec.windows))
    for c in spec.counters:
        for w in spec.windows:
            exprs.append(
                _roll(f"{c}__inc", spec.buckets_in(w)).cast(pl.Float32).alias(counter_name(c, w))
            )
        exprs.append(
            pl.col(f"{c}__last")
            .forward_fill(limit=lookback_k)
            .over(NODE)
            .cast(pl.Float32)
            .alias(counter_name(c, None))
        )
        exprs.append(
            _hours_since(pl.col(f"{c}__inc") > 0, lookback_k).alias(
                f"{c.removesuffix('_total')}__hours_since_increase"
            )
        )
    expected_per_bucket = spec.bucket / spec.sample_interval
    for w in spec.missing_windows:
        k = spec.buckets_in(w)
        cnt = _roll("n", k).cast(pl.Float64)
        lbl = window_label(w)
        exprs += [
            cnt.cast(pl.Float32).alias(f"samples__count_{lbl}"),
            (1 - cnt / (k * expected_per_bucket))
            .clip(0.0, 1.0)
            .cast(pl.Float32)
            .alias(f"samples__missing_frac_{lbl}"),
            pl.when(_roll("ready__n", k) > 0)
            .then(_roll("ready__false", k).cast(pl.Float64) / _roll("ready__n", k))
            .cast(pl.Float32)
            .alias(f"not_ready__frac_{lbl}"),
        ]
    last_seen = pl.col("last_ts").forward_fill().over(NODE)
    exprs.append(
        ((pl.col(END) - last_seen).dt.total_seconds() / 60)
        .cast(pl.Float32)
        .alias("samples__minutes_since_last")
    )
    exprs.append(
        _hours_since(pl.col("ready__false") > 0, lookback_k).alias("not_ready__hours_since")
    )
    lf = lf.with_columns(exprs)
    dev = []
    base, short = spec.baseline_window, spec.short_window
    for g in spec.gauges:
        d = pl.col(gauge_name(g, "mean", short)) - pl.col(gauge_name(g, "mean", base))
        sd = pl.col(gauge_name(g, "std", base))
        dev += [
            d.alias(f"{g}__dev_own_{window_label(base)}"),
            pl.when(sd > 0).then(d / sd).cast(pl.Float32).alias(f"{g}__z_own_{window_label(base)}"),
        ]
    return lf.with_columns(dev)


def _hours_since(happened: pl.Expr, lookback_buckets: int) -> pl.Expr:
    """Hours from the bucket end back to the last bucket where ``happened``; null when
    that is further back than the lookback (online and offline see the same window)."""
    last = pl.when(happened).then(pl.col(END)).forward_fill(limit=lookback_buckets).over(NODE)
    return ((pl.col(END) - last).dt.total_seconds() / 3600).cast(pl.Float32)


def add_peer_features(lf: pl.LazyFrame, spec: NodeFeatureSpec) -> pl.LazyFrame:
    """Deviation of each node from the median of its rack / pool peers at the same time.

    Needs the ``rack`` / ``pool`` columns (see :func:`add_static_features`)."""
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
    back = lf.sort(END).join_asof(
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
    out = lf.sort(END)
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
            shifted.sort("__then")
            .join_asof(
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
