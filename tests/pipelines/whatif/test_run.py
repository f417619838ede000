"""Pooling the figures of several worlds: ratios of sums, every figure compare reads."""

from __future__ import annotations

import pytest

from predops.pipelines.whatif.run import POOLED_FIGURES, compare, pooled


def _figures(lost: float, drain: float, idle: float, pending: float) -> dict[str, float]:
    out = dict.fromkeys(POOLED_FIGURES, 0.0)
    out.update(
        lost_gpu_hours=lost,
        drain_cost_gpu_hours=drain,
        drain_cost_gpu_hours_full_capacity=10 * drain,
        drain_cost_gpu_hours_unreplaced=drain,
        idle_node_hours=idle,
        pending_pod_hours=pending,
    )
    return out


def test_pooled_figures_are_sums_and_the_comparison_a_ratio_of_sums() -> None:
    # World A: 100 -> 50 lost, drain cost 20 (0.4 of the savings: missed alone).
    # World B: 300 -> 100 lost, drain cost 20 (0.1). Together: 250 of 400 avoided, 40 / 250.
    a = {"reactive": _figures(100, 0, 1000, 50), "predictive": _figures(50, 20, 800, 40)}
    b = {"reactive": _figures(300, 0, 3000, 70), "predictive": _figures(100, 20, 2000, 80)}
    both = pooled([a, b])
    assert both["predictive"]["lost_gpu_hours"] == 150
    assert both["reactive"]["idle_node_hours"] == 4000
    alone = compare(a)["predictive"]
    assert alone["targets_met"]["drain_cost_unreplaced_under_25pct_of_savings"] is False
    got = compare(both)["predictive"]
    assert got["lost_gpu_hours_avoided_share"] == pytest.approx(250 / 400)
    assert got["drain_cost_unreplaced_over_savings"] == pytest.approx(40 / 250)
    assert got["idle_node_hours_reduction"] == pytest.approx(0.3)
    assert got["pending_pod_hours_ratio"] == pytest.approx(1.0)
    assert got["targets_met"]["drain_cost_unreplaced_under_25pct_of_savings"] is True


def test_pooled_keeps_only_policies_every_world_ran() -> None:
    a = {"reactive": _figures(1, 0, 1, 1), "oracle": _figures(0, 0, 1, 1)}
    b = {"reactive": _figures(2, 0, 1, 1)}
    assert set(pooled([a, b])) == {"reactive"}


def test_pooled_needs_runs() -> None:
    with pytest.raises(ValueError, match="no runs"):
        pooled([])
