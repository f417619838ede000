"""``DemandForecaster``: one LightGBM model across every demand series, direct
multi-horizon, with p10 / p50 / p90.
Over 500 lines: one estimator. ``fit`` (smoothing choice, the conformal held-out
windows, the blend) and ``predict`` share the fitted state, and the shared contract
suite checks the class as a whole.

- **Global and direct.** All series (pool x resource x GPU model) train one model; a
  training row is an (origin, horizon) pair, the horizon is an input, and each
  horizon is forecast directly from the origin (no recursion, so no error feedback).
  The target is scale-free (see :mod:`models.demand.panel`): the deviation from the
  level (hourly) or from level + damped local trend (weekly), divided by the level.
- **Unconstrained.** ``value`` is running + pending, so a pool that sat at capacity
  trains the model on what was asked for, not on what fitted.
- **Stacking.** ``stacking="feature"`` (default): the windowed Holt-Winters forecast
  of :mod:`models.demand.smoothing` (each series' setting chosen on its fit data) is an
  input, so the trees learn corrections to an exponential-smoothing forecast;
  ``"offset"`` makes it the starting point the trees add to, ``"none"`` leaves it out.
  ``blend=True`` also mixes it into the point forecast with a per-horizon weight
  chosen on the held-out windows. Chosen on validation cutoffs (docs/demand.md).
- **Loss.** The median model's L1 loss on the scaled target, unweighted by default.
  ``weighting="mase"`` weights it by scale / seasonal noise (:func:`mase_weights`),
  which makes it the MASE the forecasts are judged by; it is not the default because
  LightGBM's weighted L1 leaf renewal made a fit ~2-3.5x slower (benchmark panel) and
  the gain it showed on early Helios cutoffs reversed on the scored ones (docs/demand.md).
- **Quantiles.** ``interval="conformal"`` (default): a median (L1) model plus split
  conformal bands: inside ``fit`` the last ``calibration_steps`` origins are held
  out (``cal_folds`` such windows, one before the other, each forecast by a model
  trained on the targets before it), and the 10th / 90th percentiles of the
  residuals per horizon — in units of the origin's recent volatility
  (``band_scale``), so a calm pool gets a narrow band and a bursty one a wide band —
  give the band; the final median model is then refit on everything. The held-out
  models are kept: they forecast their windows out of sample for the served
  combination (:meth:`DemandForecaster.heldout_predict`). A held-out
  window cut shorter than a season by a short history gives a symmetric band.
  ``interval="quantile"``: three LightGBM quantile models (0.1, 0.5, 0.9), sorted per
  row so they never cross. Both were measured (``predops eval demand`` prints both);
  conformal is the default because it was the better calibrated (see docs/demand.md).
- **Rounds.** ``rounds="heldout"`` (default): the held-out models train side by side,
  up to ``n_estimators`` rounds, while LightGBM scores their calibration windows after
  each, and stop once the pooled score has gone ``patience`` rounds without a new best
  (the rounds after it would only count if the curve fell again past that); the round count
  with the smallest L1 pooled over the windows (at least :data:`MIN_ROUNDS`) is what
  the final model trains and what the held-out models answer with (``rounds_``, the
  curve in ``heldout_curve_``). A panel the trees overfit after a few dozen rounds
  stops there; one they keep learning from uses them all. ``"fixed"`` trains every
  model ``n_estimators`` rounds. Chosen on the validation cutoffs of every real
  source (docs/demand.md): on Philly's validation fortnight the fit-once LightGBM
  went from MASE 0.792 to 0.393.
- **Short series.** A series with fewer than ``min_history`` observed buckets (or no
  level) is forecast by :func:`models.demand.baselines.short_series`, and its rows say
  which method answered.

Pure: numpy / polars / LightGBM; no I/O, no clock, no environment.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any, NamedTuple

import numpy as np
import polars as pl
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from predops.features.demand import SERIES
from predops.models.demand import smoothing
from predops.models.demand.baselines import short_series
from predops.models.demand.config import ForecastConfig, config_named
from predops.models.demand.grid import demand_columns, from_us, to_us
from predops.models.demand.panel import (
    Panel,
    baseline,
    build_panel,
    choose_anchor,
    design,
    feature_names,
    forecast_frame,
    lookback_steps,
    modelable,
    step_us,
    targets,
    training_pairs,
)

INTERVALS = ("conformal", "quantile")
QUANTILES = (0.1, 0.5, 0.9)
MIN_TRAIN_ROWS = 200
"""Fewer training pairs than this and the forecaster answers every series with the
short-series fallback (and says so) instead of fitting a tree model on noise."""
MIN_CAL_PER_HORIZON = 30
MIN_CAL_STEPS = 12
POOL_HORIZONS = 2
"""Conformal residuals of horizon h are pooled with h-2 .. h+2 (smoother bands)."""
METHOD = "lightgbm"
WEIGHTINGS = ("mase", "none")
W_CLIP = 5.0
BAND_SCALES = ("std", "noise")
STACKINGS = ("none", "feature", "offset")
ROUNDS = ("fixed", "heldout")
MIN_ROUNDS = 20
"""Boosting rounds at least, when the held-out windows choose them."""


class HeldOut(NamedTuple):
    """One calibration window's held-out model (see ``DemandForecaster._heldout_fits``)."""

    cut_us: int
    """The window's start: the model trained only on targets at or before it."""
    model: Any
    late: np.ndarray
    """The training pairs issued in the window (a mask over them)."""
    curve: np.ndarray | None
    """Its L1 on those pairs after every round (``rounds="heldout"`` only)."""
    scores: dict[int, np.ndarray] | None = None
    """Its forecasts of those pairs after the round counts that can be chosen (the
    best so far, :data:`MIN_ROUNDS`, the last): what LightGBM scored the window with,
    which equal ``model.predict`` at that many rounds to the bit."""


