"""Windowed Holt-Winters kernels: the linear map equals the recursion, a pure season is
forecast exactly, windows never reach before a series, and each series gets its own
best setting."""

from __future__ import annotations

import numpy as np
import pytest

from predops.models.demand import smoothing


def holt_winters(y: np.ndarray, alpha: float, gamma: float, m: int, max_h: int) -> np.ndarray:
    """The recursion written out on one window (the reference the kernel must match)."""
    level = float(y[:m].mean())
    season = list(y[:m] - level)
    for t in range(m, y.size):
        p = t % m
        new = alpha * (y[t] - season[p]) + (1 - alpha) * level
        season[p] = gamma * (y[t] - new) + (1 - gamma) * season[p]
        level = new
    return np.array([level + season[(y.size - 1 + h) % m] for h in range(1, max_h + 1)])


@pytest.mark.parametrize(("alpha", "gamma"), smoothing.SETTINGS)
def test_kernel_is_the_recursion(alpha: float, gamma: float) -> None:
    rng = np.random.default_rng(0)
    y = 50 + 10 * np.sin(np.arange(72) * 2 * np.pi / 24) + rng.normal(0, 3, 72)
    k = smoothing.kernel(alpha, gamma, 24, 72, 30)
    np.testing.assert_allclose(k @ y, holt_winters(y, alpha, gamma, 24, 30), rtol=1e-10)


def test_a_pure_season_is_forecast_exactly() -> None:
    t = np.arange(168 + 48)
    y = 20 + 5 * np.cos(2 * np.pi * t / 24)
    k = smoothing.kernel(0.5, 0.3, 24, 168, 48)
    np.testing.assert_allclose(k @ y[:168], y[168:], atol=1e-9)


def test_windows_stop_at_the_series_start_and_gaps_carry_forward() -> None:
    values = np.array([np.nan, 3.0, np.nan, 5.0, 7.0, 1.0, 2.0, 3.0])
    starts = np.array([0, 5, 8])
    f = smoothing.filled(values, starts)
    np.testing.assert_array_equal(f, [3.0, 3.0, 3.0, 5.0, 7.0, 1.0, 2.0, 3.0])
    # Series 2 (rows 5-7): a 4-bucket window from row 6 repeats row 5, never reads row 4.
    k = np.zeros((1, 1, 4))
    k[0, 0, 0] = 1.0  # the window's oldest bucket
    out = smoothing.forecasts(f, np.array([5]), np.array([6]), np.array([1]), k)
    assert out[0, 0] == 1.0


def test_each_series_gets_its_best_setting() -> None:
    errors = np.array([[1.0, 2.0], [1.0, 2.0], [3.0, 0.5], [4.0, 0.5]])
    best = smoothing.best_settings(errors, np.array([0, 0, 1, 1]), 3)
    assert best.tolist() == [0, 1, 1]  # series 2 has no pairs: the overall best


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="alpha"):
        smoothing.kernel(0.0, 0.1, 24, 48, 1)
    with pytest.raises(ValueError, match="window"):
        smoothing.kernel(0.5, 0.1, 24, 12, 1)


def test_forecasts_equal_each_pair_window_by_hand() -> None:
    """Several series, windows clipped at each start, pairs in mixed order of h, and a
    series without pairs between two with: every pair is its own window's product."""
    rng = np.random.default_rng(3)
    starts = np.array([0, 40, 47, 130, 200])
    values = rng.normal(10.0, 3.0, starts[-1])
    window, max_h = 30, 5
    k = smoothing.kernels_for(6, window, max_h)
    series = rng.choice([0, 2, 3], size=400)  # series 1 (rows 40-46) gets no pair
    origins = starts[series] + (rng.random(400) * np.diff(starts)[series]).astype(np.int64)
    h = rng.integers(1, max_h + 1, 400)
    first = starts[series]
    out = smoothing.forecasts(values, first, origins, h, k)
    for i in range(origins.size):
        rows = np.maximum(np.arange(origins[i] - window + 1, origins[i] + 1), first[i])
        np.testing.assert_allclose(out[i], k[:, h[i] - 1, :] @ values[rows], rtol=1e-12)
    assert smoothing.forecasts(values, first[:0], origins[:0], h[:0], k).shape == (0, k.shape[0])
