"""/healthz and /readyz on an empty workspace and on a served one."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from predops.serving.app import create_app
from tests.serving.conftest import settings_for


def test_empty_workspace_serves_and_says_the_models_are_missing(
    tmp_path: Path, shared_data: Path
) -> None:
    """Day one: no model yet, but the server serves (dashboards, plans, metrics) and is
    ready; a probe that needs the models asks require=models."""
    app = create_app(settings_for(tmp_path / "ws", shared_data), reload_in_background=False)
    with TestClient(app) as client:
        assert client.get("/healthz").json() == {"status": "ok"}
        r = client.get("/readyz")
        assert r.status_code == 200
        body = r.json()
        assert body["ready"] is True and body["models_ready"] is False
        assert "node_failure: no model loaded" in body["problems"]
        assert "no registered model" in body["models"]["node_failure"]["last_error"]
        strict = client.get("/readyz", params={"require": "models"})
        assert strict.status_code == 503 and strict.json()["ready"] is False
        assert client.get("/readyz", params={"require": "nonsense"}).status_code == 422
        assert client.get("/").status_code == 200  # the dashboards are up


def test_served_workspace_is_ready_with_both_champions(
    served_workspace: Path, shared_data: Path
) -> None:
    app = create_app(settings_for(served_workspace, shared_data), reload_in_background=False)
    with TestClient(app) as client:
        r = client.get("/readyz", params={"require": "models"})
        assert r.status_code == 200, r.json()
        assert r.json()["models_ready"] is True
        models = r.json()["models"]
        assert models["node_failure"]["version"] == "1"
        assert models["demand"]["provenance"]["model_name"] == "predops.demand.hourly"
