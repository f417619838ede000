"""The injected-fault scenarios of ``benchmarks/bench_reliability.py`` (no server needed).

Each scenario injects its faults the way ``tests/reliability/`` does (it reuses their
helpers and fakes: a local Prometheus-like server, the fake Kubernetes API, a real tmpfs,
a real SQLite lock, a real SIGKILL) and returns what was tried, figures, and ``lost``:
counters that must all be 0 (rows lost, partial files, actions run twice, ...).
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

Scenario = Callable[[Path], dict[str, Any]]


def _changed(before: dict[str, str], after: dict[str, str]) -> int:
    """Files added, removed or rewritten between two digests."""
    return sum(before.get(k) != v for k, v in after.items()) + sum(k not in after for k in before)


def prometheus(tmp: Path) -> dict[str, Any]:
    """Prometheus unreachable, going down, answering 500, or slower than the timeout in
    the middle of ``predops ingest prometheus``; then back, and the ingest run again."""
    from predops.pipelines.workspace.lake import Lake
    from tests.fakes.prometheus_api import FakePrometheus
    from tests.pipelines.ingest.test_prometheus import INSTANCES, lake_digest, temp_value
    from tests.reliability import test_faults_ingest as t

    cases = []
    lost = Counter[str]()
    for fault in ("unreachable", "down", "500", "timeout"):
        ws, staging = tmp / f"prom-{fault}" / "ws", tmp / f"prom-{fault}" / "staging"
        staging.mkdir(parents=True)
        with FakePrometheus(INSTANCES, value_fn=temp_value) as fake:
            t.ingest(ws, fake.url, staging, steps=2)
        lake = Lake(ws / "lake")
        before = lake_digest(lake)
        started = time.perf_counter()
        requests = 0
        if fault == "unreachable":
            res = t.ingest(ws, f"http://127.0.0.1:{t.closed_port()}", staging, timeout="0.2s")
        else:
            script = t.after(t.GOOD_REQUESTS, fault)
            with FakePrometheus(INSTANCES, value_fn=temp_value, slow_s=0.6, script=script) as f:
                res = t.ingest(ws, f.url, staging, timeout="0.2s")
                requests = len(f.seen)
        failed_s = time.perf_counter() - started
        error = json.loads(res.stdout.splitlines()[0]).get("error", "") if res.stdout else ""
        changed = _changed(before, lake_digest(lake))
        staged = sum(1 for _ in staging.rglob("*"))
        with FakePrometheus(INSTANCES, value_fn=temp_value) as fake:
            t.ingest(ws, fake.url, staging)
        stored = lake.scan("telemetry").collect()
        expected = len(INSTANCES) * t.STEPS
        dups = int(stored.select("node_id", "ts").is_duplicated().sum())
        lost["unclear_failures"] += res.exit_code != 1 or "Traceback" in res.output
        lost["files_changed_by_the_failed_run"] += changed
        lost["staged_files_left"] += staged
        lost["rows_lost_after_recovery"] += max(0, expected - stored.height)
        lost["duplicate_rows"] += dups
        cases.append(
            {
                "fault": fault,
                "requests_seen": requests,
                "seconds_to_fail": round(failed_s, 2),
                "error": error,
                "rows_after_recovery": stored.height,
                "rows_expected": expected,
            }
        )
    return {"tried": cases, "lost": dict(lost)}


def corrupt_parquet(tmp: Path) -> dict[str, Any]:
    """One part file truncated, one overwritten with random bytes; read, stats, re-ingest."""
    from predops.pipelines.workspace.lake import Lake
    from tests.reliability.test_faults_lake import DAYS, damage, demand_rows

    cases = []
    lost = Counter[str]()
    for how in ("truncated", "garbage"):
        lake = Lake(tmp / f"lake-{how}")
        rows = demand_rows()
        lake.write("demand", "s", rows)
        victim = lake.files("demand")[1]
        victim_rows = pl.read_parquet(victim).height
        damaged = damage(victim, how)
        readable = lake.scan("demand").collect().height
        (entry,) = lake.corrupt_files("demand")
        kept = (lake.root / entry["moved_to"]).read_bytes() == damaged
        listed = len(lake.stats()["demand"]["corrupt_files"])
        lake.write("demand", "s", rows)
        restored = lake.scan("demand").collect().height
        lost["other_rows_unreadable"] += rows.height - victim_rows - readable
        lost["damaged_bytes_not_kept"] += not kept
        lost["not_in_stats"] += listed != 1
        lost["rows_lost_after_reingest"] += rows.height - restored
        cases.append(
            {
                "damage": how,
                "files": DAYS,
                "rows": rows.height,
                "rows_in_damaged_file": victim_rows,
                "rows_readable_with_it_set_aside": readable,
                "rows_after_reingest": restored,
            }
        )
    return {"tried": cases, "lost": dict(lost)}


def disk_full(tmp: Path) -> dict[str, Any]:
    """A real 8 MiB tmpfs, filled; lake write, plan file, online store; then space freed."""
    from tests.reliability import test_faults_disk as t

    disk = tmp / "disk"
    with t.small_disk(disk) as cannot:
        return {"not_run": cannot} if cannot else _fill_and_write(disk)


def _fill_and_write(disk: Path) -> dict[str, Any]:
    from predops.pipelines.workspace.audit import AuditLog
    from predops.pipelines.workspace.feature_store import FeatureStore
    from predops.pipelines.workspace.lake import Lake
    from predops.pipelines.workspace.plans import plan_path, read_plan, write_plan
    from tests.pipelines.actuators.conftest import drain, plan_of
    from tests.reliability import test_faults_disk as t

    lost = Counter[str]()
    tried = []
    lake = Lake(disk / "lake")
    lake.write("demand", "s", t.demand_rows(1))
    before = t.visible(lake.root)
    filler = t.fill(disk, leave=64 << 10)
    rows = t.big_demand()
    try:
        lake.write("demand", "s", rows)
        lost["writes_that_did_not_fail"] += 1
    except OSError as exc:
        tried.append({"write": "lake, 30 partitions", "error": str(exc)[:160]})
    lost["lake_files_changed"] += t.visible(lake.root) != before
    filler.unlink()
    lake.write("demand", "s", rows)
    lost["lake_rows_lost_after_recovery"] += rows.height - lake.scan("demand").collect().height

    plans = disk / "plans"
    old = plan_of([drain("n00")], plan_id="p")
    write_plan(plans, old)
    filler = t.fill(disk, leave=16 << 10)
    try:
        write_plan(plans, plan_of([drain(f"n{i:04d}") for i in range(400)], plan_id="p"))
        lost["writes_that_did_not_fail"] += 1
    except OSError as exc:
        tried.append({"write": "plan file, 400 actions", "error": str(exc)[:160]})
    lost["plan_not_whole"] += read_plan(plan_path(plans, "p")) != old
    filler.unlink()

    store = FeatureStore(disk / "features")
    store.materialise_online(
        "node", t.online_frame(100, t.T1), as_of=t.T1, feature_set_hash="h1", key="node_id"
    )
    filler = t.fill(disk, leave=64 << 10)
    try:
        store.materialise_online(
            "node",
            t.online_frame(20_000, t.T2),
            as_of=t.T2,
            feature_set_hash="h2",
            key="node_id",
        )
        lost["writes_that_did_not_fail"] += 1
    except OSError as exc:
        tried.append({"write": "online features, 20,000 nodes", "error": str(exc)[:160]})
    lost["online_frame_not_the_previous"] += t.read_node_frame(store) != (t.T1, "h1", 100)
    filler.unlink()

    log = AuditLog(disk / "audit.jsonl", who="bench")
    what = {"kind": "drain", "target": "n00", "params": {}}
    log.append(at=t.T1, outcome="planned", what=what, why="x")
    size = log.path.stat().st_size
    log.append(at=t.T1, outcome="planned", what=what, why="y" * (4096 - 40 - 2 * size + 1))
    filler = t.fill(disk, leave=0)  # the log's last page has room for 40 bytes
    try:
        log.append(at=t.T2, outcome="started", what=what, why="z" * 200, key="k")
        lost["torn_audit_entries_reported_written"] += 1
    except OSError as exc:
        tried.append({"write": "audit entry past the last page", "error": str(exc)[:160]})
    filler.unlink()
    log.append(at=t.T2, outcome="done", what=what, why="after", key="k")
    lost["audit_entries_unreadable"] += 3 - len(log.read().entries)
    return {"tried": tried, "lost": dict(lost)}


def kubernetes(tmp: Path) -> dict[str, Any]:
    """500 / 503 / timeouts from the (fake) Kubernetes API during a drain: a passing fault
    ("once") must be survived; a lasting one must fail the action in the audit log, undo
    the drain's cordon and leave the rack's budget to the next plan."""
    from predops.core.clock import FixedClock
    from predops.pipelines.workspace.audit import AuditLog
    from tests.fakes.kube_api import FakeKubeAPI
    from tests.fakes.kube_objects import make_pod
    from tests.pipelines.actuators.conftest import T0, cluster_nodes
    from tests.reliability import test_faults_kube as t

    evict, late = t.EVICT, t.REQUEST_TIMEOUT * 2

    def repeat(n: int, inject: Callable[[FakeKubeAPI], None]) -> Callable[[FakeKubeAPI], None]:
        return lambda fake: [inject(fake) for _ in range(n)] and None

    passing = {  # (fault, whether it goes away by itself within the retries)
        "503 twice": (repeat(2, lambda f: f.fail_next("POST", evict, 503, "Unavailable")), True),
        "500 every time": (repeat(10, lambda f: f.fail_next("POST", evict, 500, "Error")), False),
        "answer lost once": (repeat(1, lambda f: f.stall_next("POST", evict, late)), True),
        "timeout every time": (repeat(4, lambda f: f.stall_next("POST", evict, late)), False),
    }
    cases = []
    lost = Counter[str]()
    for name, (inject, goes_away) in passing.items():
        pods = [make_pod("job-0", node="n00"), make_pod("job-1", node="n01")]
        with FakeKubeAPI(nodes=cluster_nodes(racks=1, per_rack=2), pods=pods) as fake:
            inject(fake)
            clock = FixedClock(T0)
            audit = AuditLog(tmp / f"audit-{len(cases)}.jsonl", who="bench")
            report, sleeper = t.apply_drains(fake, tmp, clock, audit, "n00")
            (out,) = report.outcomes
            in_audit = [e["outcome"] for e in audit.entries()]
            left_cordoned = out.outcome == "failed" and fake.node("n00")["spec"].get(
                "unschedulable"
            )
            nxt, _ = t.apply_drains(fake, tmp, clock, audit, "n01")  # same rack, next plan
            lost["failed_but_not_in_audit"] += out.outcome == "failed" and "failed" not in in_audit
            lost["cordon_left_by_a_failed_drain"] += bool(left_cordoned)
            lost["budget_not_released"] += nxt.counts() != {"done": 1} and out.outcome == "failed"
            lost["passing_fault_not_survived"] += goes_away and out.outcome != "done"
            cases.append(
                {
                    "fault": name,
                    "outcome": out.outcome,
                    "eviction_requests": t.evictions(fake),
                    "backoff_waits_s": sleeper.waits,
                    "next_plan_same_rack": nxt.counts(),
                }
            )
    return {"tried": cases, "lost": dict(lost)}


def killed_apply(tmp: Path) -> dict[str, Any]:
    """``predops apply --execute`` SIGKILLed with its second action's request in flight."""
    from predops.pipelines.workspace.audit import AuditLog
    from predops.pipelines.workspace.plans import write_plan
    from predops.pipelines.workspace.settings import load_settings
    from tests.fakes.kube_api import FakeKubeAPI
    from tests.fakes.kube_objects import make_pod, write_kubeconfig
    from tests.pipelines.actuators.conftest import cluster_nodes, drain, plan_of
    from tests.reliability import test_faults_apply as t

    cases = []
    lost = Counter[str]()
    for method, path in (
        ("PATCH", "/api/v1/nodes/n10"),
        ("POST", "/api/v1/namespaces/default/pods/job-1/eviction"),
    ):
        ws = tmp / f"kill-{method}" / "ws"
        settings = load_settings(ws)
        plan = plan_of([drain(n) for n in t.TARGETS], plan_id="plan-kill")
        write_plan(settings.plans_dir, plan)
        t.approve(ws, plan.plan_id)
        pods = [make_pod(f"job-{i}", node=n) for i, n in enumerate(t.TARGETS)]
        with FakeKubeAPI(nodes=cluster_nodes(racks=30, per_rack=1), pods=pods) as fake:
            kubeconfig = write_kubeconfig(ws.parent / "kubeconfig", fake.url)
            fake.stall_next(method, path, t.HOLD_S)
            proc = t.apply_process(ws, kubeconfig, plan.plan_id)
            t.wait_for(fake, method, path, proc)
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=30)
            time.sleep(t.HOLD_S + 0.3)
            second = t.apply_again(ws, kubeconfig, plan.plan_id)
            third = t.apply_again(ws, kubeconfig, plan.plan_id)
            audit = AuditLog(settings.audit_log, who="bench")
            done = Counter(e["key"] for e in audit.entries() if e["outcome"] == "done")
            patches = t.count(fake.requests, "PATCH")
            evictions = t.count(fake.requests, "POST")
        lost["actions_done_twice"] += sum(n - 1 for n in done.values() if n > 1)
        lost["actions_never_done"] += len(plan.actions) - len(done)
        lost["nodes_patched_twice"] += sum(n - 1 for n in patches.values() if n > 1)
        lost["pods_evicted_twice"] += sum(n - 1 for n in evictions.values() if n > 1)
        cases.append(
            {
                "killed_during": f"{method} {path}",
                "killed_exit_status": proc.returncode,
                "rerun": second,
                "third_run": third,
            }
        )
    return {"tried": cases, "lost": dict(lost)}


