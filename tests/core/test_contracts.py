from __future__ import annotations

from dataclasses import asdict, fields
from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from predops.core.actions import Buy, Cordon, Drain, Plan, ResizePool, Skip, SkipReason, Uncordon
from predops.core.contracts import FailureRisk, Forecast, Provenance, Reason

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def prov() -> Provenance:
    return Provenance("node_failure", "3", "fs-abc123", T0, run_id="r1")


finite = st.floats(min_value=-1e12, max_value=1e12, allow_nan=False)


@given(finite, finite, finite)
def test_forecast_accepts_only_ordered_quantiles(a: float, b: float, c: float) -> None:
    if a <= b <= c:
        f = Forecast("pool-a/gpus", T0, T0 + timedelta(hours=1), a, b, c, provenance=prov())
        assert f.horizon == timedelta(hours=1)
        assert f.to_dict()["provenance"]["data_cutoff"] == T0.isoformat()
    else:
        with pytest.raises(ValueError, match="quantiles cross"):
            Forecast("pool-a/gpus", T0, T0, a, b, c)


def test_forecast_rejects_non_finite_and_naive_times() -> None:
    with pytest.raises(ValueError, match="not finite"):
        Forecast("s", T0, T0, float("nan"), 1, 2)
    with pytest.raises(ValueError, match="UTC-aware"):
        Forecast("s", datetime(2026, 1, 1), T0, 0, 1, 2)
    with pytest.raises(ValueError, match="before issued_at"):
        Forecast("s", T0, T0 - timedelta(hours=1), 0, 1, 2)


def test_failure_risk_bounds_and_dict() -> None:
    r = FailureRisk(
        "gpu-1",
        T0,
        timedelta(hours=24),
        0.25,
        (Reason("gpu_temp_c__rack_dev_6h", 0.8, "gpu_temp_c 9 C above rack"),),
        prov(),
    )
    d = r.to_dict()
    assert d["horizon_hours"] == 24 and d["reasons"][0]["contribution"] == 0.8
    # written field by field: every field once, in order, times as ISO text
    assert d == {
        "node_id": "gpu-1",
        "as_of": T0.isoformat(),
        "p_fail": 0.25,
        "reasons": [asdict(x) for x in r.reasons],
        "provenance": {**asdict(prov()), "data_cutoff": prov().data_cutoff.isoformat()},
        "horizon_hours": 24.0,
    }
    assert list(d) == [f.name for f in fields(r) if f.name != "horizon"] + ["horizon_hours"]
    assert FailureRisk("gpu-1", T0, timedelta(hours=1), 0.1).to_dict()["provenance"] is None
    for bad in (-0.1, 1.1, float("nan")):
        with pytest.raises(ValueError, match="p_fail"):
            FailureRisk("gpu-1", T0, timedelta(hours=24), bad)
    with pytest.raises(ValueError, match="horizon"):
        FailureRisk("gpu-1", T0, timedelta(0), 0.5)


def test_provenance_is_required_to_be_complete() -> None:
    with pytest.raises(ValueError, match="feature-set hash"):
        Provenance("m", "1", "", T0)
    with pytest.raises(ValueError, match="UTC-aware"):
        Provenance("m", "1", "h", datetime(2026, 1, 1))


def test_idempotency_key_is_stable_and_parameter_sensitive() -> None:
    a = Drain(target="gpu-1", reason="p_fail 0.4 > threshold", not_before=T0)
    b = Drain(target="gpu-1", reason="different words", evidence={"p": 0.4}, not_before=T0)
    c = Drain(target="gpu-1", reason="x", not_before=T0, grace_period_s=60)
    assert a.idempotency_key == b.idempotency_key  # same action, same window
    assert a.idempotency_key != c.idempotency_key
    assert a.idempotency_key.startswith("drain:gpu-1:")
    assert (
        Cordon(target="gpu-1", reason="r").idempotency_key
        != Uncordon(target="gpu-1", reason="r").idempotency_key
    )


def test_actions_validate_their_fields() -> None:
    with pytest.raises(ValueError, match="reason"):
        Cordon(target="gpu-1", reason="")
    with pytest.raises(ValueError, match="quantity"):
        Buy(target="h100x8", reason="r", region="eu", quantity=0, by_date=date(2026, 5, 1))
    with pytest.raises(ValueError, match="expires before"):
        Cordon(target="n", reason="r", not_before=T0, expires=T0)
    rp = ResizePool(target="gpu-train", reason="p90 demand", from_nodes=10, to_nodes=14)
    assert rp.to_dict()["params"] == {"from_nodes": 10, "to_nodes": 14}


def test_plan_names_each_candidate_once() -> None:
    acts = (Cordon(target="gpu-1", reason="r"), Drain(target="gpu-1", reason="r"))
    skips = (Skip("drain", "gpu-2", SkipReason.BUDGET_EXHAUSTED, "rack r1 already at 1"),)
    plan = Plan("p1", T0, T0, acts, skips, budgets_used={"rack:r1": 1}, provenance=(prov(),))
    d = plan.to_dict()
    assert d["dry_run"] is True and d["skips"][0]["reason"] == "budget_exhausted"
    with pytest.raises(ValueError, match="twice"):
        Plan("p2", T0, T0, acts, (Skip("drain", "gpu-1", SkipReason.STORM_BREAKER),))
