"""Weekly replacement demand (spare parts) from failure records, and its forecast over a
lead time.

- :func:`weekly_counts`: failures per group (drive model, system, population) per
  calendar week (weeks start on Monday 00:00 UTC), zero weeks included, between given
  first and last weeks.
- :class:`CountForecaster`: the demand over the next ``window`` weeks (the lead time
  plus the review period) as a negative binomial: mean = an exponentially weighted
  recent weekly rate (``half_life_weeks``) x ``window``; dispersion from the variance of
  the past ``window``-week sums (method of moments, ``var = mu + mu^2 / k``); Poisson
  when those sums are not over-dispersed or the history is shorter than two windows.
  Replacement demand is bursty (batches of one drive model, a rack at a time), which
  a Poisson rate alone misses.
- :func:`pooled_dispersion`: one dispersion for several groups (the mean of their
  excess squared coefficients of variation, :func:`excess_dispersion`), for groups
  whose own short history has not shown a batch yet.
- :func:`poisson_quantile`: the constant-rate rule's quantile (the mean rate of all
  past weeks).
- :func:`count_quantiles`: :func:`count_quantile` over arrays (means, sizes and levels
  broadcast together), for the budgeted rule of :mod:`policy.spares`, which searches
  one service level across groups every week.

Every function takes only the weeks before the one being planned; nothing here reads
later counts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl
from scipy import stats

WEEK = timedelta(weeks=1)
WEEK_ORIGIN = datetime(1990, 1, 1, tzinfo=UTC)  # a Monday


def week_index(ts: pl.Expr) -> pl.Expr:
    """Whole weeks since :data:`WEEK_ORIGIN` (a Monday) of a UTC datetime column."""
    secs = (ts - pl.lit(WEEK_ORIGIN)).dt.total_seconds()
    return (secs // int(WEEK.total_seconds())).cast(pl.Int64)


def week_start(index: int) -> datetime:
    return WEEK_ORIGIN + index * WEEK


def weekly_counts(
    events: pl.DataFrame, *, group: str, time: str = "at", first: int, last: int
) -> dict[str, np.ndarray]:
    """Per group, failures in each week index ``first..last`` (inclusive), zeros kept."""
    if last < first:
        raise ValueError(f"last week {last} is before the first {first}")
    counts = (
        events.select(pl.col(group).cast(pl.String).alias("g"), week_index(pl.col(time)).alias("w"))
        .filter(pl.col("w").is_between(first, last))
        .group_by("g", "w")
        .len()
    )
    out: dict[str, np.ndarray] = {}
    for g in sorted(events[group].cast(pl.String).unique().drop_nulls().to_list()):
        series = np.zeros(last - first + 1, dtype=np.int64)
        part = counts.filter(pl.col("g") == g)
        series[part["w"].to_numpy() - first] = part["len"].to_numpy()
        out[g] = series
    return out


def ewma_rate(history: np.ndarray, half_life_weeks: float) -> float:
    """Exponentially weighted mean of the weekly counts (the newest week weighs 1)."""
    if history.size == 0:
        return 0.0
    age = np.arange(history.size - 1, -1, -1, dtype=np.float64)
    w = 0.5 ** (age / half_life_weeks)
    return float((w * history).sum() / w.sum())


def excess_dispersion(history: np.ndarray, window: int) -> float:
    """``1 / k`` of the ``window``-week sums of ``history``: their squared coefficient of
    variation beyond the Poisson one, ``(var - mean) / mean^2`` (method of moments),
    floored at 0; ``nan`` (unknown) under two windows of history or without demand."""
    if history.size < 2 * window:
        return math.nan
    sums = np.convolve(history.astype(np.float64), np.ones(window), mode="valid")
    m, v = float(sums.mean()), float(sums.var(ddof=1))
    if m <= 0:
        return math.nan
    return max(0.0, (v - m) / (m * m))


def window_dispersion(history: np.ndarray, window: int) -> float:
    """Negative-binomial size ``k`` of the ``window``-week sums of ``history`` (method of
    moments); ``inf`` (Poisson) when not over-dispersed or under two windows long."""
    e = excess_dispersion(history, window)
    return math.inf if math.isnan(e) or e <= 0 else 1.0 / e


def pooled_dispersion(histories: Sequence[np.ndarray], window: int) -> float:
    """One size ``k`` for several groups: ``1 /`` the mean over the groups of
    :func:`excess_dispersion` (groups without an estimate left out), so every group
    gets the fleet's burstiness relative to its own mean; ``inf`` when none is
    over-dispersed. A group whose own history has shown no batch yet (a short history)
    is given the tail the fleet has shown."""
    ex = [e for h in histories if not math.isnan(e := excess_dispersion(h, window))]
    mean = sum(ex) / len(ex) if ex else 0.0
    return 1.0 / mean if mean > 0 else math.inf


def count_quantile(mean: float, k: float, q: float) -> int:
    """The ``q``-quantile of a negative binomial of ``mean`` and size ``k`` (Poisson
    when ``k`` is infinite)."""
    if not 0 < q < 1:
        raise ValueError(f"quantile level must be in (0, 1), got {q}")
    if mean <= 0:
        return 0
    if math.isinf(k):
        return int(stats.poisson.ppf(q, mean))
    return int(stats.nbinom.ppf(q, k, k / (k + mean)))


def count_quantiles(mean: np.ndarray, k: np.ndarray, q: np.ndarray) -> np.ndarray:
    """:func:`count_quantile` element-wise (arrays broadcast); a level ``q`` of 0 gives 0
    (stock nothing), and so does a mean of 0."""
    mean, k, q = np.broadcast_arrays(
        np.asarray(mean, dtype=np.float64),
        np.asarray(k, dtype=np.float64),
        np.asarray(q, dtype=np.float64),
    )
    if ((q < 0) | (q >= 1) | np.isnan(q)).any():
        raise ValueError("quantile levels must be in [0, 1)")
    if (np.isnan(mean) | (mean < 0)).any() or (np.isnan(k) | (k <= 0)).any():
        raise ValueError("means must be non-negative and sizes positive")
    out = np.zeros(mean.shape, dtype=np.int64)
    live = (mean > 0) & (q > 0)
    pois = live & np.isinf(k)
    nb = live & ~np.isinf(k)
    if pois.any():
        out[pois] = stats.poisson.ppf(q[pois], mean[pois]).astype(np.int64)
    if nb.any():
        kk, mu = k[nb], mean[nb]
        out[nb] = stats.nbinom.ppf(q[nb], kk, kk / (kk + mu)).astype(np.int64)
    return out


@dataclass(frozen=True)
class CountForecaster:
    """Demand over the next ``window`` weeks from the weeks before (module doc)."""

    window: int
    half_life_weeks: float = 13.0

    def mean(self, history: np.ndarray) -> float:
        return ewma_rate(history, self.half_life_weeks) * self.window

    def quantile(self, history: np.ndarray, q: float) -> int:
        return count_quantile(self.mean(history), window_dispersion(history, self.window), q)

    def quantiles(self, history: np.ndarray, qs: tuple[float, ...]) -> dict[str, int]:
        mu, k = self.mean(history), window_dispersion(history, self.window)
        return {f"p{round(q * 100)}": count_quantile(mu, k, q) for q in qs}


def poisson_quantile(history: np.ndarray, window: int, q: float) -> int:
    """Constant-rate rule: Poisson of the mean weekly count of all ``history`` x window."""
    rate = float(history.mean()) if history.size else 0.0
    return count_quantile(rate * window, math.inf, q)
