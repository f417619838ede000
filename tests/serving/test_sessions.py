"""Dashboard sign-in: with ``protect_reads`` every page needs a viewer session (or a
bearer token), the cookie is signed, expiring and HttpOnly / SameSite=Strict, the
redirect after sign-in stays on this server, and a session never approves a plan."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import unquote

import pytest
from fastapi.testclient import TestClient

from predops.serving.sessions import COOKIE, SESSION_TTL, SessionSigner
from tests.serving.api import SECRETS, bearer, fresh_clock, make_app

PAGES = ("/", "/demand", "/capacity", "/plans/latest", "/models")
T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)


def test_signer_round_trip_and_refusals() -> None:
    signer = SessionSigner()
    value = signer.issue("vera", T0 + timedelta(hours=1))
    session = signer.verify(value, T0)
    assert session is not None and session.token_name == "vera"
    assert session.expires_at == T0 + timedelta(hours=1)
    assert signer.verify(value, T0 + timedelta(hours=1)) is None  # expired
    assert SessionSigner().verify(value, T0) is None  # another server's key
    name, expiry, mac = value.split(".")
    forged_name = signer.issue("otto", T0).split(".")[0]
    for bad in (
        f"{forged_name}.{expiry}.{mac}",  # someone else's name
        f"{name}.{int(expiry) + 86400}.{mac}",  # a longer session
        f"{name}.{expiry}.{mac[:-1]}{'1' if mac.endswith('0') else '0'}",  # one hex digit off
        f"{name}.{expiry}",
        "",
        "a.b.c.d",
        f"{name}.not-a-number.{signer.issue('x', T0).split('.')[2]}",
        f"{name}.{expiry}.é",  # not ASCII: compare_digest refuses such a str
        f"{name}.{expiry}.{mac[:-1]}é",
        f"é.{expiry}.{mac}",
        f"{name}.{expiry}.\ud800",  # a lone surrogate cannot even be encoded
    ):
        assert signer.verify(bad, T0) is None, bad


@pytest.fixture(scope="module")
def protected(served_workspace: Path, shared_data: Path) -> Iterator[tuple[TestClient, object]]:
    clock = fresh_clock(served_workspace)
    app = make_app(served_workspace, shared_data, clock=clock, protect_reads=True)
    with TestClient(app, follow_redirects=False) as c:
        yield c, clock


def sign_in(c: TestClient, who: str, next_path: str = "/") -> object:
    return c.post(
        "/login",
        content=f"token={SECRETS[who]}&next={next_path}",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )


def test_pages_redirect_to_sign_in_and_static_files_stay_open(
    protected: tuple[TestClient, object],
) -> None:
    c, _ = protected
    c.cookies.clear()
    for path in PAGES:
        r = c.get(path)
        assert r.status_code == 303, path
        assert unquote(r.headers["location"]) == f"/login?next={path}"
    r = c.get("/demand", params={"window": "3d"})
    assert unquote(r.headers["location"]) == "/login?next=/demand?window=3d"
    assert c.get("/static/dash.css").status_code == 200
    form = c.get("/login", params={"next": "/models"})
    assert form.status_code == 200
    assert 'name="token"' in form.text and 'value="/models"' in form.text
    # scripts can still read a page with a bearer token
    assert c.get("/models", headers=bearer("viewer")).status_code == 200


def test_refused_tokens_get_the_form_again_without_a_cookie(
    protected: tuple[TestClient, object],
) -> None:
    c, _ = protected
    c.cookies.clear()
    for body in (f"token={SECRETS['expired']}", "token=wrong-secret", "token=", "next=/"):
        r = c.post(
            "/login", content=body, headers={"Content-Type": "application/x-www-form-urlencoded"}
        )
        assert r.status_code == 401, body
        assert 'id="login-error"' in r.text and COOKIE not in r.headers.get("set-cookie", "")
        assert SECRETS["expired"] not in r.text
    assert c.get("/").status_code == 303


def test_a_session_reads_pages_and_api_but_never_approves(
    protected: tuple[TestClient, object],
) -> None:
    c, _ = protected
    c.cookies.clear()
    r = sign_in(c, "approver", "/capacity")
    assert r.status_code == 303 and r.headers["location"] == "/capacity"
    cookie = r.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "path=/" in cookie
    assert f"max-age={int(SESSION_TTL.total_seconds())}" in cookie
    assert SECRETS["approver"] not in r.headers["set-cookie"]
    for path in PAGES:
        page = c.get(path)
        assert page.status_code == 200, path
        assert "Sign out" in page.text
    assert c.get("/v1/failure/risk").status_code == 200  # reads accept the session
    plan_id = c.get("/v1/plans/latest").json()["plan_id"]
    approve = c.post(f"/v1/plans/{plan_id}/approve")
    assert approve.status_code == 401  # mutations need the bearer token itself
    out = c.post("/logout")
    assert out.status_code == 303 and out.headers["location"] == "/login"
    assert c.get("/").status_code == 303


def test_forged_or_expired_sessions_are_sent_to_sign_in(
    protected: tuple[TestClient, object],
) -> None:
    c, clock = protected
    c.cookies.clear()
    sign_in(c, "viewer")
    value = c.cookies[COOKIE]
    assert c.get("/").status_code == 200
    name, expiry, mac = value.split(".")
    c.cookies.set(COOKIE, f"{name}.{int(expiry) + 3600}.{mac}")
    assert c.get("/").status_code == 303
    c.cookies.set(COOKIE, value)
    clock.advance(SESSION_TTL + timedelta(minutes=1))  # type: ignore[attr-defined]
    try:
        assert c.get("/").status_code == 303
        assert c.get("/v1/failure/risk").status_code == 401
    finally:
        clock.advance(-(SESSION_TTL + timedelta(minutes=1)))  # type: ignore[attr-defined]


@pytest.mark.parametrize("value", ["a.1.é", "a.1.\xff", "é.é.é", "a.1.\u20ac"])
def test_a_cookie_that_is_not_ascii_is_no_session(
    protected: tuple[TestClient, object], value: str
) -> None:
    c, _ = protected
    c.cookies.clear()
    # The raw bytes a browser may send (HTTP clients refuse to build such a cookie).
    cookie = {"Cookie": f"{COOKIE}={value}".encode()}
    for path in PAGES:
        r = c.get(path, headers=cookie)
        assert r.status_code == 303 and r.headers["location"].startswith("/login"), path
    for path in ("/v1/failure/risk", "/v1/plans/latest", "/v1/failure/features"):
        r = c.get(path, headers=cookie)
        assert r.status_code == 401 and r.json()["field"] == "header.authorization", path
    assert c.get("/v1/failure/risk", headers={**cookie, **bearer("viewer")}).status_code == 200


@pytest.mark.parametrize(
    "target", ["//evil.example/x", "https://evil.example/", "/\\evil", "/%09/evil.example"]
)
def test_sign_in_only_redirects_to_this_server(
    protected: tuple[TestClient, object], target: str
) -> None:
    c, _ = protected
    r = sign_in(c, "viewer", target)
    assert r.status_code == 303 and r.headers["location"] == "/"


def test_open_reads_need_no_sign_in(served_workspace: Path, shared_data: Path) -> None:
    app = make_app(served_workspace, shared_data)
    with TestClient(app, follow_redirects=False) as c:
        assert c.get("/").status_code == 200
        page = c.get("/login")
        assert page.status_code == 200 and "no sign-in is needed" in page.text
        assert "Sign out" not in c.get("/").text
