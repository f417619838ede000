"""``predops plan --json`` / ``predops apply`` on a simulated workspace."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner

from predops.core.clock import FixedClock
from predops.core.contracts import FailureRisk, Forecast, Provenance, Reason
from predops.pipelines.cli.main import main
from predops.pipelines.ingest.batch import Batch
from predops.pipelines.ingest.run import ingest
from predops.pipelines.jobs import plan as plan_jobs
from predops.pipelines.synthetic.run import SimConfig, simulate_to_lake
from predops.pipelines.workspace.lake import Lake

START = datetime(2026, 1, 5, tzinfo=UTC)
AT = START + timedelta(days=2) - timedelta(minutes=30)  # the last telemetry sample


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 40-node, 2-day simulated fleet, plus operations events: node-00003 cordoned by
    predops and since repaired, node-00004 cordoned by a human."""
    ws = tmp_path_factory.mktemp("ws")
    lake = Lake(ws / "lake")
    cfg = SimConfig(nodes=40, days=2, interval=timedelta(minutes=30), seed=3, start=START)
    simulate_to_lake(lake, cfg, clock=FixedClock(AT + timedelta(hours=1)), progress=False)
    ops = pl.DataFrame(
        {
            "node_id": ["node-00003", "node-00003", "node-00004"],
            "kind": ["cordon", "repair", "cordon"],
            "at": [AT - timedelta(hours=30), AT - timedelta(hours=2), AT - timedelta(hours=20)],
            "cause": ["predops", None, "human"],
            "detail": ["test", "fan replaced", "kernel upgrade"],
        },
        schema_overrides={"at": pl.Datetime("us", "UTC")},
    )
    ingest(
        lake,
        "ops",
        [Batch("events", ops)],
        clock=FixedClock(AT),
        input_name="ops-events",
        check_entities=False,
    )
    return ws


