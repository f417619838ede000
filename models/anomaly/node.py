"""Per-node, per-metric anomaly scores from a node feature row, with no labels.

For every gauge (GPU temperature, power, utilisation, CPU utilisation, memory) two robust
z-scores, each scaled by the fleet's median / MAD of the same statistic in a reference
frame (``fit``):

- **own history**: the row's ``<gauge>__z_own_24h`` (last hour's mean against the node's
  own 24 h mean, in the node's own 24 h standard deviations);
- **peers**: the row's ``<gauge>__mean_1h__rack_dev`` (last hour's mean minus the
  median of its rack at the same time), where the feature set has one.

The metric's score is the larger of the two, as surprise (``-log10`` two-sided normal
tail probability). For every error counter the score is the surprise of its increase
over the last 24 h at the node's own long-run daily rate (its count before those 24 h
divided by its age, floored at a fraction of the fleet's median rate so a node with no
history is not infinitely surprised by its first error). Errors come in bursts (one
crashing job logs a handful of XIDs), so the count is judged against a negative
binomial with shape ``counter_shape`` (variance ``m + m^2 / shape``), not a Poisson,
which would call every burst a one-in-a-billion event.

Everything comes from one feature row plus the fitted reference, so offline (training
frames) and online (latest rows) scores are the same computation. ``anomaly__max`` is
the node's worst metric; :meth:`NodeAnomalyScorer.flags` flags a node when it exceeds
the ``1 - flag_rate`` quantile of ``anomaly__max`` over the reference frame: with a dozen
heavy-tailed metrics per node, a fixed surprise would flag far more rows than its
nominal tail probability says, while a rate learned without labels keeps the flag
volume what the operator asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache, partial
from typing import Any

import numpy as np
import polars as pl
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from predops.features.definitions import (
    COUNTERS,
    GAUGES,
    NodeFeatureSpec,
    counter_name,
    gauge_name,
    window_label,
)
from predops.models.anomaly.robust import (
    finite,
    median_mad,
    negbin_surprise,
    normal_surprise,
    robust_z,
)

Column = Callable[[str], np.ndarray]
"""A feature's values by name (float64, NaN when missing)."""

PREFIX = "anomaly__"
MAX_COLUMN = f"{PREFIX}max"
TRANSFORM_ROWS = 262_144
"""Rows scored at a time by :meth:`NodeAnomalyScorer.transform` (bounds the working
arrays on training frames of millions of rows)."""


_DEFAULT_SPEC = NodeFeatureSpec()


def score_name(metric: str) -> str:
    return f"{PREFIX}{metric}"


def _matrix(column: Column, names: list[str]) -> np.ndarray:
    """The named columns side by side: n x len(names), float64."""
    return np.asarray([column(name) for name in names], dtype=np.float64).T


@lru_cache(maxsize=8)
def _layout(spec: NodeFeatureSpec) -> dict[str, dict[str, str]]:
    """The feature columns each metric is scored from, by metric (gauges, then counters);
    cached per feature spec (read-only: callers never modify it)."""
    base = window_label(spec.baseline_window)
    short = spec.short_window
    out: dict[str, dict[str, str]] = {}
    for g in (g for g in GAUGES if g in spec.gauges):
        cols = {"own": f"{g}__z_own_{base}"}
        if g in spec.peer_gauges and "rack" in spec.peer_groups:
            cols["peer"] = f"{gauge_name(g, 'mean', short)}__rack_dev"
        out[g] = cols
    day = next((w for w in spec.windows if w.total_seconds() == 86400), None)
    if day is not None:
        for c in (c for c in COUNTERS if c in spec.counters):
            out[c.removesuffix("_total")] = {
                "increase": counter_name(c, day),
                "total": counter_name(c, None),
                "age": "node__age_days",
            }
    return out


