"""Every contract type's ``from_dict`` is the inverse of its ``to_dict``, through JSON."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from predops.core.actions import (
    Action,
    Buy,
    Cordon,
    Drain,
    LendNodes,
    Plan,
    ResizePool,
    Skip,
    SkipReason,
    Uncordon,
    action_from_dict,
)
from predops.core.contracts import Forecast, Provenance

T0 = datetime(2026, 3, 1, tzinfo=UTC)

times = st.datetimes(
    min_value=datetime(2020, 1, 1), max_value=datetime(2035, 1, 1), timezones=st.just(UTC)
)
names = st.text("abcdefghijklmnopqrstuvwxyz0123456789-./", min_size=1, max_size=20)
finite = st.floats(min_value=-1e9, max_value=1e9, allow_nan=False)
evidence = st.dictionaries(names, st.integers() | finite | names | st.booleans(), max_size=3)


def through_json(d: dict[str, Any]) -> dict[str, Any]:
    """What a file or an HTTP body gives back."""
    out: dict[str, Any] = json.loads(json.dumps(d))
    return out


provenances = st.builds(
    Provenance, names, names, names, times, st.none() | names.map(lambda s: f"run-{s}")
)


@given(provenances)
def test_provenance_round_trips(p: Provenance) -> None:
    assert Provenance.from_dict(through_json(p.to_dict())) == p


@st.composite
def forecasts(draw: st.DrawFn) -> Forecast:
    issued = draw(times)
    p10, p50, p90 = sorted(draw(st.tuples(finite, finite, finite)))
    return Forecast(
        series_id=draw(names),
        issued_at=issued,
        valid_at=issued + draw(st.timedeltas(timedelta(0), timedelta(days=400))),
        p10=p10,
        p50=p50,
        p90=p90,
        method=draw(names),
        provenance=draw(st.none() | provenances),
        extra=draw(st.dictionaries(names, finite, max_size=2)),
    )


@given(forecasts())
def test_forecast_round_trips(f: Forecast) -> None:
    assert Forecast.from_dict(through_json(f.to_dict())) == f


def test_forecast_from_dict_takes_a_shared_provenance() -> None:
    p = Provenance("predops.demand", "2", "fs", T0)
    f = Forecast("s", T0, T0 + timedelta(hours=1), 1.0, 2.0, 3.0, "m")
    back = Forecast.from_dict(f.to_dict(), p)
    assert back.provenance is p and back.p50 == 2.0 and back.method == "m"


@st.composite
def actions(draw: st.DrawFn) -> Action:
    start = draw(st.none() | times)
    end = None if start is None else draw(st.none() | times.filter(lambda t: t > start))
    common: dict[str, Any] = {
        "target": draw(names),
        "reason": draw(names),
        "evidence": draw(evidence),
        "not_before": start,
        "expires": end,
        "expected_benefit": draw(st.none() | finite),
        "expected_cost": draw(st.none() | finite),
    }
    kind = draw(st.sampled_from(["cordon", "uncordon", "drain", "resize", "buy", "lend"]))
    n = draw(st.integers(1, 10_000))
    if kind == "cordon":
        return Cordon(**common)
    if kind == "uncordon":
        return Uncordon(**common)
    if kind == "drain":
        return Drain(**common, grace_period_s=n)
    if kind == "resize":
        return ResizePool(**common, from_nodes=n, to_nodes=draw(st.integers(0, 10_000)))
    if kind == "buy":
        return Buy(**common, region=draw(names), quantity=n, by_date=draw(times).date())
    return LendNodes(**common, to_pool=common["target"] + "-other", nodes=n)


@given(actions())
def test_action_round_trips_with_its_key(a: Action) -> None:
    back = action_from_dict(through_json(a.to_dict()))
    assert back == a and type(back) is type(a) and back.idempotency_key == a.idempotency_key


def test_an_action_whose_key_does_not_match_is_refused() -> None:
    d = Drain(target="n1", reason="risk", grace_period_s=300).to_dict()
    d["params"]["grace_period_s"] = 30
    with pytest.raises(ValueError, match="idempotency key"):
        action_from_dict(d, "plan.json actions[0]")


@given(
    st.builds(
        Skip, st.sampled_from(["drain", "buy"]), names, st.sampled_from(list(SkipReason)), names
    )
)
def test_skip_round_trips(s: Skip) -> None:
    assert Skip.from_dict(through_json(s.to_dict())) == s


@given(st.lists(actions(), max_size=4), st.lists(provenances, max_size=2), times)
def test_plan_round_trips(acts: list[Action], provs: list[Provenance], at: datetime) -> None:
    unique = list({(a.kind, a.candidate): a for a in acts}.values())
    skips = (Skip("buy", "sku@nowhere", SkipReason.NO_FORECAST, "no forecast"),)
    plan = Plan(
        plan_id="plan-1",
        created_at=at,
        data_cutoff=at - timedelta(minutes=5),
        actions=tuple(unique),
        skips=skips,
        budgets_used={"pool:a": 2},
        provenance=tuple(provs),
        dry_run=False,
        alerts=("look",),
    )
    assert Plan.from_dict(through_json(plan.to_dict())) == plan


def test_a_plan_without_its_times_names_where() -> None:
    with pytest.raises(ValueError, match=r"p\.json: plan_id, created_at and data_cutoff"):
        Plan.from_dict({"plan_id": "x", "created_at": T0.isoformat()}, "p.json")
