"""``NodeFailureClassifier``: a calibrated LightGBM classifier for rare failures.
Over 500 lines: one estimator. Slicing, down-sampling, the linear blend, calibration and
prediction share the fitted state, and the shared contract suite checks the class as a
whole.

What ``fit(X, y, time=...)`` does, in order:

1. Orders rows by ``time`` (row order when not given) and cuts three time slices: the
   earliest rows train the booster, the next ``validation_fraction`` stop it early, the
   latest ``calibration_fraction`` calibrate it. A ``purge`` gap (in ``time`` units)
   drops training rows whose label window reaches into the later slices: a row labelled
   "fails within 24 h" at ``t`` has seen failures up to ``t + 24 h``.
2. Keeps every positive of the training slice and a ``negative_rate`` share of its
   negatives (failures are rare: 0.1-2 % of rows). Down-sampling multiplies the odds
   the booster learns by ``1 / negative_rate``; adding ``log(negative_rate)`` to its raw
   score undoes that (the "probability correction"). When the rows were already sampled
   before ``fit`` (``prior_negative_rate``: the share of every slice's negatives kept,
   uniformly, e.g. by :mod:`predops.features.sampling`), only ``negative_rate /
   prior_negative_rate`` of the training slice's negatives are dropped here, and the
   later slices weigh each negative ``1 / prior_negative_rate`` in early stopping, the
   blend and calibration, so the probabilities stay those of the whole population.
3. Trains LightGBM on the training slice, stopping when average precision on the
   untouched validation slice has not improved for ``early_stopping_rounds`` rounds.
   With ``linear_blend``, a logistic regression (:class:`models.failure.linear.LinearPart`)
   is fitted on the same training rows and the score becomes ``w * booster log-odds +
   (1 - w) * linear log-odds``, ``w`` in 0, 0.1, ..., 1 chosen by average precision on the
   calibration slice (untouched by early stopping; the validation slice without one, 1
   without either): on small data the booster shrinks toward the linear model when
   held-back rows say so.
4. Fits a scikit-learn calibrator (``isotonic`` or ``sigmoid``, i.e. Platt scaling on
   the corrected log-odds) on the untouched calibration slice, so ``predict_proba`` is a
   probability the policy engine can price.

When the purge leaves the training slice without both classes (an input spanning
little more than the purge, e.g. 40 days of daily rows at a 30-day horizon) and
``groups`` (one entity id per row) are given, the validation and calibration slices are
whole entities instead (a stable hash of the id): rows of one drive never sit on both
sides, so label windows that overlap in time cannot leak an entity's own future.
``slicing_`` says which cut was used.

Categorical columns (pandas ``category`` / ``object`` / string dtypes, or those named in
``categorical_features``) are encoded with the categories seen in ``fit``; a value not
seen then is treated as missing. Missing values (NaN) are allowed everywhere: a node
that stops reporting is a signal, not something to impute.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import lightgbm as lgb
import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import average_precision_score
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import check_is_fitted, column_or_1d, validate_data

from predops.models.failure.linear import LinearPart

CALIBRATIONS = ("isotonic", "sigmoid")
BLEND_WEIGHTS = tuple(np.round(np.linspace(0.0, 1.0, 11), 1))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    out: np.ndarray = 1.0 / (1.0 + np.exp(-np.clip(x, -50.0, 50.0)))
    return out


def _logit(p: np.ndarray) -> np.ndarray:
    q = np.clip(p, 1e-9, 1 - 1e-9)
    out: np.ndarray = np.log(q / (1 - q))
    return out


def _as_pandas(X: Any) -> Any:
    """Polars frames become pandas (categoricals stay categorical); others pass through."""
    if not isinstance(X, pd.DataFrame) and hasattr(X, "to_pandas") and hasattr(X, "schema"):
        return X.to_pandas()
    return X


def _codes(column: pd.Series, levels: list[str]) -> np.ndarray:
    """Positions of ``column``'s values in ``levels`` as float32 (NaN: missing or unseen).

    Maps the column's distinct values once, not every row (millions of rows, few levels).
    """
    cat = column.astype("category")
    index = {v: i for i, v in enumerate(levels)}
    lookup = np.array(
        [index.get(str(v), np.nan) for v in cat.cat.categories] + [np.nan], dtype=np.float32
    )
    codes = cat.cat.codes.to_numpy()  # -1 for missing -> the trailing NaN
    out: np.ndarray = lookup[codes]
    return out


def _group_share(groups: Any, n: int) -> np.ndarray:
    """A stable number in [0, 1) per row from its group id (same id, same number)."""
    g = np.asarray(groups).astype(str)
    if g.shape != (n,):
        raise ValueError(f"groups must have one value per row ({n}), got shape {g.shape}")
    h = pd.util.hash_array(g.astype(object), categorize=True)
    out: np.ndarray = (h >> np.uint64(11)).astype(np.float64) / float(1 << 53)
    return out


def _times(time: Any, n: int) -> np.ndarray:
    """``time`` as float64 (datetimes in seconds), or the row index when None."""
    if time is None:
        return np.arange(n, dtype=np.float64)
    t = np.asarray(time)
    if t.shape != (n,):
        raise ValueError(f"time must have one value per row ({n}), got shape {t.shape}")
    if np.issubdtype(t.dtype, np.datetime64):
        return t.astype("datetime64[us]").astype(np.int64).astype(np.float64) / 1e6
    out = t.astype(np.float64)
    if np.isnan(out).any():
        raise ValueError("time has missing values")
    return out


class NodeFailureClassifier(ClassifierMixin, BaseEstimator):  # type: ignore[misc]
    """Binary failure classifier: LightGBM + negative down-sampling + calibration.

    Parameters are LightGBM's (``n_estimators`` is the most boosting rounds), plus:

    - ``negative_rate``: share of training negatives kept (None or 1.0: all).
    - ``prior_negative_rate``: share of negatives the input rows already hold (1.0: the
      input is not sampled).
    - ``early_stopping_rounds``: None trains ``n_estimators`` rounds.
    - ``validation_fraction`` / ``calibration_fraction``: the time-later slices.
    - ``calibration``: ``"isotonic"``, ``"sigmoid"`` or None (raw corrected scores).
    - ``purge``: gap between the training slice and the later slices, in ``time``
      units (seconds for datetimes); set it to the label horizon.
    - ``monotone_constraints``: ``{feature name: +1 | -1}`` (pandas input only).
    - ``linear_blend``: blend with a logistic regression (weight chosen on validation);
      ``linear_C``: its inverse L2 strength.
    - ``random_state``: int, ``np.random.Generator`` or None; all randomness (down-sampling,
      LightGBM's bagging seed) derives from it.
    """

    def __init__(
        self,
        *,
        n_estimators: int = 600,
        learning_rate: float = 0.05,
        num_leaves: int = 31,
        min_child_samples: int = 100,
        feature_fraction: float = 0.8,
        bagging_fraction: float = 0.8,
        reg_lambda: float = 1.0,
        negative_rate: float | None = 0.1,
        prior_negative_rate: float = 1.0,
        early_stopping_rounds: int | None = 50,
        validation_fraction: float = 0.15,
        calibration: str | None = "isotonic",
        calibration_fraction: float = 0.15,
        purge: float = 0.0,
        categorical_features: str | Sequence[str] = "auto",
        monotone_constraints: Mapping[str, int] | None = None,
        linear_blend: bool = False,
        linear_C: float = 1.0,
        random_state: int | np.random.Generator | None = 0,
        n_jobs: int = 1,
    ) -> None:
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.num_leaves = num_leaves
        self.min_child_samples = min_child_samples
        self.feature_fraction = feature_fraction
        self.bagging_fraction = bagging_fraction
        self.reg_lambda = reg_lambda
        self.negative_rate = negative_rate
        self.prior_negative_rate = prior_negative_rate
        self.early_stopping_rounds = early_stopping_rounds
        self.validation_fraction = validation_fraction
        self.calibration = calibration
        self.calibration_fraction = calibration_fraction
        self.purge = purge
        self.categorical_features = categorical_features
        self.monotone_constraints = monotone_constraints
        self.linear_blend = linear_blend
        self.linear_C = linear_C
        self.random_state = random_state
        self.n_jobs = n_jobs

    # ------------------------------------------------------------------ tags
    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        tags.input_tags.allow_nan = True
        return tags

    # ------------------------------------------------------------------ input
    def _check_params(self) -> None:
        if self.calibration not in (*CALIBRATIONS, None):
            raise ValueError(f"calibration must be one of {CALIBRATIONS} or None")
        r = self.negative_rate
        if r is not None and not 0.0 < r <= 1.0:
            raise ValueError(f"negative_rate must be in (0, 1], got {r}")
        if not 0.0 < self.prior_negative_rate <= 1.0:
            raise ValueError(
                f"prior_negative_rate must be in (0, 1], got {self.prior_negative_rate}"
            )
        for name in ("validation_fraction", "calibration_fraction"):
            v = getattr(self, name)
            if not 0.0 <= v < 0.5:
                raise ValueError(f"{name} must be in [0, 0.5), got {v}")
        if self.n_estimators < 1:
            raise ValueError("n_estimators must be >= 1")
        if self.purge < 0:
            raise ValueError("purge must be >= 0")

    def _encode(self, X: Any, *, reset: bool) -> Any:
        """Categorical columns of a DataFrame -> float codes (unseen -> NaN)."""
        X = _as_pandas(X)
        if not isinstance(X, pd.DataFrame):
            if reset:
                if self.categorical_features not in ("auto", (), []):
                    raise ValueError("categorical_features by name needs a DataFrame input")
                self.categories_: dict[str, list[Any]] = {}
            return X
        if reset:
            if self.categorical_features == "auto":
                cats = [
                    str(c)
                    for c in X.columns
                    if isinstance(X[c].dtype, pd.CategoricalDtype)
                    or X[c].dtype == object
                    or pd.api.types.is_string_dtype(X[c].dtype)
                ]
            else:
                cats = [str(c) for c in self.categorical_features]
                missing = [c for c in cats if c not in X.columns]
                if missing:
                    raise ValueError(f"categorical_features not in X: {missing}")
            self.categories_ = {
                c: sorted({str(v) for v in X[c].dropna().unique()}, key=str) for c in cats
            }
        if not self.categories_:
            return X
        out = X.copy(deep=False)
        for c, levels in self.categories_.items():
            if c not in out.columns:
                continue  # validate_data names the missing column
            out[c] = _codes(out[c], levels)
        return out

    def _validated(self, X: Any, y: Any = None, *, reset: bool) -> Any:
        enc = self._encode(X, reset=reset)
        kw: dict[str, Any] = {
            "ensure_all_finite": "allow-nan",
            "dtype": [np.float32, np.float64],
            "reset": reset,
        }
        if reset:
            return validate_data(self, enc, y, **kw)
        return validate_data(self, enc, **kw)

    # ------------------------------------------------------------------ fit
    def fit(self, X: Any, y: Any, *, time: Any = None, groups: Any = None) -> NodeFailureClassifier:
        """Fit on rows ``X`` with binary labels ``y`` observed at ``time`` of entities
        ``groups`` (optional; see module doc)."""
        self._check_params()
        Xv, y = self._validated(X, y, reset=True)
        y = column_or_1d(y, warn=True)
        check_classification_targets(y)
        y_type = type_of_target(y, input_name="y", raise_unknown=True)
        classes = np.unique(y)
        if classes.size < 2:
            raise ValueError(
                f"{type(self).__name__} needs samples of 2 classes; got 1 class ({classes[0]!r})"
            )
        if y_type != "binary":
            raise ValueError(
                f"Only binary classification is supported. The type of the target is {y_type}."
            )
        self.classes_ = classes
        yb = (y == classes[1]).astype(np.float64)
        t = _times(time, Xv.shape[0])
        rng = np.random.default_rng(self.random_state)
        share = None if groups is None else _group_share(groups, Xv.shape[0])
        train, val, cal = self._slices(t, yb, share)

        prior = float(self.prior_negative_rate)
        rate = 1.0 if self.negative_rate is None else float(self.negative_rate)
        here = min(1.0, rate / prior)  # what is left to drop of the training negatives
        if here < 1.0:
            keep = (yb[train] == 1) | (rng.random(train.size) < here)
            train = train[keep]
        self.negative_rate_ = min(rate, prior)
        self.log_odds_shift_ = math.log(self.negative_rate_)
        # Negatives of the later slices stand for 1 / prior rows of the population.
        weight = np.where(yb == 1, 1.0, 1.0 / prior) if prior < 1.0 else None

        cat_idx = [self._col_index(c) for c in self.categories_]
        params = self._lgb_params(int(rng.integers(0, 2**31 - 1)))
        dtrain = lgb.Dataset(
            Xv[train], yb[train], categorical_feature=cat_idx or "auto", free_raw_data=True
        )
        callbacks: list[Any] = []
        valid_sets = []
        if val.size and self.early_stopping_rounds:
            dval = lgb.Dataset(
                Xv[val],
                yb[val],
                weight=None if weight is None else weight[val],
                reference=dtrain,
                categorical_feature=cat_idx,
            )
            valid_sets = [dval]
            callbacks.append(lgb.early_stopping(self.early_stopping_rounds, verbose=False))
        self.booster_ = lgb.train(
            params,
            dtrain,
            num_boost_round=self.n_estimators,
            valid_sets=valid_sets,
            callbacks=callbacks,
        )
        best = self.booster_.best_iteration
        self.best_iteration_ = int(best) if best and best > 0 else self.booster_.current_iteration()
        self._fit_blend(Xv, yb, train, cal if cal.size else val, cat_idx, weight)

        self.calibrator_: Any = None
        self.calibration_brier_: dict[str, float] = {}
        if cal.size and self.calibration is not None:
            p = _sigmoid(self._corrected_raw(Xv[cal]))
            w_cal = None if weight is None else weight[cal]
            self.calibrator_ = self._fit_calibrator(p, yb[cal], w_cal)
            q = self._apply_calibrator(p)
            self.calibration_brier_ = {
                "uncalibrated": float(np.average((p - yb[cal]) ** 2, weights=w_cal)),
                "calibrated_in_sample": float(np.average((q - yb[cal]) ** 2, weights=w_cal)),
            }
        self.n_train_rows_ = int(train.size)
        self.n_validation_rows_ = int(val.size)
        self.n_calibration_rows_ = int(cal.size)
        # Time span of each slice (in ``time`` units): the later slices start after the
        # training slice ends, plus the purge gap.
        self.slice_spans_ = {
            name: (float(t[idx].min()), float(t[idx].max())) if idx.size else None
            for name, idx in (("train", train), ("validation", val), ("calibration", cal))
        }
        return self

    def _fit_blend(
        self,
        Xv: np.ndarray,
        yb: np.ndarray,
        train: np.ndarray,
        held: np.ndarray,
        cats: list[int],
        weight: np.ndarray | None = None,
    ) -> None:
        """The linear part (on ``train``) and the blend weight (on ``held``; see module doc)."""
        self.linear_: LinearPart | None = None
        self.blend_weight_ = 1.0
        self.blend_validation_ap_: dict[float, float] = {}
        if not self.linear_blend or not 0 < yb[train].sum() < train.size:
            return
        self.linear_ = LinearPart(Xv.shape[1], cats, C=self.linear_C).fit(Xv[train], yb[train])
        if not held.size:
            return
        zb = np.asarray(
            self.booster_.predict(
                Xv[held],
                num_iteration=self.best_iteration_,
                raw_score=True,
                num_threads=self._threads(),
            )
        )
        zl = self.linear_.raw(Xv[held])
        w_held = None if weight is None else weight[held]
        ap = {
            float(w): float(
                average_precision_score(yb[held], w * zb + (1 - w) * zl, sample_weight=w_held)
            )
            for w in BLEND_WEIGHTS
        }
        self.blend_validation_ap_ = ap
        # Highest average precision; ties go to the booster (the larger weight).
        self.blend_weight_ = max(ap, key=lambda w: (round(ap[w], 12), w))

    def _col_index(self, name: str) -> int:
        names = list(getattr(self, "feature_names_in_", []))
        return names.index(name)

    def _slices(
        self, t: np.ndarray, yb: np.ndarray, share: np.ndarray | None = None
    ) -> tuple[np.ndarray, ...]:
        """Row indices of the training, validation and calibration slices (by time; by
        group ``share`` when the purge leaves the training slice without both classes,
        see module doc).

        A later slice that holds only one class cannot stop or calibrate anything; it is
        folded back (validation) or dropped (calibration) so tiny inputs still fit.
        """
        order = np.argsort(t, kind="stable")
        n = order.size
        vf = self.validation_fraction if self.early_stopping_rounds else 0.0
        cf = self.calibration_fraction if self.calibration is not None else 0.0
        ts = t[order]
        cut_cal = ts[min(n - 1, int(n * (1 - cf)))] if cf > 0 else np.inf
        cut_val = ts[min(n - 1, int(n * (1 - cf - vf)))] if vf > 0 else cut_cal
        cal = order[ts >= cut_cal]
        val = order[(ts >= cut_val) & (ts < cut_cal - self.purge)]
        train = order[ts < cut_val - self.purge]

        def two_classes(idx: np.ndarray) -> bool:
            return idx.size > 0 and 0 < yb[idx].sum() < idx.size

        self.slicing_ = "time"
        # Whole entities only when the training slice lacks a class. A later slice that
        # the purge swallowed or that holds no failure is folded back below: cutting a
        # small node fleet (80 nodes x 11 days, 72 h purge) by node instead stopped its
        # booster after 2 rounds, with no reasons left to give.
        if share is not None and not two_classes(train):
            sv = share[order]
            cal = order[sv < cf]
            val = order[(sv >= cf) & (sv < cf + vf)]
            train = order[sv >= cf + vf]
            self.slicing_ = "groups"
        if not two_classes(cal):
            cal = order[:0]
        if not two_classes(val):
            val = order[:0]
        if not two_classes(train):
            self.slicing_ = "none"
            # Too little data to hold slices back: train on everything before calibration.
            train = order[ts < cut_cal] if two_classes(order[ts < cut_cal]) else order
            val = order[:0]
            if train.size == n:
                cal = order[:0]
        return train, val, cal

    def _lgb_params(self, seed: int) -> dict[str, Any]:
        params: dict[str, Any] = {
            "objective": "binary",
            "metric": "average_precision",
            "learning_rate": self.learning_rate,
            "num_leaves": self.num_leaves,
            "min_data_in_leaf": self.min_child_samples,
            "feature_fraction": self.feature_fraction,
            "bagging_fraction": self.bagging_fraction,
            "bagging_freq": 1 if self.bagging_fraction < 1.0 else 0,
            "lambda_l2": self.reg_lambda,
            "seed": seed,
            "num_threads": self.n_jobs,
            "deterministic": True,
            "force_row_wise": True,
            "verbose": -1,
        }
        if self.monotone_constraints:
            names = list(getattr(self, "feature_names_in_", []))
            unknown = [k for k in self.monotone_constraints if k not in names]
            if unknown:
                raise ValueError(f"monotone_constraints name unknown features {unknown}")
            params["monotone_constraints"] = [
                int(self.monotone_constraints.get(n, 0)) for n in names
            ]
            params["monotone_constraints_method"] = "advanced"
        return params

    def _fit_calibrator(self, p: np.ndarray, y: np.ndarray, weight: np.ndarray | None) -> Any:
        if self.calibration == "isotonic":
            iso = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip")
            return iso.fit(p, y, sample_weight=weight)
        # Platt scaling on the log-odds; a weak penalty keeps it a plain logistic fit.
        return LogisticRegression(C=1e4).fit(_logit(p).reshape(-1, 1), y, sample_weight=weight)

    def _apply_calibrator(self, p: np.ndarray) -> np.ndarray:
        if self.calibrator_ is None:
            return p
        # Closed forms of the fitted calibrators (their ``predict`` re-validates the input,
        # which costs more than the arithmetic when a server scores one row).
        if isinstance(self.calibrator_, IsotonicRegression):
            cal = self.calibrator_
            out: np.ndarray = np.interp(p, cal.X_thresholds_, cal.y_thresholds_)
            return out
        coef = float(self.calibrator_.coef_[0, 0])
        return _sigmoid(coef * _logit(p) + float(self.calibrator_.intercept_[0]))

    # ------------------------------------------------------------------ predict
    def _blend(self) -> tuple[float, LinearPart | None]:
        """(weight of the booster, linear part); models saved before the blend existed
        have neither attribute."""
        return getattr(self, "blend_weight_", 1.0), getattr(self, "linear_", None)

    def _threads(self, num_threads: int = 0) -> int:
        """A prediction's LightGBM threads: ``num_threads``, else the fitted ``n_jobs``
        (0: OpenMP's count). ``Booster.predict`` does not take the training's setting;
        without one it runs on OpenMP's count whatever the training used."""
        return int(num_threads) if num_threads else int(self.n_jobs)

    def _corrected_raw(self, Xv: np.ndarray, num_threads: int = 0) -> np.ndarray:
        raw = np.asarray(
            self.booster_.predict(
                Xv,
                num_iteration=self.best_iteration_,
                raw_score=True,
                num_threads=self._threads(num_threads),
            ),
            dtype=np.float64,
        )
        w, linear = self._blend()
        if linear is not None and w < 1.0:
            raw = w * raw + (1.0 - w) * linear.raw(Xv)
        out: np.ndarray = raw + self.log_odds_shift_
        return out

    def uncalibrated_proba(self, X: Any) -> np.ndarray:
        """P(failure) from the booster with the down-sampling correction, before calibration."""
        check_is_fitted(self)
        return _sigmoid(self._corrected_raw(self._validated(X, reset=False)))

    def proba_encoded(self, Xv: np.ndarray, *, num_threads: int = 0) -> np.ndarray:
        """Calibrated P(failure), shape (n,), of rows already encoded as floats: the
        columns of ``feature_names_in_`` in order, categoricals as their positions in
        ``categories_`` (NaN: missing or unseen). No validation — the serving fast path
        for rows built from arrays; :meth:`predict_proba` is the checked way.
        ``num_threads``: LightGBM threads (0: the fitted setting; 1 suits a few rows, where
        waking a thread pool costs more than the trees)."""
        return self._apply_calibrator(_sigmoid(self._corrected_raw(Xv, num_threads)))

    def predict_proba(self, X: Any) -> np.ndarray:
        """Calibrated probabilities, shape (n, 2): columns follow ``classes_``."""
        check_is_fitted(self)
        p = self._apply_calibrator(self.uncalibrated_proba(X))
        return np.column_stack([1.0 - p, p])

    def predict(self, X: Any) -> np.ndarray:
        """The more probable class of each row (threshold 0.5 on the calibrated p)."""
        p = self.predict_proba(X)[:, 1]
        out: np.ndarray = self.classes_[(p >= 0.5).astype(int)]
        return out

    def contributions(self, X: Any) -> np.ndarray:
        """Signed per-feature contributions to each row's log-odds (LightGBM
        ``pred_contrib``), shape (n, n_features + 1); the last column is the bias, which
        includes the down-sampling correction (and, blended, the linear part's terms are
        added with their weight). They explain the uncalibrated score;
        isotonic calibration is monotone, so their ranking and signs carry over."""
        check_is_fitted(self)
        return self.contributions_encoded(self._validated(X, reset=False))

    def contributions_encoded(self, Xv: np.ndarray) -> np.ndarray:
        """:meth:`contributions` of rows encoded as for :meth:`proba_encoded`."""
        c = np.asarray(
            self.booster_.predict(
                Xv,
                num_iteration=self.best_iteration_,
                pred_contrib=True,
                num_threads=self._threads(),
            ),
            dtype=np.float64,
        )
        w, linear = self._blend()
        if linear is not None and w < 1.0:
            c = w * c + (1.0 - w) * linear.contributions(Xv)
        c[:, -1] += self.log_odds_shift_
        return c

    def feature_importance(self, kind: str = "gain") -> dict[str, float]:
        """Total ``gain`` (or ``split`` count) per feature over the used trees."""
        check_is_fitted(self)
        imp = self.booster_.feature_importance(kind, iteration=self.best_iteration_)
        names = list(
            getattr(self, "feature_names_in_", [f"x{i}" for i in range(self.n_features_in_)])
        )
        return {n: float(v) for n, v in zip(names, imp, strict=True)}
