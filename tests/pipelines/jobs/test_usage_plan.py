"""The usage model and the loans wired into the plan: ``predops.usage`` trained from
the lake and served into ``plan_in_workspace`` (``set_reclaimable`` per node with its
evidence), the loans read back from the cluster or the audit log (a loan past its
expiry comes back as ``return_nodes``), ``predops apply`` dry-run listing them and
``--execute`` running them through their actuators on the fake API server, with every
call in the deployed RBAC."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from predops.core.actions import LendNodes, Plan, ReturnNodes
from predops.core.clock import FixedClock
from predops.pipelines.actuators.lending import LENT_FROM, LENT_TO, LENT_UNTIL
from predops.pipelines.actuators.reclaim import BATCH_CPU, RECLAIM_ANNOTATION
from predops.pipelines.jobs import usage as usage_jobs
from predops.pipelines.jobs.plan import plan_in_workspace
from predops.pipelines.jobs.sharing_state import SharingState, from_audit, from_cluster
from predops.pipelines.synthetic.run import SimConfig, simulate_to_lake
from predops.pipelines.workspace.audit import AuditLog
from predops.pipelines.workspace.lake import Lake
from predops.pipelines.workspace.plans import write_plan
from predops.pipelines.workspace.settings import Settings
from predops.policy.lending import Loan
from tests.fakes.kube_api import FakeKubeAPI
from tests.fakes.kube_objects import make_node, write_kubeconfig
from tests.pipelines.actuators.conftest import assert_role_grants

START = datetime(2026, 3, 2, tzinfo=UTC)
DAYS = 4
SMALL = {"n_estimators": 15, "n_jobs": 1, "max_train_rows": 20_000, "min_child_samples": 20}


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A simulated lake (10 nodes x 4 days at 5 minutes) with ``predops.usage`` trained."""
    ws = tmp_path_factory.mktemp("usage_ws")
    cfg = SimConfig(nodes=10, days=DAYS, interval=timedelta(minutes=5), seed=5, start=START)
    simulate_to_lake(Lake(ws / "lake"), cfg, clock=FixedClock(END), progress=False)
    report = usage_jobs.train(settings_for(ws), params=SMALL)
    assert report["version"] == "1"
    return ws


END = START + timedelta(days=DAYS)


def settings_for(ws: Path) -> Settings:
    return Settings(workspace=ws, shared_data=ws / "no-shared-data")


