"""DemandForecaster behaviour: ordered quantiles, short-series fallback, unconstrained
demand, events as inputs, the weekly trend, and the lookback it promises."""

from __future__ import annotations

import pickle
from datetime import timedelta

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from predops.models.demand.config import HOURLY_CONFIG, WEEKLY_CONFIG
from predops.models.demand.forecaster import (
    MIN_ROUNDS,
    W_CLIP,
    DemandForecaster,
    HeldOut,
    mase_weights,
)
from predops.models.demand.panel import build_panel
from tests.models.demand.factories import T0, calendar, daily_shape, panel, series_frame
from tests.models.threads import predict_threads

SMALL = {"n_estimators": 40, "n_jobs": 1}


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**31 - 1),
    interval=st.sampled_from(["conformal", "quantile"]),
    noise=st.floats(0.0, 0.6),
    zeros=st.floats(0.0, 0.9),
)
def test_quantiles_are_ordered_and_non_negative(
    seed: int, interval: str, noise: float, zeros: float
) -> None:
    rng = np.random.default_rng(seed)
    data = panel(rng, n_series=3, hours=24 * 9, noise=noise)
    # Knock a share of values to zero: idle pools are where quantile models cross.
    data = data.with_columns(
        pl.when(pl.Series(rng.random(data.height) < zeros))
        .then(0.0)
        .otherwise("value")
        .alias("value")
    )
    out = DemandForecaster(interval=interval, random_state=seed % 1000, **SMALL).fit(data).predict()
    assert out.height == 3 * 48
    assert (out["p10"] >= 0).all()
    assert ((out["p10"] <= out["p50"]) & (out["p50"] <= out["p90"])).all()
    assert out.select(pl.col("p10", "p50", "p90").is_finite().all()).row(0) == (True,) * 3


def test_short_series_fall_back_and_say_so() -> None:
    rng = np.random.default_rng(1)
    hours = 24 * 10

    def recent(sid: str, values: np.ndarray) -> pl.DataFrame:
        """A series that started ``len(values)`` hours before the others' end."""
        return series_frame(sid, values, start=T0 + timedelta(hours=hours - values.size))

    data = pl.concat(
        [
            panel(rng, n_series=2, hours=hours),
            recent("new/gpus", daily_shape(47, rng, level=8, noise=0.1)),  # < min_history
            recent("newer/gpus", np.array([4.0, 5.0, 6.0])),
            recent("one/gpus", np.array([7.0])),
            series_frame("stale/gpus", daily_shape(60, rng, level=9, noise=0.1)),  # stopped
        ]
    )
    f = DemandForecaster(**SMALL).fit(data)
    out = f.predict()
    methods = dict(out.group_by("series_id").agg(pl.col("method").first()).iter_rows())
    assert methods["pool0/gpus"] == methods["pool1/gpus"] == "lightgbm"
    assert methods["new/gpus"] == "fallback_naive"  # 47 h: not two full days
    assert methods["newer/gpus"] == "fallback_naive"
    assert methods["one/gpus"] == "fallback_constant"
    # A series that stopped reporting 7 days ago is still answered, from its own end.
    assert methods["stale/gpus"] == "lightgbm"
    stale = out.filter(pl.col("series_id") == "stale/gpus")
    assert stale["issued_at"][0] == T0 + timedelta(hours=60)
    one = out.filter(pl.col("series_id") == "one/gpus")
    assert (one["p50"] == 7.0).all() and (one["p10"] == 7.0).all()
    assert sorted(out.group_by("series_id").len()["len"].to_list()) == [48] * 6


def test_only_short_series_still_answers() -> None:
    data = series_frame("tiny/gpus", np.arange(1.0, 20.0))
    f = DemandForecaster(**SMALL).fit(data)
    assert f.models_ == {}
    out = f.predict()
    assert out.height == 48 and set(out["method"]) == {"fallback_naive"}
    # The naive forecast continues from the last value.
    assert out["p50"][0] == pytest.approx(19.0)


