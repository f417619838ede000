"""openb: the real Alibaba GPU node and pod lists, re-ingest, and hand-made lists."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from predops.core.clock import FixedClock
from predops.pipelines.ingest.batch import IngestError
from predops.pipelines.workspace.lake import Lake
from tests.pipelines.ingest.traces.builders import (
    cli,
    cli_ingest,
    quarantined,
    rows,
    run_adapter,
    write_csv,
)


@pytest.fixture(scope="module")
def csv_dir(shared_data: Path) -> Path:
    return shared_data / "alibaba-clusterdata" / "cluster-trace-gpu-v2023" / "csv"


@pytest.fixture(scope="module")
def real(csv_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    ws = tmp_path_factory.mktemp("openb")
    nodes = cli_ingest(ws, "openb", csv_dir / "openb_node_list_all_node.csv")
    pods = cli_ingest(ws, "openb", csv_dir / "openb_pod_list_default.csv")
    return ws, {"nodes": nodes, "pods": pods}


def test_real_lists_match_provenance(real: tuple[Path, dict[str, Any]]) -> None:
    ws, reports = real
    # PROVENANCE.md: all_node 1,523 nodes (1,213 GPU nodes, 6,212 GPUs); default 8,152 pods.
    inv = reports["nodes"]["tables"]["inventory"]
    pods = reports["pods"]["tables"]["pods"]
    assert inv["rows_in"] == inv["rows_written"] == 1_523
    assert pods["rows_in"] == pods["rows_written"] == 8_152
    assert inv["rows_quarantined"] == pods["rows_quarantined"] == 0
    nodes = rows(Lake(ws / "lake"), "inventory")
    assert nodes["gpu_model"].is_not_null().sum() == 1_213
    assert nodes["gpus"].sum() == 6_212
    stats = cli(ws, "lake", "stats")["tables"]
    assert stats["inventory"]["sources"] == stats["pods"]["sources"] == ["openb"]


def test_real_reingest_adds_nothing(real: tuple[Path, dict[str, Any]], csv_dir: Path) -> None:
    ws, _ = real
    for name in ("openb_node_list_all_node.csv", "openb_pod_list_default.csv"):
        for t in cli_ingest(ws, "openb", csv_dir / name)["tables"].values():
            assert t["rows_written"] == 0 and t["rows_quarantined"] == 0
            assert t["rows_already_present"] == t["rows_in"]


def test_hand_made_lists_quarantine_the_bad_value(
    tmp_path: Path, lake: Lake, clock: FixedClock
) -> None:
    write_csv(
        tmp_path / "mine" / "openb_node_list_small.csv",
        ["sn", "cpu_milli", "memory_mib", "gpu", "model"],
        [
            ["n1", 96000, 786432, 8, "V100M32"],
            ["n2", 64000, 262144, "two", "T4"],
            ["n3", 32000, 131072, 0, ""],
        ],
    )
    write_csv(
        tmp_path / "mine" / "openb_pod_list_tiny.csv",
        [
            "name",
            "cpu_milli",
            "memory_mib",
            "num_gpu",
            "gpu_milli",
            "gpu_spec",
            "qos",
            "pod_phase",
            "creation_time",
            "deletion_time",
            "scheduled_time",
        ],
        [["p1", 8000, 30000, 1, 500, "", "LS", "Running", 60, "", 61]],
    )
    rep = run_adapter(lake, clock, "openb", tmp_path / "mine", epoch="2024-01-01")
    assert rep.tables["inventory"].rows_written == 2
    assert quarantined(lake, "inventory") == [(2, "gpus", "cannot read two as Int32")]
    inv = rows(lake, "inventory").sort("node_id")
    assert inv.select("node_id", "pool", "gpu_model").rows() == [
        ("n1", "V100M32", "V100M32"),
        ("n3", "cpu", None),
    ]
    pod = rows(lake, "pods").row(0, named=True)
    t0 = datetime(2024, 1, 1, tzinfo=UTC)
    assert pod["pod_id"] == "tiny/p1"
    assert (pod["created_at"], pod["scheduled_at"], pod["deleted_at"]) == (
        t0 + timedelta(seconds=60),
        t0 + timedelta(seconds=61),
        None,
    )


def test_wrong_file_is_refused(tmp_path: Path, lake: Lake, clock: FixedClock) -> None:
    f = write_csv(tmp_path / "list.csv", ["host", "cores"], [["a", 4]])
    with pytest.raises(IngestError, match=r"list\.csv: neither an openb node list"):
        run_adapter(lake, clock, "openb", f)
