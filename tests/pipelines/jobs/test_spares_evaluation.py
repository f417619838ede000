"""``predops eval spares`` end to end: windows in order, knobs from validation only."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from predops.pipelines.jobs import spares_evaluation as se


def _alpine(path: Path, weeks: int, seed: int, burst_week: int | None = None) -> Path:
    rng = np.random.default_rng(seed)
    t0 = datetime(2019, 1, 7, 12, tzinfo=UTC)  # a Monday
    lines = [
        ",Timestamp,SSC,SSU,Enclosure,Slot,Seagate slot,Rack unit,Unique enclosure,Rack id,"
        "slot bin hor,slot bin ver"
    ]
    events = [
        (w, int(rng.integers(0, 100))) for w in range(weeks) for _ in range(int(rng.poisson(5)))
    ]
    if burst_week is not None:  # appended: the other weeks keep their draws
        events += [(burst_week, h) for h in range(40)]
    for i, (w, h) in enumerate(sorted(events)):
        ts = (t0 + timedelta(weeks=w, hours=h)).strftime("%Y-%m-%dT%H:%M:%S+0000")
        lines.append(f"{i},{ts},{1 + i % 4},a,{1 + i % 3},{1 + i % 50},0,1,1,1,1,1")
    f = path / "alpine_formatted_data.csv"
    f.write_text("\n".join(lines) + "\n")
    return f


def test_windows_and_rules(tmp_path: Path) -> None:
    f = _alpine(tmp_path, 130, seed=1)
    r = se.evaluate_spares("olcf-disk", str(f), lead_weeks=3, test_weeks=40)
    assert r["selection"]["window"]["to"] == r["test"]["from"]
    assert r["selection"]["window"]["from"] < r["test"]["from"]
    assert set(r["test"]["totals"]) == {
        "forecast",
        "forecast_unbudgeted",
        "poisson",
        "fixed",
        "forecast_reference",
    }
    assert r["rules"]["forecast"]["budgeted"] is True
    assert r["rules"]["forecast_unbudgeted"]["budgeted"] is False
    # One population: the budget is its fixed level, 30 units (below).
    assert r["budget"]["test_units"] == 30.0
    assert r["installed_base"]["fixed_share"] == 0.05
    fixed = r["test"]["per_group"]["alpine"]["fixed"]
    # 12 enclosures (4 SSC x 3 enclosures) x 50 slots, 5 % -> 30 units, constant.
    assert fixed["level_mean"] == 30.0
    assert r["input"]["rows"] == sum(1 for _ in f.open()) - 1


def test_choice_ignores_the_test_window(tmp_path: Path) -> None:
    """A burst inside the test window changes test figures, never the chosen knobs."""
    a = se.evaluate_spares("olcf-disk", str(_alpine(tmp_path, 130, seed=2)), test_weeks=40)
    burst = tmp_path / "b"
    burst.mkdir()
    b = se.evaluate_spares(
        "olcf-disk", str(_alpine(burst, 130, seed=2, burst_week=120)), test_weeks=40
    )
    assert a["rules"] == b["rules"]
    assert a["selection"] == b["selection"]
    assert b["test"]["demand"] == a["test"]["demand"] + 40


def _fleet_input(weeks: int, nodes: dict[str, float]) -> se.SparesInput:
    rng = np.random.default_rng(11)
    counts = {g: rng.poisson(n / 100, size=weeks).astype(np.int64) for g, n in nodes.items()}
    counts["b"][[40, 70]] += 25  # batches in one group only
    return se.SparesInput(
        "lanl",
        counts,
        first_week=1500,
        active={g: (0, weeks) for g in nodes},
        base=lambda g, t: nodes[g],
        base_how="test",
        info={},
    )


def test_budgeted_rule_spends_at_most_the_fixed_rules_total() -> None:
    data = _fleet_input(120, {"a": 600.0, "b": 300.0, "c": 40.0})
    rules = {
        "fixed": se.Rule("fixed"),
        "budgeted": se.Rule("forecast", service=0.999, budgeted=True, dispersion="pooled"),
        "free": se.Rule("forecast", service=0.999, dispersion="pooled"),
    }
    w = se.run_window(data, rules, 80, 120, 4, 0.05)
    groups = w["per_group"].values()
    # 5 % of 600, 300 and 40 nodes: 30 + 15 + 2 units, the budget every week.
    assert w["budget_units"] == 47.0
    assert sum(v["fixed"]["level_mean"] for v in groups) == 47.0
    b = w["budgeted"]["budgeted"]
    assert b["binding_weeks"] > 0 and b["level_total_mean"] <= 47.0
    assert sum(v["budgeted"]["level_mean"] for v in groups) <= 47.0
    assert sum(v["free"]["level_mean"] for v in groups) > 47.0  # so the budget binds
    loose = se.run_window(data, rules, 80, 120, 4, 1.0)  # 100 %: the budget never binds
    assert loose["budgeted"]["budgeted"]["binding_weeks"] == 0
    assert loose["totals"]["budgeted"] == loose["totals"]["free"]


def test_grid_names_are_unique() -> None:
    grid = se._grid()
    n = len(se.SERVICE_GRID)
    assert len(grid) == 1 + n + 2 * len(se.DISPERSION_GRID) * len(se.HALF_LIFE_GRID) * n
    assert all(se._key(r) == k for k, r in grid.items() if r.kind != "fixed")
    assert max(se.SERVICE_GRID) < 1


def test_too_short_and_bad_knobs(tmp_path: Path) -> None:
    f = str(_alpine(tmp_path, 60, seed=3))
    with pytest.raises(ValueError, match="too few"):
        se.evaluate_spares("olcf-disk", f, test_weeks=20)
    for kw, field in (
        ({"lead_weeks": 0}, "lead_weeks"),
        ({"test_weeks": 0}, "test_weeks"),
        ({"fixed_share": 1.5}, "fixed_share"),
    ):
        with pytest.raises(ValueError, match=field):
            se.evaluate_spares("olcf-disk", f, **kw)
    with pytest.raises(ValueError, match="source"):
        se.evaluate_spares("backblaze", f)


def test_real_sources_report_every_rule(shared_data: Path) -> None:
    r = se.evaluate_spares("olcf-disk", str(shared_data / "hpc-disk-failures"))
    assert r["input"]["rows"] == 3766 and r["input"]["quarantined"]["rows"] == 0
    for name in ("forecast", "poisson", "fixed"):
        tot = r["test"]["totals"][name]
        assert tot["stock_out_weeks"] >= 0 and tot["spares_held_mean"] >= 0
    assert isinstance(r["bar"]["met"], bool)


def test_cli_json_and_clear_error(tmp_path: Path) -> None:
    import json

    from click.testing import CliRunner

    from predops.pipelines.cli.main import main

    f = _alpine(tmp_path, 130, seed=4)
    args = ["--workspace", str(tmp_path / "ws"), "eval", "spares", "--source", "olcf-disk"]
    res = CliRunner().invoke(main, [*args, "--path", str(f), "--test-weeks", "40", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["lead_weeks"] == 4 and set(out["bar"]) >= {"met"}
    bad = CliRunner().invoke(main, [*args, "--path", str(tmp_path / "nothing"), "--json"])
    assert bad.exit_code != 0
    assert "no such file" in bad.output
