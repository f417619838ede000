"""``SelectedForecaster``: per series and horizon bucket, the served forecast is a
weighted combination of the global LightGBM and classical methods (ETS, seasonal naive
at the config's shortest and longest seasons, Theta, persistence: the last bucket),
weighted by what each did on that series' own recent backtest windows before the
cutoff, with a p10 / p90 band recalibrated online on the served forecast's own
residuals.
Over 500 lines: one estimator whose fit (the windows, the weights) and predict (the
online updates, the band) share the rolling state; splitting them would split that state.

- **Windows before the cutoff.** ``fit`` on data whose last complete bucket ends at
  ``T`` (data to 23:59 every minute completes the hour ending 00:00) places ``windows``
  validation origins ``T - H - k * every`` (H the longest horizon, ``every`` the
  config's ``backtest_every`` unless given), so every target they are scored on lies at
  or before ``T``. The LightGBM's forecasts there come from its own held-out models
  (one per calibration window, each trained only on targets before its window; an
  origin goes to the freshest whose window starts at or before it:
  :meth:`DemandForecaster.heldout_predict`), so no extra fit for the origins they
  cover (two 72 h windows: six daily origins); the origins before them (a short
  history) get one fit on the data up to the earliest. The classical candidates
  forecast each origin's history with their final fit (seasonal naive and persistence
  have no parameters, Theta re-estimates on that history, ETS filters it with the parameters
  estimated on the fit data).
- **Candidates.** Every method the served forecast is judged against is one of them:
  the seasonal naive at the config's longest season (``seasonal_naive_long``; hourly,
  the same hour last week) as well as at its shortest (a day), so a series whose week
  repeats can lean on last week's hour. A config with one season has one seasonal
  naive (``candidates_``, the fitted list, leaves the duplicate out).
- **Weights.** Per (series, bucket) the candidates' mean absolute error over the
  scored rows in the window gives the weights (``weighting``): ``"inverse"``
  (``w ~ MAE^-2``, normalised), ``"best"`` (all weight on the smallest error),
  ``"pooled"`` (``MAE^-2`` of each candidate's error relative to the series' mean
  candidate error, averaged over the bucket's series: one weight vector per bucket,
  scale-free), ``"shrunk"`` (``MAE^-2`` of the halfway point between the series' own
  relative errors and the pool's; three one-day windows per series estimate its own
  errors from few rows, and the pool carries what the source's other series say) or
  ``"nested"`` (the default: ``"shrunk"``'s errors weighed in two levels, the classical
  candidates among themselves, then the LightGBM against their combination, whose error
  is taken as its members' weighted mean error: :func:`nested_weights`. ETS, Theta,
  persistence and the seasonal naives all extrapolate the series' own recent values, so
  their errors move together; weighed side by side they outvote the one learnt model
  whatever the windows say. Chosen on the validation windows of every real
  source, docs/demand.md). A series or bucket with no scored row gets equal weights
  (the pool's under ``pooled`` / ``shrunk`` / ``nested``; under ``nested`` equal at
  each level). The weights, the candidates'
  errors and the windows are the forecast's provenance (:meth:`selection`).
- **Band.** The served forecast's residuals on the windows, in units of the weighted
  half-width of the candidates' own p10-p90 bands, per (series, bucket) (pooled over
  series where a series has too few), give the band: p10 / p90 = p50 + the residual
  quantiles x the half-width, each side's quantile times its ``tail_scale`` factor
  (lower 1.0, upper 1.45: a few days of windows rarely hold the upward bursts of
  demand, so the upper quantile they give is too low; the factors were chosen on the
  validation windows of every real source, docs/demand.md). Adaptive conformal
  inference moves the quantile levels:
  each scored actual above p90 (below p10) lowers (raises) that side's level by
  ``aci_gamma`` x (miss - 0.1), so a run of misses widens the band within hours.
- **Online updates.** ``predict`` keeps the forecasts it issued (bounded: at most
  ``MAX_PENDING_PER_SERIES`` x series rows); when a later ``predict`` sees their
  targets in its history, each candidate's error and the served residual join rolling
  windows of ``residual_window`` rows per (series, bucket), and the weights and the band
  are recomputed from them. The windows are float32 ring buffers
  (:class:`models.demand.rolling.RollingWindows`): memory is bounded by the keys, not
  by time (10,000 series x 4 buckets, six candidates: about 0.8 GB full, where lists of
  Python floats took 5.6 GB with five; ``benchmarks/bench_selection_state.py``).
  Between refits (the fit-once protocol, hourly forecasts between nightly retrains)
  both follow the series. State lives in the fitted object only; a model reloaded from
  the registry starts again from its fit windows.

Pure: numpy / polars / LightGBM / statsmodels; no I/O, no clock, no environment.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

import numpy as np
import polars as pl
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from predops.features.demand import SERIES
from predops.models.demand.baselines import (
    ETSForecaster,
    PersistenceForecaster,
    SeasonalNaiveForecaster,
    ThetaForecaster,
)
from predops.models.demand.config import ForecastConfig, config_named
from predops.models.demand.forecaster import DemandForecaster
from predops.models.demand.grid import Grid, Resampled, demand_columns, from_us
from predops.models.demand.panel import forecast_frame, step_us
from predops.models.demand.rolling import F32_MAX, RollingWindows

CANDIDATES = ("lightgbm", "ets", "seasonal_naive", "seasonal_naive_long", "theta", "persistence")
LONG_SEASON = "seasonal_naive_long"
"""Seasonal naive at the config's longest season (``seasonal_naive``: its shortest)."""
WEIGHTINGS = ("inverse", "best", "pooled", "shrunk", "nested")
POOLING = ("pooled", "shrunk", "nested")
"""Weightings that read every series' errors (the bucket's pool)."""
LEARNED = "lightgbm"
"""The one learnt candidate, weighed against the classical ones' combination (``nested``)."""
METHOD = "selected"
MIN_SERIES_RESIDUALS = 72
"""Residuals a (series, bucket) needs for its own band, else the bucket's pool over
every series: the fit windows give a series 18-36 per bucket from 3 origins, far too
few (and too correlated) for its own 10 % tails, so a refit model bands from the pool
and a series grows its own as the updates score its forecasts."""
MAX_PENDING_PER_SERIES = 4096
"""Issued forecasts kept per series awaiting their actuals (oldest dropped beyond)."""
ALPHA = 0.1
"""Nominal miss rate of each side of the p10-p90 band."""
LEVEL_BOUNDS = (0.01, 0.3)
"""Adaptive conformal levels stay in this range (never a zero-width or unbounded side)."""
RESID = "resid"
"""The one column of the served residuals' windows."""
TAIL_SCALE = (1.0, 1.45)
"""Multipliers of the lower / upper residual quantiles (docs/demand.md, ``tail_scale``)."""


