"""Baselines: exact seasonal-naive and naive forecasts, ETS on a seasonal series, and
the short-series fallback chain."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from threadpoolctl import threadpool_info, threadpool_limits

from predops.models.demand import baselines
from predops.models.demand.baselines import (
    PersistenceForecaster,
    change_quantiles,
    ets_forecast,
    fit_ets,
    naive,
    observed,
    one_blas_thread,
    persistence,
    seasonal_naive,
    short_series,
)
from predops.models.demand.grid import resample_grid

from .factories import T0, series_frame

H = np.arange(1, 49)


def test_seasonal_naive_repeats_the_last_season() -> None:
    y = np.arange(72, dtype=float)  # three days, hour h has value 24*d + h
    q = seasonal_naive(y, H, 24)
    # h = 1..24 -> yesterday's same hour (48..71); h = 25..48 -> the same values again
    assert q.p50.tolist() == list(range(48, 72)) * 2
    # every seasonal difference is exactly 24 -> band [p50+24*sqrt(k), ...]
    assert q.p10[0] == pytest.approx(48 + 24) and q.p10[30] == pytest.approx(54 + 24 * np.sqrt(2))
    assert q.method == "seasonal_naive_24"


def test_gaps_are_carried_forward_not_zero() -> None:
    y = np.array([np.nan, 5.0, np.nan, np.nan, 7.0, np.nan])
    assert observed(y).tolist() == [5.0, 5.0, 5.0, 7.0, 7.0]
    assert naive(y, np.array([1, 2])).p50.tolist() == [7.0, 7.0]


def test_naive_band_widens_with_the_horizon() -> None:
    rng = np.random.default_rng(0)
    y = 100 + rng.normal(0, 1, 500).cumsum()
    q = naive(y, H)
    width = q.p90 - q.p10
    assert np.all(np.diff(width) > 0)
    assert width[3] == pytest.approx(2 * width[0], rel=1e-9)  # sqrt(4) = 2


def test_persistence_bands_each_horizon_from_its_own_changes() -> None:
    # A step series: 8 GPUs held for 6 hours, then 0 for 6, repeated. Its first
    # differences are mostly 0, but 6 hours ahead it has always moved by 8 one way or
    # the other, and 12 hours ahead never.
    y = np.tile(np.r_[np.full(6, 8.0), np.zeros(6)], 60)
    q = persistence(y, np.array([1, 6, 12]))
    assert q.method == "persistence"
    assert q.p50.tolist() == [0.0, 0.0, 0.0]
    # h = 6: every 6-step change is +-8 -> the band spans [-8, +8] around the last value
    assert (q.p10[1], q.p90[1]) == (pytest.approx(-8.0), pytest.approx(8.0))
    # h = 12: a whole period ahead, nothing changes -> no width
    assert q.p10[2] == q.p90[2] == 0.0
    # h = 1: one change in six hours -> the 10th / 90th percentiles of {-8, 0 x 10, 8}
    lo, hi = np.quantile(np.diff(y[-504:]), [0.1, 0.9])
    assert (q.p10[0], q.p90[0]) == (pytest.approx(lo), pytest.approx(hi))
    # only the recent window counts: a series calm for its last 504 buckets has no band
    calm = np.r_[rng_walk(400), np.full(504, 3.0)]
    c = persistence(calm, np.array([1, 24]))
    assert c.p50.tolist() == [3.0, 3.0] and np.all(c.p90 - c.p10 == 0.0)
    # shorter than a horizon: first differences x sqrt(h)
    s = persistence(np.array([1.0, 2.0, 4.0]), np.array([1, 4]))
    d_lo, d_hi = np.quantile([1.0, 2.0], [0.1, 0.9])
    assert s.p90[1] - s.p50[1] == pytest.approx(2 * d_hi)
    assert s.p10[1] - s.p50[1] == pytest.approx(2 * d_lo)


@settings(max_examples=200, deadline=None)
@given(
    z=st.lists(
        st.one_of(
            st.floats(-1e6, 1e6, allow_nan=False),
            st.integers(-3, 3).map(float),  # ties
        ),
        min_size=2,
        max_size=80,
    ),
    data=st.data(),
)
def test_change_quantiles_are_numpys_to_the_bit(z: list[float], data: st.DataObject) -> None:
    """Every step's changes sorted in one array give what ``np.quantile`` gives each
    step's changes alone, bit for bit (the persistence band and the forecasts built
    on it do not move)."""
    y = np.asarray(z)
    steps = np.asarray(
        sorted(data.draw(st.sets(st.integers(1, y.size - 1), min_size=1))), dtype=np.int64
    )
    lo, hi = change_quantiles(y, steps)
    for i, k in enumerate(steps):
        want = np.quantile(y[k:] - y[:-k], [0.1, 0.9])
        assert lo[i].tobytes() == want[0].tobytes() and hi[i].tobytes() == want[1].tobytes()


def test_persistence_level_last_is_the_state_at_the_issue_time() -> None:
    """Samples every 10 minutes; a job of 8 GPUs starts 30 minutes before the end. The
    hour's mean lags (8 x 3 / 6 = 4), its latest sample is what runs now (8)."""
    t0 = datetime(2024, 1, 1, tzinfo=UTC)
    n = 6 * 48
    ts = [t0 + timedelta(minutes=10 * (i + 1)) for i in range(n)]
    value = [0.0] * (n - 3) + [8.0] * 3
    demand = pl.DataFrame({"series_id": ["a"] * n, "ts": ts, "value": value})
    mean = PersistenceForecaster("hourly").fit(demand).predict()
    last = PersistenceForecaster("hourly", level="last").fit(demand).predict()
    assert mean["issued_at"].to_list() == last["issued_at"].to_list()
    assert set(mean["p50"].to_list()) == {4.0} and set(last["p50"].to_list()) == {8.0}
    with pytest.raises(ValueError, match="level must be 'mean' or 'last', got 'max'"):
        PersistenceForecaster("hourly", level="max").fit(demand)
    config = PersistenceForecaster("hourly").fit(demand).config_
    assert resample_grid(demand, config, value="value_last").values(0)[-1] == 8.0
    with pytest.raises(ValueError, match="value must be 'value' or 'value_last', got 'max'"):
        resample_grid(demand, config, value="max")


