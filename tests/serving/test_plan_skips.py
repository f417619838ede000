"""The plan page's skips: grouped by reason, closest calls first, bounded per group."""

from __future__ import annotations

from predops.serving.dashboards.plans import skip_groups


def _skip(kind: str, target: str, reason: str) -> dict[str, str]:
    return {"kind": kind, "target": target, "reason": reason, "detail": ""}


def test_groups_largest_first_closest_calls_first_and_bounded() -> None:
    skips = [_skip("drain", f"n{i:05d}", "no_benefit") for i in range(10_000)]
    skips += [_skip("drain", "n00003", "budget_exhausted"), _skip("buy", "a100@eu", "no_forecast")]
    p_fail = {f"n{i:05d}": i / 20_000 for i in range(10_000)}  # n09999 is the riskiest
    groups = skip_groups({"skips": skips}, p_fail, shown=50)
    assert [(g["kind"], g["reason"], g["count"]) for g in groups] == [
        ("drain", "no_benefit", 10_000),
        ("buy", "no_forecast", 1),
        ("drain", "budget_exhausted", 1),
    ]
    top = groups[0]
    assert len(top["rows"]) == 50 and top["more"] == 9_950
    assert [r["target"] for r in top["rows"][:3]] == ["n09999", "n09998", "n09997"]
    assert top["rows"][0]["p_fail"] == 9_999 / 20_000
    assert groups[1]["rows"][0]["p_fail"] is None  # not a node: no risk to rank by
    assert sum(g["count"] for g in groups) == len(skips)  # nothing dropped from the counts


def test_alerts_read_in_words_with_what_to_do() -> None:
    from predops.serving.dashboards.plans import alert_view

    a = alert_view("failure risk: scored at 2026-05-01T12:00:00+00:00, 3 h old — planned")
    assert a["text"] == (
        'failure risk: scored at <time datetime="2026-05-01T12:00:00Z">2026-05-01 12:00 UTC'
        "</time>, 3 h old — planned"
    )
    assert "&lt;b&gt;" in alert_view("storm breaker: pool <b> at 2026-05-01T12:00Z")["text"]
    assert "predops score failure" in a["advice"]
    assert "+00:00" not in alert_view("buy a100@eu: forecasts reach 2026-05-03T00:00Z")["text"]
    assert alert_view("something new")["advice"] == ""
    paused = alert_view(
        "slow start: signal xid_errors still paused since 2026-05-01T12:00:00+00:00"
    )
    assert "2026-05-01 12:00 UTC" in paused["text"] and "probe drain" in paused["advice"]


def test_evidence_numbers_read_as_numbers_with_cost_units() -> None:
    from predops.serving.dashboards.router import _env

    html = _env.from_string('{% from "macros.html" import evidence %}{{ evidence(ev) }}').render(
        ev={"expected_cost": 200.6412, "p_fail": 0.004123, "nodes": 864.0}
    )
    assert "200.6 <span" in html and "GPU-h equivalent" in html
    assert ">0.00412<" in html and "864.0" not in html
    assert '>864 <span class="unit">nodes</span>' in html  # every figure with its unit
