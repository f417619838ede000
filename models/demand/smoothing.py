"""Windowed Holt-Winters forecasts as model inputs (stacking: the trees learn
corrections to an exponential-smoothing forecast).

Additive Holt-Winters (level + season of ``m`` steps, no trend) started afresh on the
last ``L`` buckets before the origin is a *linear* map of those buckets: the level
starts at the mean of the window's first season, each seasonal state at its bucket's
deviation from it, and every later update is linear in the data. So the h-step
forecast from any origin is ``K[h] @ window``, with one fixed kernel ``K`` (H x L) per
setting (alpha, gamma), computed once by running the recursion on the L unit impulses.
This is exact for every origin, cheap (one dot product of L per pair), and reads
nothing before the window, so a forecast still depends only on the model's lookback.
A window reaching before the series' start repeats its first bucket: the smoothing
then starts at the first observation, as ETS on the whole history would.

Each series gets the setting of :data:`SETTINGS` whose forecasts had the smallest mean
absolute error over that series' training pairs (as ETS estimates its smoothing
parameters per series, on the fit data only).

Pure numpy; no I/O.
"""

from __future__ import annotations

import itertools
from functools import cache

import numpy as np

SETTINGS: tuple[tuple[float, float], ...] = tuple(
    (alpha, gamma) for alpha in (0.05, 0.1, 0.2, 0.4, 0.7, 1.0) for gamma in (0.1, 0.3, 0.5)
)
"""(alpha: level smoothing, gamma: season smoothing) settings a series can get."""
CHUNK_CELLS = 8_000_000
"""Window values gathered at once (pairs x window length): ~64 MB of float64."""


@cache
def kernel(alpha: float, gamma: float, m: int, window: int, max_h: int) -> np.ndarray:
    """(max_h, window) weights: row h-1 maps the window (oldest first) to the h-step
    Holt-Winters forecast from its last bucket."""
    if not (0 < alpha <= 1 and 0 <= gamma <= 1):
        raise ValueError("alpha must be in (0, 1] and gamma in [0, 1]")
    if m < 1 or window < m:
        raise ValueError(f"window {window} must hold at least one season of {m}")
    y = np.eye(window)  # column j: the unit impulse at window position j
    level = y[:m].mean(axis=0)
    season = y[:m] - level  # (m, window): state of each phase
    for t in range(m, window):
        p = t % m
        new_level = alpha * (y[t] - season[p]) + (1 - alpha) * level
        season[p] = gamma * (y[t] - new_level) + (1 - gamma) * season[p]
        level = new_level
    h = np.arange(1, max_h + 1)
    out: np.ndarray = level[None, :] + season[(window - 1 + h) % m]
    return out


def filled(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Values with gaps carried forward inside each series and the leading gap set to
    the series' first observed value (a missing bucket is unknown, not zero)."""
    out = values.astype(np.float64).copy()
    for a, b in itertools.pairwise(starts):
        seg = out[a:b]
        ok = np.flatnonzero(np.isfinite(seg))
        if ok.size == 0:
            seg[:] = 0.0
            continue
        idx = np.where(np.isfinite(seg), np.arange(seg.size), ok[0])
        np.maximum.accumulate(idx, out=idx)
        seg[:] = seg[idx]
    return out


def forecasts(
    values: np.ndarray,
    first_row: np.ndarray,
    origins: np.ndarray,
    h: np.ndarray,
    kernels: np.ndarray,
) -> np.ndarray:
    """(len(origins), n_settings) Holt-Winters forecasts of each (origin, h) pair.

    ``values``: :func:`filled` panel values; ``first_row``: each origin's series start
    (a window reaching before it repeats the first bucket); ``kernels``: (n_settings,
    max_h, L) from :func:`kernel`.

    Each series with a pair is preceded by ``L - 1`` copies of its first bucket, so
    every window is one contiguous row of a strided view: the pairs, taken in order of
    ``h``, are each copied once, and each ``h`` is one product with its kernels."""
    n_set, _, window = kernels.shape
    out = np.empty((origins.size, n_set))
    if origins.size == 0:
        return out
    starts, rank = np.unique(first_row, return_inverse=True)
    # padded: [pad(s0), values[s0:s1], pad(s1), values[s1:s2], ...] (before s0 as is)
    pieces = [values[: starts[0]]]
    for i, s in enumerate(starts):
        end = starts[i + 1] if i + 1 < starts.size else values.size
        pieces += [np.full(window - 1, values[s]), values[s:end]]
    padded = np.concatenate(pieces)
    rows = np.lib.stride_tricks.sliding_window_view(padded, window)
    top = origins + (window - 1) * rank  # each window's first row: pos(o) - window + 1
    order = np.argsort(h, kind="stable")
    chunk = max(1, CHUNK_CELLS // window)
    for a in range(0, order.size, chunk):
        idx = order[a : a + chunk]
        hh = h[idx]
        cuts = np.flatnonzero(np.diff(hh)) + 1
        for part in np.split(np.arange(idx.size), cuts):
            sel = idx[part]
            out[sel] = rows[top[sel]] @ kernels[:, hh[part[0]] - 1, :].T
    return out


def kernels_for(m: int, window: int, max_h: int) -> np.ndarray:
    """(n_settings, max_h, window): the kernel of every setting of :data:`SETTINGS`."""
    return np.stack([kernel(a, g, m, window, max_h) for a, g in SETTINGS])


def best_settings(errors: np.ndarray, series_of_pair: np.ndarray, n_series: int) -> np.ndarray:
    """Per series, the setting with the smallest mean absolute error over its pairs
    (``errors``: (pairs, n_settings) absolute errors); a series without pairs gets the
    setting best over all series."""
    n_set = errors.shape[1]
    sums = np.zeros((n_series, n_set))
    np.add.at(sums, series_of_pair, errors)
    counts = np.bincount(series_of_pair, minlength=n_series)
    overall = int(np.argmin(errors.sum(axis=0))) if errors.size else 0
    out: np.ndarray = np.where(counts > 0, np.argmin(sums, axis=1), overall)
    return out
