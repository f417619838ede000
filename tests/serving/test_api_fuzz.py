"""API fuzzing in CI, in process (ASGI) on the served workspace; no answer may be a 5xx.

- schemathesis against the server's own OpenAPI document, every operation, with an
  operator token (plans are approved and applied as a dry-run); every answer must also
  match the schema documented for its status. ``benchmarks/bench_reliability.py`` runs
  the same against ``predops serve`` on 127.0.0.1.
- hostile text (:mod:`tests.serving.hostile_requests`): every operation of the API and
  every dashboard page, with any Unicode — lone surrogates included, which schemathesis
  never generates — in every path and query parameter, header, cookie and body string,
  on a server with protected reads (so the session cookie is always read); a redirect
  must stay on this server whatever the ``Host`` header said.

A bounded number of examples per operation, derandomised: CI runs the same cases.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, note, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from predops.serving.sessions import COOKIE
from tests.serving.api import SECRETS, bearer, make_app
from tests.serving.hostile_requests import Operation, api_operations, hostile_request

EXAMPLES = 12
HOSTILE_EXAMPLES = 50
PAGES = (
    Operation.page("GET", "/", query=["pool", "spine", "rack", "gpu_model", "refresh"]),
    Operation.page("GET", "/nodes/{node_id}", query=["range", "from", "to", "refresh"]),
    Operation.page("GET", "/demand", query=["pool", "gpu_model", "resource"]),
    Operation.page("GET", "/demand/{series_id}", query=["range", "from", "to"]),
    Operation.page("GET", "/capacity", query=["plan_id", "pool", "gpu_model"]),
    Operation.page("GET", "/plans"),
    Operation.page("GET", "/plans/latest", query=["kind", "pool", "rack", "state"]),
    Operation.page("GET", "/plans/{plan_id}"),
    Operation.page("GET", "/models", query=["refresh"]),
    Operation.page("GET", "/models/"),  # answered with a redirect to /models
    Operation.page("GET", "/static/{name}"),
    Operation.page("GET", "/favicon.ico"),
    Operation.page("GET", "/login", query=["next"]),
    Operation.page("POST", "/login", form=["token", "next"]),
    Operation.page("POST", "/logout"),
    Operation.page("GET", "/openapi.json"),
    Operation.page("GET", "/docs"),
)
"""The routes outside the OpenAPI document (dashboards, sign-in, docs)."""


def _hypothesis(examples: int) -> Any:
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
        database=None,
    )


@pytest.fixture(scope="module")
def api_schema(served_workspace: Path, shared_data: Path) -> Iterator[Any]:
    app = make_app(served_workspace, shared_data)
    with TestClient(app):  # runs the lifespan: both champions loaded
        yield schemathesis.openapi.from_asgi("/openapi.json", app)


def test_no_server_error_and_every_answer_matches_its_schema(api_schema: Any) -> None:
    # One hypothesis run per operation (schemathesis's pytest fixture loader does not
    # work with this pytest), so a failure names its operation.
    tested, cases = [], []
    for result in api_schema.get_all_operations():
        operation = result.ok()

        @given(case=operation.as_strategy())
        @_hypothesis(EXAMPLES)
        def fuzz(case: Any) -> None:
            cases.append(case.operation.label)
            case.call_and_validate(
                headers=bearer("operator"),
                checks=[not_a_server_error, response_schema_conformance],
            )

        fuzz()
        tested.append(operation.label)
    assert len(tested) >= 10, tested
    assert len(cases) >= 5 * len(tested), len(cases)  # not a run that generated nothing


@pytest.fixture(scope="module")
def protected_client(served_workspace: Path, shared_data: Path) -> Iterator[TestClient]:
    app = make_app(served_workspace, shared_data, protect_reads=True)
    with TestClient(app, follow_redirects=False) as c:
        yield c


def _known_ids(c: TestClient) -> dict[str, list[str]]:
    """Real ids of the served workspace, so some requests get past the lookups."""
    auth = bearer("operator")
    plan = c.get("/v1/plans/latest", headers=auth).json()["plan_id"]
    node = c.get("/v1/failure/risk", params={"limit": 1}, headers=auth).json()["items"]
    series = c.post("/v1/demand/forecast", json={"horizons": [1]}, headers=auth).json()
    return {
        "plan_id": [plan],
        "node_id": [n["node_id"] for n in node],
        "series_id": [s["series_id"] for s in series["series"]][:2],
        "name": ["dash.css"],
        "token": [SECRETS["viewer"]],
        "next": ["/", "/models"],
    }


def _valid_bodies(c: TestClient, known: dict[str, list[str]]) -> dict[str, list[Any]]:
    """Bodies each operation accepts, by ``METHOD path``: the fuzzer makes their strings
    hostile (a request that fails on its shape never reaches the code behind it)."""
    features = c.get("/v1/failure/features", headers=bearer("operator")).json()
    vector: dict[str, Any] = dict.fromkeys(features["numeric"], 0.5)
    vector.update({f: levels[0] for f, levels in features["categorical"].items() if levels})
    return {
        "POST /v1/failure/score": [
            {"node_ids": known["node_id"], "explain": 1},
            {"nodes": [{"node_id": "x", "features": vector}], "explain": 1},
        ],
        "POST /v1/demand/forecast": [
            {"series_ids": known["series_id"], "horizons": [1], "quantiles": ["p50"]}
        ],
        "POST /v1/plans/{plan_id}/approve": [{"comment": "looks right"}],
    }


def _hostile_run(c: TestClient, op: Operation, strategy: Any, sent: list[str]) -> None:
    """One hypothesis run of ``op`` (a failure names its operation)."""

    @given(request=strategy)
    @_hypothesis(HOSTILE_EXAMPLES)
    def fuzz(request: dict[str, Any]) -> None:
        note(f"{request}")  # printed with a failure: exceptions do not show the request
        c.cookies.clear()  # a sign-in by an earlier example must not carry over
        r = c.request(**request)
        sent.append(f"{op.method} {op.path}")
        assert r.status_code < 500, (request, r.status_code, r.text[:300])
        location = r.headers.get("location", "/")  # a redirect stays on this server
        assert location.startswith("/") and not location.startswith("//"), location

    fuzz()


def test_hostile_text_anywhere_is_never_a_server_error(protected_client: TestClient) -> None:
    c = protected_client
    openapi = c.get("/openapi.json").json()
    known = _known_ids(c)
    valid = [f"Bearer {SECRETS[who]}" for who in ("viewer", "operator")]
    defs = openapi["components"]["schemas"]
    bodies = _valid_bodies(c, known)
    operations = [*api_operations(openapi), *PAGES]
    sent: list[str] = []
    for op in operations:
        strategy = hostile_request(
            op,
            known=known,
            defs=defs,
            authorizations=valid,
            cookie=COOKIE,
            bodies=bodies.get(f"{op.method} {op.path}", ()),
        )
        _hostile_run(c, op, strategy, sent)
    assert len(set(sent)) == len(operations) >= 25, sorted(set(sent))
    assert len(sent) >= 10 * len(operations), len(sent)
