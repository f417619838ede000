"""Next-hour anchoring on measured demand, and the Poisson failure buffer."""

from __future__ import annotations

import math
from datetime import timedelta

import numpy as np
import pytest
from scipy.stats import poisson

from predops.core.actions import ResizePool
from predops.core.contracts import Forecast
from predops.policy.anchoring import ANCHORED, OBSERVED, anchor_next_hour, hourly_changes
from predops.policy.config import Budgets, PolicyConfig, SizingConfig
from predops.policy.engine import plan
from predops.policy.sizing import poisson_quantile
from tests.policy.factories import T0, H, clock, forecast, make_fleet, make_risk, prov
from tests.policy.test_sizing import cluster, resize

SERIES = "train/gpus/A100"
WEEK = timedelta(days=7)


def measured(values: list[float], series: str = SERIES) -> list[Forecast]:
    """Hourly measurements ending at T0 (the last value is the demand now)."""
    start = T0 - (len(values) - 1) * H
    return [
        Forecast(series, start + i * H, start + i * H, v, v, v, OBSERVED, prov(name="demand"))
        for i, v in enumerate(values)
    ]


def test_first_step_is_the_level_now_plus_the_quantiles_of_the_hourly_change() -> None:
    rng = np.random.default_rng(3)
    values = list(np.round(100 + np.cumsum(rng.integers(-4, 6, size=49)), 1).astype(float))
    model = [forecast(SERIES, T0 + k * H, 150.0) for k in (1, 2)]
    out = anchor_next_hour(measured(values) + model, T0, WEEK, min_changes=24)
    [first] = [f for f in out if f.valid_at == T0 + H]
    changes = np.diff(values)
    assert first.method == ANCHORED
    assert first.p90 == pytest.approx(values[-1] + np.quantile(changes, 0.9))
    assert first.p50 == pytest.approx(values[-1] + np.quantile(changes, 0.5))
    assert first.p10 <= first.p50 <= first.p90
    assert first.extra["model_p90"] == pytest.approx(165.0)
    assert first.provenance == model[0].provenance
    # later steps and the measurements themselves are left as they were
    assert [f for f in out if f.valid_at == T0 + 2 * H] == [model[1]]
    assert [f for f in out if f.method == OBSERVED] == measured(values)


def test_hourly_changes_skip_gaps() -> None:
    ms = measured([1.0, 3.0, 4.0, 10.0])
    values = {f.valid_at: f.p50 for f in ms if f.valid_at != T0 - H}  # 4.0 missing
    assert hourly_changes(values).tolist() == [2.0]


@pytest.mark.parametrize(
    ("values", "history", "now_measured"),
    [
        ([50.0] * 10, WEEK, True),  # too few changes
        ([50.0] * 40, timedelta(0), True),  # anchoring off
        ([50.0] * 40, WEEK, False),  # no measurement at now
        ([50.0] * 40, timedelta(hours=5), True),  # history shorter than min_changes
    ],
)
def test_model_forecast_stands_without_enough_history(
    values: list[float], history: timedelta, now_measured: bool
) -> None:
    ms = measured(values)
    if not now_measured:
        ms = [f for f in ms if f.valid_at != T0]
    model = [forecast(SERIES, T0 + H, 150.0)]
    out = anchor_next_hour(ms + model, T0, history, min_changes=24)
    assert [f for f in out if f.valid_at == T0 + H] == model


def test_sizing_holds_the_anchored_hour_not_the_model_p90() -> None:
    # 4 nodes busy with 8 GPUs each; demand flat at 32 GPUs for two days
    nodes, snap = cluster("train", 12, 8, busy=4)
    fc = [*measured([32.0] * 48), forecast(SERIES, T0 + H, 48.0, spread=0.25)]
    fleet = make_fleet(nodes)
    anchored = resize(plan([], fc, snap, fleet, Budgets(), clock()), "train")
    off = PolicyConfig(sizing=SizingConfig(anchor_history=timedelta(0)))
    model = resize(plan([], fc, snap, fleet, Budgets(), clock(), off), "train")
    assert isinstance(anchored, ResizePool) and isinstance(model, ResizePool)
    assert anchored.evidence["anchored"] == [SERIES]
    assert anchored.evidence["p90_gpus_peak"] == pytest.approx(32.0)
    assert anchored.to_nodes == 4  # the flat week says the next hour needs what runs now
    assert model.evidence["anchored"] == []
    assert model.evidence["p90_gpus_peak"] == pytest.approx(60.0)
    assert model.to_nodes >= math.ceil(60 / 8) > anchored.to_nodes


@pytest.mark.parametrize("mean", [0.0, 0.01, 0.105, 0.17, 1.0, 2.5, 12.0, 900.0])
@pytest.mark.parametrize("level", [0.5, 0.9, 0.99])
def test_poisson_quantile_matches_the_distribution(mean: float, level: float) -> None:
    k = poisson_quantile(mean, level)
    assert poisson.cdf(k, mean) >= level - 1e-9
    assert k == 0 or poisson.cdf(k - 1, mean) < level


def test_poisson_quantile_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="mean"):
        poisson_quantile(-1.0, 0.9)
    with pytest.raises(ValueError, match="level"):
        poisson_quantile(1.0, 1.0)


def test_failure_buffer_is_the_poisson_quantile_of_the_window_failures() -> None:
    nodes, snap = cluster("train", 8, 8, busy=2)
    fc = [forecast(SERIES, T0 + H, 16.0, spread=0.0)]
    fleet = make_fleet(nodes)
    # 8 nodes at 1 % a day: 0.005 failures expected in the 1.5 h window -> no buffer
    low = resize(
        plan([make_risk(n.node_id, 0.01) for n in nodes], fc, snap, fleet, Budgets(), clock()),
        "train",
    )
    # 8 nodes at 90 % a day: 1.07 expected -> 2 at the 0.9 level (ceil would hold 2 too)
    high = resize(
        plan([make_risk(n.node_id, 0.9) for n in nodes], fc, snap, fleet, Budgets(), clock()),
        "train",
    )
    for r in (low, high):
        assert isinstance(r, ResizePool)
        exp = r.evidence["expected_failures"]
        assert r.evidence["failure_buffer"] == poisson_quantile(exp, 0.9)
        assert r.evidence["target"] == 2 + r.evidence["failure_buffer"]
    assert isinstance(low, ResizePool) and low.evidence["failure_buffer"] == 0
