"""``FailureScorer``: the served :class:`FailureModel`'s arithmetic on numpy arrays.

``FailureModel.predict_risk`` builds polars and pandas frames per call, which costs tens
of milliseconds whatever the row count; a server scoring one node per request cannot
afford that. The scorer is built once per loaded model version and keeps what the
model's ``design`` step does as arrays:

- the base features in the model's order (numbers as float32, as the feature store keeps
  them; categoricals as their positions in the classifier's fitted levels, NaN when
  missing or unseen),
- the anomaly scores from :meth:`NodeAnomalyScorer.transform_columns` (float32),
- the horizon column of a stacked model,

then one LightGBM call per classifier (``proba_encoded``) and TreeSHAP
(``contributions_encoded``) only for the rows that get reasons. The results equal
``FailureModel.predict_proba`` / ``predict_risk`` (tests check it).

:func:`pyfunc_predict` is the registered model's MLflow entry point: a few rows (what
``mlflow models serve`` gets per request) go through the scorer from plain records, so
the model served by MLflow pays milliseconds per request, not a frame conversion.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import numpy as np
import pandas as pd
import polars as pl

from predops.core.contracts import Reason
from predops.features.definitions import FeatureDef
from predops.models.failure.classifier import NodeFailureClassifier
from predops.models.failure.model import HORIZON_FEATURE, STACKED_KEY, FailureModel
from predops.models.failure.reasons import top_reasons

FeatureValue = float | int | str | None
FLOAT32_MAX = float(np.finfo(np.float32).max)
_PLAIN_NUMBER_TYPES = frozenset({float, int, type(None)})
"""Value types a numeric feature passes the fast check with (JSON gives only these)."""
SINGLE_THREAD_ROWS = 256
"""Up to this many rows LightGBM predicts on one thread (waking a pool costs more)."""


class FeatureVectorError(ValueError):
    """A feature vector the model cannot score: vector ``row``, key ``feature``."""

    def __init__(self, row: int, feature: str, message: str) -> None:
        super().__init__(f"vector {row}, feature {feature!r}: {message}")
        self.row, self.feature, self.message = row, feature, message


@dataclass(frozen=True, slots=True)
class Design:
    """Rows ready for the classifiers: ``encoded`` (rows x design columns, float64, no
    horizon column; categoricals as level codes) and ``text``, the categorical columns'
    values as given (by design column index), which reasons quote instead of codes."""

    encoded: np.ndarray
    text: Mapping[int, Sequence[str | None]]

    @property
    def rows(self) -> int:
        return int(self.encoded.shape[0])

    def take(self, idx: np.ndarray) -> Design:
        return Design(self.encoded[idx], {j: [v[i] for i in idx] for j, v in self.text.items()})

    def shown(self, row: int) -> list[Any]:
        """Row ``row``'s values as reasons quote them (numbers, or the categorical text)."""
        values: list[Any] = self.encoded[row].tolist()
        for j, column in self.text.items():
            values[j] = column[row]
        return values


