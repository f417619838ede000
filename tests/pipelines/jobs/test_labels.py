"""The labeller job over a lake: idempotent, the same in any chunking, predops' own
drains from the audit log, the documented example files, and the one label source
training reads."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner

from predops.core.clock import FixedClock
from predops.core.schemas import TELEMETRY
from predops.pipelines.cli.main import main
from predops.pipelines.jobs.labels import (
    LABEL_SOURCE,
    label_lake,
    label_source,
    predops_actions,
    training_events,
)
from predops.pipelines.synthetic.run import SimConfig, simulate_to_lake
from predops.pipelines.workspace.lake import Lake
from tests.features import builders

REPO = Path(__file__).resolve().parents[3]
CLOCK = FixedClock(datetime(2026, 6, 1, tzinfo=UTC))
T0 = datetime(2026, 3, 1, tzinfo=UTC)


def fleet(*, nodes: int, days: float, seed: int) -> SimConfig:
    start = datetime(2026, 1, 5, tzinfo=UTC)
    return SimConfig(nodes=nodes, days=days, interval=timedelta(minutes=5), seed=seed, start=start)


def labels(lake: Lake) -> pl.DataFrame:
    cols = ["node_id", "kind", "at", "cause", "detail"]
    return lake.scan("events", LABEL_SOURCE).select(cols).collect().sort("node_id", "at", "kind")


@pytest.fixture(scope="module")
def sim_lake(tmp_path_factory: pytest.TempPathFactory) -> Lake:
    """A small simulated fleet (with failures, maintenance and flaps) in a lake."""
    lake = Lake(tmp_path_factory.mktemp("sim") / "lake")
    cfg = fleet(nodes=60, days=6, seed=3)
    simulate_to_lake(lake, cfg, clock=CLOCK, progress=False)
    return lake


def test_labels_are_the_same_in_any_chunking_and_a_rerun_adds_nothing(
    sim_lake: Lake, tmp_path: Path
) -> None:
    one, many = tmp_path / "one", tmp_path / "many"
    shutil.copytree(sim_lake.root, one)
    shutil.copytree(sim_lake.root, many)
    whole = label_lake(Lake(one), clock=CLOCK, chunk_nodes=10_000)
    tiny = label_lake(Lake(many), clock=CLOCK, chunk_nodes=7)
    assert (whole["chunks"], tiny["chunks"]) == (1, 9)
    assert whole["failures"] > 0 and whole["events"]["rows_written"] > 0
    assert labels(Lake(one)).equals(labels(Lake(many)))
    for key in ("failures", "candidates", "new_events", "failures_by_cause"):
        assert whole[key] == tiny[key], key
    again = label_lake(Lake(many), clock=CLOCK, chunk_nodes=13)
    assert again["new_events"] == {"failure": 0, "repair": 0}
    assert again["events"]["rows_written"] == 0
    assert labels(Lake(many)).equals(labels(Lake(one)))
    # a dry run reports and writes nothing
    dry = tmp_path / "dry"
    shutil.copytree(sim_lake.root, dry)
    report = label_lake(Lake(dry), clock=CLOCK, write=False)
    assert report["new_events"] == whole["new_events"] and labels(Lake(dry)).height == 0


def test_since_labels_only_later_failures(sim_lake: Lake, tmp_path: Path) -> None:
    shutil.copytree(sim_lake.root, tmp_path / "l")
    lake = Lake(tmp_path / "l")
    since = datetime(2026, 1, 8, tzinfo=UTC)
    label_lake(lake, clock=CLOCK, since=since)
    got = labels(lake).filter(pl.col("kind") == "failure")
    assert got.height and got["at"].min() >= since  # type: ignore[operator]
    label_lake(lake, clock=CLOCK)  # the rest, without duplicating the later ones
    full = tmp_path / "full"
    shutil.copytree(sim_lake.root, full)
    label_lake(Lake(full), clock=CLOCK)
    assert (
        labels(lake)
        .filter(pl.col("kind") == "failure")
        .equals(labels(Lake(full)).filter(pl.col("kind") == "failure"))
    )


def _ready_only(node: str, down: tuple[int, int], minutes: int = 300) -> pl.DataFrame:
    """Telemetry of one node, node_ready false for minutes [down)."""
    ms = range(0, minutes, 5)
    rows = {
        "ts": [T0 + timedelta(minutes=m) for m in ms],
        "node_id": [node] * len(ms),
        "node_ready": [not (down[0] <= m < down[1]) for m in ms],
    }
    frame = pl.DataFrame(rows).with_columns(
        [
            pl.lit(None).cast(TELEMETRY.column(c).dtype).alias(c)
            for c in TELEMETRY.names
            if c not in rows
        ]
    )
    return frame.select(TELEMETRY.names).cast(TELEMETRY.polars_schema())


def _audit(kind: str, minute: int, mode: str = "execute", outcome: str = "done") -> dict[str, Any]:
    return {
        "at": (T0 + timedelta(minutes=minute)).isoformat(),
        "what": {"kind": kind, "target": "n0", "params": {}},
        "outcome": outcome,
        "mode": mode,
    }


def test_predops_own_drain_in_the_audit_log_is_never_a_failure(lake: Lake) -> None:
    lake.write("telemetry", "prometheus", _ready_only("n0", (60, 120)))
    ours = [_audit("drain", 40, outcome="started"), _audit("drain", 45), _audit("uncordon", 150)]
    report = label_lake(lake, clock=CLOCK, audit_entries=ours, write=False)
    assert report["failures"] == 0 and report["predops_actions"] == 3
    assert report["candidates"]["ready"] == {"unshielded": 0, "shielded": {"predops": 1}}
    dry_runs = [_audit("drain", 45, mode="dry_run"), _audit("drain", 46, outcome="would_run")]
    assert predops_actions(dry_runs, "predops").height == 0
    assert label_lake(lake, clock=CLOCK, audit_entries=dry_runs)["failures"] == 1


def test_the_example_files_ingest_and_label(tmp_path: Path) -> None:
    """The README's example: tickets and node problems through ``ingest files``."""
    ws = ["--workspace", str(tmp_path / "ws")]
    run = CliRunner().invoke
    for name, source in (("repair_tickets.csv", "tickets"), ("node_problems.csv", "npd")):
        args = [*ws, "ingest", "files", str(REPO / "data" / name), "--table", "events"]
        out = run(main, [*args, "--source-name", source, "--json"])
        assert out.exit_code == 0, out.output
        assert json.loads(out.output)["tables"]["events"]["rows_quarantined"] == 0
    out = run(main, [*ws, "label", "--json"])
    assert out.exit_code == 0, out.output
    report = json.loads(out.output)
    assert report["failures_by_cause"] == {"gpu_xid": 1, "kernel": 1, "psu": 1}
    assert report["ignored_signals"] == {"xid_application": 1}
    assert report["events"]["rows_written"] == 6
    got = labels(Lake(tmp_path / "ws" / "lake")).filter(pl.col("kind") == "failure")
    xid = got.filter(pl.col("node_id") == "gpu-a100-r07-n3").row(0, named=True)
    assert xid["at"] == datetime(2026, 1, 12, 3, 38, 12, tzinfo=UTC)  # the XID, before the ticket
    assert "INC-20417" in xid["detail"] and "DCGM XID 79" in xid["detail"]
    again = json.loads(run(main, [*ws, "label", "--json"]).output)
    assert again["events"]["rows_written"] == 0


