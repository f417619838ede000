"""The fake Kubernetes API answers the official client as a real API server would, for the
calls a cordon/drain actuator makes: node patch (cordon) and the Eviction API with
PodDisruptionBudgets (201, 429 when a budget blocks, 500 with two budgets, 404)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from tests.fakes.kube_api import FakeKubeAPI, labels_match
from tests.fakes.kube_objects import make_node, make_pdb, make_pod, write_kubeconfig


@pytest.fixture
def fake() -> Iterator[FakeKubeAPI]:
    pods = [make_pod(f"web-{i}", "shop", node="n1", labels={"app": "web"}) for i in range(3)]
    pods += [
        make_pod("db-0", "shop", node="n1", labels={"app": "db", "tier": "data"}),
        make_pod("batch-0", "jobs", node="n2", labels={"app": "batch"}),
        make_pod("done-0", "shop", node="n1", labels={"app": "web"}, phase="Succeeded"),
    ]
    pdbs = [
        make_pdb(
            "web", "shop", match_labels={"app": "web"}, disruptions_allowed=1, expected=3, healthy=3
        ),
        make_pdb(
            "db", "shop", match_labels={"app": "db"}, disruptions_allowed=0, expected=1, healthy=1
        ),
        make_pdb("data", "shop", match_labels={"tier": "data"}, disruptions_allowed=1),
    ]
    with FakeKubeAPI(nodes=[make_node("n1"), make_node("n2")], pods=pods, pdbs=pdbs) as f:
        yield f


@pytest.fixture
def core(fake: FakeKubeAPI, tmp_path: Path) -> client.CoreV1Api:
    kc = write_kubeconfig(tmp_path / "kubeconfig", fake.url)
    api = config.new_client_from_config(config_file=str(kc), persist_config=False)
    return client.CoreV1Api(api)


def evict(core: client.CoreV1Api, ns: str, name: str) -> None:
    body = client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace=ns))
    core.create_namespaced_pod_eviction(name, ns, body)


def test_cordon_is_a_node_patch(fake: FakeKubeAPI, core: client.CoreV1Api) -> None:
    node = core.patch_node("n1", {"spec": {"unschedulable": True}})
    assert node.spec.unschedulable is True
    assert fake.node("n1")["spec"]["unschedulable"] is True
    assert fake.node("n2")["spec"].get("unschedulable") is None
    req = fake.seen("PATCH")[-1]
    assert req.path == "/api/v1/nodes/n1" and "merge-patch+json" in req.headers["content-type"]
    assert req.body == {"spec": {"unschedulable": True}}
    core.patch_node("n1", {"spec": {"unschedulable": None}})  # uncordon removes the field
    assert "unschedulable" not in fake.node("n1")["spec"]
    with pytest.raises(ApiException) as err:
        core.patch_node("nope", {"spec": {"unschedulable": True}})
    assert err.value.status == 404


def test_eviction_uses_up_the_budget_then_gets_429(
    fake: FakeKubeAPI, core: client.CoreV1Api
) -> None:
    evict(core, "shop", "web-0")
    assert "deletionTimestamp" in fake.pod("shop", "web-0")["metadata"]
    with pytest.raises(ApiException) as err:
        evict(core, "shop", "web-1")
    assert err.value.status == 429
    body = json.loads(err.value.body)
    assert body["reason"] == "TooManyRequests"
    assert body["details"]["causes"][0]["reason"] == "DisruptionBudget"
    assert "deletionTimestamp" not in fake.pod("shop", "web-1")["metadata"]
    web = next(b for b in fake.pdbs if b["metadata"]["name"] == "web")["status"]
    assert (web["disruptionsAllowed"], web["currentHealthy"]) == (0, 2)


def test_eviction_edge_cases(fake: FakeKubeAPI, core: client.CoreV1Api) -> None:
    evict(core, "jobs", "batch-0")  # no budget selects it
    evict(core, "shop", "done-0")  # finished pods are not protected by budgets
    with pytest.raises(ApiException) as two:
        evict(core, "shop", "db-0")  # selected by "db" and "data"
    assert two.value.status == 500 and "more than one" in json.loads(two.value.body)["message"]
    with pytest.raises(ApiException) as missing:
        evict(core, "shop", "nope")
    assert missing.value.status == 404
    assert [r.path for r in fake.seen("POST")][-1] == "/api/v1/namespaces/shop/pods/nope/eviction"


def test_selectors_on_lists(fake: FakeKubeAPI, core: client.CoreV1Api) -> None:
    on_n1 = core.list_pod_for_all_namespaces(field_selector="spec.nodeName=n1")
    assert sorted(p.metadata.name for p in on_n1.items) == [
        "db-0",
        "done-0",
        "web-0",
        "web-1",
        "web-2",
    ]
    web = core.list_namespaced_pod("shop", label_selector="app=web,!tier")
    assert len(web.items) == 4
    assert labels_match(
        {"matchExpressions": [{"key": "app", "operator": "In", "values": ["db", "x"]}]},
        {"app": "db"},
    )
    assert not labels_match(None, {"app": "db"})