def test_pending_demand_is_forecast_above_a_full_pool() -> None:
    """A pool capped at 60 while 100 are asked for: the model forecasts the asked-for
    demand (value = running + pending), not the cap."""
    rng = np.random.default_rng(2)
    ask = 100 + rng.normal(0, 3, 24 * 14)
    capped = series_frame("full/gpus", ask, capacity=60.0)
    assert (capped["running"] <= 60).all() and (capped["pending"] > 0).all()
    other = panel(rng, n_series=2, hours=24 * 14)
    out = DemandForecaster(**SMALL).fit(pl.concat([capped, other])).predict()
    p50 = out.filter(pl.col("series_id") == "full/gpus")["p50"]
    assert p50.min() > 85


def test_known_events_move_the_forecast() -> None:
    """Demand doubles inside calendar events; a future event (known in advance) must
    raise the forecast at its hours, and removing it from the calendar must not."""
    rng = np.random.default_rng(3)
    hours = 24 * 28
    events = [
        (f"sale{d}", T0 + timedelta(days=d, hours=12), timedelta(hours=6), None, 2.0)
        for d in range(2, 27, 3)
    ]
    future = T0 + timedelta(hours=hours + 6)  # starts 6 h after the last bucket
    cal = calendar([*events, ("next", future, timedelta(hours=6), None, 2.0)])
    frames = []
    for k, level in enumerate((20.0, 200.0, 2000.0)):
        base = daily_shape(hours, rng, level=level, noise=0.03)
        t = [T0 + timedelta(hours=i + 1) for i in range(hours)]
        boost = np.array([any(s <= ti < s + d for _, s, d, _, _ in events) for ti in t])
        frames.append(series_frame(f"p{k}/gpus", base * np.where(boost, 2.0, 1.0), pool=f"p{k}"))
    data = pl.concat(frames)
    f = DemandForecaster(n_estimators=150, n_jobs=1).fit(data, calendar=cal)
    with_event = f.predict(calendar=cal)
    without = f.predict(calendar=cal.filter(pl.col("name") != "next"))
    in_event = (pl.col("horizon") >= 8) & (pl.col("horizon") <= 11)
    ratio = with_event.filter(in_event)["p50"].sum() / without.filter(in_event)["p50"].sum()
    assert ratio > 1.4
    outside = pl.col("horizon") >= 20
    assert with_event.filter(outside)["p50"].to_list() == pytest.approx(
        without.filter(outside)["p50"].to_list(), rel=0.05
    )


def test_weekly_config_extrapolates_a_growing_fleet() -> None:
    """Flat for 100 weeks, then growing 2 % a week for 20: trees trained mostly on the
    flat years would forecast little growth; the weekly configuration's explicit
    (damped) local trend carries the recent growth 26 weeks ahead. With the trend term
    removed the same data gives ~1.2x; with it ~1.4x (undamped truth: 1.02^26 = 1.67)."""
    rng = np.random.default_rng(4)
    weeks = 120
    hours = 24 * 7 * weeks
    growth = 1.02 ** np.clip(np.arange(hours) / (24 * 7) - 100, 0, None)
    data = pl.concat(
        [
            series_frame(f"g{k}/gpus", daily_shape(hours, rng, level=lv, noise=0.02) * growth)
            for k, lv in enumerate((50.0, 500.0, 5000.0))
        ]
    )
    out = DemandForecaster(config="weekly", n_estimators=60, n_jobs=1).fit(data).predict()
    assert set(out["horizon"]) == set(WEEKLY_CONFIG.horizons)
    for sid in ("g0/gpus", "g2/gpus"):
        s = out.filter(pl.col("series_id") == sid).sort("horizon")
        last_peak = data.filter(pl.col("series_id") == sid)["value"].tail(24 * 7).max()
        assert isinstance(last_peak, float)
        assert s["p50"][-1] > 1.3 * last_peak
        assert s["p50"][-1] > s["p50"][3] > 0.95 * last_peak


@pytest.mark.parametrize(
    "options",
    [
        {"stacking": "none"},
        {"stacking": "feature", "blend": True, "series_band": 0.5},
        {"stacking": "offset"},
    ],
)
def test_forecast_reads_only_the_lookback(options: dict[str, object]) -> None:
    rng = np.random.default_rng(6)
    data = panel(rng, n_series=3, hours=24 * 28)
    f = DemandForecaster(**SMALL, **options).fit(data)  # type: ignore[arg-type]
    full = f.predict(data)
    end = data["ts"].max()
    assert end is not None
    tail = data.filter(pl.col("ts") > end - f.lookback * timedelta(hours=1))
    assert tail.height < data.height  # the history is longer than the lookback
    assert f.predict(tail).equals(full)
    assert f.predict().equals(full)


