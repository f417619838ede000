"""Node identity through a real Prometheus: node-exporter, DCGM and kube-state-metrics
series that name the same three nodes three ways, backfilled with ``promtool``, ingested
with ``predops ingest prometheus`` against an inventory that knows the nodes by their
Kubernetes names.

- node-exporter by scrape target: ``instance="10.0.0.5:9100"`` (an InternalIP the
  inventory's ``node_addresses`` records), ``instance="10.0.0.6:9100"`` (known only from
  ``kube_node_info``) and ``instance="cpu-01.dc1:9100"`` (the node name with a port);
- DCGM by ``Hostname="gpu-01"`` (the short name), with the exporter pod's own
  ``instance="10.244.1.7:9400"`` beside it, which must not be used;
- kube-state-metrics by ``node="gpu-01.dc1"``, with its own ``instance``.

Every series maps; an inventory that knows none of the nodes makes the ingest fail with
the identity report; with no inventory, ``kube_node_info``'s names are used.

Needs Debian's ``prometheus`` package (see ``test_prometheus_integration.py``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner, Result

from predops.pipelines.cli.main import main
from predops.pipelines.workspace.lake import Lake
from tests.pipelines.ingest.test_prometheus_integration import serve_backfilled

pytestmark = pytest.mark.integration

T0 = datetime(2026, 1, 5, tzinfo=UTC)
STEP = timedelta(minutes=5)
STEPS = 12
GIB, MIB = 1 << 30, 1 << 20
NODES = ("cpu-01.dc1", "gpu-01.dc1", "gpu-02.dc1")
NODE_EXPORTER = {"gpu-01.dc1": "10.0.0.5:9100", "gpu-02.dc1": "10.0.0.6:9100"}
INTERNAL_IP = {"cpu-01.dc1": "10.0.0.7", "gpu-01.dc1": "10.0.0.5", "gpu-02.dc1": "10.0.0.6"}
DCGM = {"gpu-01.dc1": ("gpu-01", "10.244.1.7:9400"), "gpu-02.dc1": ("gpu-02", "10.244.2.3:9400")}
KSM = 'instance="10.0.0.2:8080",job="kube-state-metrics"'


def mem_used(i: int, k: int) -> int:
    return (i + 1) * GIB + k * MIB


def gpu_temp(i: int, k: int) -> float:
    return 40.0 + i + 0.5 * k  # the hotter of the node's two GPUs


def openmetrics(path: Path) -> Path:
    """The three exporters' series for NODES, each family contiguous, ``# EOF`` last."""
    families: dict[str, list[str]] = {}

    def add(family: str, labels: str, values: list[float]) -> None:
        stamps = [(T0 + STEP * k).timestamp() for k in range(STEPS)]
        lines = families.setdefault(family, [])
        lines += [
            f"{family}{{{labels}}} {v!r} {t:.3f}" for t, v in zip(stamps, values, strict=True)
        ]

    for i, node in enumerate(NODES):
        inst = f'instance="{NODE_EXPORTER.get(node, node + ":9100")}",job="node-exporter"'
        total = 64.0 * GIB
        add("node_memory_MemTotal_bytes", inst, [total] * STEPS)
        add("node_memory_MemAvailable_bytes", inst, [total - mem_used(i, k) for k in range(STEPS)])
        if node in DCGM:
            host, pod = DCGM[node]
            for gpu in (0, 1):
                labels = f'Hostname="{host}",gpu="{gpu}",instance="{pod}",job="dcgm-exporter"'
                add(
                    "DCGM_FI_DEV_GPU_TEMP", labels, [gpu_temp(i, k) - 2 * gpu for k in range(STEPS)]
                )
        for status, v in (("true", 1.0), ("false", 0.0)):
            labels = f'condition="Ready",{KSM},node="{node}",status="{status}"'
            add("kube_node_status_condition", labels, [v] * STEPS)
        info = f'internal_ip="{INTERNAL_IP[node]}",{KSM},node="{node}"'
        add("kube_node_info", info, [1.0] * STEPS)
    with open(path, "w", encoding="utf-8") as fh:
        for family, lines in families.items():
            fh.write(f"# TYPE {family} gauge\n" + "\n".join(lines) + "\n")
        fh.write("# EOF\n")
    return path


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("prometheus-identity")
    with serve_backfilled(openmetrics(root / "exporters.om"), root) as url:
        yield url


def cli(workspace: Path, *args: str, as_json: bool = True) -> Result:
    flags = ["--json"] if as_json else []
    return CliRunner().invoke(main, ["--workspace", str(workspace), *args, *flags])


