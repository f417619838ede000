"""ETS forecasts from estimated parameters, without a statsmodels model per forecast.

The ETS candidate and the ETS baseline estimate each series' parameters once
(:func:`predops.models.demand.baselines.fit_ets`, statsmodels' ``ETSModel``) and then
forecast from many later origins with them: the states are filtered through the newer
buckets and the forecast read off the last ones, as a deployed model is updated.
Building a statsmodels model and its results object for each of those forecasts cost
3 ms a series, nearly all of it pandas and bookkeeping around a compiled loop of 20 us.
Here that loop (statsmodels' own smoother, ``_ets_smooth``, the one its ``smooth``
runs) is called directly, and the forecast and its band are computed from its states.
(A statsmodels without that module gets its public ``smooth``: the same states, at the
old cost.) One difference from the public path: a history shorter than two seasons is
forecast from the estimated initial states, where statsmodels refuses to build the
seasonal model on it (and the forecaster used to fall back to seasonal naive).

The model is the additive-error ETS statsmodels estimates (Hyndman et al., *Forecasting
with Exponential Smoothing*, 2008), in statsmodels' parameterisation: a form without
trend has ``beta = b = 0`` and ``phi = 1``, one without season a single seasonal state
held at 0. The forecast ``h`` steps past the last state is the model run on with zero
errors (``b <- phi b``, ``l <- l + b``, plus the latest seasonal state of that phase),
in statsmodels' order of operations, so it is statsmodels' forecast to the bit. Its
variance is ``sigma^2 (1 + sum_{j<h} c_j^2)``, ``c_j = alpha + beta (phi + ... + phi^j)
+ gamma [j a multiple of m]``, ``sigma^2`` the mean squared one-step residual: the
analytic interval statsmodels gives for these forms (it writes the sum's closed form,
so the band agrees to rounding). ``tests/models/demand/test_ets_filter.py`` checks
both against statsmodels' ``smooth`` and ``get_prediction``."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from predops.models.demand.quantiles import Quantiles


@dataclass(frozen=True, slots=True)
class EtsFit:
    """Estimated ETS parameters of one series and the model form they belong to."""

    params: np.ndarray
    season: int
    trend: bool

    @property
    def method(self) -> str:
        t = "Ad" if self.trend else "N"
        s = f"A,{self.season}" if self.season else "N"
        return f"ets(A,{t},{s})"


_ETS_CLASS: Any = None


def _ets_class() -> Any:
    """statsmodels' ``ETSModel`` with results that skip the parameters' covariance.

    - Every results object statsmodels builds (at the end of each ``fit`` and at each
      ``smooth``) computes that covariance from a complex-step numerical Hessian: about
      0.05 s a call, half the cost of the Azure VM backtest's ETS. Nothing here reads
      it: the forecasts and their intervals use the residual variance only
      (``get_prediction``); so the covariance here is NaN, as statsmodels' own when
      its Hessian is singular.
    - Imported before any ``catch_warnings`` block of ours: its first import runs
      ``statsmodels.tools.sm_exceptions``, which puts an "always" filter for
      ``ConvergenceWarning`` first in the list, and inside our block that filter would
      win over our "ignore" (the demo printed one)."""
    global _ETS_CLASS
    if _ETS_CLASS is None:
        from statsmodels.tsa.exponential_smoothing.ets import (
            ETSModel,
            ETSResults,
            ETSResultsWrapper,
        )

        class _Results(ETSResults):  # type: ignore[misc]
            @property
            def cov_params_approx(self) -> np.ndarray:
                k = len(self.params)
                return np.full((k, k), np.nan)

        class _Model(ETSModel):  # type: ignore[misc]
            @property
            def _res_classes(self) -> dict[str, tuple[type, type]]:
                return {"fit": (_Results, ETSResultsWrapper)}

        _ETS_CLASS = _Model
    return _ETS_CLASS


def _ets_model(z: np.ndarray, season: int, trend: bool) -> Any:
    import pandas as pd

    ETSModel = _ets_class()

    # statsmodels' prediction summary wants an indexed series, not a bare array.
    return ETSModel(
        pd.Series(z),
        error="add",
        trend="add" if trend else None,
        damped_trend=trend,
        seasonal="add" if season else None,
        seasonal_periods=season or None,
    )


Z80 = 1.2815515655446004
"""The standard normal's 0.9 quantile: the 80 % interval's half-width in sigmas."""


def _form_params(fit: EtsFit) -> tuple[float, float, float, float, float, float, np.ndarray]:
    """(alpha, beta, gamma, phi, l0, b0, seasonal initial states s[-1] .. s[-m]) of
    ``fit``, whose ``params`` are in statsmodels' order for its form."""
    p = np.asarray(fit.params, dtype=np.float64)
    m = fit.season
    want = 1 + (3 if fit.trend else 0) + (1 + m if m else 0) + 1
    if p.size != want:
        raise ValueError(f"{fit.method}: expected {want} parameters, got {p.size}")
    if fit.trend and m:
        return p[0], p[1], p[2], p[3], p[4], p[5], p[6:]
    if fit.trend:
        return p[0], p[1], 0.0, p[2], p[3], p[4], np.zeros(1)
    if m:
        return p[0], 0.0, p[1], 1.0, p[2], 0.0, p[3:]
    return p[0], 0.0, 0.0, 1.0, p[1], 0.0, np.zeros(1)


