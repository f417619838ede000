"""Trailing-window kernels over a (nodes x buckets) grid, in numpy.

Every function takes 2-D arrays whose rows are nodes and whose columns are consecutive
buckets, and returns the value for the window of ``k`` buckets ending at each column.
Each node's row is processed on its own (cumulative sums along the row), so a node's
result never depends on another node's data, not even through rounding.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

F64 = NDArray[np.float64]


class Windowed:
    """Cumulative sums of one (nodes x buckets) array: window sums of any length from
    one pass (compute once, ask for every window)."""

    def __init__(self, x: F64) -> None:
        n, b = x.shape
        self.cs = np.zeros((n, b + 1))
        np.cumsum(x, axis=1, out=self.cs[:, 1:])

    def sum(self, k: int) -> F64:
        """Sum of the last ``k`` buckets at each column (fewer at the start of a row)."""
        b = self.cs.shape[1] - 1
        out: F64 = self.cs[:, 1:].copy()
        if k <= b:
            out[:, k:] -= self.cs[:, 1 : b + 1 - k]
        return out


def window_sum(x: F64, k: int) -> F64:
    """Sum of the last ``k`` buckets (fewer at the start of the row)."""
    return Windowed(x).sum(k)


def window_max(x: F64, k: int) -> F64:
    """Max of the last ``k`` buckets, ignoring NaN (NaN when all are NaN).

    Two overlapping power-of-two windows cover any ``k`` (O(log k) passes)."""
    filled = np.where(np.isnan(x), -np.inf, x)
    levels = [filled]
    p = 1
    while 2 * p <= k:
        prev = levels[-1]
        nxt = prev.copy()
        nxt[:, p:] = np.maximum(prev[:, p:], prev[:, :-p])
        levels.append(nxt)
        p *= 2
    top = levels[-1]
    out = top.copy()
    if p < k:
        shift = k - p
        out[:, shift:] = np.maximum(top[:, shift:], top[:, :-shift])
    out[np.isneginf(out)] = np.nan
    return out


def last_index(mask: NDArray[np.bool_]) -> NDArray[np.int64]:
    """Per column, the index of the latest column at or before it where ``mask`` is
    true (-1 when none)."""
    b = mask.shape[1]
    idx = np.where(mask, np.arange(b), -1)
    out: NDArray[np.int64] = np.maximum.accumulate(idx, axis=1)
    return out


def forward_fill(x: F64, limit: int | None = None) -> F64:
    """Carry the last non-NaN value forward along each row, at most ``limit`` buckets."""
    last = last_index(~np.isnan(x))
    rows = np.arange(x.shape[0])[:, None]
    out = np.where(last >= 0, x[rows, np.maximum(last, 0)], np.nan)
    if limit is not None:
        out[np.arange(x.shape[1]) - last > limit] = np.nan
    return out


def buckets_since(mask: NDArray[np.bool_], limit: int) -> F64:
    """Buckets since the latest bucket where ``mask`` holds (0 = this one); NaN when
    none within ``limit`` buckets."""
    last = last_index(mask)
    dist = (np.arange(mask.shape[1]) - last).astype(np.float64)
    dist[(last < 0) | (dist > limit)] = np.nan
    return dist
