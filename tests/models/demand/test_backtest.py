"""Rolling-origin backtests never let a model see data after its cutoff."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import numpy as np
import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from predops.models.demand.backtest import cutoffs_before_end, rolling_origin
from predops.models.demand.baselines import SeasonalNaiveForecaster
from predops.models.demand.config import HOURLY_CONFIG
from predops.models.demand.forecaster import DemandForecaster
from tests.models.demand.factories import T0, panel

SEEN: list[tuple[str, int, datetime]] = []


class Spy:
    """A forecaster that records the latest timestamp it was given, then forecasts
    like seasonal naive."""

    def __init__(self) -> None:
        self.inner = SeasonalNaiveForecaster(season=24)
        self.fits = 0

    def fit(self, X: pl.DataFrame, y: None = None, *, calendar: Any = None) -> Spy:
        self.fits += 1
        SEEN.append(("fit", id(self), X["ts"].max()))  # type: ignore[arg-type]
        self.inner.fit(X)
        return self

    def predict(self, X: pl.DataFrame | None = None, *, calendar: Any = None) -> pl.DataFrame:
        assert X is not None
        SEEN.append(("predict", id(self), X["ts"].max()))  # type: ignore[arg-type]
        return self.inner.predict(X)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    offsets=st.lists(st.integers(48, 24 * 9 - 1), min_size=1, max_size=4, unique=True),
    minutes=st.integers(0, 59),
    refit=st.booleans(),
)
def test_never_trains_or_predicts_on_data_after_the_cutoff(
    offsets: list[int], minutes: int, refit: bool
) -> None:
    data = panel(np.random.default_rng(0), n_series=2, hours=24 * 10)
    # Cutoffs anywhere, even between grid points.
    cuts = [T0 + timedelta(hours=o, minutes=minutes) for o in offsets]
    SEEN.clear()
    spies: list[Spy] = []

    def make() -> Spy:
        spies.append(Spy())
        return spies[-1]

    res = rolling_origin(data, {"spy": make}, config=HOURLY_CONFIG, cutoffs=cuts, refit=refit)
    calls = iter(SEEN)
    for c in sorted(cuts):
        for kind, _, latest in calls:
            assert latest <= c, f"{kind} saw {latest} after cutoff {c}"
            if kind == "predict":
                break
    assert sum(s.fits for s in spies) == (len(cuts) if refit else 1)
    assert set(res.rows["cutoff"].to_list()) == set(sorted(cuts))
    # Every forecast is issued at or before its cutoff and scored against later data.
    assert (res.rows["issued_at"] <= res.rows["cutoff"]).all()


def test_model_and_baseline_side_by_side() -> None:
    data = panel(np.random.default_rng(2), n_series=3, hours=24 * 14)
    cuts = cutoffs_before_end(data, HOURLY_CONFIG, n=2, horizon=24)
    assert cuts[1] - cuts[0] == timedelta(hours=24)
    res = rolling_origin(
        data,
        {
            "lgb": lambda: DemandForecaster(n_estimators=30, n_jobs=1),
            "snaive": lambda: SeasonalNaiveForecaster(season=24),
        },
        config=HOURLY_CONFIG,
        cutoffs=cuts,
    )
    assert set(res.rows["model"]) == {"lgb", "snaive"}
    scored = res.rows.filter(pl.col("actual").is_not_null())
    assert scored.height == 2 * 2 * 3 * 24 + 2 * 3 * 24  # 2 models x cutoffs, last has 24 h
    assert (scored["mase_scale"] > 0).all()
    assert res.fit_seconds["lgb"] > 0
