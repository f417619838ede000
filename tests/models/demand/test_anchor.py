"""The hourly target's anchor, chosen per fit: the 24 h level for series whose hours are
mostly noise, the last sample for step-like demand."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import numpy as np
import polars as pl
import pytest

from predops.models.demand.config import HOURLY_CONFIG
from predops.models.demand.forecaster import DemandForecaster
from predops.models.demand.panel import (
    LEVEL_ANCHOR_RATIO,
    anchor_errors,
    baseline,
    build_panel,
    choose_anchor,
)
from tests.models.demand.factories import series_frame

HOURS = 24 * 21


def _noisy(rng: np.random.Generator, n: int = 6) -> pl.DataFrame:
    """VM-like readings every 5 minutes: a steady level with independent noise, so the
    hour's last reading is one noisy sample of the hourly mean the target is."""
    steps = HOURS * 12
    return pl.concat(
        [
            series_frame(
                f"vm{k}/cpu",
                20.0 * (k + 1) + rng.normal(0, 4.0 * (k + 1), steps),
                step=timedelta(minutes=5),
            )
            for k in range(n)
        ]
    )


def _steps(rng: np.random.Generator, n: int = 6) -> pl.DataFrame:
    """Pool-like hours: demand holds its level for hours, then jumps."""
    frames = []
    for k in range(n):
        jumps = np.where(rng.random(HOURS) < 0.08, rng.normal(0, 10.0, HOURS), 0.0)
        frames.append(series_frame(f"pool{k}/gpus", 100.0 + np.cumsum(jumps)))
    return pl.concat(frames)


def test_noisy_hours_take_the_level_and_step_like_hours_the_last_sample() -> None:
    rng = np.random.default_rng(3)
    assert HOURLY_CONFIG.anchor == "auto"
    noisy = build_panel(_noisy(rng).lazy(), HOURLY_CONFIG)
    e_last, e_level = anchor_errors(noisy, HOURLY_CONFIG)
    assert e_level < LEVEL_ANCHOR_RATIO * e_last
    assert choose_anchor(noisy, HOURLY_CONFIG) == "level"
    steps = build_panel(_steps(rng).lazy(), HOURLY_CONFIG)
    e_last, e_level = anchor_errors(steps, HOURLY_CONFIG)
    assert e_last < e_level
    assert choose_anchor(steps, HOURLY_CONFIG) == "last"


def test_a_fixed_anchor_is_kept_whatever_the_data() -> None:
    noisy = build_panel(_noisy(np.random.default_rng(4)).lazy(), HOURLY_CONFIG)
    for anchor in ("last", "level"):
        assert choose_anchor(noisy, replace(HOURLY_CONFIG, anchor=anchor)) == anchor


def test_the_fit_records_the_anchor_it_chose_and_forecasts_from_it() -> None:
    rng = np.random.default_rng(5)
    for frame, chosen in ((_noisy(rng), "level"), (_steps(rng), "last")):
        model = DemandForecaster(config=HOURLY_CONFIG, n_estimators=20).fit(frame)
        assert model.config_.anchor == chosen
        assert model.config_.hash != HOURLY_CONFIG.hash  # the provenance names the choice
        out = model.predict()
        assert out.height > 0 and out["p50"].is_finite().all()
        # The same forecasts as a fit told the anchor outright.
        told = DemandForecaster(config=replace(HOURLY_CONFIG, anchor=chosen), n_estimators=20).fit(
            frame
        )
        assert np.array_equal(out["p50"].to_numpy(), told.predict()["p50"].to_numpy())


def test_an_unresolved_anchor_cannot_make_a_target() -> None:
    p = build_panel(_steps(np.random.default_rng(6)).lazy(), HOURLY_CONFIG)
    o = np.array([p.n_rows - 30])
    with pytest.raises(ValueError, match="must be resolved"):
        baseline(p, HOURLY_CONFIG, o, np.array([1]))


def test_an_unknown_anchor_is_refused() -> None:
    with pytest.raises(ValueError, match="anchor must be one of"):
        replace(HOURLY_CONFIG, anchor="mean")
