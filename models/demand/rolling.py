"""``RollingWindows``: the last ``cap`` values per (key, column) in one float32 array of
ring buffers, for the served combination's rolling state (each candidate's absolute
errors and the served residuals per series and horizon bucket).

Memory is bounded by the keys, not by time: ``keys x columns x cap x 4`` bytes plus two
int32 counters per (key, column). At fleet scale (10,000 node series x 4 buckets, 5
candidates' errors and the residuals, 720 each) that is 0.70 GB, where Python lists of
floats took 5.55 GB (32 bytes a value: the float and its list slot);
``benchmarks/bench_selection_state.py`` measures both.

Values are appended in the order given, the oldest dropped beyond ``cap``. Means are
summed in float64 over the buffer's slots in slot order, so the same values appended
in the same order give the same mean to the last bit, whichever other keys exist and
in whatever order they arrived.

Pure numpy; no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence

import numpy as np

Key = tuple[str, str]
"""(series, horizon bucket)."""
F32_MAX = float(np.finfo(np.float32).max)


class RollingWindows:
    """Ring buffers of the last ``cap`` values per (key, column) (see the module
    docstring). ``columns`` names the columns; ``cap`` is the window length."""

    def __init__(self, columns: Sequence[str], cap: int) -> None:
        if int(cap) < 1:
            raise ValueError(f"cap must be >= 1, got {cap!r}")
        if len(columns) < 1 or len(set(columns)) != len(columns):
            raise ValueError(f"columns must be distinct names, got {list(columns)!r}")
        self.columns = tuple(columns)
        self.cap = int(cap)
        self._col = {c: j for j, c in enumerate(self.columns)}
        self._row: dict[Key, int] = {}
        self._buf = np.zeros((0, len(self.columns), self.cap), dtype=np.float32)
        self._n = np.zeros((0, len(self.columns)), dtype=np.int32)
        self._head = np.zeros((0, len(self.columns)), dtype=np.int32)

    # ------------------------------------------------------------------ keys
    def __len__(self) -> int:
        return len(self._row)

    def __iter__(self) -> Iterator[Key]:
        return iter(list(self._row))

    def keys(self) -> list[Key]:
        """Every key, in the order each first received a value."""
        return list(self._row)

    @property
    def nbytes(self) -> int:
        """Bytes of the arrays (the buffers' allocated rows included)."""
        return int(self._buf.nbytes + self._n.nbytes + self._head.nbytes)

    def _rows(self, keys: Sequence[Key]) -> np.ndarray:
        """Row of each key, new keys getting the next rows (the arrays grow by half)."""
        for k in dict.fromkeys(keys):
            if k not in self._row:
                self._row[k] = len(self._row)
        rows = np.fromiter(map(self._row.__getitem__, keys), dtype=np.int64, count=len(keys))
        need = len(self._row)
        have = self._buf.shape[0]
        if need > have:
            new = max(need, have + have // 2, 16)
            grow = new - have
            cols = len(self.columns)
            self._buf = np.concatenate(
                [self._buf, np.zeros((grow, cols, self.cap), dtype=np.float32)]
            )
            self._n = np.concatenate([self._n, np.zeros((grow, cols), dtype=np.int32)])
            self._head = np.concatenate([self._head, np.zeros((grow, cols), dtype=np.int32)])
        return rows

    def column(self, name: str) -> int:
        j = self._col.get(name)
        if j is None:
            raise KeyError(f"unknown column {name!r}; known: {', '.join(self.columns)}")
        return j

    # ------------------------------------------------------------------ write
    def extend(self, keys: Sequence[Key], column: str, values: np.ndarray) -> None:
        """Append ``values[i]`` to ``keys[i]``'s window of ``column``, in order (a key's
        values keep their order; beyond ``cap`` the oldest go). Non-finite values are
        refused, and so are values float32 cannot hold: a window holds scored values only."""
        j = self.column(column)
        v = np.asarray(values, dtype=np.float64)
        if v.ndim != 1 or v.size != len(keys):
            raise ValueError(f"{len(keys)} keys but values of shape {v.shape}")
        if v.size == 0:
            return
        bad = ~(np.abs(v) <= F32_MAX)  # NaN, inf, or beyond what float32 holds
        if bad.any():
            raise ValueError(
                f"column {column!r}: non-finite or beyond float32 value at position(s) "
                f"{np.flatnonzero(bad)[:5].tolist()}"
            )
        rows = self._rows(keys)
        order = np.argsort(rows, kind="stable")  # each key's values in their order
        r = rows[order]
        first = np.r_[True, r[1:] != r[:-1]]
        starts = np.flatnonzero(first)
        counts = np.diff(np.r_[starts, r.size])
        rank = np.arange(r.size) - np.repeat(starts, counts)
        count = np.repeat(counts, counts)
        keep = rank >= count - self.cap  # a batch longer than the window keeps its tail
        slot = (self._head[r, j] + rank) % self.cap
        self._buf[r[keep], j, slot[keep]] = v[order][keep]
        uniq = r[starts]
        self._head[uniq, j] = (self._head[uniq, j] + counts) % self.cap
        self._n[uniq, j] = np.minimum(self._n[uniq, j] + counts, self.cap)

    # ------------------------------------------------------------------ read
    def count(self, key: Key, column: str) -> int:
        r = self._row.get(key)
        return 0 if r is None else int(self._n[r, self.column(column)])

    def values(self, key: Key, column: str) -> np.ndarray:
        """``key``'s window of ``column``, oldest first (float64 copy; empty if none)."""
        r = self._row.get(key)
        if r is None:
            return np.empty(0)
        j = self.column(column)
        n = int(self._n[r, j])
        buf = self._buf[r, j].astype(np.float64)
        out: np.ndarray = buf[:n] if n < self.cap else np.roll(buf, -int(self._head[r, j]))
        return out

    def means(self, keys: Sequence[Key] | None = None) -> np.ndarray:
        """Mean of each window, (keys x columns), NaN where a window is empty; every
        key in :meth:`keys` order when ``keys`` is None, else those given (unknown keys
        read NaN)."""
        if keys is None:
            buf, n = self._buf[: len(self._row)], self._n[: len(self._row)]
        else:
            rows = np.array([self._row.get(k, -1) for k in keys], dtype=np.int64)
            known = rows >= 0
            out = np.full((len(keys), len(self.columns)), np.nan)
            if known.any():
                out[known] = self._mean(self._buf[rows[known]], self._n[rows[known]])
            return out
        return self._mean(buf, n)

    @staticmethod
    def _mean(buf: np.ndarray, n: np.ndarray) -> np.ndarray:
        # Unfilled slots hold zeros, so the slot sum is the window's sum.
        total = buf.sum(axis=-1, dtype=np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(n > 0, total / np.maximum(n, 1), np.nan)

    def pooled(self, column: str, keys: Iterable[Key]) -> np.ndarray:
        """Every value of ``column`` over ``keys`` (float64; slot order, for order-free
        statistics such as quantiles)."""
        j = self.column(column)
        rows = np.array([self._row[k] for k in keys if k in self._row], dtype=np.int64)
        if rows.size == 0:
            return np.empty(0)
        filled = np.arange(self.cap)[None, :] < self._n[rows, j][:, None]
        out: np.ndarray = self._buf[rows, j][filled].astype(np.float64)
        return out

    # ------------------------------------------------------------------ build
    @classmethod
    def from_mapping(
        cls,
        windows: Mapping[Key, Mapping[str, Sequence[float]]],
        columns: Sequence[str],
        cap: int,
    ) -> RollingWindows:
        """A store holding ``windows[key][column]`` (oldest first; the last ``cap``
        kept): the lists a model pickled before this store kept, or a test's table."""
        out = cls(columns, cap)
        for key, cols in windows.items():
            for name, vals in cols.items():
                if len(vals):
                    out.extend([key] * len(vals), name, np.asarray(vals, dtype=np.float64))
        return out


__all__ = ["F32_MAX", "RollingWindows"]
