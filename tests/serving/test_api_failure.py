"""/v1/failure/*: values equal the served model's own outputs; limits and bad input get
4xx with the offending field, never a 500."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from fastapi.testclient import TestClient

from predops.pipelines.jobs import failure as failure_jobs
from predops.pipelines.workspace.feature_store import FeatureStore
from predops.serving.errors import error_response
from predops.serving.schemas import ScoreResponse
from tests.serving.api import fresh_clock, make_app
from tests.serving.conftest import settings_for


@pytest.fixture(scope="module")
def client(served_workspace: Path, shared_data: Path) -> Iterator[TestClient]:
    app = make_app(served_workspace, shared_data, max_batch=500, max_body_bytes=200_000)
    with TestClient(app) as c:
        yield c


@pytest.fixture(scope="module")
def model(served_workspace: Path, shared_data: Path) -> Any:
    fm, _ = failure_jobs.load_model(settings_for(served_workspace, shared_data))
    return fm


@pytest.fixture(scope="module")
def online(served_workspace: Path) -> pl.DataFrame:
    clock = fresh_clock(served_workspace)
    store = FeatureStore(served_workspace / "features")
    return store.read_online("node", now=clock.now(), max_age=timedelta(minutes=30)).frame


def test_score_by_id_equals_the_models_predict_risk(
    client: TestClient, model: Any, online: pl.DataFrame
) -> None:
    ids = online["node_id"].to_list()[:5]
    r = client.post("/v1/failure/score", json={"node_ids": ids, "explain": 5})
    assert r.status_code == 200, r.json()
    body = r.json()
    ScoreResponse.model_validate(body)  # the route serialises without re-validating
    assert body["model"]["model_version"] == "1"
    assert body["online_as_of"] is not None
    rows = online.filter(pl.col("node_id").is_in(ids))
    expected = {
        (x.node_id, x.horizon.total_seconds() / 3600): x
        for x in model.predict_risk(rows, reasons_for=None)
    }
    assert [x["node_id"] for x in body["results"]] == ids
    for res in body["results"]:
        assert res["status"] == "scored" and res["source"] == "online"
        assert len(res["risks"]) == len(model.horizons)
        for risk in res["risks"]:
            want = expected[(res["node_id"], risk["horizon_hours"])]
            assert risk["p_fail"] == pytest.approx(want.p_fail, abs=1e-12)
            assert [x["text"] for x in risk["reasons"]] == [x.text for x in want.reasons]


def test_explain_limits_reasons_to_the_riskiest(client: TestClient, online: pl.DataFrame) -> None:
    ids = online["node_id"].to_list()[:20]
    body = client.post("/v1/failure/score", json={"node_ids": ids, "explain": 2}).json()
    for j in range(3):
        ps = [res["risks"][j]["p_fail"] for res in body["results"]]
        explained = [bool(res["risks"][j]["reasons"]) for res in body["results"]]
        assert sum(explained) == 2
        assert min(p for p, e in zip(ps, explained, strict=True) if e) >= max(
            p for p, e in zip(ps, explained, strict=True) if not e
        )


def vector(online: pl.DataFrame, model: Any, i: int = 0) -> dict[str, Any]:
    row = online.row(i, named=True)
    out = {}
    for f in model.base_features:
        v = row[f]
        out[f] = None if isinstance(v, float) and math.isnan(v) else v
    return out


def test_score_by_vector_equals_score_by_id(
    client: TestClient, model: Any, online: pl.DataFrame
) -> None:
    node = online["node_id"][3]
    vec = vector(online, model, 3)
    r = client.post(
        "/v1/failure/score",
        json={"nodes": [{"node_id": "x", "features": vec}], "node_ids": [node], "explain": 0},
    )
    assert r.status_code == 200, r.json()
    ScoreResponse.model_validate(r.json())
    by_id, by_vec = r.json()["results"]
    assert by_vec["source"] == "body" and by_vec["node_id"] == "x"
    for a, b in zip(by_id["risks"], by_vec["risks"], strict=True):
        assert a["p_fail"] == pytest.approx(b["p_fail"], abs=1e-12)
    want = model.predict_proba(online.slice(3, 1))[0]
    assert [x["p_fail"] for x in by_vec["risks"]] == pytest.approx(list(want), abs=1e-12)


def test_horizon_subset(client: TestClient, online: pl.DataFrame) -> None:
    body = client.post(
        "/v1/failure/score", json={"node_ids": [online["node_id"][0]], "horizons_hours": [24]}
    ).json()
    assert [x["horizon_hours"] for x in body["results"][0]["risks"]] == [24.0]


def test_unknown_ids_are_404_naming_them(client: TestClient, online: pl.DataFrame) -> None:
    r = client.post("/v1/failure/score", json={"node_ids": [online["node_id"][0], "nope-1"]})
    assert r.status_code == 404
    assert r.json() == {"error": "1 unknown node id(s): nope-1", "field": "body.node_ids"}


def test_stale_nodes_say_so(
    served_workspace: Path, shared_data: Path, online: pl.DataFrame
) -> None:
    clock = fresh_clock(served_workspace)
    clock.advance(timedelta(hours=2))
    with TestClient(make_app(served_workspace, shared_data, clock=clock)) as c:
        body = c.post("/v1/failure/score", json={"node_ids": [online["node_id"][0]]}).json()
        res = body["results"][0]
        assert res["status"] == "stale" and res["risks"] == [] and res["last_sample_at"]
        page = c.get("/v1/failure/risk").json()
        assert page["total"] == 0 and page["stale"] == online.height


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"gpu_temp_c__max_6h": "NaN"}, "gpu_temp_c__max_6h"),
        ({"gpu_temp_c__max_6h": "Infinity"}, "gpu_temp_c__max_6h"),
        ({"gpu_temp_c__max_6h": "1e400"}, "gpu_temp_c__max_6h"),
        ({"gpu_temp_c__max_6h": "1e300"}, "gpu_temp_c__max_6h"),
        ({"gpu_temp_c__max_6h": "1" + "0" * 400}, "gpu_temp_c__max_6h"),
        ({"gpu_temp_c__max_6h": '"hot"'}, "gpu_temp_c__max_6h"),
        ({"node__pool": "3"}, "node__pool"),
        ({"no_such_feature": "1"}, "no_such_feature"),
    ],
)
def test_bad_feature_values_are_422_naming_the_field(
    client: TestClient, model: Any, online: pl.DataFrame, change: dict[str, str], field: str
) -> None:
    vec = vector(online, model)
    assert "gpu_temp_c__max_6h" in vec
    text = json.dumps({"nodes": [{"features": vec}]})
    for k, raw in change.items():
        if k in vec:
            text = text.replace(f'"{k}": {json.dumps(vec[k])}', f'"{k}": {raw}')
        else:
            text = text.replace('"features": {', f'"features": {{"{k}": {raw}, ')
    r = client.post("/v1/failure/score", content=text, headers={"Content-Type": "application/json"})
    assert r.status_code == 422, r.text
    assert r.json()["field"].endswith(f"features.{field}"), r.json()


def test_missing_feature_is_422(client: TestClient, model: Any, online: pl.DataFrame) -> None:
    vec = vector(online, model)
    del vec["node__age_days"]
    r = client.post("/v1/failure/score", json={"nodes": [{"features": vec}]})
    assert r.status_code == 422
    assert r.json()["field"] == "body.nodes.0.features.node__age_days"


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({}, 422, "body.node_ids"),
        ({"node_ids": ["n"] * 501}, 413, "body.node_ids"),
        ({"node_ids": ["n"], "horizons_hours": [5]}, 422, "body.horizons_hours.0"),
        ({"node_ids": ["n"], "explain": -1}, 422, "body.explain"),
        ({"node_ids": "n"}, 422, "body.node_ids"),
        ({"node_ids": ["n"], "extra": 1}, 422, "body.extra"),
    ],
)
def test_bad_requests(client: TestClient, body: Any, status: int, field: str) -> None:
    r = client.post("/v1/failure/score", json=body)
    assert r.status_code == status, r.text
    assert r.json()["field"] == field


@pytest.mark.parametrize(
    "content",
    [b"{not json", b"\xff\xfe\x00", b"[" * 50_000 + b"]" * 50_000, b"x" * 300_000],
)
def test_hostile_bodies_get_4xx(client: TestClient, content: bytes) -> None:
    r = client.post(
        "/v1/failure/score", content=content, headers={"Content-Type": "application/json"}
    )
    assert r.status_code in (413, 422), r.text
    assert set(r.json()) == {"error", "field"}
    assert r.status_code == 413 or len(content) < 200_000


@pytest.mark.parametrize(
    ("content", "field"),
    [
        (rb'{"node_ids": ["\ud800"]}', "body.node_ids.0"),
        (rb'{"node_ids": ["n", "a\udfff\ud800b"]}', "body.node_ids.1"),
        (rb'{"nodes": [{"features": {"\ud800": 1}}]}', "body.nodes.0.features."),  # the key
        (rb'{"nodes": [{"features": {"f": "\udc80"}}]}', "body.nodes.0.features.f"),
    ],
    ids=["node_id", "second_node_id", "feature_name", "feature_value"],
)
def test_lone_surrogates_are_422_naming_the_field(
    client: TestClient, content: bytes, field: str
) -> None:
    # JSON may spell a lone surrogate as an escape; it is not text, so it is refused
    # where it comes in (it used to reach the 404 message, which cannot be encoded: 500).
    r = client.post(
        "/v1/failure/score", content=content, headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["field"].startswith(field) and "surrogate" in body["error"], body


def test_an_error_body_always_encodes() -> None:
    # The net under the boundary check: an error quoting a string that is not text
    # still answers, with the same JSON value in ASCII escapes.
    r = error_response(404, "unknown node id(s): \ud800", "body.node_ids.\udfff")
    assert r.body.isascii()
    assert json.loads(r.body) == {
        "error": "unknown node id(s): \ud800",
        "field": "body.node_ids.\udfff",
    }
    assert json.loads(error_response(404, "nœud", None).body)["error"] == "nœud"


def test_fleet_risk_sorted_filtered_paged(
    client: TestClient, model: Any, online: pl.DataFrame
) -> None:
    p24 = model.predict_proba(online)[:, list(model.horizons).index(timedelta(hours=24))]
    want = dict(zip(online["node_id"].to_list(), p24, strict=True))
    first = client.get("/v1/failure/risk", params={"limit": 10}).json()
    assert first["total"] == online.height and first["horizon_hours"] == 24.0
    ps = [x["p_fail"] for x in first["items"]]
    assert ps == sorted(ps, reverse=True)
    assert ps[0] == pytest.approx(max(p24), abs=1e-12)
    for x in first["items"]:
        assert x["p_fail"] == pytest.approx(want[x["node_id"]], abs=1e-12)
        assert x["reasons"]
    second = client.get("/v1/failure/risk", params={"limit": 10, "offset": 10}).json()
    assert first["next_offset"] == 10
    assert not {x["node_id"] for x in first["items"]} & {x["node_id"] for x in second["items"]}
    assert second["items"][0]["p_fail"] <= ps[-1]

    pool = online["node__pool"].cast(pl.String)[0]
    in_pool = client.get("/v1/failure/risk", params={"pool": pool, "limit": 1000}).json()
    assert in_pool["total"] == int((online["node__pool"].cast(pl.String) == pool).sum())
    assert {x["pool"] for x in in_pool["items"]} == {pool}
    rack = online["node__rack"].cast(pl.String)[0]
    in_rack = client.get("/v1/failure/risk", params={"rack": rack, "reasons": False}).json()
    assert {x["rack"] for x in in_rack["items"]} == {rack}
    assert all(x["reasons"] == [] for x in in_rack["items"])


def test_fleet_risk_is_cached_per_model_and_snapshot(client: TestClient) -> None:
    ctx = client.app.state.ctx  # type: ignore[attr-defined]
    builds = ctx.fleet.builds
    client.get("/v1/failure/risk")
    client.get("/v1/failure/risk", params={"offset": 5})
    client.post("/v1/failure/score", json={"node_ids": [ctx.online._snapshot.node_ids[0]]})
    assert ctx.fleet.builds == builds


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"limit": 0}, "query.limit"),
        ({"limit": "ten"}, "query.limit"),
        ({"offset": -1}, "query.offset"),
        ({"horizon_hours": 5}, "query.horizon_hours"),
    ],
)
def test_fleet_risk_bad_query(client: TestClient, params: dict[str, Any], field: str) -> None:
    r = client.get("/v1/failure/risk", params=params)
    assert r.status_code == 422 and r.json()["field"] == field


def test_features_endpoint_lists_what_a_vector_needs(client: TestClient, model: Any) -> None:
    body = client.get("/v1/failure/features").json()
    assert sorted(body["numeric"] + list(body["categorical"])) == sorted(model.base_features)
    assert body["categorical"]["node__pool"]


def test_openapi_documents_every_endpoint(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    paths = doc["paths"]
    for path in (
        "/v1/failure/score",
        "/v1/failure/risk",
        "/v1/demand/forecast",
        "/v1/plans/latest",
        "/v1/plans/{plan_id}",
        "/v1/plans/{plan_id}/approve",
        "/v1/plans/{plan_id}/apply",
        "/metrics",
    ):
        assert path in paths, path
    score = paths["/v1/failure/score"]["post"]
    assert "ScoreResponse" in str(score["responses"]["200"])
    assert "ErrorBody" in str(score["responses"]["422"])
    assert "HTTPBearer" in doc["components"]["securitySchemes"]
    assert np.isfinite(len(doc["components"]["schemas"]))


@pytest.mark.parametrize(
    ("feature", "value"),
    [
        ("gpu_temp_c__max_6h", True),
        ("gpu_temp_c__max_6h", "71"),
        ("gpu_temp_c__max_6h", math.nan),
        ("gpu_temp_c__max_6h", -math.inf),
        ("gpu_temp_c__max_6h", 10**400),
        ("gpu_temp_c__max_6h", 1e39),
        ("node__pool", 3),
    ],
)
def test_scorer_names_the_vector_and_feature_of_a_bad_value(
    model: Any, online: pl.DataFrame, feature: str, value: Any
) -> None:
    from predops.models.failure.scorer import FailureScorer, FeatureVectorError

    good = vector(online, model)
    bad = {**good, feature: value}
    with pytest.raises(FeatureVectorError) as err:
        FailureScorer(model).design_vectors([good, bad, good])
    assert (err.value.row, err.value.feature) == (1, feature)


def test_scorer_accepts_numpy_numbers_and_explains_vectors_like_ids(
    client: TestClient, model: Any, online: pl.DataFrame
) -> None:
    from predops.models.failure.scorer import FailureScorer

    scorer = FailureScorer(model)
    vec = vector(online, model, 2)
    as_numpy = {k: np.float64(v) if isinstance(v, float) else v for k, v in vec.items()}
    plain, numpy_typed = scorer.design_vectors([vec]), scorer.design_vectors([as_numpy])
    assert np.array_equal(plain.encoded, numpy_typed.encoded, equal_nan=True)
    node = online["node_id"][2]
    body = {"nodes": [{"features": vec}], "node_ids": [node], "explain": 2}
    by_id, by_vec = client.post("/v1/failure/score", json=body).json()["results"]
    for a, b in zip(by_id["risks"], by_vec["risks"], strict=True):
        assert a["reasons"] and a["reasons"] == b["reasons"]


def test_pyfunc_entry_point_equals_the_models_own_call(model: Any, online: pl.DataFrame) -> None:
    """What MLflow serves: few rows go through the array scorer, many through the frame
    path, an input it cannot take as records falls back; all give the model's numbers."""
    from predops.models.failure.scorer import PYFUNC_RECORD_ROWS, pyfunc_predict

    frame = online.to_pandas()
    for rows in (frame.head(3), frame.head(PYFUNC_RECORD_ROWS + 1)):
        want = model(rows)
        got = pyfunc_predict(model, rows)
        assert list(got.columns) == list(want.columns)
        assert np.allclose(got.to_numpy(), want.to_numpy(), rtol=0, atol=1e-12)
    numeric = next(c for c in model.base_features if frame[c].dtype.kind == "f")
    flags = frame.head(2).astype({numeric: "object"})
    flags[numeric] = [True, False]  # booleans: not a feature vector, the frame path casts
    assert pyfunc_predict(model, flags).shape == (2, len(model.labels))