def rng_walk(n: int) -> np.ndarray:
    return 50 + np.random.default_rng(3).normal(0, 2, n).cumsum()


def test_ets_beats_naive_on_a_seasonal_series_and_reuses_its_parameters() -> None:
    rng = np.random.default_rng(1)
    t = np.arange(24 * 20)
    y = 50 + 10 * np.sin(2 * np.pi * t / 24) + rng.normal(0, 1, t.size)
    fit = fit_ets(y[:-48], 24)
    assert fit is not None and fit.method == "ets(A,Ad,A,24)"
    q = ets_forecast(y[:-48], H, fit)
    truth = y[-48:]
    assert np.mean(np.abs(q.p50 - truth)) < 0.5 * np.mean(np.abs(naive(y[:-48], H).p50 - truth))
    inside = np.mean((truth >= q.p10) & (truth <= q.p90))
    assert 0.6 <= inside <= 0.97
    # Updating with newer history keeps the parameters and moves the origin.
    q2 = ets_forecast(y[:-24], H[:24], fit)
    assert np.mean(np.abs(q2.p50 - y[-24:])) < 2.5


def test_ets_skips_the_covariance_and_forecasts_as_statsmodels_does() -> None:
    """The results skip the parameters' covariance (a numerical Hessian at every fit
    and every update) and nothing else: the parameters and the forecast are bit for bit
    those of statsmodels' own ``ETSModel``, the band equal to rounding (its variance is
    summed where statsmodels writes the closed form; see ``test_ets_filter.py``)."""
    import pandas as pd
    from statsmodels.tsa.exponential_smoothing.ets import ETSModel

    from predops.models.demand.baselines import _ets_model

    rng = np.random.default_rng(4)
    t = np.arange(24 * 12)
    y = 30 + 6 * np.sin(2 * np.pi * t / 24) + 0.02 * t + rng.normal(0, 1, t.size)
    fit = fit_ets(y, 24)
    assert fit is not None
    assert np.isnan(np.asarray(_ets_model(y, 24, True).smooth(fit.params).cov_params())).all()
    plain = ETSModel(
        pd.Series(y), error="add", trend="add", damped_trend=True, seasonal="add",
        seasonal_periods=24,
    )  # fmt: skip
    ref = plain.fit(disp=False, maxiter=200)
    assert np.array_equal(np.asarray(ref.params), fit.params)
    frame = ref.get_prediction(start=y.size, end=y.size + 47).summary_frame(alpha=0.2)
    q = ets_forecast(y, H, fit)
    assert np.array_equal(q.p50, frame["mean"].to_numpy())
    np.testing.assert_allclose(q.p10, frame["pi_lower"].to_numpy(), rtol=1e-12, atol=0)
    np.testing.assert_allclose(q.p90, frame["pi_upper"].to_numpy(), rtol=1e-12, atol=0)


def test_ets_needs_two_seasons_for_the_seasonal_form() -> None:
    y = 10 + np.sin(np.arange(40))
    fit = fit_ets(y, 24)
    assert fit is not None and fit.season == 0
    assert fit_ets(np.ones(5), 24) is None