def test_stacked_fit_records_its_choices() -> None:
    rng = np.random.default_rng(8)
    data = panel(rng, n_series=4, hours=24 * 14)
    f = DemandForecaster(stacking="feature", blend=True, series_band=0.5, **SMALL).fit(data)
    assert f.feature_names_[-1] == "smoothed__forecast"
    assert set(f.smoothing_) == set(data["series_id"].unique())
    assert np.all((f.blend_ >= 0) & (f.blend_ <= 1))
    assert set(f.series_bands_) <= set(f.smoothing_)
    for band in f.series_bands_.values():
        assert band.shape == (len(HOURLY_CONFIG.horizons), 2)
    with pytest.raises(ValueError, match="stacking"):
        DemandForecaster(stacking="both").fit(data)
    with pytest.raises(ValueError, match="series_band"):
        DemandForecaster(series_band=2.0).fit(data)


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match="lacks column 'value'"):
        DemandForecaster(**SMALL).fit(pl.DataFrame({"series_id": ["a"], "ts": [T0]}))
    with pytest.raises(ValueError, match="interval"):
        DemandForecaster(interval="bootstrap").fit(panel(np.random.default_rng(0)))


def test_mase_weighting_counts_a_calm_series_like_a_jumpy_one() -> None:
    rng = np.random.default_rng(8)
    hours = 24 * 12
    data = pl.concat(
        [
            series_frame("calm/gpus", daily_shape(hours, rng, level=100.0, noise=0.01)),
            series_frame("jumpy/gpus", daily_shape(hours, rng, level=100.0, noise=0.3)),
        ]
    )
    p = build_panel(data, HOURLY_CONFIG)
    rows = np.arange(p.n_rows)[p.observed >= HOURLY_CONFIG.min_history]
    w = mase_weights(p, rows)
    calm = p.series_index()[rows] == p.series.index("calm/gpus")
    assert np.all((w >= 1 / W_CLIP) & (w <= W_CLIP))
    # The calm series' errors are small in its own units, so each counts for more.
    assert np.median(w[calm]) > 2 * np.median(w[~calm])
    # A fit can use them (off by default: see the forecaster's docstring).
    fitted = DemandForecaster(weighting="mase", **SMALL).fit(data)
    assert fitted.predict().height == 2 * 48
    with pytest.raises(ValueError, match="weighting"):
        DemandForecaster(weighting="metric").fit(data)


def noise_pools(rng: np.random.Generator, pools: int) -> pl.DataFrame:
    """``pools`` pools of three weeks of hourly white noise around 50 GPUs: nothing for
    the trees to learn, so the held-out curve turns up after a few dozen rounds."""
    return pl.concat(
        [
            series_frame(f"p{k}/gpus", 50 + 10 * rng.standard_normal(24 * 21), pool=f"p{k}")
            for k in range(pools)
        ]
    )


def test_rounds_are_chosen_on_the_heldout_windows() -> None:
    """``rounds="heldout"``: the final model has the round count whose pooled L1 on the
    held-out windows is smallest; the held-out models answer with as many rounds; pure
    noise stops well short of the cap, a clean seasonal panel uses it all."""
    n = 120
    rng = np.random.default_rng(0)
    noise = noise_pools(rng, 4)
    f = DemandForecaster(n_estimators=n, n_jobs=1, patience=0).fit(noise)
    assert f.rounds == "heldout" and f.calibration_ == "split"
    assert f.heldout_curve_ is not None and f.heldout_curve_.shape == (n,)
    assert f.rounds_ == max(MIN_ROUNDS, int(np.argmin(f.heldout_curve_)) + 1)
    assert f.rounds_ < 0.75 * n
    assert f.models_[0.5].num_trees() == f.rounds_
    assert len(f.heldout_models_) == 2
    assert all(m.best_iteration == f.rounds_ for _, m in f.heldout_models_)

    clean = DemandForecaster(n_estimators=n, n_jobs=1).fit(
        panel(np.random.default_rng(0), noise=0.02)
    )
    assert clean.rounds_ == n


