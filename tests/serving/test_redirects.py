"""Redirects are paths on this server: never built from a hostile ``Host`` header."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from predops.serving.app import create_app
from predops.serving.config import ServeConfig
from predops.serving.redirects import path_only
from tests.serving.conftest import settings_for


@pytest.mark.parametrize(
    ("location", "path"),
    [
        ("http://evil.example/models", "/models"),
        ("https://evil.example:8443/a/b?x=1#f", "/a/b?x=1#f"),
        ("//evil.example/x", "/x"),
        ("http://evil.example//other.example/x", "/other.example/x"),
        ("http://evil.example", "/"),
        ("http://[/models", "/"),
        ("/login?next=%2Fmodels", "/login?next=%2Fmodels"),
        ("/plans/latest", "/plans/latest"),
    ],
)
def test_path_only(location: str, path: str) -> None:
    assert path_only(location) == path


@pytest.mark.parametrize("protect_reads", [False, True])
@pytest.mark.parametrize(
    ("asked", "to"),
    [("/models/", "/models"), ("/v1/plans/latest/", "/v1/plans/latest"), ("/plans/", "/plans")],
)
def test_a_hostile_host_header_never_reaches_a_redirect(
    tmp_path: Path, shared_data: Path, protect_reads: bool, asked: str, to: str | None
) -> None:
    config = ServeConfig(protect_reads=protect_reads)
    app = create_app(settings_for(tmp_path / "ws", shared_data), config, reload_in_background=False)
    with TestClient(app, follow_redirects=False) as c:
        for host in ("evil.example", "evil.example:443", "[", "127.0.0.1:8080"):
            r = c.get(asked, headers={"Host": host})
            assert r.status_code in (303, 307, 308), (host, r.status_code)
            location = r.headers["location"]
            assert location.startswith("/") and not location.startswith("//"), location
            assert "evil" not in location
            if to is not None:
                assert location == to