def _compiled_smoother() -> Callable[..., None] | None:
    """statsmodels' compiled additive smoother, or None in a statsmodels that moved it."""
    try:
        from statsmodels.tsa.exponential_smoothing._ets_smooth import _ets_smooth_add_add
    except ImportError:
        return None
    smoother: Callable[..., None] = _ets_smooth_add_add
    return smoother


def _smooth(z: np.ndarray, fit: EtsFit, params: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(one-step forecasts, last state as level, trend, s[n-1], .., s[n-m]) of ``z``;
    None where statsmodels' public path refuses the history."""
    smoother = _compiled_smoother()
    n, m = z.size, params.size - 6
    if smoother is not None:
        yhat = np.empty(n)
        states = np.empty((n, 2 + m))  # level, trend, s[t], s[t-1], .., s[t-m+1]
        free = np.zeros(params.size, dtype=np.int64)
        smoother(params, np.ascontiguousarray(z), yhat, states, free, params.copy())
        return yhat, states[n - 1]
    # statsmodels' public path (a model and results object: ~3 ms, the same states).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            res = _ets_model(z, fit.season, fit.trend).smooth(fit.params)
        except ValueError:  # e.g. a seasonal model on under two seasons
            return None
    table = np.asarray(res.states, dtype=np.float64)
    last = np.zeros(2 + m)
    last[0] = table[-1, 0]
    if fit.trend:
        last[1] = table[-1, 1]
    if fit.season:
        # s[-m] .. s[-1] (the initial states), then s[0] .. s[n-1]: the newest m, newest first.
        seq = np.r_[params[6:][::-1], table[:, -1]]
        last[2:] = seq[-m:][::-1]
    return np.asarray(res.fittedvalues, dtype=np.float64), last


def _forecast(
    z: np.ndarray, horizons: np.ndarray, fit: EtsFit
) -> tuple[np.ndarray, np.ndarray] | None:
    """(mean, half-width of the 80 % band) at ``horizons`` from the end of the observed
    history ``z`` (at least one bucket); None where it has no states (see
    :func:`_smooth`)."""
    alpha, beta, gamma, phi, level, trend, init = _form_params(fit)
    m = init.size
    # statsmodels' internal layout: alpha, beta, gamma, phi, l[-1], b[-1], s[-1..-m]
    params = np.concatenate([[alpha, beta, gamma, phi, level, trend], init])
    n = z.size
    with np.errstate(all="ignore"):
        smoothed = _smooth(z, fit, params)
        if smoothed is None:
            return None
        yhat, last = smoothed
        steps = int(np.max(horizons))
        # Zero errors: b_j = b_{j-1} phi and l_j = l_{j-1} + b_j, accumulated in order.
        b_path = np.cumprod(np.r_[last[1], np.full(steps, phi)])[1:]
        l_path = np.cumsum(np.r_[last[0], b_path])[1:]
        j = np.arange(steps)
        path = l_path + last[2 + (m - 1) - (j % m)]
        cum_phi = np.cumsum(np.cumprod(np.full(steps, phi)))  # phi + ... + phi^j
        c = alpha + beta * cum_phi
        if m > 1:
            c = c + gamma * ((j + 1) % m == 0)
        rel = np.ones(steps)
        rel[1:] += np.cumsum(c[:-1] ** 2)
        resid = z - yhat
        sigma2 = np.sum(resid**2) / n
        h = np.asarray(horizons, dtype=np.int64) - 1
        return path[h], Z80 * np.sqrt(sigma2 * rel[h])


def ets_forecasts(
    zs: Sequence[np.ndarray], horizons: np.ndarray, fits: Sequence[EtsFit]
) -> list[Quantiles | None]:
    """Each observed history ``zs[i]`` forecast at ``horizons`` with ``fits[i]`` (the
    states filtered from its first bucket with the estimated initial states); None where
    the forecast or its band is not finite, or the history is empty. Each series is
    computed alone: its forecast does not depend on the others in the call."""
    if len(zs) != len(fits):
        raise ValueError(f"{len(zs)} histories but {len(fits)} fits")
    out: list[Quantiles | None] = [None] * len(zs)
    h = np.asarray(horizons, dtype=np.int64)
    for i, (z, fit) in enumerate(zip(zs, fits, strict=True)):
        z = np.asarray(z, dtype=np.float64)
        if z.size == 0:
            continue
        answer = _forecast(z, h, fit)
        if answer is None:
            continue
        mean, half = answer
        if np.isfinite(mean).all() and np.isfinite(half).all():
            out[i] = Quantiles(mean - half, mean, mean + half, fit.method)
    return out


__all__ = ["Z80", "EtsFit", "ets_forecasts"]