SMOOTHED = "smoothed__forecast"
SMOOTHING_CHOICE_ROWS = 300_000
"""Training pairs at most that choose the series' Holt-Winters settings."""


class DemandForecaster(BaseEstimator):  # type: ignore[misc]
    """Global LightGBM demand forecaster (see the module docstring).

    Parameters (stored unchanged; validated in ``fit``): ``config`` ("hourly",
    "weekly" or a :class:`ForecastConfig`), ``interval`` ("conformal" or "quantile"),
    LightGBM's ``n_estimators``, ``learning_rate``, ``num_leaves``,
    ``min_child_samples``, ``subsample``, ``colsample_bytree``; ``max_train_rows``
    (origin x horizon pairs kept, sampled beyond it: 500,000, chosen on the Azure VM
    validation cutoffs, where 1,000,000 cost 1.7x the CPU for a MASE 0.2 % lower;
    smaller panels are under it); ``random_state`` (seeds the
    pair sampling and LightGBM); ``n_jobs`` (LightGBM threads, None = its default);
    ``weighting`` ("none", the default, or "mase": loss weights of :func:`mase_weights`);
    ``band_scale`` (conformal normaliser: "std", the origin's ``level_window``
    standard deviation, or "noise", its seasonal noise, both over its scale);
    ``cal_folds`` (held-out calibration windows; their models share the half of
    ``max_train_rows`` one would get); ``stacking`` ("feature", the default, "offset"
    or "none") and ``blend`` (see the module docstring); ``series_band`` (weight of
    each series' own held-out residual quantiles in its band, against the pooled ones;
    0 = pooled only, the default); ``drop_outage_pairs`` (True, the default: leave out
    training pairs whose origin or target lies in a fleet-wide outage,
    :func:`panel.fleet_outages`, so the trees do not learn that a pool can drop to
    nothing overnight) and ``outage_window_gaps`` (False, the default: outage buckets
    are missing to the window statistics, lags, last sample and scale, not zeros; see
    :func:`panel.build_panel`); ``rounds`` ("heldout", the default: the round count
    with the smallest L1 on the held-out windows, at most ``n_estimators``; or
    "fixed": ``n_estimators``); ``patience`` (held-out fits stop once their pooled L1
    has gone that many rounds without a new best; 0: they train ``n_estimators``).
    Chosen on validation cutoffs (docs/demand.md).
    """

    def __init__(
        self,
        config: str | ForecastConfig = "hourly",
        interval: str = "conformal",
        n_estimators: int = 300,
        learning_rate: float = 0.05,
        num_leaves: int = 31,
        min_child_samples: int = 20,
        subsample: float = 0.8,
        colsample_bytree: float = 0.8,
        max_train_rows: int = 500_000,
        random_state: int = 0,
        n_jobs: int | None = None,
        weighting: str = "none",
        band_scale: str = "std",
        cal_folds: int = 2,
        stacking: str = "feature",
        series_band: float = 0.0,
        blend: bool = False,
        drop_outage_pairs: bool = True,
        outage_window_gaps: bool = False,
        rounds: str = "heldout",
        patience: int = 25,
    ) -> None:
        self.config = config
        self.interval = interval
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.num_leaves = num_leaves
        self.min_child_samples = min_child_samples
        self.subsample = subsample
        self.colsample_bytree = colsample_bytree
        self.max_train_rows = max_train_rows
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.weighting = weighting
        self.band_scale = band_scale
        self.cal_folds = cal_folds
        self.stacking = stacking
        self.series_band = series_band
        self.blend = blend
        self.drop_outage_pairs = drop_outage_pairs
        self.outage_window_gaps = outage_window_gaps
        self.rounds = rounds
        self.patience = patience

    def __setstate__(self, state: dict[str, Any]) -> None:
        # A model pickled before the rounds were chosen trained ``n_estimators`` of them.
        state.setdefault("rounds", "fixed")
        # ... and one pickled before the held-out fits could stop early trained them all.
        state.setdefault("patience", 0)
        if "models_" in state:
            state.setdefault("rounds_", int(state.get("n_estimators", 300)))
            state.setdefault("heldout_curve_", None)
        super().__setstate__(state)

    # ------------------------------------------------------------------ fit
    def _validate(self) -> ForecastConfig:
        cfg = self.config if isinstance(self.config, ForecastConfig) else config_named(self.config)
        if self.interval not in INTERVALS:
            raise ValueError(f"interval must be one of {INTERVALS}, got {self.interval!r}")
        if int(self.cal_folds) < 1:
            raise ValueError("cal_folds must be >= 1")
        if self.band_scale not in BAND_SCALES:
            raise ValueError(f"band_scale must be one of {BAND_SCALES}, got {self.band_scale!r}")
        if not 0.0 <= float(self.series_band) <= 1.0:
            raise ValueError("series_band must be in [0, 1]")
        if self.stacking not in STACKINGS:
            raise ValueError(f"stacking must be one of {STACKINGS}, got {self.stacking!r}")
        if self.weighting not in WEIGHTINGS:
            raise ValueError(f"weighting must be one of {WEIGHTINGS}, got {self.weighting!r}")
        if self.rounds not in ROUNDS:
            raise ValueError(f"rounds must be one of {ROUNDS}, got {self.rounds!r}")
        if int(self.patience) < 0:
            raise ValueError(f"patience must be >= 0 (0: every round), got {self.patience!r}")
        if int(self.n_estimators) < 1 or int(self.num_leaves) < 2:
            raise ValueError("n_estimators must be >= 1 and num_leaves >= 2")
        if not 0 < float(self.learning_rate) <= 1:
            raise ValueError("learning_rate must be in (0, 1]")
        for name in ("subsample", "colsample_bytree"):
            if not 0 < float(getattr(self, name)) <= 1:
                raise ValueError(f"{name} must be in (0, 1]")
        if int(self.max_train_rows) < MIN_TRAIN_ROWS:
            raise ValueError(f"max_train_rows must be >= {MIN_TRAIN_ROWS}")
        return cfg

    def fit(
        self,
        X: pl.DataFrame | pl.LazyFrame,
        y: None = None,
        *,
        calendar: pl.DataFrame | None = None,
    ) -> DemandForecaster:
        """Fit on ``X``: demand-contract rows (series_id, ts, value, ...) up to the data
        cutoff; ``calendar`` holds known-in-advance events (calendar contract)."""
        cfg = self._validate()
        lf = demand_columns(X)
        panel = build_panel(lf, cfg, calendar=calendar, outage_gaps=bool(self.outage_window_gaps))
        rng = np.random.default_rng(self.random_state)
        # "auto": the anchor this fit's data supports; the fitted config holds it.
        cfg = replace(cfg, anchor=choose_anchor(panel, cfg))
        self.config_ = cfg
        self.stacked_ = self.stacking != "none" and cfg.stack_window > 0
        self.feature_names_ = feature_names(cfg) + ([SMOOTHED] if self.stacked_ else [])
        self.data_cutoff_ = from_us(int(panel.ts_us.max()))
        self.n_series_ = len(panel.series)
        o, h = training_pairs(
            panel,
            cfg,
            rng,
            max_rows=int(self.max_train_rows),
            skip_outages=bool(self.drop_outage_pairs),
        )
        self.n_train_rows_ = int(o.size)
        self.models_: dict[float, Any] = {}
        self.band_: np.ndarray | None = None
        self.series_bands_: dict[str, np.ndarray] = {}
        self.blend_ = np.zeros(len(cfg.horizons))
        self.calibration_: str = "none"
        self.smoothing_: dict[str, int] = {}
        self.smoothing_default_ = 0
        self.heldout_model_: Any = None
        self.heldout_cut_us_ = 0
        self.heldout_models_: list[tuple[int, Any]] = []
        self.rounds_ = int(self.n_estimators)
        self.heldout_curve_: np.ndarray | None = None
        if o.size >= MIN_TRAIN_ROWS:
            if self.stacked_:
                self._choose_smoothing(panel, cfg, o, h)
            x, offset = self._inputs(panel, cfg, o, h, calendar)
            z = targets(panel, cfg, o, h) - offset
            # Bin the inputs once; every model of this fit trains on (a subset of) it.
            data = self._dataset(x, z, self._weights(panel, o))
            if self.interval == "quantile":
                for q in QUANTILES:
                    self.models_[q] = self._train(data, q)
            else:
                held = self._heldout_fits(panel, cfg, o, h, data)
                if self.rounds == "heldout" and held:
                    self.rounds_ = self._chosen_rounds(held)
                    for fold in held:
                        fold.model.best_iteration = self.rounds_
                # Kept: each forecasts its own window out of sample (heldout_predict).
                self.heldout_models_ = [(fold.cut_us, fold.model) for fold in held]
                if held:
                    self.heldout_cut_us_, self.heldout_model_ = self.heldout_models_[0]
                self.models_[0.5] = self._train(data, 0.5, self.rounds_)
                self.band_, self.calibration_ = self._conformal_band(panel, cfg, o, h, x, z, held)
        lookback = lookback_steps(cfg) * cfg.freq
        # Each series' own last lookback (a series that stopped reporting still answers).
        self.tail_ = lf.filter(pl.col("ts") > pl.col("ts").max().over(SERIES) - lookback).collect()
        self.calendar_ = calendar
        return self

    def _smoothed(
        self, panel: Panel, cfg: ForecastConfig, o: np.ndarray, h: np.ndarray, every: bool
    ) -> np.ndarray:
        """Windowed Holt-Winters forecasts of the pairs, in series units: (pairs,
        settings) with ``every``, else (pairs,) with each series' chosen setting."""
        k = smoothing.kernels_for(cfg.ets_season, cfg.stack_window, cfg.max_horizon)
        first = panel.starts[:-1][panel.series_index()[o]]
        # An outage is a gap to the smoothing, not demand (see panel.fleet_outages).
        values = smoothing.filled(np.where(panel.outage, np.nan, panel.value), panel.starts)
        if every:
            return smoothing.forecasts(values, first, o, h, k)
        pick = np.array(
            [self.smoothing_.get(s, self.smoothing_default_) for s in panel.series], dtype=np.int64
        )[panel.series_index()[o]]
        out = np.empty(o.size)
        for j in np.unique(pick):
            sel = pick == j
            out[sel] = smoothing.forecasts(values, first[sel], o[sel], h[sel], k[j : j + 1])[:, 0]
        return out

    @staticmethod
    def _cal_steps(panel: Panel, cfg: ForecastConfig, o: np.ndarray) -> int:
        """Origins in each held-out window: ``calibration_steps``, or a third of the
        span the model can issue from when that is shorter (so the held-out model
        still has data to learn from)."""
        span = int((panel.ts_us[o].max() - panel.ts_us[o].min()) // step_us(cfg))
        return min(cfg.calibration_steps, max(MIN_CAL_STEPS, span // 3))

    def _choose_smoothing(
        self, panel: Panel, cfg: ForecastConfig, o: np.ndarray, h: np.ndarray
    ) -> None:
        """Each series' Holt-Winters setting: the smallest absolute error over its
        training pairs (all of the fit data, as ETS estimates on all of it; choosing on
        the targets before the held-out windows only, or on the pairs issued in them
        only, was not better on the validation cutoffs, see docs/demand.md)."""
        if o.size > SMOOTHING_CHOICE_ROWS:  # a random subset decides (the cost is per pair)
            rng = np.random.default_rng(int(self.random_state) + 100)
            keep = np.sort(rng.choice(o.size, size=SMOOTHING_CHOICE_ROWS, replace=False))
            o, h = o[keep], h[keep]
        fc = self._smoothed(panel, cfg, o, h, every=True)
        err = np.abs(fc - panel.value[o + h][:, None])
        best = smoothing.best_settings(err, panel.series_index()[o], len(panel.series))
        self.smoothing_default_ = int(np.argmin(err.sum(axis=0)))
        self.smoothing_ = {s: int(best[i]) for i, s in enumerate(panel.series)}

    def _inputs(
        self,
        panel: Panel,
        cfg: ForecastConfig,
        o: np.ndarray,
        h: np.ndarray,
        calendar: pl.DataFrame | None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Model inputs of the pairs and the offset the trees' output is added to
        (the smoothed forecast in target units with ``stacking="offset"``, else 0)."""
        x = design(panel, cfg, o, h, calendar=calendar)
        if not self.stacked_:
            return x, np.zeros(o.size)
        s = (self._smoothed(panel, cfg, o, h, every=False) - baseline(panel, cfg, o, h)) / (
            panel.scale[o]
        )
        x = np.column_stack([x, s.astype(np.float32)])
        return x, (s if self.stacking == "offset" else np.zeros(o.size))

    def _weights(self, panel: Panel, origins: np.ndarray) -> np.ndarray | None:
        return mase_weights(panel, origins) if self.weighting == "mase" else None

    def _dataset(self, x: np.ndarray, z: np.ndarray, w: np.ndarray | None) -> Any:
        import lightgbm as lgb

        data = lgb.Dataset(
            x,
            z,
            weight=w,
            feature_name=self.feature_names_,
            free_raw_data=False,
            params={"verbose": -1, "num_threads": self._threads()},
        )
        return data.construct()

    def _threads(self) -> int:
        """LightGBM threads for training *and* predicting: ``Booster.predict`` does not
        take the training's setting, and without one runs on every CPU."""
        return 0 if self.n_jobs is None else int(self.n_jobs)  # 0: OpenMP's default

    def _params(self, q: float) -> dict[str, Any]:
        return {
            "objective": "l1" if (q == 0.5 and self.interval == "conformal") else "quantile",
            "alpha": q,
            "learning_rate": float(self.learning_rate),
            "num_leaves": int(self.num_leaves),
            "min_data_in_leaf": int(self.min_child_samples),
            "bagging_fraction": float(self.subsample),
            "bagging_freq": 1 if float(self.subsample) < 1 else 0,
            "feature_fraction": float(self.colsample_bytree),
            "seed": int(self.random_state),
            "deterministic": True,
            # Row-wise histograms: the same trees as col-wise here, without LightGBM's
            # timing of both at every fit; on the benchmark panel (1M pairs x 41
            # inputs) fit+predict 60.7 -> 51.7 s, the forecasts unchanged.
            "force_row_wise": True,
            "num_threads": self._threads(),
            "verbose": -1,
        }

    def _train(self, data: Any, q: float, rounds: int | None = None) -> Any:
        """A booster of ``rounds`` boosting rounds (default ``n_estimators``)."""
        import lightgbm as lgb

        n = int(self.n_estimators if rounds is None else rounds)
        return lgb.train(self._params(q), data, num_boost_round=n)

    def _train_scored(
        self, folds: list[tuple[Any, Any, float]]
    ) -> list[tuple[Any, np.ndarray, dict[int, np.ndarray]]]:
        """The held-out median boosters, one per ``(train, valid, weight)`` (subsets of
        the same binned data), trained side by side one round at a time, each scoring
        its window's L1 after every round (scoring leaves the trees as they are).

        Training stops at ``n_estimators`` rounds, when a booster has no split left to
        make (its curve ends at its last tree), or, with ``patience`` > 0, when the
        windows' pooled L1 (each weighted by ``weight``, its pairs) has not improved on
        its best for ``patience`` rounds: the rounds after that best only matter if the
        curve falls again past that many rounds of no gain. Returns each booster (its
        training data freed) with its curve and its window forecasts after the round
        counts :meth:`_chosen_rounds` can pick (see ``HeldOut.scores``)."""
        import lightgbm as lgb

        params = {**self._params(0.5), "metric": "l1", "num_iterations": int(self.n_estimators)}
        boosters = []
        for train, valid, _ in folds:
            booster = lgb.Booster(params=params, train_set=train)
            booster.add_valid(valid, "heldout")
            boosters.append(booster)
        weight = np.asarray([w for *_, w in folds], dtype=np.float64)
        curves: list[list[float]] = [[] for _ in folds]
        # Each booster's window forecasts after this round (LightGBM's own buffer,
        # handed to an evaluation function; copied only where a round may be chosen).
        now: list[np.ndarray] = []
        scores: list[dict[int, np.ndarray]] = [{} for _ in folds]

        def grab(preds: np.ndarray, _: Any) -> tuple[str, float, bool]:
            now.append(preds)
            return "forecasts", 0.0, False

        patience = int(self.patience)
        best, best_round = np.inf, 0
        for r in range(int(self.n_estimators)):
            if any([booster.update() for booster in boosters]):
                break  # a booster added no tree this round: its curve ends before it
            now.clear()
            values = np.asarray([b.eval_valid(grab)[0][2] for b in boosters], dtype=np.float64)
            for curve, value in zip(curves, values, strict=True):
                curve.append(float(value))
            pooled = float(weight @ values) / float(weight.sum())
            improved = pooled < best
            if improved:
                best, best_round = pooled, r
            for own, preds in zip(scores, now, strict=True):
                if improved:
                    for k in [k for k in own if k != MIN_ROUNDS]:
                        del own[k]  # the earlier best
                    own[r + 1] = preds.copy()
                if r + 1 == MIN_ROUNDS and r + 1 not in own:
                    own[r + 1] = preds.copy()
            if patience > 0 and r - best_round >= patience:
                break
        last: list[np.ndarray | None] = [None] * len(boosters)
        if len(now) == len(boosters):
            last = list(now)
        out = []
        for booster, curve, own, final in zip(boosters, curves, scores, last, strict=True):
            if final is not None and curve and len(curve) not in own:
                own[len(curve)] = final.copy()  # the last round (chosen if under the floor)
            # As ``lgb.train`` leaves it: the trees only, the binned data released.
            booster.model_from_string(booster.model_to_string()).free_dataset()
            out.append((booster, np.asarray(curve, dtype=np.float64), own))
        return out

    def _difficulty(self, panel: Panel, cfg: ForecastConfig, origins: np.ndarray) -> np.ndarray:
        """Recent volatility at the origin, in scale units (the conformal normaliser)."""
        if self.band_scale == "noise":
            out: np.ndarray = panel.noise[origins] / panel.scale[origins]
            return out
        j = panel.issue_names.index(f"value__std_{cfg.level_window}")
        d: np.ndarray = np.nan_to_num(panel.issue[origins, j].astype(np.float64), nan=0.0)
        return d

    def _heldout_fits(
        self, panel: Panel, cfg: ForecastConfig, o: np.ndarray, h: np.ndarray, data: Any
    ) -> list[HeldOut]:
        """The held-out models, one per calibration window: (window start, booster,
        the window's pairs, its L1 on them after every round with ``rounds="heldout"``).

        The held-out models train on at most half of ``max_train_rows`` between them
        (random subsets of the earlier targets): their residuals only set the band's
        width (and, with ``rounds="heldout"``, the rounds), and this keeps a calibrated
        fit under 1.5 plain fits."""
        # A short history gets a shorter held-out window (a third of the span the model
        # can issue from), so the held-out model still has data to learn from.
        steps = self._cal_steps(panel, cfg, o)
        end_us = int(panel.ts_us.max())
        out: list[HeldOut] = []
        todo: list[tuple[int, np.ndarray, np.ndarray]] = []
        folds = int(self.cal_folds)
        for fold in range(folds):
            # Fold f holds out the origins of [end - (f+1) steps, end - f steps); its
            # model trains only on targets at or before that window's start.
            cut_us = end_us - (fold + 1) * steps * step_us(cfg)
            early = np.flatnonzero(panel.ts_us[o + h] <= cut_us)
            late = (panel.ts_us[o] >= cut_us) & (panel.ts_us[o] < cut_us + steps * step_us(cfg))
            if fold == 0:
                late = panel.ts_us[o] >= cut_us
            if early.size < MIN_TRAIN_ROWS or late.sum() < MIN_CAL_PER_HORIZON:
                break
            cap = max(MIN_TRAIN_ROWS, int(self.max_train_rows) // (2 * folds))
            if early.size > cap:
                rng = np.random.default_rng(int(self.random_state) + 1 + fold)
                early = np.sort(rng.choice(early, size=cap, replace=False))
            if self.rounds == "heldout":
                todo.append((cut_us, early, late))
            else:
                out.append(HeldOut(cut_us, self._train(data.subset(early), 0.5), late, None))
        if todo:
            # Side by side: the pooled curve decides when to stop (``patience``).
            trained = self._train_scored(
                [
                    (data.subset(early), data.subset(np.flatnonzero(late)), float(late.sum()))
                    for _, early, late in todo
                ]
            )
            for (cut_us, _, late), (model, curve, scores) in zip(todo, trained, strict=True):
                out.append(HeldOut(cut_us, model, late, curve, scores))
        return out

    def _chosen_rounds(self, held: list[HeldOut]) -> int:
        """The round count whose held-out L1, pooled over the windows (each weighted by
        its pairs), is the smallest; at least :data:`MIN_ROUNDS`. A booster that stopped
        early (no split left to make) scored fewer rounds: the pool is over the rounds
        every window scored."""
        curves = [(float(f.late.sum()), f.curve) for f in held if f.curve is not None]
        n = min(c.size for _, c in curves)
        total = sum(w * c[:n] for w, c in curves)
        self.heldout_curve_ = np.asarray(total, dtype=np.float64) / sum(w for w, _ in curves)
        best = int(np.argmin(self.heldout_curve_)) + 1
        return max(min(MIN_ROUNDS, n), best)

    def _conformal_band(
        self,
        panel: Panel,
        cfg: ForecastConfig,
        o: np.ndarray,
        h: np.ndarray,
        x: np.ndarray,
        z: np.ndarray,
        held: list[HeldOut],
    ) -> tuple[np.ndarray, str]:
        """Per-horizon (lo, hi) residual quantiles in difficulty units; shape (H, 2),
        from the held-out models' residuals on their windows."""
        hz = np.asarray(cfg.horizons, dtype=np.int64)
        steps = self._cal_steps(panel, cfg, o)
        parts: list[tuple[np.ndarray, ...]] = []
        for fold in held:
            late = fold.late
            # LightGBM's own forecasts of the window at the chosen rounds, kept while
            # it scored the window (the same numbers, without predicting them again).
            pred = (fold.scores or {}).get(self.rounds_)
            if pred is None:
                pred = fold.model.predict(x[late], num_threads=self._threads())
            # The smoothed forecast's distance from the model's, in target units.
            gap = x[late, -1] - pred - (x[late, -1] if self.stacking == "offset" else 0.0)
            parts.append((o[late], h[late], z[late] - pred, gap))
        if parts:
            oc, hc, resid, gap = (np.concatenate([p[i] for p in parts]) for i in range(4))
            how = "split"
            if self.blend and self.stacked_:
                resid = self._choose_blend(panel, oc, hc, hz, resid, gap)
        else:
            # Too little history to hold any out: in-sample residuals of the final
            # model (narrower than honest bands; the attribute says so).
            oc, hc, resid = o, h, z - self.models_[0.5].predict(x, num_threads=self._threads())
            how = "in-sample"
        d = self._difficulty(panel, cfg, oc)
        self.difficulty_offset_ = float(max(np.median(d), 1e-3))
        r = resid / (d + self.difficulty_offset_)
        # Held-out origins spanning less than a season all sit at a few phases of it,
        # where the residuals' sign is the phase's, not the model's: such a window sets
        # a symmetric band (the 80 % quantile of |residual| on both sides).
        symmetric = steps < min(cfg.calibration_steps, *cfg.seasons)
        band = _horizon_bands(r, hc, hz, symmetric)
        # Each series' own residual quantiles, mixed with the pooled ones (weight
        # series_band): a calm series gets a narrower band than the pool's.
        w = float(self.series_band)
        if w > 0:
            sid = panel.series_index()[oc]
            for k in np.unique(sid):
                mine = sid == k
                if mine.sum() >= MIN_CAL_PER_HORIZON * (2 * POOL_HORIZONS + 1):
                    own = _horizon_bands(r[mine], hc[mine], hz, symmetric)
                    self.series_bands_[panel.series[k]] = w * own + (1 - w) * band
        return band, how + ("-symmetric" if symmetric else "")

    def _choose_blend(
        self,
        panel: Panel,
        oc: np.ndarray,
        hc: np.ndarray,
        hz: np.ndarray,
        resid: np.ndarray,
        gap: np.ndarray,
    ) -> np.ndarray:
        """Per horizon, the weight w of the smoothed forecast in the point forecast
        ``(1 - w) model + w smoothed`` with the smallest MASE over the held-out windows
        (residuals of horizons h +- POOL_HORIZONS, weighted scale / seasonal noise);
        returns the held-out residuals of the blended forecast."""
        weight = panel.scale[oc] / panel.noise[oc]
        grid = np.linspace(0.0, 1.0, 11)
        for i, k in enumerate(hz):
            sel = np.abs(hc - k) <= POOL_HORIZONS
            if sel.sum() < MIN_CAL_PER_HORIZON:
                continue
            err = np.abs(resid[sel, None] - grid[None, :] * gap[sel, None])
            self.blend_[i] = grid[int(np.argmin(weight[sel] @ err))]
        out: np.ndarray = resid - self.blend_[np.searchsorted(hz, hc)] * gap
        return out

    # ------------------------------------------------------------------ predict
    def predict(
        self,
        X: pl.DataFrame | pl.LazyFrame | None = None,
        *,
        calendar: pl.DataFrame | None = None,
    ) -> pl.DataFrame:
        """Forecast every horizon from the last bucket of every series in ``X``
        (default: the end of the fit data). Columns: series_id, issued_at, valid_at,
        horizon (steps), p10, p50, p90, method. Only the last
        :func:`~models.demand.panel.lookback_steps` buckets of ``X`` matter."""
        check_is_fitted(self, "config_")
        cfg = self.config_
        cal = self.calendar_ if calendar is None else calendar
        panel = build_panel(
            self.tail_ if X is None else X,
            cfg,
            calendar=cal,
            outage_gaps=bool(self.outage_window_gaps),
        )
        hz = np.asarray(cfg.horizons, dtype=np.int64)
        last = panel.last_rows()
        use_model = modelable(panel, cfg)[last] & bool(self.models_)
        parts: list[pl.DataFrame] = []
        if use_model.any():
            parts.append(self._predict_model(panel, cfg, last[use_model], hz, cal))
        for k in np.flatnonzero(~use_model):
            y = panel.value[panel.starts[k] : panel.starts[k + 1]]
            if not np.isfinite(y).any():
                continue  # nothing observed: no forecast can be made
            q = short_series(y, hz, cfg.seasons)
            parts.append(
                forecast_frame(
                    [panel.series[k]] * hz.size,
                    np.full(hz.size, panel.ts_us[last[k]]),
                    hz,
                    (q.p10, q.p50, q.p90),
                    [q.method] * hz.size,
                    step_us(cfg),
                )
            )
        if not parts:
            raise ValueError("no series with an observed bucket to forecast")
        return pl.concat(parts).sort(SERIES, "horizon")

    def _predict_model(
        self,
        panel: Panel,
        cfg: ForecastConfig,
        rows: np.ndarray,
        hz: np.ndarray,
        calendar: pl.DataFrame | None,
    ) -> pl.DataFrame:
        o = np.repeat(rows, hz.size)
        h = np.tile(hz, rows.size)
        return self._forecast_pairs(panel, cfg, o, h, calendar, self.models_)

    def _forecast_pairs(
        self,
        panel: Panel,
        cfg: ForecastConfig,
        o: np.ndarray,
        h: np.ndarray,
        calendar: pl.DataFrame | None,
        models: dict[float, Any],
    ) -> pl.DataFrame:
        hz = np.asarray(cfg.horizons, dtype=np.int64)
        x, offset = self._inputs(panel, cfg, o, h, calendar)
        base = baseline(panel, cfg, o, h) + panel.scale[o] * offset
        scale = panel.scale[o]
        if self.interval == "quantile":
            threads = self._threads()
            zs = np.stack([models[q].predict(x, num_threads=threads) for q in QUANTILES])
            zs = np.sort(zs, axis=0)
            p10, p50, p90 = (base + scale * zs[i] for i in range(3))
        else:
            assert self.band_ is not None
            pred = models[0.5].predict(x, num_threads=self._threads())
            if self.stacked_:
                # Blend with the smoothed forecast (weight 0 unless ``blend``).
                w = self.blend_[np.searchsorted(hz, h)]
                pred = pred + w * (x[:, -1] - offset - pred)
            p50 = base + scale * pred
            width = scale * (self._difficulty(panel, cfg, o) + self.difficulty_offset_)
            idx = np.searchsorted(hz, h)
            bands = np.stack([self.series_bands_.get(sid, self.band_) for sid in panel.series])
            b = bands[panel.series_index()[o], idx]
            p10 = p50 + np.minimum(b[:, 0], 0.0) * width
            p90 = p50 + np.maximum(b[:, 1], 0.0) * width
        series = [panel.series[i] for i in panel.series_index()[o]]
        return forecast_frame(
            series, panel.ts_us[o], h, (p10, p50, p90), [METHOD] * o.size, step_us(cfg)
        )

    def heldout_predict(
        self,
        X: pl.DataFrame | pl.LazyFrame,
        origins: list[datetime],
        *,
        calendar: pl.DataFrame | None = None,
    ) -> pl.DataFrame | None:
        """Forecasts from each of ``origins`` (every horizon whose target is at or
        before the fit data's end) by the held-out model of the latest calibration
        window that starts at or before the origin, trained only on targets at or
        before that window's start: out-of-sample forecasts of the recent past at no
        extra fit. An origin before every window gets no rows (the caller sees which
        ``issued_at`` are missing); None when no origin is covered or the fit held
        nothing out (too short a history). ``X`` is the fit data (the band is the
        final model's)."""
        check_is_fitted(self, "config_")
        # (A model pickled before the folds were all kept has the latest one only.)
        held = list(getattr(self, "heldout_models_", None) or [])
        if not held and self.heldout_model_ is not None:
            held = [(int(self.heldout_cut_us_), self.heldout_model_)]
        if not held or self.interval != "conformal":
            return None
        cuts = [to_us(o) for o in origins]
        if max(cuts) < min(c for c, _ in held):
            return None
        cfg = self.config_
        panel = build_panel(
            demand_columns(X),
            cfg,
            calendar=self.calendar_ if calendar is None else calendar,
            outage_gaps=bool(self.outage_window_gaps),
        )
        end_us = int(panel.ts_us.max())
        hz = np.asarray(cfg.horizons, dtype=np.int64)
        ok = modelable(panel, cfg)
        sid = panel.series_index()
        cal = self.calendar_ if calendar is None else calendar
        frames: list[pl.DataFrame] = []
        for cut_us, model in sorted(held, key=lambda cm: -cm[0]):
            # Each origin goes to the freshest model whose window it lies in (or after).
            mine = [c for c in cuts if c >= cut_us]
            cuts = [c for c in cuts if c < cut_us]
            os_: list[np.ndarray] = []
            hs: list[np.ndarray] = []
            for o_us in mine:
                rows = np.flatnonzero((panel.ts_us == o_us) & ok)
                for r in rows:
                    keep = hz[panel.ts_us[r] + hz * step_us(cfg) <= end_us]
                    keep = keep[r + keep < panel.starts[sid[r] + 1]]
                    os_.append(np.full(keep.size, r))
                    hs.append(keep)
            if os_ and sum(a.size for a in os_) > 0:
                o, h = np.concatenate(os_), np.concatenate(hs)
                frames.append(self._forecast_pairs(panel, cfg, o, h, cal, {0.5: model}))
        return pl.concat(frames) if frames else None

    @property
    def lookback(self) -> int:
        """Buckets of history ``predict`` reads (see :func:`lookback_steps`)."""
        check_is_fitted(self, "config_")
        return lookback_steps(self.config_)


def _horizon_bands(r: np.ndarray, hc: np.ndarray, hz: np.ndarray, symmetric: bool) -> np.ndarray:
    """(H, 2) bands of scaled residuals ``r`` at horizons ``hc``: per horizon of ``hz``,
    pooled over +- POOL_HORIZONS (all residuals where those are too few)."""
    band = np.zeros((hz.size, 2))
    for i, k in enumerate(hz):
        sel = np.abs(hc - k) <= POOL_HORIZONS
        band[i] = _band(r[sel] if sel.sum() >= MIN_CAL_PER_HORIZON else r, symmetric)
    return band


def _band(r: np.ndarray, symmetric: bool) -> np.ndarray:
    """(lo, hi) of scaled residuals ``r``: their 10th / 90th percentiles, or minus /
    plus the 80th percentile of their size."""
    if symmetric:
        a = float(np.quantile(np.abs(r), 0.8))
        return np.array([-a, a])
    out: np.ndarray = np.quantile(r, [0.1, 0.9])
    return out


def mase_weights(panel: Panel, origins: np.ndarray) -> np.ndarray:
    """Training weight of each origin's pairs: its scale over its seasonal noise, over
    the median, clipped to [1/W_CLIP, W_CLIP].

    The target is ``(y - base) / scale`` and the forecasts are judged by MASE, the
    error over the seasonal-naive noise; weighting the L1 loss by scale / noise makes
    the loss the trees minimise that MASE, so a calm pool (small noise for its size)
    counts as much as a jumpy one instead of being drowned by it. The clip keeps one
    nearly flat series from owning the fit."""
    w = panel.scale[origins] / panel.noise[origins]
    med = float(np.median(w)) if w.size else 1.0
    out: np.ndarray = np.clip(w / max(med, 1e-12), 1 / W_CLIP, W_CLIP)
    return out
