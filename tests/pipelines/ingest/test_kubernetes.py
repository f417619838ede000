"""Kubernetes adapter through the official client against a local fake API server
(``tests.fakes.kube_api``: no real kube-apiserver can run here), via a kubeconfig."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st
from kubernetes.utils import parse_quantity as client_parse_quantity

from predops.core.clock import FixedClock
from predops.pipelines.cli.main import main
from predops.pipelines.ingest import kubernetes as kube
from predops.pipelines.ingest.batch import IngestError
from predops.pipelines.ingest.registry import IngestOptions, adapter
from predops.pipelines.ingest.run import ingest
from predops.pipelines.workspace.lake import Lake
from tests.fakes.kube_api import FakeKubeAPI
from tests.fakes.kube_objects import (
    container,
    make_node,
    make_pdb,
    make_pod,
    rfc3339,
    write_kubeconfig,
)

DOWN_SINCE = datetime(2026, 5, 30, 8, 15, tzinfo=UTC)


# ---------------------------------------------------------------- quantities
@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("64Gi", 64 * 2**30),
        ("32000m", 32),
        ("2", 2),
        ("1e3", 1000),
        ("1.5G", 1_500_000_000),
        ("100M", 100_000_000),
        ("0.5", Decimal("0.5")),
        ("500u", Decimal("0.0005")),
        ("1E", 10**18),
        ("1Ki", 1024),
        ("+1", 1),
        (".5", Decimal("0.5")),
        ("250n", Decimal("2.5E-7")),
        ("1.5Ti", 3 * 2**39),
        ("12E-1", Decimal("1.2")),
    ],
)
def test_quantities_parse_exactly(text: str, value: int | Decimal) -> None:
    assert kube.parse_quantity(text) == value


@pytest.mark.parametrize("text", ["12x", "Gi", "", "1.2.3", "1 Gi", "64gi", "1e", "0x10"])
def test_bad_quantities_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        kube.parse_quantity(text)


@given(
    st.decimals(min_value=0, max_value=10**6, places=3, allow_nan=False, allow_infinity=False),
    st.sampled_from(["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "Ti"]),
)
def test_quantities_agree_with_the_official_client(number: Decimal, suffix: str) -> None:
    text = f"{number}{suffix}"
    assert kube.parse_quantity(text) == client_parse_quantity(text)


def test_effective_request_follows_the_scheduler_rules() -> None:
    spec = {
        "containers": [container(cpu="2", memory="1Gi"), container("b", cpu="500m", memory="1Gi")],
        "initContainers": [
            container("sidecar", cpu="250m", memory="64Mi", restart_policy="Always"),
            container("migrate", cpu="4", memory="512Mi"),
        ],
        "overhead": {"cpu": "100m"},
    }
    # app 2.5 + sidecar 0.25 = 2.75; init peak = sidecar 0.25 + 4 = 4.25; + overhead 0.1
    assert kube.effective_request(spec, "cpu") == Decimal("4.35")
    assert kube.effective_request(spec, "memory") == 2 * 2**30 + 64 * 2**20
    limits_only = {"containers": [container(cpu="3", memory=None, limits_only=True)]}
    assert kube.effective_request(limits_only, "cpu") == 3
    assert kube.effective_request(limits_only, "nvidia.com/gpu") == 0


# ---------------------------------------------------------------- a fake cluster
def cluster() -> FakeKubeAPI:
    nodes = [
        make_node(
            "gpu-a1",
            gpus=8,
            cpu="192",
            memory="2Ti",
            allocatable_cpu="191500m",
            allocatable_memory="2047Gi",
            rack="r01",
            spine="s1",
            pool="h100",
            labels={"predops.io/numa-nodes": "2", "nvidia.com/gpu.clique": "c7.1"},
        ),
        make_node(
            "gpu-a2",
            gpus=8,
            rack="r01",
            spine="s1",
            pool="h100",
            ready="False",
            ready_since=DOWN_SINCE,
        ),
        make_node(
            "gpu-b1",
            gpus=4,
            gpu_product="NVIDIA-A100-SXM4-80GB",
            rack="r02",
            spine="s1",
            ready="Unknown",
            ready_since=DOWN_SINCE,
        ),
        make_node(
            "cpu-1",
            region=None,
            zone=None,
            memory="1000000Ki",
            labels={"eks.amazonaws.com/nodegroup": "general"},
        ),
        make_node("cpu-2", ready=None, pool="general"),
        make_node("cpu-bad", memory="64Xi", pool="general"),
    ]
    pods = [
        make_pod(
            "train-0",
            "ml",
            node="gpu-a1",
            owner=("Job", "llm-pretrain"),
            containers=[container(cpu="32", memory="400Gi", gpus=8)],
            annotations={"scheduling.k8s.io/group-name": "llm-pretrain-pg"},
            labels={"app": "train"},
            priority=1000,
            scheduled=datetime(2026, 5, 2, 10, tzinfo=UTC),
            gpu_models_in=["NVIDIA-H100-80GB-HBM3", "NVIDIA-H200"],
        ),
        make_pod(
            "web-7f9c-x2x",
            "shop",
            node="cpu-1",
            owner=("ReplicaSet", "web-7f9c"),
            labels={"app": "web"},
            containers=[container(cpu="250m", memory="100M")],
            init_containers=[
                container("proxy", cpu="100m", memory="64Mi", restart_policy="Always")
            ],
        ),
        make_pod(
            "web-7f9c-q8z",
            "shop",
            node="cpu-2",
            owner=("ReplicaSet", "web-7f9c"),
            labels={"app": "web"},
            deleted=datetime(2026, 5, 31, tzinfo=UTC),
        ),
        make_pod(
            "pending-1",
            "ml",
            phase="Pending",
            priority=None,
            containers=[container(cpu=None, memory=None, gpus=1, limits_only=True)],
            node_selector={"karpenter.sh/nodepool": "h100"},
            qos="BestEffort",
        ),
        make_pod("broken-1", "ml", node="cpu-2", containers=[container(cpu="1x")]),
    ]
    pdbs = [
        make_pdb(
            "web",
            "shop",
            match_labels={"app": "web"},
            min_available="50%",
            disruptions_allowed=0,
            expected=2,
            healthy=1,
        ),
        make_pdb(
            "train",
            "ml",
            match_labels={"app": "train"},
            max_unavailable=1,
            disruptions_allowed=1,
            expected=1,
            healthy=1,
        ),
    ]
    return FakeKubeAPI(nodes=nodes, pods=pods, pdbs=pdbs)


def read_opts(clock: FixedClock, **extra: str) -> IngestOptions:
    return IngestOptions(clock=clock, extra={"page_size": "2", **extra})


def lake_digest(lake: Lake) -> dict[str, str]:
    if not lake.root.exists():
        return {}
    return {
        str(p.relative_to(lake.root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(lake.root.rglob("*"))
        if p.is_file()
    }


def test_snapshot_lands_in_every_table(lake: Lake, clock: FixedClock, tmp_path: Path) -> None:
    with cluster() as fake:
        kc = write_kubeconfig(tmp_path / "kubeconfig", fake.url)
        report = ingest(
            lake,
            "kubernetes",
            adapter("kubernetes").read(str(kc), read_opts(clock)),
            clock=clock,
            input_name=str(kc),
        )
        lists = fake.seen("GET")
    now = clock.now()

    # Paged: 6 nodes at 2 per page = 3 requests, the later ones with a continue token.
    node_calls = [r for r in lists if r.path == "/api/v1/nodes"]
    assert [("continue" in r.query, r.query["limit"]) for r in node_calls] == [
        (False, "2"),
        (True, "2"),
        (True, "2"),
    ]
    assert {r.headers["authorization"] for r in lists} == {"Bearer test-token"}

    inv = lake.scan("inventory").collect().sort("node_id")
    assert inv["node_id"].to_list() == ["cpu-1", "cpu-2", "gpu-a1", "gpu-a2", "gpu-b1"]
    assert (inv["ts"] == now).all()
    a1 = inv.row(2, named=True)
    assert a1 | {"ts": None, "source": None} == {
        "ts": None,
        "source": None,
        "node_id": "gpu-a1",
        "pool": "h100",
        "sku": "x1.large",
        "gpu_model": "NVIDIA-H100-80GB-HBM3",
        "gpus": 8,
        "cpu_milli": 191_500,
        "memory_mib": 2047 * 1024,
        "numa_nodes": 2,
        "nvlink_domain": "c7.1",
        "region": "eu-west",
        "zone": "eu-west-a",
        "spine": "s1",
        "rack": "r01",
        "installed_at": None,
    }
    cpu1 = inv.row(0, named=True)
    assert (
        cpu1["pool"],
        cpu1["region"],
        cpu1["rack"],
        cpu1["gpus"],
        cpu1["gpu_model"],
        cpu1["memory_mib"],
        cpu1["numa_nodes"],
    ) == ("general", "unknown", "unknown", 0, None, 976, 1)
    quarantine = lake.read_quarantine("inventory")
    assert quarantine.select("field", "reason").rows() == [
        ("memory_mib", "cannot read 64Xi as Int64")
    ]
    assert json.loads(quarantine["record"][0])["node_id"] == "cpu-bad"

    tel = lake.scan("telemetry").collect().sort("node_id")
    assert dict(zip(tel["node_id"], tel["node_ready"], strict=True)) == {
        "cpu-1": True,
        "cpu-2": None,
        "gpu-a1": True,
        "gpu-a2": False,
        "gpu-b1": False,
    }
    assert (tel["ts"] == now).all() and tel["gpu_temp_c"].is_null().all()
    ev = lake.scan("events").collect().sort("node_id")
    assert ev.select("node_id", "kind", "at").rows() == [
        ("cpu-1", "ready", datetime(2026, 5, 1, tzinfo=UTC)),
        ("gpu-a1", "ready", datetime(2026, 5, 1, tzinfo=UTC)),
        ("gpu-a2", "not_ready", DOWN_SINCE),
        ("gpu-b1", "not_ready", DOWN_SINCE),
    ]
    assert ev["detail"][3] == "NodeStatusUnknown: Kubelet stopped posting node status."
    # cpu-bad's Ready row and event point at a node the inventory refused.
    assert report.tables["telemetry"].rows_quarantined == 1
    assert report.tables["events"].rows_quarantined == 1

    pods = lake.scan("pods").collect()
    by = {p["pod_id"].split("/")[1]: p for p in pods.iter_rows(named=True)}
    assert set(by) == {"train-0", "web-7f9c-x2x", "web-7f9c-q8z", "pending-1"}
    train = by["train-0"]
    assert train["pod_id"].startswith("ml/train-0/") and len(train["pod_id"]) > 20
    assert (
        train["job_id"],
        train["gang_id"],
        train["cpu_milli"],
        train["memory_mib"],
        train["num_gpu"],
        train["gpu_milli"],
        train["priority"],
        train["node_id"],
        train["gpu_spec"],
        train["scheduled_at"],
    ) == (
        "ml/Job/llm-pretrain",
        "llm-pretrain-pg",
        32_000,
        400 * 1024,
        8,
        1000,
        1000,
        "gpu-a1",
        "NVIDIA-H100-80GB-HBM3|NVIDIA-H200",
        datetime(2026, 5, 2, 10, tzinfo=UTC),
    )
    web = by["web-7f9c-x2x"]
    # 250m app + 100m sidecar; 100M = 95.4 MiB app + 64 MiB sidecar, rounded up
    assert (web["cpu_milli"], web["memory_mib"], web["job_id"], web["num_gpu"]) == (
        350,
        160,
        "shop/ReplicaSet/web-7f9c",
        0,
    )
    assert by["web-7f9c-q8z"]["deleted_at"] == datetime(2026, 5, 31, tzinfo=UTC)
    pending = by["pending-1"]
    assert (
        pending["phase"],
        pending["node_id"],
        pending["scheduled_at"],
        pending["num_gpu"],
        pending["pool"],
        pending["cpu_milli"],
        pending["qos"],
    ) == ("Pending", None, None, 1, "h100", 0, "BestEffort")
    bad_pod = lake.read_quarantine("pods")
    assert bad_pod["field"].to_list() == ["cpu_milli"]
    assert "1x" in bad_pod["reason"][0]

    pdbs = lake.scan("pdbs").collect().sort("name")
    assert pdbs.drop("ts", "source").rows(named=True) == [
        {
            "namespace": "ml",
            "name": "train",
            "selector": '{"matchLabels": {"app": "train"}}',
            "min_available": None,
            "max_unavailable": "1",
            "disruptions_allowed": 1,
            "expected_pods": 1,
            "current_healthy": 1,
        },
        {
            "namespace": "shop",
            "name": "web",
            "selector": '{"matchLabels": {"app": "web"}}',
            "min_available": "50%",
            "max_unavailable": None,
            "disruptions_allowed": 0,
            "expected_pods": 2,
            "current_healthy": 1,
        },
    ]


def test_snapshots_repeat_idempotently(lake: Lake, clock: FixedClock, tmp_path: Path) -> None:
    with cluster() as fake:
        kc = str(write_kubeconfig(tmp_path / "kubeconfig", fake.url))

        def run() -> dict[str, int]:
            r = ingest(
                lake,
                "kubernetes",
                adapter("kubernetes").read(kc, read_opts(clock)),
                clock=clock,
                input_name=kc,
            )
            return {t: v.rows_written for t, v in r.tables.items()}

        first = run()
        assert run() == dict.fromkeys(first, 0)  # same snapshot time: nothing new
        clock.advance(timedelta(minutes=10))
        later = run()
    # a new snapshot adds inventory, Ready and PDB rows, but no event or pod already seen
    assert later == {"inventory": 5, "telemetry": 5, "events": 0, "pods": 0, "pdbs": 2}


def test_expired_continue_token_restarts_the_list(clock: FixedClock, tmp_path: Path) -> None:
    with cluster() as fake:
        kc = str(write_kubeconfig(tmp_path / "kubeconfig", fake.url))
        fake.fail_next(
            "GET",
            "/api/v1/pods",
            410,
            "Expired",
            "continue parameter is too old",
            if_query="continue",
        )
        batches = list(adapter("kubernetes").read(kc, read_opts(clock)))
        pod_calls = [("continue" in r.query) for r in fake.seen("GET", "/api/v1/pods")]
    assert pod_calls == [False, True, False, True, True]  # page 2 expired -> start over
    pods = next(b.frame for b in batches if b.table == "pods")
    assert pods.height == 5 and pods["pod_id"].n_unique() == 5


@pytest.mark.parametrize(
    "path", ["/api/v1/nodes", "/api/v1/pods", "/apis/policy/v1/poddisruptionbudgets"]
)
def test_api_errors_are_named_and_write_nothing(
    path: str, lake: Lake, clock: FixedClock, tmp_path: Path
) -> None:
    with cluster() as fake:
        kc = str(write_kubeconfig(tmp_path / "kubeconfig", fake.url))
        fake.fail_next(
            "GET",
            path,
            403,
            "Forbidden",
            f'{path.rsplit("/", 1)[1]} is forbidden: User "tester" cannot list',
        )
        with pytest.raises(IngestError) as err:
            ingest(
                lake,
                "kubernetes",
                adapter("kubernetes").read(kc, read_opts(clock)),
                clock=clock,
                input_name=kc,
            )
    assert f"at {fake.url} failed: HTTP 403 Forbidden:" in str(err.value)
    assert "is forbidden" in str(err.value)
    assert lake_digest(lake) == {}


def test_config_problems_are_clear(
    clock: FixedClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(IngestError, match=r"nope\.yaml: cannot load Kubernetes config"):
        adapter("kubernetes").read(str(tmp_path / "nope.yaml"), read_opts(clock))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(IngestError, match=r"in-cluster: cannot load Kubernetes config"):
        adapter("kubernetes").read("in-cluster", read_opts(clock))
    with pytest.raises(IngestError, match=r"unknown option.*rack_lable"):
        adapter("kubernetes").read("in-cluster", read_opts(clock, rack_lable="x"))
    with cluster() as fake:
        kc = str(write_kubeconfig(tmp_path / "kubeconfig", fake.url, token="wrong"))
        with pytest.raises(IngestError, match=r"listing nodes .* HTTP 401 Unauthorized"):
            adapter("kubernetes").read(kc, read_opts(clock))


def test_cli_with_custom_labels(tmp_path: Path) -> None:
    with cluster() as fake:
        for n in fake.nodes:
            n["metadata"]["labels"]["example.com/rack"] = "R-" + n["metadata"]["name"]
        kc = str(write_kubeconfig(tmp_path / "kubeconfig", fake.url))
        res = CliRunner().invoke(
            main,
            [
                "--workspace",
                str(tmp_path / "ws"),
                "ingest",
                "kubernetes",
                kc,
                "--json",
                "-o",
                "rack_label=example.com/rack",
                "-o",
                "resources=capacity",
                "-o",
                "pool_label=karpenter.sh/nodepool",
            ],
        )
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["source"] == "kubernetes" and out["tables"]["inventory"]["rows_written"] == 5
    inv = Lake(tmp_path / "ws" / "lake").scan("inventory").collect().sort("node_id")
    assert inv["rack"].to_list() == ["R-cpu-1", "R-cpu-2", "R-gpu-a1", "R-gpu-a2", "R-gpu-b1"]
    # capacity, not allocatable; cpu-1 has no karpenter label -> unknown pool
    assert inv.filter(pl.col("node_id") == "gpu-a1")["cpu_milli"].item() == 192_000
    assert inv.filter(pl.col("node_id") == "cpu-1")["pool"].item() == "unknown"
    assert rfc3339(inv["ts"][0]) <= rfc3339(datetime.now(UTC))


def test_node_addresses_are_recorded_per_snapshot(
    lake: Lake, clock: FixedClock, tmp_path: Path
) -> None:
    fake = cluster()
    reported = {
        "gpu-a1": [
            ("InternalIP", "10.0.0.5"),
            ("Hostname", "gpu-a1"),
            ("ExternalIP", "203.0.113.9"),
        ],
        "cpu-1": [("InternalIP", "10.0.1.7"), ("InternalIP", "fd00::17")],
        "cpu-bad": [("InternalIP", "10.0.9.9")],  # its inventory row is refused
    }
    for n in fake.nodes:
        pairs = reported.get(n["metadata"]["name"], [])
        n["status"]["addresses"] = [{"type": k, "address": a} for k, a in pairs]
    with fake:
        kc = str(write_kubeconfig(tmp_path / "kubeconfig", fake.url))
        report = ingest(
            lake,
            "kubernetes",
            adapter("kubernetes").read(kc, read_opts(clock)),
            clock=clock,
            input_name=kc,
        )
    got = lake.scan("node_addresses").collect().sort("node_id", "address")
    assert got.select("node_id", "kind", "address").rows() == [
        ("cpu-1", "InternalIP", "10.0.1.7"),
        ("cpu-1", "InternalIP", "fd00::17"),
        ("gpu-a1", "InternalIP", "10.0.0.5"),
        ("gpu-a1", "ExternalIP", "203.0.113.9"),
        ("gpu-a1", "Hostname", "gpu-a1"),
    ]
    assert (got["ts"] == clock.now()).all()
    # An address of a node the inventory refused is quarantined like its other rows.
    assert report.tables["node_addresses"].rows_quarantined == 1