def killed_ingest(tmp: Path) -> dict[str, Any]:
    """``predops ingest files`` (4 partitions and quarantined rows) SIGKILLed before each
    of its file-system steps in turn; a reader looks, then the ingest runs again."""
    from click.testing import CliRunner

    from predops.pipelines.cli.main import main
    from tests.reliability import test_faults_ingest_commit as t

    src = tmp / "demand.csv"
    good = t.demand_csv(src)
    lost = Counter[str]()
    seen_after_kill = Counter[str]()
    limit = 1
    while True:
        ws = tmp / f"ws-{limit}"
        code = t.run_child(ws, src, limit)
        if code != -signal.SIGKILL:
            lost["uninterrupted_run_failed"] += code != 0
            break
        state = t.seen(ws)
        seen_after_kill[
            "nothing"
            if state == (0, 0)
            else "everything"
            if state == (good, t.BAD_ROWS)
            else "partial"
        ] += 1
        res = CliRunner().invoke(main, t._args(ws, src))
        lost["partial_states_seen"] += state not in ((0, 0), (good, t.BAD_ROWS))
        lost["rerun_failed"] += res.exit_code != 0
        lost["rows_wrong_after_rerun"] += abs(t.seen(ws)[0] - good)
        lost["quarantine_wrong_after_rerun"] += abs(t.seen(ws)[1] - t.BAD_ROWS)
        lost["debris_left_after_rerun"] += sum(t.leftovers(ws).values())
        rows, once = t.logged_rows(ws)
        lost["ingest_log_wrong"] += rows != good or not once
        limit += 1
    return {
        "tried": {"kill_points": limit - 1, "readers_saw": dict(seen_after_kill)},
        "lost": dict(lost),
    }


