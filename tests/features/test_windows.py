"""The last-column window kernels equal the last column of the full ones, exactly."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from predops.features.windows import (
    Windowed,
    buckets_since,
    buckets_since_last,
    forward_fill,
    forward_fill_last,
    window_max,
    window_max_last,
)


@st.composite
def grids(draw: st.DrawFn) -> np.ndarray:
    n = draw(st.integers(1, 4))
    b = draw(st.integers(1, 40))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 1e3, size=(n, b)) * rng.choice([1e-6, 1.0, 1e6], size=(n, b))
    x[rng.random((n, b)) < draw(st.floats(0, 1))] = np.nan
    return x


@settings(max_examples=200, deadline=None)
@given(grids(), st.integers(1, 50), st.integers(0, 50))
def test_last_column_kernels_equal_the_full_kernels(x: np.ndarray, k: int, limit: int) -> None:
    filled = np.nan_to_num(x)
    assert np.array_equal(Windowed(filled).sum_last(k), Windowed(filled).sum(k)[:, -1:])
    assert np.array_equal(window_max_last(x, k), window_max(x, k)[:, -1:], equal_nan=True)
    for lim in (None, limit):
        assert np.array_equal(
            forward_fill_last(x, lim), forward_fill(x, lim)[:, -1:], equal_nan=True
        )
    mask = ~np.isnan(x)
    assert np.array_equal(
        buckets_since_last(mask, limit), buckets_since(mask, limit)[:, -1:], equal_nan=True
    )