@pytest.fixture
def ws(trained: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    out = tmp_path / "ws"
    shutil.copytree(trained, out)
    return out


def plan_at(ws: Path, now: datetime, sharing: SharingState | None = None) -> dict:
    return plan_in_workspace(settings_for(ws), now, who="t", clock=FixedClock(now), sharing=sharing)


def now_of(ws: Path) -> datetime:
    last = Lake(ws / "lake").latest_time("telemetry")
    assert last is not None
    return last + timedelta(minutes=5)


def inventory(ws: Path) -> pl.DataFrame:
    inv = Lake(ws / "lake").scan("inventory").collect().sort("ts")
    return inv.group_by("node_id").agg(pl.col("pool").last(), pl.col("cpu_milli").last())


def test_train_registers_the_usage_model_with_its_holdout(trained: Path) -> None:
    from predops.pipelines.workspace import registry

    (m,) = [
        x
        for x in registry.list_models(uri=settings_for(trained).mlflow_uri)
        if x["name"] == "predops.usage"
    ]
    assert [v["version"] for v in m["versions"]] == ["1"]
    model, version, prov = registry.load_python_model("usage", uri=settings_for(trained).mlflow_uri)
    assert version == "1" and prov.model_name == "predops.usage"
    assert model.memory is not None  # the simulated telemetry has mem_used_bytes
    assert model.window == usage_jobs.WINDOW


def test_plan_sets_reclaimable_capacity_from_the_usage_forecasts(ws: Path) -> None:
    now = now_of(ws)
    report = plan_at(ws, now, SharingState("test"))
    note = report["inputs"]["usage_forecasts"]
    assert note["status"] == "ok" and note["model"] == "predops.usage" and note["version"] == "1"
    inv = inventory(ws)
    assert note["nodes"] == inv.height
    reclaim = [a for a in report["actions"] if a["kind"] == "set_reclaimable"]
    skips = [s for s in report["skips"] if s["kind"] == "set_reclaimable"]
    assert len(reclaim) + len(skips) == inv.height  # every node once, action or skip
    cores = dict(zip(inv["node_id"], (inv["cpu_milli"] / 1000).to_list(), strict=True))
    live = [a for a in reclaim if "withheld" not in a["evidence"]]
    assert live, [a["evidence"] for a in reclaim]
    for a in live:
        ev = a["evidence"]
        assert ev["allocatable_cores"] == cores[a["target"]]
        assert ev["window_h"] == usage_jobs.WINDOW.total_seconds() / 3600
        assert ev["bound"] in {"forecast", "unused_now", "max_share"}
        assert {"peak_cores", "used_now_cores", "forecast_as_of", "margin_cores"} <= set(ev)
        milli = a["params"]["cpu_milli"]
        # never above what is unused now, nor above allocatable - the forecast peak
        unused = ev["allocatable_cores"] - ev["used_now_cores"] - ev["margin_cores"]
        peak_room = ev["allocatable_cores"] - ev["peak_cores"] - ev["margin_cores"]
        assert milli <= max(0, unused * 1000 + 1) and milli <= max(0, peak_room * 1000 + 1)
        assert a["params"]["memory_bytes"] is not None
    assert any(p["model_name"] == "predops.usage" for p in report["provenance"])


def test_a_published_value_is_not_rewritten_and_a_rise_shrinks_it(ws: Path) -> None:
    now = now_of(ws)
    first = plan_at(ws, now, SharingState("test"))
    (a, *_) = [x for x in first["actions"] if x["kind"] == "set_reclaimable"]
    same = {a["target"]: (a["params"]["cpu_milli"], a["params"]["memory_bytes"])}
    again = plan_at(ws, now, SharingState("test", published=same))
    assert a["target"] not in {x["target"] for x in again["actions"] if x["kind"] == a["kind"]}
    more = {a["target"]: (a["params"]["cpu_milli"] + 10_000, a["params"]["memory_bytes"])}
    shrink = plan_at(ws, now, SharingState("test", published=more))
    (s,) = [x for x in shrink["actions"] if x["kind"] == a["kind"] and x["target"] == a["target"]]
    assert s["params"]["cpu_milli"] == a["params"]["cpu_milli"] and "shrunk from" in s["reason"]


def test_a_loan_past_its_expiry_comes_back(ws: Path) -> None:
    now = now_of(ws)
    inv = inventory(ws)
    node, pool = inv["node_id"][0], inv["pool"][0]
    loans = (
        Loan(node, pool, "night", now - timedelta(minutes=1)),
        Loan(inv["node_id"][1], pool, "night", now + timedelta(hours=3)),
    )
    report = plan_at(ws, now, SharingState("k", loans))
    (back,) = [a for a in report["actions"] if a["kind"] == "return_nodes"]
    assert back["target"] == pool and back["params"]["from_pool"] == "night"
    assert back["params"]["node_ids"] == [node]  # the loan still running stays
    assert "loan expired" in back["reason"]
    assert report["inputs"]["sharing"] == {
        "source": "k",
        "loans": 2,
        "loans_due": 1,
        "nodes_publishing": 0,
        "notes": [],
    }


def test_without_a_usage_model_the_plan_says_so_and_sets_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    ws = tmp_path / "bare"
    cfg = SimConfig(nodes=4, days=1, interval=timedelta(minutes=5), seed=5, start=START)
    simulate_to_lake(Lake(ws / "lake"), cfg, clock=FixedClock(END), progress=False)
    now = now_of(ws)
    report = plan_at(ws, now)
    assert report["inputs"]["usage_forecasts"]["status"] == "missing"
    assert not [a for a in report["actions"] if a["kind"] == "set_reclaimable"]
    assert report["inputs"]["sharing"]["source"] == "audit_log"


def test_loans_and_published_values_read_back_from_the_nodes() -> None:
    until = END + timedelta(hours=2)
    lent = make_node("a", pool="night")
    lent["metadata"]["annotations"] = {
        LENT_FROM: "day",
        LENT_TO: "night",
        LENT_UNTIL: until.isoformat(),
        RECLAIM_ANNOTATION: json.dumps({"cpu_milli": 1500, "memory_bytes": None}),
    }
    broken = make_node("b", pool="day")
    broken["metadata"]["annotations"] = {LENT_FROM: "day", LENT_UNTIL: "soon"}
    state = from_cluster([lent, broken, make_node("c", pool="day")])
    assert state.loans == (Loan("a", "day", "night", until),)
    assert dict(state.published) == {"a": (1500, None)}
    assert state.source == "kubernetes"


def test_loans_from_the_audit_log_open_at_a_done_lend_and_close_at_its_return(
    tmp_path: Path,
) -> None:
    audit = AuditLog(tmp_path / "audit.jsonl", who="t")
    until = END + timedelta(hours=5)
    lend = LendNodes(
        target="day",
        to_pool="night",
        nodes=2,
        node_ids=("a", "b"),
        reason="r",
        not_before=END,
        expires=until,
    )
    plan = Plan(plan_id="plan-lend", created_at=END, data_cutoff=END, actions=(lend,))
    write_plan(tmp_path / "plans", plan)

    def done(action: LendNodes | ReturnNodes, plan_id: str, outcome: str = "done") -> None:
        what = {"kind": action.kind, "target": action.target, "params": action.to_dict()["params"]}
        audit.append(
            at=END,
            outcome=outcome,
            what=what,
            why="t",
            key=action.idempotency_key,
            plan_id=plan_id,
            mode="execute",
        )

    done(lend, "plan-lend", "would_run")  # a dry-run opens nothing
    assert from_audit(audit, tmp_path / "plans").loans == ()
    done(lend, "plan-lend")
    state = from_audit(audit, tmp_path / "plans")
    assert state.loans == (Loan("a", "day", "night", until), Loan("b", "day", "night", until))
    ret = ReturnNodes(target="day", from_pool="night", node_ids=("a",), reason="r")
    done(ret, "plan-back")
    assert from_audit(audit, tmp_path / "plans").loans == (Loan("b", "day", "night", until),)


def _cluster_of(ws: Path, now: datetime, lent: str, lender: str) -> list[dict]:
    nodes = []
    for node_id, pool, milli in inventory(ws).iter_rows():
        n = make_node(node_id, pool=pool, cpu=str(milli // 1000))
        if node_id == lent:
            n = make_node(node_id, pool="night", cpu=str(milli // 1000))
            n["metadata"]["annotations"] = {
                LENT_FROM: lender,
                LENT_TO: "night",
                LENT_UNTIL: (now - timedelta(minutes=10)).isoformat(),
            }
        nodes.append(n)
    return nodes


def test_plan_and_apply_against_the_cluster_end_to_end(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from predops.pipelines.cli.main import main

    monkeypatch.setenv("PREDOPS_OPERATOR", "wire-test")
    now = now_of(ws)
    inv = inventory(ws)
    lent, lender = inv["node_id"][0], inv["pool"][0]
    with FakeKubeAPI(nodes=_cluster_of(ws, now, lent, lender)) as fake:
        kc = str(write_kubeconfig(tmp_path / "kubeconfig", fake.url))
        base = ["--workspace", str(ws)]
        run = CliRunner().invoke(
            main, [*base, "plan", "--at", now.isoformat(), "--kubeconfig", kc, "--json"]
        )
        assert run.exit_code == 0, run.output
        report = json.loads(run.output)
        assert report["inputs"]["sharing"]["source"] == "kubernetes"
        kinds = {a["kind"] for a in report["actions"]}
        assert {"set_reclaimable", "return_nodes"} <= kinds, report["summary"]
        pid = report["plan_id"]
        at = ["--at", now.isoformat(), "--kubeconfig", kc, "--json"]
        dry = CliRunner().invoke(main, [*base, "apply", pid, *at])
        assert dry.exit_code == 0, dry.output
        rows = json.loads(dry.output)["actions"]
        shown = {(r["kind"], r["outcome"]) for r in rows}
        assert ("set_reclaimable", "would_run") in shown and ("return_nodes", "would_run") in shown
        assert not fake.seen("PATCH", f"/api/v1/nodes/{lent}")
        assert CliRunner().invoke(main, [*base, "approve", pid]).exit_code == 0
        run = CliRunner().invoke(main, [*base, "apply", pid, *at, "--execute"])
        assert run.exit_code == 0, run.output
        done = {
            (r["kind"], r["target"])
            for r in json.loads(run.output)["actions"]
            if r["outcome"] == "done"
        }
        assert ("return_nodes", lender) in done
        back = fake.node(lent)
        assert LENT_FROM not in (back["metadata"].get("annotations") or {})
        live = [
            a
            for a in report["actions"]
            if a["kind"] == "set_reclaimable" and "withheld" not in a["evidence"]
        ]
        for a in live:
            node = fake.node(a["target"])
            assert node["status"]["allocatable"][BATCH_CPU] == f"{a['params']['cpu_milli']}"
        assert_role_grants(
            fake,
            {
                ("", "nodes", "list"),
                ("", "nodes", "get"),
                ("", "nodes", "patch"),
                ("", "nodes/status", "patch"),
            },
        )
    # the next plan, from the audit log alone, knows the loan is closed and the values
    later = plan_at(ws, now)
    assert later["inputs"]["sharing"]["source"] == "audit_log"
    assert later["inputs"]["sharing"]["loans"] == 0
    assert later["inputs"]["sharing"]["nodes_publishing"] >= len(live)


def test_promotion_judges_the_usage_challenger_on_the_holdout(ws: Path) -> None:
    from predops.pipelines.jobs.promotion import promote

    report = usage_jobs.train(settings_for(ws), seed=1, params={**SMALL, "n_estimators": 5})
    assert report["version"] == "2" and isinstance(report["backtest"], dict)
    assert report["metrics"]["backtest_pinball"] == report["backtest"]["loss"] > 0
    decision = promote("usage", settings_for(ws))
    assert decision["metric"] == "pinball" and decision["model"] == "predops.usage"
    assert "challenger pinball" in decision["reason"]
    assert decision["champion_after"] == ("2" if decision["promoted"] else "1")
