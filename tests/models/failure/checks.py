"""The estimator contract every failure-model estimator passes.

scikit-learn's own battery (``parametrize_with_checks``) covers the generic contract
(params stored unchanged, validation in ``fit``, trailing-underscore state, ``fit``
returns self, clone, pickling, input validation, n_features_in_...). The checks here
add what a failure model owes on top: probabilities that are probabilities, the same
answer for the same seed whatever the seed, and no use of rows' order beyond ``time``.
Each ``check_*`` takes an unfitted estimator and data ``(X, y, time)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import clone

Data = tuple[pd.DataFrame, np.ndarray, np.ndarray]
Check = Callable[[Any, Data], None]


def _fit(est: Any, data: Data, **params: Any) -> Any:
    X, y, t = data
    return clone(est).set_params(**params).fit(X, y, time=t)


def check_probabilities_are_probabilities(est: Any, data: Data) -> None:
    p = _fit(est, data).predict_proba(data[0])
    assert p.shape == (len(data[0]), 2)
    assert np.all((p >= 0) & (p <= 1))
    np.testing.assert_allclose(p.sum(axis=1), 1.0)


def check_same_seed_same_answer(est: Any, data: Data) -> None:
    for seed in (0, 7, 12345):
        a = _fit(est, data, random_state=seed).predict_proba(data[0])
        b = _fit(est, data, random_state=seed).predict_proba(data[0])
        np.testing.assert_array_equal(a, b)


def check_row_order_irrelevant_given_time(est: Any, data: Data) -> None:
    X, y, t = data
    order = np.random.default_rng(3).permutation(len(X))
    a = _fit(est, data).predict_proba(X)
    shuffled = (X.iloc[order].reset_index(drop=True), y[order], t[order])
    b = _fit(est, shuffled).predict_proba(X)
    np.testing.assert_allclose(a, b, atol=1e-9)


def check_later_slices_are_later(est: Any, data: Data) -> None:
    fitted = _fit(est, data)
    spans = fitted.slice_spans_
    tr, va, ca = spans["train"], spans["validation"], spans["calibration"]
    assert tr is not None and va is not None and ca is not None
    assert tr[1] + fitted.purge < va[0] <= va[1] < ca[0]


CHECKS: tuple[Check, ...] = (
    check_probabilities_are_probabilities,
    check_same_seed_same_answer,
    check_row_order_irrelevant_given_time,
    check_later_slices_are_later,
)