class NodeAnomalyScorer(BaseEstimator):  # type: ignore[misc]
    """Robust own-history / peer / error-rate surprise per node metric (module doc).

    ``rate_floor_share``: the own error rate is floored at this share of the fleet's
    median positive rate; ``counter_shape``: the negative binomial shape for error
    counts (smaller = burstier); ``flag_rate``: the share of reference rows :meth:`flags` would
    have flagged (sets the fitted ``threshold_``, a surprise).
    """

    def __init__(
        self,
        *,
        spec: NodeFeatureSpec | None = None,
        rate_floor_share: float = 0.1,
        counter_shape: float = 0.5,
        flag_rate: float = 0.001,
    ) -> None:
        self.spec = spec
        self.rate_floor_share = rate_floor_share
        self.counter_shape = counter_shape
        self.flag_rate = flag_rate

    def _columns(self) -> dict[str, dict[str, str]]:
        return _layout(self.spec or _DEFAULT_SPEC)

    @property
    def metrics(self) -> list[str]:
        return list(self._columns())

    def is_counter(self, metric: str) -> bool:
        """Whether ``metric``'s score is an error-rate surprise (else a gauge z-score)."""
        return "increase" in self._columns().get(metric, {})

    def feature_names_out(self) -> list[str]:
        return [score_name(m) for m in self._columns()] + [MAX_COLUMN]

    @staticmethod
    def _col(frame: pl.DataFrame, name: str) -> np.ndarray:
        if name not in frame.columns:
            return np.full(frame.height, np.nan)
        out: np.ndarray = frame[name].cast(pl.Float64).fill_null(np.nan).to_numpy()
        return out

    def fit(self, frame: pl.DataFrame, y: Any = None) -> NodeAnomalyScorer:
        """Learn the fleet's median / MAD of each statistic from a reference frame, and
        the flag threshold."""
        if not 0.0 < self.flag_rate < 1.0:
            raise ValueError(f"flag_rate must be in (0, 1), got {self.flag_rate}")
        ref: dict[str, tuple[float, float]] = {}
        rates: dict[str, float] = {}
        layout = self._columns()
        counters = [m for m, cols in layout.items() if "increase" in cols]
        for metric in counters:  # one at a time: a training frame has millions of rows
            rate = self._counter_inputs(partial(self._col, frame), [metric])[1][:, 0]
            pos = rate[np.isfinite(rate) & (rate > 0)]
            rates[metric] = float(np.median(pos)) if pos.size else 1.0
        for metric, cols in layout.items():
            for kind in ("own", "peer"):
                if kind in cols:
                    ref[f"{metric}:{kind}"] = median_mad(self._col(frame, cols[kind]))
        self.reference_ = ref
        self.fleet_rate_per_day_ = rates
        self.threshold_ = 0.0
        worst = self.transform(frame)[MAX_COLUMN].to_numpy() if frame.height else np.zeros(0)
        self.threshold_ = float(np.quantile(worst, 1.0 - self.flag_rate)) if worst.size else 0.0
        return self

    def _counter_inputs(self, column: Column, counters: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Each counter's 24 h increase and its own long-run daily rate before those 24 h
        (NaN where the total is unknown): two n x counters arrays."""
        layout = self._columns()
        inc = _matrix(column, [layout[c]["increase"] for c in counters])
        total = _matrix(column, [layout[c]["total"] for c in counters])
        age = np.maximum(_matrix(column, [layout[c]["age"] for c in counters]), 1.0)
        with np.errstate(invalid="ignore"):
            rate: np.ndarray = np.maximum(total - finite(inc), 0.0) / age
        return inc, rate

    def transform(self, frame: pl.DataFrame) -> pl.DataFrame:
        """One surprise column per metric plus ``anomaly__max`` (0 when nothing is known)."""
        parts = [
            self.transform_columns(partial(self._col, part), part.height)
            for part in frame.iter_slices(TRANSFORM_ROWS)
        ] or [self.transform_columns(partial(self._col, frame), 0)]
        return pl.DataFrame(
            {k: np.concatenate([p[k] for p in parts]).astype(np.float32) for k in parts[0]}
        )

    def transform_columns(self, column: Column, n: int) -> dict[str, np.ndarray]:
        """:meth:`transform` on arrays: ``column(name)`` gives a feature's ``n`` values as
        float64 (NaN when missing); returns float64 scores by output name. Serving scores
        single rows through this, without building frames, so the metrics are scored
        together (one array operation per step for all gauges, one for all counters), not
        one metric at a time."""
        check_is_fitted(self)
        layout = self._columns()
        gauges = [m for m, cols in layout.items() if "increase" not in cols]
        counters = [m for m, cols in layout.items() if "increase" in cols]
        scores: dict[str, np.ndarray] = {}
        worst: list[np.ndarray] = []
        if gauges:
            found = self._gauge_z(column, n, gauges)
            scores.update(zip(gauges, found.T, strict=True))
            worst.append(found.max(axis=1))
        if counters:
            found = self._counter_surprise(column, counters)
            scores.update(zip(counters, found.T, strict=True))
            worst.append(found.max(axis=1))
        cols_out = {score_name(m): scores[m] for m in layout}
        cols_out[MAX_COLUMN] = np.maximum.reduce(worst) if worst else np.zeros(n, dtype=np.float64)
        return cols_out

    def _gauge_z(self, column: Column, n: int, gauges: list[str]) -> np.ndarray:
        """Surprise of the larger |robust z| (own history, peers) per gauge: n x gauges."""
        layout = self._columns()
        nan = np.full(n, np.nan)
        best: np.ndarray | None = None
        for kind in ("own", "peer"):
            if not any(kind in layout[g] for g in gauges):
                continue
            values = np.asarray(
                [column(layout[g][kind]) if kind in layout[g] else nan for g in gauges]
            ).T
            ref = [self.reference_.get(f"{g}:{kind}", (np.nan, np.nan)) for g in gauges]
            center = np.asarray([c for c, _ in ref], dtype=np.float64)
            scale = np.asarray([s for _, s in ref], dtype=np.float64)
            z = np.abs(robust_z(values, center, scale))
            best = z if best is None else np.fmax(best, z)
        assert best is not None  # every gauge has an own-history column
        return normal_surprise(best)

    def _counter_surprise(self, column: Column, counters: list[str]) -> np.ndarray:
        """Negative binomial surprise of each counter's 24 h increase: n x counters."""
        inc, rate = self._counter_inputs(column, counters)
        lam = finite(rate)
        fleet = np.asarray([self.fleet_rate_per_day_.get(c, 1.0) for c in counters])
        lam = np.maximum(lam, self.rate_floor_share * fleet)
        return negbin_surprise(inc, lam, self.counter_shape)

    def flags(self, frame: pl.DataFrame) -> np.ndarray:
        """Rows whose worst metric is more surprising than the fitted ``threshold_``."""
        out: np.ndarray = self.transform(frame)[MAX_COLUMN].to_numpy() > self.threshold_
        return out
