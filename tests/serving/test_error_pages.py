"""A browser's failed page request gets a page with the navigation and the reason; the
API (and any client asking for JSON) keeps the one JSON error body."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from predops.pipelines.workspace.settings import Settings
from predops.serving.app import create_app

HTML = {"accept": "text/html,application/xhtml+xml"}


def _client(tmp_path: Path) -> TestClient:
    settings = Settings(workspace=tmp_path / "ws", shared_data=tmp_path / "none")
    return TestClient(create_app(settings, reload_in_background=False))


def test_unknown_node_is_a_page_for_a_browser(tmp_path: Path) -> None:
    with _client(tmp_path) as client:
        page = client.get("/nodes/node-does-not-exist", headers=HTML)
        assert page.status_code == 404
        assert page.headers["content-type"].startswith("text/html")
        assert 'class="top"' in page.text
        assert "no node &#39;node-does-not-exist&#39;" in page.text
        assert 'href="/"' in page.text
        bad = client.get("/nodes/bad id!", headers=HTML)
        assert bad.status_code == 422 and "Not a valid request" in bad.text


def test_api_and_json_clients_keep_the_json_error(tmp_path: Path) -> None:
    with _client(tmp_path) as client:
        res = client.get("/nodes/node-does-not-exist", headers={"accept": "application/json"})
        assert res.status_code == 404 and "no node" in res.json()["error"]
        api = client.get("/v1/nope", headers=HTML)
        assert api.status_code == 404 and api.headers["content-type"] == "application/json"
