"""Spare-part rules and the inventory simulation: hand-checked weeks, no future leakage,
the budgeted rule's common service level and the pooled dispersion."""

from __future__ import annotations

import math

import numpy as np
import pytest

from predops.models.demand.spares import (
    CountForecaster,
    count_quantile,
    count_quantiles,
    ewma_rate,
    excess_dispersion,
    poisson_quantile,
    pooled_dispersion,
    window_dispersion,
)
from predops.policy.spares import (
    Rule,
    common_service,
    fixed_units,
    fleet_levels,
    fleet_params,
    levels,
    simulate,
)


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


# --- the budgeted rule (one common service level under a weekly budget) -------------


def _fleet(seed: int, groups: int = 4, weeks: int = 30) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    mean = rng.uniform(0.0, 40.0, size=(groups, weeks))
    mean[0, :3] = 0.0  # a group with no demand yet
    k = rng.choice([0.5, 2.0, 8.0, math.inf], size=(groups, weeks))
    return mean, k


def test_common_service_fits_the_budget_at_the_highest_common_level() -> None:
    mean, k = _fleet(1)
    budget = np.random.default_rng(2).integers(0, 150, size=30).astype(np.float64)
    out = common_service(mean, k, budget, cap=0.99)
    total = out.levels.sum(axis=0)
    assert (total <= budget).all()
    assert ((out.service >= 0) & (out.service <= 0.99)).all()
    # One level for every group: each group's stock is its own quantile at service[t].
    assert (out.levels == count_quantiles(mean, k, out.service[None, :])).all()
    # The highest such level: a hair more breaks the budget in every binding week.
    binding = out.service < 0.99
    assert binding.any() and (~binding).any()
    above = count_quantiles(mean, k, np.minimum(out.service + 1e-6, 0.99)[None, :]).sum(axis=0)
    assert (above[binding] > budget[binding]).all()
    assert out.summary()["binding_weeks"] == int(binding.sum())


def test_common_service_with_a_loose_budget_is_the_unbudgeted_rule() -> None:
    mean, k = _fleet(3)
    free = count_quantiles(mean, k, np.asarray(0.95))
    out = common_service(mean, k, np.full(30, 1e9), cap=0.95)
    assert (out.levels == free).all() and (out.service == 0.95).all()
    assert out.summary()["binding_weeks"] == 0
    nothing = common_service(mean, k, np.zeros(30), cap=0.95)
    assert (nothing.levels == 0).all()


def test_budgeted_and_pooled_levels_use_only_earlier_weeks() -> None:
    """Changing any group's counts at or after week t never changes any group's S_t."""
    rng = np.random.default_rng(5)
    counts = [rng.poisson(lam, size=n) for lam, n in ((3.0, 90), (0.5, 70), (9.0, 100))]
    counts[1][20] = 40  # a batch in one group's history: the pool carries it
    starts = [50, 30, 60]  # the same 30 calendar weeks, histories of different lengths
    rule = Rule("forecast", service=0.99, half_life_weeks=8, budgeted=True, dispersion="pooled")
    budget = np.full(30, 60.0)
    base = fleet_levels(rule, fleet_params(rule, counts, starts, 30, 4), budget)
    assert (base.levels.sum(axis=0) <= 60).all() and (base.service < 0.99).any()
    for i in (0, 11, 29):
        for g in range(3):
            changed = [c.copy() for c in counts]
            changed[g][starts[g] + i :] = 500  # one group's future explodes
            again = fleet_levels(rule, fleet_params(rule, changed, starts, 30, 4), budget)
            assert (again.levels[:, : i + 1] == base.levels[:, : i + 1]).all(), (i, g)
            if i < 29:  # the change does reach the later weeks
                assert (again.levels[:, i + 1 :] != base.levels[:, i + 1 :]).any()


