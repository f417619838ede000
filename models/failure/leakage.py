"""Two checks that a failure model did not see the future.

- :func:`point_in_time_mismatches`: rebuild the features *as of* sampled times from
  data cut at those times, and compare them with the rows of the training frame stamped
  at the same times. A feature computed from anything later (the next failure, a label,
  a full-history statistic) differs. This is the check that matters: it is how serving
  will compute the feature.
- :func:`dominant_features`: features that carry most of a fitted model's gain, the
  usual fingerprint of a leak once a model has been trained with one.
- :func:`too_good_features`: any single feature that separates the labels almost
  perfectly on its own (ROC AUC >= ``max_auc``, either direction) is reported: real
  precursors are noisy, and a feature that alone predicts failures within hours almost
  always encodes the answer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

import numpy as np
import polars as pl
from sklearn.metrics import roc_auc_score


def point_in_time_mismatches(
    frame: pl.DataFrame,
    rebuild: Callable[[datetime], pl.DataFrame],
    times: Iterable[datetime],
    *,
    columns: Sequence[str],
    entity: str = "node_id",
    time: str = "ts",
    rtol: float = 1e-4,
    atol: float = 1e-4,
) -> dict[str, dict[str, Any]]:
    """Columns whose training-frame value at ``t`` differs from ``rebuild(t)``'s.

    ``rebuild(t)`` must return one row per entity with features computed only from data
    at or before ``t`` (what serving sees). Returns ``{column: {"rows": n differing,
    "example": {...}}}``; empty means point-in-time correct at the sampled times.
    """
    found: dict[str, dict[str, Any]] = {}
    for t in times:
        offline = frame.filter(pl.col(time) == t).select(entity, *columns)
        if offline.height == 0:
            continue
        online = rebuild(t).select(entity, *columns)
        both = offline.join(online, on=entity, how="inner", suffix="__online")
        for c in columns:
            a = both[c]
            b = both[f"{c}__online"]
            if a.dtype.is_numeric() and b.dtype.is_numeric():
                x = a.cast(pl.Float64).to_numpy()
                y = b.cast(pl.Float64).to_numpy()
                same_nan = np.isnan(x) & np.isnan(y)
                close = np.isclose(x, y, rtol=rtol, atol=atol) | same_nan
            else:
                close = (
                    (a.cast(pl.String) == b.cast(pl.String))
                    .fill_null(a.is_null() & b.is_null())
                    .to_numpy()
                )
            bad = np.flatnonzero(~close)
            if bad.size:
                entry = found.setdefault(c, {"rows": 0, "example": None})
                entry["rows"] += int(bad.size)
                if entry["example"] is None:
                    i = int(bad[0])
                    entry["example"] = {
                        entity: both[entity][i],
                        time: t.isoformat(),
                        "training_frame": a[i],
                        "as_of_rebuild": b[i],
                    }
    return found


def too_good_features(X: pl.DataFrame, y: Any, *, max_auc: float = 0.97) -> dict[str, float]:
    """Numeric features whose ROC AUC alone (either direction; missing values ranked
    lowest) is at least ``max_auc``, with that AUC."""
    yy = np.asarray(y, dtype=np.float64)
    if yy.sum() == 0 or yy.sum() == yy.size:
        raise ValueError("too_good_features needs labels of both classes")
    out: dict[str, float] = {}
    for c in X.columns:
        if not X[c].dtype.is_numeric():
            continue
        v = X[c].cast(pl.Float64).to_numpy()
        lowest = np.nanmin(v) - 1.0 if np.isfinite(v).any() else 0.0
        v = np.where(np.isfinite(v), v, lowest)
        auc = float(roc_auc_score(yy, v))
        auc = max(auc, 1.0 - auc)
        if auc >= max_auc:
            out[c] = auc
    return out


def dominant_features(model: Any, *, share: float = 0.5) -> dict[str, float]:
    """Features of a fitted :class:`NodeFailureClassifier` holding at least ``share`` of
    its total gain (honest failure models spread their gain over many noisy signals)."""
    gain = model.feature_importance("gain")
    total = sum(gain.values())
    if total <= 0:
        return {}
    return {k: v / total for k, v in gain.items() if v / total >= share}
