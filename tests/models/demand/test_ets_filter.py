"""ETS forecasts filtered in NumPy, many series at once: the same forecasts and bands as
statsmodels' own ``smooth`` + ``get_prediction`` for every form ``fit_ets`` estimates,
whatever else is in the batch."""

from __future__ import annotations

import warnings

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from predops.models.demand.baselines import (
    EtsFit,
    ETSForecaster,
    _ets_model,
    ets_forecast,
    observed,
)
from predops.models.demand.ets_filter import ets_forecasts

from .factories import series_frame

H = np.arange(1, 49)
FORMS = [(24, True), (0, True), (0, False)]


def _series(seed: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    return (
        40
        + 8 * np.sin(2 * np.pi * t / 24)
        + 0.05 * t
        + rng.normal(0, 1, n)
        + np.where(t > n * 2 // 3, 6.0, 0.0)
    )


def _frame(series: dict[str, np.ndarray]) -> pl.DataFrame:
    return pl.concat([series_frame(k, v) for k, v in series.items()])


def _statsmodels(z: np.ndarray, fit: EtsFit, h: np.ndarray) -> tuple[np.ndarray, ...]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = _ets_model(z, fit.season, fit.trend).smooth(fit.params)
        frame = res.get_prediction(start=z.size, end=z.size + int(h.max()) - 1).summary_frame(
            alpha=0.2
        )
    return tuple(frame[c].to_numpy()[h - 1] for c in ("pi_lower", "mean", "pi_upper"))


def _estimate(z: np.ndarray, season: int, trend: bool) -> EtsFit:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = _ets_model(z, season, trend).fit(disp=False, maxiter=200)
    return EtsFit(np.asarray(res.params, dtype=np.float64), season, trend)


def _close(q: object, ref: tuple[np.ndarray, ...]) -> None:
    lo, mean, hi = ref
    # The mean is the same recursion in the same order: equal to the bit. The band's
    # variance is a sum where statsmodels writes its closed form: equal to rounding.
    assert np.array_equal(q.p50, mean)  # type: ignore[attr-defined]
    np.testing.assert_allclose(q.p10, lo, rtol=1e-12, atol=1e-12)  # type: ignore[attr-defined]
    np.testing.assert_allclose(q.p90, hi, rtol=1e-12, atol=1e-12)  # type: ignore[attr-defined]


@pytest.mark.parametrize(("season", "trend"), FORMS)
def test_every_form_forecasts_as_statsmodels_from_later_origins(season: int, trend: bool) -> None:
    y = _series(season + int(trend), 24 * 12)
    fit = _estimate(y[: 24 * 9], season, trend)
    assert fit.method == EtsFit(fit.params, season, trend).method
    for end in (24 * 9, 24 * 10 + 5, 24 * 12):
        z = y[:end]
        (q,) = ets_forecasts([z], H, [fit])
        assert q is not None and q.method == fit.method
        _close(q, _statsmodels(z, fit, H))


@settings(max_examples=40, deadline=None)
@given(
    form=st.sampled_from(FORMS),
    extra=st.integers(min_value=0, max_value=100),
    alpha=st.floats(0.01, 0.99),
    beta_frac=st.floats(0.0, 1.0),
    gamma_frac=st.floats(0.0, 1.0),
    phi=st.floats(0.8, 0.98),
    seed=st.integers(0, 2**16),
)
def test_any_parameters_and_length_filter_as_statsmodels(
    form: tuple[int, bool],
    extra: int,
    alpha: float,
    beta_frac: float,
    gamma_frac: float,
    phi: float,
    seed: int,
) -> None:
    """Parameters inside statsmodels' usual bounds (beta <= alpha, gamma <= 1 - alpha),
    any initial states, histories from the shortest statsmodels builds the form on (two
    seasons; ten buckets) up, horizons past a season."""
    season, trend = form
    n = (2 * season if season else 10) + extra
    rng = np.random.default_rng(seed)
    z = rng.normal(10, 3, n)
    beta, gamma = alpha * beta_frac, (1 - alpha) * gamma_frac
    init = [float(rng.normal(10, 2))] + ([float(rng.normal(0, 0.5))] if trend else [])
    seas = list(rng.normal(0, 2, season)) if season else []
    params = (
        [alpha]
        + ([beta] if trend else [])
        + ([gamma] if season else [])
        + ([phi] if trend else [])
        + init
        + seas
    )
    fit = EtsFit(np.array(params), season, trend)
    h = np.array([1, 2, 5, 24, 25, 30])
    (q,) = ets_forecasts([z], h, [fit])
    assert q is not None
    _close(q, _statsmodels(z, fit, h))


def test_a_batch_gives_each_series_what_it_gets_alone() -> None:
    """Mixed forms and lengths in one call: each series' forecast is bit for bit the
    one it gets on its own (every operation is per series)."""
    zs, fits = [], []
    for i, (season, trend) in enumerate(FORMS * 3):
        y = _series(10 + i, 24 * 5 + 17 * i)
        fits.append(_estimate(y[: 24 * 4], season, trend))
        zs.append(y)
    together = ets_forecasts(zs, H, fits)
    for z, fit, q in zip(zs, fits, together, strict=True):
        (alone,) = ets_forecasts([z], H, [fit])
        assert q is not None and alone is not None
        for a, b in ((q.p10, alone.p10), (q.p50, alone.p50), (q.p90, alone.p90)):
            assert np.array_equal(a, b)
    # ...and in reverse order, the same again.
    backward = ets_forecasts(zs[::-1], H, fits[::-1])[::-1]
    assert all(
        np.array_equal(a.p50, b.p50)  # type: ignore[union-attr]
        for a, b in zip(together, backward, strict=True)
    )


def test_a_non_finite_forecast_is_none_and_the_forecaster_falls_back() -> None:
    good = _estimate(_series(1, 24 * 4), 24, True)
    wild = EtsFit(np.r_[good.params[:4], 1e308, good.params[5:]], 24, True)
    z = _series(2, 24 * 4)
    q_good, q_wild, q_empty = ets_forecasts([z, z, z[:0]], H, [good, wild, good])
    assert q_good is not None and q_wild is None and q_empty is None
    with pytest.raises(ValueError, match="non-finite"):
        ets_forecast(z, H, wild)
    # The frame-level forecaster gives that series the fallback chain, the others ETS.
    demand = _frame({"a": _series(3, 24 * 6), "b": _series(4, 24 * 6)})
    model = ETSForecaster("hourly").fit(demand)
    assert model.fits_["b"] is not None
    model.fits_["b"] = EtsFit(wild.params, 24, True)
    methods = dict(model.predict(demand).group_by("series_id").agg("method").iter_rows())
    assert methods["a"][0] == "ets(A,Ad,A,24)"
    assert methods["b"][0].startswith("fallback_")


def test_bad_input_is_refused_by_name() -> None:
    fit = _estimate(_series(5, 24 * 4), 24, True)
    with pytest.raises(ValueError, match="2 histories but 1 fits"):
        ets_forecasts([np.ones(30), np.ones(30)], H, [fit])
    short = EtsFit(fit.params[:-1], 24, True)
    with pytest.raises(ValueError, match=r"ets\(A,Ad,A,24\): expected 30 parameters, got 29"):
        ets_forecasts([np.ones(30)], H, [short])


def test_the_frame_forecaster_filters_every_known_series_as_statsmodels() -> None:
    """``ETSForecaster.predict`` on newer history (the window origins' path): each
    series as statsmodels forecasts it with the parameters from ``fit``."""
    ys = {f"s{i}": _series(20 + i, 24 * 7) for i in range(4)}
    fit_part = _frame({k: v[: 24 * 5] for k, v in ys.items()})
    model = ETSForecaster("hourly").fit(fit_part)
    out = model.predict(_frame(ys)).sort(["series_id", "horizon"])
    h = np.asarray(model.config_.horizons, dtype=np.int64)
    for sid, y in ys.items():
        fit = model.fits_[sid]
        assert fit is not None
        rows = out.filter(out["series_id"] == sid)
        lo, mean, hi = _statsmodels(observed(y), fit, h)
        assert np.array_equal(rows["p50"].to_numpy(), mean)
        np.testing.assert_allclose(rows["p10"].to_numpy(), lo, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(rows["p90"].to_numpy(), hi, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(("season", "trend"), FORMS)
def test_without_the_compiled_smoother_the_public_path_gives_the_same_forecast(
    season: int, trend: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A statsmodels that moved its compiled smoother: the states come from its public
    ``smooth`` instead, and every forecast is the same; a history under two seasons,
    which statsmodels will not build the seasonal model on, has none there (the
    forecaster's fallback chain), where the compiled path forecasts it."""
    from predops.models.demand import ets_filter

    y = _series(30 + season, 24 * 8)
    fit = _estimate(y[: 24 * 6], season, trend)
    zs = [y[:10], y[:30], y[: 24 * 7 + 3], y]
    fast = ets_forecasts(zs, H, [fit] * len(zs))
    monkeypatch.setattr(ets_filter, "_compiled_smoother", lambda: None)
    slow = ets_forecasts(zs, H, [fit] * len(zs))
    for z, a, b in zip(zs, fast, slow, strict=True):
        assert a is not None
        if season and z.size < 2 * season:
            assert b is None
            continue
        assert b is not None
        assert np.array_equal(a.p50, b.p50)
        np.testing.assert_allclose(a.p90, b.p90, rtol=1e-12, atol=1e-12)