def test_training_reads_failures_from_one_label_source(tmp_path: Path) -> None:
    from predops.pipelines.jobs.features import build_features
    from predops.pipelines.workspace.feature_store import FeatureStore

    lake = Lake(tmp_path / "lake")
    rng = np.random.default_rng(5)
    lake.write("inventory", "synthetic", builders.inventory(3))
    lake.write("telemetry", "synthetic", builders.telemetry(rng, nodes=3, hours=30))
    truth = [
        ("n1", "failure", T0 + timedelta(hours=20)),
        ("n1", "repair", T0 + timedelta(hours=22)),
    ]
    lake.write("events", "synthetic", builders.events(truth))
    assert label_source(lake) is None
    assert training_events(lake).filter(pl.col("kind") == "failure").collect().height == 1
    derived = [
        ("n2", "failure", T0 + timedelta(hours=10)),
        ("n2", "repair", T0 + timedelta(hours=11)),
    ]
    lake.write("events", LABEL_SOURCE, builders.events(derived))
    assert label_source(lake) == LABEL_SOURCE
    fails = training_events(lake).filter(pl.col("kind") == "failure").collect()
    assert fails["node_id"].to_list() == ["n2"]  # the simulator's truth is not counted too
    report = build_features(
        lake, FeatureStore(tmp_path / "features"), as_of=T0 + timedelta(hours=30)
    )
    assert report["label_source"] == LABEL_SOURCE
    frame = FeatureStore(tmp_path / "features").read_offline("node_training")
    positive = frame.filter(pl.col("fails_within_6h") == 1)["node_id"].unique().to_list()
    assert positive == ["n2"]


def test_a_lake_without_failure_events_gets_positive_labels(tmp_path: Path) -> None:
    """The issue: a workspace from a real cluster has signals, no failure events, and so
    no positive training label. After the labeller it has."""
    from predops.pipelines.jobs.features import NODE_TRAINING, build_features
    from predops.pipelines.synthetic.run import simulate_frames
    from predops.pipelines.workspace.feature_store import FeatureStore

    cfg = fleet(nodes=40, days=5, seed=2)
    frames = simulate_frames(cfg)
    lake = Lake(tmp_path / "lake")
    lake.write("inventory", "kubernetes", frames["inventory"])
    lake.write("telemetry", "prometheus", frames["telemetry"])
    raw = frames["events"].filter(~pl.col("kind").is_in(["failure", "repair"]))
    lake.write("events", "kubernetes", raw)
    as_of = frames["telemetry"]["ts"].max()
    store = FeatureStore(tmp_path / "features")

    def positives() -> int:
        build_features(lake, store, as_of=as_of)  # type: ignore[arg-type]
        return int(store.read_offline(NODE_TRAINING)["fails_within_72h"].fill_null(0).sum())

    assert positives() == 0
    report = label_lake(lake, clock=CLOCK)
    assert report["failures"] > 0
    assert positives() > 0