@pytest.mark.parametrize(
    ("n", "method"),
    [
        (60, "fallback_seasonal_naive_24"),
        (47, "fallback_naive"),
        (2, "fallback_naive"),
        (1, "fallback_constant"),
    ],
)
def test_short_series_chain(n: int, method: str) -> None:
    y = np.arange(1.0, n + 1.0)
    q = short_series(y, H, (24, 168))
    assert q.method == method
    assert q.p50.shape == H.shape and np.all(np.isfinite(q.p50))


def test_no_observation_is_an_error() -> None:
    with pytest.raises(ValueError, match="no observed bucket"):
        short_series(np.array([np.nan, np.nan]), H, (24,))


def test_ets_fit_prints_no_convergence_warning_in_a_fresh_process() -> None:
    """The first ETS fit of a process imports statsmodels inside our warnings block,
    and that import puts an "always" ConvergenceWarning filter ahead of our "ignore"
    (a demo printed one). A series whose seasonal fit does not converge must print
    nothing, while other warnings still show."""
    from tests.processes import fresh_stderr

    stderr = fresh_stderr(
        "import numpy as np\n"
        "from predops.models.demand.baselines import fit_ets\n"
        "rng = np.random.default_rng(0); t = np.arange(24 * 8)\n"
        "z = 50 + 10 * np.sin(2 * np.pi * t / 24) + np.cumsum(rng.normal(0, 3, t.size))\n"
        "z = np.round(z + rng.normal(0, 1, t.size) * 5)\n"
        "assert fit_ets(z, 24) is not None"
    )
    assert "ConvergenceWarning" not in stderr, stderr
    assert "UserWarning: kept" in stderr


def _blas_threads() -> set[int]:
    return {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}


def test_one_blas_thread_limits_blas_inside_and_restores_what_was_there() -> None:
    if not _blas_threads():
        pytest.skip("no BLAS library loaded")
    with threadpool_limits(limits=2, user_api="blas"):
        assert _blas_threads() == {2}
        with one_blas_thread():
            assert _blas_threads() == {1}
            with one_blas_thread():  # nested: still one, and the inner exit keeps it
                pass
            assert _blas_threads() == {1}
        assert _blas_threads() == {2}


def test_one_blas_thread_holds_until_the_last_of_overlapping_threads_leaves() -> None:
    """Thread A enters, B enters, A leaves while B is inside, B leaves: one limit set at
    A's entry, restored only when B leaves (threadpoolctl's context manager per thread
    would restore A's saved setting under B, then B's saved one-thread limit for good).
    The limiter is a recorder: OpenBLAS ignores a worker thread's setting once the
    main thread has made one, so real pools cannot show this ordering here."""
    events: list[str] = []

    class Limits:
        def __init__(self) -> None:
            events.append("set")

        def restore_original_limits(self) -> None:
            events.append("restore")

    gate = baselines._OneBlasThread(Limits)
    a_in, b_in, a_out, b_may_leave = (threading.Event() for _ in range(4))

    def a() -> None:
        gate.enter()
        a_in.set()
        assert b_in.wait(10)
        gate.exit()
        events.append("a left")
        a_out.set()

    def b() -> None:
        assert a_in.wait(10)
        gate.enter()
        b_in.set()
        assert b_may_leave.wait(10)
        gate.exit()
        events.append("b left")

    ta, tb = threading.Thread(target=a), threading.Thread(target=b)
    ta.start()
    tb.start()
    assert a_out.wait(10)
    b_may_leave.set()
    ta.join(10)
    tb.join(10)
    assert events == ["set", "a left", "restore", "b left"]
    gate.enter()  # the next block sets it again
    gate.exit()
    assert events[4:] == ["set", "restore"]


