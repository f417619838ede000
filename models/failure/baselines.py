"""The baselines the failure model must beat, in the same evaluation.

- :class:`ReactiveRule`: what platforms do today. "Any XID / ECC double-bit error /
  SMART 5-187-197-198 raw > 0 / not-ready event in the window => will fail." It is a
  yes/no rule; its score counts how many of its conditions fire (ties broken by how
  many errors were seen), so it can also fill a top-k budget, and ``score > 0`` is the
  rule itself.
- :class:`LogisticBaseline`: a logistic regression on the same features
  (:func:`models.failure.linear.linear_pipeline`: signed log of each value, missing-value
  indicators, standardised; categories one-hot), with the same negative down-sampling
  and log-odds correction as the LightGBM model.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import numpy as np
import pandas as pd
import polars as pl
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.pipeline import Pipeline
from sklearn.utils.validation import check_is_fitted

from predops.features.definitions import counter_name, window_label
from predops.models.failure.linear import linear_pipeline

NODE_RULE_COUNTERS = ("xid_errors_total", "ecc_dbe_total", "disk_realloc_total")
DRIVE_RULE_COLUMNS = ("smart_5_raw", "smart_187_raw", "smart_197_raw", "smart_198_raw")


def node_rule_columns(window: timedelta = timedelta(hours=24)) -> tuple[str, ...]:
    """The node feature columns the reactive rule reads: XID, ECC DBE and disk
    reallocation increases and the not-ready share, all over ``window``."""
    counters = tuple(counter_name(c, window) for c in NODE_RULE_COUNTERS)
    return (*counters, f"not_ready__frac_{window_label(window)}")


class ReactiveRule:
    """ "Any of these columns > 0 => will fail" as a score.

    ``score = (number of columns > 0) + 0.5 * (1 - exp(-sum of their values))``: a row
    with more firing conditions outranks one with fewer; among equals, more errors rank
    higher. ``fires`` is the rule's yes/no answer (score > 0). Missing values never fire.
    """

    def __init__(self, columns: Sequence[str]) -> None:
        if not columns:
            raise ValueError("the rule needs at least one column")
        self.columns = tuple(columns)

    def score(self, frame: pl.DataFrame) -> np.ndarray:
        missing = [c for c in self.columns if c not in frame.columns]
        if missing:
            raise ValueError(f"reactive rule: frame lacks columns {missing}")
        vals = frame.select(
            [pl.col(c).cast(pl.Float64).fill_null(0.0).fill_nan(0.0) for c in self.columns]
        ).to_numpy()
        vals = np.maximum(vals, 0.0)
        fired = (vals > 0).sum(axis=1).astype(np.float64)
        out: np.ndarray = fired + 0.5 * (1.0 - np.exp(-vals.sum(axis=1)))
        return out

    def fires(self, frame: pl.DataFrame) -> np.ndarray:
        out: np.ndarray = self.score(frame) > 0
        return out


class LogisticBaseline(ClassifierMixin, BaseEstimator):  # type: ignore[misc]
    """Logistic regression on the same features as the model (see module doc).

    ``negative_rate`` down-samples training negatives (all randomness from
    ``random_state``); the intercept is shifted by ``log(negative_rate)`` afterwards so
    probabilities refer to the real base rate.
    """

    def __init__(
        self,
        *,
        C: float = 1.0,
        negative_rate: float | None = 0.1,
        max_iter: int = 500,
        random_state: int | np.random.Generator | None = 0,
    ) -> None:
        self.C = C
        self.negative_rate = negative_rate
        self.max_iter = max_iter
        self.random_state = random_state

    def _pipeline(self, X: pd.DataFrame) -> Pipeline:
        cats = [
            c
            for c in X.columns
            if isinstance(X[c].dtype, pd.CategoricalDtype) or X[c].dtype == object
        ]
        nums = [c for c in X.columns if c not in cats]
        return linear_pipeline(nums, cats, C=self.C, max_iter=self.max_iter)

    def fit(self, X: Any, y: Any) -> LogisticBaseline:
        X = _frame(X)
        yb = np.asarray(y).astype(np.float64)
        if set(np.unique(yb)) != {0.0, 1.0}:
            raise ValueError("LogisticBaseline needs labels of both classes 0 and 1")
        rate = 1.0 if self.negative_rate is None else float(self.negative_rate)
        rng = np.random.default_rng(self.random_state)
        keep = (yb == 1) | (rng.random(yb.size) < rate)
        pipe = self._pipeline(X)
        pipe.fit(X.loc[keep], yb[keep])
        pipe.named_steps["lr"].intercept_ = pipe.named_steps["lr"].intercept_ + math.log(rate)
        self.pipeline_ = pipe
        self.classes_ = np.array([0, 1])
        self.negative_rate_ = rate
        return self

    def predict_proba(self, X: Any) -> np.ndarray:
        check_is_fitted(self)
        out: np.ndarray = self.pipeline_.predict_proba(_frame(X))
        return out

    def predict(self, X: Any) -> np.ndarray:
        out: np.ndarray = (self.predict_proba(X)[:, 1] >= 0.5).astype(int)
        return out


def _frame(X: Any) -> pd.DataFrame:
    if isinstance(X, pd.DataFrame):
        return X
    if hasattr(X, "to_pandas"):
        out: pd.DataFrame = X.to_pandas()
        return out
    return pd.DataFrame(np.asarray(X))
