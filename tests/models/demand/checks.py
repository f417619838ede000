"""A shared battery of estimator-contract checks (scikit-learn's habits) that every
demand forecaster passes: each ``check_*`` takes an unfitted estimator and the data
to fit it on, and fails with the rule it broke."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import polars as pl
import pytest
from sklearn.base import BaseEstimator, clone
from sklearn.exceptions import NotFittedError

Check = Callable[[Any, pl.DataFrame], None]


def _fitted_attrs(est: Any) -> set[str]:
    return {k for k in vars(est) if k.endswith("_") and not k.startswith("__")}


def check_is_base_estimator(est: Any, data: pl.DataFrame) -> None:
    assert isinstance(est, BaseEstimator)


def check_init_stores_params_unchanged(est: Any, data: pl.DataFrame) -> None:
    params = est.get_params()
    again = type(est)(**params).get_params()
    assert again == params
    assert not _fitted_attrs(est), "__init__ must not set fitted (trailing _) attributes"


def check_unfitted_predict_raises(est: Any, data: pl.DataFrame) -> None:
    with pytest.raises(NotFittedError):
        clone(est).predict(data)


def check_fit_returns_self_and_leaves_params(est: Any, data: pl.DataFrame) -> None:
    e = clone(est)
    before = e.get_params()
    assert e.fit(data) is e
    assert e.get_params() == before, "fit must not change the parameters"
    assert _fitted_attrs(e), "fit must set fitted attributes with a trailing _"


def check_clone_is_unfitted_with_same_params(est: Any, data: pl.DataFrame) -> None:
    fitted = clone(est).fit(data)
    c = clone(fitted)
    assert c.get_params() == fitted.get_params()
    assert not _fitted_attrs(c)


def check_set_params_roundtrip(est: Any, data: pl.DataFrame) -> None:
    e = clone(est)
    params = e.get_params()
    e.set_params(**params)
    assert e.get_params() == params


def check_deterministic(est: Any, data: pl.DataFrame) -> None:
    a = clone(est).fit(data).predict()
    b = clone(est).fit(data).predict()
    assert a.equals(b), "same params, same data -> same forecasts"


def check_forecast_contract(est: Any, data: pl.DataFrame) -> None:
    out = clone(est).fit(data).predict()
    assert out.columns == [
        "series_id",
        "issued_at",
        "valid_at",
        "horizon",
        "p10",
        "p50",
        "p90",
        "method",
    ]
    assert set(out["series_id"].unique()) == set(data["series_id"].unique())
    assert (out["valid_at"] > out["issued_at"]).all()
    assert ((out["p10"] <= out["p50"]) & (out["p50"] <= out["p90"])).all()
    assert (out["p10"] >= 0).all()
    assert out["method"].null_count() == 0


def check_bad_params_rejected_in_fit(est: Any, data: pl.DataFrame) -> None:
    e = clone(est).set_params(config="fortnightly")  # constructing must not validate
    with pytest.raises(ValueError, match="fortnightly"):
        e.fit(data)


CHECKS: tuple[Check, ...] = (
    check_is_base_estimator,
    check_init_stores_params_unchanged,
    check_unfitted_predict_raises,
    check_fit_returns_self_and_leaves_params,
    check_clone_is_unfitted_with_same_params,
    check_set_params_roundtrip,
    check_deterministic,
    check_forecast_contract,
    check_bad_params_rejected_in_fit,
)