def with_inventory(workspace: Path, source: str, nodes: tuple[str, ...], tmp: Path) -> None:
    """An inventory of ``nodes`` under ``source``, and gpu-01.dc1's InternalIP."""
    snapshot = (T0 - timedelta(days=1)).isoformat()
    inv = tmp / f"{source}-inventory.csv"
    rows = [f"{snapshot},{n},gpu,x1,8,64000,512000,1,eu,eu-a,s1,r1" for n in nodes]
    head = "ts,node_id,pool,sku,gpus,cpu_milli,memory_mib,numa_nodes,region,zone,spine,rack"
    inv.write_text("\n".join([head, *rows]) + "\n")
    addresses = tmp / f"{source}-addresses.csv"
    addresses.write_text(f"ts,node_id,address,kind\n{snapshot},gpu-01.dc1,10.0.0.5,InternalIP\n")
    for path, table in ((inv, "inventory"), (addresses, "node_addresses")):
        res = cli(
            workspace, "ingest", "files", str(path), "--table", table, "--source-name", source
        )
        assert res.exit_code == 0, res.output


def ingest_prometheus(workspace: Path, url: str, source: str, as_json: bool = True) -> Result:
    end = (T0 + STEP * (STEPS - 1)).isoformat()
    args = ["ingest", "prometheus", url, "--start", T0.isoformat(), "--end", end]
    return cli(workspace, *args, "--step", "5m", "--source-name", source, as_json=as_json)


def expected() -> pl.DataFrame:
    rows = [
        {
            "node_id": node,
            "ts": T0 + STEP * k,
            "mem_used_bytes": mem_used(i, k),
            "gpu_temp_c": gpu_temp(i, k) if node in DCGM else None,
            "node_ready": True,
        }
        for i, node in enumerate(NODES)
        for k in range(STEPS)
    ]
    return pl.DataFrame(rows).with_columns(
        pl.col("ts").dt.cast_time_unit("us"), pl.col("gpu_temp_c").cast(pl.Float32)
    )


def stored(workspace: Path, source: str) -> pl.DataFrame:
    tel = Lake(workspace / "lake").scan("telemetry", source).collect()
    return tel.select(expected().columns).sort("node_id", "ts")


def test_series_labelled_three_ways_all_map_to_the_inventory(
    prometheus: str, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    with_inventory(ws, "dc1", NODES, tmp_path)
    res = ingest_prometheus(ws, prometheus, "dc1")
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    ident = out["identity"]
    assert (ident["inventory"], ident["mapped"], ident["unmatched"], ident["nodes"]) == (
        "dc1",
        8,
        0,
        3,
    )
    assert ident["by_label"] == {
        "Hostname": {"mapped": 2, "unmatched": 0},
        "instance": {"mapped": 3, "unmatched": 0},
        "node": {"mapped": 3, "unmatched": 0},
    }
    # 10.0.0.5 by its recorded address, 10.0.0.6 through kube_node_info, cpu-01.dc1:9100
    # and the kube-state-metrics node names by name, the DCGM hosts by short name
    assert ident["by_match"] == {"address": 1, "kube_node_info": 1, "name": 4, "short_name": 2}
    assert ident["examples"] == []
    tel = out["tables"]["telemetry"]
    assert tel["rows_written"] == len(NODES) * STEPS and tel["rows_quarantined"] == 0
    assert stored(ws, "dc1").equals(expected())
    again = ingest_prometheus(ws, prometheus, "dc1", as_json=False)
    assert "identity (inventory 'dc1'): 8 label value(s) mapped to 3 node(s), 0 unmatched" in (
        again.output
    )


def test_an_inventory_that_knows_none_of_them_fails_with_the_report(
    prometheus: str, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    with_inventory(ws, "dc9", ("x-01.dc9", "x-02.dc9"), tmp_path)
    res = ingest_prometheus(ws, prometheus, "dc9")
    assert res.exit_code != 0
    error = json.loads(res.output.splitlines()[0])
    assert error["type"] == "IngestError"
    msg = error["error"]
    assert "none of the 8 node label value(s) found" in msg
    assert "inventory of source 'dc9' (2 node(s))" in msg
    # examples of every label: the first of each in turn
    for shown in ('{node="cpu-01.dc1"}', '{Hostname="gpu-01"}', '{instance="10.0.0.5:9100"}'):
        assert shown in msg
    assert "-o node_map=FILE" in msg
    report = json.loads(msg.partition("identity: ")[2])
    assert (report["mapped"], report["unmatched"], len(report["examples"])) == (0, 8, 5)
    assert stored(ws, "dc9").height == 0


def test_without_an_inventory_kube_node_info_names_the_nodes(
    prometheus: str, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    res = ingest_prometheus(ws, prometheus, "prometheus")
    assert res.exit_code == 0, res.output
    ident = json.loads(res.output)["identity"]
    assert (ident["inventory"], ident["node_ids"], ident["mapped"]) == (
        None,
        "raw label values",
        8,
    )
    assert "raw" not in ident["by_match"]  # kube_node_info's names covered every value
    assert stored(ws, "prometheus").equals(expected())