@pytest.mark.parametrize("patience", [5, 15, 40])
def test_heldout_fits_stop_once_the_pooled_curve_stops_improving(patience: int) -> None:
    """``patience``: the held-out boosters stop the first round the pooled curve has
    gone ``patience`` rounds without beating its best; up to there they are the trees
    and the curve of a full run, and the rounds chosen are the full run's whenever its
    best comes before that stop."""
    n = 120
    rng = np.random.default_rng(2)
    noise = noise_pools(rng, 4)
    full = DemandForecaster(n_estimators=n, n_jobs=1, patience=0).fit(noise)
    early = DemandForecaster(n_estimators=n, n_jobs=1, patience=patience).fit(noise)
    assert full.heldout_curve_ is not None and early.heldout_curve_ is not None
    whole = full.heldout_curve_
    # Where the full curve says a patient run stops: the first round ``patience``
    # rounds past the best so far.
    best = np.minimum.accumulate(whole)
    last_best = np.array([np.flatnonzero(whole[: r + 1] == best[r])[0] for r in range(n)])
    stops = np.flatnonzero(np.arange(n) - last_best >= patience)
    stop = int(stops[0]) + 1 if stops.size else n
    assert early.heldout_curve_.shape == (stop,)
    np.testing.assert_array_equal(early.heldout_curve_, whole[:stop])
    assert stop < n  # pure noise: the trees stop helping well before the cap
    assert early.rounds_ == max(min(MIN_ROUNDS, stop), int(np.argmin(whole[:stop])) + 1)
    if int(np.argmin(whole)) < stop:
        assert early.rounds_ == full.rounds_
    assert early.models_[0.5].num_trees() == early.rounds_
    x = np.random.default_rng(3).normal(size=(100, len(full.feature_names_)))
    for (_, a), (_, b) in zip(full.heldout_models_, early.heldout_models_, strict=True):
        k = min(stop, early.rounds_)
        np.testing.assert_array_equal(a.predict(x, num_iteration=k), b.predict(x, num_iteration=k))
    with pytest.raises(ValueError, match="patience"):
        DemandForecaster(patience=-1).fit(noise)


@pytest.mark.parametrize("patience", [0, 8])
def test_heldout_window_forecasts_kept_while_training_are_predicts(patience: int) -> None:
    """The window forecasts the held-out fits keep (the best round, the floor, the last)
    are, to the bit, what the booster predicts at that many rounds; and the band built
    from them is the band built by predicting the windows again."""
    import lightgbm as lgb

    rng = np.random.default_rng(6)
    x = rng.normal(size=(6000, 5))
    x[rng.random(x.shape) < 0.05] = np.nan
    y = np.nan_to_num(x[:, 0]) + 0.5 * rng.normal(size=6000)
    data = lgb.Dataset(x, y, params={"verbose": -1}, free_raw_data=False).construct()
    f = DemandForecaster(n_estimators=60, n_jobs=1, patience=patience)
    valid = [np.arange(3000, 4500), np.arange(4500, 6000)]
    trained = f._train_scored(
        [(data.subset(np.arange(0, 3000)), data.subset(v), float(v.size)) for v in valid]
    )
    curves = [c for _, c, _ in trained]
    pooled = (curves[0] * 1500 + curves[1] * 1500) / 3000
    n = pooled.size
    for (model, curve, kept), v in zip(trained, valid, strict=True):
        assert curve.size == n
        assert set(kept) == {int(np.argmin(pooled)) + 1, min(MIN_ROUNDS, n), n}
        for k, pred in kept.items():
            np.testing.assert_array_equal(pred, model.predict(x[v], num_iteration=k))

    # In a fit: the band from the kept forecasts is the band from predicting again.
    noise = noise_pools(rng, 3)
    kept_fit = DemandForecaster(n_estimators=60, n_jobs=1, patience=patience).fit(noise)
    plain = DemandForecaster(n_estimators=60, n_jobs=1, patience=patience)
    train_scored = plain._train_scored

    def forget(folds: list[tuple[object, object, float]]) -> list[tuple[object, object, dict]]:
        return [(m, c, {}) for m, c, _ in train_scored(folds)]

    plain._train_scored = forget  # type: ignore[method-assign]
    plain.fit(noise)
    assert kept_fit.rounds_ == plain.rounds_
    assert kept_fit.band_ is not None and plain.band_ is not None
    np.testing.assert_array_equal(kept_fit.band_, plain.band_)


