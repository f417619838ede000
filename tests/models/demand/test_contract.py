"""Every demand forecaster passes the shared estimator-contract battery."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
import pytest

from predops.models.demand.baselines import ETSForecaster, SeasonalNaiveForecaster
from predops.models.demand.forecaster import DemandForecaster
from tests.models.demand.checks import CHECKS, Check
from tests.models.demand.factories import panel

ESTIMATORS: dict[str, Any] = {
    "lightgbm": DemandForecaster(n_estimators=20, n_jobs=1),
    "lightgbm_quantile": DemandForecaster(interval="quantile", n_estimators=20, n_jobs=1),
    "seasonal_naive": SeasonalNaiveForecaster(season=24),
    "ets": ETSForecaster(season=0),
}


@pytest.fixture(scope="module")
def data() -> pl.DataFrame:
    return panel(np.random.default_rng(5), n_series=3, hours=24 * 12)


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_estimator_contract(name: str, check: Check, data: pl.DataFrame) -> None:
    check(ESTIMATORS[name], data)
