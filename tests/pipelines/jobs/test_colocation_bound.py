"""The most any once-per-round lending rule could reclaim at a violation budget
(:mod:`predops.pipelines.jobs.colocation_accounting`): by hand, against every choice of
loans on small instances, and against random rules."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from predops.pipelines.jobs import colocation_accounting as ca

NAN = float("nan")


def _value(viols: np.ndarray, gains: np.ndarray, budget: float) -> float:
    """The bound's reclaimed (units x h) at ``budget`` violations."""
    return float(np.interp(budget, viols, gains, left=np.nan, right=gains[-1]))


def test_bound_by_hand() -> None:
    """Two rounds of three 1-hour steps, allocatable 1. Round A uses 90 / 10 / 10 %: one
    violation lends 0.9 instead of 0.1. Round B uses 60 / 50 / 10 %: one violation
    lends 0.5 instead of 0.4, two lend 0.9."""
    future = np.array([[0.9, 0.1, 0.1], [0.6, 0.5, 0.1]])
    v, g, hours, steps = ca.budget_curve(future, np.ones(2), np.ones(2), 1.0)
    assert (hours, steps) == (6.0, 6)
    # Lending to each round's own peak: 0.1 x 3 h + 0.4 x 3 h.
    assert v[0] == 0 and g[0] == pytest.approx(1.5)
    # Best per violation: A's 0.8 x 3 h, then B's two for (0.9 - 0.4) x 3 h (hull: its
    # middle point 0.5 sits under the chord from 0.4 to 0.9), then B's last 0.1 x 3 h
    # for one more, then A's last 0.1 x 3 h for two more (all of it lent).
    assert v.tolist() == [0, 1, 3, 4, 6]
    np.testing.assert_allclose(g, [1.5, 3.9, 5.4, 5.7, 6.0])
    assert ca.share_at(v, g, hours, steps, 1 / 6) == pytest.approx(3.9 / 6)


def test_cap_and_missing_steps() -> None:
    """A loan never exceeds what is unused at the decision; unobserved steps neither
    count nor lend; a round with nothing unused lends nothing."""
    future = np.array([[0.2, NAN, 0.3], [0.1, 0.1, 0.1]])
    v, g, hours, steps = ca.budget_curve(future, np.array([0.5, 0.0]), np.ones(2), 1.0)
    assert steps == 5 and hours == 5.0
    assert v.tolist() == [0]  # capped at 0.5 below 1 - 0.3: no violation buys anything
    np.testing.assert_allclose(g, [0.5 * 2])


def _brute(future: np.ndarray, cap: np.ndarray, budget: int) -> float:
    """The most reclaimed by any integral choice of loans within ``budget`` violations."""
    obs = np.isfinite(future)
    options = []
    for p in range(future.shape[0]):
        u = future[p][obs[p]]
        loans = np.clip(np.append(1.0 - u, cap[p]), 0.0, cap[p])
        loans = np.append(loans, 0.0)
        options.append(
            [(int((u > 1.0 - lo + ca.EPS).sum()), float(lo * obs[p].sum())) for lo in loans]
        )
    best = 0.0
    for pick in itertools.product(*options):
        if sum(v for v, _ in pick) <= budget:
            best = max(best, sum(g for _, g in pick))
    return best


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(st.sampled_from([0.0, 0.1, 0.25, 0.4, 0.7, 0.95, NAN]), min_size=3, max_size=3),
        min_size=1,
        max_size=4,
    ),
    st.lists(st.sampled_from([0.0, 0.3, 0.8, 1.0]), min_size=4, max_size=4),
)
def test_bound_is_never_beaten_and_reached_at_its_points(
    rows: list[list[float]], caps: list[float]
) -> None:
    future = np.array(rows)
    cap = np.array(caps[: future.shape[0]])
    v, g, _, _ = ca.budget_curve(future, cap, np.ones(cap.size), 1.0)
    top = int(np.isfinite(future).sum())
    for budget in range(top + 1):
        best = _brute(future, cap, budget)
        assert best <= _value(v, g, budget) + 1e-9  # never beaten
    for vi, gi in zip(v.tolist(), g.tolist(), strict=True):
        assert _brute(future, cap, vi) == pytest.approx(gi)  # each point is reached


def test_random_rules_stay_under_the_bound() -> None:
    """Rules lending a random share (knob points) on 300 rounds: each knob point's
    (violations, reclaimed), as :func:`account` scores it, lies under the bound."""
    rng = np.random.default_rng(3)
    future = np.clip(rng.gamma(2.0, 0.08, size=(300, 12)), 0, 1)
    future[rng.random(future.shape) < 0.02] = NAN
    cap = np.clip(1 - np.nan_to_num(future[:, 0]) + rng.normal(0, 0.05, 300), 0, 1)
    alloc = rng.integers(1, 64, 300).astype(float)
    v, g, hours, steps = ca.budget_curve(future, cap, alloc, 5 / 60)
    for _ in range(20):
        peak = np.nanmax(future, axis=1)[:, None] * rng.uniform(0.3, 1.2, (300, 6))
        lent = np.clip(1 - peak, 0, cap[:, None])
        acc = ca.account(future, lent, alloc, 5 / 60)
        assert int(acc["steps"]) == steps and float(acc["allocatable"]) == pytest.approx(hours)
        for k in range(6):
            assert acc["reclaimed"][k] <= _value(v, g, acc["violations"][k]) + 1e-6


def test_shapes_are_checked() -> None:
    with pytest.raises(ValueError, match="must be"):
        ca.budget_curve(np.zeros((3, 2)), np.zeros(2), np.zeros(3), 1.0)