def test_fixed_rounds_and_scoring_leave_the_trees_alone() -> None:
    """``rounds="fixed"`` trains every model ``n_estimators`` rounds and records no
    curve; scoring the held-out windows while training changes no tree (the held-out
    models of both settings agree at every round count)."""
    data = panel(np.random.default_rng(4), noise=0.1)
    fixed = DemandForecaster(rounds="fixed", **SMALL).fit(data)
    chosen = DemandForecaster(patience=0, **SMALL).fit(data)
    assert fixed.rounds_ == SMALL["n_estimators"] and fixed.heldout_curve_ is None
    assert fixed.models_[0.5].num_trees() == SMALL["n_estimators"]
    x = np.random.default_rng(1).normal(size=(200, len(fixed.feature_names_)))
    for (cut_a, a), (cut_b, b) in zip(fixed.heldout_models_, chosen.heldout_models_, strict=True):
        assert cut_a == cut_b
        for k in (5, chosen.rounds_, SMALL["n_estimators"]):
            np.testing.assert_array_equal(
                a.predict(x, num_iteration=k), b.predict(x, num_iteration=k)
            )
    with pytest.raises(ValueError, match="rounds"):
        DemandForecaster(rounds="early").fit(data)


def test_a_model_pickled_before_the_rounds_were_chosen_loads() -> None:
    """A model registered before ``rounds`` and ``patience`` existed loads as the
    fixed-rounds model it was: its parameters print, it says how many rounds it
    trained, and it forecasts as before."""
    data = panel(np.random.default_rng(5))
    model = DemandForecaster(rounds="fixed", **SMALL).fit(data)
    state = model.__getstate__()
    for key in ("rounds", "rounds_", "heldout_curve_", "patience"):
        del state[key]
    old = DemandForecaster.__new__(DemandForecaster)
    old.__setstate__(state)
    assert old.get_params()["rounds"] == "fixed" and "rounds=" in repr(old)
    assert old.get_params()["patience"] == 0  # its held-out fits trained every round
    assert old.rounds_ == SMALL["n_estimators"] and old.heldout_curve_ is None
    got = pickle.loads(pickle.dumps(old)).predict(data)
    assert got.equals(model.predict(data))


def test_rounds_pool_only_what_every_window_scored() -> None:
    """A held-out booster that stopped early scored fewer rounds: the pooled curve (each
    window weighted by its pairs) covers the rounds both scored, and the choice is its
    argmin, never below the floor unless fewer rounds were scored."""
    f = DemandForecaster(n_estimators=100)
    late_a, late_b = np.ones(30, dtype=bool), np.ones(10, dtype=bool)
    a = np.ones(100)
    a[59] = 0.5  # best at round 60
    a[80] = 0.1  # better still, but past the rounds the other window scored
    b = np.linspace(1.0, 0.9, 70)  # stopped after 70 rounds
    assert f._chosen_rounds([HeldOut(0, None, late_a, a), HeldOut(1, None, late_b, b)]) == 60
    assert f.heldout_curve_ is not None and f.heldout_curve_.shape == (70,)
    np.testing.assert_allclose(f.heldout_curve_, (30 * a[:70] + 10 * b) / 40)
    rising = np.linspace(0.5, 1.0, 100)
    assert f._chosen_rounds([HeldOut(0, None, late_a, rising)]) == MIN_ROUNDS
    assert f._chosen_rounds([HeldOut(0, None, late_a, rising[:5])]) == 5  # all it scored


@pytest.mark.parametrize("interval", ["conformal", "quantile"])
def test_predictions_run_on_the_threads_asked_for(
    interval: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``n_jobs`` reaches LightGBM's predictions as well as its training:
    ``Booster.predict`` does not take the training's ``num_threads``, and without one it
    runs on every CPU the process may use."""
    seen = predict_threads(monkeypatch)
    data = panel(np.random.default_rng(3), n_series=3, hours=24 * 9)
    for n_jobs, threads in ((1, 1), (None, 0)):
        seen.clear()
        DemandForecaster(interval=interval, n_estimators=20, n_jobs=n_jobs).fit(data).predict()
        assert seen and set(seen) == {threads}, (n_jobs, seen)