def _feed(model: Any, df: pl.DataFrame, res: Resampled) -> pl.DataFrame | Resampled:
    """What ``model`` is fitted on or forecasts from: the shared resampling where it
    reads a grid, the frame otherwise (the LightGBM builds its own panel)."""
    return res if getattr(model, "reads_grid", False) else df


def candidate(name: str, config: ForecastConfig, seed: int = 0, n_jobs: int | None = None) -> Any:
    """An unfitted candidate forecaster by name (see :data:`CANDIDATES`)."""
    if name == "lightgbm":
        return DemandForecaster(config, random_state=seed, n_jobs=n_jobs)
    if name == "ets":
        return ETSForecaster(config)
    if name == "seasonal_naive":
        return SeasonalNaiveForecaster(config)
    if name == LONG_SEASON:
        return SeasonalNaiveForecaster(config, season=max(config.seasons))
    if name == "theta":
        return ThetaForecaster(config)
    if name == "persistence":
        return PersistenceForecaster(config)
    raise ValueError(f"unknown candidate {name!r}; known: {', '.join(CANDIDATES)}")


def inverse_weights(mae: np.ndarray, weighting: str) -> np.ndarray:
    """Weights per row of ``mae`` (rows x candidates; NaN = candidate not scored):
    ``"inverse"`` MAE^-2 normalised, ``"best"`` one-hot on the smallest; a row with no
    finite error gets equal weights over every candidate."""
    mae = np.asarray(mae, dtype=np.float64)
    ok = np.isfinite(mae)
    out = np.zeros_like(mae)
    none = ~ok.any(axis=1)
    out[none] = 1.0 / mae.shape[1]
    rows = np.flatnonzero(~none)
    if rows.size == 0:
        return out
    m = np.where(ok[rows], mae[rows], np.inf)
    if weighting == "best":
        out[rows, np.argmin(m, axis=1)] = 1.0
        return out
    floor = np.maximum(np.min(m, axis=1, keepdims=True) * 1e-3, 1e-12)
    inv = np.where(np.isfinite(m), 1.0 / np.maximum(m, floor) ** 2, 0.0)
    out[rows] = inv / inv.sum(axis=1, keepdims=True)
    return out


