"""Forecast accuracy per model and horizon bucket.

All metrics are over forecast rows (series x origin x horizon) joined with actuals:

- ``mase``: mean of |y - p50| / s, where s is the series' in-sample MAE of the seasonal
  naive forecast (season = the config's shortest, or 1 step when the history is too
  short) on the history up to that origin's cutoff. Rows with s = 0 (a constant
  history) are left out and counted in ``mase_rows_skipped``.
- ``smape``: mean of 200 |y - p50| / (|y| + |p50|) in percent (0 when both are 0).
- ``wql``: weighted quantile (pinball) loss, mean over q in (0.1, 0.5, 0.9) of
  2 * sum(pinball_q) / sum(|y|).
- ``coverage``: share of actuals inside [p10, p90] (80 % nominal).
- ``under_provisioning``: share of actuals above p90 (10 % nominal): capacity sized at
  p90 would have been short.
- ``rmse``, ``mae`` of p50 in the series' units (meaningful for one series).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from predops.models.demand.config import ForecastConfig

QUANTILE_COLUMNS = (("p10", 0.1), ("p50", 0.5), ("p90", 0.9))


def mase_scale(y: np.ndarray, m: int) -> float:
    """In-sample MAE of the seasonal naive forecast with period ``m`` (falls back to
    m = 1 if the history holds no full period); NaN buckets are skipped."""
    y = np.asarray(y, dtype=np.float64)
    if y.size <= m:
        m = 1
    if y.size <= m:
        return float("nan")
    d = np.abs(y[m:] - y[:-m])
    d = d[np.isfinite(d)]
    return float(d.mean()) if d.size else float("nan")


def _row_metrics() -> list[pl.Expr]:
    y, p50 = pl.col("actual"), pl.col("p50")
    err = (y - p50).abs()
    denom = y.abs() + p50.abs()
    out = [
        (err / pl.col("mase_scale")).alias("__scaled"),
        pl.when(denom > 0).then(200 * err / denom).otherwise(0.0).alias("__smape"),
        ((y >= pl.col("p10")) & (y <= pl.col("p90"))).cast(pl.Float64).alias("__cover"),
        (y > pl.col("p90")).cast(pl.Float64).alias("__under"),
        (err**2).alias("__sq"),
        err.alias("__abs"),
    ]
    for col, q in QUANTILE_COLUMNS:
        diff = y - pl.col(col)
        out.append(
            pl.when(diff >= 0).then(q * diff).otherwise((q - 1) * diff).alias(f"__pin_{col}")
        )
    return out


def _aggregates() -> list[pl.Expr]:
    ok = pl.col("mase_scale").is_finite() & (pl.col("mase_scale") > 0)
    pin = sum(pl.col(f"__pin_{c}").sum() for c, _ in QUANTILE_COLUMNS)
    return [
        pl.col("__scaled").filter(ok).mean().alias("mase"),
        pl.col("__smape").mean().alias("smape"),
        (2 * pin / len(QUANTILE_COLUMNS) / pl.col("actual").abs().sum()).alias("wql"),
        pl.col("__cover").mean().alias("coverage"),
        pl.col("__under").mean().alias("under_provisioning"),
        pl.col("__sq").mean().sqrt().alias("rmse"),
        pl.col("__abs").mean().alias("mae"),
        pl.len().alias("rows"),
        pl.col("series_id").n_unique().alias("series"),
        (~ok).sum().alias("mase_rows_skipped"),
    ]


def score(
    rows: pl.DataFrame,
    config: ForecastConfig,
    *,
    by: Sequence[str] = ("model",),
    max_horizon: int | None = None,
) -> pl.DataFrame:
    """Metrics per ``by`` x horizon bucket, plus bucket ``all`` (every horizon up to
    ``max_horizon``). ``rows`` needs: series_id, horizon, p10, p50, p90, actual,
    mase_scale and the ``by`` columns. Rows without an actual are ignored."""
    need = {"series_id", "horizon", "p10", "p50", "p90", "actual", "mase_scale", *by}
    missing = sorted(need - set(rows.columns))
    if missing:
        raise ValueError(f"forecast rows lack column(s) {', '.join(missing)}")
    r = rows.filter(pl.col("actual").is_not_null() & pl.col("actual").is_not_nan())
    if max_horizon is not None:
        r = r.filter(pl.col("horizon") <= max_horizon)
    labels = {h: config.bucket_of(h) for h in config.horizons}
    r = r.with_columns(
        pl.col("horizon")
        .replace_strict(labels, default="other", return_dtype=pl.String)
        .alias("bucket"),
        *_row_metrics(),
    )
    per = r.group_by(*by, "bucket").agg(_aggregates())
    total = r.group_by(*by).agg(_aggregates()).with_columns(pl.lit("all").alias("bucket"))
    out = pl.concat([per, total.select(per.columns)])
    order = {f"{a}-{b}": i for i, (a, b) in enumerate(config.buckets)}
    order["all"] = len(order)
    return out.sort(
        *by, pl.col("bucket").replace_strict(order, default=len(order) + 1, return_dtype=pl.Int32)
    )


Nested = dict[str, dict[str, dict[str, float | None]]]


def as_nested(table: pl.DataFrame, *, by: str = "model") -> Nested:
    """``{model: {bucket: {metric: value}}}`` for JSON reports."""
    out: Nested = {}
    metrics = [c for c in table.columns if c not in (by, "bucket")]
    for row in table.iter_rows(named=True):
        out.setdefault(str(row[by]), {})[str(row["bucket"])] = {
            m: (None if row[m] is None else float(row[m])) for m in metrics
        }
    return out