def _run(ws: Path, *args: str) -> tuple[int, dict[str, Any]]:
    res = CliRunner().invoke(main, ["--workspace", str(ws), *args], catch_exceptions=False)
    lines = [ln for ln in res.stdout.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stdout  # exactly one JSON object on stdout
    return res.exit_code, json.loads(lines[0])


def test_plan_json_shows_actions_skips_and_missing_models(workspace: Path) -> None:
    code, out = _run(workspace, "plan", "--at", AT.isoformat(), "--json")
    assert code == 0
    (uncordon,) = [a for a in out["actions"] if a["kind"] == "uncordon"]
    assert uncordon["target"] == "node-00003" and "repair finished" in uncordon["reason"]
    assert uncordon["idempotency_key"].startswith("uncordon:node-00003:")
    assert uncordon["evidence"]["repaired_at"].startswith("2026-01-06")
    human = [s for s in out["skips"] if s["target"] == "node-00004"]
    assert human == [
        {
            "kind": "uncordon",
            "target": "node-00004",
            "reason": "not_owned",
            "detail": "cordoned by human, not by us",
        }
    ]
    # No model registry: planned with no risk and no forecast, and said so.
    assert out["inputs"]["failure_risk"]["status"] == "missing"
    assert out["inputs"]["forecasts"]["status"] == "missing"
    assert not [a for a in out["actions"] if a["kind"] == "drain"]
    assert any("failure risk" in a for a in out["alerts"])
    assert {s["reason"] for s in out["skips"] if s["kind"] == "resize_pool"} == {"no_forecast"}
    assert out["inputs"]["fleet"]["nodes"] == 40 and out["inputs"]["fleet"]["cordoned"] == 2
    # The plan file holds the same plan, and the audit log says it was made.
    saved = json.loads(Path(out["plan_file"]).read_text())
    assert saved["plan_id"] == out["plan_id"] and saved["actions"] == out["actions"]
    audit = [json.loads(x) for x in (workspace / "audit.jsonl").read_text().splitlines()]
    assert [(e["outcome"], e["plan_id"]) for e in audit][-1] == ("planned", out["plan_id"])


def _stand_in_failure_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in for ``predops.pipelines.jobs.failure`` held to the contract
    ``current_risk(settings, *, now)``, so the risks are exact (the real module is
    exercised end to end in ``tests/pipelines/jobs/test_failure.py``): node-00035 and
    node-00030 at 0.97, node-00036 at 0.01; no demand forecasts."""
    prov = Provenance("predops.node_failure", "4", "fs-test", AT - timedelta(hours=1))

    def current_risk(settings: Any, *, now: datetime) -> list[FailureRisk]:
        reason = Reason("ecc_dbe_total__delta_6h", 0.8, "3 new double-bit ECC errors")
        return [
            FailureRisk(n, now, timedelta(hours=24), p, (reason,), prov)
            for n, p in (("node-00035", 0.97), ("node-00030", 0.97), ("node-00036", 0.01))
        ]

    monkeypatch.setattr(plan_jobs.failure_jobs, "current_risk", current_risk)
    monkeypatch.setattr(plan_jobs, "_has_registry", lambda settings: True)
    monkeypatch.setattr(
        plan_jobs,
        "demand_forecasts",
        lambda s, horizon="hourly": ([], {"status": "missing", "note": "test"}),
    )


def test_plan_with_a_failure_model_proposes_drains_with_evidence(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _stand_in_failure_model(monkeypatch)
    code, out = _run(workspace, "plan", "--at", AT.isoformat(), "--json")
    assert code == 0 and out["inputs"]["failure_risk"] == {"status": "ok", "nodes_scored": 3}
    drains = {a["target"]: a for a in out["actions"] if a["kind"] == "drain"}
    skips = {s["target"]: s for s in out["skips"] if s["kind"] == "drain"}
    assert set(drains) == {"node-00035"} and set(skips) == {"node-00030", "node-00036"}
    ev = drains["node-00035"]["evidence"]
    assert ev["risk"]["p_fail"] == 0.97 and ev["risk"]["provenance"]["model_version"] == "4"
    assert ev["risk"]["top_reasons"][0]["feature"] == "ecc_dbe_total__delta_6h"
    assert ev["allocator"]["fits"] is True and len(ev["pods"]) == len(ev["allocator"]["moves"])
    assert ev["economics"]["expected_benefit"] > ev["economics"]["drain_cost"]
    # node-00030's spine already has the two cordoned nodes its 10 % budget allows.
    assert skips["node-00030"]["reason"] == "budget_exhausted"
    assert skips["node-00030"]["detail"].startswith("spine ")
    assert skips["node-00036"]["reason"] == "below_threshold"
    assert out["budgets_used"] == {
        "pool:inference": 1,
        "rack:rg-1/rg-1b/rg-1b-sp01/rg-1b-sp01-rk03": 1,
        "spine:rg-1/rg-1b/rg-1b-sp01": 1,
    }
    assert out["provenance"][0]["model_name"] == "predops.node_failure"
    # slow-start pacing: its state goes to the workspace for the next round, the drain
    # in flight in it, and the plan carries the same state
    assert out["inputs"]["pacing"]["drains_in_flight"] >= 1
    state = json.loads((workspace / "policy" / "pacing.json").read_text())
    assert "node-00035" in state["in_flight"] and out["pacing"] == state


def test_plan_without_forecasts_skips_every_stocked_sku_and_shows_the_stock(
    workspace: Path,
) -> None:
    """The simulated lake's stock table reaches the planner: one buy candidate per SKU
    and region, each a typed skip, the positions and the window a buy needs in inputs."""
    _, out = _run(workspace, "plan", "--at", AT.isoformat(), "--json")
    stock = out["inputs"]["fleet"]["stock"]
    skus = {f"{p['sku']}@{p['region']}" for p in stock["positions"]}
    assert len(skus) == 5 and stock["purchase_orders_open"] == 1
    assert sum(p["in_use"] + p["in_repair"] for p in stock["positions"]) == 40
    buys = {s["target"]: s for s in out["skips"] if s["kind"] == "buy"}
    assert set(buys) == skus
    assert {s["reason"] for s in buys.values()} == {"no_forecast"}
    h800 = out["inputs"]["buy_forecasts"]["gpu-h800-8x@rg-1"]
    assert h800["needed_from"] == (AT + timedelta(days=84)).isoformat()
    assert h800["note"] == ("no forecast of rg-1/gpu-h800-8x/nodes (read from training/gpus/H800)")


def _weekly(series: str, p10: float, p50: float, p90: float) -> list[Forecast]:
    """A stand-in weekly (procurement) forecast of ``series``: 26 weeks from AT."""
    prov = Provenance("predops.demand.weekly", "2", "fs-weekly", AT - timedelta(hours=1))
    week = timedelta(weeks=1)
    return [
        Forecast(series, AT - timedelta(hours=1), AT + k * week, p10, p50, p90, "weekly", prov)
        for k in range(1, 27)
    ]


def test_plan_with_weekly_forecasts_proposes_a_buy_with_its_numbers(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stand-in weekly forecasts of two GPU series (in GPUs): H800 demand of 56 GPUs
    (7 nodes) exceeds 4 nodes in use + 1 spare -> buy one rack of 4; A100 demand of 64
    GPUs (8 nodes) is covered by 8 in use + 1 spare + the open order of 4."""
    fc = _weekly("training/gpus/H800", 40.0, 56.0, 80.0)
    fc += _weekly("training/gpus/A100-SXM4-80GB", 60.0, 64.0, 72.0)
    # The weekly (procurement) model answers; the hourly one is not registered.
    monkeypatch.setattr(
        plan_jobs,
        "demand_forecasts",
        lambda s, horizon="hourly": (
            (fc, {"status": "ok"})
            if horizon == "weekly"
            else ([], {"status": "missing", "note": "-"})
        ),
    )
    _, out = _run(workspace, "plan", "--at", AT.isoformat(), "--json")
    (buy,) = [a for a in out["actions"] if a["kind"] == "buy"]
    assert buy["target"] == "gpu-h800-8x" and buy["params"]["region"] == "rg-1"
    assert buy["params"]["quantity"] == 4
    assert buy["params"]["by_date"] == (AT + timedelta(days=84)).date().isoformat()
    ev = buy["evidence"]
    assert ev["series_id"] == "rg-1/gpu-h800-8x/nodes"
    assert (ev["demand_p10"], ev["demand_p50"], ev["demand_p90"]) == (5.0, 7.0, 10.0)
    assert (ev["in_use"], ev["on_hand"], ev["on_order_by_arrival"], ev["in_repair"]) == (4, 1, 0, 0)
    # Default costs: 8 GPU-hours + 192 cores x 0.02 per hour, over the 30-day review period.
    assert ev["shortage_cost"] == pytest.approx((8 + 192 * 0.02) * 720)
    assert ev["critical_ratio"] == 0.8 and ev["lead_time_days"] == 84.0
    assert ev["supply"] < ev["target_stock"] and 0 < ev["gap"] <= 4
    assert ev["provenance"]["model_version"] == "2"
    a100 = [s for s in out["skips"] if s["target"] == "gpu-a100-8x@rg-1"]
    assert [s["reason"] for s in a100] == ["not_needed"]
    # 8 in use + 1 spare + 4 ordered - 0.02 failures lost; 8 + 0.84 x (9 - 8) / 1.28 nodes.
    assert a100[0]["detail"] == "supply 13.0 covers the 80% quantile 8.7"
    covered = out["inputs"]["buy_forecasts"]
    assert covered["gpu-h800-8x@rg-1"]["covered"] and covered["gpu-a100-8x@rg-1"]["covered"]
    assert covered["gpu-a10-8x@rg-1"]["note"].startswith("no forecast of rg-1/gpu-a10-8x/nodes")
    assert any(a.startswith("buy gpu-a10-8x@rg-1: no forecast") for a in out["alerts"])
    # Executed (once approved), the buy becomes a purchase request procurement picks up;
    # the node action without a cluster has no actuator, so the exit status says so.
    assert _run(workspace, "approve", out["plan_id"], "--json")[0] == 0
    code, ex = _run(
        workspace, "apply", out["plan_id"], "--at", AT.isoformat(), "--execute", "--json"
    )
    assert code == 2 and ex["counts"] == {"done": 1, "unsupported": 1}
    assert [p["outcome"] for p in ex["problems"]] == ["unsupported"]
    rows = (workspace / "purchases" / f"{out['plan_id']}.csv").read_text().splitlines()
    assert len(rows) == 2 and ",gpu-h800-8x,rg-1,4," in rows[1]


def test_apply_dry_run_revalidates_against_the_lake_and_audits(workspace: Path) -> None:
    _, planned = _run(workspace, "plan", "--at", AT.isoformat(), "--json")
    code, out = _run(workspace, "apply", planned["plan_id"], "--at", AT.isoformat(), "--json")
    assert code == 0 and out["mode"] == "dry_run" and out["state"] == "lake"
    by = {(a["kind"], a["target"]): a for a in out["actions"]}
    assert by[("uncordon", "node-00003")]["outcome"] == "would_run"
    # Executing without a cluster: node actions have no actuator, nothing is marked done,
    # and the exit status is not 0.
    assert _run(workspace, "approve", planned["plan_id"], "--json")[0] == 0
    code, ex = _run(
        workspace, "apply", planned["plan_id"], "--at", AT.isoformat(), "--execute", "--json"
    )
    assert code == 2 and ex["counts"] == {"unsupported": 1}
    audit = [json.loads(x) for x in (workspace / "audit.jsonl").read_text().splitlines()]
    mine = [e for e in audit if e["plan_id"] == planned["plan_id"]]
    assert [e["outcome"] for e in mine][-3:] == ["would_run", "approved", "unsupported"]
    assert not any(e["outcome"] == "done" for e in mine)


SHARED_CONFIG = """
[scheduler]                 # the scheduler's and the server's sections: left to them
timezone = "UTC"
[server]
port = 9000

[[policy.budgets]]          # tighter than the default 10 % of a pool
scope = "pool"
max_nodes = 0

[policy.disruption]
owner = "predops-east"      # node-00003 was cordoned by "predops": not ours any more
"""


def _run_with(ws: Path, env: Mapping[str, str | None], *args: str) -> tuple[int, dict[str, Any]]:
    res = CliRunner().invoke(main, ["--workspace", str(ws), *args], env=env)
    lines = [ln for ln in res.stdout.splitlines() if ln.strip()]
    assert len(lines) == 1, res.output
    return res.exit_code, json.loads(lines[0])


def test_plan_and_apply_read_policy_from_the_config_file(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``--config`` (or ``$PREDOPS_CONFIG``) sets the budgets and knobs: the tighter pool
    budget turns node-00035's drain into a skip, the other owner leaves node-00003
    cordoned, and both plan and apply record the values they used."""
    _stand_in_failure_model(monkeypatch)
    config = tmp_path / "predops.toml"
    config.write_text(SHARED_CONFIG)
    code, out = _run(workspace, "plan", "--at", AT.isoformat(), "--config", str(config), "--json")
    assert code == 0
    assert not [a for a in out["actions"] if a["kind"] in ("drain", "uncordon")]
    skips = {(s["kind"], s["target"]): s for s in out["skips"]}
    assert skips[("drain", "node-00035")]["reason"] == "budget_exhausted"
    assert skips[("drain", "node-00035")]["detail"].startswith("pool ")
    assert skips[("uncordon", "node-00003")]["reason"] == "not_owned"
    policy = out["inputs"]["policy"]
    assert policy["origin"] == f"{config} [policy]"
    assert policy["budgets"] == [
        {"scope": "pool", "max_nodes": 0, "max_percent": None, "min_nodes": 0, "domain": None}
    ]
    assert policy["disruption"]["owner"] == "predops-east"
    assert policy["disruption"]["min_hold"] == 6 * 3600  # unset keys: the defaults
    saved = json.loads(Path(out["plan_file"]).read_text())
    assert saved["inputs"]["policy"] == policy
    # apply takes the file from $PREDOPS_CONFIG, with an environment override
    env = {"PREDOPS_CONFIG": str(config), "PREDOPS_POLICY__DISRUPTION__BENEFIT_MARGIN": "3"}
    code, applied = _run_with(
        workspace, env, "apply", out["plan_id"], "--at", AT.isoformat(), "--json"
    )
    assert code == 0
    assert applied["policy"]["origin"] == (
        f"{config} [policy] + environment (PREDOPS_POLICY__DISRUPTION__BENEFIT_MARGIN)"
    )
    assert applied["policy"]["budgets"] == policy["budgets"]
    assert applied["policy"]["disruption"]["benefit_margin"] == 3.0
    # without a file: the documented defaults, and said so
    no_file: dict[str, str | None] = {"PREDOPS_CONFIG": None}  # unset, whatever the shell has
    _, default = _run_with(workspace, no_file, "plan", "--at", AT.isoformat(), "--json")
    assert default["inputs"]["policy"]["origin"] == "defaults"
    assert default["inputs"]["policy"]["disruption"]["owner"] == "predops"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[policy.disruption]\nbenefit_margn = 1.0\n", "[policy.disruption] benefit_margn"),
        ("[[policy.budgets]]\nscope = 'rack'\n", "[policy.budgets[0]] max_nodes"),
        ("[polcy]\n", "[polcy]: unknown section"),
    ],
)
def test_plan_refuses_a_bad_policy_naming_the_key(
    workspace: Path, tmp_path: Path, text: str, needle: str
) -> None:
    config = tmp_path / "predops.toml"
    config.write_text(text)
    code, out = _run_with(workspace, {}, "plan", "--config", str(config), "--json")
    assert code == 1 and needle in out["error"] and str(config) in out["error"]
    code, out = _run_with(
        workspace, {"PREDOPS_CONFIG": str(tmp_path / "none.toml")}, "plan", "--json"
    )
    assert code == 1 and "no such configuration file" in out["error"]


def test_apply_of_an_unknown_plan_says_so(workspace: Path) -> None:
    res = CliRunner().invoke(main, ["--workspace", str(workspace), "apply", "plan-x", "--json"])
    assert res.exit_code == 1
    assert "no plan file" in json.loads(res.stdout.splitlines()[0])["error"]


@pytest.mark.slow
def test_apply_while_another_apply_holds_the_lock_says_so(workspace: Path) -> None:
    from predops.pipelines.actuators.apply import apply_lock

    _, planned = _run(workspace, "plan", "--at", AT.isoformat(), "--json")
    with apply_lock(workspace / "audit.jsonl.lock"):
        code, out = _run(workspace, "apply", planned["plan_id"], "--at", AT.isoformat(), "--json")
    assert code == 1 and out["type"] == "LockHeld" and "another apply holds" in out["error"]


def test_plan_buys_from_a_real_weekly_demand_model(tmp_path: Path) -> None:
    """End to end, no stand-ins: 150 simulated days (enough weekly history for the
    procurement configuration), both demand models trained and registered side by side,
    then ``predops plan``: pools sized from the hourly model, every stocked SKU bought or
    skipped as not needed from the weekly one, each buy with the numbers that produced
    it and the weekly model's version."""
    ws = tmp_path / "ws"
    start, days = datetime(2026, 1, 5, tzinfo=UTC), 150
    at = start + timedelta(days=days) - timedelta(hours=1)
    cfg = SimConfig(nodes=30, days=days, interval=timedelta(hours=1), seed=5, start=start)
    simulate_to_lake(Lake(ws / "lake"), cfg, clock=FixedClock(at), progress=False)
    code, trained = _run(
        ws, "train", "demand", "--config", "weekly", "--backtest-cutoffs", "0", "--json"
    )
    assert code == 0 and trained["config"] == "weekly"
    code, hourly = _run(ws, "train", "demand", "--backtest-cutoffs", "0", "--json")
    assert code == 0 and hourly["model"] == "predops.demand.hourly"
    code, out = _run(ws, "plan", "--at", at.isoformat(), "--json")
    assert code == 0
    sizing, buying = out["inputs"]["forecasts"], out["inputs"]["buy_forecast_model"]
    assert (sizing["model"], sizing["version"]) == ("predops.demand.hourly", "1")
    assert (buying["model"], buying["version"]) == ("predops.demand.weekly", "1")
    assert not any("demand forecast" in a or "buy forecast" in a for a in out["alerts"])
    coverage = out["inputs"]["buy_forecasts"]
    assert len(coverage) == 5 and all(c["covered"] for c in coverage.values())
    positions = {
        f"{p['sku']}@{p['region']}": p for p in out["inputs"]["fleet"]["stock"]["positions"]
    }
    buys = {
        f"{a['target']}@{a['params']['region']}": a for a in out["actions"] if a["kind"] == "buy"
    }
    skips = {s["target"]: s for s in out["skips"] if s["kind"] == "buy"}
    assert buys and set(buys) | set(skips) == set(positions) and not set(buys) & set(skips)
    assert {s["reason"] for s in skips.values()} <= {"not_needed"}
    for key, buy in buys.items():
        pos, ev = positions[key], buy["evidence"]
        assert buy["params"]["quantity"] % pos["order_multiple"] == 0
        assert buy["params"]["quantity"] >= ev["gap"] > 0
        assert ev["lead_time_days"] == pos["lead_time_days"]
        by = datetime.fromisoformat(out["created_at"]) + timedelta(days=pos["lead_time_days"])
        assert buy["params"]["by_date"] == by.date().isoformat()
        assert (ev["in_use"], ev["on_hand"]) == (pos["in_use"], pos["on_hand"])
        assert ev["demand_p10"] <= ev["demand_p50"] <= ev["demand_p90"]
        assert ev["provenance"]["model_name"] == "predops.demand.weekly"
        assert ev["provenance"]["model_version"] == trained["version"]
