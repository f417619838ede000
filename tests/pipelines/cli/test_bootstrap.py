"""``predops bootstrap`` end to end, as the README's real-cluster walk-through runs it:
the fake Kubernetes API server (the one fake: no real API server runs here) lists the
nodes, a real Prometheus backfilled with ``promtool`` holds their telemetry (node-exporter
series labelled by ``instance`` host:port, DCGM's by ``Hostname``), and the bootstrap
ingests both, labels failures from what was recorded (no failure events exist anywhere),
trains and registers the failure model on those labels, plans, and a server on the
workspace is ready and serving the model.

Needs Debian's ``prometheus`` package, like the other real-Prometheus tests."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from predops.pipelines.cli.main import main
from predops.pipelines.synthetic.run import SimConfig, simulate_frames
from predops.pipelines.workspace.lake import Lake
from predops.pipelines.workspace.settings import Settings
from predops.serving.app import create_app
from tests.fakes.exporters import write_openmetrics
from tests.fakes.kube_api import FakeKubeAPI
from tests.fakes.kube_objects import make_node, write_kubeconfig
from tests.pipelines.ingest.test_prometheus_integration import serve_backfilled

pytestmark = [pytest.mark.integration, pytest.mark.slow]

STEP = timedelta(minutes=15)
DAYS = 12


def fleet(now: datetime) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The CPU nodes of a simulated 40-node fleet (20 nodes, a few failures), 15-minute
    samples over the 12 days training needs, ending now: small enough for promtool."""
    start = (now - timedelta(days=DAYS)).replace(second=0, microsecond=0)
    start -= timedelta(minutes=start.minute % 15)
    frames = simulate_frames(SimConfig(nodes=40, days=DAYS, interval=STEP, seed=23, start=start))
    inventory = frames["inventory"].unique("node_id", keep="last").filter(pl.col("gpus") == 0)
    cpu = inventory["node_id"].implode()
    return frames["telemetry"].filter(pl.col("node_id").is_in(cpu)), inventory


def test_bootstrap_brings_up_a_cluster_from_kubernetes_and_prometheus_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    telemetry, inventory = fleet(datetime.now(UTC))
    gpus = dict(zip(inventory["node_id"], inventory["gpus"], strict=True))
    nodes = [
        make_node(n, gpus=int(g), rack=r, spine="s1", pool=p)
        for n, g, r, p in inventory.select("node_id", "gpus", "rack", "pool").iter_rows()
    ]
    om = write_openmetrics(telemetry, gpus, tmp_path / "fleet.om", step=STEP).path
    ws = tmp_path / "ws"
    with serve_backfilled(om, tmp_path / "prom") as url, FakeKubeAPI(nodes=nodes) as kube:
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", kube.url)
        args = ["--workspace", str(ws), "bootstrap", "--kubeconfig", str(kubeconfig)]
        args += ["--prometheus", url, "--days", str(DAYS), "--step", "15m", "--json"]
        res = CliRunner().invoke(main, args)
    (tmp_path / "bootstrap.json").write_text(res.stdout)
    assert res.exit_code == 0, res.output[-3000:]
    out = json.loads(res.stdout)
    assert out["kubernetes"]["tables"]["inventory"]["rows_written"] == inventory.height
    assert out["prometheus"]["rows_written"] > 0.9 * telemetry.height
    identity = out["prometheus"]["chunks"][-1].get("identity", {})
    assert identity.get("unmatched", 0) == 0, identity
    retrain = out["jobs"]["retrain"]
    assert retrain["status"] == "done", retrain
    assert retrain["steps"]["label"]["status"] == "done" and retrain["steps"]["label"]["rows"] > 0
    assert retrain["steps"]["train_failure"]["status"] == "done", retrain
    assert out["jobs"]["pipeline"]["status"] == "done", out["jobs"]["pipeline"]
    # The labels the model trained on are the labeller's: no other failure events exist.
    events = Lake(ws / "lake").scan("events").collect()
    failures = events.filter(pl.col("kind") == "failure")
    assert set(failures["source"]) == {"labeller"} and failures.height > 0

    app = create_app(
        Settings(workspace=ws, shared_data=tmp_path / "none"), reload_in_background=False
    )
    with TestClient(app) as client:
        ready = client.get("/readyz").json()
        assert ready["ready"] and ready["models"]["node_failure"]["loaded"], ready
