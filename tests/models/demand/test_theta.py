"""Theta for many series at once: the SES weight is the least-squares one (no worse
than a dense grid, nor than statsmodels' own fit), the forecast is the method
statsmodels' SES gave before, and a series' forecast does not depend on its batch."""

from __future__ import annotations

import warnings

import numpy as np
import polars as pl
import pytest

from predops.models.demand.baselines import ThetaForecaster, theta_forecast
from predops.models.demand.theta import THETA_MIN, ses_least_squares, theta_forecasts

from .factories import series_frame

H = np.arange(1, 49)


def _sse(x: np.ndarray, alpha: float, level0: float) -> float:
    level, total = level0, 0.0
    for v in x:
        total += (v - level) ** 2
        level = alpha * v + (1 - alpha) * level
    return total


def _best_level(x: np.ndarray, alpha: float) -> float:
    """The least-squares initial level for ``alpha`` by its normal equation, computed
    the slow way (one SES run per unit of level)."""
    a = _sse(x, alpha, 0.0)
    b = _sse(x, alpha, 1.0)
    c = _sse(x, alpha, -1.0)
    # sse(l) = a + p l + q l^2 with p = (b - c) / 2, q = (b + c) / 2 - a
    return -((b - c) / 2) / (2 * ((b + c) / 2 - a))


def _series(seed: int, n: int = 24 * 10) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    walk = np.cumsum(rng.normal(0, rng.uniform(0.1, 1.5), n))
    return 50 + rng.uniform(0, 8) * np.sin(2 * np.pi * t / 24) + walk + rng.normal(0, 1, n)


@pytest.mark.parametrize("seed", range(6))
def test_the_weight_is_no_worse_than_a_dense_grid(seed: int) -> None:
    x = _series(seed, 200)
    (alpha,), (level0,) = ses_least_squares([x])
    ours = _sse(x, alpha, level0)
    grid = [_sse(x, a, _best_level(x, a)) for a in np.linspace(0.0, 1.0, 1001)]
    assert ours <= min(grid) * (1 + 1e-9)
    assert level0 == pytest.approx(_best_level(x, alpha), rel=1e-6, abs=1e-6)


@pytest.mark.parametrize("seed", range(8))
def test_the_fit_is_no_worse_than_statsmodels(seed: int) -> None:
    from statsmodels.tsa.holtwinters import SimpleExpSmoothing

    x = _series(100 + seed, 300)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = SimpleExpSmoothing(x, initialization_method="estimated").fit()
    theirs = _sse(x, ref.params["smoothing_level"], ref.params["initial_level"])
    (alpha,), (level0,) = ses_least_squares([x])
    assert _sse(x, alpha, level0) <= theirs * (1 + 1e-9)


def test_the_weight_of_a_local_level_series_is_recovered() -> None:
    rng = np.random.default_rng(7)
    n, alpha = 3000, 0.3
    e = rng.normal(0, 1, n)
    x, level = np.empty(n), 20.0
    for t in range(n):
        x[t] = level + e[t]
        level += alpha * e[t]
    (est,), _ = ses_least_squares([x])
    assert est == pytest.approx(alpha, abs=0.04)


def _theta_with_statsmodels_ses(z: np.ndarray, season: int) -> tuple[np.ndarray, np.ndarray]:
    """The previous implementation's forecast and half-width: the same method with
    statsmodels' ``SimpleExpSmoothing`` estimate."""
    from statsmodels.tsa.holtwinters import SimpleExpSmoothing
    from statsmodels.tsa.seasonal import seasonal_decompose

    n = z.size
    seas = np.asarray(seasonal_decompose(z, period=season, two_sided=True).seasonal)
    x = z - seas
    slope = float(np.polyfit(np.arange(n, dtype=float), x, 1)[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = SimpleExpSmoothing(x, initialization_method="estimated").fit()
    a = float(np.clip(res.params["smoothing_level"], 1e-3, 1.0))
    drift = slope / 2 * (H - 1 + 1 / a - (1 - a) ** n / a)
    mean = float(res.forecast(1)[0]) + drift + seas[n - season + (H - 1) % season]
    resid = x - np.asarray(res.fittedvalues)
    half = 1.2815515655446004 * np.sqrt(np.mean(resid[1:] ** 2)) * np.sqrt(1 + a**2 * (H - 1))
    return mean, half


def test_the_forecast_is_the_method_statsmodels_gave_on_a_well_posed_series() -> None:
    """A clear daily cycle, a drift and a level that moves: both estimators find the
    same SES weight, so the forecasts agree to the optimiser's tolerance."""
    rng = np.random.default_rng(11)
    t = np.arange(24 * 12)
    level = 40 + np.cumsum(rng.normal(0, 0.8, t.size))
    z = level + 0.03 * t + 6 * np.sin(2 * np.pi * t / 24) + rng.normal(0, 0.5, t.size)
    q = theta_forecast(z, H, 24)
    assert q.method == "theta"
    mean, half = _theta_with_statsmodels_ses(z, 24)
    np.testing.assert_allclose(q.p50, mean, rtol=1e-4)
    np.testing.assert_allclose(q.p90 - q.p50, half, rtol=1e-4)
    np.testing.assert_allclose(q.p50 - q.p10, half, rtol=1e-4)


def test_a_series_gets_the_same_forecast_in_any_batch() -> None:
    zs = [_series(s, 24 * 3 + 11 * s) for s in range(7)] + [np.full(40, 3.0)]
    together = theta_forecasts(zs, H, 24)
    for z, q in zip(zs, together, strict=True):
        (alone,) = theta_forecasts([z], H, 24)
        assert q is not None and alone is not None
        assert np.array_equal(q.p50, alone.p50) and np.array_equal(q.p90, alone.p90)
    # A flat series: the level, a zero-width band.
    flat = together[-1]
    assert flat is not None and np.allclose(flat.p50, 3.0) and np.allclose(flat.p90, 3.0)


def test_short_histories_have_no_theta_and_the_forecaster_falls_back() -> None:
    short = np.arange(THETA_MIN - 1, dtype=float)
    assert theta_forecasts([short, _series(1)], H, 24)[0] is None
    with pytest.raises(ValueError, match=f"theta needs {THETA_MIN} observed buckets, got 9"):
        theta_forecast(short, H, 24)
    with pytest.raises(ValueError, match="SES needs two values a series, got 1"):
        ses_least_squares([np.ones(5), np.ones(1)])
    demand = pl.concat([series_frame("long", _series(2)), series_frame("short", short + 1)])
    out = ThetaForecaster("hourly").fit(demand).predict()
    methods = dict(out.group_by("series_id").agg(pl.col("method").first()).iter_rows())
    assert methods["long"] == "theta" and methods["short"].startswith("fallback_")
