"""Robust z-scores and surprise, on arrays.

A robust z-score measures a value against a median and a median absolute deviation
(MAD, scaled by 1.4826 so it estimates the standard deviation of normal data): a few
wild values in the reference move neither. *Surprise* turns any score into one scale,
``-log10`` of the (two-sided normal or Poisson upper-tail) probability of a value at
least that extreme: 2 = "1 in 100", 4 = "1 in 10,000".
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from scipy import special

MAD_TO_SD = 1.4826
MAX_SURPRISE = 300.0


def median_mad(x: np.ndarray) -> tuple[float, float]:
    """Median and MAD-based scale (``1.4826 * MAD``) of the finite values of ``x``
    (NaN, NaN when none)."""
    v = x[np.isfinite(x)]
    if v.size == 0:
        return float("nan"), float("nan")
    med = float(np.median(v))
    return med, float(MAD_TO_SD * np.median(np.abs(v - med)))


def robust_z(x: np.ndarray, center: float | np.ndarray, scale: float | np.ndarray) -> np.ndarray:
    """``(x - center) / scale``; NaN where ``scale`` is not positive or ``x`` missing."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out: np.ndarray = np.where(np.asarray(scale) > 0, (x - center) / scale, np.nan)
    return out


_BIG = np.finfo(np.float64).max


def finite(x: np.ndarray, *, posinf: float = _BIG) -> np.ndarray:
    """``np.nan_to_num(x, nan=0.0, posinf=posinf)`` (float64) without its per-call
    overhead, which dominated single-node scoring (dozens of calls on tiny arrays)."""
    x = np.asarray(x, dtype=np.float64)
    out: np.ndarray = np.where(
        np.isnan(x), 0.0, np.where(x == np.inf, posinf, np.where(x == -np.inf, -_BIG, x))
    )
    return out


def normal_surprise(z: np.ndarray) -> np.ndarray:
    """``-log10`` of the two-sided normal tail probability of ``|z|`` (0 for NaN)."""
    zz = finite(np.abs(z), posinf=40.0)
    # scipy.special directly: the same values as scipy.stats' ``norm.logsf``, without its
    # ~0.4 ms per-call overhead (one scoring request calls this per metric).
    logp = np.log(2.0) + special.log_ndtr(-zz)
    out: np.ndarray = np.minimum(-logp / np.log(10.0), MAX_SURPRISE)
    return out


def _nbinom_sf(k: np.ndarray, n: float, p: np.ndarray) -> np.ndarray:
    """``P(X > k)`` of a negative binomial (``n`` successes, success probability ``p``,
    real ``n`` allowed): the regularised incomplete beta ``I_{1-p}(k + 1, n)``."""
    out: np.ndarray = special.betainc(k + 1, n, 1 - p)
    return out


def _log_upper(sf: Any, k: np.ndarray, *params: float | np.ndarray) -> np.ndarray:
    """``log P(X > k)`` from a survival function (``scipy.special.pdtrc``, :func:`_nbinom_sf`):
    0 below the support (``k < 0``), as scipy.stats' ``logsf`` gives, at a fraction of its
    per-call cost."""
    out: np.ndarray = np.where(k < 0, 0.0, np.log(sf(np.maximum(k, 0), *params)))
    return out


def poisson_surprise(k: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """``-log10 P(X >= k)`` for ``X ~ Poisson(lam)``: how unusual ``k`` new errors are
    at an expected ``lam`` (0 when ``k <= 0`` or missing)."""
    kk = finite(k)
    ll = np.maximum(finite(lam), 1e-12)
    with np.errstate(divide="ignore"):
        logp = _log_upper(special.pdtrc, np.ceil(kk) - 1, ll)
    out: np.ndarray = np.where(kk > 0, np.minimum(-logp / np.log(10.0), MAX_SURPRISE), 0.0)
    return out


def negbin_surprise(k: np.ndarray, mean: np.ndarray, shape: float) -> np.ndarray:
    """``-log10 P(X >= k)`` for a negative binomial with mean ``mean`` and shape
    ``shape`` (variance ``mean + mean^2 / shape``): counts that come in bursts. Tends to
    :func:`poisson_surprise` as ``shape`` grows; 0 when ``k <= 0`` or missing."""
    kk = finite(k)
    mm = np.maximum(finite(mean), 1e-12)
    with np.errstate(divide="ignore"):
        logp = _log_upper(_nbinom_sf, np.ceil(kk) - 1, shape, shape / (shape + mm))
    out: np.ndarray = np.where(kk > 0, np.minimum(-logp / np.log(10.0), MAX_SURPRISE), 0.0)
    return out


def rolling_robust_z(
    x: np.ndarray,
    window: int,
    *,
    min_history: int,
    min_scale: float | np.ndarray = 0.0,
    sd_share: float = 0.0,
) -> np.ndarray:
    """Causal robust z-score of each value against the ``window`` values before it.

    Value ``i`` is compared with the median and MAD scale of ``x[i-window:i]`` (never
    itself or anything later); NaN until ``min_history`` earlier values exist. The
    scale is floored at ``min_scale`` (a number, or one per value): a flat history would
    make any change infinitely surprising. ``sd_share`` also floors it at that share of
    the history's standard deviation: on quantised series (a CPU % that mostly repeats
    two values) the MAD is 0 although the values do vary.
    """
    x = np.asarray(x, dtype=np.float64)
    n = x.size
    floor = np.broadcast_to(np.asarray(min_scale, dtype=np.float64), (n,))
    out = np.full(n, np.nan)
    if n <= min_history:
        return out
    padded = np.concatenate([np.full(window, np.nan), x])
    # Row i of the view holds x[i-window : i] (the history of value i).
    hist = sliding_window_view(padded, window)[:n]
    enough = np.isfinite(hist).sum(axis=1) >= min_history
    idx = np.flatnonzero(enough)
    if idx.size == 0:
        return out
    # Chunks bound the temporary (rows x window) arrays.
    for lo in range(0, idx.size, 4096):
        rows = idx[lo : lo + 4096]
        h = hist[rows]
        med = np.nanmedian(h, axis=1)
        scale = MAD_TO_SD * np.nanmedian(np.abs(h - med[:, None]), axis=1)
        scale = np.maximum(scale, floor[rows])
        if sd_share > 0:
            scale = np.maximum(scale, sd_share * np.nanstd(h, axis=1))
        out[rows] = robust_z(x[rows], med, scale)
    return out
