"""API fuzzing in CI: schemathesis against the server's own OpenAPI document, every
operation, in process (ASGI) on the served workspace with an operator token (plans are
approved and applied as a dry-run). A bounded number of examples per operation; no answer
may be a 5xx, and every answer must match the schema documented for its status.
``benchmarks/bench_reliability.py`` runs the same against ``predops serve`` on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from tests.serving.api import bearer, make_app

EXAMPLES = 12


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
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
            database=None,
        )
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
