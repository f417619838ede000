"""A shared session key: ``[server] session_key_file`` makes replicas that read the same
file accept each other's sign-ins; replicas with different keys (or the default random
key per process) do not; a missing or short key file stops the start naming the key."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from predops.core.clock import FixedClock
from predops.pipelines.workspace.config import ConfigError
from predops.serving.app import create_app
from predops.serving.config import ServeConfig, load_serve_config, token_digest
from predops.serving.sessions import COOKIE, MIN_KEY_BYTES, read_session_key
from tests.serving.conftest import settings_for

VIEWER_SECRET = "viewer-secret-0123456789"
T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)


def key_file(path: Path, key: str | None = None) -> Path:
    path.write_text((key or secrets.token_urlsafe(48)) + "\n")
    return path


def server_config(tmp_path: Path, key: Path | None) -> ServeConfig:
    """What `predops serve --config` would load: reads protected, one viewer token and,
    when given, the session key file."""
    line = f'session_key_file = "{key}"\n' if key is not None else ""
    toml = tmp_path / f"predops-{secrets.token_hex(4)}.toml"
    toml.write_text(
        "[server]\nprotect_reads = true\n" + line + '\n[[tokens]]\nname = "vera"\n'
        f'role = "viewer"\nsha256 = "{token_digest(VIEWER_SECRET)}"\n'
    )
    return load_serve_config(toml, {})


def replica(tmp_path: Path, shared_data: Path, config: ServeConfig) -> TestClient:
    """One server process on the (empty) workspace every replica mounts."""
    app = create_app(
        settings_for(tmp_path / "ws", shared_data),
        config,
        clock=FixedClock(T0),
        reload_in_background=False,
    )
    return TestClient(app, follow_redirects=False)


def signed_in_cookie(c: TestClient) -> str:
    r = c.post(
        "/login",
        content=f"token={VIEWER_SECRET}&next=/models",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert r.status_code == 303, r.text[:300]
    return str(r.cookies[COOKIE])


def page_with(c: TestClient, cookie: str) -> int:
    c.cookies.clear()
    c.cookies.set(COOKIE, cookie)
    return c.get("/models").status_code


def test_replicas_with_one_key_file_share_sign_ins(tmp_path: Path, shared_data: Path) -> None:
    key = key_file(tmp_path / "session-key")
    with (
        replica(tmp_path, shared_data, server_config(tmp_path, key)) as a,
        replica(tmp_path, shared_data, server_config(tmp_path, key)) as b,
    ):
        cookie = signed_in_cookie(a)
        assert page_with(a, cookie) == 200
        assert page_with(b, cookie) == 200  # signed in on a, served by b
        assert page_with(a, signed_in_cookie(b)) == 200


def test_replicas_with_other_keys_or_none_do_not(tmp_path: Path, shared_data: Path) -> None:
    mine = key_file(tmp_path / "mine")
    theirs = key_file(tmp_path / "theirs")
    with (
        replica(tmp_path, shared_data, server_config(tmp_path, mine)) as a,
        replica(tmp_path, shared_data, server_config(tmp_path, theirs)) as b,
        replica(tmp_path, shared_data, server_config(tmp_path, None)) as c,
        replica(tmp_path, shared_data, server_config(tmp_path, None)) as d,
    ):
        cookie = signed_in_cookie(a)
        assert page_with(b, cookie) == 303  # back to /login
        assert page_with(c, cookie) == 303
        random_key_cookie = signed_in_cookie(c)
        assert page_with(c, random_key_cookie) == 200
        assert page_with(d, random_key_cookie) == 303  # random keys differ per process


def test_the_key_is_the_file_without_surrounding_whitespace(tmp_path: Path) -> None:
    key = "k" * MIN_KEY_BYTES
    assert read_session_key(key_file(tmp_path / "key", f"  {key}\n")) == key.encode()
    cfg = server_config(tmp_path, key_file(tmp_path / "key2", key))
    assert cfg.session_key == key.encode()
    assert key not in repr(cfg)


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (None, "no such file"),
        ("", "holds 0 bytes"),
        ("x" * (MIN_KEY_BYTES - 1) + "\n", f"holds {MIN_KEY_BYTES - 1} bytes"),
    ],
)
def test_a_missing_or_short_key_file_stops_the_start(
    tmp_path: Path, content: str | None, needle: str
) -> None:
    path = tmp_path / "session-key"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError) as err:
        server_config(tmp_path, path)
    message = str(err.value)
    assert "[server] session_key_file" in message and str(path) in message
    assert needle in message
    if content:
        assert content.strip() not in message  # never the key itself


def test_the_environment_can_name_the_key_file(tmp_path: Path) -> None:
    path = key_file(tmp_path / "session-key")
    cfg = load_serve_config(None, {"PREDOPS_SERVER__SESSION_KEY_FILE": str(path)})
    assert cfg.session_key == path.read_bytes().strip()
    assert load_serve_config(None, {}).session_key is None
