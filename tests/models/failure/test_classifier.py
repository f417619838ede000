"""NodeFailureClassifier: the estimator contract, calibration, down-sampling, slices."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from predops.models.failure.classifier import NodeFailureClassifier
from predops.models.failure.metrics import brier
from tests.models.failure.checks import CHECKS, Check
from tests.models.failure.factories import failure_rows

# Small-data parameters for scikit-learn's battery (its datasets have 20-300 rows).
SMALL = {
    "n_estimators": 30,
    "min_child_samples": 2,
    "num_leaves": 7,
    "early_stopping_rounds": 5,
    "negative_rate": 0.5,
    "calibration": "sigmoid",
}
FAST = {"n_estimators": 80, "min_child_samples": 20, "num_leaves": 7, "learning_rate": 0.1}


@parametrize_with_checks(
    [NodeFailureClassifier(**SMALL), NodeFailureClassifier(**SMALL, linear_blend=True)]
)
def test_sklearn_estimator_contract(estimator: Any, check: Any) -> None:
    check(estimator)


@pytest.fixture(scope="module")
def rows() -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    return failure_rows(np.random.default_rng(11), n=4000)


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_failure_contract(check: Check, rows: Any) -> None:
    check(NodeFailureClassifier(**FAST, purge=30 * 60.0), rows)


def _later_half(n: int) -> tuple[slice, slice]:
    return slice(0, n * 2 // 3), slice(n * 2 // 3, n)


@pytest.mark.parametrize("method", ["isotonic", "sigmoid"])
def test_calibration_improves_brier_on_a_held_back_slice(method: str) -> None:
    # An over-fitted booster (deep trees, no early stopping, no down-sampling) is
    # over-confident; calibrating it on its own time-later slice must bring its Brier
    # score down on rows it never saw.
    X, y, t = failure_rows(np.random.default_rng(5), n=9000, signal=1.0)
    fit_part, held = _later_half(len(X))
    loud = {
        "n_estimators": 400,
        "learning_rate": 0.3,
        "num_leaves": 63,
        "min_child_samples": 2,
        "early_stopping_rounds": None,
        "negative_rate": None,
        "reg_lambda": 0.0,
    }
    raw = NodeFailureClassifier(**loud, calibration=None).fit(
        X.iloc[fit_part], y[fit_part], time=t[fit_part]
    )
    cal = NodeFailureClassifier(**loud, calibration=method).fit(
        X.iloc[fit_part], y[fit_part], time=t[fit_part]
    )
    b_raw = brier(y[held], raw.predict_proba(X.iloc[held])[:, 1])
    b_cal = brier(y[held], cal.predict_proba(X.iloc[held])[:, 1])
    assert b_cal < 0.9 * b_raw, (b_raw, b_cal)


def test_down_sampling_correction_restores_the_base_rate() -> None:
    # Keeping 10 % of negatives multiplies the odds by 10; the log-odds shift undoes it,
    # so uncalibrated probabilities still average to the observed failure rate.
    X, y, t = failure_rows(np.random.default_rng(8), n=20000, base_rate=0.02)
    fit_part, held = _later_half(len(X))
    clf = NodeFailureClassifier(**FAST, negative_rate=0.1, calibration=None).fit(
        X.iloc[fit_part], y[fit_part], time=t[fit_part]
    )
    p = clf.predict_proba(X.iloc[held])[:, 1]
    assert clf.log_odds_shift_ == pytest.approx(np.log(0.1))
    assert p.mean() == pytest.approx(y[held].mean(), rel=0.35)
    uncorrected = 1 / (1 + np.exp(-(np.log(p / (1 - p)) - clf.log_odds_shift_)))
    assert uncorrected.mean() > 3 * y[held].mean()


def test_purge_keeps_training_labels_out_of_the_later_slices() -> None:
    X, y, t = failure_rows(np.random.default_rng(2), n=3000)
    secs = (t - t[0]).astype("timedelta64[s]").astype(float)
    clf = NodeFailureClassifier(**FAST, purge=6 * 3600.0).fit(X, y, time=secs)
    tr, va = clf.slice_spans_["train"], clf.slice_spans_["validation"]
    assert tr is not None and va is not None
    assert va[0] - tr[1] > 6 * 3600.0


def test_unseen_category_is_treated_as_missing() -> None:
    X, y, t = failure_rows(np.random.default_rng(4), n=3000)
    clf = NodeFailureClassifier(**FAST).fit(X, y, time=t)
    Z = X.head(5).copy()
    Z["sku"] = pd.Categorical(["sku-new"] * 5)
    p = clf.predict_proba(Z)[:, 1]
    assert np.isfinite(p).all()
    Zm = X.head(5).copy()
    Zm["sku"] = pd.Categorical([None] * 5, categories=["sku-0"])
    np.testing.assert_allclose(p, clf.predict_proba(Zm)[:, 1])


def test_contributions_sum_to_the_corrected_log_odds() -> None:
    X, y, t = failure_rows(np.random.default_rng(6), n=3000)
    clf = NodeFailureClassifier(**FAST, calibration=None).fit(X, y, time=t)
    c = clf.contributions(X.head(50))
    p = clf.uncalibrated_proba(X.head(50))
    np.testing.assert_allclose(c.sum(axis=1), np.log(p / (1 - p)), rtol=1e-6, atol=1e-6)


def test_bad_parameters_fail_in_fit_with_the_name() -> None:
    X, y, t = failure_rows(np.random.default_rng(1), n=500)
    with pytest.raises(ValueError, match="calibration"):
        NodeFailureClassifier(calibration="platt").fit(X, y, time=t)
    with pytest.raises(ValueError, match="negative_rate"):
        NodeFailureClassifier(negative_rate=0.0).fit(X, y, time=t)
    with pytest.raises(ValueError, match="time must have one value per row"):
        NodeFailureClassifier().fit(X, y, time=t[:10])


def test_a_purge_longer_than_the_span_holds_out_whole_entities() -> None:
    # 3,000 rows over 50 hours with a 7-day purge: no time-later slice survives the
    # purge, so validation and calibration are whole entities, never split across sides.
    X, y, t = failure_rows(np.random.default_rng(12), n=3000)
    groups = np.array([f"drive-{i % 300}" for i in range(len(X))])
    secs = (t - t[0]).astype("timedelta64[s]").astype(float)
    clf = NodeFailureClassifier(**FAST, purge=7 * 86400.0, negative_rate=None)
    clf.fit(X, y, time=secs, groups=groups)
    assert clf.slicing_ == "groups"
    assert clf.n_validation_rows_ > 0 and clf.n_calibration_rows_ > 0
    assert clf.n_train_rows_ + clf.n_validation_rows_ + clf.n_calibration_rows_ == len(X)
    train, val, cal = clf._slices(secs, y.astype(float), _shares(groups))
    sides = [set(groups[idx]) for idx in (train, val, cal)]
    assert not sides[0] & sides[1] and not sides[0] & sides[2] and not sides[1] & sides[2]
    # A purge that spares the training slice but swallows the validation slice
    # (validation would start 7.5 h before calibration, the purge is 10 h) keeps the
    # time cut: the booster trains unstopped rather than on a handful of entities.
    short = NodeFailureClassifier(**FAST, purge=10 * 3600.0, negative_rate=None)
    assert short.fit(X, y, time=secs, groups=groups).slicing_ == "time"
    # Without groups the same input trains on everything before calibration, unstopped.
    plain = NodeFailureClassifier(**FAST, purge=7 * 86400.0, negative_rate=None).fit(
        X, y, time=secs
    )
    assert plain.slicing_ == "none" and plain.n_validation_rows_ == 0


def _shares(groups: np.ndarray) -> np.ndarray:
    from predops.models.failure.classifier import _group_share

    return _group_share(groups, len(groups))


def test_linear_blend_weight_is_chosen_on_a_held_back_slice_and_explained() -> None:
    # Failure log-odds linear in four of six features (what a logistic regression
    # fits exactly): the blend must keep a share of the logistic part, and contributions
    # must still add up to the blended log-odds.
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(8000, 6)), columns=[f"x{i}" for i in range(6)])
    logit = -3.5 + 0.7 * X.iloc[:, :4].sum(axis=1).to_numpy()
    y = (rng.random(len(X)) < 1 / (1 + np.exp(-logit))).astype(int)
    t = np.arange(len(X), dtype=float)
    clf = NodeFailureClassifier(**FAST, linear_blend=True, calibration="sigmoid").fit(X, y, time=t)
    ap = clf.blend_validation_ap_
    assert clf.blend_weight_ < 1.0 and ap[clf.blend_weight_] == max(ap.values())
    plain = NodeFailureClassifier(**FAST, calibration=None).fit(X, y, time=t)
    assert plain.blend_weight_ == 1.0 and plain.linear_ is None
    c = clf.contributions(X.head(50))
    p = clf.uncalibrated_proba(X.head(50))
    np.testing.assert_allclose(c.sum(axis=1), np.log(p / (1 - p)), rtol=1e-6, atol=1e-6)
    assert np.isfinite(clf.predict_proba(X.head(50))).all()


@pytest.mark.parametrize("method", ["isotonic", "sigmoid"])
def test_rows_sampled_before_fit_keep_probabilities_of_the_population(method: str) -> None:
    # The node frame keeps 20 % of its negatives before it is stored; told so
    # (prior_negative_rate), the classifier weighs the negatives of its later slices
    # back up, so calibrated probabilities average to the population's failure rate.
    X, y, t = failure_rows(np.random.default_rng(9), n=40000, base_rate=0.02)
    fit_part, held = _later_half(len(X))
    Xf, yf, tf = X.iloc[fit_part], y[fit_part], t[fit_part]
    keep = (yf == 1) | (np.random.default_rng(1).random(len(yf)) < 0.2)
    kw = {**FAST, "negative_rate": 0.2, "calibration": method}
    told = NodeFailureClassifier(**kw, prior_negative_rate=0.2).fit(
        Xf[keep], yf[keep], time=tf[keep]
    )
    untold = NodeFailureClassifier(**kw).fit(Xf[keep], yf[keep], time=tf[keep])
    full = NodeFailureClassifier(**kw).fit(Xf, yf, time=tf)
    rate = y[held].mean()
    p_told = told.predict_proba(X.iloc[held])[:, 1]
    assert told.negative_rate_ == 0.2 and told.log_odds_shift_ == pytest.approx(np.log(0.2))
    assert p_told.mean() == pytest.approx(rate, rel=0.3)
    assert untold.predict_proba(X.iloc[held])[:, 1].mean() > 2.5 * rate  # the bias it removes
    p_full = full.predict_proba(X.iloc[held])[:, 1]
    assert brier(y[held], p_told) == pytest.approx(brier(y[held], p_full), rel=0.05)


def test_prior_negative_rate_must_be_a_share() -> None:
    X, y, t = failure_rows(np.random.default_rng(2), n=2000)
    with pytest.raises(ValueError, match="prior_negative_rate"):
        NodeFailureClassifier(prior_negative_rate=0.0).fit(X, y, time=t)


def test_every_prediction_runs_on_the_fitted_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    # Booster.predict does not take the training's num_threads: without one it runs on
    # every CPU. Scoring, probabilities, reasons and the blend's held-back slice must
    # all run on n_jobs unless the caller asks for another count.
    from tests.models.threads import predict_threads

    X, y, _ = failure_rows(np.random.default_rng(3), n=1500)
    seen = predict_threads(monkeypatch)
    clf = NodeFailureClassifier(**FAST, linear_blend=True, n_jobs=2).fit(X, y)
    clf.predict_proba(X)
    clf.contributions(X)
    assert seen and set(seen) == {2}, seen
    seen.clear()
    clf.proba_encoded(clf._validated(X, reset=False), num_threads=1)
    assert seen == [1]
