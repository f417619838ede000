"""Robust z-scores and surprise: causal, robust to outliers, on a known scale."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from predops.models.anomaly.node import MAX_COLUMN, NodeAnomalyScorer
from predops.models.anomaly.robust import (
    finite,
    median_mad,
    negbin_surprise,
    normal_surprise,
    poisson_surprise,
    rolling_robust_z,
)
from predops.models.anomaly.series import alarm_score, series_surprise


def test_median_mad_ignores_a_wild_value() -> None:
    med, scale = median_mad(np.array([1.0, 2.0, 3.0, 4.0, 1e9, np.nan]))
    assert med == 3.0
    assert scale == pytest.approx(1.4826 * 1.0)


def test_surprise_scales() -> None:
    # |z| = 1.96 is the two-sided 5 % point: -log10(0.05) = 1.30.
    assert normal_surprise(np.array([1.959964]))[0] == pytest.approx(1.30103, abs=1e-4)
    # P(X >= 3 | Poisson(0.1)) = 1 - e^-0.1 (1 + 0.1 + 0.005).
    p = 1 - np.exp(-0.1) * (1 + 0.1 + 0.005)
    assert poisson_surprise(np.array([3.0]), np.array([0.1]))[0] == pytest.approx(-np.log10(p))
    assert poisson_surprise(np.array([0.0]), np.array([0.1]))[0] == 0.0
    # A burst of 20 at 0.1 a day: astronomically rare for a Poisson, merely rare for
    # bursty counts; a huge shape gives the Poisson back.
    k, m = np.array([20.0]), np.array([0.1])
    assert poisson_surprise(k, m)[0] > 30 > negbin_surprise(k, m, 0.5)[0] > 2
    assert negbin_surprise(k, m, 1e6)[0] == pytest.approx(poisson_surprise(k, m)[0], rel=1e-3)


def test_rolling_z_sees_only_the_past() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=500)
    z = rolling_robust_z(x, 50, min_history=20)
    y = x.copy()
    y[300:] += 100.0  # change the future
    z2 = rolling_robust_z(y, 50, min_history=20)
    np.testing.assert_array_equal(z[:300], z2[:300])
    assert np.isnan(z[:20]).all() and np.isfinite(z[20:]).all()
    assert z2[300] > 50


def test_series_alarm_fires_once_at_the_start_of_a_shift() -> None:
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.normal(10, 1, 400), rng.normal(30, 1, 50)])
    s = series_surprise(x, window=100, min_history=20)
    a = alarm_score(x, window=100, min_history=20)
    assert s[400] > 10 and a[400] > 10
    assert a[401:420].max() < 1.0  # the run of unusual values alarms once
    assert a[:400].max() < 5.0


def test_node_scorer_flags_a_hot_node_and_an_error_burst() -> None:
    rng = np.random.default_rng(2)
    n = 400
    frame = pl.DataFrame(
        {
            "gpu_temp_c__z_own_24h": rng.normal(0, 1, n),
            "gpu_temp_c__mean_1h__rack_dev": rng.normal(0, 1.5, n),
            "ecc_sbe__increase_24h": rng.poisson(0.5, n).astype(float),
            "ecc_sbe__since_install": rng.poisson(200, n).astype(float),
            "node__age_days": np.full(n, 400.0),
        }
    )
    scorer = NodeAnomalyScorer().fit(frame)
    probe = frame.head(3).with_columns(
        pl.Series("gpu_temp_c__mean_1h__rack_dev", [0.0, 12.0, 0.0]),
        pl.Series("ecc_sbe__increase_24h", [0.0, 0.0, 25.0]),
    )
    out = scorer.transform(probe)
    assert out["anomaly__gpu_temp_c"][1] > 6
    assert out["anomaly__ecc_sbe"][2] > 3  # 25 errors at ~0.5 a day
    assert out[MAX_COLUMN][0] < scorer.threshold_ < min(out[MAX_COLUMN][1:].to_list())
    assert list(scorer.flags(probe)) == [False, True, True]


def test_fast_tails_equal_scipy_stats() -> None:
    """The surprise functions call scipy.special directly (speed); scipy.stats' logsf is
    the slow, obvious reference they must match."""
    from scipy.stats import nbinom, norm, poisson

    rng = np.random.default_rng(3)
    z = rng.normal(0, 6, 500)
    k = np.floor(rng.exponential(4, 500)) + 1
    lam = rng.exponential(2, 500) + 1e-3
    ref = -(np.log(2.0) + norm.logsf(np.abs(z))) / np.log(10.0)
    assert np.allclose(normal_surprise(z), np.minimum(ref, 300.0), rtol=1e-12)
    ref = -poisson.logsf(k - 1, lam) / np.log(10.0)
    assert np.allclose(poisson_surprise(k, lam), np.minimum(ref, 300.0), rtol=1e-12)
    for shape in (0.3, 2.0, 50.0):
        ref = -nbinom.logsf(k - 1, shape, shape / (shape + lam)) / np.log(10.0)
        assert np.allclose(negbin_surprise(k, lam, shape), np.minimum(ref, 300.0), rtol=1e-9)


def test_finite_is_nan_to_num() -> None:
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -2.5, 1e308, 3.0])
    assert np.array_equal(finite(x), np.nan_to_num(x, nan=0.0))
    assert np.array_equal(finite(x, posinf=40.0), np.nan_to_num(x, nan=0.0, posinf=40.0))
