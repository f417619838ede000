"""``predops demo`` end to end, as the README runs it: simulate, retrain job, pipeline job,
then serve — the server answers and is ready with both champions."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import requests

from predops.pipelines.workspace.runs import RunStore

PREDOPS = Path(sys.executable).with_name("predops")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_demo_trains_scores_plans_then_serves(tmp_path: Path) -> None:
    ws, port = tmp_path / "ws", _free_port()
    log = tmp_path / "demo.err"
    cmd = [str(PREDOPS), "--workspace", str(ws), "demo", "--nodes", "30", "--days", "12"]
    # The data ends at minute 25 of the last hour, mid-bucket: the plan's next hours must
    # still find a forecast (see the plan check below).
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    start = hour - timedelta(days=12, minutes=35)
    cmd += ["--seed", "5", "--port", str(port), "--start", start.isoformat(), "--json"]
    env = dict(os.environ)
    out = tmp_path / "demo.json"
    with out.open("wb") as stdout, log.open("wb") as stderr:
        proc = subprocess.Popen(cmd, stdout=stdout, stderr=stderr, env=env)
    try:
        deadline = time.monotonic() + 600
        url = None
        while time.monotonic() < deadline and proc.poll() is None:
            m = re.search(r"dashboards at (http://\S+)", log.read_text(errors="replace"))
            if m:
                url = m.group(1)
                try:
                    ready = requests.get(url + "readyz", timeout=5)
                    break
                except requests.ConnectionError:
                    pass
            time.sleep(1)
        assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
        assert url == f"http://127.0.0.1:{port}/"
        assert ready.status_code == 200, ready.text
        models = ready.json()["models"]
        assert models["node_failure"]["version"] == "1" and models["demand"]["version"] == "1"
        # The demand pages serve the hourly model; the weekly one feeds the buys.
        assert models["demand"]["provenance"]["model_name"] == "predops.demand.hourly"
        token_file = ws / "demo-operator-token"
        assert token_file.stat().st_mode & 0o777 == 0o600
        assert "demo-operator-token" in log.read_text() and token_file.read_text().strip()
        assert token_file.read_text().strip() not in log.read_text()  # never printed
        board = requests.get(url, timeout=60)
        assert board.status_code == 200 and 'id="top-nodes"' in board.text  # the risk board
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)

    report = json.loads(out.read_text())
    said = log.read_text(errors="replace")  # no library warning in normal use
    assert not re.search(r"\w+Warning\b", said), said[-3000:]
    for job in ("retrain", "pipeline"):
        steps = dict(report["jobs"][job]["steps"])
        assert report["jobs"][job]["status"] == "done"
        if job == "retrain":  # the demo trains on the simulator's own failures
            label = steps.pop("label")["status"]
            assert label.startswith("skipped: the lake holds the simulator's own failure")
        assert {s["status"] for s in steps.values()} == {"done"}, steps
    assert report["jobs"]["pipeline"]["steps"]["score"]["rows"] == 30
    stages = report["memory"]["stages"]  # wall, CPU and peak RSS of every stage
    assert {"simulate", "features_offline", "train_failure", "plan"} <= set(stages)
    assert all(s["peak_rss_mib"] > 0 and s["seconds"] >= 0 for s in stages.values()), stages
    plan_file = Path(report["jobs"]["pipeline"]["plan"]["plan_file"])
    assert plan_file.is_file() and plan_file.is_relative_to(ws)
    # Every pool is sized from the fresh forecast (a forecast stamped after the data's
    # end once left the next hours without one: every pool skipped as no_forecast).
    plan = json.loads(plan_file.read_text())
    sized = {a["target"] for a in plan["actions"] if a["kind"] == "resize_pool"} | {
        s["target"]
        for s in plan["skips"]
        if s["kind"] == "resize_pool" and s["reason"] != "no_forecast"
    }
    assert sized and not [
        s for s in plan["skips"] if s["kind"] == "resize_pool" and s["reason"] == "no_forecast"
    ], plan["skips"]
    # Buys come from the weekly (procurement) model; twelve days are short of its 16
    # weeks, so each says it forecast by the short-series fallback.
    buys = [a for a in plan["actions"] if a["kind"] == "buy"]
    assert buys, plan["skips"]
    for b in buys:
        assert b["evidence"]["provenance"]["model_name"] == "predops.demand.weekly"
        assert b["evidence"]["forecast_method"].startswith("fallback_")
    assert plan["inputs"]["buy_forecast_model"]["model"] == "predops.demand.weekly"
    # Reclaimable capacity from the usage model the retrain job registered, with its
    # evidence; the demo's pools do not peak opposite, so nothing is lent.
    assert plan["inputs"]["usage_forecasts"]["model"] == "predops.usage"
    reclaims = [a for a in plan["actions"] if a["kind"] == "set_reclaimable"]
    live = [a for a in reclaims if "withheld" not in a["evidence"]]
    assert live and all(
        {"peak_cores", "used_now_cores", "bound"} <= set(a["evidence"]) for a in live
    ), reclaims[:3]
    assert plan["inputs"]["sharing"]["source"] == "audit_log"
    runs = RunStore(ws / "scheduler.db").runs()
    assert sorted(r["job"] for r in runs) == ["pipeline", "retrain"]
    assert all(r["status"] == "done" for r in runs)
