"""Drive-day feature rows and labels from the ``drive_smart`` and failure ``events`` tables.

Backblaze publishes SMART snapshots (daily files) or start-stop intervals (the hds
table: one row per stretch of constant SMART values). Both become the same thing here:
one row per drive per evaluation day on a calendar grid (every ``stride`` days from a
fixed origin, so all drives share the days), holding

- ``smart_N_raw__last``: the latest raw value at or before the day (last value carried
  forward, which is exactly what an hds interval means);
- ``smart_N_raw__increase_7d`` / ``_30d``: growth since the value 7 / 30 days earlier
  (since the first observation for younger drives);
- ``smart_N_raw__days_since_increase``: days since the counter last grew;
- ``smart_N_raw__days_since_nonzero``: days since the counter first showed a nonzero
  value (null: never), for the counters the SMART rule reads (5, 187, 197, 198);
- ``smart_rule__nonzero`` / ``smart_rule__total``: how many of those counters are
  nonzero, and their sum (the rule's own inputs, as one ranking);
- ``drive__days_since_growth``: days since any counter last grew, and
  ``drive__growth_snapshots_30d`` / ``_90d``: snapshots with a growing counter in the
  last 30 / 90 days (a start-stop table writes a row only when a value changes, so
  these are how restless the drive has been);
- ``drive__days_since_snapshot``: days since the latest snapshot (a daily file has one
  every day; a drive that stops reporting or a quiet hds interval shows here);
- ``drive__power_on_hours`` (at the last snapshot, plus the calendar hours since: a
  drive in the fleet is powered on), ``drive__days_observed``, ``drive__capacity_tb``,
  and the categoricals ``drive__model`` and ``drive__family`` (the vendor prefix of the
  model name: ``ST``, ``WDC``, ``Hitachi``...);
- ``fleet__model_afr_90d``: the fleet's recent annualised failure rate of the drive's
  model, failures of drives of that model in ``(t - 90 d, t]`` per drive-year on the
  grid in that window (a bad batch shows here before its next drive fails; the model
  category alone learns only the training period's rate). Fleet rows count drives of
  the frame being built, so a frame of one cohort sees that cohort's failures only.

A row at day ``t`` uses only snapshots with ``ts <= t`` and failures at or before ``t``.
Labels come from :func:`features.labels.add_failure_labels` (failures strictly after
``t``; null past the label cutoff; rows on or after a drive's failure are unusable).
Grid days run from a drive's first snapshot to its failure or last snapshot, whichever
is first.

This is a feature transform, kept beside the model that uses it until ``features/``
grows a drive feature set.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl

from predops.features.definitions import FeatureDef
from predops.features.labels import add_failure_labels, label_name
from predops.models.failure.baselines import DRIVE_RULE_COLUMNS

DRIVE = "node_id"
ORIGIN = datetime(2000, 1, 1, tzinfo=UTC)
SMART_NAMES: dict[int, str] = {
    1: "read error rate",
    5: "reallocated sectors",
    9: "power-on hours",
    10: "spin retries",
    12: "power cycles",
    187: "reported uncorrectable errors",
    188: "command timeouts",
    189: "high-fly writes",
    194: "temperature (C)",
    196: "reallocation events",
    197: "pending sectors",
    198: "offline uncorrectable sectors",
}
LAGS = (timedelta(days=1), timedelta(days=7), timedelta(days=30))
GROWTH_WINDOWS = (timedelta(days=30), timedelta(days=90))
FLEET_WINDOW = timedelta(days=90)
DAYS_PER_YEAR = 365.25
# Cumulative counters grow; temperature and the read-error rate do not, so only the
# counters get increase features.
COUNTER_IDS = (5, 10, 12, 187, 188, 189, 196, 197, 198)


def smart_column(n: int) -> str:
    return f"smart_{n}_raw"


def drive_feature_defs(smart_ids: tuple[int, ...]) -> list[FeatureDef]:
    """Definitions (for names, dtypes and the wording of reasons) of the drive features
    built from the SMART ids present in the input."""
    defs: list[FeatureDef] = []
    for n in smart_ids:
        col = smart_column(n)
        what = SMART_NAMES.get(n, f"SMART {n}")
        defs.append(
            FeatureDef(
                f"{col}__last", (col,), "last", None, "float32", doc=f"SMART {n} {what}, raw"
            )
        )
        if n in COUNTER_IDS:
            for w in LAGS:
                defs.append(
                    FeatureDef(
                        f"{col}__increase_{w.days}d",
                        (col,),
                        "increase",
                        w,
                        "float32",
                        doc=f"growth of SMART {n} {what} over the last {w.days} days",
                    )
                )
            defs.append(
                FeatureDef(
                    f"{col}__days_since_increase",
                    (col,),
                    "days_since_last_increase",
                    None,
                    "float32",
                    doc=f"days since SMART {n} {what} last grew (null: never seen growing)",
                )
            )
        if col in DRIVE_RULE_COLUMNS:
            defs.append(
                FeatureDef(
                    f"{col}__days_since_nonzero",
                    (col,),
                    "days_since_first_nonzero",
                    None,
                    "float32",
                    doc=f"days since SMART {n} {what} first showed nonzero (null: never)",
                )
            )
    rule = tuple(smart_column(n) for n in smart_ids if smart_column(n) in DRIVE_RULE_COLUMNS)
    if rule:
        defs += [
            FeatureDef(
                "smart_rule__nonzero",
                rule,
                "count_nonzero",
                None,
                "float32",
                doc="SMART 5/187/197/198 counters that are nonzero",
            ),
            FeatureDef(
                "smart_rule__total",
                rule,
                "sum",
                None,
                "float32",
                doc="bad sectors and errors counted by SMART 5/187/197/198 together",
            ),
        ]
    growth_src = tuple(smart_column(n) for n in smart_ids if n in COUNTER_IDS)
    if growth_src:
        defs.append(
            FeatureDef(
                "drive__days_since_growth",
                growth_src,
                "days_since_last_increase",
                None,
                "float32",
                doc="days since any SMART counter last grew (null: never seen growing)",
            )
        )
        defs += [
            FeatureDef(
                f"drive__growth_snapshots_{w.days}d",
                growth_src,
                "growth_count",
                w,
                "float32",
                doc=f"snapshots with a growing SMART counter in the last {w.days} days",
            )
            for w in GROWTH_WINDOWS
        ]
    defs += [
        FeatureDef("drive__days_since_snapshot", ("ts",), "days_since_snapshot", None, "float32"),
        FeatureDef("drive__power_on_hours", ("power_on_hours",), "last", None, "float32"),
        FeatureDef("drive__days_observed", ("ts",), "age", None, "float32"),
        FeatureDef("drive__capacity_tb", ("capacity_bytes",), "last", None, "float32"),
        FeatureDef("drive__model", ("model",), "category", None, "category"),
        FeatureDef("drive__family", ("model",), "category", None, "category"),
        FeatureDef(
            f"fleet__model_afr_{FLEET_WINDOW.days}d",
            ("model", "failure"),
            "rate",
            FLEET_WINDOW,
            "float32",
            doc=f"failures per drive-year of this drive model in the fleet over the last "
            f"{FLEET_WINDOW.days} days",
        ),
    ]
    return defs


def model_failure_rate(
    rows: pl.DataFrame, events: pl.DataFrame, *, stride: timedelta
) -> pl.DataFrame:
    """``fleet__model_afr_90d`` for the grid ``rows`` (``node_id``, ``ts``, ``model``): per
    model and grid day ``t``, failures at ``(t - 90 d, t]`` of drives of that model over
    the drive-years of its grid rows in that window (each row stands for ``stride``).
    A failure counts from the first grid day at or after it, never before."""
    name = f"fleet__model_afr_{FLEET_WINDOW.days}d"
    days = sorted(rows["ts"].unique().to_list())
    models = rows.group_by(DRIVE).agg(pl.col("model").last())
    fails = (
        events.filter(pl.col("kind") == "failure")
        .group_by(DRIVE)
        .agg(pl.col("at").min())
        .join(models, on=DRIVE, how="inner")
        .sort("at")
        .join_asof(
            pl.DataFrame({"ts": days}, schema={"ts": rows.schema["ts"]}),
            left_on="at",
            right_on="ts",
            strategy="forward",
        )
        .drop_nulls("ts")
        .group_by("model", "ts")
        .agg(pl.len().cast(pl.Float64).alias("__fails"))
    )
    per_day = (
        rows.group_by("model", "ts")
        .agg(pl.len().cast(pl.Float64).alias("__alive"))
        .join(fails, on=["model", "ts"], how="full", coalesce=True)
        .with_columns(pl.col("__alive", "__fails").fill_null(0.0))
        .sort("model", "ts")
    )
    window = f"{FLEET_WINDOW.days}d"
    rolled = per_day.with_columns(
        pl.col("__alive").rolling_sum_by("ts", window).over("model").alias("__alive_w"),
        pl.col("__fails").rolling_sum_by("ts", window).over("model").alias("__fails_w"),
    )
    years = pl.col("__alive_w") * (stride.total_seconds() / 86400 / DAYS_PER_YEAR)
    return rolled.select(
        "model",
        "ts",
        pl.when(years > 0).then(pl.col("__fails_w") / years).cast(pl.Float32).alias(name),
    )


def model_family(model: pl.Expr) -> pl.Expr:
    """The vendor prefix of a drive model name: the first word of ``Hitachi HDS5C3030``
    or ``WDC WD30EFRX``, the two letters of ``ST4000DM000``."""
    words = model.str.split(" ")
    return (
        pl.when(words.list.len() > 1)
        .then(words.list.first())
        .otherwise(model.str.slice(0, 2))
        .cast(pl.Categorical)
    )


def present_smart_ids(smart: pl.DataFrame) -> tuple[int, ...]:
    """SMART ids with at least one value in ``smart`` (2013 files fill only five)."""
    ids = []
    for n in SMART_NAMES:
        col = smart_column(n)
        if n != 9 and col in smart.columns and smart[col].null_count() < smart.height:
            ids.append(n)
    return tuple(ids)


def drive_grid(
    smart: pl.DataFrame, events: pl.DataFrame, *, stride: timedelta, cutoff: datetime
) -> pl.DataFrame:
    """``(node_id, ts)`` evaluation days: grid days from each drive's first snapshot to
    its failure or last snapshot (and never past ``cutoff``)."""
    utc = pl.Datetime("us", "UTC")
    fails = (
        events.filter(pl.col("kind") == "failure")
        .group_by(DRIVE)
        .agg(pl.col("at").min().alias("__fail"))
    )
    step_us = int(stride.total_seconds() * 1e6)
    origin = pl.lit(ORIGIN, dtype=utc)

    def on_grid(expr: pl.Expr, up: bool) -> pl.Expr:
        us = (expr - origin).dt.total_microseconds()
        k = (us + (step_us - 1 if up else 0)) // step_us
        return origin + pl.duration(microseconds=k * step_us)

    spans = (
        smart.group_by(DRIVE)
        .agg(pl.col("ts").min().alias("__first"), pl.col("ts").max().alias("__last"))
        .join(fails, on=DRIVE, how="left")
        .with_columns(
            pl.min_horizontal(pl.coalesce("__fail", "__last"), pl.lit(cutoff, dtype=utc)).alias(
                "__end"
            )
        )
        .with_columns(
            on_grid(pl.col("__first"), up=True).alias("__g0"),
            on_grid(pl.col("__end"), up=False).alias("__g1"),
        )
        .filter(pl.col("__g1") >= pl.col("__g0"))
    )
    return (
        spans.select(
            DRIVE,
            pl.datetime_ranges("__g0", "__g1", interval=stride, time_unit="us").alias("ts"),
        )
        .explode("ts")
        .with_columns(pl.col("ts").dt.replace_time_zone("UTC"))
        .sort(DRIVE, "ts")
    )


def drive_features(
    smart: pl.DataFrame,
    events: pl.DataFrame,
    *,
    stride: timedelta = timedelta(days=1),
    cutoff: datetime | None = None,
    horizons: tuple[timedelta, ...] = (timedelta(days=30),),
    smart_ids: tuple[int, ...] | None = None,
) -> pl.DataFrame:
    """Drive-day feature rows with failure labels (``fails_within_30d``) and ``usable``.

    ``cutoff`` (default: the latest snapshot or event) bounds both the rows and the
    label knowledge.
    """
    if smart.height == 0:
        raise ValueError("drive_smart is empty: nothing to build drive features from")
    if cutoff is None:
        last = [smart["ts"].max()]
        if events.height:
            last.append(events["at"].max())
        cutoff = max(t for t in last if isinstance(t, datetime))
    ids = smart_ids if smart_ids is not None else present_smart_ids(smart)
    cols = [smart_column(n) for n in ids]
    snap = (
        smart.filter(pl.col("ts") <= cutoff)
        .select(
            DRIVE,
            pl.col("ts").alias("__snap_ts"),
            pl.col("model"),
            pl.col("capacity_bytes"),
            pl.col("power_on_hours"),
            *[pl.col(c).cast(pl.Float64) for c in cols],
        )
        .sort(DRIVE, "__snap_ts")
    )
    counters = [smart_column(n) for n in ids if n in COUNTER_IDS]
    rule = [c for c in cols if c in DRIVE_RULE_COLUMNS]
    snap = snap.with_columns(
        (pl.col(c) > pl.col(c).forward_fill().shift(1).over(DRIVE)).alias(f"{c}__grew")
        for c in counters
    )
    grew = [pl.col(f"{c}__grew").fill_null(False) for c in counters]
    # Per drive, carried forward: the time of the latest growth of each counter, the
    # time each rule counter first showed nonzero, and how many snapshots so far had a
    # growing counter.
    snap = snap.with_columns(
        *[
            pl.when(g).then(pl.col("__snap_ts")).forward_fill().over(DRIVE).alias(f"{c}__chg")
            for c, g in zip(counters, grew, strict=True)
        ],
        *[
            pl.when(pl.col(c) > 0)
            .then(pl.col("__snap_ts"))
            .cum_min()
            .forward_fill()
            .over(DRIVE)
            .alias(f"{c}__nz")
            for c in rule
        ],
        pl.any_horizontal(*grew or [pl.lit(False)])
        .cast(pl.Int32)
        .cum_sum()
        .over(DRIVE)
        .alias("__growths"),
    ).sort("__snap_ts")
    first = snap.group_by(DRIVE).agg(
        pl.col("__snap_ts").min().alias("__first_ts"),
        *[pl.col(c).sort_by("__snap_ts").first().alias(f"{c}__first") for c in cols],
    )
    grid = drive_grid(smart, events, stride=stride, cutoff=cutoff)
    out = grid.sort("ts").join_asof(
        snap,
        left_on="ts",
        right_on="__snap_ts",
        by=DRIVE,
        strategy="backward",
        check_sortedness=False,
    )
    lagged = snap.select(DRIVE, "__snap_ts", "__growths", *cols)
    for w in sorted({*LAGS, *GROWTH_WINDOWS}):
        tag = f"__lag{w.days}"
        out = (
            out.with_columns((pl.col("ts") - w).alias("__then"))
            .sort("__then")
            .join_asof(
                lagged.rename({c: f"{c}{tag}" for c in [*cols, "__snap_ts", "__growths"]}),
                left_on="__then",
                right_on=f"__snap_ts{tag}",
                by=DRIVE,
                strategy="backward",
                check_sortedness=False,
            )
            .drop("__then", f"__snap_ts{tag}")
        )
    out = out.join(first, on=DRIVE, how="left")
    exprs: list[pl.Expr] = []
    for n, c in zip(ids, cols, strict=True):
        exprs.append(pl.col(c).cast(pl.Float32).alias(f"{c}__last"))
        if n in COUNTER_IDS:
            for w in LAGS:
                before = pl.coalesce(f"{c}__lag{w.days}", f"{c}__first")
                exprs.append(
                    (pl.col(c) - before).cast(pl.Float32).alias(f"{c}__increase_{w.days}d")
                )
            exprs.append(_days_since(f"{c}__chg").alias(f"{c}__days_since_increase"))
            if c in rule:
                exprs.append(_days_since(f"{c}__nz").alias(f"{c}__days_since_nonzero"))
    if rule:
        exprs += [
            pl.sum_horizontal(*[(pl.col(c) > 0).cast(pl.Float32) for c in rule])
            .cast(pl.Float32)
            .alias("smart_rule__nonzero"),
            pl.sum_horizontal(*[pl.col(c).clip(lower_bound=0) for c in rule])
            .cast(pl.Float32)
            .alias("smart_rule__total"),
        ]
    if counters:
        latest = pl.max_horizontal(*[pl.col(f"{c}__chg") for c in counters])
        exprs.append(_days_since(latest).alias("drive__days_since_growth"))
        exprs += [
            (pl.col("__growths") - pl.col(f"__growths__lag{w.days}").fill_null(0))
            .cast(pl.Float32)
            .alias(f"drive__growth_snapshots_{w.days}d")
            for w in GROWTH_WINDOWS
        ]
    since_snap_h = (pl.col("ts") - pl.col("__snap_ts")).dt.total_seconds() / 3600
    exprs += [
        (since_snap_h / 24).cast(pl.Float32).alias("drive__days_since_snapshot"),
        (pl.col("power_on_hours") + since_snap_h).cast(pl.Float32).alias("drive__power_on_hours"),
        ((pl.col("ts") - pl.col("__first_ts")).dt.total_seconds() / 86400)
        .cast(pl.Float32)
        .alias("drive__days_observed"),
        (pl.col("capacity_bytes").cast(pl.Float64) / 1e12)
        .cast(pl.Float32)
        .alias("drive__capacity_tb"),
        pl.col("model").cast(pl.Categorical).alias("drive__model"),
        model_family(pl.col("model")).alias("drive__family"),
    ]
    out = out.with_columns(exprs)
    fleet = model_failure_rate(out.select(DRIVE, "ts", "model"), events, stride=stride)
    out = out.join(fleet, on=["model", "ts"], how="left")
    names = [d.name for d in drive_feature_defs(ids)]
    feats = out.select(DRIVE, "ts", *names)
    labelled = add_failure_labels(
        feats.lazy(), events.lazy(), horizons=horizons, label_cutoff=cutoff
    ).collect()
    return labelled.sort(DRIVE, "ts")


def _days_since(then: str | pl.Expr) -> pl.Expr:
    """Days (float32) from the timestamp ``then`` to the row's ``ts`` (null stays null)."""
    t = pl.col(then) if isinstance(then, str) else then
    return ((pl.col("ts") - t).dt.total_seconds() / 86400).cast(pl.Float32)


def drive_label(horizon: timedelta) -> str:
    return label_name(horizon)
