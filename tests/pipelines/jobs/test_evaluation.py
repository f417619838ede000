"""The simulated-fleet targets of ``predops eval failure``: what the lead-time bar can mean."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import polars as pl

from predops.models.failure import metrics as M
from predops.pipelines.jobs.evaluation import LEAD_TARGET_HOURS, node_targets

AT = datetime(2026, 3, 1, 12, tzinfo=UTC)


def _alarm_always(horizon: timedelta) -> dict[str, Any]:
    """Lead times of a scorer alarming every hour of the two days before a failure."""
    ts = [AT - timedelta(hours=k) for k in range(48, 0, -1)]
    rows = pl.DataFrame({"node_id": ["n1"] * len(ts), "ts": ts, "score": [1.0] * len(ts)})
    failures = pl.DataFrame({"node_id": ["n1"], "at": [AT]})
    return M.lead_times(rows, failures, threshold=0.5, horizon=horizon)


def _report(leads: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "horizons": {
            h: {"model": {"lead_time": lt}, "comparison": {"model_over_rule_pr_auc": 3.0}}
            for h, lt in leads.items()
        }
    }


def test_lead_time_never_exceeds_the_horizon_so_6h_is_not_judged_at_6h() -> None:
    # Even a scorer that alarms for two days straight has a 6 h lead at the 6 h horizon.
    leads = {"6h": _alarm_always(timedelta(hours=6)), "24h": _alarm_always(timedelta(hours=24))}
    assert leads["6h"]["lead_hours"]["median"] == LEAD_TARGET_HOURS
    assert leads["24h"]["lead_hours"]["median"] == 24.0
    targets = node_targets(_report(leads))
    assert targets["6h"]["median_lead_at_least_6h"] is None
    assert targets["6h"]["median_lead_share_of_horizon"] == 1.0
    assert targets["24h"]["median_lead_at_least_6h"] is True
    assert targets["24h"]["pr_auc_at_least_2x_rule"] is True


def test_a_short_lead_fails_the_bar_on_a_long_horizon() -> None:
    late = _alarm_always(timedelta(hours=24))
    late["lead_hours"] = {**late["lead_hours"], "median": 5.0}
    targets = node_targets(_report({"24h": late, "72h": {"lead_hours": None}}))
    assert targets["24h"]["median_lead_at_least_6h"] is False
    assert targets["72h"]["median_lead_hours"] is None
    assert targets["72h"]["median_lead_at_least_6h"] is False
