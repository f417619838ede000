"""A streaming anomaly detector for one metric series (used on NAB).

Each value is scored against the values before it only (never later ones): its robust
z-score against the trailing ``window`` values (median / MAD), and the same for its
change from the previous value (a sudden jump inside the normal range is unusual too).
The surprise is the larger of the two (``-log10`` two-sided normal tail probability);
values with fewer than ``min_history`` predecessors score 0.

:func:`alarm_score` reports only *new* surprise: how much a value's surprise exceeds the
largest surprise of the ``window`` values before it. A run of unusual values alarms
once, at its start, which is what an operator (and NAB, which charges every repeated
alarm as a false positive) wants.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from predops.models.anomaly.robust import normal_surprise, rolling_robust_z


def series_surprise(
    values: np.ndarray,
    *,
    window: int = 288,
    min_history: int = 48,
    rel_floor: float = 0.01,
    sd_share: float = 0.5,
) -> np.ndarray:
    """Surprise of each value of ``values`` (see module doc).

    ``rel_floor`` floors the robust scale at that share of the mean absolute level of
    the values so far: a flat stretch would otherwise make any wiggle infinitely
    surprising; ``sd_share`` floors it at that share of the window's standard deviation
    (quantised series have a MAD of 0).
    """
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError("values must be one series (1-D)")
    finite = np.isfinite(x)
    csum = np.cumsum(np.where(finite, np.abs(x), 0.0))
    count = np.cumsum(finite)
    # Mean |x| of the values before each one (causal).
    prior = np.concatenate([[0.0], csum[:-1] / np.maximum(count[:-1], 1)])
    floor = np.maximum(rel_floor * prior, 1e-12)
    z_level = rolling_robust_z(
        x, window, min_history=min_history, min_scale=floor, sd_share=sd_share
    )
    dx = np.concatenate([[np.nan], np.diff(x)])
    z_step = rolling_robust_z(
        dx, window, min_history=min_history, min_scale=floor, sd_share=sd_share
    )
    z = np.fmax(np.abs(np.nan_to_num(z_level)), np.abs(np.nan_to_num(z_step)))
    return normal_surprise(z)


def alarm_score(values: np.ndarray, *, window: int = 288, min_history: int = 48) -> np.ndarray:
    """New surprise of each value: its surprise minus the largest of the ``window``
    values before it, floored at 0 (see module doc)."""
    s = series_surprise(values, window=window, min_history=min_history)
    prior = sliding_window_view(np.concatenate([np.zeros(window), s]), window)[: s.size]
    out: np.ndarray = np.maximum(s - prior.max(axis=1), 0.0)
    return out
