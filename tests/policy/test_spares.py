"""Spare-part rules and the inventory simulation: hand-checked weeks, no future leakage."""

from __future__ import annotations

import math

import numpy as np
import pytest

from predops.models.demand.spares import (
    CountForecaster,
    count_quantile,
    ewma_rate,
    poisson_quantile,
    window_dispersion,
)
from predops.policy.spares import Rule, fixed_units, levels, simulate


def test_simulate_hand_checked_two_week_lead() -> None:
    # Level 3 every week, lead 2, demand 2, 2, 0, 4, 1.
    # week 0: on hand 3 (start), order 0, demand 2 -> end 1.
    # week 1: position 1 -> order 2 (lands week 3), demand 2 -> short 1, end 0.
    # week 2: position 0 + 2 on order -> order 1 (lands week 4), demand 0, end 0.
    # week 3: +2 -> on hand 2, position 2 + 1 -> order 0, demand 4 -> short 2, end 0.
    # week 4: +1 -> on hand 1, position 1 -> order 2, demand 1 -> end 0.
    inv = simulate(np.array([2, 2, 0, 4, 1]), np.full(5, 3), lead=2)
    assert inv.on_hand_end.tolist() == [1, 0, 0, 0, 0]
    assert inv.short.tolist() == [0, 1, 0, 2, 0]
    assert inv.ordered.tolist() == [0, 2, 1, 0, 2]
    s = inv.summary()
    assert s["stock_out_weeks"] == 2 and s["units_short"] == 3
    assert s["spares_held_mean"] == pytest.approx(0.2)


def test_simulate_enough_stock_never_short() -> None:
    inv = simulate(np.array([1, 1, 1, 1]), np.full(4, 10), lead=1)
    assert inv.short.sum() == 0
    # Week 0 ends at 9 (nothing ordered: the position is at the level); from week 1 on
    # each week orders the unit used the week before, landing a week later: 8 at the end.
    assert inv.on_hand_end.tolist() == [9, 8, 8, 8]
    assert inv.ordered.tolist() == [0, 1, 1, 1]


def test_simulate_refuses_bad_input() -> None:
    with pytest.raises(ValueError, match="lead time"):
        simulate(np.array([1]), np.array([1]), lead=0)
    with pytest.raises(ValueError, match="differ"):
        simulate(np.array([1, 2]), np.array([1]), lead=1)
    with pytest.raises(ValueError, match="non-negative"):
        simulate(np.array([-1]), np.array([1]), lead=1)


def test_levels_use_only_earlier_weeks() -> None:
    rng = np.random.default_rng(3)
    counts = rng.poisson(4.0, size=80)
    for rule in (Rule("forecast", service=0.9, half_life_weeks=8), Rule("poisson", service=0.9)):
        base = levels(rule, counts, 40, 80, lead=4)
        for t in (40, 55, 79):
            changed = counts.copy()
            changed[t:] = 1000  # the future explodes
            again = levels(rule, changed, 40, 80, lead=4)
            assert (again[: t - 40 + 1] == base[: t - 40 + 1]).all(), (rule.kind, t)


def test_fixed_rule_and_units() -> None:
    assert fixed_units(512, 0.05) == 26
    assert fixed_units(20, 0.05) == 1
    lv = levels(Rule("fixed", fixed_units=7), np.zeros(10, dtype=np.int64), 2, 10, lead=3)
    assert lv.tolist() == [7] * 8
    with pytest.raises(ValueError, match="rule kind"):
        levels(Rule("magic"), np.zeros(3, dtype=np.int64), 0, 3, lead=1)


def test_forecast_parts() -> None:
    h = np.array([0, 0, 0, 8])
    assert ewma_rate(h, half_life_weeks=1.0) == pytest.approx(8 / (1 + 0.5 + 0.25 + 0.125))
    assert math.isinf(window_dispersion(np.ones(9, dtype=np.int64), 5))  # too short
    bursty = np.array([0, 0, 20, 0, 0, 0, 25, 0, 0, 0, 0, 30] * 2)
    k = window_dispersion(bursty, 2)
    assert 0 < k < 5
    # Over-dispersion widens the upper quantile beyond the Poisson one of the same mean.
    fc = CountForecaster(window=2, half_life_weeks=100.0)
    assert fc.quantile(bursty, 0.95) > count_quantile(fc.mean(bursty), math.inf, 0.95)
    assert poisson_quantile(np.full(10, 2), 5, 0.5) == 10
    assert count_quantile(0.0, math.inf, 0.9) == 0
    with pytest.raises(ValueError, match="quantile level"):
        count_quantile(1.0, 2.0, 1.0)