def test_ets_fits_and_forecasts_run_with_one_blas_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    if not _blas_threads():
        pytest.skip("no BLAS library loaded")
    rng = np.random.default_rng(3)
    t = np.arange(24 * 6)
    frame = series_frame("a", 50 + 10 * np.sin(2 * np.pi * t / 24) + rng.normal(0, 1, t.size))
    during: list[set[int]] = []
    real_fit, real_forecast = baselines.fit_ets, baselines.ets_forecasts

    def fit(*args: object) -> object:
        during.append(_blas_threads())
        return real_fit(*args)  # type: ignore[arg-type]

    def forecast(*args: object) -> object:
        during.append(_blas_threads())
        return real_forecast(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(baselines, "fit_ets", fit)
    monkeypatch.setattr(baselines, "ets_forecasts", forecast)
    with threadpool_limits(limits=2, user_api="blas"):
        out = baselines.ETSForecaster("hourly").fit(frame).predict()
        assert _blas_threads() == {2}
    assert during == [{1}, {1}]
    assert out["method"].unique().to_list() == ["ets(A,Ad,A,24)"]


def _sampled_panel() -> pl.DataFrame:
    """Two series sampled every 20 minutes (a bucket's mean and last sample differ),
    one with a gap of a day, one starting later."""
    rng = np.random.default_rng(11)
    a = series_frame("a/gpus", rng.uniform(0, 40, 3 * 24 * 12), step=timedelta(minutes=20))
    b = series_frame(
        "b/gpus",
        rng.uniform(0, 9, 3 * 24 * 9),
        start=T0 + timedelta(days=2),
        step=timedelta(minutes=20),
    )
    gap = (pl.col("ts") > T0 + timedelta(days=1)) & (pl.col("ts") <= T0 + timedelta(days=2))
    return pl.concat([a.filter(~gap), b])


def test_both_grids_from_one_resampling_are_the_resampled_frames_columns() -> None:
    from predops.models.demand.config import HOURLY_CONFIG
    from predops.models.demand.grid import grid_from_frame, resample_grids, resampled

    df = _sampled_panel()
    both = resample_grids(df, HOURLY_CONFIG)
    full = resampled(df, HOURLY_CONFIG.spec).sort("series_id", "ts").collect()
    for value in ("value", "value_last"):
        # the whole resampled frame, every column aggregated (value_last: the mean
        # where a bucket has no latest sample)
        alone = grid_from_frame(full.with_columns(pl.coalesce(value, "value").alias("value")))
        shared = both[value]
        assert shared.series == alone.series
        np.testing.assert_array_equal(shared.starts, alone.starts)
        np.testing.assert_array_equal(shared.ts_us, alone.ts_us)
        np.testing.assert_allclose(shared.value, alone.value, rtol=1e-12, equal_nan=True)
    assert np.isnan(both["value"].value).any()  # the gap is kept as missing buckets
    assert not np.allclose(both["value"].value, both["value_last"].value, equal_nan=True)


@pytest.mark.parametrize("name", ["seasonal_naive", "ets", "theta", "persistence"])
def test_a_candidate_on_the_shared_resampling_forecasts_as_on_the_frame(name: str) -> None:
    from predops.models.demand.config import HOURLY_CONFIG
    from predops.models.demand.grid import Resampled
    from predops.models.demand.selection import candidate

    df = _sampled_panel()
    hist = df.filter(pl.col("ts") <= T0 + timedelta(days=3, minutes=20))
    on_frame = candidate(name, HOURLY_CONFIG).fit(df)
    on_grid = candidate(name, HOURLY_CONFIG).fit(Resampled(df, HOURLY_CONFIG))
    for x_frame, x_grid in ((None, None), (hist, Resampled(hist, HOURLY_CONFIG))):
        want = on_frame.predict(x_frame)
        got = on_grid.predict(x_grid)
        assert got.select("series_id", "issued_at", "horizon", "method").equals(
            want.select("series_id", "issued_at", "horizon", "method")
        )
        for q in ("p10", "p50", "p90"):
            np.testing.assert_allclose(got[q].to_numpy(), want[q].to_numpy(), rtol=1e-9)


def test_the_shared_resampling_runs_once_for_every_candidate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from predops.models.demand import grid as grid_mod
    from predops.models.demand.config import HOURLY_CONFIG, ForecastConfig, config_named
    from predops.models.demand.grid import Grid, Resampled
    from predops.models.demand.selection import candidate

    calls: list[int] = []  # resamplings on the shared (hourly) grid
    real = grid_mod.resample_grids

    def counted(demand: pl.DataFrame, config: ForecastConfig) -> dict[str, Grid]:
        if config.spec == HOURLY_CONFIG.spec:
            calls.append(1)
        return real(demand, config)

    monkeypatch.setattr(grid_mod, "resample_grids", counted)
    res = Resampled(_sampled_panel(), HOURLY_CONFIG)
    for name in ("seasonal_naive", "ets", "theta", "persistence"):
        candidate(name, HOURLY_CONFIG).fit(res).predict(res)
    assert len(calls) == 1
    # A candidate on another grid step resamples the frame itself, on its own step.
    daily = config_named("weekly")
    assert daily.spec.freq != HOURLY_CONFIG.spec.freq
    own = res.grid(daily)
    assert np.all(
        np.diff(own.ts_us[own.starts[0] : own.starts[1]])
        == daily.spec.freq // timedelta(microseconds=1)
    )
    assert len(calls) == 1
    with pytest.raises(ValueError, match="value must be"):
        res.grid(HOURLY_CONFIG, "value_max")