def test_pooled_dispersion_gives_a_quiet_group_the_fleet_tail() -> None:
    quiet = np.array([3, 2, 3, 4, 3, 2, 3, 3, 4, 3, 2, 3] * 3)
    bursty = np.array([0, 0, 20, 0, 0, 0, 25, 0, 0, 0, 0, 30] * 3)
    own_q, own_b = excess_dispersion(quiet, 2), excess_dispersion(bursty, 2)
    assert own_q == 0.0 and own_b > 0
    assert pooled_dispersion([quiet, bursty], 2) == pytest.approx(2 / own_b)
    assert math.isinf(pooled_dispersion([quiet, quiet], 2))
    assert pooled_dispersion([quiet, bursty, np.ones(3, dtype=np.int64)], 2) == pytest.approx(
        2 / own_b
    )  # too short to say: left out
    own = Rule("forecast", service=0.99, half_life_weeks=100.0)
    pooled = Rule("forecast", service=0.99, half_life_weeks=100.0, dispersion="pooled")
    counts, starts = [quiet, bursty], [30, 30]
    a = fleet_levels(own, fleet_params(own, counts, starts, 6, 1)).levels
    b = fleet_levels(pooled, fleet_params(pooled, counts, starts, 6, 1)).levels
    assert (b[0] > a[0]).all()  # the quiet group's level widens with the fleet's tail
    one_by_one = [levels(own, c, s, s + 6, 1) for c, s in zip(counts, starts, strict=True)]
    assert (a == np.array(one_by_one)).all()


def test_count_quantiles_match_the_scalar_one() -> None:
    mean, k = _fleet(7, groups=3, weeks=10)
    qs = np.linspace(0.05, 0.999, 10)
    got = count_quantiles(mean, k, qs[None, :])
    for g in range(3):
        for i in range(10):
            assert got[g, i] == count_quantile(mean[g, i], k[g, i], qs[i])
    assert count_quantiles(np.array([5.0]), np.array([math.inf]), np.array([0.0]))[0] == 0
    with pytest.raises(ValueError, match="quantile levels"):
        count_quantiles(np.array([5.0]), np.array([1.0]), np.array([1.0]))
    with pytest.raises(ValueError, match="means"):
        count_quantiles(np.array([-1.0]), np.array([1.0]), np.array([0.5]))


def test_rules_and_budgets_refuse_bad_input() -> None:
    with pytest.raises(ValueError, match="service level"):
        Rule("forecast", service=1.0)
    with pytest.raises(ValueError, match="half_life_weeks"):
        Rule("forecast", half_life_weeks=0)
    with pytest.raises(ValueError, match="budgeted"):
        Rule("fixed", budgeted=True)
    with pytest.raises(ValueError, match="dispersion"):
        Rule("forecast", dispersion="median")
    with pytest.raises(ValueError, match="dispersion 'pooled'"):
        Rule("poisson", dispersion="pooled")
    pooled = Rule("forecast", dispersion="pooled")
    with pytest.raises(ValueError, match="fleet_levels"):
        levels(pooled, np.zeros(10, dtype=np.int64), 5, 10, lead=1)
    mean, k = _fleet(9, groups=2, weeks=5)
    with pytest.raises(ValueError, match="budget"):
        common_service(mean, k, np.full(5, -1.0), cap=0.9)
    with pytest.raises(ValueError, match="budget"):
        common_service(mean, k, np.full(4, 10.0), cap=0.9)
    with pytest.raises(ValueError, match="budget"):
        common_service(mean, k, np.full(5, np.nan), cap=0.9)
    with pytest.raises(ValueError, match="cap"):
        common_service(mean, k, np.full(5, 1.0), cap=1.0)
    budgeted = Rule("forecast", budgeted=True)
    with pytest.raises(ValueError, match="needs a budget"):
        fleet_levels(budgeted, (mean, k))
    with pytest.raises(ValueError, match="not budgeted"):
        fleet_levels(Rule("forecast"), (mean, k), np.full(5, 1.0))
    with pytest.raises(ValueError, match="starts"):
        fleet_params(budgeted, [np.zeros(9, dtype=np.int64)], [1, 2], 3, 1)
    with pytest.raises(ValueError, match="outside"):
        fleet_params(budgeted, [np.zeros(9, dtype=np.int64)], [8], 3, 1)
