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

    def sum_last(self, k: int) -> F64:
        """:meth:`sum` at the last column only, as an ``(nodes, 1)`` array: the same
        cumulative sums subtracted, so the value is bitwise the one :meth:`sum` gives."""
        b = self.cs.shape[1] - 1
        if k < b:
            return self.cs[:, b : b + 1] - self.cs[:, b - k : b - k + 1]
        return self.cs[:, b : b + 1].copy()


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


def window_max_last(x: F64, k: int) -> F64:
    """:func:`window_max` at the last column only, ``(nodes, 1)`` (a max is exact in any
    order, so the value is the one :func:`window_max` gives)."""
    b = x.shape[1]
    tail = x[:, max(0, b - k) :]
    if tail.shape[1] == 0:
        return np.full((x.shape[0], 1), np.nan)
    out: F64 = np.where(np.isnan(tail), -np.inf, tail).max(axis=1, keepdims=True)
    out[np.isneginf(out)] = np.nan
    return out


def _last_true(mask: NDArray[np.bool_]) -> NDArray[np.int64]:
    """Per row, the index of the last true column (-1 when none), ``(nodes, 1)``."""
    b = mask.shape[1]
    rev = mask[:, ::-1]
    any_true = rev.any(axis=1)
    idx = np.where(any_true, b - 1 - rev.argmax(axis=1), -1)
    return idx.astype(np.int64)[:, None]


def forward_fill_last(x: F64, limit: int | None = None) -> F64:
    """:func:`forward_fill` at the last column only, ``(nodes, 1)``."""
    b = x.shape[1]
    last = _last_true(~np.isnan(x))
    rows = np.arange(x.shape[0])[:, None]
    out: F64 = np.where(last >= 0, x[rows, np.maximum(last, 0)], np.nan)
    if limit is not None:
        out[(b - 1) - last > limit] = np.nan
    return out


def buckets_since_last(mask: NDArray[np.bool_], limit: int) -> F64:
    """:func:`buckets_since` at the last column only, ``(nodes, 1)``."""
    last = _last_true(mask)
    dist: F64 = ((mask.shape[1] - 1) - last).astype(np.float64)
    dist[(last < 0) | (dist > limit)] = np.nan
    return dist


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