class FailureScorer:
    """Array-level scoring with one loaded :class:`FailureModel` (see module doc)."""

    def __init__(self, model: FailureModel) -> None:
        self.model = model
        self.horizons: tuple[timedelta, ...] = model.horizons
        self.features: list[str] = model.base_features
        self._feature_set = frozenset(self.features)
        first = next(iter(model.classifiers.values()))
        self.levels: dict[str, list[str]] = dict(first.categories_)
        self.categorical = frozenset(
            d.name for d in model.feature_defs if d.dtype == "category"
        ) | frozenset(self.levels)
        self.codes = {
            name: {v: float(i) for i, v in enumerate(levels)}
            for name, levels in self.levels.items()
        }
        self.numeric = [f for f in self.features if f not in self.categorical]
        self.categorical_order = [f for f in self.features if f in self.categorical]
        position = {f: j for j, f in enumerate(self.features)}
        self._numeric_at = np.asarray([position[f] for f in self.numeric], dtype=np.int64)
        self._categorical_at = [position[f] for f in self.categorical_order]
        self._numeric_index = {f: k for k, f in enumerate(self.numeric)}
        anomaly = model.anomaly.feature_names_out() if model.anomaly is not None else []
        self.design_columns: list[str] = [*self.features, *anomaly]
        defs = {d.name: d for d in model.all_defs}
        self.defs: list[FeatureDef] = [defs[n] for n in self.design_columns]
        self._per_horizon: list[tuple[NodeFailureClassifier, float | None]] = []
        for h, label in zip(self.horizons, model.labels, strict=True):
            if model.strategy == STACKED_KEY:
                stacked_at = float(np.float32(h.total_seconds() / 3600))
                self._per_horizon.append((model.classifiers[STACKED_KEY], stacked_at))
            else:
                self._per_horizon.append((model.classifiers[label], None))
        for clf, hours in self._per_horizon:
            expected = [*self.design_columns, *([HORIZON_FEATURE] if hours is not None else [])]
            if list(clf.feature_names_in_) != expected:
                raise ValueError("the classifier's columns differ from the model's design")

    # ------------------------------------------------------------------ design
    def _design(self, numbers: np.ndarray, categories: Mapping[str, Sequence[Any]]) -> Design:
        """Rows from the numeric features (``numbers``: rows x :attr:`numeric`, float32,
        NaN when missing) and the categorical ones (strings, None when missing)."""
        n = numbers.shape[0]
        encoded = np.empty((n, len(self.design_columns)), dtype=np.float64)
        encoded[:, self._numeric_at] = numbers
        text: dict[int, Sequence[str | None]] = {}
        for name, j in zip(self.categorical_order, self._categorical_at, strict=True):
            values = categories[name]
            lookup = self.codes.get(name, {})
            encoded[:, j] = [lookup.get(v, math.nan) if v is not None else math.nan for v in values]
            text[j] = values
        if self.model.anomaly is not None:
            wide = numbers.astype(np.float64)
            nan = np.full(n, math.nan)

            def column(name: str) -> np.ndarray:
                k = self._numeric_index.get(name)
                return nan if k is None else wide[:, k]

            scores = self.model.anomaly.transform_columns(column, n)
            base = len(self.features)
            for k, name in enumerate(self.design_columns[base:]):
                encoded[:, base + k] = scores[name].astype(np.float32)
        return Design(encoded, text)

    def design_frame(self, frame: pl.DataFrame) -> Design:
        """Rows of a feature frame (the online store's), one per frame row."""
        missing = [c for c in self.features if c not in frame.columns]
        if missing:
            raise ValueError(f"the feature frame lacks model features, e.g. {missing[:5]}")

        numbers = frame.select(
            pl.col(c).cast(pl.Float32).fill_null(math.nan) for c in self.numeric
        ).to_numpy()
        cats = {c: frame[c].cast(pl.String).to_list() for c in self.categorical_order}
        return self._design(np.asarray(numbers, dtype=np.float32).reshape(frame.height, -1), cats)

    def design_vectors(self, vectors: Sequence[Mapping[str, FeatureValue]]) -> Design:
        """Rows of feature vectors ``{feature: value}``: every model feature present
        (None = missing), numbers finite, categoricals strings
        (:class:`FeatureVectorError` names the vector and the feature otherwise)."""
        rows = []
        for i, vec in enumerate(vectors):
            if vec.keys() != self._feature_set:
                self._check_keys(i, vec)
            row = [vec[c] for c in self.numeric]
            if not set(map(type, row)) <= _PLAIN_NUMBER_TYPES or any(
                (v := vec[c]) is not None and not isinstance(v, str) for c in self.categorical_order
            ):
                self._check_values(i, vec)
            rows.append(row)
        try:
            wide = np.array(rows, dtype=np.float64).reshape(len(vectors), len(self.numeric))
        except OverflowError:  # an integer beyond float64: found and named below
            wide = np.full((len(vectors), len(self.numeric)), np.inf)
        with np.errstate(invalid="ignore"):
            out_of_range = ~(np.abs(wide) <= FLOAT32_MAX)  # inf, NaN and huge
        given_nan = out_of_range.sum(axis=1) != [row.count(None) for row in rows]
        for doubted in np.flatnonzero(given_nan).tolist():
            self._check_values(doubted, vectors[doubted])
        cats = {c: [vec[c] for vec in vectors] for c in self.categorical_order}
        return self._design(wide.astype(np.float32), cats)

    def _check_keys(self, i: int, vec: Mapping[str, FeatureValue]) -> None:
        """Raise :class:`FeatureVectorError` for vector ``i``'s first unknown or missing key."""
        extra = [k for k in vec if k not in self._feature_set]
        if extra:
            raise FeatureVectorError(i, extra[0], "not a feature of the model")
        absent = [k for k in self.features if k not in vec]
        if absent:
            raise FeatureVectorError(
                i,
                absent[0],
                f"missing ({len(absent)} model features absent; send null for unknown)",
            )

    def _check_values(self, i: int, vec: Mapping[str, FeatureValue]) -> None:
        """Raise :class:`FeatureVectorError` for vector ``i``'s first value of the wrong type
        or out of range (the slow path: only vectors the fast checks doubt come here)."""
        for k, v in vec.items():
            if v is None:
                continue
            if k in self.categorical:
                if not isinstance(v, str):
                    raise FeatureVectorError(i, k, "must be a string or null")
            elif isinstance(v, bool) or not isinstance(v, int | float):
                raise FeatureVectorError(i, k, "must be a number or null")
            elif abs(v) > FLOAT32_MAX or not math.isfinite(v):  # int-safe order
                raise FeatureVectorError(i, k, f"must be finite (float32 range), got {v!r}")

    # ------------------------------------------------------------------ predict
    def _with_horizon(self, encoded: np.ndarray, hours: float | None) -> np.ndarray:
        if hours is None:
            return encoded
        return np.hstack([encoded, np.full((encoded.shape[0], 1), hours)])

    def proba(self, design: Design, horizons: Sequence[int] | None = None) -> np.ndarray:
        """Calibrated P(failure within each horizon), shape (rows, len(horizons)); the
        horizons are indices into :attr:`horizons` (None: all)."""
        which = list(range(len(self.horizons))) if horizons is None else list(horizons)
        n = design.rows
        out = np.empty((n, len(which)))
        if n == 0:
            return out
        threads = 1 if n * len(which) <= SINGLE_THREAD_ROWS else 0
        if self.model.strategy == STACKED_KEY:  # one LightGBM call for every horizon
            clf = self._per_horizon[0][0]
            parts = [self._with_horizon(design.encoded, self._per_horizon[i][1]) for i in which]
            p = clf.proba_encoded(np.vstack(parts), num_threads=threads)
            out[:] = np.clip(p.reshape(len(which), n).T, 0.0, 1.0)
            return out
        for k, i in enumerate(which):
            clf, hours = self._per_horizon[i]
            p = clf.proba_encoded(self._with_horizon(design.encoded, hours), num_threads=threads)
            out[:, k] = np.clip(p, 0.0, 1.0)
        return out

    def reasons(self, design: Design, horizon: int, *, top: int = 3) -> list[tuple[Reason, ...]]:
        """Top signed contributions of each row for horizon index ``horizon`` (a TreeSHAP
        pass: about 2 ms per row and horizon)."""
        if design.rows == 0:
            return []
        clf, hours = self._per_horizon[horizon]
        contrib = clf.contributions_encoded(self._with_horizon(design.encoded, hours))
        width = len(self.design_columns)
        return [
            top_reasons(contrib[k, :width], design.shown(k), self.defs, top=top)
            for k in range(design.rows)
        ]

    def horizon_index(self, hours: float) -> int:
        """The index of the model's horizon of ``hours`` hours (ValueError if none)."""
        for i, h in enumerate(self.horizons):
            if math.isclose(h.total_seconds() / 3600, hours):
                return i
        have = [h.total_seconds() / 3600 for h in self.horizons]
        raise ValueError(f"the model has no {hours:g} h horizon; it has {have}")


