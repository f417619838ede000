"""Node identity: exporters' label values reconciled with the inventory's node names
(ports, IPs, FQDN / short names, the mapping file first, ambiguity refused), and the
Prometheus side's per-series label choice, against a stub of the API."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from predops.core.clock import FixedClock
from predops.pipelines.ingest import identity
from predops.pipelines.ingest import prometheus as prom
from predops.pipelines.ingest import prometheus_nodes as pnodes
from predops.pipelines.ingest.batch import Batch, IngestError
from predops.pipelines.ingest.identity import KnownNodes, NodeResolver, normalise
from predops.pipelines.ingest.options import IngestOptions
from predops.pipelines.ingest.run import ingest
from predops.pipelines.workspace.lake import Lake

T0 = datetime(2026, 5, 1, tzinfo=UTC)
NAMES = frozenset({"gpu-01.dc1", "gpu-02.dc1", "cpu-01.dc1", "gpu-01.dc2", "login"})
ADDRESSES = (
    ("10.0.0.5", "gpu-01.dc1", T0),
    ("10.0.0.6", "gpu-02.dc1", T0),
    ("fd00::7", "cpu-01.dc1", T0),
)


def known(**kw: Any) -> KnownNodes:
    return KnownNodes("dc", kw.pop("names", NAMES), kw.pop("addresses", ADDRESSES))


def resolve(value: str, **kw: Any) -> identity.Match:
    node_map = kw.pop("node_map", None)
    info = kw.pop("node_info", ())
    return NodeResolver(known(**kw), node_map=node_map, node_info=lambda: info).resolve(value)


# ---------------------------------------------------------------- normalising
@pytest.mark.parametrize(
    ("value", "key"),
    [
        ("gpu-01.dc1:9100", "gpu-01.dc1"),
        ("GPU-01.DC1.", "gpu-01.dc1"),
        (" 10.0.0.5:9400 ", "10.0.0.5"),
        ("[FD00::0007]:9100", "fd00::7"),
        ("fd00:0::7", "fd00::7"),  # unbracketed IPv6: every colon is the address's
        ("gpu-01", "gpu-01"),
        ("host:http", "host:http"),  # not a port
    ],
)
def test_values_are_compared_without_ports_case_or_brackets(value: str, key: str) -> None:
    assert normalise(value) == key


# ---------------------------------------------------------------- resolving
@pytest.mark.parametrize(
    ("value", "node", "how"),
    [
        ("gpu-02.dc1:9100", "gpu-02.dc1", "name"),  # node-exporter by host name
        ("GPU-02.dc1", "gpu-02.dc1", "name"),
        ("10.0.0.5:9100", "gpu-01.dc1", "address"),  # node-exporter by InternalIP
        ("[fd00::7]:9100", "cpu-01.dc1", "address"),
        ("gpu-02", "gpu-02.dc1", "short_name"),  # DCGM's Hostname
        ("cpu-01:9400", "cpu-01.dc1", "short_name"),
        ("login.dc1.example.com", "login", "short_name"),  # an FQDN for a short node name
    ],
)
def test_label_values_find_their_node(value: str, node: str, how: str) -> None:
    assert resolve(value) == identity.Match(node, how)


def test_a_short_name_two_nodes_share_is_refused_not_guessed() -> None:
    m = resolve("gpu-01")  # gpu-01.dc1 and gpu-01.dc2
    assert m.node is None and m.how == "unmatched"
    assert "ambiguous" in m.why and "gpu-01.dc1, gpu-01.dc2" in m.why


def test_a_name_in_another_domain_is_not_a_short_name_match() -> None:
    m = resolve("gpu-02.dc2:9100")
    assert m.node is None and "no inventory node" in m.why
    assert resolve("10.0.0.99:9100").node is None  # an IP never matches by prefix


def test_the_mapping_file_comes_first() -> None:
    node_map = {"gpu-01": "gpu-01.dc2", "10.0.0.5": "gpu-02.dc1", "gpu-02.dc1": "cpu-01.dc1"}
    assert resolve("gpu-01", node_map=node_map) == identity.Match("gpu-01.dc2", "node_map")
    # ahead of a recorded address and even of a node name
    assert resolve("10.0.0.5:9100", node_map=node_map).node == "gpu-02.dc1"
    assert resolve("gpu-02.dc1", node_map=node_map).node == "cpu-01.dc1"
    refused = resolve("x", node_map={"x": "gone-01"})
    assert refused.node is None and "node_map maps it to 'gone-01'" in refused.why


def test_an_address_reused_by_another_node_goes_to_its_latest_holder() -> None:
    later = T0 + timedelta(days=3)
    moved = (*ADDRESSES, ("10.0.0.5", "gpu-02.dc1", later))  # gpu-01.dc1 left, its IP reused
    assert resolve("10.0.0.5:9100", addresses=moved).node == "gpu-02.dc1"
    tie = (*ADDRESSES, ("10.0.0.5", "gpu-02.dc1", T0))
    m = resolve("10.0.0.5:9100", addresses=tie)
    assert m.node is None and "ambiguous: address fits gpu-01.dc1, gpu-02.dc1" in m.why


def test_kube_node_info_maps_ips_only_when_asked_and_to_known_nodes() -> None:
    calls: list[int] = []

    def info() -> list[tuple[str, str]]:
        calls.append(1)
        return [("10.0.9.1", "gpu-02.dc1"), ("10.0.9.2", "gone-01")]

    r = NodeResolver(known(), node_info=info)
    assert r.resolve("gpu-02.dc1:9100").node == "gpu-02.dc1"
    assert calls == []  # resolved before kube_node_info's turn: never fetched
    assert r.resolve("10.0.9.1:9100") == identity.Match("gpu-02.dc1", "kube_node_info")
    assert r.resolve("10.0.9.2:9100").node is None  # kube_node_info names no inventory node
    assert calls == [1]


def test_without_an_inventory_values_stay_raw_unless_kube_node_info_names_them() -> None:
    r = NodeResolver(
        None,
        node_info=lambda: [("10.0.0.5", "gpu-01.dc1")],
        raw=lambda v: pnodes.node_id(v, True),
    )
    assert not r.strict
    assert r.resolve("10.0.0.5:9100") == identity.Match("gpu-01.dc1", "kube_node_info")
    assert r.resolve("gpu-01") == identity.Match("gpu-01.dc1", "short_name")
    assert r.resolve("Other-9:9100") == identity.Match("Other-9", "raw")


# ---------------------------------------------------------------- the mapping file
def test_node_map_file(tmp_path: Path) -> None:
    f = tmp_path / "nodes.csv"
    f.write_text(
        "alias,node_id\n# node-exporter targets\n10.0.0.5:9100,gpu-01.dc1\n\nGPU-1,gpu-01.dc1\n"
    )
    assert identity.read_node_map(str(f)) == {"10.0.0.5": "gpu-01.dc1", "gpu-1": "gpu-01.dc1"}
    for text, message in (
        ("", "empty"),
        ("a,b\n", r"starts with the header alias,node_id"),
        ("alias,node_id\nonly-one\n", r":2: expected alias,node_id"),
        (
            "alias,node_id\nx,a\nx:9100,b\n",
            r":3: alias 'x:9100' maps to 'b' here and to 'a' on line 2",
        ),
    ):
        f.write_text(text)
        with pytest.raises(IngestError, match=message):
            identity.read_node_map(str(f))
    with pytest.raises(IngestError, match="cannot read the node map"):
        identity.read_node_map(str(tmp_path / "missing.csv"))


# ---------------------------------------------------------------- the report
def test_tally_counts_by_label_and_keeps_five_examples() -> None:
    r = NodeResolver(known())
    tally = identity.IdentityTally("dc", ("node", "Hostname", "instance"))
    for label, value in [
        ("node", "gpu-01.dc1"),
        ("Hostname", "gpu-02"),
        ("instance", "10.0.0.6:9100"),
    ]:
        tally.add(label, value, r.resolve(value))
    for i in range(7):
        tally.add("instance", f"10.9.9.{i}:9100", r.resolve(f"10.9.9.{i}:9100"))
    d = tally.to_dict()
    assert (d["mapped"], d["unmatched"], d["nodes"]) == (3, 7, 2)
    assert d["by_label"] == {
        "Hostname": {"mapped": 1, "unmatched": 0},
        "instance": {"mapped": 1, "unmatched": 7},
        "node": {"mapped": 1, "unmatched": 0},
    }
    assert d["by_match"] == {"address": 1, "name": 1, "short_name": 1, "unmatched": 7}
    assert len(d["examples"]) == 5
    assert d["examples"][0]["labels"] == {"instance": "10.9.9.0:9100"}


def test_known_nodes_read_from_a_lake_with_or_without_addresses(
    lake: Lake, clock: FixedClock
) -> None:
    assert identity.known_nodes(lake, "dc") is None
    inv = pl.DataFrame(
        {
            "ts": [T0, T0],
            "node_id": ["gpu-01.dc1", "gpu-02.dc1"],
            "pool": ["p", "p"],
            "sku": ["s", "s"],
            "gpus": [8, 8],
            "cpu_milli": [1000, 1000],
            "memory_mib": [1024, 1024],
            "numa_nodes": [1, 1],
            "region": ["r", "r"],
            "zone": ["z", "z"],
            "spine": ["s1", "s1"],
            "rack": ["r1", "r1"],
        }
    )
    ingest(lake, "dc", [Batch("inventory", inv)], clock=clock, input_name="inv")
    got = identity.known_nodes(lake, "dc")
    assert got == KnownNodes("dc", frozenset({"gpu-01.dc1", "gpu-02.dc1"}), ())
    later = T0 + timedelta(days=1)
    addresses = pl.DataFrame(
        {
            "ts": [T0, later, T0],
            "node_id": ["gpu-01.dc1", "gpu-01.dc1", "gpu-02.dc1"],
            "address": ["10.0.0.1", "10.0.0.5", "10.0.0.6"],
            "kind": ["InternalIP"] * 3,
        }
    )
    ingest(lake, "dc", [Batch("node_addresses", addresses)], clock=clock, input_name="a")
    got = identity.known_nodes(lake, "dc")
    assert got is not None and sorted(got.addresses) == [
        ("10.0.0.5", "gpu-01.dc1", later),  # only each node's latest snapshot
        ("10.0.0.6", "gpu-02.dc1", T0),
    ]


# ---------------------------------------------------------------- Prometheus' side
class StubApi:
    """Answers label-values calls from ``values[(label, match[])]`` and the series API
    from ``info``; records every call."""

    def __init__(
        self, values: Mapping[tuple[str, str], list[str]], info: list[dict[str, str]]
    ) -> None:
        self.values, self.info = values, info
        self.calls: list[tuple[str, Mapping[str, Any]]] = []

    def call(
        self, path: str, params: Mapping[str, Any], *, parse: Callable[[Any], Any], **_: Any
    ) -> Any:
        self.calls.append((path, params))
        if path == "/api/v1/series":
            return parse(self.info)
        label = path.removeprefix("/api/v1/label/").removesuffix("/values")
        return parse(self.values.get((label, params["match[]"]), []))


def config(**extra: str) -> prom.PromConfig:
    only = {f"query.{c}": "" for c in ("cpu_util_pct", "mem_used_bytes", "gpu_util_pct")}
    only |= {f"query.{c}": "" for c in ("gpu_power_w", "ecc_sbe_total", "ecc_dbe_total")}
    only |= {f"query.{c}": "" for c in ("xid_errors_total", "pcie_replay_total")}
    only |= {f"query.{c}": "" for c in ("nic_flaps_total", "disk_realloc_total", "mce_total")}
    only |= {"query.gpu_temp_c": "max by ($node) (DCGM_FI_DEV_GPU_TEMP{$sel})"}
    opts = IngestOptions(clock=FixedClock(T0), start=T0, end=T0, extra={**only, **extra})
    return prom.config_from_options("http://p:9090", opts)


def test_each_series_is_asked_for_under_the_first_node_label_it_carries() -> None:
    cfg = config()
    api = StubApi(
        {
            ("Hostname", '{__name__=~"DCGM_FI_DEV_GPU_TEMP", node="", kubernetes_node=""}'): [
                "gpu-02"
            ],
            (
                "instance",
                '{__name__=~"DCGM_FI_DEV_GPU_TEMP", node="", kubernetes_node="", Hostname=""}',
            ): ["10.0.0.5:9400", "10.0.0.99:9400"],
            ("node", '{__name__=~"kube_node_status_condition"}'): ["gpu-01.dc1", "cpu-01.dc1"],
        },
        info=[],
    )
    plan = pnodes.plan_nodes(api, cfg, known())
    assert plan.nodes == ["cpu-01.dc1", "gpu-01.dc1", "gpu-02.dc1"]
    temp, ready = (q for q in cfg.queries if q.column in ("gpu_temp_c", "node_ready"))
    assert plan.selectors(temp, ["gpu-01.dc1", "gpu-02.dc1"]) == [
        ("Hostname", 'Hostname=~"gpu\\\\-02", node="", kubernetes_node=""'),
        (
            "instance",
            'instance=~"10\\\\.0\\\\.0\\\\.5:9400", node="", kubernetes_node="", Hostname=""',
        ),
    ]
    assert plan.selectors(temp, ["cpu-01.dc1"]) == []  # no GPU series for it
    assert plan.selectors(ready, ["cpu-01.dc1"]) == [("node", 'node=~"cpu\\\\-01\\\\.dc1"')]
    report = plan.tally.to_dict()
    assert (report["mapped"], report["unmatched"]) == (4, 1)
    assert report["examples"] == [
        {
            "labels": {"instance": "10.0.0.99:9400"},
            "why": "no inventory node has this name, address or short name",
        }
    ]
    # kube_node_info was asked only for the value nothing else resolved
    assert [p for p, _ in api.calls].count("/api/v1/series") == 1


def test_one_label_reads_every_series_that_carries_it() -> None:
    cfg = config(node_label="instance", node_info="")
    api = StubApi({("instance", '{__name__=~"DCGM_FI_DEV_GPU_TEMP"}'): ["gpu-01.dc1:9400"]}, [])
    plan = pnodes.plan_nodes(api, cfg, None)
    temp = next(q for q in cfg.queries if q.column == "gpu_temp_c")
    assert plan.selectors(temp, plan.nodes) == [("instance", 'instance=~"gpu\\\\-01\\\\.dc1:9400"')]
    assert plan.tally.to_dict()["inventory"] is None
    assert plan.tally.to_dict()["by_match"] == {"raw": 1}


def test_nothing_mapping_is_an_error_naming_counts_and_examples() -> None:
    cfg = config()
    api = StubApi(
        {
            (
                "instance",
                '{__name__=~"DCGM_FI_DEV_GPU_TEMP", node="", kubernetes_node="", Hostname=""}',
            ): ["10.9.0.1:9400", "10.9.0.2:9400"]
        },
        info=[{"__name__": "kube_node_info", "node": "other-1", "internal_ip": "10.9.0.1"}],
    )
    with pytest.raises(IngestError) as err:
        pnodes.plan_nodes(api, cfg, known())
    msg = str(err.value)
    assert "none of the 2 node label value(s) found" in msg
    assert "inventory of source 'dc' (5 node(s))" in msg
    assert '{instance="10.9.0.1:9400"}' in msg and "-o node_map=FILE" in msg
    assert '"mapped": 0' in msg and '"unmatched": 2' in msg


def test_label_options_are_checked() -> None:
    with pytest.raises(IngestError, match="node_label='node,,in stance'"):
        config(node_label="node,,in stance")
    with pytest.raises(IngestError, match=r"label\.gpu_temp_c"):
        config(**{"label.gpu_temp_c": "a-b"})
    with pytest.raises(IngestError, match="node_info='kube node info'"):
        config(node_info="kube node info")
    cfg = config(node_label=" node , instance ", inventory_source="k8s")
    assert cfg.node_label == "node,instance" and cfg.inventory_source == "k8s"


def test_an_inventory_source_asked_for_must_exist(lake: Lake, clock: FixedClock) -> None:
    cfg = config(inventory_source="k8s")
    read = prom.StagedRead(cfg, prom.PromClient(cfg), lambda src: identity.known_nodes(lake, src))
    with pytest.raises(IngestError, match="no inventory of source 'k8s'"):
        list(read.batches())
