"""The issue's done-when: kill the scheduler (SIGKILL) in the middle of a run, restart it,
and the run completes exactly once with no duplicate or partial output."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

from predops.pipelines.workspace.runs import RunStore

CONFIG = """
[scheduler]
misfire_grace_time = "30s"
[jobs.pipeline]
cron = "* * * * * *"   # every second: the test does not wait for a minute boundary
[jobs.retrain]
enabled = false
"""


def start(ws: Path, cfg: Path, log: Path, pause: str | None) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env.pop("PREDOPS_SCHEDULER_TEST_PAUSE", None)
    if pause:
        env["PREDOPS_SCHEDULER_TEST_PAUSE"] = pause
    cmd = [sys.executable, "-m", "predops", "--workspace", str(ws)]
    cmd += ["schedule", "start", "--config", str(cfg)]
    with open(log, "ab") as fh:
        return subprocess.Popen(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT)


def wait_for(what: str, cond: Callable[[], Any], proc: subprocess.Popen[bytes], log: Path) -> Any:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        if proc.poll() is not None:
            raise AssertionError(f"scheduler exited ({proc.returncode}):\n{log.read_text()}")
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}:\n{log.read_text()}")


def test_killed_mid_run_completes_once_after_restart(workspace: Path, tmp_path: Path) -> None:
    cfg = tmp_path / "predops.toml"
    cfg.write_text(CONFIG)
    log = tmp_path / "scheduler.log"
    store = RunStore(workspace / "scheduler.db")

    def mid_run() -> dict[str, Any] | None:
        for r in store.runs("pipeline"):
            if r["status"] == "running" and any(s["step"] == "features" for s in r["steps"]):
                return r
        return None

    # 1. Start with a pause after the features step, and kill -9 during it.
    proc = start(workspace, cfg, log, pause="features=120")
    try:
        running = wait_for("a run in the middle", mid_run, proc, log)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    cutoff = running["cutoff"]
    killed = store.runs("pipeline")
    assert [r["status"] for r in killed] == ["running"]  # the record outlived its process
    plans = workspace / "plans"
    assert not plans.exists() or not list(plans.glob("*.json"))  # the plan step never ran

    # 2. Restart: the dead attempt is abandoned and the same cutoff is run again, once.
    proc = start(workspace, cfg, log, pause=None)
    try:
        wait_for(
            "the run to complete",
            lambda: [r for r in store.runs("pipeline") if r["status"] == "done"],
            proc,
            log,
        )
        time.sleep(3)  # three more fires at the same cutoff must not run it again
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()

    runs = store.runs("pipeline")
    assert [(r["cutoff"], r["attempt"], r["status"]) for r in runs] == [
        (cutoff, 2, "done"),
        (cutoff, 1, "abandoned"),
    ]
    done = runs[0]
    assert [s["step"] for s in done["steps"]] == ["ingest", "features", "score", "forecast", "plan"]
    assert done["ended_at"] >= done["started_at"] and done["rows"] > 0

    # Output: complete, and once. One plan file that parses, one audit entry for it,
    # the manifest lists every output, and no temporary file is left anywhere.
    plan_files = list(plans.glob("*.json"))
    assert len(plan_files) == 1
    plan = json.loads(plan_files[0].read_text())
    assert plan["created_at"] == cutoff
    audit = [json.loads(line) for line in (workspace / "audit.jsonl").read_text().splitlines()]
    assert [a["plan_id"] for a in audit] == [plan["plan_id"]]
    manifests = list((workspace / "scheduled" / "pipeline").glob("*/manifest.json"))
    assert len(manifests) == 1
    manifest = json.loads(manifests[0].read_text())
    assert manifest["run_id"] == done["id"] and manifest["attempt"] == 2
    for path in manifest["outputs"]:
        assert Path(path).is_file(), path
    online = pl.read_ipc(workspace / "features" / "online" / "node.arrow")
    assert online.height == 8 and online["node_id"].n_unique() == 8
    assert not [p for p in workspace.rglob("*") if p.name.endswith(".tmp")]
    text = log.read_text()
    assert "'recovered': ['pipeline']" in text