def nested_weights(mae: np.ndarray, learned: int | None) -> np.ndarray:
    """Weights of one row of errors (NaN = not scored) in two levels: every candidate
    but ``learned`` by :func:`inverse_weights`, then ``learned`` against their
    combination, whose error is their weighted mean error (an upper bound: the absolute
    error is convex). No ``learned`` (or nothing beside it): plain inverse weights. A
    level with no finite error splits equally, as :func:`inverse_weights` does."""
    mae = np.asarray(mae, dtype=np.float64)
    n = mae.size
    if learned is None or n < 2:
        plain: np.ndarray = inverse_weights(mae[None, :], "inverse")[0]
        return plain
    rest = np.delete(np.arange(n), learned)
    inner = inverse_weights(mae[None, rest], "inverse")[0]
    ok = np.isfinite(mae[rest])
    group = float(np.sum(inner[ok] * mae[rest][ok])) if ok.any() else np.nan
    top = inverse_weights(np.array([[mae[learned], group]]), "inverse")[0]
    out = np.empty(n)
    out[learned] = top[0]
    out[rest] = inner * top[1]
    return out


def _anchor(model: Any) -> str | None:
    cfg = getattr(model, "config_", None)
    return None if cfg is None else str(cfg.anchor)


def fitted_candidates(candidates: tuple[str, ...], config: ForecastConfig) -> tuple[str, ...]:
    """The candidates a fit uses: ``candidates`` without the longest-season seasonal
    naive where it is the shortest one again (a config with one season)."""
    if len(set(config.seasons)) == 1 and "seasonal_naive" in candidates:
        return tuple(c for c in candidates if c != LONG_SEASON)
    return tuple(candidates)