def killed_compaction(tmp: Path) -> dict[str, Any]:
    """``predops lake compact`` (2 day partitions of 4 small files each, removed files
    deleted in the same run) SIGKILLed before each of its file-system steps in turn; a
    reader looks, then the compaction runs again, and once more (it must do nothing)."""
    import os
    import shutil

    from click.testing import CliRunner

    from predops.pipelines.cli.main import main
    from tests.reliability import test_faults_compaction as t

    seed = tmp / "compact-seed"
    t.build(seed)
    old, expected = t.visible(seed), t.table(seed)
    lost = Counter[str]()
    seen_after_kill = Counter[str]()
    saved = {k: os.environ.get(k) for k in t.ENV}
    os.environ.update(t.ENV)
    limit = 1
    try:
        while True:
            ws = tmp / f"compact-{limit}"
            shutil.copytree(seed, ws)
            code = t.run_child(ws, limit)
            if code != -signal.SIGKILL:
                lost["uninterrupted_run_failed"] += code != 0
                break
            now = t.visible(ws)
            for day, files in now.items():
                whole = files == old[day] or (len(files) == 1 and files.isdisjoint(old[day]))
                seen_after_kill["one whole set" if whole else "mixed"] += 1
                lost["partitions_mixed_old_and_new"] += not whole
            lost["partitions_vanished"] += len(set(old) - set(now))
            lost["rows_wrong_after_kill"] += not t.table(ws).equals(expected)
            res = CliRunner().invoke(main, t.args(ws))
            lost["rerun_failed"] += res.exit_code != 0
            lost["rows_wrong_after_rerun"] += not t.table(ws).equals(expected)
            lost["debris_left_after_rerun"] += sum(t.debris(ws).values())
            again = CliRunner().invoke(main, t.args(ws))
            lost["second_rerun_changed_something"] += '"changed": 0' not in again.output
            limit += 1
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return {
        "tried": {"kill_points": limit - 1, "partitions_after_kill": dict(seen_after_kill)},
        "lost": dict(lost),
    }


