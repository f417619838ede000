"""``/docs`` (Swagger UI) in a real Chromium with every request that
leaves the server refused: it draws the API's operations from the installed package's
files, with nothing fetched from a CDN."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from predops.pipelines.workspace.settings import Settings
from predops.serving.app import create_app
from tests.serving.browser.conftest import _serving, browser_page

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def docs_url(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Iterator[str]:
    """A server over an empty workspace: the documentation needs no data."""
    ws = tmp_path_factory.mktemp("api-docs")
    app = create_app(Settings(workspace=ws, shared_data=shared_data), reload_in_background=False)
    with _serving(app) as url:
        yield url


def _offline(ctx: Any, base_url: str) -> list[str]:
    """Abort every request not to ``base_url``; return the list of those refused."""
    refused: list[str] = []

    def route(r: Any) -> None:
        if r.request.url.startswith(base_url):
            r.continue_()
        else:
            refused.append(r.request.url)
            r.abort()

    ctx.route("**/*", route)
    return refused


def _operations(base_url: str) -> int:
    with urllib.request.urlopen(f"{base_url}/openapi.json", timeout=30) as r:
        doc = json.load(r)
    return sum(len(methods) for methods in doc["paths"].values())


def test_swagger_ui_renders_offline(browser: Any, docs_url: str, artifacts: Path) -> None:
    path, operation = "/docs", ".opblock"
    expected = _operations(docs_url)
    with browser_page(browser, docs_url) as (ctx, page, errors):
        refused = _offline(ctx, docs_url)
        resp = page.goto(path)
        assert resp is not None and resp.status == 200
        page.wait_for_selector(operation, timeout=30_000)
        page.screenshot(path=str(artifacts / f"api{path.replace('/', '-')}.png"))
        drawn = page.locator(operation).count()
        assert refused == [], f"{path} tried the network: {refused}"
        assert errors == [], f"{path}: errors in the page: {errors}"
    assert expected > 5
    assert drawn == expected, f"{path} drew {drawn} of the {expected} operations"


def test_redoc_is_not_served(docs_url: str) -> None:
    """FastAPI's CDN-backed ReDoc page is switched off (see ``serving.api_docs``)."""
    try:
        urllib.request.urlopen(f"{docs_url}/redoc", timeout=30)
    except urllib.error.HTTPError as exc:
        assert exc.code == 404
    else:
        raise AssertionError("/redoc is served")