class SelectedForecaster(BaseEstimator):  # type: ignore[misc]
    """Per-series, per-bucket combination of candidates (see the module docstring).

    Parameters: ``config``; ``candidates`` (names of :data:`CANDIDATES`);
    ``windows`` (validation origins before the cutoff) and ``window_every`` (steps
    between them; None: the config's ``backtest_every``); ``weighting``
    (:data:`WEIGHTINGS`); ``residual_window`` (rolling rows per series and bucket);
    ``aci_gamma`` (adaptive conformal step; 0 = fixed levels); ``tail_scale`` (lower,
    upper: multipliers of the residual quantiles below and above p50); ``update`` (False:
    weights and band stay as fitted, nothing learnt in ``predict``); ``random_state``,
    ``n_jobs`` (LightGBM's). Chosen on validation windows (docs/demand.md)."""

    def __init__(
        self,
        config: str | ForecastConfig = "hourly",
        candidates: tuple[str, ...] = CANDIDATES,
        windows: int = 3,
        window_every: int | None = None,
        band_windows: int = 3,
        weighting: str = "nested",
        residual_window: int = 720,
        aci_gamma: float = 0.0,
        tail_scale: tuple[float, float] = TAIL_SCALE,
        update: bool = True,
        random_state: int = 0,
        n_jobs: int | None = None,
    ):
        self.config = config
        self.candidates = candidates
        self.windows = windows
        self.window_every = window_every
        self.band_windows = band_windows
        self.weighting = weighting
        self.residual_window = residual_window
        self.aci_gamma = aci_gamma
        self.tail_scale = tail_scale
        self.update = update
        self.random_state = random_state
        self.n_jobs = n_jobs

    # ------------------------------------------------------------------ fit
    def _validate(self) -> ForecastConfig:
        cfg = self.config if isinstance(self.config, ForecastConfig) else config_named(self.config)
        if not self.candidates:
            raise ValueError("need at least one candidate")
        for c in self.candidates:
            if c not in CANDIDATES:
                raise ValueError(f"unknown candidate {c!r}; known: {', '.join(CANDIDATES)}")
        if self.weighting not in WEIGHTINGS:
            raise ValueError(f"weighting must be one of {WEIGHTINGS}, got {self.weighting!r}")
        if int(self.windows) < 1:
            raise ValueError("windows must be >= 1")
        if int(self.band_windows) < 1:
            raise ValueError("band_windows must be >= 1")
        if int(self.residual_window) < MIN_SERIES_RESIDUALS:
            raise ValueError(f"residual_window must be >= {MIN_SERIES_RESIDUALS}")
        if not 0.0 <= float(self.aci_gamma) < 0.5:
            raise ValueError("aci_gamma must be in [0, 0.5)")
        try:
            ts = tuple(float(v) for v in self.tail_scale)
        except (TypeError, ValueError):
            ts = ()
        if len(ts) != 2 or not all(np.isfinite(v) and v >= 1.0 for v in ts):
            raise ValueError(
                f"tail_scale must be two factors >= 1 (lower, upper), got {self.tail_scale!r}"
            )
        return cfg

    pending_: pl.DataFrame | None
    """Issued forecasts awaiting their actuals (:meth:`_pending_rows`), set by ``fit``."""

    def _windows(self, columns: tuple[str, ...]) -> RollingWindows:
        return RollingWindows(columns, int(self.residual_window))

    def __setstate__(self, state: dict[str, Any]) -> None:
        # A model pickled before the ring buffers kept its windows as lists per key.
        cap = int(state.get("residual_window", 720))
        cands = tuple(state.get("candidates_", state.get("candidates", CANDIDATES)))
        state.setdefault("candidates_", cands)
        errors = state.get("errors_")
        if isinstance(errors, dict):
            state["errors_"] = RollingWindows.from_mapping(errors, cands, cap)
        resid = state.get("resid_")
        if isinstance(resid, dict):
            state["resid_"] = RollingWindows.from_mapping(
                {k: {RESID: v} for k, v in resid.items()}, (RESID,), cap
            )
        super().__setstate__(state)
        # ... and its pending forecasts with every candidate's band (float64).
        pending = state.get("pending_")
        if isinstance(pending, pl.DataFrame):
            self.pending_ = self._pending_rows(pending)

    def _make(self, name: str, cfg: ForecastConfig) -> Any:
        return candidate(name, cfg, int(self.random_state), self.n_jobs)

    def fit(
        self,
        X: pl.DataFrame | pl.LazyFrame,
        y: None = None,
        *,
        calendar: pl.DataFrame | None = None,
    ) -> SelectedForecaster:
        """Score the candidates on the windows before the end of ``X``, then refit
        each on all of ``X`` (see the module docstring)."""
        cfg = self._validate()
        df = demand_columns(X).collect()
        self.config_ = cfg
        self.buckets_ = [f"{a}-{b}" for a, b in cfg.buckets]
        self._bucket_of = {h: cfg.bucket_of(h) for h in cfg.horizons}
        end = df["ts"].max()
        if not isinstance(end, datetime):
            raise ValueError("demand frame has no timestamps")
        self.data_cutoff_ = end
        self.candidates_ = fitted_candidates(self.candidates, cfg)
        # (series, bucket) -> each candidate's rolling abs errors; resid_ -> the served
        # residuals (ring buffers: bounded by the keys, not by time)
        self.errors_ = self._windows(self.candidates_)
        self.resid_ = self._windows((RESID,))
        self.levels_: dict[tuple[str, str], list[float]] = {}
        self.pending_ = None
        self.models_: dict[str, Any] = {}
        res = Resampled(df, cfg)
        for name in self.candidates_:
            model = self._make(name, cfg)
            self.models_[name] = model.fit(_feed(model, df, res), calendar=calendar)
        # The windows hang off the last bucket the data completes (data to 23:59 every
        # minute completes the hour ending 00:00): origins on the grid, where every
        # candidate issues from and the held-out LightGBMs answer, and the last target
        # a bucket made of data at or before ``end`` only.
        grid = res.grid(cfg)
        self.last_target_ = from_us(int(grid.ts_us.max()))
        every = int(self.window_every or cfg.backtest_every)
        self.origins_ = sorted(
            self.last_target_ - cfg.freq * (cfg.max_horizon + k * every)
            for k in range(int(self.windows))
        )
        val = self._window_forecasts(df, grid, self.origins_, cfg, calendar)
        if val is not None:
            self._learn_windows(val)
        self.fit_weights_ = self._weights_table()
        return self

    def _window_forecasts(
        self,
        df: pl.DataFrame,
        grid: Grid,
        origins: list[datetime],
        cfg: ForecastConfig,
        calendar: pl.DataFrame | None,
    ) -> pl.DataFrame | None:
        """Every candidate's forecasts from every validation origin (fit once at the
        earliest, updated after), with the actuals (``grid``: the fit data's buckets)."""
        if df.filter(pl.col("ts") <= origins[0]).height == 0:
            return None
        actual = pl.DataFrame(
            {
                SERIES: np.repeat(np.asarray(grid.series, dtype=object), np.diff(grid.starts)),
                "valid_at": pl.Series(grid.ts_us, dtype=pl.Int64).cast(pl.Datetime("us", "UTC")),
                "actual": grid.value,
            }
        ).with_columns(pl.col(SERIES).cast(pl.String))
        frames: list[pl.DataFrame] = []
        # (name, the model that forecasts its windows, the origins it must forecast)
        plans: list[tuple[str, Any, set[datetime]]] = []
        for name in self.candidates_:
            final = self.models_[name]
            held = getattr(final, "heldout_predict", None)
            todo = list(origins)
            own = held(df, origins, calendar=calendar) if held is not None else None
            if own is not None:
                # The LightGBM's own held-out models (each trained on targets before
                # its calibration window, which holds the origins it answers): no
                # extra fit for the origins they cover.
                frames.append(own.with_columns(pl.lit(name).alias("model")))
                answered = set(own["issued_at"].unique().to_list())
                todo = [o for o in origins if o not in answered]
                if not todo:
                    continue
            if held is not None:
                # Origins no held-out model covers (a short history, or horizons
                # longer than its windows): one fit on the data before the earliest.
                try:
                    final = self._make(name, cfg).fit(
                        df.filter(pl.col("ts") <= todo[0]), calendar=calendar
                    )
                except ValueError:
                    continue
            plans.append((name, final, set(todo)))
        # The classical candidates forecast each origin's history with the final fit:
        # seasonal naive has no parameters, Theta re-estimates on that history, ETS
        # filters it with the parameters estimated on all of the fit data (no refit per
        # window; every value involved is at or before the cutoff). One history at a
        # time, resampled once for every candidate that reads a grid.
        for o in origins:
            wanted = [(name, model) for name, model, todo in plans if o in todo]
            hist = Resampled(df.filter(pl.col("ts") <= o), cfg) if wanted else None
            if hist is None or hist.frame.height == 0:
                continue
            for name, model in wanted:
                try:
                    pred = model.predict(_feed(model, hist.frame, hist), calendar=calendar)
                except ValueError:
                    continue
                frames.append(pred.with_columns(pl.lit(name).alias("model")))
        if not frames:
            return None
        rows = pl.concat(frames).join(actual, on=[SERIES, "valid_at"], how="inner")
        rows = rows.filter(
            pl.col("actual").is_not_nan() & (pl.col("valid_at") <= self.last_target_)
        )
        return self._wide(rows)

    def _wide(self, rows: pl.DataFrame) -> pl.DataFrame | None:
        """Long candidate rows (model, series, issued_at, horizon, p10/p50/p90[, actual])
        -> one row per (series, issued_at, horizon) with a column triple per candidate."""
        if rows.height == 0:
            return None
        keys = [SERIES, "issued_at", "valid_at", "horizon"]
        extra = ["actual"] if "actual" in rows.columns else []
        base = rows.select(*keys, *extra).unique(keys, keep="first")
        for name in self.candidates_:
            part = rows.filter(pl.col("model") == name).select(
                *keys,
                pl.col("p10").alias(f"{name}__p10"),
                pl.col("p50").alias(f"{name}__p50"),
                pl.col("p90").alias(f"{name}__p90"),
            )
            base = base.join(part, on=keys, how="left")
        return base.with_columns(
            pl.col("horizon")
            .replace_strict(self._bucket_of, default="other", return_dtype=pl.String)
            .alias("bucket")
        )

    # ------------------------------------------------------------------ state
    def _key_mae(self, key: tuple[str, str]) -> np.ndarray:
        out: np.ndarray = self.errors_.means([key])[0]
        return out

    def _maes(self, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], np.ndarray]:
        """The candidate errors of ``keys``, and of every key when the weighting pools
        (one vectorised pass over the ring buffers)."""
        want = list(dict.fromkeys(keys))
        if self.weighting not in POOLING:
            return dict(zip(want, self.errors_.means(want), strict=True))
        known = self.errors_.keys()
        out = dict(zip(known, self.errors_.means(), strict=True))
        missing = [k for k in want if k not in out]
        if missing:
            out.update(zip(missing, self.errors_.means(missing), strict=True))
        return out

    def _pooled_rel(
        self, maes: dict[tuple[str, str], np.ndarray] | None = None
    ) -> dict[str, np.ndarray]:
        """Per bucket, each candidate's error relative to the series' mean candidate
        error, averaged over the series that scored every candidate (scale-free). Summed
        in key order, so the pool is the same to the last bit whatever order the
        errors arrived in and whichever series a call asks for."""
        if maes is None:
            maes = self._maes(self.errors_.keys())
        keys = sorted(maes)
        if not keys:
            return {}
        m = np.stack([maes[k] for k in keys])
        mean = m.mean(axis=1)
        ok = np.isfinite(m).all(axis=1) & (mean > 0)
        rel = m[ok] / mean[ok, None]
        buckets = np.array([k[1] for k in keys], dtype=object)[ok]
        return {b: rel[buckets == b].mean(axis=0) for b in dict.fromkeys(buckets.tolist())}

    def _pool(
        self, maes: dict[tuple[str, str], np.ndarray] | None = None
    ) -> dict[str, np.ndarray] | None:
        """The pool the weighting needs (``pooled`` / ``shrunk``), else None."""
        return self._pooled_rel(maes) if self.weighting in POOLING else None

    def _key_weights(
        self,
        key: tuple[str, str],
        pooled: dict[str, np.ndarray] | None,
        mae: np.ndarray | None = None,
    ) -> np.ndarray:
        mae = self._key_mae(key) if mae is None else mae
        if pooled is not None:
            pool = pooled.get(key[1])
            if pool is not None:
                if self.weighting == "pooled" or not np.isfinite(mae).all() or mae.mean() <= 0:
                    mae = pool
                else:
                    mae = (mae / mae.mean() + pool) / 2
        if self.weighting == "nested":
            learned = self.candidates_.index(LEARNED) if LEARNED in self.candidates_ else None
            return nested_weights(mae, learned)
        w: np.ndarray = inverse_weights(
            mae[None, :], "best" if self.weighting == "best" else "inverse"
        )[0]
        return w

    def _combine(self, wide: pl.DataFrame) -> pl.DataFrame:
        """Served p50 and the weighted half-width of the candidates' bands per row."""
        keys = list(zip(wide[SERIES].to_list(), wide["bucket"].to_list(), strict=True))
        maes = self._maes(keys)
        pooled = self._pool(maes)
        cache = {k: self._key_weights(k, pooled, maes[k]) for k in dict.fromkeys(keys)}
        w = np.stack([cache[k] for k in keys]) if keys else None
        n = wide.height
        p50 = np.zeros(n)
        half = np.zeros(n)
        tot = np.zeros(n)
        for j, name in enumerate(self.candidates_):
            c50 = wide[f"{name}__p50"].cast(pl.Float64).fill_null(np.nan).to_numpy()
            c10 = wide[f"{name}__p10"].cast(pl.Float64).fill_null(np.nan).to_numpy()
            c90 = wide[f"{name}__p90"].cast(pl.Float64).fill_null(np.nan).to_numpy()
            ok = np.isfinite(c50) & np.isfinite(c10) & np.isfinite(c90)
            wj = np.where(ok, w[:, j] if w is not None else 0.0, 0.0)
            # A candidate without a forecast for a row gives its weight to the others;
            # a row no weighted candidate answered falls back to equal weights.
            p50 += wj * np.nan_to_num(c50)
            half += wj * np.nan_to_num(c90 - c10) / 2
            tot += wj
        missing = tot <= 0
        if missing.any():
            for name in self.candidates_:
                c50 = wide[f"{name}__p50"].cast(pl.Float64).fill_null(np.nan).to_numpy()
                c10 = wide[f"{name}__p10"].cast(pl.Float64).fill_null(np.nan).to_numpy()
                c90 = wide[f"{name}__p90"].cast(pl.Float64).fill_null(np.nan).to_numpy()
                ok = missing & np.isfinite(c50) & np.isfinite(c10) & np.isfinite(c90)
                p50[ok] += c50[ok]
                half[ok] += (c90[ok] - c10[ok]) / 2
                tot[ok] += 1
        tot = np.where(tot > 0, tot, np.nan)
        p50 = p50 / tot
        half = np.maximum(half / tot, 1e-6 * np.maximum(np.abs(p50), 1.0))
        return wide.with_columns(pl.Series("p50", p50), pl.Series("half", half))

    def _learn_windows(self, val: pl.DataFrame) -> None:
        """The fit windows: every candidate's errors, and the served residuals of each
        window under the weights the *other* windows give (leave one window out: the
        weights chosen on a window would make its own residuals look too small)."""
        issued = val["issued_at"].unique().sort().to_list()
        if len(issued) < 2:
            self._learn(val)
            return
        # The band learns from the latest ``band_windows`` windows only (all weigh).
        for t in issued[-int(self.band_windows) :]:
            self.errors_ = self._windows(self.candidates_)
            self._learn(val.filter(pl.col("issued_at") != t), errors_only=True)
            self._add_residuals(self._combine(val.filter(pl.col("issued_at") == t)), issued=False)
        self.errors_ = self._windows(self.candidates_)
        self._learn(val, errors_only=True)

    def _learn(self, scored: pl.DataFrame, *, errors_only: bool = False) -> None:
        """Add scored rows (wide, with actuals) to the rolling windows in issue order:
        each candidate's error first, then the served residual (the p50 / p10 / p90 as
        issued when the rows carry them, else the combination under the updated
        weights: the fit windows), updating the adaptive levels."""
        scored = scored.sort("issued_at", "horizon")
        act = scored["actual"].cast(pl.Float64).to_numpy()
        keys = list(zip(scored[SERIES].to_list(), scored["bucket"].to_list(), strict=True))
        for c in self.candidates_:
            c50 = scored[f"{c}__p50"].cast(pl.Float64).fill_null(np.nan).to_numpy()
            # A wild candidate's error beyond float32 is kept as the largest it holds
            err = np.minimum(np.abs(act - c50), F32_MAX)
            ok = np.flatnonzero(np.isfinite(err))
            self.errors_.extend([keys[i] for i in ok.tolist()], c, err[ok])
        if errors_only:
            return
        issued = "p90" in scored.columns
        self._add_residuals(scored if issued else self._combine(scored), issued=issued)

    def _add_residuals(self, scored: pl.DataFrame, *, issued: bool) -> None:
        """The served residuals of ``scored`` (with p50 and half; p10 / p90 as issued
        when ``issued``) into the rolling windows, updating the adaptive levels."""
        scored = scored.sort("issued_at", "horizon")
        act = scored["actual"].cast(pl.Float64).to_numpy()
        keys = list(zip(scored[SERIES].to_list(), scored["bucket"].to_list(), strict=True))
        p50 = scored["p50"].to_numpy()
        half = scored["half"].to_numpy()
        with np.errstate(invalid="ignore", divide="ignore"):
            res = np.clip((act - p50) / half, -F32_MAX, F32_MAX)
        ok = np.flatnonzero(np.isfinite(act) & np.isfinite(p50) & np.isfinite(res))
        self.resid_.extend([keys[i] for i in ok.tolist()], RESID, res[ok])
        gamma = float(self.aci_gamma)
        if not issued or gamma <= 0:
            return
        p10 = scored["p10"].to_numpy()
        p90 = scored["p90"].to_numpy()
        for i in ok.tolist():
            lv = self.levels_.setdefault(keys[i], [ALPHA, ALPHA])
            miss_lo, miss_hi = float(act[i] < p10[i]), float(act[i] > p90[i])
            lv[0] = float(np.clip(lv[0] + gamma * (ALPHA - miss_lo), *LEVEL_BOUNDS))
            lv[1] = float(np.clip(lv[1] + gamma * (ALPHA - miss_hi), *LEVEL_BOUNDS))

    def _band(self, wide: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """Lower / upper residual quantiles (half-width units) per row."""
        pooled: dict[str, np.ndarray] = {}
        held = self.resid_.keys()
        for b in self.buckets_:
            pooled[b] = self.resid_.pooled(RESID, [k for k in held if k[1] == b])
        lo = np.empty(wide.height)
        hi = np.empty(wide.height)
        cache: dict[tuple[str, str], tuple[float, float]] = {}
        # (A model pickled before tail_scale existed bands as it did then.)
        s_lo, s_hi = (float(v) for v in getattr(self, "tail_scale", (1.0, 1.0)))
        for i, key in enumerate(zip(wide[SERIES].to_list(), wide["bucket"].to_list(), strict=True)):
            if key not in cache:
                own = self.resid_.values(key, RESID)
                r: np.ndarray = own if own.size >= MIN_SERIES_RESIDUALS else pooled.get(key[1], own)
                a_lo, a_hi = self.levels_.get(key, [ALPHA, ALPHA])
                if r.size >= MIN_SERIES_RESIDUALS:
                    q_lo = float(np.quantile(r, a_lo))
                    q_hi = float(np.quantile(r, 1.0 - a_hi))
                else:  # too little scored yet: the candidates' own band
                    q_lo, q_hi = -1.0, 1.0
                cache[key] = (s_lo * min(q_lo, 0.0), s_hi * max(q_hi, 0.0))
            lo[i], hi[i] = cache[key]
        return lo, hi

    # ------------------------------------------------------------------ predict
    def predict(
        self, X: pl.DataFrame | pl.LazyFrame | None = None, *, calendar: pl.DataFrame | None = None
    ) -> pl.DataFrame:
        """The served forecasts from the end of every series in ``X``; first scores the
        forecasts issued earlier whose targets ``X`` now holds (see the module
        docstring). Columns as :func:`panel.forecast_frame` (method ``selected``)."""
        check_is_fitted(self, "models_")
        cfg = self.config_
        res = None if X is None else Resampled(demand_columns(X).collect(), cfg)
        parts = []
        for name, model in self.models_.items():
            try:
                pred = model.predict(
                    None if res is None else _feed(model, res.frame, res), calendar=calendar
                )
            except ValueError:
                continue
            parts.append(pred.with_columns(pl.lit(name).alias("model")))
        if not parts:
            raise ValueError("no candidate could forecast")
        long = pl.concat(parts)
        self.components_ = long
        if res is not None and self.update:
            self._score_pending(res, cfg)
        wide = self._wide(long)
        assert wide is not None
        wide = self._combine(wide)
        lo, hi = self._band(wide)
        p50 = wide["p50"].to_numpy()
        half = wide["half"].to_numpy()
        out = forecast_frame(
            wide[SERIES].to_list(),
            wide["issued_at"].dt.epoch("us").to_numpy(),
            wide["horizon"].to_numpy().astype(np.int64),
            (p50 + lo * half, p50, p50 + hi * half),
            [METHOD] * wide.height,
            step_us(cfg),
        ).sort(SERIES, "horizon")
        issued = wide.drop("p50").join(
            out.select(SERIES, "issued_at", "horizon", "p10", "p50", "p90"),
            on=[SERIES, "issued_at", "horizon"],
        )
        if self.update:
            self._remember(issued)
        return out

    def _pending_rows(self, issued: pl.DataFrame) -> pl.DataFrame:
        """What scoring an issued forecast needs: its keys, each candidate's p50 (float32,
        as its error is kept) and the served p50 / half-width / p10 / p90. The
        candidates' own bands are dropped: 14 columns of the 24, at fleet scale about
        half the rows' bytes (a model pickled with every column is cut down on load)."""
        return issued.select(
            SERIES,
            "issued_at",
            "valid_at",
            "horizon",
            "bucket",
            *(pl.col(f"{c}__p50").cast(pl.Float32) for c in self.candidates_),
            "half",
            "p10",
            "p50",
            "p90",
        )

    def _remember(self, issued: pl.DataFrame) -> None:
        issued = self._pending_rows(issued)
        pend = issued if self.pending_ is None else pl.concat([self.pending_, issued])
        pend = pend.unique([SERIES, "issued_at", "horizon"], keep="last")
        cap = MAX_PENDING_PER_SERIES
        self.pending_ = (
            pend.sort("issued_at", descending=True)
            .filter(pl.int_range(pl.len()).over(SERIES) < cap)
            .sort(SERIES, "issued_at", "horizon")
        )

    def _score_pending(self, res: Resampled, cfg: ForecastConfig) -> None:
        if self.pending_ is None or self.pending_.height == 0:
            return
        end = res.frame["ts"].max()
        due = self.pending_.filter(pl.col("valid_at") <= end)
        if due.height == 0:
            return
        # The buckets the forecasts were issued from (the join keeps the due series).
        grid = res.grid(cfg)
        actual = pl.DataFrame(
            {
                SERIES: np.repeat(np.asarray(grid.series, dtype=object), np.diff(grid.starts)),
                "valid_at": pl.Series(grid.ts_us, dtype=pl.Int64).cast(pl.Datetime("us", "UTC")),
                "actual": grid.value,
            }
        ).with_columns(pl.col(SERIES).cast(pl.String))
        scored = due.join(actual, on=[SERIES, "valid_at"], how="inner").filter(
            pl.col("actual").is_not_nan()
        )
        if scored.height:
            self._learn(scored)
        self.pending_ = self.pending_.filter(pl.col("valid_at") > end)

    # ------------------------------------------------------------------ provenance
    def _weights_table(self) -> dict[str, dict[str, dict[str, float]]]:
        out: dict[str, dict[str, dict[str, float]]] = {}
        maes = self._maes(self.errors_.keys())
        pooled = self._pool(maes)
        for sid, b in sorted(self.errors_.keys()):
            w = self._key_weights((sid, b), pooled, maes[(sid, b)])
            out.setdefault(sid, {})[b] = {
                c: round(float(x), 4) for c, x in zip(self.candidates_, w, strict=True)
            }
        return out

    def selection(self) -> dict[str, Any]:
        """What the served forecast is made of: the candidates, the horizon buckets (in
        the config's order), the windows (origins and the last target: the last bucket
        the data completes, made of data at or before the cutoff), and per series and
        bucket the candidates' weights now and at fit time."""
        check_is_fitted(self, "models_")
        return {
            "method": METHOD,
            "candidates": list(self.candidates_),
            "buckets": list(self.buckets_),
            "weighting": self.weighting,
            "data_cutoff": self.data_cutoff_.isoformat(),
            "window_origins": [o.isoformat() for o in self.origins_],
            # (A model pickled before the windows were put on the grid ended them at
            # the data cutoff.)
            "window_last_target": getattr(self, "last_target_", self.data_cutoff_).isoformat(),
            # The LightGBM candidate's boosting rounds, chosen on its held-out windows.
            "lightgbm_rounds": getattr(self.models_.get("lightgbm"), "rounds_", None),
            # What the LightGBM's target is measured from, chosen on the fit data.
            "lightgbm_anchor": _anchor(self.models_.get("lightgbm")),
            "weights_at_fit": self.fit_weights_,
            "weights_now": self._weights_table(),
        }

    def component_forecasts(self) -> pl.DataFrame:
        """The candidates' own forecasts of the last ``predict`` (column ``model``)."""
        check_is_fitted(self, "components_")
        seasons = self.config_.seasons
        out: pl.DataFrame = self.components_.with_columns(
            pl.col("model").replace(
                {
                    "seasonal_naive": f"seasonal_naive_{min(seasons)}",
                    LONG_SEASON: f"seasonal_naive_{max(seasons)}",
                }
            )
        )
        return out

    @property
    def lookback(self) -> int:
        """Buckets of history ``predict`` needs: the longest of the candidates'."""
        check_is_fitted(self, "models_")
        m = self.models_.get("lightgbm")
        lb = int(m.lookback) if m is not None and hasattr(m, "models_") else 0
        return max(lb, 3 * max(self.config_.seasons))


__all__ = [
    "CANDIDATES",
    "SelectedForecaster",
    "candidate",
    "fitted_candidates",
    "inverse_weights",
    "nested_weights",
]