def mlflow_store(tmp: Path) -> dict[str, Any]:
    """The MLflow store locked by another process, and unreachable; list and register."""
    from predops.pipelines.workspace import registry

    db = tmp / "mlflow.db"
    sqlite3.connect(db).execute("CREATE TABLE placeholder (x)").connection.commit()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys; c = sqlite3.connect(sys.argv[1], isolation_level=None); "
            "c.execute('BEGIN EXCLUSIVE'); print('locked', flush=True); sys.stdin.read()",
            str(db),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    cases = []
    lost = Counter[str]()
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        for name, uri in (
            ("locked SQLite", f"sqlite:///{db}"),
            ("unreachable server", "http://bob:hunter2@127.0.0.1:9"),
        ):
            for op, call in (
                ("list_models", lambda u: registry.list_models(uri=u)),
                (
                    "log_and_register",
                    lambda u: registry.log_and_register(
                        "bench",
                        {"level": 1.0},
                        predict=lambda obj, x: x,
                        params={},
                        metrics={},
                        feature_set_hash="h",
                        data_cutoff=datetime(2026, 1, 1, tzinfo=UTC),
                        pip_requirements=["pandas"],
                        uri=u,
                    ),
                ),
            ):
                started = time.perf_counter()
                try:
                    call(uri)
                    error, kind = "", ""
                except Exception as exc:
                    error, kind = str(exc), type(exc).__name__
                lost["not_a_clean_registry_error"] += kind != "RegistryUnavailable"
                lost["password_shown"] += "hunter2" in error
                cases.append(
                    {
                        "store": name,
                        "operation": op,
                        "seconds_to_fail": round(time.perf_counter() - started, 2),
                        "error": error,
                    }
                )
    finally:
        holder.communicate("")
    tables = {r[0] for r in sqlite3.connect(db).execute("SELECT name FROM sqlite_master")}
    lost["versions_registered_while_failing"] += int("model_versions" in tables)
    return {"tried": cases, "lost": dict(lost)}


SCENARIOS: dict[str, Scenario] = {
    "prometheus_unreachable_500_slow_mid_ingest": prometheus,
    "corrupt_parquet_file": corrupt_parquet,
    "disk_full_while_writing": disk_full,
    "kubernetes_api_faults_during_drain": kubernetes,
    "apply_killed_mid_plan": killed_apply,
    "ingest_killed_at_every_publish_step": killed_ingest,
    "compaction_killed_at_every_step": killed_compaction,
    "mlflow_store_locked_or_unreachable": mlflow_store,
}
