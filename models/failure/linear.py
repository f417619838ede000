"""The linear model shared by the logistic baseline and the classifier's linear blend.

Numeric columns: signed log (``sign(x) * log1p(|x|)``: counters and hours span orders of
magnitude), median-imputed with a missing-value indicator, standardised. Categorical
columns: one-hot, rare levels (< ``min_frequency`` rows) pooled, unseen levels ignored.
Columns are named (DataFrames) or positional (float arrays, where a categorical column
holds level codes and NaN for missing).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sklearn.compose import ColumnTransformer
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import FunctionTransformer, OneHotEncoder, StandardScaler


def signed_log(x: np.ndarray) -> np.ndarray:
    out: np.ndarray = np.sign(x) * np.log1p(np.abs(x))
    return out


def linear_pipeline(
    numeric: Sequence[str] | Sequence[int],
    categorical: Sequence[str] | Sequence[int],
    *,
    C: float = 1.0,
    max_iter: int = 500,
    missing_level: str | float = "__missing__",
) -> Pipeline:
    """Preprocessing (see module doc) + an L2 logistic regression of strength ``1 / C``."""
    num = make_pipeline(
        FunctionTransformer(signed_log, feature_names_out="one-to-one"),
        SimpleImputer(strategy="median", add_indicator=True, keep_empty_features=True),
        StandardScaler(),
    )
    cat = make_pipeline(
        SimpleImputer(strategy="constant", fill_value=missing_level),
        OneHotEncoder(handle_unknown="ignore", min_frequency=20),
    )
    pre = ColumnTransformer([("num", num, list(numeric)), ("cat", cat, list(categorical))])
    return Pipeline([("pre", pre), ("lr", LogisticRegression(C=C, max_iter=max_iter))])


class LinearPart:
    """A :func:`linear_pipeline` on float-encoded rows (categoricals as level codes),
    with its log-odds split into per-input-column contributions."""

    def __init__(self, n_features: int, categorical: Sequence[int], *, C: float = 1.0) -> None:
        self.n_features = n_features
        self.categorical = sorted(categorical)
        self.numeric = [i for i in range(n_features) if i not in set(self.categorical)]
        self.pipeline = linear_pipeline(self.numeric, self.categorical, C=C, missing_level=-1.0)

    def fit(self, X: np.ndarray, y: np.ndarray) -> LinearPart:
        self.pipeline.fit(X, y)
        self._source = self._output_sources()
        return self

    def _output_sources(self) -> np.ndarray:
        """The input column behind each column the regression sees."""
        pre: ColumnTransformer = self.pipeline.named_steps["pre"]
        src: list[int] = list(self.numeric)
        num = pre.named_transformers_["num"]
        imputer: SimpleImputer = num.named_steps["simpleimputer"]
        if imputer.indicator_ is not None:
            src += [self.numeric[int(j)] for j in imputer.indicator_.features_]
        if self.categorical:
            enc: OneHotEncoder = pre.named_transformers_["cat"].named_steps["onehotencoder"]
            for j, levels in enumerate(enc.categories_):
                rare = enc.infrequent_categories_[j]
                # One column per frequent level, plus one for the pooled rare levels.
                width = len(levels) if rare is None else len(levels) - len(rare) + 1
                src += [self.categorical[j]] * width
        out = np.asarray(src, dtype=np.int64)
        width = self.pipeline.named_steps["lr"].coef_.shape[1]
        if out.size != width:
            raise RuntimeError(f"linear part: mapped {out.size} of {width} columns")
        return out

    def raw(self, X: np.ndarray) -> np.ndarray:
        """Log-odds of each row (no down-sampling correction)."""
        out: np.ndarray = self.pipeline.decision_function(X)
        return out

    def contributions(self, X: np.ndarray) -> np.ndarray:
        """Per-input-column log-odds terms, shape (n, n_features + 1); the last column is
        the intercept. Rows sum to :meth:`raw`."""
        Z = self.pipeline.named_steps["pre"].transform(X)
        Z = Z.toarray() if hasattr(Z, "toarray") else np.asarray(Z)
        lr: LogisticRegression = self.pipeline.named_steps["lr"]
        terms = Z * lr.coef_[0]
        out = np.zeros((X.shape[0], self.n_features + 1))
        np.add.at(out.T, self._source, terms.T)
        out[:, -1] = float(lr.intercept_[0])
        return out
