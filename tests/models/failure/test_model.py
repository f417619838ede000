"""FailureModel: risks with reasons and provenance, the pyfunc protocol, strategies."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import polars as pl
import pytest

from predops.core.contracts import FailureRisk, Provenance
from predops.features.definitions import node_feature_set
from predops.models.failure.model import FailureModel, train_failure_model
from tests.models.failure.factories import node_frame

NAMES = ("ecc_sbe__increase_6h", "gpu_temp_c__mean_1h__rack_dev", "node__sku")
DEFS = [d for d in node_feature_set().defs if d.name in NAMES]
H6, H24 = timedelta(hours=6), timedelta(hours=24)
PARAMS = {"n_estimators": 60, "min_child_samples": 10, "num_leaves": 7, "learning_rate": 0.1}


@pytest.fixture(scope="module")
def frame() -> pl.DataFrame:
    return node_frame(np.random.default_rng(0))


def fit(frame: pl.DataFrame, strategy: str = "per_horizon") -> FailureModel:
    return train_failure_model(
        frame,
        feature_defs=DEFS,
        horizons=(H24, H6),
        feature_set_hash="abc",
        strategy=strategy,
        params=PARAMS,
    )


def test_risks_carry_probability_reasons_and_provenance(frame: pl.DataFrame) -> None:
    model = fit(frame)
    assert model.horizons == (H6, H24)
    latest = frame.filter(pl.col("ts") == frame["ts"].max())
    as_of = datetime(2026, 3, 7, tzinfo=UTC)
    prov = Provenance("predops.node_failure", "3", "abc", as_of)
    risks = model.predict_risk(latest, as_of=as_of, horizons=[H24], provenance=prov)
    assert len(risks) == latest.height
    assert all(isinstance(r, FailureRisk) and r.horizon == H24 for r in risks)
    assert all(r.as_of == as_of and r.provenance == prov for r in risks)
    p = model.predict_proba(latest)[:, 1]
    np.testing.assert_allclose([r.p_fail for r in risks], p)
    top = max(risks, key=lambda r: r.p_fail)
    assert top.reasons, "the riskiest node must come with reasons"
    mags = [abs(x.contribution) for x in top.reasons]
    assert mags == sorted(mags, reverse=True)
    assert all(x.text.endswith(("(raises risk)", "(lowers risk)")) for x in top.reasons)


def test_reasons_can_be_limited_to_the_riskiest_rows(frame: pl.DataFrame) -> None:
    model = fit(frame)
    latest = frame.filter(pl.col("ts") == frame["ts"].max())
    risks = model.predict_risk(latest, horizons=[H24], reasons_for=2)
    explained = [r for r in risks if r.reasons]
    assert 1 <= len(explained) <= 2
    assert min(r.p_fail for r in explained) >= sorted(r.p_fail for r in risks)[-2]


def test_pyfunc_call_returns_probabilities_per_horizon(frame: pl.DataFrame) -> None:
    model = fit(frame)
    sample = frame.head(20)
    out = model(sample.to_pandas())
    assert isinstance(out, pd.DataFrame)
    assert list(out.columns) == ["p_fails_within_6h", "p_fails_within_24h"]
    np.testing.assert_allclose(out.to_numpy(), model.predict_proba(sample))
    assert ((out >= 0) & (out <= 1)).all().all()


def test_stacked_strategy_keeps_longer_horizons_at_least_as_risky(frame: pl.DataFrame) -> None:
    model = fit(frame, "stacked")
    p = model.predict_proba(frame)
    assert (p[:, 1] >= p[:, 0] - 1e-12).all()


def test_a_frame_without_the_model_features_is_refused(frame: pl.DataFrame) -> None:
    model = fit(frame)
    with pytest.raises(ValueError, match="lacks 1 model feature"):
        model.predict_proba(frame.drop("ecc_sbe__increase_6h"))