PYFUNC_RECORD_ROWS = 64
"""Up to this many rows :func:`pyfunc_predict` takes the records path; larger inputs
convert the frame once (cheaper per row)."""
_scorers: dict[int, tuple[FailureModel, FailureScorer]] = {}


def _scorer_of(model: FailureModel) -> FailureScorer:
    found = _scorers.get(id(model))
    if found is None or found[0] is not model:
        found = (model, FailureScorer(model))
        _scorers.clear()  # one model per serving process; never grows
        _scorers[id(model)] = found
    return found[1]


def _plain(value: Any) -> FeatureValue:
    """A pandas cell as a feature value: missing (None / NaN / NA) -> None."""
    if value is None or value is pd.NA or (isinstance(value, float) and value != value):
        return None
    return value  # type: ignore[no-any-return]


def pyfunc_predict(model: FailureModel, model_input: pd.DataFrame) -> pd.DataFrame:
    """MLflow pyfunc entry point: feature rows in, ``p_fails_within_<h>`` columns out
    (the same numbers as ``FailureModel.__call__``)."""
    if isinstance(model_input, pd.DataFrame) and len(model_input) <= PYFUNC_RECORD_ROWS:
        scorer = _scorer_of(model)
        if not set(scorer.features) <= set(model_input.columns):
            return model(model_input)  # which names what is missing
        records = model_input[scorer.features].to_dict("records")
        vectors = [{k: _plain(v) for k, v in row.items()} for row in records]
        try:
            design = scorer.design_vectors(vectors)
        except FeatureVectorError:
            design = None  # e.g. booleans: the frame path casts what it can, or says why
        if design is not None:
            p = scorer.proba(design)
            return pd.DataFrame({f"p_{lbl}": p[:, i] for i, lbl in enumerate(model.labels)})
    return model(model_input)
