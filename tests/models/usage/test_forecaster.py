"""The usage forecaster: ordered quantiles, coverage on series of known distribution,
chunked reading, the online correction, and bad input named."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from statistics import NormalDist

import numpy as np
import polars as pl
import pytest

from predops.core.contracts import UsageForecast
from predops.models.usage.design import Design
from predops.models.usage.forecaster import (
    LEVELS,
    UsageForecaster,
    at_level,
    level_name,
    to_forecasts,
)
from predops.models.usage.grid import to_grid
from predops.models.usage.online import BOUNDS, OnlineCorrection
from tests.models.threads import predict_threads

T0 = datetime(2026, 1, 5, tzinfo=UTC)
STEP = timedelta(minutes=5)
MU, SIGMA = 0.3, 0.05
"""Each node's usage share: independent N(MU + node offset, SIGMA) draws per step."""


def _history(n: int, days: float, seed: int, *, alloc: float = 8.0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    b = int(days * 288)
    ts = pl.datetime_range(T0, T0 + (b - 1) * STEP, STEP, eager=True, time_zone="UTC")
    parts = []
    for i in range(n):
        share = MU + 0.01 * (i % 5) + SIGMA * rng.standard_normal(b)
        parts.append(
            pl.DataFrame(
                {
                    "series_id": f"n{i:02d}",
                    "ts": ts,
                    "usage": np.clip(share, 0, 1) * alloc,
                    "allocatable": alloc,
                }
            )
        )
    return pl.concat(parts)


def _model(**kw: object) -> UsageForecaster:
    params: dict[str, object] = {
        "n_estimators": 60,
        "n_jobs": 1,
        "max_train_rows": 40_000,
        "aci_gamma": 0.0,
    }
    params.update(kw)
    return UsageForecaster(**params)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def fitted() -> tuple[UsageForecaster, pl.DataFrame]:
    hist = _history(12, 16, seed=1)
    cut = T0 + timedelta(days=12)
    return _model().fit(hist.filter(pl.col("ts") < cut)), hist


def test_quantiles_are_ordered_and_the_api_frame(
    fitted: tuple[UsageForecaster, pl.DataFrame],
) -> None:
    model, hist = fitted
    out = model.predict(hist)
    assert out.height == 12
    assert (out["p50"] <= out["p95"]).all() and (out["p95"] <= out["p99"]).all()
    assert set(out.columns) >= {"series_id", "issued_at", "window_hours", "allocatable", "p50"}
    fc = model.forecasts(hist, as_of=T0 + timedelta(days=13))
    assert all(isinstance(f, UsageForecast) for f in fc)
    assert fc[0].as_of == T0 + timedelta(days=13, minutes=5)  # end of the as_of step
    assert fc[0].window == timedelta(hours=1) and fc[0].memory_p99 is None
    assert fc[0].cpu_at(0.01) == fc[0].p99 <= 8.0
    # Memory quantiles from a second predict frame (here: the same, as a stand-in).
    both = to_forecasts(out, model.window, memory=out.head(3))
    assert both[0].memory_p95 == both[0].p95 and both[5].memory_p95 is None


def test_coverage_matches_the_known_peak_distribution(
    fitted: tuple[UsageForecaster, pl.DataFrame],
) -> None:
    """Out of sample (the 4 days after the fit), each level's coverage of the 1-hour
    peak is near nominal, and p95 near the true quantile of the max of 12 normals."""
    model, hist = fitted
    grid = to_grid(hist, t0_us=int(T0.timestamp() * 1e6), step=STEP, steps=16 * 288)
    d = Design(grid, model.window_steps)
    cols = np.arange(12 * 288, 16 * 288 - 12, 6)
    rows = np.repeat(np.arange(12), cols.size)
    cols = np.tile(cols, 12)
    q = model.quantiles(d, rows, cols)
    peak = d.target(rows, cols)
    cover = (peak[:, None] <= q).mean(axis=0)
    tol = {0.5: 0.06, 0.9: 0.04, 0.95: 0.03, 0.99: 0.015}
    for j, lv in enumerate(LEVELS):
        assert abs(cover[j] - lv) <= tol[lv], (lv, cover[j])
    # True p95 of the max of 12 iid N(mu_i, sigma): mu_i + sigma * z(0.95 ** (1 / 12)).
    mu = MU + 0.01 * (rows % 5)
    true95 = mu + SIGMA * NormalDist().inv_cdf(0.95 ** (1 / 12))
    assert np.median(np.abs(q[:, LEVELS.index(0.95)] - true95)) < 0.35 * SIGMA


def test_chunked_reading_gives_the_same_model() -> None:
    hist = _history(5, 5, seed=2)
    whole = _model(chunk_series=256).fit(hist).predict(hist)
    lazy = _model(chunk_series=2).fit(hist.lazy()).predict(hist.lazy())
    assert whole.equals(lazy)


def test_online_correction_widens_after_a_level_shift() -> None:
    hist = _history(6, 6, seed=3)
    model = _model(aci_gamma=0.2).fit(hist)
    before = model.predict(hist)
    # The next 12 hours run 0.3 of allocatable higher on every node.
    after = _history(6, 6.5, seed=4).filter(pl.col("ts") > hist["ts"].max())
    after = after.with_columns(pl.col("usage") + 0.3 * 8.0)
    longer = pl.concat([hist, after])
    issued = [before]
    for h in range(1, 12):
        issued.append(model.predict(longer, as_of=hist["ts"].max() + timedelta(hours=h)))
    scored = sum(model.update(f, longer) for f in issued)
    assert scored >= 6 * 10
    offsets = model.online.offsets(before["series_id"].to_list())
    assert (offsets[:, LEVELS.index(0.99)] > 0).all()
    assert (offsets <= BOUNDS[1]).all()


def test_online_correction_steps() -> None:
    oc = OnlineCorrection((0.5, 0.99), gamma=0.1)
    oc.update(["a"], np.array([[True, True]]))
    np.testing.assert_allclose(oc.offsets(["a", "b"]), [[0.05, 0.099], [0.0, 0.0]])
    oc.update(["a"], np.array([[False, False]]))
    np.testing.assert_allclose(oc.offsets(["a"]), [[0.0, 0.098]])
    for _ in range(200):
        oc.update(["a"], np.array([[True, True]]))
    assert oc.offsets(["a"]).max() == BOUNDS[1]


def test_at_level_interpolates_on_the_normal_score() -> None:
    q = np.array([[1.0, 2.0, 2.5, 4.0]])
    z = [NormalDist().inv_cdf(v) for v in LEVELS]
    np.testing.assert_allclose(at_level(q, LEVELS, np.array(z)), q)
    assert float(at_level(q, LEVELS, 0.0)[0]) == pytest.approx(1.0)
    far = at_level(q, LEVELS, np.array([3.0, 4.0]))
    assert 4.0 < far[0, 0] < far[0, 1]
    assert level_name(0.995) == "p99_5"


def test_bad_history_is_named() -> None:
    hist = _history(2, 2, seed=5)
    with pytest.raises(ValueError, match=r"lacks column.*usage"):
        _model().fit(hist.drop("usage"))
    bad = hist.with_columns(
        pl.when(pl.int_range(pl.len()) == 7).then(-1.0).otherwise(pl.col("usage")).alias("usage")
    )
    with pytest.raises(ValueError, match=r"row 7 \(series 'n00'.*usage must be finite and >= 0"):
        _model().fit(bad)
    with pytest.raises(ValueError, match="window"):
        UsageForecaster(window=timedelta(days=2))
    with pytest.raises(ValueError, match="levels must hold"):
        UsageForecaster(levels=(0.5, 0.9))


def test_step_target_covers_each_step() -> None:
    """target="step": a bound at level q is exceeded in about 1 - q of the window's
    steps; on iid N(mu, sigma) usage its p95 is near mu + 1.645 sigma."""
    hist = _history(8, 12, seed=6)
    model = _model(target="step").fit(hist.filter(pl.col("ts") < T0 + timedelta(days=9)))
    grid = to_grid(hist, t0_us=int(T0.timestamp() * 1e6), step=STEP, steps=12 * 288)
    d = Design(grid, model.window_steps)
    cols = np.tile(np.arange(9 * 288, 12 * 288 - 12, 12), 8)
    rows = np.repeat(np.arange(8), cols.size // 8)
    q = model.quantiles(d, rows, cols)
    win = np.stack([d.step_usage(rows, cols, np.full(cols.size, h)) for h in range(1, 13)], 1)
    share_below = (win[:, :, None] <= q[:, None, :]).mean(axis=(0, 1))
    for j, lv in enumerate(LEVELS):
        assert abs(share_below[j] - lv) <= (0.05 if lv == 0.5 else 0.02), (lv, share_below[j])
    true95 = MU + 0.01 * (rows % 5) + 1.645 * SIGMA
    assert np.median(np.abs(q[:, LEVELS.index(0.95)] - true95)) < 0.3 * SIGMA
    with pytest.raises(ValueError, match="target must be"):
        UsageForecaster(target="mean")


def test_row_quantiles_match_numpy() -> None:
    from predops.models.usage.design import row_quantiles

    x = np.random.default_rng(7).random((40, 25))
    x[3, :5] = np.nan
    x[7] = np.nan
    x[9, :24] = np.nan
    with np.errstate(all="ignore"), pytest.warns(RuntimeWarning):
        want = np.nanquantile(x, [0.5, 0.95, 0.99], axis=1)
    np.testing.assert_allclose(row_quantiles(x, [0.5, 0.95, 0.99]), want, equal_nan=True)


def test_telemetry_history_cpu_cores_and_memory_bytes() -> None:
    from predops.models.usage.grid import telemetry_history

    tel = pl.DataFrame(
        {
            "ts": [T0, T0 + STEP, T0],
            "node_id": ["a", "a", "z"],
            "cpu_util_pct": [50.0, None, 10.0],
            "mem_used_bytes": [2**30, 2**31, 1],
        }
    )
    inv = pl.DataFrame(
        {
            "ts": [T0 - timedelta(days=1), T0],
            "node_id": ["a", "a"],
            "cpu_milli": [4000, 8000],
            "memory_mib": [1024, 4096],
        }
    )
    cpu = telemetry_history(tel, inv).collect().sort("ts")
    assert cpu["series_id"].to_list() == ["a", "a"]  # z has no inventory
    assert cpu["usage"].to_list() == [4.0, None] and cpu["allocatable"].to_list() == [8.0, 8.0]
    mem = telemetry_history(tel, inv, "memory").collect().sort("ts")
    assert mem["usage"].to_list() == [2.0**30, 2.0**31]
    assert mem["allocatable"].to_list() == [4096.0 * 2**20] * 2
    with pytest.raises(ValueError, match="resource"):
        telemetry_history(tel, inv, "gpu")


def test_holdout_scores_count_the_origins_and_their_coverage(
    fitted: tuple[UsageForecaster, pl.DataFrame],
) -> None:
    model, hist = fitted
    end = hist["ts"].max()
    assert isinstance(end, datetime)
    start = end - timedelta(days=1)
    out = model.holdout_scores(hist, start, timedelta(hours=1))
    n_series = hist["series_id"].n_unique()
    # origins every hour from `start` (the end of the step before it) whose 1 h window
    # ends inside the history: 24 per node
    assert out["origins"] == n_series * 24
    assert out["loss"] > 0
    assert out["coverage"]["p50"] < out["coverage"]["p95"] <= out["coverage"]["p99"]
    assert out["coverage"]["p99"] >= 0.9
    # the same pairs scored by hand: the pinball loss of every level, averaged
    d = Design(to_grid(hist, t0_us=_us(T0), step=STEP, steps=hist["ts"].n_unique()), 12)
    c0 = (_us(start) - _us(T0)) // _us_step() - 1
    cols0 = np.arange(c0, d.grid.steps - 12, 12)
    rows = np.tile(np.arange(n_series), cols0.size)
    cols = np.repeat(cols0, n_series)
    y = d.target(rows, cols)
    q = model.quantiles(d, rows, cols)
    lv = np.array(model.levels)
    loss = ((y[:, None] - q) * (lv - (y[:, None] < q))).mean()
    assert out["loss"] == pytest.approx(loss, rel=1e-9)
    with pytest.raises(ValueError, match="no origin"):
        model.holdout_scores(hist, end + timedelta(days=2), timedelta(hours=1))


def _us(t: datetime) -> int:
    return int(t.timestamp() * 1_000_000)


def _us_step() -> int:
    return int(STEP.total_seconds() * 1_000_000)


def test_predictions_run_on_the_threads_asked_for(
    fitted: tuple[UsageForecaster, pl.DataFrame], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``n_jobs`` reaches ``Booster.predict``, which does not take the training's
    ``num_threads`` (without one it runs on every CPU)."""
    seen = predict_threads(monkeypatch)
    model, hist = fitted
    model.predict(hist)
    assert seen and set(seen) == {1}
